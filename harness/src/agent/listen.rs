//! The listening agent's front door (`roce agent --listen`): every connection
//! until it has proved the key, served from one poll loop on the listening
//! thread, without a thread of its own. What a stranger can make the agent hold is
//! bounded in total, not per connection:
//!
//! - at most [`MAX_HANDSHAKES`] connections in their handshake at once (fewer when
//!   the descriptor limit is low: [`RESERVED_FDS`] stay for the controller being
//!   served), each closed at the whole handshake's deadline;
//! - a new connection that finds them all taken takes the place of the oldest one
//!   of the source address that holds the most (so a flood from one host makes
//!   room out of its own connections first); that one is told `busy: N handshakes
//!   in progress, retry` and closed;
//! - past its challenge, at most [`PER_SOURCE`] handshakes per source address,
//!   except for a challenge that carried a fresh mark of the key ([`auth::Mark`]):
//!   such a controller holds a place no stranger can take;
//! - a connection from outside `--allow` is closed before it is read at all;
//! - every refused or failed connection is told why (when it can be) and closed
//!   at once; nothing of it is kept.
//!
//! No accept (or poll) failure ends the agent: running out of descriptors closes the
//! oldest connection of the busiest source to make room, backs off (50 ms
//! doubling to 1 s) and is logged once per [`LINE_WINDOW`], naming the limit.
//! Lines about single connections are at most [`LINES_PER_WINDOW`] per window;
//! more are counted in one line.
//!
//! Owns: the handshake places and their policy. Imports: the handshake's steps
//! ([`auth`]), `--allow`'s networks ([`super::limits`]).
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags};
use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};

use super::auth::{self, HandshakeError, Key, Mark, ServerHandshake, Session};
use super::limits::Cidr;

/// Connections in their handshake at once, at most (fewer under a low descriptor
/// limit; see [`places`]).
pub(crate) const MAX_HANDSHAKES: usize = 64;
/// Handshakes past their challenge per source address, unless the challenge
/// carried a fresh mark of the key.
pub(crate) const PER_SOURCE: usize = 4;
/// Handshakes whose challenge carried a fresh mark, at once (they are real
/// controllers, and only one is served at a time anyway).
const MAX_PROVEN: usize = 4;
/// Descriptors kept out of the handshakes' reach: stdio, the listener, and what
/// the controller being served needs (the device, its channels, files).
pub(crate) const RESERVED_FDS: u64 = 32;
/// Connections accepted per turn of the loop before those already accepted are
/// read (a controller's challenge is read before a flood queued behind it can
/// push it out).
const ACCEPT_BATCH: usize = 16;
const BACKOFF_FIRST: Duration = Duration::from_millis(50);
const BACKOFF_MOST: Duration = Duration::from_secs(1);
/// Log lines about single connections per window, at most; more are counted.
pub(crate) const LINES_PER_WINDOW: u32 = 100;
pub(crate) const LINE_WINDOW: Duration = Duration::from_secs(10);
/// Nonces of marked challenges remembered: a replayed one gets no priority.
const SEEN_NONCES: usize = 4096;
/// Bytes read from a connection in one go.
const CHUNK: usize = 2048;

/// A line of the server's log on stderr (one write, so lines never interleave),
/// after its name (`roce agent`, `roce bridge`).
fn say(who: &str, line: &str) {
    lab::progress::to_stderr(format!("{who}: {line}\n").as_bytes());
}

/// How the front door serves.
pub(crate) struct Front<'a> {
    /// Who serves, as its log lines begin: `roce agent`, `roce bridge`.
    pub(crate) who: &'static str,
    /// `None`: no handshake, the first byte starts the session.
    pub(crate) key: Option<&'a Key>,
    pub(crate) handshake_within: Duration,
    /// `--allow`: only these source networks get any handshake work.
    pub(crate) allow: Option<&'a [Cidr]>,
    /// Handshake places ([`places`]).
    pub(crate) places: usize,
}

/// How many handshake places the descriptor limit `nofile` leaves room for.
pub(crate) fn places(nofile: Option<u64>) -> usize {
    match nofile {
        Some(n) => (n.saturating_sub(RESERVED_FDS)).clamp(PER_SOURCE as u64, MAX_HANDSHAKES as u64)
            as usize,
        None => MAX_HANDSHAKES,
    }
}

