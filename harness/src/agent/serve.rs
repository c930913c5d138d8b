//! Serving: the agent on stdin/stdout (in a lab VM) or listening for one
//! controller at a time, each connection through the front door ([`super::listen`])
//! and one session thread running the executor ([`super::exec`]).
//!
//! Owns: [`serve_stdio`], [`serve_listen`], [`ListenOpts`], [`NoKey`] and the
//! session's deadlines. Imports: `super::{exec, listen, limits, auth}`,
//! `crate::protocol`; `lab::progress::to_stderr` for its log lines.
use std::cell::Cell;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::{auth, exec, limits, listen};
use crate::protocol;

/// Serves the controller on stdin/stdout (how the lab starts the agent): one
/// scenario after another, each from a fresh state (everything of the last one
/// freed at its Teardown, but the device context and a PD, kept open), until the
/// controller closes stdin. A lab's agents stay up for a whole run instead of
/// starting once per scenario. `limits`: the agent's (a lab's are the defaults,
/// but for `--capture-command`).
pub(crate) fn serve_stdio(limits: &limits::Limits) -> Result<()> {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let (mut r, mut w) = (stdin.lock(), stdout.lock());
    let mut device = exec::Device::kept();
    while exec::serve(&mut r, &mut w, limits, &mut device, &mut || {})
        .context("the controller connection")?
    {}
    Ok(())
}

/// A line of the listening agent's log on stderr, from any thread: one write of
/// the whole line through [`lab::progress::to_stderr`], so lines of connections served side
/// by side never interleave.
macro_rules! say {
    ($($t:tt)*) => {
        lab::progress::to_stderr(format!("{}\n", format_args!($($t)*)).as_bytes())
    };
}

/// How a listening agent serves.
#[derive(Debug)]
pub(crate) struct ListenOpts {
    pub(crate) addr: String,
    /// `None`: unauthenticated, which only loopback or `insecure` allows.
    pub(crate) key: Option<auth::Key>,
    /// `--insecure`: unauthenticated off loopback too (a lab network one trusts).
    pub(crate) insecure: bool,
    /// A controller that sends no whole message for longer is dropped.
    pub(crate) heartbeat_deadline: Duration,
    /// A connection still in its handshake after this is dropped
    /// ([`HANDSHAKE_WITHIN`]).
    pub(crate) handshake_within: Duration,
    pub(crate) limits: limits::Limits,
}

/// Serves controllers on `opts.addr`, one at a time. A connection holds the agent
/// only once it has proved it has the key; until then it is one of a bounded
/// number of handshakes ([`listen`]), each dropped after [`HANDSHAKE_WITHIN`].
/// While a controller is served, every other connection is told who is being
/// served and closed at once, never queued.
pub(crate) fn serve_listen(opts: ListenOpts) -> Result<()> {
    let l = TcpListener::bind(&opts.addr).with_context(|| format!("listening on {}", opts.addr))?;
    serve_on(l, opts)
}

/// `--listen` off loopback with neither a key nor `--insecure`: bad input (the
/// one place this rule is decided).
#[derive(Debug)]
pub(crate) struct NoKey(String);

impl std::fmt::Display for NoKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NoKey {}

