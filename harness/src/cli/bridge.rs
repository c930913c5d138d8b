//! `roce bridge`: the lab's switch between two network interfaces — a bump in
//! the wire between two hosts under test (or a host and a switch port). Every
//! frame one port takes in goes out of the other, through the fault rules given,
//! recorded with its sender; at the end, what was carried and what the rules did.
//! A port whose link goes down while it runs is said at once (and when it comes
//! back, and how long it was away): frames for it cannot be sent meanwhile.
//! With `--listen`, the bridge serves controllers instead (`crate::bridge`):
//! each of their runs brings its rules and takes its recording back.
//!
//! Owns: `roce bridge`'s options, opening its ports, and printing what it carried.
//! Imports: the `lab` crate's switch (ports, runs, rules, recording), the Ctrl-C
//! flag of `crate::net::live`, the serving bridge (`crate::bridge`) and the key.
use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use lab::record::{PcapngRecorder, Recorder};
use lab::switch::{LinkPort, LinkState, LinkWatch, Port, PortError, Ports, RunSpec, Switch};

use super::exit::{help, CommandResult, Exit, Failure};
use crate::agent::auth::Key;
use crate::bridge;
use crate::protocol::bridge::BridgePort;

/// The switch between two interfaces.
#[derive(Debug, clap::Args)]
#[command(after_help = help(&[
    (Exit::Ok, "the bridge ran and stopped (Ctrl-C, SIGTERM or --duration), its capture complete"),
    (Exit::Failed, "it stopped, but its capture is incomplete (the report says what is missing), or a port's interface was removed while it ran"),
    (Exit::BadInput, "bad options or fault rules"),
    (Exit::Setup, "an interface cannot be a port (missing, down, MTU too small, no CAP_NET_RAW), or the capture cannot be written"),
]))]
pub struct BridgeArgs {
    /// An interface: the first is side `a`, the second side `b` (as fault rules
    /// name them: `dir=a>b` is what the first port takes in). Exactly two.
    #[arg(long = "port", value_name = "IFACE", required = true, num_args = 1)]
    ports: Vec<String>,
    /// Record every frame to this pcapng file (interface `a` or `b`: who sent it;
    /// what a rule did, as a comment). Written whole when the bridge stops.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// A fault rule, as in scenarios' `[[fault]]` and `roce lab up --fault`
    /// (repeatable; see `roce lab up --help` and the fault-rule reference).
    #[arg(long = "fault", value_name = "RULE")]
    fault: Vec<String>,
    /// Seed of the rules' random draws (`prob=`).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this many seconds (default: at Ctrl-C or SIGTERM).
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// Print the counters every this many seconds while it runs.
    #[arg(long, value_name = "S")]
    every: Option<f64>,
    /// Serve controllers here (`roce run --endpoints … --bridge ADDR`), one at a
    /// time, each scenario's fault rules applied and its wire recorded and sent
    /// back; between runs the bridge forwards without rules.
    #[arg(long, value_name = "ADDR:PORT", requires = "key_file", conflicts_with_all = ["pcap", "fault"])]
    listen: Option<String>,
    /// The key controllers must prove they hold (`roce agent --gen-key FILE`
    /// makes one; the agents' key may be the same).
    #[arg(long, value_name = "FILE", requires = "listen")]
    key_file: Option<PathBuf>,
}

/// What `roce bridge` was asked to do, checked.
struct Plan {
    ports: [String; 2],
    rules: Vec<lab::fault::Rule>,
    duration: Option<Duration>,
    every: Option<Duration>,
    /// `--listen` and the key controllers prove.
    listen: Option<(String, Key)>,
}

fn seconds(what: &str, s: Option<f64>) -> Result<Option<Duration>, Failure> {
    match s {
        None => Ok(None),
        Some(v) if v.is_finite() && v > 0.0 && v < 1e9 => Ok(Some(Duration::from_secs_f64(v))),
        Some(v) => Err(Failure::input(anyhow!("--{what} {v}: give a number of seconds above 0"))),
    }
}

