//! The command runner inside each lab VM (`roce lab agent`, started by the guest init
//! from the 9p share). It reads commands from the virtio-serial port `roce.ctl`, runs each
//! as `sh -c CMD` in its own process group, streams stdout and stderr back as they
//! come, enforces the timeout, and reports how the command ended.
//!
//! Owns: the VM side of the control channel and the commands running there.
//! Imports: [`control`] (the framing and messages) only.
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::control::{self, ExecRequest, ExitStatus, Frame, Hello, Kind};

/// The virtio-serial port name the host side is attached to.
pub const PORT_NAME: &str = "roce.ctl";
/// On a bench (`--wire bench`), the port each VM's listening agent takes on its
/// management link (`lab.mgmt=PORT`), with the key the bench was brought up with
/// ([`BENCH_KEY`] in the share).
pub const MGMT_AGENT_PORT: u16 = 7000;
/// The agents' key on a bench, in the host share (`/host/agent.key` in the VMs).
pub const BENCH_KEY: &str = "agent.key";

type Writer = Arc<Mutex<File>>;

fn send(w: &Writer, f: &Frame) -> io::Result<()> {
    let mut g = w.lock().unwrap_or_else(|p| p.into_inner());
    f.write_to(&mut *g)
}

/// `/dev/vportNpM` whose name is `roce.ctl` (no udev in the lab VMs, so no
/// `/dev/virtio-ports/` symlinks).
fn find_port() -> Result<PathBuf> {
    let dir = Path::new("/sys/class/virtio-ports");
    let entries = std::fs::read_dir(dir).with_context(|| {
        format!("no virtio-serial ports ({} unreadable): is virtio_console loaded?", dir.display())
    })?;
    for e in entries.flatten() {
        let name = std::fs::read_to_string(e.path().join("name")).unwrap_or_default();
        if name.trim() == PORT_NAME {
            return Ok(Path::new("/dev").join(e.file_name()));
        }
    }
    bail!("no virtio-serial port named {PORT_NAME} under {}", dir.display())
}

fn cmdline_param(key: &str) -> Option<String> {
    let cmdline = std::fs::read_to_string("/proc/cmdline").ok()?;
    cmdline
        .split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|v| v.strip_prefix('=')).map(str::to_string))
}