fn serve_on(l: TcpListener, opts: ListenOpts) -> Result<()> {
    let local = l.local_addr()?;
    let nofile = listen::nofile_limit();
    let places = listen::places(nofile);
    let allow = match &opts.limits.allow {
        limits::Allow::Cidrs(c) => Some(c.clone()),
        limits::Allow::LocalSubnet => None,
    };
    let bounds = format!(
        "at most {places} connections in their handshake ({} per source address past their challenge; the descriptor limit is {}), each for {:?}{}",
        listen::PER_SOURCE,
        nofile.map_or("unlimited".into(), |n| n.to_string()),
        opts.handshake_within,
        match &allow {
            Some(nets) => format!(
                "; only from {}",
                nets.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", ")
            ),
            None => String::new(),
        }
    );
    let announce = match (&opts.key, opts.insecure, local.ip().is_loopback()) {
        (Some(_), _, _) => format!("roce agent: listening on {local}; a controller must prove it has the key (one at a time); {bounds}"),
        (None, true, _) => format!("roce agent: WARNING: listening on {local} WITHOUT authentication (--insecure): anyone who reaches it can drive this agent; {bounds}"),
        (None, false, true) => format!("roce agent: listening on {local} without authentication: no --key-file, which only loopback allows; {bounds}"),
        (None, false, false) => {
            return Err(NoKey(format!(
                "refusing to listen on {local} without a key (no --key-file): anyone who reaches it could drive a root process\n\
                 hint: `roce agent --gen-key /etc/roce/agent.key`, copy that file to the controller, and pass --key-file on both sides \
                 (or --insecure, on a lab network you trust)"
            ))
            .into())
        }
    };
    let shared = Arc::new(Listener { opts, holder: listen::Holder::new("") });
    // The one thread that serves controllers, started now: no connection ever
    // needs a thread started for it (a thread limit cannot fail one later).
    let (tx, rx) = mpsc::channel::<(listen::Arrived, u64)>();
    let session = shared.clone();
    std::thread::Builder::new()
        .name("roce-agent-session".into())
        .spawn(move || {
            for (a, id) in rx {
                let peer = a.peer.to_string();
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    serve_session(a, id, &session)
                }));
                match r {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => say!("roce agent: {peer}: {e:#}"),
                    Err(_) => say!("roce agent: {peer}: the session panicked; it ended, everything it set up is freed, and the agent serves on"),
                }
            }
        })
        .context("starting the agent's session thread (is the thread limit, ulimit -u, reached?)")?;
    // Said once the session thread is running: whoever waits for this line
    // (a test counting threads, a wrapper script) sees the agent as it stays.
    say!("{announce}");
    let front = listen::Front {
        who: "roce agent",
        key: shared.opts.key.as_ref(),
        handshake_within: shared.opts.handshake_within,
        allow: allow.as_deref(),
        places,
    };
    let mut back = Back { l: &shared, tx };
    listen::serve(&l, &front, &mut back).with_context(|| format!("serving on {local}"))
}

/// What the front door and the session thread share.
struct Listener {
    opts: ListenOpts,
    /// The controller being served.
    holder: listen::Holder,
}

/// The front door's way to the session thread.
struct Back<'a> {
    l: &'a Listener,
    tx: mpsc::Sender<(listen::Arrived, u64)>,
}

impl listen::Back for Back<'_> {
    fn busy(&self) -> Option<String> {
        self.l.holder.busy()
    }

    fn arrived(&mut self, a: listen::Arrived) {
        let peer = a.peer.to_string();
        let id = match self.l.holder.claim(&peer) {
            Ok(id) => id,
            Err(why) => {
                a.refuse(&protocol::FromAgent::error(why.clone(), None));
                say!("roce agent: {peer}: refused after its handshake, {why}");
                return;
            }
        };
        if let Err(mpsc::SendError((a, id))) = self.tx.send((a, id)) {
            Release { l: self.l, id }.now();
            let _ = a.stream.shutdown(std::net::Shutdown::Both);
            say!("roce agent: {peer}: closed: the session thread is gone");
        }
    }
}

/// Frees the agent for the next controller: when its controller's session has
/// torn down (before the answer goes out, so a controller that starts its next
/// scenario at once is not told "busy"), and in any case when the session ends.
/// Only ever its own claim.
struct Release<'a> {
    l: &'a Listener,
    id: u64,
}

impl Release<'_> {
    fn now(&self) {
        self.l.holder.release(self.id);
    }
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.now();
    }
}

