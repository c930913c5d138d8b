//! `roce lab …`: two small qemu VMs running Linux Soft-RoCE (rdma_rxe), their NICs
//! joined by a software switch inside `roce` that records the wire and injects
//! faults. For RDMA work without RDMA hardware.
//!
//! - [`image`]: `roce lab build`, the cached VM image.
//! - [`daemon`]: what `roce lab up` leaves running: qemu ×2, the [`switch`], the
//!   control socket. [`state`]: its files, lock and crash recovery.
//! - [`control`]: the framing on the control channel (host ↔ daemon ↔ the
//!   [`agent`] in each VM, over virtio-serial — never over the RoCE wire).
//! - [`run`]: `roce lab run`, a recorded two-VM run; [`fault`]: the fault rules.
use std::io::{IsTerminal, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};

pub mod agent;
pub mod bench;
pub mod client;
pub mod control;
pub mod daemon;
pub mod fault;
pub mod image;
pub mod record;
pub mod run;
pub mod state;
pub mod switch;
pub mod vm;

use control::Request;
use state::{Flock, LabPaths, Vm};
use vm::Accel;

/// Two Soft-RoCE VMs joined by a recording, fault-injecting switch.
#[derive(Debug, Args)]
#[command(after_help = "Typical use:\n  roce lab build                # once: the VM image (~2 min, cached)\n  roce lab up                   # boot the pair (kept up for many runs)\n  roce lab run --a 'ibv_rc_pingpong -g 1' --b 'ibv_rc_pingpong -g 1 {a}' -w rc.pcapng\n  roce lab down")]
pub struct LabArgs {
    /// Cache directory: the image and every lab's state [default: $ROCE_LAB_DIR or ~/.cache/roce/lab]
    #[arg(long, global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Which lab (several can run side by side) [default: $ROCE_LAB_NAME or `default`]
    #[arg(long, global = true, value_name = "NAME")]
    pub name: Option<String>,
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Build the VM image (Debian bookworm + rdma-core + perftest), unless an up-to-date one is cached
    Build {
        /// Debian mirror [default: the one the host's apt uses]
        #[arg(long, value_name = "URL")]
        mirror: Option<String>,
        /// Rebuild even if the cached image is up to date
        #[arg(long)]
        force: bool,
    },
    /// Boot the two VMs and keep them up; waits until rxe0 is ACTIVE on both
    Up {
        #[arg(long, value_enum, default_value = "auto")]
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
    },
    /// Stop the VMs
    Down,
    /// Is the lab up? Boot time, VMs, switch counters
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
    Run(run::RunArgs),
    /// Measure: image build time, boot time, one run's wall time, switch frames/s
    Bench(bench::BenchArgs),
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
        #[arg(long, value_enum, default_value = "auto")]
        accel: Accel,
        #[arg(long, default_value_t = 120)]
        idle_timeout: u64,
        #[arg(long, default_value_t = 300)]
        boot_timeout: u64,
        /// Standing fault rules (already validated by `up`)
        #[arg(long = "fault")]
        fault: Vec<String>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The lab directory (so stale-process checks can recognise us)
        #[arg(long)]
        lab_dir: Option<PathBuf>,
    },
}

fn parse_vm(s: &str) -> std::result::Result<Vm, String> {
    Vm::parse(s).ok_or_else(|| format!("`{s}` is not a lab VM: use a or b"))
}

