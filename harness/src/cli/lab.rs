//! `roce lab …`: the options of each lab command, turned into calls of the `lab`
//! crate, and what it reports, printed.
//!
//! Owns: `roce lab`'s subcommands and options, and the printing of what the lab
//! reports. Imports: the `lab` crate (state, control, fault rules, runs, benches, …),
//! dissector's ctx, filter, frame and print for the wire it shows, `super::input`'s
//! display filter, `super::run`'s scenario benches, `super::exit`.
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use dissector::ctx::Ctx;
use dissector::filter::Filter;
use dissector::{frame, print, LinkType};
use lab::control::{self, WireFrame};
use lab::fault::{self, Dir};
use lab::state::{LabPaths, Vm};
use lab::{client, Accel, Progress, UpOpts};

use super::exit::{help, CommandResult, Exit, Failure};

/// Two Soft-RoCE VMs joined by a recording, fault-injecting switch.
#[derive(Debug, Args)]
#[command(
    after_help = "Typical use:\n  roce lab build                # once: the VM image (~2 min, cached)\n  roce lab up                   # boot the pair (kept up for many runs)\n  roce lab run --a 'ibv_rc_pingpong -g 1' --b 'ibv_rc_pingpong -g 1 {a}' -w rc.pcapng\n  roce lab down\nThe second setup (Linux 6.12, rdma-core 56), a lab of its own named `trixie`:\n  roce lab build --release trixie\n  roce lab up --image trixie    # `roce run/suite --image trixie` use it\n  roce lab down --image trixie\nThe third (trixie's rdma-core 56 under the Linux 7.x of trixie-backports), lab `trixie-backports`:\n  roce lab build --release trixie-backports\n  roce lab up --image trixie-backports"
)]
pub struct LabArgs {
    /// Cache directory: the image and every lab's state [default: $ROCE_LAB_DIR or ~/.cache/roce/lab]
    #[arg(long, global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Which lab (several can run side by side) [default: $ROCE_LAB_NAME, else the
    /// image's own lab: `default` for bookworm, else the image's name]
    #[arg(long, global = true, value_name = "NAME")]
    pub name: Option<String>,
    /// The VM image: bookworm (Debian 12: Linux 6.1, rdma-core 44), trixie (Debian
    /// 13: Linux 6.12, rdma-core 56) or trixie-backports (Debian 13 with the
    /// backports kernel: Linux 7.x, rdma-core 56) [default: bookworm]
    #[arg(long, global = true, alias = "release", value_name = "bookworm|trixie|trixie-backports")]
    pub image: Option<lab::image::Release>,
    #[command(subcommand)]
    pub command: LabCommand,
}

