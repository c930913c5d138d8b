//! A recorded two-VM run (`roce lab run`): one command in each VM, the wire
//! between them recorded, the switch's fault rules applied.
//!
//! Owns: a run from plan to outcome (both sides' output and status, the switch's
//! report). Imports: [`client`] (the session with the daemon),
//! [`control`](super::control), [`fault`](super::fault), [`state`](super::state) and
//! [`switch`](super::switch)'s `RunReport`; [`progress`](super::progress) to echo output.
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::client::{self, RunSession};
use super::control::{ExitStatus, Kind};
use super::fault::Rule;
use super::state::{LabPaths, Vm};
use super::switch::RunReport;

pub const NO_ROCE_WARNING: &str = "no RoCE frames on the wire: traffic between two QPs on the same rxe device is looped back inside the driver and never reaches the wire; put the two ends in different VMs";

/// A recorded two-VM run: what to run where, and what the switch does meanwhile.
pub struct RunPlan {
    /// Command for VM a (started first) and for VM b (started once a listens, or
    /// after `delay`). `{a}` and `{b}` stand for the VMs' addresses.
    pub a: Option<String>,
    pub b: Option<String>,
    /// Where the run's wire is written (pcapng, interfaces `a` and `b` = sender).
    pub write: Option<PathBuf>,
    /// Both commands are killed after this long.
    pub timeout: Duration,
    /// Fault rules, parsed, in order; and the seed of their random numbers.
    pub rules: Vec<Rule>,
    pub seed: u64,
    /// Start b this long after a instead of waiting until a listens.
    pub delay: Option<Duration>,
    /// How long to wait for a to listen before starting b anyway.
    pub ready_timeout: Duration,
    /// Echo the commands' output as it comes, each line tagged `[a]`/`[b]`.
    pub echo: bool,
    /// Every frame the switch carries, as it carries it (never blocking the wire).
    pub on_wire: Option<client::OnWire>,
}

/// What a VM listens on: TCP and UDP sockets and rdma_cm ids in LISTEN state.
const LISTENERS: &str = "ss -Hltn 2>/dev/null; ss -Hlun 2>/dev/null; rdma resource show cm_id 2>/dev/null | grep -i listen; true";

pub fn substitute(cmd: &str) -> String {
    cmd.replace("{a}", Vm::A.ip()).replace("{b}", Vm::B.ip())
}

/// One VM's side of a run.
pub struct Side {
    pub vm: Vm,
    pub cmd: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Everything a run produced.
pub struct RunOutput {
    pub sides: Vec<Side>,
    pub report: RunReport,
    pub wall: Duration,
    pub waited_for_listen: Option<Duration>,
    pub notes: Vec<String>,
    /// What each VM's kernel reported during the run (oops, BUG, WARNING, KASAN,
    /// lockups, panic), in order, without the console's timestamps.
    pub kernel: Vec<KernelSaid>,
}

pub use super::state::KernelSaid;

impl RunOutput {
    pub fn success(&self) -> bool {
        self.sides.iter().all(|s| s.status.success())
    }
}

/// Prints complete lines with a `[a] ` prefix as they come.
struct Prefixer {
    vm: Vm,
    echo: bool,
    partial: [Vec<u8>; 2],
    all: [Vec<u8>; 2],
}

impl Prefixer {
    fn feed(&mut self, kind: Kind, data: &[u8]) {
        let i = usize::from(kind != Kind::Stdout);
        self.all[i].extend_from_slice(data);
        if !self.echo {
            return;
        }
        self.partial[i].extend_from_slice(data);
        while let Some(n) = self.partial[i].iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial[i].drain(..=n).collect();
            self.emit(i, &line);
        }
    }
    fn emit(&self, i: usize, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches('\n');
        let tag = if i == 0 {
            format!("[{}] ", self.vm.name())
        } else {
            format!("[{}!] ", self.vm.name())
        };
        crate::progress::to_stdout(format!("{tag}{text}\n").as_bytes());
    }
    fn finish(mut self) -> (String, String) {
        for i in 0..2 {
            if self.echo && !self.partial[i].is_empty() {
                let rest = std::mem::take(&mut self.partial[i]);
                self.emit(i, &rest);
            }
        }
        let [o, e] = self.all;
        (String::from_utf8_lossy(&o).into_owned(), String::from_utf8_lossy(&e).into_owned())
    }
}

fn listeners(paths: &LabPaths, vm: Vm) -> Result<BTreeSet<String>> {
    let (st, out, err) = client::exec_capture(paths, vm, LISTENERS, Duration::from_secs(20))?;
    if !st.success() {
        bail!("listing VM {}'s listeners failed: {} {}", vm.name(), st.describe(), err.trim());
    }
    Ok(out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect())
}

fn start_side(
    paths: &LabPaths,
    vm: Vm,
    cmd: String,
    timeout: Duration,
    echo: bool,
) -> mpsc::Receiver<Result<Side>> {
    let (tx, rx) = mpsc::channel();
    let paths = paths.clone();
    thread::spawn(move || {
        let mut pre = Prefixer { vm, echo, partial: Default::default(), all: Default::default() };
        let r = client::exec(&paths, vm, &cmd, timeout, &mut |k, d| pre.feed(k, d));
        let (stdout, stderr) = pre.finish();
        let _ = tx.send(r.map(|status| Side { vm, cmd, status, stdout, stderr }));
    });
    rx
}

