//! A link to one endpoint's agent: the lab VM's command over its control channel,
//! or a TCP connection to a real host's `roce agent --listen`; requests out,
//! answers back through a reader thread, each with a deadline.
//!
//! Owns: [`Agent`] (a link, its reader thread and heartbeat), [`Deadline`],
//! [`Unsupported`]. Imports: the agent protocol (`crate::protocol`), the agent's
//! authentication and timings (`crate::agent`), the lab's client and state for lab VMs.
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use lab::client::ExecStdio;
use lab::state::{LabPaths, Vm};

use crate::agent;
use crate::agent::auth::{self, Key};
use crate::protocol::{self, FromAgent, ToAgent};

/// The agent in a VM is the host's own `roce`, shared over 9p.
const LAB_AGENT: &str = "/host/roce agent --stdio";

/// An agent said the device lacks a verb: the scenario is skipped, not failed.
#[derive(Debug)]
pub(super) struct Unsupported(pub String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unsupported {}

/// Shuts a TCP connection down when dropped: the reader thread holds a clone of the
/// socket, so dropping our end alone would leave it open, the thread blocked and the
/// remote agent (which serves one controller at a time) waiting for us.
struct ShutdownOnDrop(TcpStream);

impl Drop for ShutdownOnDrop {
    fn drop(&mut self) {
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

/// Where requests go: shared with the heartbeat thread of a remote agent, which
/// writes only when nothing else was written for a while.
struct Sender {
    w: Box<dyn Write + Send>,
    last: Instant,
}

type SharedSender = Arc<Mutex<Sender>>;

/// Sends `Heartbeat` whenever nothing went out for [`agent::HEARTBEAT_EVERY`], for
/// as long as the agent link lives (a listening agent drops a silent controller).
fn spawn_heartbeat(tx: &SharedSender, alive: Arc<AtomicBool>) {
    let tx = Arc::downgrade(tx);
    thread::spawn(move || {
        while alive.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(500));
            let Some(tx) = tx.upgrade() else { return };
            let mut s = tx.lock().unwrap_or_else(|e| e.into_inner());
            if s.last.elapsed() >= agent::HEARTBEAT_EVERY {
                if protocol::write_msg(&mut s.w, &ToAgent::Heartbeat).is_err() {
                    return;
                }
                s.last = Instant::now();
            }
        }
    });
}

/// Stops the heartbeat thread when the link goes.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// One agent: requests go out on `tx`, answers come back through a reader thread.
pub(super) struct Agent {
    endpoint: String,
    /// The lab VM it runs in (a lab agent serves scenario after scenario).
    pub(super) vm: Option<Vm>,
    tx: SharedSender,
    rx: mpsc::Receiver<Result<FromAgent, String>>,
    log: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    /// The scenario's deadline: no wait for an answer goes past it.
    deadline: Option<Deadline>,
    /// An answer did not come in time: the agent may still be busy with the
    /// request, so it can serve nothing else and is stopped, not torn down.
    behind: bool,
    /// Keeps the transport (the VM command, or the TCP stream) alive.
    _keep: Box<dyn Send>,
}

/// When a scenario must be over (its `timeout_ms`, counted from its start).
#[derive(Debug, Clone, Copy)]
pub(super) struct Deadline {
    at: Instant,
    of: Duration,
}

impl Deadline {
    pub(super) fn new(start: Instant, of: Duration) -> Deadline {
        Deadline { at: start + of, of }
    }

    /// What is left of it.
    pub(super) fn left(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    pub(super) fn passed(&self, what: &str) -> anyhow::Error {
        anyhow!("the scenario's deadline ({} ms, timeout_ms) passed {what}", self.of.as_millis())
    }
}

/// Answers as they come; an error ends the stream (`recv` says whose agent).
fn spawn_reader(mut r: impl Read + Send + 'static) -> mpsc::Receiver<Result<FromAgent, String>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || loop {
        let m = match protocol::read_msg::<_, FromAgent>(&mut r) {
            Ok(Some(m)) => Ok(m),
            Ok(None) => Err("agent closed its connection".to_string()),
            Err(e) => Err(format!("agent: {e}")),
        };
        let end = m.is_err();
        if tx.send(m).is_err() || end {
            return;
        }
    });
    rx
}

