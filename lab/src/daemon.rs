//! The lab daemon (`roce lab up` starts it in the background; hidden subcommand
//! `__daemon`). It owns everything a running lab is made of: the lock, the two
//! qemu processes (which die with it, PR_SET_PDEATHSIG), the switch, the
//! connections to the command runners in the VMs ([`guest`](super::guest)), and the
//! control socket the other `roce lab` commands talk to.
//!
//! Owns: the daemon's life (start, serve, watch the VMs, stop), the routes from
//! commands to the clients that asked for them, and the runs on the switch.
//! Imports: [`image`](super::image), [`vm`], [`switch`](super::switch),
//! [`control`], [`claim`](super::claim), [`fault`](super::fault),
//! [`record`](super::record), [`state`] and [`progress`](super::progress) (its log).
use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::poll::{poll, PollFd, PollFlags};
use serde_json::json;

use super::claim::Claim;
use super::control::{self, ExecRequest, ExitStatus, Frame, Hello, Kind, Request, Response};
use super::fault::Rule;
use super::image::{Image, Release};
use super::record::PcapngRecorder;
use super::state::{self, Flock, LabPaths, Vm};
use super::switch::{LinkPort, Port, Ports, RunId, RunReport, RunSpec, Standing, Switch, Wire};
use super::tap::{Tap, WireKind};
use super::vm::{self, Accel, NetFd, VmSpec};

const GUEST_INIT: &str = include_str!("assets/guest-init.sh");
/// How often the VMs' consoles are read for a stuck NIC.
const CONSOLE_EVERY: Duration = Duration::from_secs(1);

pub struct DaemonOpts {
    pub paths: LabPaths,
    /// The image both VMs boot.
    pub image: Release,
    pub accel: Accel,
    /// The lab lock, already taken by `roce lab up` and inherited.
    pub lock_fd: Option<i32>,
    pub idle_timeout: Option<Duration>,
    pub boot_timeout: Duration,
    /// Fault rules applied to all traffic while the lab is up, and first in every run.
    pub standing_rules: Vec<Rule>,
    pub standing_seed: u64,
    /// What joins the VMs' test NICs to the switch.
    pub wire: WireKind,
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Booting,
    Ready,
    Failed(String),
    Stopping,
}

impl Phase {
    fn name(&self) -> &'static str {
        match self {
            Phase::Booting => "booting",
            Phase::Ready => "ready",
            Phase::Failed(_) => "failed",
            Phase::Stopping => "stopping",
        }
    }
}

#[derive(Clone)]
enum Sink {
    Client { stream: Arc<Mutex<UnixStream>>, id: u32 },
    Internal(mpsc::Sender<Frame>),
}

struct Route {
    vm: Vm,
    sink: Sink,
}

#[derive(Default)]
struct Agent {
    writer: Mutex<Option<UnixStream>>,
    hello: Mutex<Option<Hello>>,
    /// When the guest last sent anything (heartbeats included).
    last_seen: Mutex<Option<Instant>>,
}

struct Shared {
    paths: LabPaths,
    image: Release,
    /// The image's kernel (`uname -r` in the VMs once they are up).
    kernel_release: String,
    phase: Mutex<Phase>,
    agents: [Agent; 2],
    routes: Mutex<HashMap<u32, Route>>,
    next_id: AtomicU32,
    /// `None` on a bench (`--wire bench`): an outside `roce bridge` stands
    /// between the taps.
    switch: Option<Switch>,
    shutdown: AtomicBool,
    started: Instant,
    started_unix: u64,
    accel: String,
    boot_ms: AtomicU64,
    qemu_pids: [u32; 2],
    last_activity: Mutex<Instant>,
    last_run: Mutex<Option<RunReport>>,
    /// The runs in progress, by the connection that owns each: the switch's name
    /// for it, and the thread streaming its wire back to that connection when it
    /// asked for it live.
    runs: Mutex<BTreeMap<u64, (RunId, Option<Streamer>)>>,
    /// The unrecorded run that applies the standing rules while no other goes.
    background: Mutex<Option<RunId>>,
    clients: AtomicU32,
    idle_timeout: Option<Duration>,
    /// Standing fault rules and seed; while no run is in progress they apply
    /// through an unrecorded background run.
    standing: (Vec<Rule>, u64),
    /// The host taps that are the VMs' NICs (VM a's, VM b's), when the wire is taps.
    taps: Option<[String; 2]>,
    /// On a bench: where each VM's listening agent is reached (127.0.0.1:PORT,
    /// forwarded over its management link).
    agents_at: Option<[String; 2]>,
}

/// What a run on a bench is told.
const NO_SWITCH: &str = "this lab is a bench (`--wire bench`): nothing stands between its taps but the `roce bridge` you start there\nhint: run scenarios through it: roce run --endpoints a=…,b=… --bridge HOST:PORT (see roce lab status for the agents' addresses)";

fn log(msg: &str) {
    let t = dissector::capture::unix_now().as_secs_f64();
    crate::progress::to_stderr(format!("[{t:.3}] {msg}\n").as_bytes());
}