/// The socket under a session's reader: each read waits only for what is left of
/// the current message's deadline ([`PerMessage`] sets it).
struct Timed<'a> {
    s: &'a TcpStream,
    until: Rc<Cell<Option<Instant>>>,
    within: Duration,
}

impl Read for Timed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left =
            self.until.get().map_or(self.within, |u| u.saturating_duration_since(Instant::now()));
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no whole message within {:?}", self.within),
            ));
        }
        self.s.set_read_timeout(Some(left))?;
        self.s.read(buf)
    }
}

/// Over the protocol's plain frames: starts the deadline of each message when the
/// wait for it begins, so a controller trickling bytes cannot stretch it (the
/// heartbeat deadline counts per message, not per read).
struct PerMessage<R> {
    inner: R,
    until: Rc<Cell<Option<Instant>>>,
    within: Duration,
    len: [u8; 4],
    len_got: usize,
    body_left: usize,
}

impl<R: Read> Read for PerMessage<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        if self.len_got == 0 && self.body_left == 0 {
            self.until.set(Some(Instant::now() + self.within));
        }
        if self.len_got < 4 {
            let want = (4 - self.len_got).min(out.len());
            let n = self.inner.read(&mut out[..want])?;
            self.len[self.len_got..self.len_got + n].copy_from_slice(&out[..n]);
            self.len_got += n;
            if self.len_got == 4 {
                self.body_left = u32::from_be_bytes(self.len) as usize;
                if self.body_left == 0 {
                    self.len_got = 0;
                }
            }
            return Ok(n);
        }
        let want = self.body_left.min(out.len());
        let n = self.inner.read(&mut out[..want])?;
        self.body_left -= n;
        if self.body_left == 0 {
            self.len_got = 0;
        }
        Ok(n)
    }
}