impl Agent {
    /// `roce agent --stdio` in a lab VM; it serves scenario after scenario until
    /// this link is dropped (or `timeout`, the lab's hard limit on the command).
    pub(super) fn in_lab(
        paths: &LabPaths,
        vm: Vm,
        endpoint: &str,
        timeout: Duration,
    ) -> Result<Agent> {
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = log.clone();
        let on_stderr = Box::new(move |d: &[u8]| {
            sink.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(d)
        });
        let x = ExecStdio::start(paths, vm, LAB_AGENT, timeout, on_stderr)
            .with_context(|| format!("starting endpoint {endpoint}'s agent in VM {}", vm.name()))?;
        let tx = x.stdin()?;
        let rx = spawn_reader(x);
        let tx = Arc::new(Mutex::new(Sender { w: Box::new(tx), last: Instant::now() }));
        Ok(Agent {
            endpoint: endpoint.into(),
            vm: Some(vm),
            tx,
            rx,
            log,
            deadline: None,
            behind: false,
            _keep: Box::new(()),
        })
    }

    /// The same agent for the next scenario, as endpoint `endpoint`: its log
    /// starts empty.
    pub(super) fn reuse(&mut self, endpoint: &str) {
        self.endpoint = endpoint.to_string();
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// A real host's `roce agent --listen`: with `key`, the handshake proves each
    /// side to the other and every message after it is authenticated. An agent
    /// busy with other handshakes (`busy: N handshakes in progress, retry`), or
    /// one that drops the connection before its first answer, is tried again
    /// with back-off until [`auth::CONNECT_WITHIN`] ([`auth::dial`]); an agent serving another controller, or a wrong key,
    /// is an error at once.
    pub(super) fn remote(addr: &str, endpoint: &str, key: Option<&Key>) -> Result<Agent> {
        let what = format!("endpoint {endpoint}'s agent at {addr}");
        let hint = format!("start it there with `roce agent --listen {addr} --key-file FILE`");
        let (s, r, w): (TcpStream, Box<dyn Read + Send>, Box<dyn Write + Send>) = match key {
            None => {
                let s = TcpStream::connect(addr)
                    .with_context(|| format!("connecting to {what}\nhint: {hint}"))?;
                let _ = s.set_nodelay(true);
                let (r, w) = (s.try_clone()?, s.try_clone()?);
                (s, Box::new(r), Box::new(w))
            }
            Some(key) => {
                let within = (auth::CONNECT_WITHIN, agent::HANDSHAKE_WITHIN);
                let (s, session) = auth::dial(addr, key, within, &what, &hint)?;
                let (ar, aw) = session.wrap(s.try_clone()?, s.try_clone()?);
                (s, Box::new(ar), Box::new(aw))
            }
        };
        let keep = ShutdownOnDrop(s);
        let rx = spawn_reader(r);
        let tx = Arc::new(Mutex::new(Sender { w, last: Instant::now() }));
        let alive = Arc::new(AtomicBool::new(true));
        spawn_heartbeat(&tx, alive.clone());
        Ok(Agent {
            endpoint: endpoint.into(),
            vm: None,
            tx,
            rx,
            log: Default::default(),
            deadline: None,
            behind: false,
            _keep: Box::new((keep, StopOnDrop(alive))),
        })
    }

    pub(super) fn send(&mut self, m: &ToAgent) -> Result<()> {
        let mut s = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        s.last = Instant::now();
        protocol::write_msg(&mut s.w, m)
            .with_context(|| format!("sending to endpoint {}'s agent", self.endpoint))
    }

    /// Waits (`within`, and never past the deadline) for the answer to the
    /// request sent last.
    pub(super) fn recv(&mut self, within: Duration) -> Result<FromAgent> {
        let wait = self.deadline.map_or(within, |d| within.min(d.left()));
        let m = match self.rx.recv_timeout(wait) {
            Ok(m) => m.map_err(|m| anyhow!("endpoint {}'s {m}", self.endpoint))?,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                self.behind = true;
                bail!("endpoint {}'s agent is gone (its connection ended)", self.endpoint);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.behind = true;
                return Err(match self.deadline {
                    Some(d) if wait < within => d.passed(&format!(
                        "while endpoint {}'s agent was still at it",
                        self.endpoint
                    )),
                    _ => anyhow!(
                        "endpoint {}'s agent did not answer within {within:?}",
                        self.endpoint
                    ),
                });
            }
        };
        if let FromAgent::Error { message, verb, errno, hint, unsupported } = m {
            if unsupported {
                let what = verb.unwrap_or_else(|| message.clone());
                return Err(Unsupported(format!(
                    "endpoint {}: the device lacks {what}{}",
                    self.endpoint,
                    hint.map(|h| format!(" ({h})")).unwrap_or_default()
                ))
                .into());
            }
            let mut s = format!("endpoint {}: {message}", self.endpoint);
            if let Some(v) = verb {
                s.push_str(&format!(" (verb {v}"));
                if let Some(e) = errno {
                    s.push_str(&format!(", errno {e}"));
                }
                s.push(')');
            }
            if let Some(h) = hint {
                s.push_str(&format!("\nhint: {h}"));
            }
            bail!(s);
        }
        Ok(m)
    }