impl Shared {
    fn set_phase(&self, p: Phase) {
        let mut g = self.phase.lock().unwrap_or_else(|e| e.into_inner());
        // A failure is not overwritten by later news, except by stopping.
        if matches!(*g, Phase::Failed(_)) && p != Phase::Stopping {
            return;
        }
        if let Phase::Failed(m) = &p {
            log(&format!("FAILED: {m}"));
        }
        *g = p;
    }
    fn phase(&self) -> Phase {
        self.phase.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    fn touch(&self) {
        *self.last_activity.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    fn send_to_agent(&self, vm: Vm, f: &Frame) -> io::Result<()> {
        let mut g = self.agents[vm.index()].writer.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_mut() {
            Some(s) => f.write_to(s),
            None => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                format!("VM {}'s control port is not connected", vm.name()),
            )),
        }
    }

    /// Starts `cmd` in `vm`, output going to `sink`. Errors if the guest is not up.
    fn start_exec(&self, vm: Vm, req: ExecRequest, sink: Sink) -> std::result::Result<u32, String> {
        if self.agents[vm.index()].hello.lock().unwrap_or_else(|e| e.into_inner()).is_none() {
            return Err(format!(
                "VM {}'s agent is not up yet (the lab is {})",
                vm.name(),
                self.phase().name()
            ));
        }
        let gid = self.next_id.fetch_add(1, Ordering::SeqCst);
        self.routes.lock().unwrap_or_else(|e| e.into_inner()).insert(gid, Route { vm, sink });
        let req = Frame::json(Kind::Request, gid, &req);
        if let Err(e) = self.send_to_agent(vm, &req) {
            self.routes.lock().unwrap_or_else(|e| e.into_inner()).remove(&gid);
            return Err(format!("sending the command to VM {}: {e}", vm.name()));
        }
        Ok(gid)
    }

    /// Runs a command for the daemon itself; returns its status and stdout.
    fn exec_internal(
        &self,
        vm: Vm,
        cmd: &str,
        timeout: Duration,
    ) -> std::result::Result<(ExitStatus, String), String> {
        let (tx, rx) = mpsc::channel();
        let req = ExecRequest {
            cmd: cmd.to_string(),
            timeout_ms: Some(timeout.as_millis() as u64),
            stdin: false,
        };
        let gid = self.start_exec(vm, req, Sink::Internal(tx))?;
        let deadline = Instant::now() + timeout + Duration::from_secs(10);
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(f) if f.kind == Kind::Stdout => out.extend_from_slice(&f.payload),
                Ok(f) if f.kind == Kind::Exit => {
                    let st: ExitStatus = f.parse().map_err(|e| e.to_string())?;
                    return Ok((st, String::from_utf8_lossy(&out).into_owned()));
                }
                Ok(_) => {}
                Err(_) => {
                    self.routes.lock().unwrap_or_else(|e| e.into_inner()).remove(&gid);
                    let _ = self.send_to_agent(vm, &Frame::new(Kind::Kill, gid, vec![]));
                    return Err(format!(
                        "`{cmd}` in VM {} did not finish within {timeout:?}",
                        vm.name()
                    ));
                }
            }
        }
    }

    /// Delivers a guest's frame to whoever asked for the command.
    fn route(&self, f: Frame) {
        let sink = {
            let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
            let Some(r) = routes.get(&f.id) else { return };
            let sink = r.sink.clone();
            if f.kind == Kind::Exit {
                routes.remove(&f.id);
            }
            sink
        };
        match sink {
            Sink::Client { stream, id } => {
                let mut s = stream.lock().unwrap_or_else(|e| e.into_inner());
                let _ = Frame::new(f.kind, id, f.payload).write_to(&mut *s);
            }
            Sink::Internal(tx) => {
                let _ = tx.send(f);
            }
        }
    }

    /// Every command running in `vm` ends with `why` (guest restarted or gone).
    fn fail_routes(&self, vm: Vm, why: &str) {
        let ids: Vec<u32> = self
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, r)| r.vm == vm)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.route(Frame::json(Kind::Exit, id, &ExitStatus::failed(why)));
        }
    }

    /// Applies the standing rules between runs (nothing is recorded).
    fn begin_background_run(&self) -> Result<()> {
        let Some(switch) = &self.switch else { return Ok(()) };
        if self.standing.0.is_empty() {
            return Ok(());
        }
        let id = switch.begin(RunSpec {
            rules: self.standing.0.clone(),
            seed: self.standing.1,
            recorder: None,
            capture: None,
            live: None,
            claim: None,
            standing: self.standing_spec(),
        })?;
        *self.background.lock().unwrap_or_else(|e| e.into_inner()) = Some(id);
        Ok(())
    }

    /// The standing rules at the front of every run's rules.
    fn standing_spec(&self) -> Standing {
        Standing { count: self.standing.0.len(), seed: self.standing.1 }
    }

    fn status(&self) -> serde_json::Value {
        let sw = self.switch.as_ref();
        let (total, mut runs) = sw.and_then(|s| s.stats().ok()).unwrap_or_default();
        // The background run that applies the standing rules while nobody runs
        // anything is no run of anybody's: it is there only when no other is.
        if self.background.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
            runs.clear();
        }
        let phase = self.phase();
        let vms: Vec<serde_json::Value> = Vm::BOTH
            .iter()
            .map(|&v| {
                let hello = self.agents[v.index()].hello.lock().unwrap_or_else(|e| e.into_inner()).clone();
                json!({
                    "vm": v.name(), "ip": v.ip(), "mac": v.mac(), "qemu_pid": self.qemu_pids[v.index()],
                    "agent": hello.is_some(), "kernel": hello.map(|h| h.kernel),
                    "console": self.paths.console(v).display().to_string(),
                })
            })
            .collect();
        let boot_ms = self.boot_ms.load(Ordering::SeqCst);
        json!({
            "name": self.paths.name,
            "dir": self.paths.dir.display().to_string(),
            // Files put here are the VMs' /host (9p): programs for `roce lab run`.
            "share": self.paths.share().display().to_string(),
            "phase": phase.name(),
            "image": self.image,
            "image_kernel": self.kernel_release,
            "error": if let Phase::Failed(m) = &phase { Some(m.clone()) } else { None },
            "accel": self.accel,
            "daemon_pid": std::process::id(),
            "started_unix": self.started_unix,
            "uptime_s": self.started.elapsed().as_secs(),
            "boot_ms": if boot_ms > 0 { Some(boot_ms) } else { None },
            "idle_timeout_s": self.idle_timeout.map(|d| d.as_secs()),
            "standing_rules": self.standing.0.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
            "standing_seed": self.standing.1,
            "standing_counts": sw.and_then(|s| s.standing().ok()).unwrap_or_default(),
            "vms": vms,
            "ports": sw.map(Switch::ports),
            "taps": self.taps,
            "agents_at": self.agents_at,
            "agents_key": self.agents_at.as_ref()
                .map(|_| self.paths.share().join(super::guest::BENCH_KEY).display().to_string()),
            "counters": sw.map(|_| total),
            "run": runs.first(),
            "runs": runs.len(),
            "last_run": *self.last_run.lock().unwrap_or_else(|e| e.into_inner()),
        })
    }
}