impl Plan {
    fn new(a: &BridgeArgs) -> Result<Plan, Failure> {
        let ports: [String; 2] = match a.ports.as_slice() {
            [x, y] if x == y => {
                return Err(Failure::input(anyhow!(
                    "--port {x} twice: a bridge joins two different interfaces"
                )))
            }
            [x, y] => [x.clone(), y.clone()],
            other => {
                return Err(Failure::input(anyhow!(
                    "{} --port given: a bridge has exactly two (`--port eth2 --port eth3`)",
                    other.len()
                )))
            }
        };
        let rules = lab::fault::parse_rules(&a.fault).map_err(Failure::input)?;
        if let Some(p) = &a.pcap {
            if p.is_dir() {
                return Err(Failure::input(anyhow!(
                    "--pcap {}: that is a directory; give a file name",
                    p.display()
                )));
            }
        }
        let listen = match (&a.listen, &a.key_file) {
            (Some(addr), Some(f)) => Some((addr.clone(), Key::load(f).map_err(Failure::input)?)),
            _ => None,
        };
        Ok(Plan {
            ports,
            rules,
            duration: seconds("duration", a.duration)?,
            every: seconds("every", a.every)?,
            listen,
        })
    }
}

fn open(name: &str) -> Result<LinkPort, Failure> {
    LinkPort::open(name).map_err(|e| match e {
        PortError::BadName(_) => Failure::input(e),
        _ => Failure::setup(e),
    })
}

