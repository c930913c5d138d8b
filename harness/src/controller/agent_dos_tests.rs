//! The listening agent under the attacks of issue 31, on loopback, with the real
//! controller's link ([`Agent::remote`]: its handshake, its retries): each test
//! starts the agent as a child process (this test binary again, running
//! [`agent_child`]) with small `RLIMIT_NOFILE` / `RLIMIT_NPROC`, attacks it, and
//! reads its descriptors (`/proc/PID/fd`), threads (`/proc/PID/task`) and log.
//! Every loop is bounded in count and time; only 127.0.0.1 is reached.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::link::Agent;
use crate::agent::auth::Key;
use crate::agent::{self, limits, ListenOpts};
use crate::protocol::{FromAgent, ToAgent, VERSION};

/// The agent [`Spawned`] starts: serves on 127.0.0.1 with the key in
/// `ROCE_DOS_KEY`. Not a test of its own (without that variable it does nothing).
#[test]
#[ignore = "the agent child process of the tests below; they start it"]
fn agent_child() {
    let Some(path) = std::env::var_os("ROCE_DOS_KEY") else { return };
    let key = Key::load(std::path::Path::new(&path)).unwrap_or_else(|e| panic!("{e:#}"));
    // Descriptors taken before the agent starts (so it runs out early), opened
    // here rather than inherited: the lowest free numbers, under the limit.
    let pre: usize =
        std::env::var("ROCE_DOS_PREOPEN").ok().and_then(|n| n.parse().ok()).unwrap_or(0);
    for _ in 0..pre {
        std::mem::forget(std::fs::File::open("/dev/null").unwrap());
    }
    let r = agent::serve_listen(ListenOpts {
        addr: "127.0.0.1:0".into(),
        key: Some(key),
        insecure: false,
        heartbeat_deadline: std::env::var("ROCE_DOS_HEARTBEAT_MS")
            .ok()
            .and_then(|m| m.parse().ok())
            .map_or(Duration::from_secs(30), Duration::from_millis),
        handshake_within: agent::HANDSHAKE_WITHIN,
        limits: limits::Limits {
            allow: match std::env::var("ROCE_DOS_ALLOW") {
                Ok(c) if !c.is_empty() => {
                    limits::Allow::Cidrs(vec![c.parse().unwrap_or_else(|e| panic!("{e}"))])
                }
                _ => limits::Allow::LocalSubnet,
            },
            ..Default::default()
        },
    });
    panic!("the agent ended: {r:?}");
}

/// Limits for the child.
#[derive(Default, Clone, Copy)]
struct Rlimits {
    nofile: Option<u64>,
    nproc: Option<u64>,
    /// Descriptors the child starts with already open (so it runs out early).
    pre_opened: usize,
    /// Run as `nobody` (needs root; where RLIMIT_NPROC applies).
    nobody: bool,
    /// The heartbeat deadline, when not 30 s.
    heartbeat_ms: Option<u64>,
    /// `--allow`.
    allow: Option<&'static str>,
}

