//! Where a lab keeps its state, and how a crashed or killed lab is recovered.
//!
//! Each lab (`--name`, default `default`) has a directory `<root>/labs/<name>/`:
//!
//! - `lab.lock`: held (flock) by the lab daemon for as long as the lab is up. The
//!   kernel drops the lock when the daemon dies, however it dies, so "lock free"
//!   means "nobody is running this lab" — the only liveness test that cannot lie.
//! - `daemon.pid`, `a.pid`, `b.pid`: the daemon's and qemu's pids (qemu writes its
//!   own with `-pidfile`). Used to kill leftovers when the lock is free, after
//!   checking that the process still is ours (its command line names this
//!   directory), so a recycled pid is never killed.
//! - `ctl.sock`: the daemon's control socket; `a.ctl`, `b.ctl`: the VMs'
//!   virtio-serial ports; `a.console`, `b.console`: console logs; `daemon.log`;
//!   `share/`: the 9p share (guest init, the `roce` binary).
//!
//! Owns: [`LabPaths`] (every file of a lab), the lock, the pid files, recovering a
//! crashed lab, reading the VMs' consoles, and where labs live ([`default_root`]).
//! Imports: nothing from the crate.
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The two VMs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Vm {
    A,
    B,
}

impl Vm {
    pub const BOTH: [Vm; 2] = [Vm::A, Vm::B];
    pub fn name(self) -> &'static str {
        match self {
            Vm::A => "a",
            Vm::B => "b",
        }
    }
    pub fn index(self) -> usize {
        match self {
            Vm::A => 0,
            Vm::B => 1,
        }
    }
    pub fn ip(self) -> &'static str {
        match self {
            Vm::A => "10.0.0.1",
            Vm::B => "10.0.0.2",
        }
    }
    /// The MAC of its management link on a bench.
    pub fn mgmt_mac(self) -> &'static str {
        match self {
            Vm::A => "52:54:00:00:01:0a",
            Vm::B => "52:54:00:00:01:0b",
        }
    }
    pub fn mac(self) -> &'static str {
        match self {
            Vm::A => "52:54:00:00:00:0a",
            Vm::B => "52:54:00:00:00:0b",
        }
    }
    /// The IPv4-mapped GID (index 1) as sysfs prints it.
    pub fn gid(self) -> &'static str {
        match self {
            Vm::A => "0000:0000:0000:0000:0000:ffff:0a00:0001",
            Vm::B => "0000:0000:0000:0000:0000:ffff:0a00:0002",
        }
    }
    pub fn peer(self) -> Vm {
        match self {
            Vm::A => Vm::B,
            Vm::B => Vm::A,
        }
    }
    pub fn parse(s: &str) -> Option<Vm> {
        match s {
            "a" | "A" => Some(Vm::A),
            "b" | "B" => Some(Vm::B),
            _ => None,
        }
    }
}

/// The files of one lab.
#[derive(Debug, Clone)]
pub struct LabPaths {
    pub root: PathBuf,
    pub name: String,
    pub dir: PathBuf,
}

/// `sun_path` holds 108 bytes including the terminating NUL.
const MAX_SOCKET_PATH: usize = 107;