pub(super) fn run(a: BridgeArgs, out: &mut dyn Write, err: &mut dyn Write) -> CommandResult {
    let plan = Plan::new(&a)?;
    let pa = open(&plan.ports[0])?;
    let pb = open(&plan.ports[1])?;
    let describe = |side: &str, p: &LinkPort| {
        let link = if p.carrier() { "link up" } else { "NO LINK (no carrier)" };
        format!("{side} = {} (MTU {}, {link})", p.name(), p.mtu())
    };
    writeln!(err, "roce bridge: {} ⇄ {}", describe("a", &pa), describe("b", &pb))?;
    if pa.mtu() != pb.mtu() {
        writeln!(
            err,
            "warning: the ports' MTUs differ ({} and {}): a frame larger than the smaller is not carried (counted as a send error)",
            pa.mtu(),
            pb.mtu()
        )?;
    }
    let watch = LinkWatch::new(&[&pa, &pb])
        .map_err(|e| Failure::setup(anyhow!("cannot watch the ports' links: {e}")))?;
    let mut links = Links::new(&plan.ports, watch.states());
    let said = |p: &LinkPort| BridgePort { name: p.name().into(), mtu: p.mtu(), link: p.carrier() };
    let ports = vec![said(&pa), said(&pb)];
    let switch = Arc::new(Switch::spawn_on([Port::Link(pa), Port::Link(pb)], Ports::default())?);
    // Served controllers bring their rules and take their recordings; without
    // --listen, the bridge's own rules and recording last as long as it does.
    let (server, run) = match plan.listen {
        Some((addr, key)) => {
            let l = TcpListener::bind(&addr).map_err(|e| {
                let e = anyhow!("cannot listen on {addr}: {e}");
                match e.downcast_ref::<std::io::Error>().map(std::io::Error::kind) {
                    Some(std::io::ErrorKind::InvalidInput) => Failure::input(e),
                    _ => Failure::setup(e),
                }
            })?;
            let here = l.local_addr().map_or(addr, |a| a.to_string());
            let server = bridge::Server::new(switch.clone(), ports, bridge::MESSAGE_WITHIN)
                .map_err(Failure::setup)?;
            server.spawn(l, key).map_err(Failure::setup)?;
            writeln!(err, "serving controllers on {here}, one at a time (roce run --endpoints … --bridge {here} --key-file FILE); between their runs, forwarding without rules")?;
            (Some(server), None)
        }
        None => {
            let recorder: Option<Box<dyn Recorder>> = match &a.pcap {
                Some(p) => Some(Box::new(PcapngRecorder::create(p).map_err(|e| {
                    Failure::setup(anyhow!("cannot create the capture {}: {e}", p.display()))
                })?)),
                None => None,
            };
            for r in &plan.rules {
                writeln!(err, "  fault rule: {r}")?;
            }
            let run = switch
                .begin(RunSpec {
                    rules: plan.rules,
                    seed: a.seed,
                    recorder,
                    capture: a.pcap.clone(),
                    live: None,
                    claim: None,
                    standing: Default::default(),
                })
                .map_err(Failure::setup)?;
            (None, Some(run))
        }
    };
    let stop = crate::net::live::ctrl_c_flag();
    let until = |t: Instant| plan.duration.is_some_and(|d| t.elapsed() >= d);
    let start = Instant::now();
    let how = match plan.duration {
        Some(d) => format!("for {:.1} s (or until Ctrl-C)", d.as_secs_f64()),
        None => "until Ctrl-C or SIGTERM".into(),
    };
    writeln!(err, "bridging {how}")?;
    let mut shown = Instant::now();
    while !stop.load(Ordering::SeqCst) && !until(start) {
        std::thread::sleep(Duration::from_millis(100));
        for line in links.look(watch.states(), start.elapsed()) {
            writeln!(err, "[{:>7.1}s] {line}", start.elapsed().as_secs_f64())?;
        }
        if plan.every.is_some_and(|e| shown.elapsed() >= e) {
            shown = Instant::now();
            if let Ok((total, runs)) = switch.stats() {
                // The bridge's own run, or all it carried for the runs it served.
                let c = if server.is_some() { Some(total) } else { runs.first().copied() };
                if let Some(c) = c {
                    writeln!(err, "[{:>7.1}s] {}", start.elapsed().as_secs_f64(), c.summary())?;
                }
            }
        }
    }
    let Some(run) = run else {
        let server = server.ok_or_else(|| Failure::setup(anyhow!("the bridge has no run")))?;
        return served(&server, &switch, &links, start.elapsed(), out);
    };
    let rep = switch.end(run).map_err(Failure::setup)?;
    let c = rep.counters;
    writeln!(out, "carried for {:.1} s: {}", rep.duration_ms as f64 / 1000.0, c.summary())?;
    for r in &rep.rules {
        writeln!(out, "  rule `{}`: matched {}, applied {}", r.rule, r.matched, r.applied)?;
    }
    if rep.socket_drops > 0 {
        writeln!(
            out,
            "the kernel dropped {} frames before the bridge read them",
            rep.socket_drops
        )?;
    }
    for line in links.summary(start.elapsed()) {
        writeln!(out, "{line}")?;
    }
    if c.send_errors > 0 && links.ever_down() {
        writeln!(
            out,
            "{} frames could not be sent (a port's link was down when they came; they are in the capture, marked)",
            c.send_errors
        )?;
    }
    // Lost is lost: a frame the kernel dropped never crossed, and is in no capture.
    let mut whole = rep.socket_drops == 0 && !links.any_gone();
    match (&rep.capture, &rep.capture_error) {
        (_, Some(e)) => {
            whole = false;
            writeln!(out, "the capture is incomplete: {e}")?
        }
        (Some(p), None) if !c.capture_complete() => {
            whole = false;
            writeln!(
                out,
                "the capture {p} is incomplete: it holds {} frames of those above",
                c.recorded
            )?
        }
        (Some(p), None) => writeln!(out, "capture: {p} ({} frames)", c.recorded)?,
        (None, None) => {}
    }
    Ok(if whole { Exit::Ok } else { Exit::Failed })
}

/// The end of a bridge that served controllers: what it carried in all, and
/// what became of their runs.
fn served(
    server: &bridge::Server,
    switch: &Switch,
    links: &Links,
    took: Duration,
    out: &mut dyn Write,
) -> CommandResult {
    if server.stop() {
        writeln!(out, "a controller's run was in progress: ended, its recording not kept")?;
    }
    let (total, _) = switch.stats().map_err(Failure::setup)?;
    writeln!(out, "carried for {:.1} s: {}", took.as_secs_f64(), total.summary())?;
    let ended = server.ended.load(Ordering::SeqCst);
    let abandoned = server.abandoned.load(Ordering::SeqCst);
    writeln!(
        out,
        "served {} run(s): {ended} ended by their controller (recording sent back), {abandoned} ended by the bridge (controller gone or silent, or the bridge stopping)",
        ended + abandoned
    )?;
    for line in links.summary(took) {
        writeln!(out, "{line}")?;
    }
    Ok(if links.any_gone() { Exit::Failed } else { Exit::Ok })
}