struct Spawned {
    child: Child,
    addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
    key: Key,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(name: &str, lim: Rlimits) -> Spawned {
    let dir = std::env::temp_dir().join(format!("roce-dos-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let dir = TempDir(dir);
    let kf = dir.0.join("k");
    Key::generate(&kf).unwrap();
    let key = Key::load(&kf).unwrap();
    if lim.nobody {
        std::os::unix::fs::chown(&dir.0, Some(65534), Some(65534)).unwrap();
        std::os::unix::fs::chown(&kf, Some(65534), Some(65534)).unwrap();
    }
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "controller::agent_dos_tests::agent_child",
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env("ROCE_DOS_KEY", &kf)
    .env("ROCE_DOS_ALLOW", lim.allow.unwrap_or(""))
    .env("ROCE_DOS_PREOPEN", lim.pre_opened.to_string())
    .env("ROCE_DOS_HEARTBEAT_MS", lim.heartbeat_ms.unwrap_or(30_000).to_string())
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    {
        // SAFETY: between fork and exec only async-signal-safe calls (setrlimit,
        // setgroups, setgid, setuid), on values computed before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let set = |what, n: u64| {
                    let r = libc::rlimit { rlim_cur: n, rlim_max: n };
                    if libc::setrlimit(what, &r) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                };
                if let Some(n) = lim.nofile {
                    set(libc::RLIMIT_NOFILE, n)?;
                }
                if let Some(n) = lim.nproc {
                    set(libc::RLIMIT_NPROC, n)?;
                }
                if lim.nobody
                    && (libc::setgroups(0, std::ptr::null()) != 0
                        || libc::setgid(65534) != 0
                        || libc::setuid(65534) != 0)
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let log = log.clone();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(a) = line
                    .split_once("listening on ")
                    .and_then(|(_, r)| r.split(';').next())
                    .and_then(|a| a.parse::<SocketAddr>().ok())
                {
                    let _ = tx.send(a);
                }
                log.lock().unwrap().push(line);
            }
        });
    }
    let addr = rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("the agent did not start: {:?}", log.lock().unwrap()));
    Spawned { child, addr, log, key, _dir: dir }
}

impl Spawned {
    fn pid(&self) -> u32 {
        self.child.id()
    }
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
    fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).map_or(0, |d| d.count())
    }
    fn threads(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/task", self.pid())).map_or(0, |d| d.count())
    }
    fn lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
    /// The real controller: its link's handshake (with its retries), then Hello
    /// answered. How long it took.
    fn controller(&self) -> Result<Duration, String> {
        let t = Instant::now();
        let mut a = Agent::remote(&self.addr.to_string(), "a", Some(&self.key))
            .map_err(|e| format!("{e:#}"))?;
        match a.request(&ToAgent::Hello { version: VERSION }, Duration::from_secs(10)) {
            Ok(FromAgent::Hello { .. }) => Ok(t.elapsed()),
            other => Err(format!("{other:?}")),
        }
    }
    /// Waits (at most `within`) until descriptors and threads are back at
    /// `base`; what they were last.
    fn settle(&self, base: (usize, usize), within: Duration) -> (usize, usize, Duration) {
        let t = Instant::now();
        loop {
            let now = (self.fds(), self.threads());
            if (now.0 <= base.0 && now.1 <= base.1) || t.elapsed() >= within {
                return (now.0, now.1, t.elapsed());
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

/// `n` connections that each send one byte a second (never a whole challenge);
/// one the agent closes is opened again at once (the attacker re-takes every
/// place it frees). Runs until `stop`, at most `most`.
fn slowloris(
    addr: SocketAddr,
    n: usize,
    stop: Arc<AtomicBool>,
    most: Duration,
) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        let until = Instant::now() + most;
        let open = || {
            TcpStream::connect(addr).ok().inspect(|s| {
                let _ = s.set_nonblocking(true);
            })
        };
        let mut conns: Vec<Option<TcpStream>> = (0..n).map(|_| open()).collect();
        let mut opened = n as u64;
        let mut last_byte = Instant::now();
        while !stop.load(Ordering::SeqCst) && Instant::now() < until {
            let byte = last_byte.elapsed() >= Duration::from_secs(1);
            if byte {
                last_byte = Instant::now();
            }
            for c in conns.iter_mut() {
                let gone = match c {
                    None => true,
                    Some(s) => {
                        let mut b = [0u8; 256];
                        match s.read(&mut b) {
                            // Told why (a refusal) or closed: gone either way.
                            Ok(_) => true,
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                                byte && s.write(b"{").is_err()
                            }
                            Err(_) => true,
                        }
                    }
                };
                if gone {
                    *c = open();
                    opened += 1;
                }
            }
            thread::sleep(Duration::from_millis(20));
        }
        opened
    })
}

fn count(lines: &[String], what: &str) -> usize {
    lines.iter().filter(|l| l.contains(what)).count()
}