impl LabPaths {
    pub fn new(root: &Path, name: &str) -> Result<LabPaths> {
        if name.is_empty()
            || name.len() > 32
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            bail!("bad lab name `{name}`: use 1–32 letters, digits, `-` or `_`");
        }
        let root = if root.is_absolute() {
            root.to_path_buf()
        } else {
            std::env::current_dir()?.join(root)
        };
        let dir = root.join("labs").join(name);
        let paths = LabPaths { root, name: name.to_string(), dir };
        let longest = paths.agent_socket(Vm::A);
        if longest.as_os_str().len() > MAX_SOCKET_PATH {
            bail!(
                "the lab directory {} is too deep for Unix sockets ({} > {MAX_SOCKET_PATH} bytes)\nhint: pass a shorter --dir",
                paths.dir.display(),
                longest.as_os_str().len()
            );
        }
        Ok(paths)
    }
    pub fn lock(&self) -> PathBuf {
        self.dir.join("lab.lock")
    }
    /// Serializes `up`/`down` of this lab.
    pub fn admin_lock(&self) -> PathBuf {
        self.dir.join("admin.lock")
    }
    pub fn control_socket(&self) -> PathBuf {
        self.dir.join("ctl.sock")
    }
    pub fn agent_socket(&self, vm: Vm) -> PathBuf {
        self.dir.join(format!("{}.ctl", vm.name()))
    }
    pub fn console(&self, vm: Vm) -> PathBuf {
        self.dir.join(format!("{}.console", vm.name()))
    }
    /// The console of the boot before the current one (`a.console.prev`).
    pub fn previous_console(&self, vm: Vm) -> PathBuf {
        self.dir.join(format!("{}.console.prev", vm.name()))
    }
    pub fn qemu_pidfile(&self, vm: Vm) -> PathBuf {
        self.dir.join(format!("{}.pid", vm.name()))
    }
    pub fn daemon_pidfile(&self) -> PathBuf {
        self.dir.join("daemon.pid")
    }
    /// What the lab is (image, standing fault rules, their seed, idle timeout):
    /// written when it boots, read by every restart, removed by `roce lab down`.
    pub fn definition(&self) -> PathBuf {
        self.dir.join("definition.json")
    }
    pub fn daemon_log(&self) -> PathBuf {
        self.dir.join("daemon.log")
    }
    pub fn share(&self) -> PathBuf {
        self.dir.join("share")
    }
    /// Is a daemon holding this lab? (Never blocks.)
    pub fn is_running(&self) -> bool {
        self.lock().exists() && matches!(Flock::try_lock(&self.lock()), Ok(None))
    }
}

/// An exclusive `flock` on a file, released on drop (or when the process dies).
#[derive(Debug)]
pub struct Flock {
    file: File,
}

impl Flock {
    fn open(path: &Path) -> io::Result<File> {
        if let Some(d) = path.parent() {
            fs::create_dir_all(d)?;
        }
        OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)
    }

    /// `Ok(None)` if someone else holds it.
    pub fn try_lock(path: &Path) -> io::Result<Option<Flock>> {
        let file = Self::open(path)?;
        // std's lock is flock(2) (LOCK_EX | LOCK_NB) on Linux: the lock an older roce and
        // the lab daemon, which inherits the fd, take too.
        match file.try_lock() {
            Ok(()) => Ok(Some(Flock { file })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }

    /// Waits for the lock, at most `within`.
    pub fn lock_within(path: &Path, within: Duration) -> Result<Flock> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(l) =
                Self::try_lock(path).with_context(|| format!("locking {}", path.display()))?
            {
                return Ok(l);
            }
            if Instant::now() >= deadline {
                bail!(
                    "{} stayed locked for {:?}: another roce process holds it",
                    path.display(),
                    within
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn into_file(self) -> File {
        self.file
    }
}

pub fn pid_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // No signal: only checks that the process exists.
    match kill(Pid::from_raw(pid), None) {
        // A zombie is as good as dead.
        Ok(()) => !fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')))
            .unwrap_or(false),
        // Someone else's process, but alive.
        Err(e) => e == Errno::EPERM,
    }
}

pub fn read_pid(path: &Path) -> Option<i32> {
    fs::read_to_string(path).ok()?.trim().parse().ok().filter(|&p| p > 0)
}

/// The process' command line mentions `needle` (so it is one of ours).
fn cmdline_mentions(pid: i32, needle: &str) -> bool {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " ").contains(needle))
        .unwrap_or(false)
}

/// SIGTERM, then SIGKILL after `grace`; waits until the process is gone.
pub fn kill_and_wait(pid: i32, grace: Duration) -> bool {
    let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while pid_alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if pid_alive(pid) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(5);
        while pid_alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    !pid_alive(pid)
}