/// The ports' links as the bridge saw them: each change said when it is seen,
/// and how long each port was without its link.
struct Links {
    names: [String; 2],
    now: Vec<LinkState>,
    /// Since when each port has been without its link (while it is).
    lost_at: [Option<Duration>; 2],
    /// How many times each lost its link, and for how long in all (the
    /// current absence not included).
    lost: [(u32, Duration); 2],
}

impl Links {
    fn new(names: &[String; 2], now: Vec<LinkState>) -> Links {
        Links { names: names.clone(), now, lost_at: [None; 2], lost: [(0, Duration::ZERO); 2] }
    }

    fn label(&self, i: usize) -> String {
        format!("port {} ({})", ["a", "b"][i], self.names[i])
    }

    /// Takes the states seen at `at`: a line for each change.
    fn look(&mut self, seen: Vec<LinkState>, at: Duration) -> Vec<String> {
        let mut lines = Vec::new();
        for (i, (&was, &is)) in self.now.iter().zip(&seen).enumerate() {
            if was == is {
                continue;
            }
            let label = self.label(i);
            match (is, self.lost_at[i]) {
                (LinkState::Up, Some(since)) => {
                    let away = at.saturating_sub(since);
                    self.lost[i].0 += 1;
                    self.lost[i].1 += away;
                    self.lost_at[i] = None;
                    lines.push(format!(
                        "{label}: link up again, after {:.1} s without it",
                        away.as_secs_f64()
                    ));
                }
                (LinkState::Up, None) => lines.push(format!("{label}: link up")),
                (LinkState::Gone, _) => {
                    self.lost_at[i].get_or_insert(at);
                    lines.push(format!("{label}: {is}: frames for it are not carried from now on; restart roce bridge once it is back"));
                }
                (_, _) => {
                    self.lost_at[i].get_or_insert(at);
                    lines.push(format!(
                        "{label}: {is}: frames for it cannot be sent until it comes back"
                    ));
                }
            }
        }
        self.now = seen;
        lines
    }

    fn ever_down(&self) -> bool {
        self.lost.iter().any(|(n, _)| *n > 0) || self.lost_at.iter().any(Option::is_some)
    }

    fn any_gone(&self) -> bool {
        self.now.contains(&LinkState::Gone)
    }

    /// A line per port that was ever without its link, at `end`.
    fn summary(&self, end: Duration) -> Vec<String> {
        (0..2)
            .filter_map(|i| {
                let (mut n, mut away) = self.lost[i];
                if let Some(since) = self.lost_at[i] {
                    n += 1;
                    away += end.saturating_sub(since);
                }
                let still = match self.now[i] {
                    LinkState::Up => String::new(),
                    s => format!("; at the end: {s}"),
                };
                (n > 0).then(|| {
                    format!(
                        "{}: without its link {n} time(s), {:.1} s in all{still}",
                        self.label(i),
                        away.as_secs_f64()
                    )
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_that_goes_and_comes_back_is_said_and_timed() {
        let names = ["a1".to_string(), "b1".to_string()];
        let s = Duration::from_secs;
        let mut l = Links::new(&names, vec![LinkState::Up, LinkState::Up]);
        assert!(l.look(vec![LinkState::Up, LinkState::Up], s(1)).is_empty());
        let down = l.look(vec![LinkState::NoCarrier, LinkState::Up], s(2));
        assert_eq!(down, ["port a (a1): no carrier (link down): frames for it cannot be sent until it comes back"]);
        assert!(l.look(vec![LinkState::Down, LinkState::Up], s(3))[0].contains("set down"));
        let up = l.look(vec![LinkState::Up, LinkState::Up], s(5));
        assert_eq!(up, ["port a (a1): link up again, after 3.0 s without it"]);
        assert!(l.ever_down() && !l.any_gone());
        assert_eq!(l.summary(s(9)), ["port a (a1): without its link 1 time(s), 3.0 s in all"]);
        // Removed for good: counted to the end, and said so.
        let gone = l.look(vec![LinkState::Up, LinkState::Gone], s(6));
        assert!(gone[0].starts_with("port b (b1): gone (the interface was removed)"), "{gone:?}");
        assert!(l.any_gone());
        assert_eq!(
            l.summary(s(10))[1],
            "port b (b1): without its link 1 time(s), 4.0 s in all; at the end: gone (the interface was removed)"
        );
    }
}
