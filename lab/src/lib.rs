//! `roce lab …`: two small qemu VMs running Linux Soft-RoCE (rdma_rxe), their NICs
//! joined by a software switch inside `roce` that records the wire and injects
//! faults. For RDMA work without RDMA hardware.
//!
//! - [`image`]: `roce lab build`, the cached VM image.
//! - [`daemon`]: what `roce lab up` leaves running: qemu ×2, the [`switch`], the
//!   control socket. [`state`]: its files, lock and crash recovery.
//! - [`control`]: the framing on the control channel (host ↔ daemon ↔ the
//!   command runner in each VM, [`guest`], over virtio-serial — never over the RoCE wire).
//! - [`run`]: a recorded two-VM run (`roce lab run`); [`fault`]: the fault rules,
//!   parsed once and handed to the switch as data; [`mark`]: what the switch did to
//!   a frame, written into and read back from its pcapng comment by one pair of
//!   functions; [`record`]: the recording; [`bench`](mod@bench): the lab's own numbers.
//! - [`claim`]: which run a frame belongs to when runs share the switch;
//!   `respond`: the responder the switch plays for `respond` rules.
//!
//! Owns: everything about the VMs and the wire between them. Imports: `dissector`
//! only (no option parsing, no printing of reports: the `roce` binary does that).
use std::io::{IsTerminal, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

pub mod bench;
pub mod claim;
pub mod client;
pub mod control;
pub mod daemon;
pub mod fault;
pub mod guest;
pub mod image;
pub mod mark;
pub mod record;
mod respond;
pub mod run;
pub mod state;
pub mod switch;
pub mod vm;

use control::Request;
use state::{Flock, LabPaths, Vm};
pub use vm::Accel;

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

/// The lab named `name` (default: $ROCE_LAB_NAME, else the image's own lab:
/// `default` for bookworm, else the image's name) under the cache directory `dir`
/// (default: [`default_root`]).
pub fn lab_paths(
    dir: Option<PathBuf>,
    name: Option<String>,
    image: image::Release,
) -> Result<LabPaths> {
    let root = dir.unwrap_or_else(default_root);
    let name = name
        .or_else(|| std::env::var("ROCE_LAB_NAME").ok().filter(|n| !n.is_empty()))
        .unwrap_or_else(|| image.default_lab().into());
    LabPaths::new(&root, &name)
}

/// Where the lab's progress lines go instead of stderr while a caller draws its
/// own live line there (`roce fuzz`'s bar): that caller prints them above it.
type Sink = Box<dyn Fn(&str) + Send + Sync>;
static SINK: std::sync::RwLock<Option<Sink>> = std::sync::RwLock::new(None);

/// Sends the lab's progress lines to `sink` (and draws no live line) until
/// [`progress_to_stderr`].
pub fn progress_to(sink: impl Fn(&str) + Send + Sync + 'static) {
    *SINK.write().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(sink));
}

/// The lab's progress goes to stderr again.
pub fn progress_to_stderr() {
    *SINK.write().unwrap_or_else(|e| e.into_inner()) = None;
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
        if let Some(sink) = SINK.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
            sink(&format!("[{:6.1}s] {msg}", self.start.elapsed().as_secs_f64()));
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
        if self.tty && !self.quiet && SINK.read().map_or(true, |s| s.is_none()) {
            let msg: String = msg.chars().take(100).collect();
            let _ = write!(
                std::io::stderr().lock(),
                "\r\x1b[K[{:6.1}s] {msg}",
                self.start.elapsed().as_secs_f64()
            );
        }
    }
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

pub struct UpOpts {
    /// The image both VMs boot.
    pub image: image::Release,
    pub accel: Accel,
    pub boot_timeout: Duration,
    pub idle_timeout_min: u64,
    /// Standing fault rules and their seed.
    pub rules: Vec<fault::Rule>,
    pub seed: u64,
}

/// What `up` found or did.
pub struct UpReport {
    pub already_up: bool,
    pub boot_ms: Option<u64>,
    pub wall: Duration,
    pub accel: String,
    pub recovered: Vec<String>,
    pub image: image::Release,
    /// The image's kernel release.
    pub kernel: String,
}