/// The thread streaming a run's wire back to its client.
type Streamer = thread::JoinHandle<()>;

fn now_unix() -> u64 {
    dissector::capture::unix_now().as_secs()
}

/// Puts a bench's agents' key into the share (mode 0600, whole or not at all),
/// where the VMs' init reads it (`/host/agent.key`). The caller has checked it is
/// a key.
pub fn put_bench_key(paths: &LabPaths, key: &[u8]) -> Result<()> {
    fs::create_dir_all(paths.share())?;
    write_atomically(&paths.share().join(super::guest::BENCH_KEY), key, 0o600)
}

/// Writes `data` to `path` through `dissector::capture::AtomicFile` (a temporary
/// file and a rename), so the guest never sees a half-written file.
fn write_atomically(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut f = dissector::capture::create_atomically(path)?;
    f.write_all(data).with_context(|| format!("writing {}", f.temp_path().display()))?;
    fs::set_permissions(f.temp_path(), fs::Permissions::from_mode(mode))?;
    f.commit()?;
    Ok(())
}

/// Puts the guest init and this `roce` binary into the 9p share (the binary only if
/// it changed, so a rebuilt `roce` reaches the VMs with the next command).
pub fn refresh_share(paths: &LabPaths) -> Result<()> {
    // Agents started side by side (`roce run -j N`) all refresh it: one at a time,
    // or they write the same temporary file.
    static REFRESHING: Mutex<()> = Mutex::new(());
    let _one = REFRESHING.lock().unwrap_or_else(|e| e.into_inner());
    let share = paths.share();
    fs::create_dir_all(&share)?;
    let init = share.join("init.sh");
    if fs::read_to_string(&init).ok().as_deref() != Some(GUEST_INIT) {
        write_atomically(&init, GUEST_INIT.as_bytes(), 0o644)?;
    }
    let exe = crate::state::own_image();
    let dst = share.join("roce");
    let same = match (fs::metadata(&exe), fs::metadata(&dst)) {
        (Ok(a), Ok(b)) => a.len() == b.len() && a.modified().ok() <= b.modified().ok(),
        _ => false,
    };
    if !same {
        let data = fs::read(&exe)
            .with_context(|| format!("reading the running roce binary ({})", exe.display()))?;
        write_atomically(&dst, &data, 0o755)?;
    }
    Ok(())
}

pub fn run(opts: DaemonOpts) -> Result<u8> {
    let paths = opts.paths.clone();
    fs::create_dir_all(&paths.dir)?;
    // The lock: inherited from `roce lab up`, or taken here.
    let _lock: File = match opts.lock_fd {
        Some(fd) => {
            // SAFETY: `roce lab up` passed us this open fd and no longer uses it;
            // we own it from here on.
            let f = unsafe { File::from_raw_fd(fd) };
            // SAFETY: plain fcntl on an fd we own.
            unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
            f
        }
        None => match Flock::try_lock(&paths.lock())? {
            Some(l) => l.into_file(),
            None => bail!("lab `{}` is already running", paths.name),
        },
    };
    fs::write(paths.daemon_pidfile(), format!("{}\n", std::process::id()))?;
    log(&format!("lab `{}` daemon {} in {}", paths.name, std::process::id(), paths.dir.display()));

    let result = serve(&opts, &paths);
    if let Err(e) = &result {
        log(&format!("FATAL: {e:#}"));
    }
    for f in [
        paths.control_socket(),
        paths.daemon_pidfile(),
        paths.agent_socket(Vm::A),
        paths.agent_socket(Vm::B),
    ] {
        let _ = fs::remove_file(f);
    }
    log("daemon exits");
    result.map(|_| 0)
}

