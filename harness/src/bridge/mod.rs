//! The bridge as a controller's switch (`roce bridge --listen ADDR --key-file F`):
//! the lab's switch between two ports, serving one controller at a time over the
//! agent's authenticated protocol and front door (the same key handling, the
//! same limits on what a stranger can make it hold before the key is proved).
//! Each connection is one recorded run ([`crate::protocol::bridge`]): the
//! controller's fault rules apply to the wire while it lasts, and the recording
//! goes back to the controller when it ends. Between runs the bridge forwards
//! without rules, as a plain cable would, and says so.
//!
//! Owns: [`Server`] (the run in progress, the controller being served, how many
//! runs it served) and a session's handling of the protocol. Imports: the agent's
//! front door and handshake (`crate::agent::{listen, auth}`), the bridge messages
//! (`crate::protocol::bridge`), and the lab crate's switch, fault rules and
//! recorder.
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use lab::record::PcapngRecorder;
use lab::switch::{RunId, RunReport, RunSpec, Switch};

use crate::agent::auth::{AuthReader, AuthWriter, Key};
use crate::agent::listen;
use crate::protocol::bridge::{
    BridgePort, FromBridge, ToBridge, BRIDGE_VERSION, CAPTURE_PART, RUN_MOST_MS,
};
use crate::protocol::{self, Hex, ReadError};

pub(crate) mod client;
#[cfg(test)]
mod tests;

/// How long a controller has for each message outside a run (its `Hello`, its
/// `Begin`), and a run's `End` past the time it asked for.
pub(crate) const MESSAGE_WITHIN: Duration = Duration::from_secs(30);

/// A line of the bridge's log on stderr.
fn say(line: &str) {
    lab::progress::to_stderr(format!("roce bridge: {line}\n").as_bytes());
}

/// The run a controller has on the switch now.
struct Active {
    session: u64,
    run: RunId,
    capture: PathBuf,
}