fn parse_accel(s: &str) -> Result<Accel, String> {
    s.parse()
}

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Build a VM image (Debian + rdma-core + perftest; `--release trixie` or
    /// `--release trixie-backports` for the others), unless an up-to-date one is
    /// cached
    Build {
        /// Debian mirror [default: the one the host's apt uses]
        #[arg(long, value_name = "URL")]
        mirror: Option<String>,
        /// Rebuild even if the cached image is up to date
        #[arg(long)]
        force: bool,
    },
    /// Boot the two VMs and keep them up; waits until rxe0 is ACTIVE on both
    #[command(after_help = help(&[(Exit::Ok, "the lab is up"), (Exit::BadInput, "bad fault rules"), (Exit::Setup, "no image, or the lab did not boot")]))]
    Up {
        /// auto (KVM if it works here, else TCG), kvm or tcg
        #[arg(long, value_parser = parse_accel, default_value = "auto", value_name = "auto|kvm|tcg")]
        accel: Accel,
        /// Give up booting after this many seconds
        #[arg(long, default_value_t = 300, value_name = "S")]
        boot_timeout: u64,
        /// Stop the lab after this many idle minutes (0 = never)
        #[arg(long, default_value_t = 120, value_name = "MIN")]
        idle_timeout: u64,
        /// A standing fault rule, applied to all traffic while the lab is up (every
        /// run's own rules come after it); repeat for several. Syntax: `roce lab run --help`
        #[arg(long = "fault", value_name = "RULE")]
        fault: Vec<String>,
        /// Standing fault rules from a TOML file
        #[arg(long = "faults", value_name = "FILE")]
        faults: Option<PathBuf>,
        /// Seed for probabilistic standing rules
        #[arg(long)]
        seed: Option<u64>,
        /// What joins the VMs' test NICs: `udp` (sockets on 127.0.0.1 and the
        /// lab's switch, no privileges), `tap` (a host tap interface per VM, the
        /// switch on each through AF_PACKET, as `roce bridge` on two NIC ports;
        /// needs root) or `bench` (two taps with nothing between them, for a
        /// `roce bridge` of yours, and each VM's agent listening on a management
        /// link of its own, as on two real hosts; needs root and --key-file)
        /// [default: as the lab was last defined, else udp]
        #[arg(long, value_parser = parse_wire, value_name = "udp|tap|bench")]
        wire: Option<lab::tap::WireKind>,
        /// With --wire bench: the key the VMs' agents are started with (`roce
        /// agent --gen-key FILE`); controllers and the bridge take the same
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
    },
    /// Stop the VMs
    Down,
    /// Is the lab up? Boot time, VMs, switch counters
    #[command(after_help = help(&[(Exit::Ok, "the lab is up (with --all: some lab is)"), (Exit::Setup, "it is not up")]))]
    Status {
        /// Machine-readable output
        #[arg(long)]
        json: bool,
        /// Every lab under --dir
        #[arg(long)]
        all: bool,
    },
    /// Run a command in VM a or b; streams its output and returns its exit status
    Exec {
        /// a or b
        #[arg(value_parser = parse_vm)]
        vm: Vm,
        /// Kill the command after this many seconds (exit status 124)
        #[arg(long, default_value_t = 60, value_name = "S")]
        timeout: u64,
        /// Pass this process's stdin to the command (like `docker exec -i`);
        /// otherwise the command's stdin is /dev/null
        #[arg(short, long)]
        interactive: bool,
        /// The command (run by sh -c in the VM)
        #[arg(last = true, required = true, value_name = "CMD")]
        cmd: Vec<String>,
    },
    /// Run a command in each VM and record exactly that run's wire
    Run(RunArgs),
    /// Measure: image build time, boot time, one run's wall time, switch frames/s, scenarios/min
    Bench(BenchArgs),
    /// (inside a lab VM) the command agent on the virtio-serial port
    #[command(hide = true)]
    Agent {
        #[arg(long)]
        port: Option<PathBuf>,
    },
    /// (internal) the lab daemon that `up` starts
    #[command(name = "__daemon", hide = true)]
    Daemon {
        #[arg(long)]
        lock_fd: Option<i32>,
        #[arg(long, value_parser = parse_accel, default_value = "auto")]
        accel: Accel,
        #[arg(long, default_value_t = 120)]
        idle_timeout: u64,
        #[arg(long, default_value_t = 300)]
        boot_timeout: u64,
        /// Standing fault rules, as `up` parsed them (JSON)
        #[arg(long = "rules-json")]
        rules_json: Option<String>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, value_parser = parse_wire, default_value = "udp")]
        wire: lab::tap::WireKind,
        /// The lab directory (so stale-process checks can recognise us)
        #[arg(long)]
        lab_dir: Option<PathBuf>,
    },
}

fn parse_wire(s: &str) -> Result<lab::tap::WireKind, String> {
    lab::tap::WireKind::parse(s)
        .ok_or_else(|| format!("`{s}`: the wire is `udp`, `tap` or `bench`"))
}