struct Qemus([Option<Child>; 2], [std::path::PathBuf; 2]);

impl Drop for Qemus {
    fn drop(&mut self) {
        for (c, pidfile) in self.0.iter_mut().zip(&self.1) {
            if let Some(c) = c {
                if matches!(c.try_wait(), Ok(None)) {
                    state::kill_and_wait(c.id() as i32, Duration::from_secs(3));
                }
                let _ = c.wait();
                let _ = fs::remove_file(pidfile);
            }
        }
    }
}

fn serve(opts: &DaemonOpts, paths: &LabPaths) -> Result<()> {
    refresh_share(paths)?;
    let img = Image::open(&paths.root, opts.image)?;
    for vm in Vm::BOTH {
        // The last boot's console is kept one restart longer: a lab restarted
        // because its VM crashed would otherwise lose the crash's whole trace.
        let _ = fs::rename(paths.console(vm), paths.previous_console(vm));
        let _ = fs::remove_file(paths.agent_socket(vm));
    }
    let sock = paths.control_socket();
    let _ = fs::remove_file(&sock);
    let listener =
        UnixListener::bind(&sock).with_context(|| format!("binding {}", sock.display()))?;
    listener.set_nonblocking(true)?;

    let (accel, accel_note) = vm::resolve_accel(opts.accel, &img, paths, &|m| log(m))?;
    log(&format!("accelerator: {accel_note}"));

    let taps = || -> Result<(Tap, Tap)> {
        let tap = |vm: Vm| {
            Tap::create(&format!("roce{}%d", vm.name()))
                .with_context(|| format!("creating VM {}'s tap interface", vm.name()))
        };
        Ok((tap(Vm::A)?, tap(Vm::B)?))
    };
    let (switch, backends, taps) = match opts.wire {
        WireKind::Udp => {
            let wire = Wire::new().context("creating the wire's UDP sockets on 127.0.0.1")?;
            log(&format!("switch: {:?}", wire.ports()));
            let switch = Switch::spawn(&wire)?;
            // qemu takes the VM sockets; the switch has its clones.
            let vms = [Backend::Dgram(wire.vm_a.into()), Backend::Dgram(wire.vm_b.into())];
            (Some(switch), vms, None)
        }
        WireKind::Tap => {
            let (ta, tb) = taps()?;
            let port =
                |t: &Tap| LinkPort::open(&t.name).map(Port::Link).map_err(anyhow::Error::msg);
            let switch = Switch::spawn_on([port(&ta)?, port(&tb)?], Ports::default())?;
            log(&format!("switch: on taps {} (VM a) and {} (VM b)", ta.name, tb.name));
            let names = [ta.name.clone(), tb.name.clone()];
            (Some(switch), [Backend::Tap(ta.fd), Backend::Tap(tb.fd)], Some(names))
        }
        WireKind::Bench => {
            if !opts.standing_rules.is_empty() {
                bail!("a bench has no switch of the lab's to apply standing fault rules: give them to the `roce bridge` between its taps");
            }
            let (ta, tb) = taps()?;
            log(&format!(
                "bench: taps {} (VM a) and {} (VM b), nothing between them",
                ta.name, tb.name
            ));
            let names = [ta.name.clone(), tb.name.clone()];
            (None, [Backend::Tap(ta.fd), Backend::Tap(tb.fd)], Some(names))
        }
    };
    // On a bench, each VM's agent listens on its management link, reached from
    // a port of 127.0.0.1 forwarded by qemu.
    let mgmt = match opts.wire {
        WireKind::Bench => Some([free_port()?, free_port()?]),
        _ => None,
    };
    let agents_at = mgmt.map(|ports| ports.map(|p| format!("127.0.0.1:{p}")));
    let boot_start = Instant::now();
    let mut qemus = start_vms(&img, paths, accel, &backends, mgmt)?;
    let pids = [0, 1].map(|i| qemus.0[i].as_ref().map(|c| c.id()).unwrap_or(0));
    drop(backends); // qemu holds them now

    let shared = Arc::new(Shared {
        paths: paths.clone(),
        image: opts.image,
        kernel_release: img.manifest.kernel_release.clone(),
        phase: Mutex::new(Phase::Booting),
        agents: Default::default(),
        routes: Mutex::default(),
        next_id: AtomicU32::new(1),
        switch,
        shutdown: AtomicBool::new(false),
        started: Instant::now(),
        started_unix: now_unix(),
        accel: accel_note,
        boot_ms: AtomicU64::new(0),
        qemu_pids: pids,
        last_activity: Mutex::new(Instant::now()),
        last_run: Mutex::new(None),
        runs: Mutex::new(BTreeMap::new()),
        background: Mutex::new(None),
        clients: AtomicU32::new(0),
        idle_timeout: opts.idle_timeout,
        standing: (opts.standing_rules.clone(), opts.standing_seed),
        taps,
        agents_at,
    });
    shared.begin_background_run()?;
    for vm in Vm::BOTH {
        let sh = shared.clone();
        thread::spawn(move || agent_link(&sh, vm));
    }
    {
        let sh = shared.clone();
        let within = opts.boot_timeout;
        thread::spawn(move || readiness(&sh, boot_start, within));
    }
    watch(&shared, &listener, &mut qemus, paths);
    shared.set_phase(Phase::Stopping);
    log("stopping the VMs");
    drop(qemus);
    Ok(())
}