/// What the front door, the session thread and `roce bridge`'s own loop share.
pub(crate) struct Server {
    switch: Arc<Switch>,
    ports: Vec<BridgePort>,
    /// Where runs' captures are written until they go back (private to this
    /// process, removed with it).
    dir: tempfile::TempDir,
    /// How long a controller has for each message ([`MESSAGE_WITHIN`]).
    within: Duration,
    /// The controller being served.
    holder: listen::Holder,
    active: Mutex<Option<Active>>,
    /// Runs ended by their controller, and runs the bridge ended itself.
    pub(crate) ended: AtomicU64,
    pub(crate) abandoned: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Server {
    pub(crate) fn new(
        switch: Arc<Switch>,
        ports: Vec<BridgePort>,
        within: Duration,
    ) -> Result<Arc<Server>> {
        let dir = tempfile::Builder::new()
            .prefix("roce-bridge-")
            .tempdir()
            .context("creating the bridge's directory for runs' captures")?;
        Ok(Arc::new(Server {
            switch,
            ports,
            dir,
            within,
            holder: listen::Holder::new("the controller at "),
            active: Mutex::new(None),
            ended: AtomicU64::new(0),
            abandoned: AtomicU64::new(0),
        }))
    }

    /// Serves controllers on `l` from a thread of its own (and one for the session),
    /// until the process ends.
    pub(crate) fn spawn(self: &Arc<Server>, l: TcpListener, key: Key) -> Result<()> {
        let (tx, rx) = mpsc::channel::<(listen::Arrived, u64)>();
        let me = self.clone();
        std::thread::Builder::new()
            .name("bridge-session".into())
            .spawn(move || {
                for (a, id) in rx {
                    let peer = a.peer;
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        me.session(a, id)
                    }));
                    let line = match r {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) => Some(format!("{peer}: {e:#}")),
                        Err(_) => Some(format!("{peer}: the session panicked")),
                    };
                    if let Some(line) = line {
                        say(&line);
                    }
                    me.abandon(id, "its session ended");
                    me.holder.release(id);
                }
            })
            .context("starting the bridge's session thread")?;
        let me = self.clone();
        std::thread::Builder::new()
            .name("bridge-listen".into())
            .spawn(move || {
                let front = listen::Front {
                    who: "roce bridge",
                    key: Some(&key),
                    handshake_within: crate::agent::HANDSHAKE_WITHIN,
                    allow: None,
                    places: listen::places(listen::nofile_limit()),
                };
                let mut back = Back { s: &me, tx };
                if let Err(e) = listen::serve(&l, &front, &mut back) {
                    say(&format!("the listening socket failed: {e}; no more controllers are served (the bridge forwards on)"));
                }
            })
            .context("starting the bridge's listening thread")?;
        Ok(())
    }

    /// Ends session `id`'s run, if it still has one, throwing its recording away
    /// (the wire goes on without its rules). The run's report, when there was one.
    fn abandon(&self, id: u64, why: &str) -> Option<RunReport> {
        let a = {
            let mut cur = lock(&self.active);
            match cur.as_ref() {
                Some(a) if a.session == id => cur.take(),
                _ => None,
            }
        }?;
        self.abandoned.fetch_add(1, Ordering::SeqCst);
        let rep = self.switch.end(a.run).ok();
        let _ = std::fs::remove_file(&a.capture);
        let carried =
            rep.as_ref().map_or(String::new(), |r| format!(" ({})", r.counters.summary()));
        say(&format!(
            "run {id} ended by the bridge: {why}{carried}; its recording is not kept; forwarding without rules"
        ));
        rep
    }

    /// At the bridge's own end: the run in progress, if any, ended (its
    /// controller's connection is closed when the process ends), and the runs'
    /// directory removed (the threads that share this server never end, so it
    /// is never dropped). Whether a run was in progress.
    pub(crate) fn stop(&self) -> bool {
        let id = lock(&self.active).as_ref().map(|a| a.session);
        if let Some(id) = id {
            self.abandon(id, "the bridge is stopping");
        }
        let _ = std::fs::remove_dir_all(self.dir.path());
        id.is_some()
    }

    /// The run of session `id`, begun.
    fn begin(
        &self,
        id: u64,
        peer: SocketAddr,
        rules: &[String],
        seed: u64,
    ) -> Result<(), FromBridge> {
        let rules = lab::fault::parse_rules(rules).map_err(|e| {
            FromBridge::error(
                format!("the run's fault rules: {e}"),
                Some("the controller and the bridge must be the same roce version"),
            )
        })?;
        let mut cur = lock(&self.active);
        if cur.is_some() {
            return Err(FromBridge::error("a run is already in progress on this bridge", None));
        }
        let capture = self.dir.path().join(format!("run-{id}.pcapng"));
        let recorder = PcapngRecorder::create(&capture).map_err(|e| {
            FromBridge::error(format!("the bridge cannot create the run's capture: {e}"), None)
        })?;
        let n = rules.len();
        let run = self
            .switch
            .begin(RunSpec {
                rules,
                seed,
                recorder: Some(Box::new(recorder)),
                capture: Some(capture.clone()),
                live: None,
                claim: None,
                standing: Default::default(),
            })
            .map_err(|e| FromBridge::error(format!("the bridge's switch: {e:#}"), None))?;
        *cur = Some(Active { session: id, run, capture });
        say(&format!("run {id} began for {peer}: recording, {n} fault rule(s)"));
        Ok(())
    }

    /// The run of session `id`, ended: its report and its capture's path.
    fn end(&self, id: u64) -> Result<(RunReport, PathBuf), FromBridge> {
        let a = {
            let mut cur = lock(&self.active);
            match cur.as_ref() {
                Some(a) if a.session == id => cur.take(),
                _ => None,
            }
        };
        let Some(a) = a else {
            return Err(FromBridge::error(
                "this connection has no run in progress (it was never begun, or the bridge ended it)",
                None,
            ));
        };
        let rep = self
            .switch
            .end(a.run)
            .map_err(|e| FromBridge::error(format!("the bridge's switch: {e:#}"), None))?;
        self.ended.fetch_add(1, Ordering::SeqCst);
        say(&format!("run {id} ended by its controller: {}", rep.counters.summary()));
        Ok((rep, a.capture))
    }

    /// One controller, one run: `Hello`, `Begin`, `End`.
    fn session(&self, a: listen::Arrived, id: u64) -> Result<()> {
        let peer = a.peer;
        let s = &a.stream;
        let _ = s.set_nodelay(true);
        let _ = s.set_write_timeout(Some(MESSAGE_WITHIN));
        let session = a.session.ok_or_else(|| anyhow!("no authenticated session"))?;
        let (mut r, mut w) = session.wrap(io::Cursor::new(a.early).chain(s), s);
        let within = self.within;
        let mut until = Instant::now() + within;
        loop {
            let msg = match next(&mut r, s, until) {
                Ok(Some(m)) => m,
                Ok(None) => {
                    if self.abandon(id, "its controller closed the connection").is_none() {
                        say(&format!("{peer}: closed"));
                    }
                    return Ok(());
                }
                Err(ReadError::Invalid(e)) => {
                    reply(&mut w, &FromBridge::error(format!("malformed message: {e}"), None))?;
                    continue;
                }
                Err(e) => {
                    let why = match &e {
                        ReadError::Io(io) if is_timeout(io) => {
                            "its controller sent nothing in time".to_string()
                        }
                        e => format!("its connection failed: {e}"),
                    };
                    self.abandon(id, &why);
                    return Err(anyhow!("{why}"));
                }
            };
            match msg {
                ToBridge::Hello { version } => {
                    if version != BRIDGE_VERSION {
                        reply(&mut w, &FromBridge::error(
                            format!("the controller speaks bridge protocol version {version}, this bridge {BRIDGE_VERSION}"),
                            Some("run the same roce version on both"),
                        ))?;
                        return Ok(());
                    }
                    reply(
                        &mut w,
                        &FromBridge::Hello { version: BRIDGE_VERSION, ports: self.ports.clone() },
                    )?;
                    until = Instant::now() + within;
                }
                ToBridge::Begin { rules, seed, within_ms } => {
                    if !(1..=RUN_MOST_MS).contains(&within_ms) {
                        reply(
                            &mut w,
                            &FromBridge::error(
                                format!(
                                    "within_ms {within_ms}: a run lasts 1 ms to {RUN_MOST_MS} ms"
                                ),
                                None,
                            ),
                        )?;
                        continue;
                    }
                    match self.begin(id, peer, &rules, seed) {
                        Ok(()) => {
                            until = Instant::now() + Duration::from_millis(within_ms) + within;
                            if let Err(e) = reply(
                                &mut w,
                                &FromBridge::Begun { clock_ns: dissector::capture::unix_now_ns() },
                            ) {
                                self.abandon(id, "its controller could not be told");
                                return Err(e);
                            }
                        }
                        Err(no) => reply(&mut w, &no)?,
                    }
                }
                ToBridge::End => {
                    let (rep, capture) = match self.end(id) {
                        Ok(x) => x,
                        Err(no) => {
                            reply(&mut w, &no)?;
                            continue;
                        }
                    };
                    // The controller's next run may connect as soon as it reads
                    // the report: the bridge is free before it is sent.
                    self.holder.release(id);
                    let sent = send_capture(&mut w, &capture, rep);
                    let _ = std::fs::remove_file(&capture);
                    return sent;
                }
            }
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// The next message, waiting until `until` at most.
fn next<R: Read>(
    r: &mut AuthReader<R>,
    s: &TcpStream,
    until: Instant,
) -> Result<Option<ToBridge>, ReadError> {
    let left = until.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    s.set_read_timeout(Some(left)).map_err(ReadError::Io)?;
    protocol::read_msg(r)
}

fn reply<W: Write>(w: &mut AuthWriter<W>, m: &FromBridge) -> Result<()> {
    protocol::write_msg(w, m).context("answering the controller")
}

/// The capture in parts, then the report.
fn send_capture<W: Write>(w: &mut AuthWriter<W>, capture: &Path, mut rep: RunReport) -> Result<()> {
    if rep.capture.is_some() && rep.capture_error.is_none() {
        let mut f = std::fs::File::open(capture)
            .with_context(|| format!("reading the run's capture {}", capture.display()))?;
        loop {
            let mut part = Vec::with_capacity(CAPTURE_PART);
            (&mut f).take(CAPTURE_PART as u64).read_to_end(&mut part)?;
            if part.is_empty() {
                break;
            }
            reply(w, &FromBridge::Capture { part: Hex(part) })?;
        }
    }
    rep.capture = None;
    reply(w, &FromBridge::Ended { report: Box::new(rep) })
}

/// The front door's way to the session thread.
struct Back<'a> {
    s: &'a Server,
    tx: mpsc::Sender<(listen::Arrived, u64)>,
}

impl listen::Back for Back<'_> {
    fn busy(&self) -> Option<String> {
        self.s.holder.busy()
    }

    fn arrived(&mut self, a: listen::Arrived) {
        let peer = a.peer;
        let id = match self.s.holder.claim(&peer.to_string()) {
            Ok(id) => id,
            Err(why) => {
                a.refuse(&FromBridge::error(why.clone(), None));
                say(&format!("{peer}: refused after its handshake, {why}"));
                return;
            }
        };
        if let Err(mpsc::SendError((a, id))) = self.tx.send((a, id)) {
            self.s.holder.release(id);
            let _ = a.stream.shutdown(std::net::Shutdown::Both);
            say(&format!("{peer}: closed: the session thread is gone"));
        }
    }
}