fn parse_vm(s: &str) -> Result<Vm, String> {
    Vm::parse(s).ok_or_else(|| format!("`{s}` is not a lab VM: use a or b"))
}

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
    respond with=R reply-qp=Q answer a request in the responder's place: the switch
                              sends the requester (QP Q) a response it builds, with
                              the request's PSN (rpsn=+N|-N moves it), the MSN the
                              responder would report (msn=N overrides) and a valid
                              ICRC. R is one of:
                                ack [credits=0..31]   (31: no credit limit)
                                nak code=psn_sequence_error|invalid_request|
                                    remote_access_error|remote_operational_error
                                rnr timer=T or timer=A-B (one code per application)
                                read-response [len=N] [fill=B]  (one READ Response
                                    Only; default: the request's DMA length)
                                atomic-ack [orig=V]
                              real=keep (default: the real answer goes too, later),
                              withhold (the responder acts, its answer is held back)
                              or lost (the request never reaches the responder).
                              Scenarios fill reply-qp in from `qp` and `from`.
  Match keys (all optional; all given must match):
    dir=a>b|b>a   qp=0x11 (destination QP)   op=send-only|ack|write-only|0x11|…
    psn=4 or psn=4-7
  Which matching frames:
    nth=N         only the N-th frame (from 1) that matches every match key given,
                  counted per rule; a response carries its request's PSN, so
                  dir=a>b op=write-only psn=4 nth=2 is that WRITE's resend, while
                  psn=4 nth=2 alone may be the ACK of PSN 4
    prob=P        each matching frame with probability P (seeded: --seed, or seed=S)
    limit=N       at most N times
  Examples:
    --fault 'drop dir=a>b op=send-only psn=1 nth=1'
    --fault 'drop dir=a>b qp=0x11 psn=4 nth=2'
    --fault 'ce dir=a>b op=write-only nth=3'
    --fault 'corrupt op=send-first at=payload+3'
    --fault 'drop prob=0.05' --seed 7
    --fault 'respond dir=a>b op=write-only nth=1 with=nak code=invalid_request real=withhold reply-qp=0x11'
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
  0   both commands succeeded
  1   a command failed
  124 a command timed out
  2   bad fault rules
  3   the lab is not up, or the run could not be started";

/// Run a command in VM a and one in VM b; record the wire between them.
#[derive(Debug, Args)]
#[command(after_long_help = FAULT_HELP, after_help = "See `roce lab run --help` for the fault rule syntax and exit codes.")]
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
    /// With --wire: print only the frames this display filter keeps (Wireshark's
    /// syntax, as `roce decode -Y`)
    #[arg(short = 'Y', long = "display-filter", value_name = "FILTER", requires = "wire")]
    pub display_filter: Option<String>,
    /// Do not echo the commands' output (it is still summarized)
    #[arg(long, short)]
    pub quiet: bool,
    /// Print the outcome as one JSON object on stdout (commands' output included,
    /// not echoed); warnings still go to stderr
    #[arg(long)]
    pub json: bool,
}

/// Measure the lab (boots its own lab `<name>-bench`, takes it down after).
#[derive(Debug, Args)]
#[command(after_help = help(&[(Exit::Ok, "measured, and the switch lost no frame"), (Exit::Failed, "the switch lost frames"), (Exit::Setup, "the lab could not be built, booted or run")]))]
pub struct BenchArgs {
    /// Messages for the ib_write_bw throughput run
    #[arg(long, default_value_t = 5000)]
    pub writes: u32,
    /// Message size for the ib_write_bw run
    #[arg(long, default_value_t = 64)]
    pub size: u32,
    #[arg(long, value_parser = parse_accel, default_value = "auto", value_name = "auto|kvm|tcg")]
    pub accel: Accel,
    /// Scenarios to time on the booted lab (skipped if the directory is missing)
    #[arg(long, default_value = "scenarios", value_name = "DIR")]
    pub scenarios: PathBuf,
}