/// Starts qemu for both VMs, each with its end of the wire as its NIC.
fn start_vms(
    img: &Image,
    paths: &LabPaths,
    accel: Accel,
    wire: &[Backend; 2],
    mgmt: Option<[u16; 2]>,
) -> Result<Qemus> {
    let mut qemus = Qemus([None, None], [paths.qemu_pidfile(Vm::A), paths.qemu_pidfile(Vm::B)]);
    for vm in Vm::BOTH {
        let net = match &wire[vm.index()] {
            Backend::Dgram(s) => NetFd::Dgram(s.as_raw_fd()),
            Backend::Tap(t) => NetFd::Tap(t.as_raw_fd()),
        };
        let fd = net.fd();
        let mgmt = mgmt.map(|p| p[vm.index()]);
        let spec = VmSpec { vm, accel, net: Some(net), mgmt, paths, probe: false };
        let cmd = vm::command(img, &spec)?;
        log(&format!("starting VM {}: {:?}", vm.name(), cmd));
        let child = vm::spawn(cmd, Some(fd), &paths.dir.join(format!("{}.qemu.log", vm.name())))?;
        qemus.0[vm.index()] = Some(child);
    }
    Ok(qemus)
}

/// A free TCP port of 127.0.0.1, for qemu to forward to a VM.
fn free_port() -> Result<u16> {
    let l =
        std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port on 127.0.0.1")?;
    Ok(l.local_addr()?.port())
}

/// A VM's NIC backend, held until qemu has it: its end of the UDP wire, or its tap.
enum Backend {
    Dgram(OwnedFd),
    Tap(OwnedFd),
}