/// Cleans up after a lab whose daemon is gone (the caller holds `lab.lock`): kills
/// leftover processes of this lab and removes its runtime files. Returns what it
/// did, one line per action.
pub fn recover_stale(paths: &LabPaths) -> Vec<String> {
    let mut done = Vec::new();
    let needle = paths.dir.to_string_lossy().into_owned();
    let pidfiles = [paths.daemon_pidfile(), paths.qemu_pidfile(Vm::A), paths.qemu_pidfile(Vm::B)];
    for pf in &pidfiles {
        if let Some(pid) = read_pid(pf) {
            if pid_alive(pid) && pid != std::process::id() as i32 && cmdline_mentions(pid, &needle)
            {
                let ok = kill_and_wait(pid, Duration::from_secs(2));
                done.push(format!(
                    "killed leftover process {pid} ({}){}",
                    pf.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
                    if ok { "" } else { " — it did not die" }
                ));
            }
        }
    }
    let mut files: Vec<PathBuf> = pidfiles.to_vec();
    files.push(paths.control_socket());
    for vm in Vm::BOTH {
        files.push(paths.agent_socket(vm));
    }
    let mut removed = 0;
    for f in files {
        if fs::remove_file(&f).is_ok() {
            removed += 1;
        }
    }
    if removed > 0 {
        done.push(format!("removed {removed} stale runtime file(s) from {}", paths.dir.display()));
    }
    done
}

/// A VM's console, read as it grows: its new lines, what it says its NIC did
/// wrong, and (with [`kernel_reports`]) what its kernel reported.
#[derive(Debug, Default)]
pub struct ConsoleWatch {
    offset: u64,
    /// The end of a line cut off by the last read.
    partial: String,
}

impl ConsoleWatch {
    /// A watch from the console's present end: what it said before is not new.
    pub fn from_end(path: &Path) -> ConsoleWatch {
        ConsoleWatch { offset: fs::metadata(path).map_or(0, |m| m.len()), partial: String::new() }
    }

    /// The first line new in `path` since the last call in which the guest's
    /// kernel says its NIC's transmit queue stopped for good (`NETDEV WATCHDOG:
    /// eth0 (virtio_net): transmit queue 0 timed out`): nothing leaves the VM
    /// from then on.
    pub fn nic_stuck(&mut self, path: &Path) -> Option<String> {
        self.new_lines(path)
            .into_iter()
            .find(|l| l.contains("NETDEV WATCHDOG") && l.contains("timed out"))
    }

    /// The whole lines written to `path` since the last call (up to 1 MiB of them),
    /// control characters taken out; a console shorter than what was read (a
    /// restarted VM) is read from its start.
    pub fn new_lines(&mut self, path: &Path) -> Vec<String> {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = fs::File::open(path) else { return Vec::new() };
        let Ok(len) = f.metadata().map(|m| m.len()) else { return Vec::new() };
        if len < self.offset {
            *self = ConsoleWatch::default();
        }
        let mut new = Vec::new();
        if f.seek(SeekFrom::Start(self.offset)).is_err()
            || f.take(1 << 20).read_to_end(&mut new).is_err()
        {
            return Vec::new();
        }
        self.offset += new.len() as u64;
        let text = std::mem::take(&mut self.partial) + &String::from_utf8_lossy(&new);
        let (whole, rest) = match text.rfind('\n') {
            Some(i) => (&text[..i], &text[i + 1..]),
            None => ("", text.as_str()),
        };
        self.partial =
            rest.chars().rev().take(4096).collect::<Vec<_>>().into_iter().rev().collect();
        whole
            .lines()
            .map(|l| l.chars().filter(|c| !c.is_control()).collect::<String>().trim().to_string())
            .collect()
    }
}

/// One kernel report on a VM's console, without the console's timestamp:
/// `BUG: kernel NULL pointer dereference, address: 0000000000000008 at
/// __rxe_put+0xb/0x50 [rdma_rxe]` (where it happened, from the report's `RIP:`
/// line, when it has one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSaid {
    pub vm: Vm,
    pub kind: KernelReport,
    pub line: String,
}

/// Both VMs' consoles, watched for what their kernels report from where they
/// stood when the watch began: what `roce lab run`, a scenario's run and the
/// fuzzer's kernel oracle each read.
#[derive(Debug)]
pub struct KernelWatch {
    consoles: [PathBuf; 2],
    watch: [ConsoleWatch; 2],
}