/// Issue 31, 1: 100 slow connections from the controller's own address, which
/// re-take every place freed; the real controller arriving 2 s later is served
/// within the bound the book states (docs/src/guide/real-hosts.md) (5 s; measured: well under 1 s).
#[test]
fn slowloris_does_not_lock_out_the_real_controller() {
    let mut a = spawn("slowloris", Rlimits { nofile: Some(64), ..Default::default() });
    let stop = Arc::new(AtomicBool::new(false));
    let attack = slowloris(a.addr, 100, stop.clone(), Duration::from_secs(30));
    thread::sleep(Duration::from_secs(2));
    let mut took = Vec::new();
    for _ in 0..3 {
        took.push(a.controller().unwrap_or_else(|e| panic!("not served: {e}")));
        thread::sleep(Duration::from_millis(300));
    }
    stop.store(true, Ordering::SeqCst);
    let opened = attack.join().unwrap();
    eprintln!("slowloris: {opened} attacking connections; the controller served after {took:?}");
    assert!(took.iter().all(|t| *t < Duration::from_secs(5)), "{took:?}");
    assert!(a.alive(), "the agent lives");
    let lines = a.lines();
    assert_eq!(count(&lines, "serving (authenticated)"), 3);
    // Lines about single connections are bounded (the rest counted in one line).
    assert!(lines.len() < 400, "{} log lines", lines.len());
}

/// Issue 31, 2: 1,000 connect/close cycles leave no descriptor and no thread
/// behind: back at the baseline within a second, and never a thread more.
#[test]
fn a_thousand_connect_close_cycles_leave_nothing_behind() {
    let a = spawn("cycles", Rlimits::default());
    // The first controller opens what a session keeps for good; the baseline is
    // after it.
    a.controller().unwrap();
    let base = a.settle((0, 0), Duration::from_millis(300));
    let base = (base.0, base.1);
    let t = Instant::now();
    let mut most_threads = 0;
    for i in 0..1000 {
        let s = TcpStream::connect(a.addr).unwrap();
        if i % 2 == 0 {
            let _ = (&s).write_all(b"\x00\x00\x00\x05{\"a\"");
        }
        drop(s);
        if i % 100 == 0 {
            most_threads = most_threads.max(a.threads());
        }
    }
    let during = (a.fds(), a.threads());
    let cycles = t.elapsed();
    let (fds, threads, after) = a.settle(base, Duration::from_secs(1));
    eprintln!(
        "1,000 cycles in {cycles:?}: descriptors {} before, {} right after, {fds} {after:?} later; threads {} before, at most {most_threads} during, {threads} after",
        base.0, during.0, base.1
    );
    assert!(fds <= base.0, "descriptors {fds}, baseline {}", base.0);
    assert!(threads <= base.1, "threads {threads}, baseline {}", base.1);
    assert!(most_threads <= base.1, "a thread per connection: {most_threads} > {}", base.1);
    a.controller().unwrap();
}

