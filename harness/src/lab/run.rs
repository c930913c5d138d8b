//! `roce lab run`: one command in each VM, the wire between them recorded.
use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;

use dissector::fields::Ctx;
use dissector::{frame, print, LinkType};

use super::client::{self, RunSession};
use super::control::{ExitStatus, Kind, WireFrame};
use super::fault::{self, Dir, Rule};
use super::state::{LabPaths, Vm};
use super::switch::RunReport;

pub const NO_ROCE_WARNING: &str = "no RoCE frames on the wire: traffic between two QPs on the same rxe device is looped back inside the driver and never reaches the wire; put the two ends in different VMs";

const FAULT_HELP: &str = "\
FAULT RULES (--fault, repeatable; or --faults FILE)
  A rule is an action, then key=value words. Rules only touch RoCE frames (UDP
  port 4791); the tools' TCP exchange passes untouched. Every rule that matches a
  frame applies, in order; `drop` ends the list.

  Actions:
    drop                      the frame is not delivered (recorded, with a comment)
    corrupt [at=OFF] [xor=B]  XOR one byte (default at=payload+0 xor=0xff); OFF is N,
                              ip+N, bth+N or payload+N. The ICRC is left wrong unless
                              icrc=fix; the IPv4 header checksum is always fixed.
    corrupt-icrc              invert the ICRC only
    ce                        set ECN to Congestion Experienced (IPv4 checksum fixed;
                              the ICRC stays valid: it masks the TOS byte)
    dup [copies=N]            deliver N extra copies (default 1)
    delay [ms=N]              hold the frame N ms (default 10)
    reorder [ms=N]            hold the frame until the next frame in the same
                              direction has passed (at most N ms, default 100)
  Match keys (all optional; all given must match):
    dir=a>b|b>a   qp=0x11 (destination QP)   op=send-only|ack|write-only|0x11|…
    psn=4 or psn=4-7
  Which matching frames:
    nth=N         only the N-th matching frame (nth=2 with psn=4: its retransmission)
    prob=P        each matching frame with probability P (seeded: --seed, or seed=S)
    limit=N       at most N times
  Examples:
    --fault 'drop dir=a>b op=send-only psn=1 nth=1'
    --fault 'drop dir=a>b qp=0x11 psn=4 nth=2'
    --fault 'ce dir=a>b op=write-only nth=3'
    --fault 'corrupt op=send-first at=payload+3'
    --fault 'drop prob=0.05' --seed 7
  A rule file (TOML):
    seed = 7
    [[rule]]
    action = \"drop\"
    dir = \"a>b\"
    psn = 4
    nth = 2

PLACEHOLDERS
  {a} and {b} in a command stand for the VMs' addresses (10.0.0.1, 10.0.0.2).

EXIT STATUS
  0 both commands succeeded; 1 a command failed; 124 a command timed out;
  2 bad fault rules; other errors (lab not up …) exit non-zero with a message.";

/// Run a command in VM a and one in VM b; record the wire between them.
#[derive(Debug, Args)]
#[command(after_long_help = FAULT_HELP, after_help = "See `roce lab run --help` for the fault rule syntax.")]
pub struct RunArgs {
    /// Command for VM a (the server side: started first)
    #[arg(long = "a", value_name = "CMD")]
    pub a: Option<String>,
    /// Command for VM b (started once a is ready: listening, or after --delay)
    #[arg(long = "b", value_name = "CMD")]
    pub b: Option<String>,
    /// Write the run's wire to this pcapng file (interfaces `a` and `b` = sender)
    #[arg(short = 'w', long = "write", value_name = "FILE.pcapng")]
    pub write: Option<PathBuf>,
    /// Kill both commands after this many seconds
    #[arg(long, default_value_t = 120, value_name = "S")]
    pub timeout: u64,
    /// A fault rule (see below); repeat for several
    #[arg(long = "fault", value_name = "RULE")]
    pub fault: Vec<String>,
    /// Fault rules from a TOML file
    #[arg(long = "faults", value_name = "FILE")]
    pub faults: Option<PathBuf>,
    /// Seed for probabilistic rules
    #[arg(long)]
    pub seed: Option<u64>,
    /// Start b this many seconds after a instead of waiting until a listens
    #[arg(long, value_name = "S")]
    pub delay: Option<f64>,
    /// How long to wait for a to listen (TCP/UDP socket or rdma_cm id) before
    /// starting b anyway
    #[arg(long, default_value_t = 30, value_name = "S")]
    pub ready_timeout: u64,
    /// Print every frame on the wire as the switch carries it, decoded as `roce
    /// decode` prints it, tagged with its direction (`[a→b]`) and with what a fault
    /// rule did to it
    #[arg(long, conflicts_with = "json")]
    pub wire: bool,
    /// Do not echo the commands' output (it is still summarized)
    #[arg(long, short)]
    pub quiet: bool,
    /// Print the outcome as one JSON object on stdout (commands' output included,
    /// not echoed); warnings still go to stderr
    #[arg(long)]
    pub json: bool,
}