/// `roce lab …`.
pub(super) fn run(args: LabArgs, out: &mut dyn Write) -> CommandResult {
    let image = args.image.unwrap_or_default();
    let paths = lab::lab_paths(args.dir, args.name, image)?;
    match args.command {
        LabCommand::Build { mirror, force } => {
            let p = Progress::new(false);
            let (img, built) = lab::image::build(
                &lab::image::BuildOpts { root: paths.root.clone(), release: image, mirror, force },
                &p,
            )?;
            let what = format!(
                "{image} (kernel {}, {})",
                img.manifest.kernel_release,
                img.manifest.describe_versions()
            );
            if !built {
                writeln!(
                    out,
                    "lab image {what} up to date: {} (built in {:.0} s; --force rebuilds)",
                    img.dir.display(),
                    img.manifest.build_secs
                )?;
            } else {
                writeln!(
                    out,
                    "lab image {what} built in {:.0} s: {}",
                    img.manifest.build_secs,
                    img.dir.display()
                )?;
            }
            Ok(Exit::Ok)
        }
        LabCommand::Up {
            accel,
            boot_timeout,
            idle_timeout,
            fault,
            faults,
            seed,
            wire,
            key_file,
        } => {
            let (rules, seed) =
                fault::rules_from(&fault, faults.as_deref(), seed).map_err(Failure::input)?;
            bench_key(&paths, wire, key_file.as_deref())?;
            let opts = UpOpts {
                image,
                accel,
                boot_timeout: Duration::from_secs(boot_timeout),
                idle_timeout_min: idle_timeout,
                rules,
                seed,
                wire,
            };
            let up = lab::up(&paths, &opts, &Progress::new(false))?;
            writeln!(out, "{}", up.describe(&paths))?;
            Ok(Exit::Ok)
        }
        LabCommand::Down => {
            let d = lab::down(&paths)?;
            match (d.was_up, d.uptime_s) {
                (false, _) => writeln!(out, "lab `{}` is not up", paths.name)?,
                (true, Some(s)) => {
                    writeln!(out, "lab `{}` down (was up {}m{:02}s)", paths.name, s / 60, s % 60)?
                }
                (true, None) => writeln!(out, "lab `{}` down", paths.name)?,
            }
            for c in d.cleaned {
                writeln!(out, "  cleaned up after a crashed lab: {c}")?;
            }
            Ok(Exit::Ok)
        }
        LabCommand::Status { json, all } => status(&paths, json, all, out),
        LabCommand::Exec { vm, timeout, interactive, cmd } => {
            lab::daemon::refresh_share(&paths)?;
            let cmd = lab::shell_join(&cmd);
            let timeout_d = Duration::from_secs(timeout);
            let st = if interactive {
                exec_interactive(&paths, vm, &cmd, timeout_d)?
            } else {
                client::exec(&paths, vm, &cmd, timeout_d, &mut client::print_output)?
            };
            if st.timed_out {
                eprintln!(
                    "roce lab exec: `{cmd}` in VM {} timed out after {timeout} s (killed)",
                    vm.name()
                );
            } else if let Some(e) = &st.error {
                eprintln!("roce lab exec: {e}");
            }
            Ok(Exit::Command(st.shell_code()))
        }
        LabCommand::Run(a) => lab_run(&paths, a, out),
        LabCommand::Bench(a) => bench(&paths, image, a, out),
        LabCommand::Agent { port } => {
            lab::guest::run(port)?;
            Ok(Exit::Ok)
        }
        LabCommand::Daemon {
            lock_fd,
            accel,
            idle_timeout,
            boot_timeout,
            rules_json,
            seed,
            wire,
            lab_dir: _,
        } => {
            let standing_rules = match rules_json {
                Some(j) => serde_json::from_str(&j).map_err(Failure::input)?,
                None => Vec::new(),
            };
            lab::daemon::run(lab::daemon::DaemonOpts {
                paths,
                image,
                accel,
                lock_fd,
                idle_timeout: (idle_timeout > 0).then(|| Duration::from_secs(idle_timeout * 60)),
                boot_timeout: Duration::from_secs(boot_timeout),
                standing_rules,
                standing_seed: seed,
                wire,
            })?;
            Ok(Exit::Ok)
        }
    }
}

/// A bench's agents' key, checked and put in the share for the VMs (before they
/// boot: their agents read it when they start).
fn bench_key(
    paths: &LabPaths,
    wire: Option<lab::tap::WireKind>,
    key_file: Option<&std::path::Path>,
) -> Result<(), Failure> {
    let bench = wire == Some(lab::tap::WireKind::Bench);
    let dst = paths.share().join(lab::guest::BENCH_KEY);
    let Some(f) = key_file else {
        if bench && !dst.exists() {
            return Err(Failure::input(anyhow::anyhow!("roce lab up --wire bench: the VMs' agents need a key\nhint: roce agent --gen-key bench.key, then add --key-file bench.key")));
        }
        return Ok(());
    };
    if !bench {
        return Err(Failure::input(anyhow::anyhow!(
            "roce lab up: --key-file is for a bench's agents (--wire bench)"
        )));
    }
    crate::agent::auth::Key::load(f).map_err(Failure::input)?;
    let key =
        std::fs::read(f).map_err(|e| Failure::input(anyhow::anyhow!("{}: {e}", f.display())))?;
    if paths.is_running() {
        if std::fs::read(&dst).ok().as_deref() == Some(&key[..]) {
            return Ok(());
        }
        return Err(Failure::input(anyhow::anyhow!("lab `{}` is up with another key: its agents keep the one they started with\nhint: roce lab --name {} down, then up again", paths.name, paths.name)));
    }
    lab::daemon::put_bench_key(paths, &key).map_err(Failure::setup)
}