pub fn run(port: Option<PathBuf>) -> Result<u8> {
    let path = match port {
        Some(p) => p,
        None => find_port()?,
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening the control port {}", path.display()))?;
    let writer: Writer = Arc::new(Mutex::new(file.try_clone()?));
    let mut reader = file;

    let hello = Hello {
        instance: std::process::id() as u64 ^ (dissector::capture::unix_now_ns() << 16),
        vm: cmdline_param("lab.vm").unwrap_or_else(|| "?".into()),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
    };
    // Say hello until the daemon answers with a sync frame (the host end may not
    // have been connected when the first one went out), then a heartbeat.
    let synced = Arc::new(AtomicBool::new(false));
    {
        let (w, synced) = (writer.clone(), synced.clone());
        let hello = Frame::json(Kind::Hello, 0, &hello);
        thread::spawn(move || {
            while !synced.load(Ordering::SeqCst) {
                let _ = send(&w, &hello);
                thread::sleep(Duration::from_secs(1));
            }
            loop {
                let _ = send(&w, &Frame::new(Kind::Heartbeat, 0, Vec::new()));
                thread::sleep(control::HEARTBEAT);
            }
        });
    }
    if !control::skip_to_sync(&mut reader)? {
        bail!("control port closed before the host said sync");
    }
    synced.store(true, Ordering::SeqCst);
    eprintln!("roce agent: synced on {}", path.display());

    let running: Arc<Mutex<HashMap<u32, Running>>> = Arc::default();
    // Stdin of commands started with `stdin: true`, registered before the command
    // starts so that no early Stdin frame is lost (the channel buffers them).
    let stdins: Arc<Mutex<HashMap<u32, mpsc::Sender<Vec<u8>>>>> = Arc::default();
    loop {
        let frame = match control::read_frame(&mut reader)? {
            Some(f) => f,
            None => bail!("control port closed (host side went away)"),
        };
        match frame.kind {
            Kind::Request => {
                let id = frame.id;
                match frame.parse::<ExecRequest>() {
                    Ok(req) => {
                        let stdin = req.stdin.then(|| {
                            let (tx, rx) = mpsc::channel();
                            stdins.lock().unwrap_or_else(|p| p.into_inner()).insert(id, tx);
                            rx
                        });
                        let (w, running, stdins) =
                            (writer.clone(), running.clone(), stdins.clone());
                        thread::spawn(move || {
                            exec(id, req, stdin, &w, &running);
                            stdins.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                        });
                    }
                    Err(e) => {
                        let _ = send(
                            &writer,
                            &Frame::json(Kind::Exit, id, &ExitStatus::failed(e.to_string())),
                        );
                    }
                }
            }
            Kind::Kill => {
                let map = running.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(r) = map.get(&frame.id) {
                    r.killed.store(true, Ordering::SeqCst);
                    kill_group(r.pgid);
                }
            }
            Kind::Stdin => {
                let mut map = stdins.lock().unwrap_or_else(|p| p.into_inner());
                if frame.payload.is_empty() {
                    // Dropping the sender ends the writer thread, which closes stdin.
                    map.remove(&frame.id);
                } else if let Some(tx) = map.get(&frame.id) {
                    let _ = tx.send(frame.payload);
                }
            }
            Kind::Sync => {}
            other => eprintln!("roce agent: ignoring unexpected {other:?} frame"),
        }
    }
}

struct Running {
    pgid: i32,
    killed: Arc<AtomicBool>,
}

fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

fn exec(
    id: u32,
    req: ExecRequest,
    stdin: Option<mpsc::Receiver<Vec<u8>>>,
    w: &Writer,
    running: &Mutex<HashMap<u32, Running>>,
) {
    let start = Instant::now();
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(&req.cmd)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .env("HOME", "/root")
        .env("TERM", "dumb")
        .current_dir("/root");
    // SAFETY: setsid is async-signal-safe; the closure touches nothing else.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = send(
                w,
                &Frame::json(Kind::Exit, id, &ExitStatus::failed(format!("cannot start sh: {e}"))),
            );
            return;
        }
    };
    let pgid = child.id() as i32;
    let killed = Arc::new(AtomicBool::new(false));
    running
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, Running { pgid, killed: killed.clone() });

    if let (Some(rx), Some(mut sink)) = (stdin, child.stdin.take()) {
        // A command that does not read its stdin must not block the runner: a thread
        // of its own writes it, until the client closes it or the command ends.
        thread::spawn(move || {
            for data in rx {
                if sink.write_all(&data).and_then(|()| sink.flush()).is_err() {
                    break;
                }
            }
        });
    }
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let mut pumps = 0;
    if let Some(out) = child.stdout.take() {
        pumps += 1;
        pump(out, Kind::Stdout, id, w.clone(), done_tx.clone());
    }
    if let Some(err) = child.stderr.take() {
        pumps += 1;
        pump(err, Kind::Stderr, id, w.clone(), done_tx.clone());
    }
    drop(done_tx);

    let deadline = req.timeout_ms.map(|ms| start + Duration::from_millis(ms));
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) => {}
            Err(e) => break Err(e),
        }
        if !timed_out && deadline.is_some_and(|d| Instant::now() >= d) {
            timed_out = true;
            kill_group(pgid);
        }
        if killed.load(Ordering::SeqCst) {
            kill_group(pgid);
        }
        thread::sleep(Duration::from_millis(20));
    };
    // Whatever the command left running in its group goes with it; then the pipes
    // reach end of file. Something that escaped the group may hold them open: give
    // up waiting on it after a while.
    kill_group(pgid);
    let until = Instant::now() + Duration::from_secs(2);
    for _ in 0..pumps {
        let left = until.saturating_duration_since(Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            break;
        }
    }
    running.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
    let elapsed_ms = start.elapsed().as_millis() as u64;
    let exit = match status {
        Ok(s) => {
            ExitStatus { code: s.code(), signal: s.signal(), timed_out, error: None, elapsed_ms }
        }
        Err(e) => ExitStatus {
            error: Some(format!("waiting for the command: {e}")),
            elapsed_ms,
            ..Default::default()
        },
    };
    let _ = send(w, &Frame::json(Kind::Exit, id, &exit));
}

fn pump(mut r: impl Read + Send + 'static, kind: Kind, id: u32, w: Writer, done: mpsc::Sender<()>) {
    thread::spawn(move || {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if send(&w, &Frame::new(kind, id, buf[..n].to_vec())).is_err() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = done.send(());
    });
}