/// What a VM listens on: TCP and UDP sockets and rdma_cm ids in LISTEN state.
const LISTENERS: &str = "ss -Hltn 2>/dev/null; ss -Hlun 2>/dev/null; rdma resource show cm_id 2>/dev/null | grep -i listen; true";

/// Reads the run's fault rules (command line, then file) and the seed.
pub fn collect_rules(args: &RunArgs) -> std::result::Result<(Vec<Rule>, u64), fault::RuleError> {
    rules_from(&args.fault, args.faults.as_deref(), args.seed)
}

/// Fault rules from `--fault` texts, then a `--faults` file; the seed from
/// `--seed`, else the file's, else 1.
pub fn rules_from(
    texts: &[String],
    file: Option<&std::path::Path>,
    seed_arg: Option<u64>,
) -> std::result::Result<(Vec<Rule>, u64), fault::RuleError> {
    let mut rules = super::switch::parse_rules(texts)?;
    let mut seed = None;
    if let Some(f) = file {
        let text = std::fs::read_to_string(f).map_err(|e| fault::RuleError {
            input: String::new(),
            span: 0..0,
            message: format!("cannot read the rule file: {e}"),
            hint: None,
            origin: Some(f.display().to_string()),
        })?;
        let (more, s) = fault::parse_rules_toml(&text, f)?;
        rules.extend(more);
        seed = s;
    }
    Ok((rules, seed_arg.or(seed).unwrap_or(1)))
}

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
pub struct Outcome {
    pub sides: Vec<Side>,
    pub report: RunReport,
    pub wall: Duration,
    pub waited_for_listen: Option<Duration>,
    pub notes: Vec<String>,
}

impl Outcome {
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
        let tag = if i == 0 { format!("[{}] ", self.vm.name()) } else { format!("[{}!] ", self.vm.name()) };
        super::write_fd(1, format!("{tag}{text}\n").as_bytes());
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
    Ok(out.lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).filter(|l| !l.is_empty()).collect())
}