impl KernelWatch {
    /// A watch from both consoles' present ends: what they said before is not new.
    pub fn from_end(paths: &LabPaths) -> KernelWatch {
        let consoles = Vm::BOTH.map(|vm| paths.console(vm));
        let watch = [0, 1].map(|i| ConsoleWatch::from_end(&consoles[i]));
        KernelWatch { consoles, watch }
    }

    /// The reports new on both consoles since the last call, VM a's first.
    pub fn reports(&mut self) -> Vec<KernelSaid> {
        let mut out = Vec::new();
        for vm in Vm::BOTH {
            let lines = self.watch[vm.index()].new_lines(&self.consoles[vm.index()]);
            out.extend(kernel_reports(&lines).into_iter().map(|(kind, line)| KernelSaid {
                vm,
                kind,
                line: without_timestamp(&line).to_string(),
            }));
        }
        out
    }

    /// The VMs were brought back: their consoles start again, and what they
    /// said booting is not new.
    pub fn restarted(&mut self) {
        self.watch = Default::default();
        let _ = self.reports();
    }
}

/// A kernel console line without its timestamp (`[   12.345678] `), if it has one.
pub fn without_timestamp(line: &str) -> &str {
    match line.strip_prefix('[').and_then(|r| r.split_once("] ")) {
        Some((_, rest)) => rest,
        None => line,
    }
}

/// What a guest kernel's console line reports about the kernel itself: a crash,
/// a warning, a sanitizer's finding, a lockup or corruption of its own structures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelReport {
    Oops,
    Bug,
    Warning,
    Kasan,
    Ubsan,
    Lockup,
    Hung,
    Refcount,
    ListCorruption,
    Panic,
}

impl KernelReport {
    /// The report a console line opens, if it opens one. Only the lines the kernel
    /// prints first for each (`Oops:`, `BUG:`, `WARNING: CPU:`, `BUG: KASAN:`, …):
    /// not the register dump and call trace that follow.
    pub fn of_line(line: &str) -> Option<KernelReport> {
        let l = without_timestamp(line);
        let has = |s: &str| l.contains(s);
        Some(if has("KASAN:") {
            KernelReport::Kasan
        } else if has("UBSAN:") {
            KernelReport::Ubsan
        } else if has("soft lockup")
            || has("hard LOCKUP")
            || has("rcu_sched self-detected stall")
            || has("rcu: INFO: rcu_preempt")
        {
            KernelReport::Lockup
        } else if has("blocked for more than") && has("seconds") {
            KernelReport::Hung
        } else if has("refcount_t:") {
            KernelReport::Refcount
        } else if has("list_add corruption") || has("list_del corruption") {
            KernelReport::ListCorruption
        } else if has("Kernel panic") {
            KernelReport::Panic
        } else if l.starts_with("Oops:") || has("general protection fault") {
            KernelReport::Oops
        } else if l.starts_with("BUG:") || l.starts_with("kernel BUG at") {
            KernelReport::Bug
        } else if l.starts_with("WARNING:") {
            KernelReport::Warning
        } else {
            return None;
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            KernelReport::Oops => "oops",
            KernelReport::Bug => "BUG",
            KernelReport::Warning => "WARNING",
            KernelReport::Kasan => "KASAN",
            KernelReport::Ubsan => "UBSAN",
            KernelReport::Lockup => "lockup",
            KernelReport::Hung => "hung task",
            KernelReport::Refcount => "refcount",
            KernelReport::ListCorruption => "list corruption",
            KernelReport::Panic => "panic",
        }
    }
}

/// The kernel reports opened among console `lines`, in order, each line
/// followed by where it happened (` at rxe_mr_copy+0x49/0x1a0 [rdma_rxe]`, from
/// the report's `RIP:` line within the next 30) when the report says.
pub fn kernel_reports(lines: &[String]) -> Vec<(KernelReport, String)> {
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(k) = KernelReport::of_line(line) else { continue };
        let rip = lines[i + 1..]
            .iter()
            .take(30)
            .find_map(|l| l.split_once("RIP: ").map(|(_, r)| r.trim()))
            .map(|r| format!(" at {}", r.split_once(':').map_or(r, |(_, f)| f)))
            .unwrap_or_default();
        out.push((k, format!("{line}{rip}")));
    }
    out
}