/// `roce lab exec -i`: our stdin to the command, its stdout to ours.
fn exec_interactive(
    paths: &LabPaths,
    vm: Vm,
    cmd: &str,
    timeout: Duration,
) -> anyhow::Result<control::ExitStatus> {
    let on_stderr = Box::new(|d: &[u8]| client::print_output(control::Kind::Stderr, d));
    let mut x = client::ExecStdio::start(paths, vm, cmd, timeout, on_stderr)?;
    let mut stdin = x.stdin()?;
    // Detached: a read of our stdin cannot be interrupted; the process exits anyway.
    std::thread::spawn(move || {
        if std::io::copy(&mut std::io::stdin().lock(), &mut stdin).is_ok() {
            let _ = stdin.close();
        }
    });
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = std::io::Read::read(&mut x, &mut buf)?;
        if n == 0 {
            break;
        }
        client::print_output(control::Kind::Stdout, &buf[..n]);
    }
    Ok(x.status()
        .unwrap_or_else(|| control::ExitStatus::failed("the command's end was not reported")))
}

fn status(paths: &LabPaths, json: bool, all: bool, out: &mut dyn Write) -> CommandResult {
    let labs: Vec<LabPaths> = if all { lab::all_labs(&paths.root) } else { vec![paths.clone()] };
    let mut any_up = false;
    let mut docs = Vec::new();
    for l in &labs {
        let st = lab::status(l);
        any_up |= st.is_some();
        if json {
            // A lab that is down still has its state (logs, the last consoles).
            docs.push(st.unwrap_or_else(|| {
                serde_json::json!({"name": l.name, "phase": "down", "dir": l.dir.display().to_string()})
            }));
        } else {
            print_status(l, st.as_ref(), out)?;
        }
    }
    if json {
        let v = if all { serde_json::Value::Array(docs) } else { docs.pop().unwrap_or_default() };
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    }
    if labs.is_empty() && !json {
        writeln!(out, "no labs under {}", paths.root.join("labs").display())?;
    }
    Ok(if any_up { Exit::Ok } else { Exit::Setup })
}