/// The process's descriptor limit (`ulimit -n`), unless unlimited.
pub(crate) fn nofile_limit() -> Option<u64> {
    let (soft, _hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    (soft != RLIM_INFINITY).then_some(soft)
}

/// A connection that finished its handshake, for the session.
pub(crate) struct Arrived {
    /// Blocking again.
    pub(crate) stream: TcpStream,
    pub(crate) peer: SocketAddr,
    /// `None` without a key.
    pub(crate) session: Option<Session>,
    /// Bytes that came after the handshake (the start of the first message).
    pub(crate) early: Vec<u8>,
}

/// The one controller a listening server (the agent, the bridge) serves at a
/// time: whom, since when, and which session holds it, so that only that
/// session's end frees it.
pub(crate) struct Holder {
    /// How the busy answer names the one served, before its address: `""`
    /// (`busy: serving 192.0.2.9:51234 since …`), `"the controller at "`.
    noun: &'static str,
    /// The session's id, the controller's address, since when.
    cur: std::sync::Mutex<Option<(u64, String, std::time::SystemTime)>>,
    next: std::sync::atomic::AtomicU64,
}

/// `2026-11-23T20:31:07Z`.
pub(crate) fn utc(t: std::time::SystemTime) -> String {
    let since = t.duration_since(std::time::SystemTime::UNIX_EPOCH).unwrap_or_default();
    dissector::text::utc(since.as_secs())
}

impl Holder {
    pub(crate) fn new(noun: &'static str) -> Holder {
        Holder {
            noun,
            cur: std::sync::Mutex::new(None),
            next: std::sync::atomic::AtomicU64::new(1),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Option<(u64, String, std::time::SystemTime)>> {
        self.cur.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn says(&self, peer: &str, since: std::time::SystemTime) -> String {
        format!("busy: serving {}{peer} since {}", self.noun, utc(since))
    }

    /// "busy: serving HOST:PORT since TIME" while a controller is served.
    pub(crate) fn busy(&self) -> Option<String> {
        self.held().as_ref().map(|(_, peer, since)| self.says(peer, *since))
    }

    /// Takes the server for `peer`, unless another controller was quicker: the
    /// session's id, or what the busy answer says.
    pub(crate) fn claim(&self, peer: &str) -> Result<u64, String> {
        let mut cur = self.held();
        if let Some((_, who, since)) = cur.as_ref() {
            return Err(self.says(who, *since));
        }
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        *cur = Some((id, peer.to_string(), std::time::SystemTime::now()));
        Ok(id)
    }

    /// Frees the server, if session `id` still holds it (only ever its own claim).
    pub(crate) fn release(&self, id: u64) {
        let mut cur = self.held();
        if cur.as_ref().is_some_and(|(held, _, _)| *held == id) {
            *cur = None;
        }
    }
}

impl Arrived {
    /// Tells a connection that finished its handshake why it is not served
    /// (`msg`, sealed as the session's messages are), and closes it.
    pub(crate) fn refuse<T: serde::Serialize>(self, msg: &T) {
        let _ = self.stream.set_write_timeout(Some(Duration::from_secs(1)));
        let s = &self.stream;
        let mut w: Box<dyn Write + '_> = match self.session {
            Some(session) => Box::new(session.wrap(io::empty(), s).1),
            None => Box::new(s),
        };
        let _ = crate::protocol::write_msg(&mut w, msg);
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
}

/// Where a handshake is.
enum Stage {
    /// Waiting for the controller's challenge.
    Challenge,
    /// Our proof sent, waiting for the controller's; `proven`: its challenge
    /// carried a fresh mark of the key.
    Proof { hs: ServerHandshake, proven: bool },
    /// Without a key: waiting for the first byte.
    FirstByte,
}

struct Conn {
    s: TcpStream,
    peer: SocketAddr,
    src: IpAddr,
    opened: Instant,
    buf: Vec<u8>,
    got: usize,
    stage: Stage,
}

impl Conn {
    fn proven(&self) -> bool {
        matches!(self.stage, Stage::Proof { proven: true, .. })
    }
    fn past_challenge(&self) -> bool {
        matches!(self.stage, Stage::Proof { proven: false, .. })
    }
    fn waiting_for(&self) -> &'static str {
        match self.stage {
            Stage::Challenge => "challenge",
            Stage::Proof { .. } => "proof",
            Stage::FirstByte => "first message",
        }
    }
}

/// An IPv4 peer on a dual-stack socket counts as its IPv4 address.
fn source(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        ip => ip,
    }
}

/// At most [`LINES_PER_WINDOW`] lines per [`LINE_WINDOW`]; the rest counted.
struct Lines {
    who: &'static str,
    since: Instant,
    shown: u32,
    hidden: u32,
}

impl Lines {
    fn roll(&mut self, now: Instant) {
        if now.duration_since(self.since) >= LINE_WINDOW {
            if self.hidden > 0 {
                say(self.who, &format!(
                    "{} more connections refused or dropped in the last {} s, not logged one by one (at most {LINES_PER_WINDOW} lines per {} s)",
                    self.hidden,
                    now.duration_since(self.since).as_secs(),
                    LINE_WINDOW.as_secs()
                ));
            }
            *self = Lines { who: self.who, since: now, shown: 0, hidden: 0 };
        }
    }
    fn say(&mut self, line: String) {
        self.roll(Instant::now());
        if self.shown < LINES_PER_WINDOW {
            self.shown += 1;
            say(self.who, &line);
        } else {
            self.hidden += 1;
        }
    }
}

/// Accept failures: one line per [`LINE_WINDOW`], naming the limit; back-off.
struct AcceptTrouble {
    who: &'static str,
    last_said: Option<Instant>,
    unsaid: u64,
    backoff: Duration,
    paused_until: Option<Instant>,
    last_failed: Option<Instant>,
}

impl AcceptTrouble {
    fn failed(&mut self, what: &str, e: &io::Error, nofile: Option<u64>) {
        let now = Instant::now();
        self.last_failed = Some(now);
        if self.last_said.is_none_or(|t| now.duration_since(t) >= LINE_WINDOW) {
            let limit = match e.raw_os_error() {
                Some(libc::EMFILE) => format!(
                    "the descriptor limit (RLIMIT_NOFILE, ulimit -n) is {}",
                    nofile.map_or("unlimited".into(), |n| n.to_string())
                ),
                Some(libc::ENFILE) => "the system's open-file table is full (fs.file-max)".into(),
                Some(libc::ENOBUFS | libc::ENOMEM) => "out of memory for sockets".into(),
                _ => "not a limit this agent knows".into(),
            };
            let more = if self.unsaid > 0 {
                format!(" ({} more failures since the last line)", self.unsaid)
            } else {
                String::new()
            };
            say(self.who, &format!(
                "{what}: {e}: {limit}; backing off (up to {} s) and serving on; the next failures are counted, not logged, for {} s{more}",
                BACKOFF_MOST.as_secs(),
                LINE_WINDOW.as_secs()
            ));
            self.last_said = Some(now);
            self.unsaid = 0;
        } else {
            self.unsaid += 1;
        }
        self.paused_until = Some(now + self.backoff);
        self.backoff = (self.backoff * 2).min(BACKOFF_MOST);
    }
    fn ok(&mut self) {
        self.backoff = BACKOFF_FIRST;
    }
    fn paused(&self, now: Instant) -> bool {
        self.paused_until.is_some_and(|t| now < t)
    }
}

/// What a refused or failed connection is told, and the line the agent logs.
struct Close {
    line: String,
    tell: Vec<u8>,
}

/// The front door's state.
struct Door<'a> {
    front: &'a Front<'a>,
    conns: Vec<Conn>,
    seen: HashSet<[u8; 32]>,
    seen_order: VecDeque<[u8; 32]>,
    lines: Lines,
    trouble: AcceptTrouble,
    nofile: Option<u64>,
    /// The places in use now: [`Front::places`], or (for a [`LINE_WINDOW`] after
    /// the agent ran out of descriptors) as many as it held then.
    cap: usize,
}

/// What the serving side does with a connection: `busy()` says why new ones are
/// refused at once (a controller is served), `arrived()` takes one that
/// finished its handshake.
pub(crate) trait Back {
    fn busy(&self) -> Option<String>;
    fn arrived(&mut self, a: Arrived);
}

/// Serves the front door on `l` until the listener fails for good (never for a
/// connection's sake).
pub(crate) fn serve(l: &TcpListener, front: &Front<'_>, back: &mut dyn Back) -> io::Result<()> {
    l.set_nonblocking(true)?;
    let now = Instant::now();
    let mut door = Door {
        front,
        conns: Vec::new(),
        seen: HashSet::new(),
        seen_order: VecDeque::new(),
        lines: Lines { who: front.who, since: now, shown: 0, hidden: 0 },
        trouble: AcceptTrouble {
            who: front.who,
            last_said: None,
            unsaid: 0,
            backoff: BACKOFF_FIRST,
            paused_until: None,
            last_failed: None,
        },
        nofile: nofile_limit(),
        cap: front.places,
    };
    loop {
        door.turn(l, back)?;
    }
}

impl Door<'_> {
    fn tell(&self, why: &str, retry: bool) -> Vec<u8> {
        if self.front.key.is_some() {
            auth::refusal(why, retry)
        } else {
            let mut v = Vec::new();
            let _ =
                crate::protocol::write_msg(&mut v, &crate::protocol::FromAgent::error(why, None));
            v
        }
    }

    /// One turn: deadlines, poll, reads, accepts.
    fn turn(&mut self, l: &TcpListener, back: &mut dyn Back) -> io::Result<()> {
        let now = Instant::now();
        self.lines.roll(now);
        if self.cap < self.front.places
            && self.trouble.last_failed.is_none_or(|t| now.duration_since(t) >= LINE_WINDOW)
        {
            self.cap = self.front.places;
        }
        let within = self.front.handshake_within;
        while let Some(i) = self.conns.iter().position(|c| now >= c.opened + within) {
            let c = self.conns.swap_remove(i);
            let what = c.waiting_for();
            let line = format!(
                "{}: dropped: no whole {what} within the handshake's deadline ({within:?}; {} bytes came)",
                c.peer, c.got
            );
            // One that said nothing at all is closed without a word.
            let tell = if c.got == 0 {
                Vec::new()
            } else {
                self.tell(
                    &format!("the handshake did not finish within {within:?} (no whole {what})"),
                    false,
                )
            };
            self.close(c, Close { line, tell });
        }
        let listen = !self.trouble.paused(now);
        let wake = self
            .conns
            .iter()
            .map(|c| c.opened + within)
            .chain(self.trouble.paused_until.filter(|t| *t > now))
            .min()
            .map_or(Duration::from_secs(1), |t| t.saturating_duration_since(now))
            .min(Duration::from_secs(1));
        let ms = u16::try_from(wake.as_millis().max(1)).unwrap_or(1000);
        let (ready, accept) = {
            let mut fds: Vec<PollFd<'_>> =
                self.conns.iter().map(|c| PollFd::new(c.s.as_fd(), PollFlags::POLLIN)).collect();
            if listen {
                fds.push(PollFd::new(l.as_fd(), PollFlags::POLLIN));
            }
            match poll(&mut fds, ms) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => {
                    // Out of memory for the poll set, say: not a reason to stop
                    // serving. Said like an accept failure, then a pause.
                    drop(fds);
                    self.trouble.failed("poll", &io::Error::from(e), self.nofile);
                    std::thread::sleep(BACKOFF_FIRST);
                    return Ok(());
                }
            }
            let hit = |f: &PollFd<'_>| f.revents().is_some_and(|r| !r.is_empty());
            let accept = listen && fds.last().is_some_and(hit);
            let ready: Vec<bool> = fds.iter().take(self.conns.len()).map(hit).collect();
            (ready, accept)
        };
        // Back to front, so removing one does not move those still to visit.
        for i in (0..ready.len()).rev() {
            if ready[i] {
                self.read(i, back);
            }
        }
        if accept {
            self.accept(l, back);
        }
        Ok(())
    }

    fn accept(&mut self, l: &TcpListener, back: &mut dyn Back) {
        for _ in 0..ACCEPT_BATCH {
            match l.accept() {
                Ok((s, peer)) => {
                    self.trouble.ok();
                    self.admit(s, peer, back);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionAborted | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => {
                    self.trouble.failed("accept", &e, self.nofile);
                    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                        // Hold no more than now, and make room: the next
                        // connection (maybe the controller) gets the descriptor
                        // the oldest of the busiest source had, and each one
                        // after takes the place of another such.
                        self.cap = self.conns.len().saturating_sub(1).max(1);
                        self.evict("the agent is out of descriptors");
                    }
                    return;
                }
            }
        }
    }

    fn admit(&mut self, s: TcpStream, peer: SocketAddr, back: &mut dyn Back) {
        let src = source(peer.ip());
        if let Some(nets) = self.front.allow {
            if !nets.iter().any(|n| n.contains(src)) {
                let why = format!("this agent does not serve {src} (outside its --allow)");
                let tell = self.tell(&why, false);
                self.finish_at_once(s, Close { line: format!("{peer}: refused: {why}"), tell });
                return;
            }
        }
        if let Some(why) = back.busy() {
            let tell = self.tell(&why, false);
            self.finish_at_once(s, Close { line: format!("{peer}: refused, {why}"), tell });
            return;
        }
        if self.conns.len() >= self.cap && !self.evict("a new connection came") {
            let why = format!("busy: {} handshakes in progress, retry", self.conns.len());
            let tell = self.tell(&why, true);
            self.finish_at_once(s, Close { line: format!("{peer}: refused, {why}"), tell });
            return;
        }
        if let Err(e) = s.set_nonblocking(true) {
            self.lines.say(format!("{peer}: closed at once: {e}"));
            return;
        }
        let _ = s.set_nodelay(true);
        let stage = if self.front.key.is_some() { Stage::Challenge } else { Stage::FirstByte };
        self.conns.push(Conn {
            s,
            peer,
            src,
            opened: Instant::now(),
            buf: Vec::new(),
            got: 0,
            stage,
        });
        // Its first message may be here already.
        let i = self.conns.len() - 1;
        self.read(i, back);
    }

    /// Closes the oldest connection of the source that holds the most places
    /// (never one proven by its mark); `false` when there is none.
    fn evict(&mut self, because: &str) -> bool {
        let mut per: HashMap<IpAddr, usize> = HashMap::new();
        for c in self.conns.iter().filter(|c| !c.proven()) {
            *per.entry(c.src).or_default() += 1;
        }
        let Some((&src, &n)) = per.iter().max_by_key(|(_, n)| **n) else { return false };
        let Some(i) = self
            .conns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.src == src && !c.proven())
            .min_by_key(|(_, c)| c.opened)
            .map(|(i, _)| i)
        else {
            return false;
        };
        let total = self.conns.len();
        let c = self.conns.swap_remove(i);
        let why = format!("busy: {total} handshakes in progress, retry");
        let line = format!(
            "{}: dropped to make room ({because}): {total} handshakes in progress, {n} of them from {src}, this the oldest; told to retry",
            c.peer
        );
        let tell = self.tell(&why, true);
        self.close(c, Close { line, tell });
        true
    }

    /// Reads what connection `i` has and moves its handshake on.
    fn read(&mut self, i: usize, back: &mut dyn Back) {
        let mut chunk = [0u8; CHUNK];
        loop {
            let c = &mut self.conns[i];
            match c.s.read(&mut chunk) {
                Ok(0) => {
                    let c = self.conns.swap_remove(i);
                    let line = match &c.stage {
                        Stage::Proof { hs, .. } => match hs.closed() {
                            e @ HandshakeError::KeyMismatch { .. } => {
                                format!("{}: refused: {e}", c.peer)
                            }
                            _ => format!(
                                "{}: closed by it after our proof, without its own (most likely its key is not this agent's)",
                                c.peer
                            ),
                        },
                        Stage::Challenge => format!(
                            "{}: closed by it before a whole {} ({} bytes came)",
                            c.peer,
                            auth::Step::ControllerChallenge,
                            c.got
                        ),
                        Stage::FirstByte => format!("{}: closed by it before sending anything", c.peer),
                    };
                    self.close(c, Close { line, tell: Vec::new() });
                    return;
                }
                Ok(n) => {
                    c.buf.extend_from_slice(&chunk[..n]);
                    c.got += n;
                    if !self.advance(i, back) {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let c = self.conns.swap_remove(i);
                    let line =
                        format!("{}: closed: {e} (waiting for its {})", c.peer, c.waiting_for());
                    self.close(c, Close { line, tell: Vec::new() });
                    return;
                }
            }
        }
    }

    /// Takes the whole messages connection `i` has; `false` once it has left the
    /// front door (handed on, or closed).
    fn advance(&mut self, i: usize, back: &mut dyn Back) -> bool {
        let Some(key) = self.front.key else {
            let c = self.conns.swap_remove(i);
            self.hand_on(c, None, back);
            return false;
        };
        loop {
            let c = &mut self.conns[i];
            let body = match auth::take_frame(&mut c.buf) {
                Ok(Some(b)) => b,
                Ok(None) => return true,
                Err(error) => {
                    let tell = self.tell(&error.to_string(), false);
                    self.fail(i, error, tell);
                    return false;
                }
            };
            match std::mem::replace(&mut c.stage, Stage::Challenge) {
                Stage::Challenge | Stage::FirstByte => {
                    let now = dissector::capture::unix_now().as_secs();
                    let (hs, reply) = match auth::accept_challenge(key, &body, now) {
                        Ok(x) => x,
                        Err(r) => {
                            self.fail(i, r.error, r.tell);
                            return false;
                        }
                    };
                    let proven = hs.mark() == Mark::Fresh
                        && self.fresh_nonce(hs.nonce())
                        && self.conns.iter().filter(|c| c.proven()).count() < MAX_PROVEN;
                    if !proven {
                        let src = self.conns[i].src;
                        let n = self
                            .conns
                            .iter()
                            .filter(|c| c.src == src && c.past_challenge())
                            .count();
                        if n >= PER_SOURCE {
                            let why = format!("busy: {n} handshakes in progress from {src}, retry");
                            let tell = self.tell(&why, true);
                            let c = self.conns.swap_remove(i);
                            let line = format!(
                                "{}: refused, {why} (at most {PER_SOURCE} per source address past their challenge)",
                                c.peer
                            );
                            self.close(c, Close { line, tell });
                            return false;
                        }
                    }
                    let c = &mut self.conns[i];
                    c.stage = Stage::Proof { hs, proven };
                    if !self.send(i, &reply) {
                        return false;
                    }
                }
                Stage::Proof { hs, .. } => {
                    let (session, ok) = match hs.finish(key, &body) {
                        Ok(x) => x,
                        Err(r) => {
                            self.fail(i, r.error, r.tell);
                            return false;
                        }
                    };
                    if !self.send(i, &ok) {
                        return false;
                    }
                    let c = self.conns.swap_remove(i);
                    self.hand_on(c, Some(session), back);
                    return false;
                }
            }
        }
    }

    /// Whether a marked challenge's nonce is new (and remembers it).
    fn fresh_nonce(&mut self, n: &[u8; 32]) -> bool {
        if !self.seen.insert(*n) {
            return false;
        }
        self.seen_order.push_back(*n);
        if self.seen_order.len() > SEEN_NONCES {
            if let Some(old) = self.seen_order.pop_front() {
                self.seen.remove(&old);
            }
        }
        true
    }

    /// Writes a handshake message to connection `i` without waiting: it is small
    /// and the socket new, so a controller that reads takes it whole.
    fn send(&mut self, i: usize, bytes: &[u8]) -> bool {
        match self.conns[i].s.write(bytes) {
            Ok(n) if n == bytes.len() => true,
            r => {
                let c = self.conns.swap_remove(i);
                let line = match r {
                    Err(e) => format!("{}: closed: {e} (sending our handshake message)", c.peer),
                    Ok(_) => format!(
                        "{}: closed: it does not read what we send (its receive window is full)",
                        c.peer
                    ),
                };
                self.close(c, Close { line, tell: Vec::new() });
                false
            }
        }
    }

    fn fail(&mut self, i: usize, error: HandshakeError, tell: Vec<u8>) {
        let c = self.conns.swap_remove(i);
        let line = format!("{}: refused: {error}", c.peer);
        self.close(c, Close { line, tell });
    }

    fn hand_on(&mut self, c: Conn, session: Option<Session>, back: &mut dyn Back) {
        if let Err(e) = c.s.set_nonblocking(false) {
            let line = format!("{}: closed: {e}", c.peer);
            self.close(c, Close { line, tell: Vec::new() });
            return;
        }
        back.arrived(Arrived { stream: c.s, peer: c.peer, session, early: c.buf });
    }

    fn close(&mut self, c: Conn, why: Close) {
        self.lines.say(why.line);
        if !why.tell.is_empty() {
            let _ = (&c.s).write(&why.tell);
        }
        let _ = c.s.shutdown(std::net::Shutdown::Both);
    }

    /// Refuses a connection not yet in the table.
    fn finish_at_once(&mut self, s: TcpStream, why: Close) {
        self.lines.say(why.line);
        let _ = s.set_nonblocking(true);
        let _ = (&s).write(&why.tell);
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_leave_descriptors_for_the_session() {
        assert_eq!(places(None), MAX_HANDSHAKES);
        assert_eq!(places(Some(1024)), MAX_HANDSHAKES);
        assert_eq!(places(Some(64)), 32);
        assert_eq!(places(Some(16)), PER_SOURCE);
    }

    #[test]
    fn take_frame_waits_for_a_whole_message_and_refuses_a_large_one() {
        let mut b = vec![0, 0, 0, 3, b'{', b'}'];
        assert!(matches!(auth::take_frame(&mut b), Ok(None)));
        b.push(b' ');
        assert_eq!(auth::take_frame(&mut b).unwrap().unwrap(), b"{} ");
        assert!(b.is_empty());
        let mut big = 4096u32.to_be_bytes().to_vec();
        assert!(matches!(auth::take_frame(&mut big), Err(HandshakeError::TooLarge { len: 4096 })));
    }
}