impl UpReport {
    pub fn describe(&self, paths: &LabPaths) -> String {
        let mut s = String::new();
        for r in &self.recovered {
            s.push_str(&format!("recovered a stale lab: {r}\n"));
        }
        let boot = self
            .boot_ms
            .map(|ms| format!("{:.1} s", ms as f64 / 1000.0))
            .unwrap_or_else(|| "?".into());
        if self.already_up {
            s.push_str(&format!(
                "lab `{}` ({}, kernel {}) was already up (booted in {boot}; {})",
                paths.name, self.image, self.kernel, self.accel
            ));
        } else {
            s.push_str(&format!(
                "lab `{}` ({}, kernel {}) up: booted in {boot} ({})",
                paths.name, self.image, self.kernel, self.accel
            ));
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
    let img = image::Image::open(&paths.root, opts.image)?;
    image::require_tools(&[image::QEMU])?;
    std::fs::create_dir_all(&paths.dir)
        .with_context(|| format!("creating {}", paths.dir.display()))?;
    let start = Instant::now();
    let admin = Flock::lock_within(&paths.admin_lock(), Duration::from_secs(120))?;
    let mut recovered = Vec::new();
    let already_up = paths.is_running();
    if already_up {
        let running = status(paths)
            .and_then(|st| serde_json::from_value::<image::Release>(st["image"].clone()).ok());
        if let Some(running) = running.filter(|r| *r != opts.image) {
            bail!(
                "lab `{}` is up with the {running} image, not {}\nhint: `roce lab --name {} down` first, or give the {} lab its own name (the default for it is `{}`)",
                paths.name,
                opts.image,
                paths.name,
                opts.image,
                opts.image.default_lab()
            );
        }
    }
    if already_up && !opts.rules.is_empty() {
        bail!(
            "lab `{}` is already up: standing fault rules are set when it boots\nhint: `roce lab down` first, or give the rules to `roce lab run --fault`",
            paths.name
        );
    }
    if !already_up {
        let lock = Flock::try_lock(&paths.lock())?.ok_or_else(|| {
            anyhow::anyhow!("lab `{}` was taken by another process just now; try again", paths.name)
        })?;
        recovered = state::recover_stale(paths);
        for r in &recovered {
            p.say(&format!("recovered a stale lab: {r}"));
        }
        spawn_daemon(paths, opts, lock)?;
        p.say(&format!(
            "lab `{}` booting {} (kernel {}): {} VMs, 512 MiB each",
            paths.name, opts.image, img.manifest.kernel_release, 2
        ));
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
                        image: opts.image,
                        kernel: img.manifest.kernel_release.clone(),
                    })
                }
                Some("failed") => {
                    let err = st["error"].as_str().unwrap_or("unknown error").to_string();
                    let _ = stop(paths);
                    bail!(
                        "the lab failed to boot: {err}\n(daemon log: {})",
                        paths.daemon_log().display()
                    );
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

/// The running `roce` binary, to copy into the VMs' share or to start the
/// daemon with. `/proc/self/exe` still opens after the file on disk is replaced
/// (a rebuild during a long suite or `roce fuzz`), where the path
/// `current_exe()` returns then reads "… (deleted)" and fails.
pub(crate) fn own_image() -> PathBuf {
    PathBuf::from("/proc/self/exe")
}

/// Starts `roce lab __daemon` in its own session, handing it the lab lock.
fn spawn_daemon(paths: &LabPaths, opts: &UpOpts, lock: Flock) -> Result<()> {
    let exe = own_image();
    let log = std::fs::File::create(paths.daemon_log())
        .with_context(|| format!("creating {}", paths.daemon_log().display()))?;
    let fd = lock.file().as_raw_fd();
    let mut c = Command::new(exe);
    // `ps` shows `roce lab … __daemon`, not `/proc/self/exe lab …`.
    c.arg0("roce");
    c.arg("lab")
        .arg("--dir")
        .arg(&paths.root)
        .arg("--name")
        .arg(&paths.name)
        .arg("__daemon")
        .arg("--image")
        .arg(opts.image.name())
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
        .arg("--rules-json")
        .arg(serde_json::to_string(&opts.rules).context("the standing fault rules")?)
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
        bail!(
            "lab `{}` did not stop (its lock {} is still held)",
            paths.name,
            paths.lock().display()
        )
    }
}

/// What `down` did.
#[derive(Debug, Clone, Default)]
pub struct DownReport {
    /// It was up (and is down now).
    pub was_up: bool,
    /// How long it had been up, when its daemon said.
    pub uptime_s: Option<u64>,
    /// What was cleaned up after a crashed lab.
    pub cleaned: Vec<String>,
}

/// Takes the lab down (or cleans up after a crashed one).
pub fn down(paths: &LabPaths) -> Result<DownReport> {
    let _admin = Flock::lock_within(&paths.admin_lock(), Duration::from_secs(120))?;
    if !paths.is_running() {
        let mut cleaned = Vec::new();
        if paths.dir.exists() {
            if let Some(_l) = Flock::try_lock(&paths.lock())? {
                cleaned = state::recover_stale(paths);
            }
        }
        return Ok(DownReport { was_up: false, uptime_s: None, cleaned });
    }
    let uptime_s =
        client::request(paths, &Request::Status).ok().and_then(|s| s["uptime_s"].as_u64());
    stop(paths)?;
    Ok(DownReport { was_up: true, uptime_s, cleaned: Vec::new() })
}

/// Every lab under `root`, by name.
pub fn all_labs(root: &Path) -> Vec<LabPaths> {
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir(root.join("labs")) {
        for e in rd.flatten() {
            if let Ok(p) = LabPaths::new(root, &e.file_name().to_string_lossy()) {
                v.push(p);
            }
        }
    }
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// The daemon's status document of a lab that is up (`None` when it is down).
pub fn status(paths: &LabPaths) -> Option<serde_json::Value> {
    if paths.is_running() {
        client::request(paths, &Request::Status).ok()
    } else {
        None
    }
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