fn start_side(paths: &LabPaths, vm: Vm, cmd: String, timeout: Duration, echo: bool) -> mpsc::Receiver<Result<Side>> {
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
pub fn execute(paths: &LabPaths, args: &RunArgs, rules: &[Rule], seed: u64) -> Result<Outcome> {
    if args.a.is_none() && args.b.is_none() {
        bail!("nothing to run: give --a CMD and/or --b CMD");
    }
    super::daemon::refresh_share(paths)?;
    let pcap = match &args.write {
        Some(p) => {
            let abs = super::absolute(p)?;
            if let Some(d) = abs.parent() {
                std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            }
            Some(abs.display().to_string())
        }
        None => None,
    };
    let start = Instant::now();
    let deadline = start + Duration::from_secs(args.timeout);
    let echo = !args.quiet && !args.json;
    let mut notes = Vec::new();
    // Before the run: what a already listens on (the wire is not recorded yet, and
    // this traffic is on the control channel anyway).
    let baseline = match (&args.a, &args.b, args.delay) {
        (Some(_), Some(_), None) => Some(listeners(paths, Vm::A)?),
        _ => None,
    };
    let on_wire = args.wire.then(|| {
        let mut p = WirePrinter::default();
        Box::new(move |w: WireFrame| super::write_fd(1, p.line(&w).as_bytes())) as client::OnWire
    });
    let session = RunSession::begin(paths, pcap, rules.iter().map(|r| r.to_string()).collect(), seed, on_wire)?;
    let mut waits = Vec::new();
    let mut waited_for_listen = None;
    let mut a_rx = None;
    if let Some(a) = &args.a {
        a_rx = Some(start_side(paths, Vm::A, substitute(a), Duration::from_secs(args.timeout), echo));
    }
    if let Some(b) = &args.b {
        if let Some(rx) = &a_rx {
            let t0 = Instant::now();
            match (args.delay, &baseline) {
                (Some(d), _) => thread::sleep(Duration::from_secs_f64(d.max(0.0))),
                (None, Some(base)) => {
                    let until = (t0 + Duration::from_secs(args.ready_timeout)).min(deadline);
                    loop {
                        // a finished (or failed) before listening: b goes anyway.
                        if let Ok(r) = rx.try_recv() {
                            let side = r?;
                            notes.push(format!("VM a's command ended ({}) before b started", side.status.describe()));
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
                                args.ready_timeout
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
    let report = session.end()?;
    let mut sides: Vec<Side> = waits.into_iter().collect::<Result<_>>()?;
    sides.sort_by_key(|s| s.vm.index());
    Ok(Outcome { sides, report, wall: start.elapsed(), waited_for_listen, notes })
}

/// Decodes the live wire into `roce decode`'s lines, numbered from the run's start.
#[derive(Default)]
struct WirePrinter {
    number: u64,
    first_ts: Option<u64>,
    prev_ts: u64,
    opts: frame::Options,
    text: String,
}

impl WirePrinter {
    fn line(&mut self, w: &WireFrame) -> &str {
        self.number += 1;
        let first = *self.first_ts.get_or_insert(w.ts_ns);
        let fr = frame::decode(LinkType::ETHERNET, &w.data, &self.opts);
        let ctx = Ctx {
            number: self.number,
            ts_ns: w.ts_ns,
            first_ts_ns: first,
            prev_ts_ns: if self.number == 1 { w.ts_ns } else { self.prev_ts },
            orig_len: w.data.len() as u32,
            interface: w.sender.index() as u32,
            data: &w.data,
            frame: &fr,
            comment: w.comment.as_deref(),
        };
        self.prev_ts = w.ts_ns;
        self.text.clear();
        self.text.push_str(match w.sender {
            Dir::AtoB => "[a→b]",
            Dir::BtoA => "[b→a]",
        });
        print::line(&ctx, &mut self.text);
        self.text.push('\n');
        &self.text
    }
}

/// What a careful reader of the run must be told.
pub fn warnings(o: &Outcome) -> Vec<String> {
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
        let keep = if r.capture.is_some() { "the capture has them all" } else { "add -w FILE.pcapng to keep them all" };
        w.push(format!("{} frame(s) were not printed: the terminal fell behind the wire ({keep})", r.live_skipped));
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

pub fn to_json(o: &Outcome) -> serde_json::Value {
    serde_json::json!({
        "ok": o.success(),
        "wall_ms": o.wall.as_millis() as u64,
        "waited_for_listen_ms": o.waited_for_listen.map(|d| d.as_millis() as u64),
        "sides": o.sides.iter().map(|s| serde_json::json!({
            "vm": s.vm.name(), "cmd": s.cmd, "status": s.status, "stdout": s.stdout, "stderr": s.stderr,
        })).collect::<Vec<_>>(),
        "report": o.report,
        "capture_complete": o.report.counters.capture_complete() && o.report.socket_drops == 0 && o.report.capture_error.is_none(),
        "notes": o.notes,
        "warnings": warnings(o),
    })
}

pub fn print_report(o: &Outcome) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "── run finished in {:.1} s", o.wall.as_secs_f64());
    if let Some(w) = o.waited_for_listen {
        let _ = writeln!(out, "   b started {:.1} s after a (when a was listening)", w.as_secs_f64());
    }
    for s in &o.sides {
        let _ = writeln!(out, "   VM {}: {}  ({})", s.vm.name(), s.status.describe(), s.cmd);
    }
    let r = &o.report;
    let c = &r.counters;
    let _ = writeln!(out, "   switch: {}", c.summary());
    for rule in &r.rules {
        let _ = writeln!(out, "   rule `{}`: matched {}, applied {}", rule.rule, rule.matched, rule.applied);
    }
    if let Some(p) = &r.capture {
        let complete = c.capture_complete() && r.socket_drops == 0 && r.capture_error.is_none();
        let _ = writeln!(
            out,
            "   capture: {p}: {} frames ({})",
            c.recorded,
            if complete { "complete: every frame the switch saw".to_string() } else { "INCOMPLETE".to_string() }
        );
    }
    for n in &o.notes {
        let _ = writeln!(out, "   note: {n}");
    }
    drop(out);
    for w in warnings(o) {
        eprintln!("warning: {w}");
    }
    for s in &o.sides {
        if !s.status.success() && !s.stderr.trim().is_empty() {
            let tail: Vec<&str> = s.stderr.trim_end().lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect();
            eprintln!("VM {} stderr (last lines):\n  {}", s.vm.name(), tail.join("\n  "));
        }
    }
}

pub fn run(paths: &LabPaths, args: RunArgs) -> Result<u8> {
    let (rules, seed) = match collect_rules(&args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(2);
        }
    };
    let o = execute(paths, &args, &rules, seed)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&o))?);
        for w in warnings(&o) {
            eprintln!("warning: {w}");
        }
    } else {
        print_report(&o);
    }
    Ok(if o.success() {
        0
    } else if o.sides.iter().any(|s| s.status.timed_out) {
        124
    } else {
        1
    })
}