/// The default cache directory.
pub fn default_root() -> PathBuf {
    if let Some(d) = std::env::var_os("ROCE_LAB_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    cache.join("roce").join("lab")
}

impl LabArgs {
    pub fn paths(&self) -> Result<LabPaths> {
        let root = self.dir.clone().unwrap_or_else(default_root);
        let name = self
            .name
            .clone()
            .or_else(|| std::env::var("ROCE_LAB_NAME").ok().filter(|n| !n.is_empty()))
            .unwrap_or_else(|| "default".into());
        LabPaths::new(&root, &name)
    }
}

/// Progress on stderr: timestamped lines, and on a terminal a live status line.
pub struct Progress {
    start: Instant,
    tty: bool,
    quiet: bool,
}

impl Progress {
    pub fn new(quiet: bool) -> Progress {
        Progress { start: Instant::now(), tty: std::io::stderr().is_terminal(), quiet }
    }
    pub fn say(&self, msg: &str) {
        if self.quiet {
            return;
        }
        let mut e = std::io::stderr().lock();
        if self.tty {
            let _ = write!(e, "\r\x1b[K");
        }
        let _ = writeln!(e, "[{:6.1}s] {msg}", self.start.elapsed().as_secs_f64());
    }
    /// A transient line (terminal only).
    pub fn live(&self, msg: &str) {
        if self.tty && !self.quiet {
            let msg: String = msg.chars().take(100).collect();
            let _ = write!(std::io::stderr().lock(), "\r\x1b[K[{:6.1}s] {msg}", self.start.elapsed().as_secs_f64());
        }
    }
}

pub fn run(args: LabArgs) -> Result<u8> {
    let paths = args.paths()?;
    match args.command {
        LabCommand::Build { mirror, force } => {
            let p = Progress::new(false);
            let (img, built) = image::build(&image::BuildOpts { root: paths.root.clone(), mirror, force }, &p)?;
            if !built {
                println!(
                    "lab image up to date: {} (kernel {}, built in {:.0} s; --force rebuilds)",
                    img.dir.display(),
                    img.manifest.kernel_release,
                    img.manifest.build_secs
                );
            } else {
                println!("lab image built in {:.0} s: {}", img.manifest.build_secs, img.dir.display());
            }
            Ok(0)
        }
        LabCommand::Up { accel, boot_timeout, idle_timeout, fault, faults, seed } => {
            let (rules, seed) = match run::rules_from(&fault, faults.as_deref(), seed) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(2);
                }
            };
            let opts = UpOpts {
                accel,
                boot_timeout: Duration::from_secs(boot_timeout),
                idle_timeout_min: idle_timeout,
                rules: rules.iter().map(|r| r.to_string()).collect(),
                seed,
            };
            let up = up(&paths, &opts, &Progress::new(false))?;
            println!("{}", up.describe(&paths));
            for r in &opts.rules {
                println!("  standing fault rule: {r}");
            }
            Ok(0)
        }
        LabCommand::Down => down(&paths),
        LabCommand::Status { json, all } => status(&paths, json, all),
        LabCommand::Exec { vm, timeout, interactive, cmd } => {
            daemon::refresh_share(&paths)?;
            let cmd = shell_join(&cmd);
            let timeout_d = Duration::from_secs(timeout);
            let st = if interactive {
                exec_interactive(&paths, vm, &cmd, timeout_d)?
            } else {
                client::exec(&paths, vm, &cmd, timeout_d, &mut client::print_output)?
            };
            if st.timed_out {
                eprintln!("roce lab exec: `{cmd}` in VM {} timed out after {timeout} s (killed)", vm.name());
            } else if let Some(e) = &st.error {
                eprintln!("roce lab exec: {e}");
            }
            Ok(st.shell_code())
        }
        LabCommand::Run(a) => run::run(&paths, a),
        LabCommand::Bench(a) => bench::run(&paths, a),
        LabCommand::Agent { port } => agent::run(port),
        LabCommand::Daemon { lock_fd, accel, idle_timeout, boot_timeout, fault, seed, lab_dir: _ } => daemon::run(daemon::DaemonOpts {
            paths,
            accel,
            lock_fd,
            idle_timeout: (idle_timeout > 0).then(|| Duration::from_secs(idle_timeout * 60)),
            boot_timeout: Duration::from_secs(boot_timeout),
            standing_rules: fault,
            standing_seed: seed,
        }),
    }
}

/// `roce lab exec -i`: our stdin to the command, its stdout to ours.
fn exec_interactive(paths: &LabPaths, vm: Vm, cmd: &str, timeout: Duration) -> Result<control::ExitStatus> {
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
    Ok(x.status().unwrap_or_else(|| control::ExitStatus::failed("the command's end was not reported")))
}