fn print_status(
    l: &LabPaths,
    st: Option<&serde_json::Value>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let Some(st) = st else {
        let stale = l.daemon_pidfile().exists() || l.control_socket().exists();
        writeln!(
            out,
            "lab `{}`: down{}",
            l.name,
            if stale {
                " (stale state from a crashed lab; the next `up` or `down` cleans it)"
            } else {
                ""
            }
        )?;
        match lab::Definition::remembered(l) {
            Ok(Some(def)) if !def.rules.is_empty() => writeln!(
                out,
                "  the next boot brings back its {} standing fault rule(s) (seed {}); `roce lab down` forgets them",
                def.rules.len(),
                def.seed
            )?,
            Ok(_) => {}
            Err(e) => writeln!(out, "  {e:#}")?,
        }
        return Ok(());
    };
    let phase = st["phase"].as_str().unwrap_or("?");
    let up = st["uptime_s"].as_u64().unwrap_or(0);
    writeln!(
        out,
        "lab `{}`: {phase}, image {} (kernel {}), up {}m{:02}s, {}",
        l.name,
        st["image"].as_str().unwrap_or("?"),
        st["image_kernel"].as_str().unwrap_or("?"),
        up / 60,
        up % 60,
        st["accel"].as_str().unwrap_or("?")
    )?;
    if let Some(ms) = st["boot_ms"].as_u64() {
        writeln!(out, "  boot time: {:.1} s", ms as f64 / 1000.0)?;
    }
    if let Some(e) = st["error"].as_str() {
        writeln!(out, "  error: {e}")?;
    }
    if let Some(vms) = st["vms"].as_array() {
        for v in vms {
            writeln!(
                out,
                "  VM {}: {} qemu pid {} agent {}{}",
                v["vm"].as_str().unwrap_or("?"),
                v["ip"].as_str().unwrap_or("?"),
                v["qemu_pid"],
                if v["agent"].as_bool() == Some(true) { "up" } else { "down" },
                v["kernel"].as_str().map(|k| format!(", kernel {k}")).unwrap_or_default()
            )?;
        }
    }
    let ports = &st["ports"];
    fn pair(v: &serde_json::Value) -> Option<Vec<&str>> {
        v.as_array().map(|t| t.iter().filter_map(|n| n.as_str()).collect())
    }
    match (pair(&st["taps"]), pair(&st["agents_at"])) {
        (Some(t), Some(at)) if t.len() == 2 && at.len() == 2 => {
            writeln!(
                out,
                "  bench: host taps {} (VM a) and {} (VM b), nothing between them",
                t[0], t[1]
            )?;
            let key = st["agents_key"].as_str().unwrap_or("?");
            writeln!(out, "  agents (key {key}): --endpoints a={},b={}", at[0], at[1])?;
            writeln!(out, "  stand a bridge there: roce bridge --port {} --port {} --listen 127.0.0.1:PORT --key-file KEY", t[0], t[1])?;
        }
        (Some(t), _) if t.len() == 2 => writeln!(
            out,
            "  switch: between host taps {} (VM a) and {} (VM b), through AF_PACKET",
            t[0], t[1]
        )?,
        _ => writeln!(
            out,
            "  switch: 127.0.0.1 ports a={} b={} (VM sockets {} {})",
            ports["switch_a"], ports["switch_b"], ports["vm_a"], ports["vm_b"]
        )?,
    }
    if let Ok(c) = serde_json::from_value::<lab::switch::Counters>(st["counters"].clone()) {
        writeln!(out, "  counters since boot: {}", c.summary())?;
    }
    if let Ok(r) = serde_json::from_value::<lab::switch::RunReport>(st["last_run"].clone()) {
        writeln!(out, "  last run: {}", r.counters.summary())?;
    }
    let counts: Vec<lab::switch::RuleReport> =
        serde_json::from_value(st["standing_counts"].clone()).unwrap_or_default();
    for (i, rule) in st["standing_rules"].as_array().into_iter().flatten().enumerate() {
        let rule = rule.as_str().unwrap_or("?");
        write!(out, "  standing fault rule (seed {}): {rule}", st["standing_seed"])?;
        match counts.get(i).filter(|c| c.rule == rule) {
            Some(c) if c.matched > 0 => writeln!(
                out,
                " — matched {}, fired {} ({:.0} %) since boot",
                c.matched,
                c.applied,
                100.0 * c.applied as f64 / c.matched as f64
            )?,
            Some(_) => writeln!(out, " — matched nothing since boot")?,
            None => writeln!(out)?,
        }
    }
    match st["runs"].as_u64().unwrap_or(u64::from(st["run"].is_object())) {
        0 => {}
        1 => writeln!(out, "  a run is in progress")?,
        n => writeln!(out, "  {n} runs are in progress, sharing the switch")?,
    }
    writeln!(out, "  state: {}", l.dir.display())?;
    writeln!(
        out,
        "  share: {} (the VMs' /host: put programs for `roce lab run` here)",
        l.share().display()
    )
}

/// Decodes the live wire into `roce decode`'s lines, numbered from the run's start;
/// with a display filter, only the frames it keeps.
#[derive(Default)]
struct WirePrinter {
    number: u64,
    first_ts: Option<u64>,
    prev_ts: u64,
    opts: frame::Options,
    filter: Option<Filter>,
    text: String,
}

impl WirePrinter {
    /// The frame's line, or "" where the filter drops it.
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
        if self.filter.as_ref().is_some_and(|f| !f.matches(&ctx)) {
            return &self.text;
        }
        self.text.push_str(match w.sender {
            Dir::AtoB => "[a→b]",
            Dir::BtoA => "[b→a]",
        });
        print::line(&ctx, &mut self.text);
        self.text.push('\n');
        &self.text
    }
}