/// The daemon's main loop: serves each client on its own thread and watches the
/// VMs, until shutdown is asked for, a failure has stood for a minute (so `roce
/// lab up`/`status` can read it) or the lab was idle for its idle timeout.
fn watch(shared: &Arc<Shared>, listener: &UnixListener, qemus: &mut Qemus, paths: &LabPaths) {
    let mut next_conn: u64 = 1;
    let mut failed_at: Option<Instant> = None;
    // The VMs' consoles, for a NIC that stopped transmitting (a wedged virtio TX
    // queue: the guest lives, its wire is dead).
    let mut consoles: [state::ConsoleWatch; 2] = Default::default();
    let mut console_checked = Instant::now();
    loop {
        if shared.shutdown.load(Ordering::SeqCst) {
            break;
        }
        match listener.accept() {
            Ok((stream, _)) => {
                let sh = shared.clone();
                let conn = next_conn;
                next_conn += 1;
                shared.touch();
                shared.clients.fetch_add(1, Ordering::SeqCst);
                thread::spawn(move || {
                    if let Err(e) = client_conn(&sh, stream, conn) {
                        log(&format!("client {conn}: {e:#}"));
                    }
                    sh.clients.fetch_sub(1, Ordering::SeqCst);
                    sh.touch();
                });
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => log(&format!("accept: {e}")),
        }
        check_qemus(shared, qemus, paths);
        if matches!(shared.phase(), Phase::Ready) && console_checked.elapsed() >= CONSOLE_EVERY {
            console_checked = Instant::now();
            check_consoles(shared, &mut consoles, paths);
        }
        if matches!(shared.phase(), Phase::Ready) {
            check_heartbeats(shared, paths);
        }
        if matches!(shared.phase(), Phase::Failed(_)) {
            // Linger so `roce lab up`/`status` can read the error, then go.
            let t = *failed_at.get_or_insert_with(Instant::now);
            if t.elapsed() > Duration::from_secs(60) {
                break;
            }
        }
        if let Some(idle) = shared.idle_timeout {
            let last = *shared.last_activity.lock().unwrap_or_else(|e| e.into_inner());
            if shared.clients.load(Ordering::SeqCst) == 0 && last.elapsed() > idle {
                log(&format!("idle for {idle:?}: shutting down"));
                break;
            }
        }
        // Until a client connects (it is served at once: a scenario's run opens a
        // connection to begin its recording), or time for the checks above.
        // A failed or interrupted wait only means the loop looks again.
        let ms = u16::try_from(control::POLL.as_millis()).unwrap_or(u16::MAX);
        let _ = poll(&mut [PollFd::new(listener.as_fd(), PollFlags::POLLIN)], ms);
    }
}

/// A VM whose qemu exited fails the lab (unless it is stopping).
fn check_qemus(shared: &Shared, qemus: &mut Qemus, paths: &LabPaths) {
    for vm in Vm::BOTH {
        if let Some(c) = qemus.0[vm.index()].as_mut() {
            if let Ok(Some(st)) = c.try_wait() {
                if shared.phase() != Phase::Stopping {
                    let tail = state::tail(&paths.dir.join(format!("{}.qemu.log", vm.name())), 5);
                    let console = state::tail(&paths.console(vm), 8);
                    shared.set_phase(Phase::Failed(format!(
                        "VM {}'s qemu exited ({st})\nqemu said: {tail}\nconsole ({}):\n{console}",
                        vm.name(),
                        paths.console(vm).display()
                    )));
                }
            }
        }
    }
}

/// A VM whose NIC stopped transmitting (a wedged virtio TX queue: the guest lives,
/// its wire is dead, its kernel says NETDEV WATCHDOG) fails the lab.
fn check_consoles(shared: &Shared, consoles: &mut [state::ConsoleWatch; 2], paths: &LabPaths) {
    for vm in Vm::BOTH {
        if let Some(line) = consoles[vm.index()].nic_stuck(&paths.console(vm)) {
            log(&format!("VM {}: {line}", vm.name()));
            shared.set_phase(Phase::Failed(format!(
                "VM {}'s NIC stopped transmitting: its kernel says `{line}`; nothing leaves the VM any more, so every exchange with it times out\nconsole ({}):\n{}",
                vm.name(),
                paths.console(vm).display(),
                state::tail(&paths.console(vm), 8)
            )));
            shared.fail_routes(
                vm,
                "its NIC stopped transmitting (NETDEV WATCHDOG in its kernel log)",
            );
        }
    }
}

/// A VM whose command runner stopped sending heartbeats (a hung or panicked
/// guest) fails the lab.
fn check_heartbeats(shared: &Shared, paths: &LabPaths) {
    for vm in Vm::BOTH {
        let seen = *shared.agents[vm.index()].last_seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.is_some_and(|t| t.elapsed() > control::HUNG_AFTER) {
            let console = state::tail(&paths.console(vm), 8);
            shared.set_phase(Phase::Failed(format!(
                "VM {} stopped answering: no word from its agent for {} s (hung or panicked guest?)\nconsole ({}):\n{console}",
                vm.name(),
                control::HUNG_AFTER.as_secs(),
                paths.console(vm).display()
            )));
            shared.fail_routes(vm, "stopped answering (hung guest?)");
        }
    }
}

/// Connects to VM `vm`'s virtio-serial socket and relays what its guest says.
fn agent_link(sh: &Shared, vm: Vm) {
    let path = sh.paths.agent_socket(vm);
    let deadline = Instant::now() + Duration::from_secs(30);
    let stream = loop {
        match UnixStream::connect(&path) {
            Ok(s) => break s,
            Err(e) => {
                if Instant::now() > deadline || sh.shutdown.load(Ordering::SeqCst) {
                    sh.set_phase(Phase::Failed(format!(
                        "cannot reach VM {}'s control port {}: {e}",
                        vm.name(),
                        path.display()
                    )));
                    return;
                }
                thread::sleep(control::POLL);
            }
        }
    };
    let mut reader = match stream.try_clone() {
        Ok(r) => r,
        Err(e) => {
            sh.set_phase(Phase::Failed(format!("VM {}'s control port: {e}", vm.name())));
            return;
        }
    };
    *sh.agents[vm.index()].writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(stream);
    log(&format!("VM {}: control port connected", vm.name()));
    loop {
        let f = match control::read_frame(&mut reader) {
            Ok(Some(f)) => f,
            Ok(None) | Err(_) if sh.phase() == Phase::Stopping => return,
            Ok(None) => {
                sh.set_phase(Phase::Failed(format!(
                    "VM {}'s control port closed (did its qemu exit?)",
                    vm.name()
                )));
                sh.fail_routes(vm, "the VM went away (its qemu exited?)");
                return;
            }
            Err(e) => {
                // Garbage from the guest (its runner died mid-frame): fail what ran
                // there and wait for the restarted runner's hello.
                log(&format!("VM {}: bad control frame: {e}", vm.name()));
                sh.fail_routes(vm, &format!("control stream broke: {e}"));
                *sh.agents[vm.index()].hello.lock().unwrap_or_else(|e| e.into_inner()) = None;
                match control::resync_hello(&mut reader) {
                    Ok(Some(f)) => f,
                    _ => return,
                }
            }
        };
        *sh.agents[vm.index()].last_seen.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(Instant::now());
        match f.kind {
            Kind::Heartbeat => {}
            Kind::Hello => {
                let hello: Hello = match f.parse() {
                    Ok(h) => h,
                    Err(e) => {
                        log(&format!("VM {}: {e}", vm.name()));
                        continue;
                    }
                };
                let mut slot =
                    sh.agents[vm.index()].hello.lock().unwrap_or_else(|e| e.into_inner());
                let restarted = slot.as_ref().is_some_and(|h| h.instance != hello.instance);
                let fresh = slot.as_ref().is_none_or(|h| h.instance != hello.instance);
                if fresh {
                    log(&format!("VM {}: agent up (kernel {})", vm.name(), hello.kernel));
                }
                *slot = Some(hello);
                drop(slot);
                if restarted {
                    sh.fail_routes(vm, "the agent in the VM restarted");
                }
                let _ = sh.send_to_agent(vm, &Frame::sync());
            }
            Kind::Stdout | Kind::Stderr | Kind::Exit => sh.route(f),
            other => log(&format!("VM {}: unexpected {other:?} frame from the agent", vm.name())),
        }
    }
}

/// Waits for both guests, then for rxe0 ACTIVE with its IPv4-mapped GID on both.
fn readiness(sh: &Shared, boot_start: Instant, within: Duration) {
    let deadline = boot_start + within;
    for vm in Vm::BOTH {
        loop {
            if sh.agents[vm.index()].hello.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
                break;
            }
            if matches!(sh.phase(), Phase::Failed(_) | Phase::Stopping) {
                return;
            }
            if Instant::now() > deadline {
                let console = state::tail(&sh.paths.console(vm), 10);
                sh.set_phase(Phase::Failed(format!(
                    "VM {}'s agent did not come up within {} s; console ({}):\n{console}",
                    vm.name(),
                    within.as_secs(),
                    sh.paths.console(vm).display()
                )));
                return;
            }
            thread::sleep(control::POLL);
        }
    }
    for vm in Vm::BOTH {
        let check = "cat /sys/class/infiniband/rxe0/ports/1/state /sys/class/infiniband/rxe0/ports/1/gids/1";
        let mut last;
        loop {
            match sh.exec_internal(vm, check, Duration::from_secs(20)) {
                Ok((st, out))
                    if st.success() && out.contains("ACTIVE") && out.contains(vm.gid()) =>
                {
                    break
                }
                Ok((st, out)) => last = format!("{}: {}", st.describe(), out.trim()),
                Err(e) => last = e,
            }
            if Instant::now() > deadline || matches!(sh.phase(), Phase::Failed(_) | Phase::Stopping)
            {
                sh.set_phase(Phase::Failed(format!(
                    "VM {}: rxe0 not ACTIVE with GID {} within {} s (last check: {last})",
                    vm.name(),
                    vm.gid(),
                    within.as_secs()
                )));
                return;
            }
            thread::sleep(Duration::from_millis(300));
        }
    }
    let ms = boot_start.elapsed().as_millis() as u64;
    sh.boot_ms.store(ms, Ordering::SeqCst);
    sh.set_phase(Phase::Ready);
    log(&format!("ready: both VMs up, rxe0 ACTIVE, in {:.1} s", ms as f64 / 1000.0));
}