/// One word per argument, quoted for sh where needed; a single argument is taken
/// as a shell command line as it is.
pub fn shell_join(args: &[String]) -> String {
    if args.len() == 1 {
        return args[0].clone();
    }
    args.iter()
        .map(|a| {
            if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)) {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub struct UpOpts {
    pub accel: Accel,
    pub boot_timeout: Duration,
    pub idle_timeout_min: u64,
    /// Standing fault rules (text form) and their seed.
    pub rules: Vec<String>,
    pub seed: u64,
}

/// What `up` found or did.
pub struct UpReport {
    pub already_up: bool,
    pub boot_ms: Option<u64>,
    pub wall: Duration,
    pub accel: String,
    pub recovered: Vec<String>,
}

impl UpReport {
    pub fn describe(&self, paths: &LabPaths) -> String {
        let mut s = String::new();
        for r in &self.recovered {
            s.push_str(&format!("recovered a stale lab: {r}\n"));
        }
        let boot = self.boot_ms.map(|ms| format!("{:.1} s", ms as f64 / 1000.0)).unwrap_or_else(|| "?".into());
        if self.already_up {
            s.push_str(&format!("lab `{}` was already up (booted in {boot}; {})", paths.name, self.accel));
        } else {
            s.push_str(&format!("lab `{}` up: booted in {boot} ({})", paths.name, self.accel));
        }
        s.push_str(&format!(
            "\n  a: {}  b: {}  — rxe0 ACTIVE, GID index 1 = ::ffff:<ip> on both; wire recorded by the switch",
            Vm::A.ip(),
            Vm::B.ip()
        ));
        s
    }
}

/// Boots the lab (or finds it up) and waits until it is ready.
pub fn up(paths: &LabPaths, opts: &UpOpts, p: &Progress) -> Result<UpReport> {
    image::Image::open(&paths.root)?;
    image::require_tools(&[image::QEMU])?;
    std::fs::create_dir_all(&paths.dir).with_context(|| format!("creating {}", paths.dir.display()))?;
    let start = Instant::now();
    let admin = Flock::lock_within(&paths.admin_lock(), Duration::from_secs(120))?;
    let mut recovered = Vec::new();
    let already_up = paths.is_running();
    if already_up && !opts.rules.is_empty() {
        bail!(
            "lab `{}` is already up: standing fault rules are set when it boots\nhint: `roce lab down` first, or give the rules to `roce lab run --fault`",
            paths.name
        );
    }
    if !already_up {
        let lock = Flock::try_lock(&paths.lock())?
            .ok_or_else(|| anyhow::anyhow!("lab `{}` was taken by another process just now; try again", paths.name))?;
        recovered = state::recover_stale(paths);
        for r in &recovered {
            p.say(&format!("recovered a stale lab: {r}"));
        }
        spawn_daemon(paths, opts, lock)?;
        p.say(&format!("lab `{}` booting ({} VMs, 512 MiB each)", paths.name, 2));
    }
    drop(admin);

    // Ctrl-C while booting takes the half-booted lab down with us.
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let i = interrupted.clone();
        let _ = ctrlc::set_handler(move || i.store(true, Ordering::SeqCst));
    }
    let deadline = start + opts.boot_timeout + Duration::from_secs(30);
    let mut last_note = Instant::now();
    loop {
        if interrupted.load(Ordering::SeqCst) {
            p.say("interrupted: taking the lab down");
            let _ = stop(paths);
            bail!("interrupted while the lab was booting");
        }
        if !paths.is_running() {
            bail!(
                "the lab daemon exited while booting; its log ({}):\n{}",
                paths.daemon_log().display(),
                state::tail(&paths.daemon_log(), 15)
            );
        }
        let st = client::request(paths, &Request::Status);
        if let Ok(st) = &st {
            match st["phase"].as_str() {
                Some("ready") => {
                    return Ok(UpReport {
                        already_up,
                        boot_ms: st["boot_ms"].as_u64(),
                        wall: start.elapsed(),
                        accel: st["accel"].as_str().unwrap_or("?").to_string(),
                        recovered,
                    })
                }
                Some("failed") => {
                    let err = st["error"].as_str().unwrap_or("unknown error").to_string();
                    let _ = stop(paths);
                    bail!("the lab failed to boot: {err}\n(daemon log: {})", paths.daemon_log().display());
                }
                _ => {}
            }
        }
        if Instant::now() > deadline {
            let _ = stop(paths);
            bail!(
                "the lab was not ready after {} s; consoles: {} {}",
                opts.boot_timeout.as_secs(),
                paths.console(Vm::A).display(),
                paths.console(Vm::B).display()
            );
        }
        if last_note.elapsed() > Duration::from_secs(10) {
            p.say(&format!("… still booting ({:.0} s)", start.elapsed().as_secs_f64()));
            last_note = Instant::now();
        } else {
            p.live(&format!("booting… {:.0} s", start.elapsed().as_secs_f64()));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Starts `roce lab __daemon` in its own session, handing it the lab lock.
fn spawn_daemon(paths: &LabPaths, opts: &UpOpts, lock: Flock) -> Result<()> {
    let exe = std::env::current_exe().context("finding the roce binary")?;
    let log = std::fs::File::create(paths.daemon_log()).with_context(|| format!("creating {}", paths.daemon_log().display()))?;
    let fd = lock.file().as_raw_fd();
    let mut c = Command::new(exe);
    c.arg("lab")
        .arg("--dir")
        .arg(&paths.root)
        .arg("--name")
        .arg(&paths.name)
        .arg("__daemon")
        .arg("--lock-fd")
        .arg(fd.to_string())
        .arg("--accel")
        .arg(opts.accel.name())
        .arg("--idle-timeout")
        .arg(opts.idle_timeout_min.to_string())
        .arg("--boot-timeout")
        .arg(opts.boot_timeout.as_secs().to_string())
        .arg("--seed")
        .arg(opts.seed.to_string())
        .args(opts.rules.iter().flat_map(|r| ["--fault", r.as_str()]))
        .arg("--lab-dir")
        .arg(&paths.dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: setsid and fcntl are async-signal-safe.
    unsafe {
        c.pre_exec(move || {
            // Its own session: a Ctrl-C meant for this terminal does not reach it.
            libc::setsid();
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.spawn().context("starting the lab daemon")?;
    // The daemon holds the lock through its inherited descriptor; ours closes here.
    drop(lock);
    Ok(())
}

/// Asks the daemon to stop and waits until its lock is free; kills it if it does
/// not comply. Returns false if the lab was not up.
pub fn stop(paths: &LabPaths) -> Result<bool> {
    if !paths.is_running() {
        return Ok(false);
    }
    let _ = client::request(paths, &Request::Shutdown);
    let deadline = Instant::now() + Duration::from_secs(20);
    while paths.is_running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    if paths.is_running() {
        if let Some(pid) = state::read_pid(&paths.daemon_pidfile()) {
            state::kill_and_wait(pid, Duration::from_secs(1));
        }
    }
    if let Some(_lock) = Flock::try_lock(&paths.lock())? {
        state::recover_stale(paths);
        Ok(true)
    } else {
        bail!("lab `{}` did not stop (its lock {} is still held)", paths.name, paths.lock().display())
    }
}

fn down(paths: &LabPaths) -> Result<u8> {
    let _admin = Flock::lock_within(&paths.admin_lock(), Duration::from_secs(120))?;
    if !paths.is_running() {
        let mut cleaned = Vec::new();
        if paths.dir.exists() {
            if let Some(_l) = Flock::try_lock(&paths.lock())? {
                cleaned = state::recover_stale(paths);
            }
        }
        println!("lab `{}` is not up", paths.name);
        for c in cleaned {
            println!("  cleaned up after a crashed lab: {c}");
        }
        return Ok(0);
    }
    let uptime = client::request(paths, &Request::Status).ok().and_then(|s| s["uptime_s"].as_u64());
    stop(paths)?;
    match uptime {
        Some(s) => println!("lab `{}` down (was up {}m{:02}s)", paths.name, s / 60, s % 60),
        None => println!("lab `{}` down", paths.name),
    }
    Ok(0)
}

fn status(paths: &LabPaths, json: bool, all: bool) -> Result<u8> {
    let labs: Vec<LabPaths> = if all {
        let mut v = Vec::new();
        if let Ok(rd) = std::fs::read_dir(paths.root.join("labs")) {
            for e in rd.flatten() {
                if let Ok(p) = LabPaths::new(&paths.root, &e.file_name().to_string_lossy()) {
                    v.push(p);
                }
            }
        }
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    } else {
        vec![paths.clone()]
    };
    let mut any_up = false;
    let mut out = Vec::new();
    for lab in &labs {
        let st = if lab.is_running() { client::request(lab, &Request::Status).ok() } else { None };
        any_up |= st.is_some();
        if json {
            out.push(st.unwrap_or_else(|| serde_json::json!({"name": lab.name, "phase": "down"})));
        } else {
            print_status(lab, st.as_ref());
        }
    }
    if json {
        let v = if all { serde_json::Value::Array(out) } else { out.pop().unwrap_or_default() };
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    if labs.is_empty() && !json {
        println!("no labs under {}", paths.root.join("labs").display());
    }
    Ok(if any_up { 0 } else { 3 })
}

fn print_status(lab: &LabPaths, st: Option<&serde_json::Value>) {
    let Some(st) = st else {
        let stale = lab.daemon_pidfile().exists() || lab.control_socket().exists();
        println!(
            "lab `{}`: down{}",
            lab.name,
            if stale { " (stale state from a crashed lab; the next `up` or `down` cleans it)" } else { "" }
        );
        return;
    };
    let phase = st["phase"].as_str().unwrap_or("?");
    let up = st["uptime_s"].as_u64().unwrap_or(0);
    println!("lab `{}`: {phase}, up {}m{:02}s, {}", lab.name, up / 60, up % 60, st["accel"].as_str().unwrap_or("?"));
    if let Some(ms) = st["boot_ms"].as_u64() {
        println!("  boot time: {:.1} s", ms as f64 / 1000.0);
    }
    if let Some(e) = st["error"].as_str() {
        println!("  error: {e}");
    }
    if let Some(vms) = st["vms"].as_array() {
        for v in vms {
            println!(
                "  VM {}: {} qemu pid {} agent {}{}",
                v["vm"].as_str().unwrap_or("?"),
                v["ip"].as_str().unwrap_or("?"),
                v["qemu_pid"],
                if v["agent"].as_bool() == Some(true) { "up" } else { "down" },
                v["kernel"].as_str().map(|k| format!(", kernel {k}")).unwrap_or_default()
            );
        }
    }
    let ports = &st["ports"];
    println!(
        "  switch: 127.0.0.1 ports a={} b={} (VM sockets {} {})",
        ports["switch_a"], ports["switch_b"], ports["vm_a"], ports["vm_b"]
    );
    if let Ok(c) = serde_json::from_value::<switch::Counters>(st["counters"].clone()) {
        println!("  counters since boot: {}", c.summary());
    }
    if let Ok(r) = serde_json::from_value::<switch::RunReport>(st["last_run"].clone()) {
        println!("  last run: {}", r.counters.summary());
    }
    if st["run"].is_object() {
        println!("  a run is in progress");
    }
    println!("  state: {}", lab.dir.display());
}

/// Writes to fd 1 or 2 directly. `roce`'s main thread holds the std stdout/stderr
/// locks for the whole command (see `cli::run`), so lab threads (daemon log, the
/// echo of `lab run`) must not go through `std::io::stdout()`/`stderr()`: they would
/// wait forever. A lock of our own keeps lines whole.
pub fn write_fd(fd: std::os::fd::RawFd, data: &[u8]) {
    use std::os::fd::FromRawFd;
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: fd 1/2 stay open for the life of the process; ManuallyDrop keeps the
    // File from closing them.
    let mut f = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
    let _ = f.write_all(data);
}

/// An absolute path for a file the daemon writes (it may run in another cwd).
pub fn absolute(p: &Path) -> Result<PathBuf> {
    Ok(if p.is_absolute() { p.to_path_buf() } else { std::env::current_dir()?.join(p) })
}