/// One controller that proved the key (or, without a key, sent its first byte):
/// the protocol until it ends it, falls silent, or sends something that fails
/// authentication. Everything it set up is freed when this returns.
fn serve_session(a: listen::Arrived, id: u64, l: &Listener) -> Result<()> {
    let release = Release { l, id };
    let peer = a.peer;
    let s = &a.stream;
    let _ = s.set_nodelay(true);
    let within = l.opts.heartbeat_deadline;
    let until = Rc::new(Cell::new(None));
    let timed = Timed { s, until: until.clone(), within };
    let early = std::io::Cursor::new(a.early).chain(timed);
    let keyed = a.session.is_some();
    let (r, mut w): (Box<dyn Read + '_>, Box<dyn Write + '_>) = match a.session {
        Some(session) => {
            let (ar, aw) = session.wrap(early, s);
            (Box::new(ar), Box::new(aw))
        }
        None => (Box::new(early), Box::new(s)),
    };
    let mut r = PerMessage { inner: r, until, within, len: [0; 4], len_got: 0, body_left: 0 };
    let _ = s.set_write_timeout(Some(within));
    say!("roce agent: {peer}: serving{}", if keyed { " (authenticated)" } else { "" });
    match exec::serve(&mut r, &mut w, &l.opts.limits, &mut exec::Device::default(), &mut || {
        release.now()
    }) {
        Ok(true) => {
            say!("roce agent: {peer}: done");
            Ok(())
        }
        Ok(false) => {
            bail!("closed the connection before its Teardown; everything it set up is freed")
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            bail!("sent no whole message, not even a heartbeat, for {within:?}: dropped; everything it set up is freed")
        }
        Err(e) => bail!("{e}; everything it set up is freed"),
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    use super::auth::{self, Key, Session};
    use super::*;
    use crate::protocol::{self, FromAgent, ToAgent, VERSION};

    #[test]
    fn busy_answers_say_since_when_in_utc() {
        let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_795_465_867);
        assert_eq!(crate::agent::listen::utc(t), "2026-11-23T20:31:07Z");
    }

    fn test_key() -> Key {
        let dir = std::env::temp_dir().join(format!(
            "roce-listen-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("k");
        Key::generate(&f).unwrap();
        let k = Key::load(&f).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        k
    }

    /// A listening agent on a free loopback port, serving in the background.
    fn agent(key: Option<Key>, heartbeat: Duration, handshake: Duration) -> std::net::SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let opts = ListenOpts {
            addr: addr.to_string(),
            key,
            insecure: false,
            heartbeat_deadline: heartbeat,
            handshake_within: handshake,
            limits: Default::default(),
        };
        std::thread::spawn(move || serve_on(l, opts));
        addr
    }

    struct Controller {
        r: Box<dyn Read>,
        w: Box<dyn Write>,
        s: TcpStream,
    }

    impl Controller {
        fn connect(addr: std::net::SocketAddr, key: &Key) -> anyhow::Result<Controller> {
            let s = TcpStream::connect(addr)?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            let (mut r, mut w) = (s.try_clone()?, s.try_clone()?);
            let session: Session = auth::client(key, &mut r, &mut w)?;
            let (r, w) = session.wrap(r, w);
            Ok(Controller { r: Box::new(r), w: Box::new(w), s })
        }
        /// Connects, trying again until `within` (the agent may be finishing
        /// with the previous connection).
        fn connect_within(addr: std::net::SocketAddr, key: &Key, within: Duration) -> Controller {
            let until = Instant::now() + within;
            loop {
                match Controller::connect(addr, key) {
                    Ok(c) => return c,
                    Err(_) if Instant::now() < until => {
                        std::thread::sleep(Duration::from_millis(50))
                    }
                    Err(e) => panic!("not served within {within:?}: {e:#}"),
                }
            }
        }
        fn hello(&mut self) -> anyhow::Result<FromAgent> {
            protocol::write_msg(&mut self.w, &ToAgent::Hello { version: VERSION })?;
            protocol::read_msg::<_, FromAgent>(&mut self.r)?
                .ok_or_else(|| anyhow::anyhow!("closed"))
        }
    }

    fn served(c: &mut Controller) -> bool {
        matches!(c.hello(), Ok(FromAgent::Hello { version: VERSION, .. }))
    }

    #[test]
    fn an_idle_connection_does_not_hold_the_agent_and_is_dropped_at_its_deadline() {
        let key = test_key();
        let addr = agent(Some(key.clone()), Duration::from_secs(30), Duration::from_secs(3));
        let mut idle = TcpStream::connect(addr).unwrap();
        let opened = Instant::now();
        let mut c = Controller::connect(addr, &key)
            .expect("a real controller is served while the idle one waits");
        assert!(served(&mut c));
        // Served while the idle connection was still open (not after it was dropped).
        idle.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        assert!(
            matches!(idle.peek(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "the idle connection is still open"
        );
        // … and the agent closes it at the handshake deadline, not never.
        idle.set_nonblocking(false).unwrap();
        idle.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        assert_eq!(idle.read(&mut b).unwrap_or(1), 0, "closed by the agent");
        let t = opened.elapsed();
        assert!(
            t >= Duration::from_millis(2900) && t < Duration::from_secs(10),
            "closed at the 3 s deadline: {t:?}"
        );
    }

    #[test]
    fn a_second_controller_is_told_who_is_served_and_since_when() {
        let key = test_key();
        let addr = agent(Some(key.clone()), Duration::from_secs(30), Duration::from_secs(5));
        let mut first = Controller::connect(addr, &key).unwrap();
        assert!(served(&mut first));
        let t = Instant::now();
        let e = format!("{:#}", Controller::connect(addr, &key).err().expect("refused"));
        assert!(e.contains("busy: serving 127.0.0.1:") && e.contains(" since 20"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(2), "at once: {:?}", t.elapsed());
        // The first one is still served.
        assert!(served(&mut first));
        // Once it ends (Teardown), the next one is served.
        protocol::write_msg(&mut first.w, &ToAgent::Teardown).unwrap();
        let _ = protocol::read_msg::<_, FromAgent>(&mut first.r);
        let until = Instant::now() + Duration::from_secs(3);
        loop {
            let ok = Controller::connect(addr, &key).map(|mut c| served(&mut c));
            match ok {
                Ok(true) => break,
                _ if Instant::now() < until => std::thread::sleep(Duration::from_millis(50)),
                r => panic!("not served after the first ended: {:?}", r.err()),
            }
        }
    }

    #[test]
    fn a_silent_controller_is_dropped_and_the_next_is_served() {
        let key = test_key();
        let addr = agent(Some(key.clone()), Duration::from_millis(700), Duration::from_secs(5));
        let mut first = Controller::connect(addr, &key).unwrap();
        assert!(served(&mut first));
        std::thread::sleep(Duration::from_millis(1200));
        let mut b = [0u8; 1];
        assert_eq!(
            first.s.read(&mut b).unwrap_or(0),
            0,
            "the agent closed the silent controller's connection"
        );
        let mut next =
            Controller::connect(addr, &key).expect("served after the silent one was dropped");
        assert!(served(&mut next));
    }

    #[test]
    fn a_forged_message_ends_the_session_and_frees_the_agent() {
        let key = test_key();
        let addr = agent(Some(key.clone()), Duration::from_secs(30), Duration::from_secs(5));
        let mut c = Controller::connect(addr, &key).unwrap();
        assert!(served(&mut c));
        // A bare, unauthenticated frame injected into the authenticated stream.
        let mut raw = c.s.try_clone().unwrap();
        protocol::write_msg(&mut raw, &ToAgent::Teardown).unwrap();
        let mut b = [0u8; 1];
        assert_eq!(c.s.read(&mut b).unwrap_or(0), 0, "closed");
        assert!(served(&mut Controller::connect_within(addr, &key, Duration::from_secs(3))));
    }

    #[test]
    fn a_thousand_garbage_connections_then_a_real_controller_is_served() {
        let key = test_key();
        let addr = agent(Some(key.clone()), Duration::from_secs(30), Duration::from_secs(2));
        let mut x: u32 = 0x1234_5678;
        for i in 0..1000u32 {
            let Ok(mut s) = TcpStream::connect(addr) else { continue };
            // xorshift garbage of varied length; every 7th a plausible length prefix
            // announcing more than is sent, every 11th nothing at all.
            let mut junk = Vec::new();
            for _ in 0..(i % 97) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                junk.push(x as u8);
            }
            if i % 7 == 0 {
                junk.splice(0..0, 4096u32.to_be_bytes());
            }
            if i % 11 != 0 {
                let _ = s.write_all(&junk);
            }
        }
        assert!(served(&mut Controller::connect_within(addr, &key, Duration::from_secs(5))));
    }

    #[test]
    fn without_a_key_only_loopback_is_served() {
        let l = TcpListener::bind("0.0.0.0:0").unwrap();
        let opts = ListenOpts {
            addr: "0.0.0.0:0".into(),
            key: None,
            insecure: false,
            heartbeat_deadline: Duration::from_secs(1),
            handshake_within: Duration::from_secs(1),
            limits: Default::default(),
        };
        let e = format!("{:#}", serve_on(l, opts).unwrap_err());
        assert!(e.contains("without a key") && e.contains("--gen-key"), "{e}");
        // On loopback, unauthenticated: the protocol as before.
        let addr = agent(None, Duration::from_secs(30), Duration::from_secs(5));
        let s = TcpStream::connect(addr).unwrap();
        let (mut r, mut w) = (s.try_clone().unwrap(), s);
        protocol::write_msg(&mut w, &ToAgent::Hello { version: VERSION }).unwrap();
        assert!(matches!(
            protocol::read_msg::<_, FromAgent>(&mut r).unwrap(),
            Some(FromAgent::Hello { .. })
        ));
    }
}