/// Runs the commands and ends the run; the caller prints.
pub fn execute(paths: &LabPaths, args: RunPlan) -> Result<RunOutput> {
    if args.a.is_none() && args.b.is_none() {
        bail!("nothing to run: give --a CMD and/or --b CMD");
    }
    super::daemon::refresh_share(paths)?;
    let pcap = match &args.write {
        Some(p) => {
            let abs = super::state::absolute(p)?;
            if let Some(d) = abs.parent() {
                std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            }
            Some(abs.display().to_string())
        }
        None => None,
    };
    let start = Instant::now();
    let deadline = start + args.timeout;
    let echo = args.echo;
    let mut notes = Vec::new();
    // Before the run: what a already listens on (the wire is not recorded yet, and
    // this traffic is on the control channel anyway).
    let baseline = match (&args.a, &args.b, args.delay) {
        (Some(_), Some(_), None) => Some(listeners(paths, Vm::A)?),
        _ => None,
    };
    let session = RunSession::begin(paths, pcap, args.rules, args.seed, args.on_wire, None)?;
    // What the consoles said before the run is not the run's.
    let mut consoles = super::state::KernelWatch::from_end(paths);
    let mut waits = Vec::new();
    let mut waited_for_listen = None;
    let mut a_rx = None;
    if let Some(a) = &args.a {
        a_rx = Some(start_side(paths, Vm::A, substitute(a), args.timeout, echo));
    }
    if let Some(b) = &args.b {
        if let Some(rx) = &a_rx {
            let t0 = Instant::now();
            match (args.delay, &baseline) {
                (Some(d), _) => thread::sleep(d),
                (None, Some(base)) => {
                    let until = (t0 + args.ready_timeout).min(deadline);
                    loop {
                        // a finished (or failed) before listening: b goes anyway.
                        if let Ok(r) = rx.try_recv() {
                            let side = r?;
                            notes.push(format!(
                                "VM a's command ended ({}) before b started",
                                side.status.describe()
                            ));
                            waits.push(Ok(side));
                            break;
                        }
                        let now = listeners(paths, Vm::A)?;
                        if now.difference(base).next().is_some() {
                            waited_for_listen = Some(t0.elapsed());
                            break;
                        }
                        if Instant::now() >= until {
                            notes.push(format!(
                                "VM a was not listening after {} s (no new TCP/UDP socket or rdma_cm id); started b anyway",
                                args.ready_timeout.as_secs()
                            ));
                            break;
                        }
                        thread::sleep(Duration::from_millis(200));
                    }
                }
                (None, None) => {}
            }
        }
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_secs(1));
        let rx = start_side(paths, Vm::B, substitute(b), left, echo);
        waits.push(rx.recv().map_err(|_| anyhow::anyhow!("lost VM b's command"))?);
    }
    if let Some(rx) = a_rx {
        if waits.iter().all(|w| w.as_ref().map(|s| s.vm != Vm::A).unwrap_or(true)) {
            waits.push(rx.recv().map_err(|_| anyhow::anyhow!("lost VM a's command"))?);
        }
    }
    let kernel = consoles.reports();
    // A run the lab did not live through still says what the kernels said.
    let said = |e: anyhow::Error| {
        kernel.iter().fold(e, |e, k| e.context(format!("VM {}'s kernel: {}", k.vm.name(), k.line)))
    };
    let report = session.end().map_err(said)?;
    let mut sides: Vec<Side> = waits.into_iter().collect::<Result<_>>().map_err(said)?;
    sides.sort_by_key(|s| s.vm.index());
    Ok(RunOutput { sides, report, wall: start.elapsed(), waited_for_listen, notes, kernel })
}

/// What a careful reader of the run must be told.
pub fn warnings(o: &RunOutput) -> Vec<String> {
    let r = &o.report;
    let c = &r.counters;
    let mut w = Vec::new();
    if let Some(e) = &r.capture_error {
        w.push(format!("the capture is incomplete: {e}"));
    }
    if r.socket_drops > 0 {
        w.push(format!(
            "the kernel dropped {} datagram(s) on the wire's sockets during the run (receive buffers full)",
            r.socket_drops
        ));
    }
    if r.live_skipped > 0 {
        let keep = if r.capture.is_some() {
            "the capture has them all"
        } else {
            "add -w FILE.pcapng to keep them all"
        };
        w.push(format!(
            "{} frame(s) were not printed: the terminal fell behind the wire ({keep})",
            r.live_skipped
        ));
    }
    if c.send_errors > 0 {
        w.push(format!("the switch could not forward {} frame(s)", c.send_errors));
    }
    if c.roce == 0 {
        w.push(NO_ROCE_WARNING.to_string());
    } else {
        for rule in r.rules.iter().filter(|r| r.matched == 0) {
            w.push(format!("fault rule `{}` matched no frame", rule.rule));
        }
    }
    w
}

/// One word per argument, quoted for sh where needed; a single argument is taken
/// as a shell command line as it is.
pub fn shell_join(args: &[String]) -> String {
    if args.len() == 1 {
        return args[0].clone();
    }
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