fn respond(w: &Mutex<UnixStream>, r: &Response) -> io::Result<()> {
    let mut s = w.lock().unwrap_or_else(|e| e.into_inner());
    Frame::json(Kind::Response, 0, r).write_to(&mut *s)
}

/// How many frames a live run's client may fall behind before frames are skipped
/// for it (the capture is unaffected).
const LIVE_BACKLOG: usize = 16_384;

struct RunRequest {
    pcap: Option<String>,
    rules: Vec<Rule>,
    seed: u64,
    /// Stream the wire to this client while the run lasts.
    live: Option<Arc<Mutex<UnixStream>>>,
    claim: Option<Claim>,
}

/// Sends the run's frames to the client until the switch drops its end of the
/// channel (the run ended); a client that went away just stops the stream.
fn stream_wire(rx: mpsc::Receiver<control::WireFrame>, client: Arc<Mutex<UnixStream>>) {
    // A client that stops reading must not hold the run's end hostage.
    let _ = client
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .set_write_timeout(Some(Duration::from_secs(30)));
    for w in rx {
        let mut s = client.lock().unwrap_or_else(|e| e.into_inner());
        if w.to_frame().write_to(&mut *s).is_err() {
            return;
        }
    }
}

fn begin_run(sh: &Shared, conn: u64, req: RunRequest) -> std::result::Result<(), String> {
    let RunRequest { pcap, rules, seed, live, claim } = req;
    let Some(switch) = &sh.switch else { return Err(NO_SWITCH.into()) };
    if sh.phase() != Phase::Ready {
        return Err(format!("the lab is {}, not ready", sh.phase().name()));
    }
    if claim.is_some() && !sh.standing.0.is_empty() {
        return Err("this lab applies standing fault rules, which act on every frame: a run cannot share the switch with them\nhint: run one scenario at a time (no -j), or bring the lab up without --rule".into());
    }
    let rules: Vec<Rule> = sh.standing.0.iter().cloned().chain(rules).collect();
    let mut runs = sh.runs.lock().unwrap_or_else(|e| e.into_inner());
    if runs.contains_key(&conn) {
        return Err("this connection has a run in progress already".into());
    }
    let (recorder, capture) = match pcap {
        Some(p) => {
            let path = std::path::PathBuf::from(&p);
            if !path.is_absolute() {
                return Err(format!("capture path {p} is not absolute"));
            }
            let rec = PcapngRecorder::create(&path)
                .map_err(|e| format!("cannot create the capture {p}: {e}"))?;
            (Some(Box::new(rec) as Box<dyn super::record::Recorder>), Some(path))
        }
        None => (None, None),
    };
    let (tx, streamer) = match live {
        Some(client) => {
            let (tx, rx) = mpsc::sync_channel(LIVE_BACKLOG);
            let t = thread::Builder::new()
                .name("lab-live-wire".into())
                .spawn(move || stream_wire(rx, client))
                .map_err(|e| format!("starting the live wire stream: {e}"))?;
            (Some(tx), Some(t))
        }
        None => (None, None),
    };
    // If the switch refuses, `tx` is dropped with the spec and the streamer ends.
    if let Some(id) = sh.background.lock().unwrap_or_else(|e| e.into_inner()).take() {
        // The background run that applied the standing rules gives way.
        let _ = switch.end(id);
    }
    let standing = sh.standing_spec();
    match switch.begin(RunSpec { rules, seed, recorder, capture, live: tx, claim, standing }) {
        Ok(id) => {
            runs.insert(conn, (id, streamer));
            Ok(())
        }
        Err(e) => {
            if runs.is_empty() {
                let _ = sh.begin_background_run();
            }
            let hint = if runs.is_empty() {
                ""
            } else {
                "\nhint: one run at a time unless each claims its own QPs (roce run -j); use another --name for a second lab"
            };
            Err(format!("{e}{hint}"))
        }
    }
}

