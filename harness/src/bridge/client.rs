//! The controller's side of a bridge (`roce run --endpoints … --bridge HOST:PORT`):
//! a scenario's run on the bridge's switch, begun once its QPs are known (its
//! fault rules name them) and ended after teardown, its recording written where
//! the lab's would be.
//!
//! Owns: [`Bridge`] (where it is, its key) and [`BridgeRun`]. Imports: the
//! handshake (`crate::agent::auth`), the bridge messages.
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use lab::fault::Rule;
use lab::switch::RunReport;

use super::MESSAGE_WITHIN;
use crate::agent::auth::{self, AuthReader, AuthWriter, Key};
use crate::protocol::bridge::{BridgePort, FromBridge, ToBridge, BRIDGE_VERSION};
use crate::protocol::{self};

/// A bridge a controller runs its scenarios' wire through.
#[derive(Clone)]
pub(crate) struct Bridge {
    addr: String,
    key: Key,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bridge({})", self.addr)
    }
}

/// A run in progress on the bridge: ended by [`BridgeRun::end`]; dropped, the
/// connection closes and the bridge ends it, its recording thrown away.
pub(crate) struct BridgeRun {
    stream: TcpStream,
    r: AuthReader<TcpStream>,
    w: AuthWriter<TcpStream>,
    what: String,
    /// The bridge's ports, as it said them.
    pub(crate) ports: Vec<BridgePort>,
    /// How far the bridge's clock is ahead of this host's, at least: the
    /// clock it said at `Begun`, less this host's when the answer came (the
    /// bridge read its clock before then). Negative when it is behind.
    pub(crate) clock_ahead_ns: i64,
}

impl std::fmt::Debug for BridgeRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BridgeRun({})", self.what)
    }
}

impl Drop for BridgeRun {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

impl Bridge {
    pub(crate) fn new(addr: &str, key: Key) -> Bridge {
        Bridge { addr: addr.to_string(), key }
    }

    /// Connects, proves the key and begins a run applying `rules`; the bridge
    /// ends it itself if it is not ended within `within`.
    pub(crate) fn begin(&self, rules: &[Rule], seed: u64, within: Duration) -> Result<BridgeRun> {
        let what = format!("the bridge at {}", self.addr);
        let hint = format!(
            "start it on the bench's two-port box with `roce bridge --port IFACE --port IFACE --listen {} --key-file FILE`",
            self.addr
        );
        let timing = (auth::CONNECT_WITHIN, crate::agent::HANDSHAKE_WITHIN);
        let (stream, session) = auth::dial(&self.addr, &self.key, timing, &what, &hint)?;
        stream.set_read_timeout(Some(MESSAGE_WITHIN)).context("the bridge's connection")?;
        let (r, w) = session.wrap(stream.try_clone()?, stream.try_clone()?);
        let mut run = BridgeRun { stream, r, w, what, ports: Vec::new(), clock_ahead_ns: 0 };
        match run.ask(&ToBridge::Hello { version: BRIDGE_VERSION })? {
            FromBridge::Hello { version, ports } if version == BRIDGE_VERSION => run.ports = ports,
            FromBridge::Hello { version, .. } => bail!(
                "{} speaks bridge protocol version {version}, this controller {BRIDGE_VERSION}\nhint: run the same roce version on both",
                run.what
            ),
            other => return Err(run.unexpected("Hello", other)),
        }
        let begin = ToBridge::Begin {
            rules: rules.iter().map(Rule::to_string).collect(),
            seed,
            within_ms: within.as_millis().clamp(1, u64::MAX as u128) as u64,
        };
        match run.ask(&begin)? {
            FromBridge::Begun { clock_ns } => {
                let here = dissector::capture::unix_now_ns();
                run.clock_ahead_ns = (i128::from(clock_ns) - i128::from(here))
                    .clamp(i128::from(i64::MIN), i128::from(i64::MAX))
                    as i64;
                Ok(run)
            }
            other => Err(run.unexpected("Begun", other)),
        }
    }
}

impl BridgeRun {
    /// Which bridge: `the bridge at HOST:PORT`.
    pub(crate) fn what(&self) -> &str {
        &self.what
    }

    fn ask(&mut self, m: &ToBridge) -> Result<FromBridge> {
        protocol::write_msg(&mut self.w, m).with_context(|| format!("sending to {}", self.what))?;
        self.answer()
    }

    fn answer(&mut self) -> Result<FromBridge> {
        match protocol::read_msg(&mut self.r) {
            Ok(Some(m)) => Ok(m),
            Ok(None) => bail!("{} closed the connection", self.what),
            Err(e) => Err(anyhow::anyhow!("{e}").context(format!("reading from {}", self.what))),
        }
    }

    fn unexpected(&self, want: &str, got: FromBridge) -> anyhow::Error {
        match got {
            FromBridge::Error { message, hint } => {
                let hint = hint.map_or(String::new(), |h| format!("\nhint: {h}"));
                anyhow::anyhow!("{}: {message}{hint}", self.what)
            }
            other => anyhow::anyhow!("{} answered {other:?} where {want} was due", self.what),
        }
    }

    /// Ends the run: its recording is written to `capture` (whole, or not at
    /// all), and the bridge's report comes back naming it.
    pub(crate) fn end(mut self, capture: &Path) -> Result<RunReport> {
        protocol::write_msg(&mut self.w, &ToBridge::End)
            .with_context(|| format!("sending to {}", self.what))?;
        let mut file = None;
        loop {
            match self.answer()? {
                FromBridge::Capture { part } => {
                    if file.is_none() {
                        file = Some(dissector::capture::create_atomically(capture)?);
                    }
                    if let Some(f) = file.as_mut() {
                        f.write_all(&part.0)
                            .with_context(|| format!("writing {}", capture.display()))?;
                    }
                }
                FromBridge::Ended { report } => {
                    let mut report = *report;
                    report.capture = match file {
                        Some(f) => {
                            f.commit().with_context(|| format!("writing {}", capture.display()))?;
                            Some(capture.display().to_string())
                        }
                        None => None,
                    };
                    return Ok(report);
                }
                other => return Err(self.unexpected("Ended", other)),
            }
        }
    }
}

/// Where each endpoint is: its RoCE address, its name and its side of the
/// bridge (0: `a`, the first `--port`; 1: `b`).
pub(crate) type Sides = BTreeMap<IpAddr, (String, usize)>;

/// Whether the bridge's recording shows its ports the other way round from the
/// run's sides: the first RoCE frame from an endpoint's address says which port
/// faces that endpoint's host. Fault rules name directions by side, so a bench
/// cabled the other way would apply them to the other direction: said, not
/// judged.
pub(crate) fn wrong_way(capture: &Path, sides: &Sides) -> Option<String> {
    let mut r = dissector::capture::open(capture).ok()?;
    let opts = dissector::frame::Options::default();
    while let Ok(Some(rec)) = r.next_packet() {
        let f = dissector::frame::decode(rec.link, rec.data, &opts);
        let Some((src, _)) = f.roce.and(f.addrs()) else { continue };
        let Some((name, side)) = sides.get(&src) else { continue };
        if rec.interface as usize == *side {
            return None;
        }
        let port = ["a (the first --port)", "b (the second --port)"];
        return Some(format!(
            "the bridge's ports face the other way: frame {} from endpoint {name} ({src}) came in on its side {}, and fault rules name directions by side\nhint: the bridge's first --port faces the host of side a; swap its --port order (or the cables)",
            rec.number,
            port.get(rec.interface as usize).unwrap_or(&"?")
        ));
    }
    None
}