/// Issue 31, 4: out of descriptors (`RLIMIT_NOFILE` 64, most of them already
/// taken), 120 paced connect/close cycles and 60 connections held open: the
/// agent lives, logs accept failures once per 10 s (not in a loop), and the real
/// controller is served while the 60 are still held.
#[test]
fn out_of_descriptors_the_agent_lives_and_serves() {
    let mut a = spawn("nofile", Rlimits { nofile: Some(64), pre_opened: 48, ..Default::default() });
    for _ in 0..120 {
        if let Ok(s) = TcpStream::connect(a.addr) {
            drop(s);
        }
        thread::sleep(Duration::from_millis(5));
    }
    let held: Vec<TcpStream> = (0..60).filter_map(|_| TcpStream::connect(a.addr).ok()).collect();
    thread::sleep(Duration::from_millis(300));
    let took = a.controller().unwrap_or_else(|e| panic!("not served: {e}"));
    drop(held);
    thread::sleep(Duration::from_millis(300));
    assert!(a.alive(), "the agent lives");
    let lines = a.lines();
    let accept = count(&lines, "accept: ");
    eprintln!(
        "out of descriptors: controller served after {took:?}; {accept} accept lines, {} lines in all",
        lines.len()
    );
    assert!(accept >= 1, "the limit was reached and said: {lines:#?}");
    assert!(accept <= 2, "accept failures are logged once per 10 s: {accept}");
    assert!(
        lines.iter().any(|l| l.contains("RLIMIT_NOFILE") && l.contains("64")),
        "names the limit"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(lines.len() < 300, "{} log lines", lines.len());
}

/// Issue 31, 3: as `nobody` with a thread limit of 40 (`ulimit -u 40`), paced
/// and fast connect/close cycles do not kill the agent: it starts no thread for a
/// connection at all.
#[test]
#[ignore = "needs root: runs the agent as nobody, where RLIMIT_NPROC applies"]
fn under_a_thread_limit_the_agent_lives_and_serves() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "needs root (to run the agent as nobody)");
    let mut a = spawn(
        "nproc",
        Rlimits { nproc: Some(40), nofile: Some(64), nobody: true, ..Default::default() },
    );
    let base = a.threads();
    for _ in 0..56 {
        drop(TcpStream::connect(a.addr));
        thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..1000 {
        drop(TcpStream::connect(a.addr));
    }
    let threads = a.threads();
    let took = a.controller().unwrap_or_else(|e| panic!("not served: {e}"));
    assert!(a.alive(), "the agent lives");
    eprintln!("ulimit -u 40: threads {base} before, {threads} after 1,056 cycles; controller served after {took:?}");
    assert!(threads <= base, "{threads} threads, {base} before");
    assert!(!a.lines().iter().any(|l| l.contains("panicked")), "{:#?}", a.lines());
}

/// Waits (at most 3 s) for a log line with `what` in it.
fn wait_line(a: &Spawned, what: &str) -> String {
    let t = Instant::now();
    loop {
        if let Some(l) = a.lines().into_iter().find(|l| l.contains(what)) {
            return l;
        }
        assert!(t.elapsed() < Duration::from_secs(3), "no line with {what:?}: {:#?}", a.lines());
        thread::sleep(Duration::from_millis(20));
    }
}