fn end_run(sh: &Shared, conn: u64) -> std::result::Result<RunReport, String> {
    let (streamer, report, last) = {
        let mut runs = sh.runs.lock().unwrap_or_else(|e| e.into_inner());
        let Some((id, streamer)) = runs.remove(&conn) else {
            return Err("this connection has no run in progress".into());
        };
        let Some(switch) = &sh.switch else { return Err(NO_SWITCH.into()) };
        (streamer, switch.end(id), runs.is_empty())
    };
    // The switch dropped the run's sender: the streamer sends what is queued and
    // ends, so every Wire frame precedes the answer to RunEnd.
    if let Some(t) = streamer {
        let _ = t.join();
    }
    if last {
        if let Err(e) = sh.begin_background_run() {
            log(&format!("restarting the standing fault rules: {e:#}"));
        }
    }
    let report = report.map_err(|e| e.to_string())?;
    *sh.last_run.lock().unwrap_or_else(|e| e.into_inner()) = Some(report.clone());
    Ok(report)
}

fn client_conn(sh: &Shared, stream: UnixStream, conn: u64) -> Result<()> {
    let mut reader = stream.try_clone()?;
    let writer = Arc::new(Mutex::new(stream));
    // (client id, global id) of the commands this connection started.
    let mut mine: Vec<(u32, u32)> = Vec::new();
    let result = loop {
        let f = match control::read_frame(&mut reader) {
            Ok(Some(f)) => f,
            Ok(None) => break Ok(()),
            Err(e) => break Err(anyhow::Error::from(e)),
        };
        sh.touch();
        match f.kind {
            Kind::Request => {
                let req: Request = match f.parse() {
                    Ok(r) => r,
                    Err(e) => {
                        respond(&writer, &Response::err(format!("bad request: {e}")))?;
                        continue;
                    }
                };
                match req {
                    Request::Exec { vm, cmd, timeout_ms, stdin } => {
                        let Some(v) = Vm::parse(&vm) else {
                            respond(
                                &writer,
                                &Response::err(format!("no VM `{vm}`: the lab has VMs a and b")),
                            )?;
                            continue;
                        };
                        let req = ExecRequest { cmd, timeout_ms, stdin };
                        match sh.start_exec(
                            v,
                            req,
                            Sink::Client { stream: writer.clone(), id: f.id },
                        ) {
                            Ok(gid) => mine.push((f.id, gid)),
                            Err(e) => respond(&writer, &Response::err(e))?,
                        }
                    }
                    Request::Status => respond(&writer, &Response::ok(sh.status()))?,
                    Request::RunBegin { pcap, rules, seed, live, claim } => {
                        let live = live.then(|| writer.clone());
                        match begin_run(sh, conn, RunRequest { pcap, rules, seed, live, claim }) {
                            Ok(()) => respond(&writer, &Response::ok(json!(null)))?,
                            Err(e) => respond(&writer, &Response::err(e))?,
                        }
                    }
                    Request::RunEnd => match end_run(sh, conn) {
                        Ok(r) => respond(&writer, &Response::ok(serde_json::to_value(r)?))?,
                        Err(e) => respond(&writer, &Response::err(e))?,
                    },
                    Request::Shutdown => {
                        log("shutdown requested");
                        sh.set_phase(Phase::Stopping);
                        sh.shutdown.store(true, Ordering::SeqCst);
                        respond(&writer, &Response::ok(json!(null)))?;
                    }
                }
            }
            // Kill, or stdin bytes, for a command this connection started.
            Kind::Kill | Kind::Stdin => {
                if let Some(&(_, gid)) = mine.iter().find(|(cid, _)| *cid == f.id) {
                    if let Some(vm) =
                        sh.routes.lock().unwrap_or_else(|e| e.into_inner()).get(&gid).map(|r| r.vm)
                    {
                        let _ = sh.send_to_agent(vm, &Frame::new(f.kind, gid, f.payload));
                    }
                }
            }
            other => break Err(anyhow::anyhow!("unexpected {other:?} frame from a client")),
        }
    };
    // The client went away: whatever it started dies with it.
    for (_, gid) in mine {
        let vm = sh.routes.lock().unwrap_or_else(|e| e.into_inner()).remove(&gid).map(|r| r.vm);
        if let Some(vm) = vm {
            let _ = sh.send_to_agent(vm, &Frame::new(Kind::Kill, gid, vec![]));
        }
    }
    let owns_run = sh.runs.lock().unwrap_or_else(|e| e.into_inner()).contains_key(&conn);
    if owns_run {
        log(&format!("client {conn} left during its run: ending the run"));
        let _ = end_run(sh, conn);
    }
    result
}