    pub(super) fn request(&mut self, m: &ToAgent, within: Duration) -> Result<FromAgent> {
        self.send(m)?;
        self.recv(within)
    }

    /// Bounds every wait for an answer from now on (`None`: each its own).
    pub(super) fn set_deadline(&mut self, d: Option<Deadline>) {
        self.deadline = d;
    }

    /// Whether an answer it owes did not come in time.
    pub(super) fn is_behind(&self) -> bool {
        self.behind
    }

    pub(super) fn log_text(&self) -> String {
        String::from_utf8_lossy(&self.log.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

pub(super) fn unexpected(endpoint: &str, want: &str, got: &FromAgent) -> anyhow::Error {
    anyhow!("endpoint {endpoint}'s agent answered {got:?} where {want} was expected")
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    /// An agent that takes its connection and never answers.
    fn silent_agent() -> (String, thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let t = thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut sink = Vec::new();
            let _ = s.read_to_end(&mut sink);
        });
        (addr, t)
    }

    #[test]
    fn a_wait_ends_at_the_scenarios_deadline_and_the_agent_is_left_behind() {
        let (addr, t) = silent_agent();
        let mut a = Agent::remote(&addr, "b", None).unwrap();
        a.set_deadline(Some(Deadline::new(Instant::now(), Duration::from_millis(300))));
        let asked = Instant::now();
        let e = a
            .request(&ToAgent::Hello { version: protocol::VERSION }, Duration::from_secs(60))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "the scenario's deadline (300 ms, timeout_ms) passed while endpoint b's agent was still at it");
        assert!(asked.elapsed() < Duration::from_secs(30), "the 60 s wait was cut at the deadline");
        assert!(a.is_behind(), "it may still be busy with the request: not to be reused");
        // A wait shorter than what is left of the deadline is its own.
        a.set_deadline(Some(Deadline::new(Instant::now(), Duration::from_secs(60))));
        let e = a.recv(Duration::from_millis(100)).unwrap_err().to_string();
        assert_eq!(e, "endpoint b's agent did not answer within 100ms");
        drop(a);
        t.join().unwrap();
    }

    #[test]
    fn an_agent_that_closes_its_connection_is_gone_not_late() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let t = thread::spawn(move || drop(l.accept().unwrap()));
        let mut a = Agent::remote(&addr, "a", None).unwrap();
        t.join().unwrap();
        let first = a.recv(Duration::from_secs(30)).unwrap_err().to_string();
        assert_eq!(first, "endpoint a's agent closed its connection");
        let then = a.recv(Duration::from_secs(30)).unwrap_err().to_string();
        assert_eq!(then, "endpoint a's agent is gone (its connection ended)");
        assert!(a.is_behind());
    }
}