/// Issue 31, 5: each refusal is at once, and each side says what happened.
#[test]
fn refusals_come_at_once_and_say_what_happened_on_both_sides() {
    let a = spawn("messages", Rlimits::default());
    // A controller without --key-file: told at once, not after 10 s.
    let t = Instant::now();
    let mut c = Agent::remote(&a.addr.to_string(), "a", None).unwrap();
    let e = format!(
        "{:#}",
        c.request(&ToAgent::Hello { version: VERSION }, Duration::from_secs(15)).unwrap_err()
    );
    assert!(e.contains("this agent requires authentication"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2), "at once: {:?}", t.elapsed());
    let l = wait_line(&a, "unauthenticated message of the agent protocol");
    assert!(l.contains("refused: sent an unauthenticated message") && !l.contains("within"), "{l}");

    // A wrong key: said on both sides.
    let dir = std::env::temp_dir().join(format!("roce-dos-other-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Key::generate(&dir.join("k")).unwrap();
    let other = Key::load(&dir.join("k")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let e = format!("{:#}", Agent::remote(&a.addr.to_string(), "a", Some(&other)).err().unwrap());
    assert!(e.contains("the agent could not prove it has our key"), "{e}");
    let l = wait_line(&a, "the controller's key is not this agent's");
    assert!(l.contains("found our proof wrong"), "{l}");

    // A nonce of the wrong length is said as such, not as an unknown scheme.
    let mut s = TcpStream::connect(a.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let body = format!(r#"{{"auth":"roce-hmac-sha256-v1","nonce":"{}"}}"#, "ab".repeat(16));
    s.write_all(&(body.len() as u32).to_be_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.contains("nonce is 16 bytes") && !answer.contains("unknown"), "{answer}");
    let l = wait_line(&a, "nonce is 16 bytes");
    assert!(!l.contains("unknown authentication scheme"), "{l}");
}

/// Issue 31, 5: a controller that has the key but trickles a message a byte at
/// a time is dropped at the heartbeat deadline, which counts per message.
#[test]
fn the_heartbeat_deadline_counts_per_message_not_per_read() {
    let a = spawn("trickle", Rlimits { heartbeat_ms: Some(1000), ..Default::default() });
    let s = TcpStream::connect(a.addr).unwrap();
    let (mut r, mut w) = (s.try_clone().unwrap(), s.try_clone().unwrap());
    let session = crate::agent::auth::client(&a.key, &mut r, &mut w).unwrap();
    // A whole Hello, sealed, then sent one byte every 300 ms: each read comes
    // well within the deadline, the message never does.
    let mut sealed = Vec::new();
    {
        let (_, mut w) = session.wrap(std::io::empty(), &mut sealed);
        crate::protocol::write_msg(&mut w, &ToAgent::Hello { version: VERSION }).unwrap();
    }
    let t = Instant::now();
    let mut dropped = None;
    let mut raw = s.try_clone().unwrap();
    for b in sealed.iter().take(20) {
        if raw.write_all(&[*b]).is_err() {
            dropped = Some(t.elapsed());
            break;
        }
        thread::sleep(Duration::from_millis(300));
    }
    let l = wait_line(&a, "sent no whole message");
    assert!(l.contains("not even a heartbeat, for 1s: dropped"), "{l}");
    let took = dropped.unwrap_or(t.elapsed());
    assert!(took < Duration::from_secs(4), "dropped at the 1 s deadline, not after: {took:?}");
}

/// `--allow` applies before any handshake work: a source outside it is told so
/// and closed before a byte of it is read.
#[test]
fn outside_allow_a_connection_is_refused_before_any_handshake_work() {
    let a = spawn("allow", Rlimits { allow: Some("10.0.0.0/8"), ..Default::default() });
    let t = Instant::now();
    let e = format!("{:#}", Agent::remote(&a.addr.to_string(), "a", Some(&a.key)).err().unwrap());
    assert!(e.contains("does not serve 127.0.0.1 (outside its --allow)"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2), "at once, not retried: {:?}", t.elapsed());
    wait_line(&a, "127.0.0.1 (outside its --allow)");
    let lines = a.lines();
    assert!(!lines[1..].iter().any(|l| l.contains("challenge")), "{lines:#?}");
}

/// Strangers churning as fast as they can from the controller's own address
/// (two threads opening and closing connections, a third holding 50 open and
/// sending half a challenge on each): the real controller still gets in, within
/// the bound the book states (5 s).
#[test]
fn a_real_controller_gets_in_while_strangers_churn() {
    let mut a = spawn("churn", Rlimits { nofile: Some(64), ..Default::default() });
    let stop = Arc::new(AtomicBool::new(false));
    let addr = a.addr;
    let churn: Vec<_> = (0..2)
        .map(|k| {
            let stop = stop.clone();
            thread::spawn(move || {
                let until = Instant::now() + Duration::from_secs(20);
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) && Instant::now() < until && n < 200_000 {
                    if let Ok(mut s) = TcpStream::connect(addr) {
                        if k == 1 {
                            let _ = s.write_all(b"\x00\x00\x00\x60{\"auth\":");
                        }
                    }
                    n += 1;
                }
                n
            })
        })
        .collect();
    let hold = slowloris(addr, 50, stop.clone(), Duration::from_secs(20));
    thread::sleep(Duration::from_millis(500));
    let mut took = Vec::new();
    for _ in 0..5 {
        took.push(a.controller().unwrap_or_else(|e| panic!("not served: {e}")));
        thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::SeqCst);
    let n: u64 = churn.into_iter().map(|t| t.join().unwrap()).sum::<u64>() + hold.join().unwrap();
    eprintln!("churn: {n} connections; the controller served after {took:?}");
    assert!(a.alive());
    assert!(took.iter().all(|t| *t < Duration::from_secs(5)), "{took:?}");
}