/// The end of a log file, for error messages.
pub fn tail(path: &Path, lines: usize) -> String {
    let Ok(bytes) = fs::read(path) else { return format!("({} unreadable)", path.display()) };
    let text = String::from_utf8_lossy(&bytes);
    let clean: Vec<String> = text
        .lines()
        .map(|l| l.chars().filter(|c| !c.is_control() || *c == '\t').collect::<String>())
        .filter(|l| !l.trim().is_empty())
        .collect();
    clean[clean.len().saturating_sub(lines)..].join("\n")
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

/// The running `roce` binary, to copy into the VMs' share or to start the
/// daemon with. `/proc/self/exe` still opens after the file on disk is replaced
/// (a rebuild during a long suite or `roce fuzz`), where the path
/// `current_exe()` returns then reads "… (deleted)" and fails.
pub(crate) fn own_image() -> PathBuf {
    PathBuf::from("/proc/self/exe")
}

/// An absolute path for a file the daemon writes (it may run in another cwd).
pub fn absolute(p: &Path) -> Result<PathBuf> {
    Ok(if p.is_absolute() { p.to_path_buf() } else { std::env::current_dir()?.join(p) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn temp_root(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("roce-state-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    /// The watchdog line is found once, as the console grows, also when a read
    /// cuts it in two; a restarted VM's new console is read from its start.
    #[test]
    fn a_stuck_nic_is_read_off_the_console_as_it_grows() {
        let root = temp_root("console");
        let c = root.join("b.console");
        let mut w = ConsoleWatch::default();
        assert_eq!(w.nic_stuck(&c), None, "no console yet");
        fs::write(
            &c,
            "roce-lab: wire up: eth0 10.0.0.2\n[   59.02] virtio_net virtio2 eth0: NETDEV WATCH",
        )
        .unwrap();
        assert_eq!(w.nic_stuck(&c), None, "half a line");
        let mut f = fs::OpenOptions::new().append(true).open(&c).unwrap();
        std::io::Write::write_all(&mut f, b"DOG: CPU: 0: transmit queue 0 timed out 5204 ms\r\n[   59.03] virtio_net virtio2 eth0: TX timeout on queue: 0\n").unwrap();
        assert_eq!(w.nic_stuck(&c).as_deref(), Some("[   59.02] virtio_net virtio2 eth0: NETDEV WATCHDOG: CPU: 0: transmit queue 0 timed out 5204 ms"));
        assert_eq!(w.nic_stuck(&c), None, "said once");
        fs::write(&c, "[    1.0] NETDEV WATCHDOG: eth0: transmit queue 0 timed out\n").unwrap();
        assert!(w.nic_stuck(&c).is_some(), "a new, shorter console is read from its start");
        fs::write(&c, "boot\n[    2.0] something else timed out\n").unwrap();
        let mut fresh = ConsoleWatch::default();
        assert_eq!(fresh.nic_stuck(&c), None);
    }

    #[test]
    fn kernel_reports_are_told_from_their_first_line() {
        let cases = [
            ("[  101.5] BUG: kernel NULL pointer dereference, address: 0000000000000008", Some(KernelReport::Bug)),
            ("[  101.6] Oops: 0000 [#1] PREEMPT SMP NOPTI", Some(KernelReport::Oops)),
            ("Oops: general protection fault, probably for non-canonical address", Some(KernelReport::Oops)),
            ("[   7.1] WARNING: CPU: 1 PID: 77 at drivers/infiniband/sw/rxe/rxe_mw.c:112 rxe_do_bind_mw+0x3c/0x50", Some(KernelReport::Warning)),
            ("[   9.0] BUG: KASAN: slab-use-after-free in rxe_invalidate_mw+0x2f/0x80", Some(KernelReport::Kasan)),
            ("[  50.0] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [kworker/0:1:33]", Some(KernelReport::Lockup)),
            ("[ 242.0] INFO: task roce:301 blocked for more than 120 seconds.", Some(KernelReport::Hung)),
            ("[  12.0] refcount_t: underflow; use-after-free.", Some(KernelReport::Refcount)),
            ("[  12.0] list_del corruption. prev->next should be ffff, but was dead", Some(KernelReport::ListCorruption)),
            ("[  13.0] Kernel panic - not syncing: Fatal exception in interrupt", Some(KernelReport::Panic)),
            ("[  13.0] UBSAN: shift-out-of-bounds in drivers/infiniband/sw/rxe/rxe_req.c:88:3", Some(KernelReport::Ubsan)),
            // The lines around a report, and ordinary chatter, are none.
            ("[  101.7] RIP: 0010:rxe_invalidate_mw+0x2f/0x80 [rdma_rxe]", None),
            ("[  101.7] Call Trace:", None),
            ("roce-lab: wire up: eth0 10.0.0.2", None),
            ("[   3.0] rdma_rxe: loaded", None),
            ("[   3.0] a message mentioning the BUG: label mid-line", None),
        ];
        for (line, want) in cases {
            assert_eq!(KernelReport::of_line(line), want, "{line}");
        }
    }

    #[test]
    fn a_report_says_where_it_happened_from_its_rip_line() {
        let lines: Vec<String> = [
            "[  101.5] BUG: kernel NULL pointer dereference, address: 0000000000000008",
            "[  101.6] Oops: 0000 [#1] PREEMPT SMP NOPTI",
            "[  101.7] RIP: 0010:__rxe_put+0xf/0x50 [rdma_rxe]",
            "[  101.8] Kernel panic - not syncing: Fatal exception in interrupt",
        ]
        .map(String::from)
        .into();
        let r = kernel_reports(&lines);
        assert_eq!(
            r.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
            [KernelReport::Bug, KernelReport::Oops, KernelReport::Panic]
        );
        assert!(
            r[0].1.ends_with("address: 0000000000000008 at __rxe_put+0xf/0x50 [rdma_rxe]"),
            "{r:?}"
        );
        assert!(!r[2].1.contains(" at "), "no RIP line follows the panic: {r:?}");
    }

    #[test]
    fn a_watch_from_the_end_reads_only_what_comes_after() {
        let dir = temp_root("from-end");
        let c = dir.join("b.console");
        fs::write(&c, "booted\n").unwrap();
        let mut w = ConsoleWatch::from_end(&c);
        assert!(w.new_lines(&c).is_empty(), "what was there before is not new");
        let mut f = fs::OpenOptions::new().append(true).open(&c).unwrap();
        std::io::Write::write_all(&mut f, b"BUG: x\n").unwrap();
        assert_eq!(w.new_lines(&c), ["BUG: x"]);
    }

    /// Both consoles, from where they stood: each report once, VM a's first,
    /// without its timestamp and with where it happened; a lab brought back
    /// starts its consoles again, and what they said booting is not new.
    #[test]
    fn a_kernel_watch_reads_both_consoles_and_starts_again_with_the_vms() {
        let root = temp_root("kernel-watch");
        let paths = LabPaths::new(&root, "k").unwrap();
        fs::create_dir_all(&paths.dir).unwrap();
        let append = |vm: Vm, text: &str| {
            let mut f =
                fs::OpenOptions::new().create(true).append(true).open(paths.console(vm)).unwrap();
            std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        };
        append(Vm::A, "[    1.0] WARNING: CPU: 0 PID: 1 at boot\n");
        let mut w = KernelWatch::from_end(&paths);
        assert!(w.reports().is_empty(), "what was there before is not new");
        append(Vm::B, "[  101.5] BUG: kernel NULL pointer dereference, address: 0000000000000008\n[  101.7] RIP: 0010:__rxe_put+0xf/0x50 [rdma_rxe]\n");
        append(Vm::A, "[   50.0] WARNING: CPU: 1 PID: 9 at drivers/x.c:1\n");
        let got = w.reports();
        assert_eq!(
            got,
            [
                KernelSaid {
                    vm: Vm::A,
                    kind: KernelReport::Warning,
                    line: "WARNING: CPU: 1 PID: 9 at drivers/x.c:1".into()
                },
                KernelSaid {
                    vm: Vm::B,
                    kind: KernelReport::Bug,
                    line: "BUG: kernel NULL pointer dereference, address: 0000000000000008 at __rxe_put+0xf/0x50 [rdma_rxe]".into()
                },
            ]
        );
        assert!(w.reports().is_empty(), "each once");
        // VM b brought back: a new console, longer by now than the old one was.
        fs::write(paths.console(Vm::B), "[ 0.1] WARNING: at boot\n".repeat(20)).unwrap();
        w.restarted();
        assert!(w.reports().is_empty(), "booting is not new");
        append(Vm::B, "[ 9.0] Kernel panic - not syncing: x\n");
        assert_eq!(w.reports().iter().map(|k| k.kind).collect::<Vec<_>>(), [KernelReport::Panic]);
    }

    #[test]
    fn new_lines_are_read_once_each_and_whole() {
        let dir = temp_root("lines");
        let c = dir.join("a.console");
        let mut w = ConsoleWatch::default();
        assert!(w.new_lines(&c).is_empty(), "no console yet");
        fs::write(&c, "one\r\ntw").unwrap();
        assert_eq!(w.new_lines(&c), ["one"]);
        let mut f = fs::OpenOptions::new().append(true).open(&c).unwrap();
        std::io::Write::write_all(&mut f, b"o\x1b\nthree\n").unwrap();
        assert_eq!(w.new_lines(&c), ["two", "three"]);
        assert!(w.new_lines(&c).is_empty());
    }

    #[test]
    fn names_and_socket_paths_are_checked() {
        let root = temp_root("names");
        assert!(LabPaths::new(&root, "ok-name_1").is_ok());
        for bad in ["", "a/b", "..", "x y", &"n".repeat(33)] {
            assert!(LabPaths::new(&root, bad).is_err(), "{bad:?}");
        }
        let deep = root.join("d".repeat(120));
        let e = LabPaths::new(&deep, "x").unwrap_err().to_string();
        assert!(e.contains("too deep for Unix sockets"), "{e}");
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn flock_excludes_and_is_released_on_drop() {
        let root = temp_root("flock");
        let p = root.join("l");
        let a = Flock::try_lock(&p).unwrap().expect("free");
        assert!(Flock::try_lock(&p).unwrap().is_none());
        let e = Flock::lock_within(&p, Duration::from_millis(150)).unwrap_err().to_string();
        assert!(e.contains("stayed locked"), "{e}");
        drop(a);
        assert!(Flock::try_lock(&p).unwrap().is_some());
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn stale_pidfile_is_recovered() {
        let root = temp_root("stale");
        let paths = LabPaths::new(&root, "t").unwrap();
        fs::create_dir_all(&paths.dir).unwrap();
        // A leftover "qemu": a process whose command line names the lab directory.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("sleep 30; : lab")
            .arg(paths.dir.as_os_str())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // Until exec, the child's command line is still this test's.
        let needle = paths.dir.to_string_lossy().into_owned();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cmdline_mentions(pid, &needle) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        fs::write(paths.qemu_pidfile(Vm::A), format!("{pid}\n")).unwrap();
        // A pidfile naming a live process that is NOT ours (this test): left alone.
        fs::write(paths.qemu_pidfile(Vm::B), format!("{}\n", std::process::id())).unwrap();
        // A dead pid and stale sockets.
        fs::write(paths.daemon_pidfile(), "999999999\n").unwrap();
        fs::write(paths.control_socket(), "").unwrap();
        // Nobody holds the lock: the lab is stale.
        assert!(!paths.is_running());
        let _lock = Flock::try_lock(&paths.lock()).unwrap().expect("stale lab lock is free");
        let done = recover_stale(&paths);
        let _ = child.wait();
        assert!(!pid_alive(pid), "leftover process still alive");
        assert!(
            done.iter().any(|d| d.contains(&format!("killed leftover process {pid}"))),
            "{done:?}"
        );
        assert!(pid_alive(std::process::id() as i32));
        assert!(!paths.control_socket().exists() && !paths.qemu_pidfile(Vm::A).exists());
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_held_lock_means_running() {
        let root = temp_root("held");
        let paths = LabPaths::new(&root, "t").unwrap();
        assert!(!paths.is_running());
        let l = Flock::try_lock(&paths.lock()).unwrap().unwrap();
        assert!(paths.is_running());
        drop(l);
        assert!(!paths.is_running());
        fs::remove_dir_all(&root).unwrap();
    }
}
