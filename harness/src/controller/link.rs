//! A link to one endpoint's agent: the lab VM's command over its control channel,
//! or a TCP connection to a real host's `roce agent --listen`; requests out,
//! answers back through a reader thread, each with a deadline.
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use lab::client::ExecStdio;
use lab::state::{LabPaths, Vm};

use crate::agent::proto::{self, FromAgent, ToAgent};

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

/// One agent: requests go out on `tx`, answers come back through a reader thread.
pub(super) struct Agent {
    endpoint: String,
    tx: Box<dyn Write + Send>,
    rx: mpsc::Receiver<Result<FromAgent, String>>,
    log: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    /// Keeps the transport (the VM command, or the TCP stream) alive.
    _keep: Box<dyn Send>,
}

fn spawn_reader(endpoint: &str, mut r: impl Read + Send + 'static) -> mpsc::Receiver<Result<FromAgent, String>> {
    let (tx, rx) = mpsc::channel();
    let name = endpoint.to_string();
    thread::spawn(move || loop {
        let m = match proto::read_msg::<_, FromAgent>(&mut r) {
            Ok(Some(m)) => Ok(m),
            Ok(None) => Err(format!("endpoint {name}'s agent closed its connection")),
            Err(e) => Err(format!("endpoint {name}'s agent: {e}")),
        };
        let end = m.is_err();
        if tx.send(m).is_err() || end {
            return;
        }
    });
    rx
}

impl Agent {
    pub(super) fn in_lab(paths: &LabPaths, vm: Vm, endpoint: &str, timeout: Duration) -> Result<Agent> {
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = log.clone();
        let on_stderr = Box::new(move |d: &[u8]| sink.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(d));
        let x = ExecStdio::start(paths, vm, LAB_AGENT, timeout, on_stderr)
            .with_context(|| format!("starting endpoint {endpoint}'s agent in VM {}", vm.name()))?;
        let tx = x.stdin()?;
        let rx = spawn_reader(endpoint, x);
        Ok(Agent { endpoint: endpoint.into(), tx: Box::new(tx), rx, log, _keep: Box::new(()) })
    }

    pub(super) fn remote(addr: &str, endpoint: &str) -> Result<Agent> {
        let s = TcpStream::connect(addr).with_context(|| {
            format!("connecting to endpoint {endpoint}'s agent at {addr}\nhint: start it there with `roce agent --listen {addr}`")
        })?;
        let _ = s.set_nodelay(true);
        let r = s.try_clone()?;
        let keep = ShutdownOnDrop(s.try_clone()?);
        let rx = spawn_reader(endpoint, r);
        Ok(Agent { endpoint: endpoint.into(), tx: Box::new(s), rx, log: Default::default(), _keep: Box::new(keep) })
    }

    pub(super) fn send(&mut self, m: &ToAgent) -> Result<()> {
        proto::write_msg(&mut self.tx, m).with_context(|| format!("sending to endpoint {}'s agent", self.endpoint))
    }

    pub(super) fn recv(&mut self, within: Duration) -> Result<FromAgent> {
        let m = self
            .rx
            .recv_timeout(within)
            .map_err(|_| anyhow!("endpoint {}'s agent did not answer within {within:?}", self.endpoint))?
            .map_err(anyhow::Error::msg)?;
        if let FromAgent::Error { message, verb, errno, hint, unsupported } = m {
            if unsupported {
                let what = verb.unwrap_or_else(|| message.clone());
                return Err(Unsupported(format!("endpoint {}: the device lacks {what}{}", self.endpoint, hint.map(|h| format!(" ({h})")).unwrap_or_default())).into());
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

    pub(super) fn log_text(&self) -> String {
        String::from_utf8_lossy(&self.log.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}


pub(super) fn unexpected(endpoint: &str, want: &str, got: &FromAgent) -> anyhow::Error {
    anyhow!("endpoint {endpoint}'s agent answered {got:?} where {want} was expected")
}