fn lab_run(paths: &LabPaths, a: RunArgs, out: &mut dyn Write) -> CommandResult {
    let (rules, seed) =
        fault::rules_from(&a.fault, a.faults.as_deref(), a.seed).map_err(Failure::input)?;
    if a.a.is_none() && a.b.is_none() {
        return Err(Failure::input(anyhow::anyhow!("nothing to run: give --a CMD and/or --b CMD")));
    }
    let filter = super::input::display_filter(a.display_filter.as_deref())?;
    let on_wire = a.wire.then(|| {
        let mut p = WirePrinter { filter, ..WirePrinter::default() };
        Box::new(move |w: WireFrame| lab::progress::to_stdout(p.line(&w).as_bytes()))
            as client::OnWire
    });
    let plan = lab::run::RunPlan {
        a: a.a,
        b: a.b,
        write: a.write,
        timeout: Duration::from_secs(a.timeout),
        rules,
        seed,
        delay: a.delay.map(|d| Duration::from_secs_f64(d.max(0.0))),
        ready_timeout: Duration::from_secs(a.ready_timeout),
        echo: !a.quiet && !a.json,
        on_wire,
    };
    let o = lab::run::execute(paths, plan)?;
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&run_json(&o))?)?;
        for w in lab::run::warnings(&o) {
            eprintln!("warning: {w}");
        }
    } else {
        print_run(&o, out)?;
    }
    Ok(if o.success() {
        Exit::Ok
    } else if o.sides.iter().any(|s| s.status.timed_out) {
        Exit::Command(124)
    } else {
        Exit::Failed
    })
}

fn run_json(o: &lab::run::RunOutput) -> serde_json::Value {
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
        "kernel": o.kernel.iter().map(|k| serde_json::json!({
            "vm": k.vm.name(), "kind": k.kind.name(), "line": k.line,
        })).collect::<Vec<_>>(),
        "warnings": lab::run::warnings(o),
    })
}

fn print_run(o: &lab::run::RunOutput, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "── run finished in {:.1} s", o.wall.as_secs_f64())?;
    if let Some(w) = o.waited_for_listen {
        writeln!(out, "   b started {:.1} s after a (when a was listening)", w.as_secs_f64())?;
    }
    for s in &o.sides {
        writeln!(out, "   VM {}: {}  ({})", s.vm.name(), s.status.describe(), s.cmd)?;
    }
    let r = &o.report;
    let c = &r.counters;
    writeln!(out, "   switch: {}", c.summary())?;
    for rule in &r.rules {
        writeln!(
            out,
            "   rule `{}`: matched {}, applied {}",
            rule.rule, rule.matched, rule.applied
        )?;
    }
    if let Some(p) = &r.capture {
        let complete = c.capture_complete() && r.socket_drops == 0 && r.capture_error.is_none();
        writeln!(
            out,
            "   capture: {p}: {} frames ({})",
            c.recorded,
            if complete { "complete: every frame the switch saw" } else { "INCOMPLETE" }
        )?;
    }
    for n in &o.notes {
        writeln!(out, "   note: {n}")?;
    }
    for k in &o.kernel {
        writeln!(out, "   VM {}'s kernel: {}", k.vm.name(), k.line)?;
    }
    out.flush()?;
    for w in lab::run::warnings(o) {
        eprintln!("warning: {w}");
    }
    for s in &o.sides {
        if !s.status.success() && !s.stderr.trim().is_empty() {
            let tail: Vec<&str> = s
                .stderr
                .trim_end()
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            eprintln!("VM {} stderr (last lines):\n  {}", s.vm.name(), tail.join("\n  "));
        }
    }
    Ok(())
}

fn bench(
    paths: &LabPaths,
    image: lab::image::Release,
    a: BenchArgs,
    out: &mut dyn Write,
) -> CommandResult {
    let p = Progress::new(false);
    let plan = lab::bench::BenchPlan { writes: a.writes, size: a.size, accel: a.accel, image };
    let scenarios = a.scenarios.clone();
    let r = lab::bench::measure(paths, &plan, &p, |booted, tmp| {
        if !scenarios.is_dir() {
            return Ok(Vec::new());
        }
        super::run::bench_scenarios(booted, image, &scenarios, tmp, &p)
    })?;
    writeln!(
        out,
        "roce lab bench ({} cores on this host)",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
    )?;
    let width = r.rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    for (k, v) in &r.rows {
        writeln!(out, "  {k:width$}  {v}")?;
    }
    Ok(if r.lossless { Exit::Ok } else { Exit::Failed })
}
