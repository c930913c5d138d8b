//! The wire captured at the agents (`--capture-at-agents`), for benches where no
//! switch can stand in the wire: each endpoint's agent captures its own host's
//! RoCE traffic around the scenario and ships the capture back; the two are
//! merged by frame identity ([`dissector::merge`], never by the hosts' clocks)
//! into one timeline. Without a switch it is the wire the judge reads (a frame
//! seen at its sender only was not delivered: [`lab::mark::Mark::SenderOnly`]);
//! through a switch it is kept beside the switch's recording, the same frames
//! seen from the hosts.
//!
//! Each host's own capture is kept too (`<scenario>.<endpoint>.pcapng`): what
//! that host saw, on its clock.
//!
//! Owns: starting, stopping and fetching the agents' captures, and merging
//! them. Imports: the agent links, the protocol, analyze's merge, results.
use std::collections::BTreeMap;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use dissector::merge::{self, Seen, Side, Taken};

use super::link::{unexpected, Agent};
use crate::analyze::merge::{write, Whole};
use crate::protocol::{FromAgent, ToAgent, CAPTURE_CHUNK, CAPTURE_MAX};
use crate::results::EndpointFacts;

/// How long an agent may take to start or stop its capture (a capture command
/// is given 2 s to start and 5 s to stop).
const CAPTURE_WITHIN: Duration = Duration::from_secs(15);

/// The captures running, by endpoint: how each is taken.
#[derive(Debug, Default)]
pub(super) struct Capturing {
    how: BTreeMap<String, String>,
}

/// Starts a capture at every endpoint's agent, side by side.
pub(super) fn start(agents: &mut BTreeMap<String, Agent>) -> Result<Capturing> {
    for a in agents.values_mut() {
        a.send(&ToAgent::CaptureStart)?;
    }
    let mut how = BTreeMap::new();
    for (name, a) in agents.iter_mut() {
        match a.recv(CAPTURE_WITHIN).map_err(|e| {
            e.context(format!(
                "endpoint {name}'s agent could not capture its host's wire\nhint: an interface libpcap cannot see (hardware offload) needs a capture command where the agent runs: roce agent --capture-command 'ibdump -d DEV -w {{file}}'; or leave out --capture-at-agents"
            ))
        })? {
            FromAgent::Capturing { how: h } => {
                how.insert(name.clone(), h);
            }
            other => return Err(unexpected(name, "Capturing", &other)),
        }
    }
    Ok(Capturing { how })
}

/// The agents' captures, stopped, fetched and merged.
#[derive(Debug)]
pub(super) struct Merged {
    /// The merged capture.
    pub(super) path: PathBuf,
    /// Where it came from and what the merge found, for the report.
    pub(super) said: String,
    /// What makes it incomplete: a host's capture that dropped frames or was
    /// cut short.
    pub(super) incomplete: Vec<String>,
}

/// One direction's RoCE frames in a capture: those its sender sent, in the
/// order it sent them, and those delivered (sorted: a multiset); and whether a
/// frame's bytes were changed on the way (the switch records the changed copy,
/// the sender's capture the original).
#[derive(Debug, Default)]
struct Direction {
    sent: Vec<Vec<u8>>,
    delivered: Vec<Vec<u8>>,
    changed: bool,
}

/// Each direction (by source address) of the RoCEv2 frames in `path`, as its
/// marks say: a held frame stands where it arrived, a copy or a synthesized
/// answer was sent by nobody, a dropped or withheld frame or one seen at its
/// sender only was not delivered. A frame is its BTH through its ICRC.
fn directions(path: &Path) -> Result<BTreeMap<IpAddr, Direction>> {
    use dissector::frame::{self, Net};
    use lab::mark::{Mark, Marks};
    let mut r = dissector::capture::open(path)
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("reading {}", path.display()))?;
    let mut sent: Vec<(IpAddr, u64, usize, Vec<u8>)> = Vec::new();
    let mut out: BTreeMap<IpAddr, Direction> = BTreeMap::new();
    while let Some(p) = r.next_packet().map_err(|e| anyhow!("{e}"))? {
        let d = frame::decode(p.link, p.data, &frame::Options::default());
        let src = match d.net {
            Net::Ipv4(h) => IpAddr::V4(h.src),
            Net::Ipv6(h) => IpAddr::V6(h.src),
            _ => continue,
        };
        let Some(bytes) = d.roce.and(p.data.get(d.offsets.bth..d.offsets.icrc + 4)) else {
            continue;
        };
        let marks = p.comment.map(Marks::parse).unwrap_or_default();
        let dir = out.entry(src).or_default();
        dir.changed |= marks.modified();
        if !marks.dropped() {
            dir.delivered.push(bytes.to_vec());
        }
        let by_sender = !marks.injected()
            && !marks.synthesized()
            && !marks.0.iter().any(|m| matches!(m, Mark::ReceiverOnly { .. }));
        if by_sender {
            let at = p.ts_ns.saturating_sub(marks.arrived_ns_before().unwrap_or(0));
            sent.push((src, at, sent.len(), bytes.to_vec()));
        }
    }
    sent.sort_by_key(|&(_, at, i, _)| (at, i));
    for (src, _, _, bytes) in sent {
        out.entry(src).or_default().sent.push(bytes);
    }
    for dir in out.values_mut() {
        dir.delivered.sort();
    }
    Ok(out)
}

/// The agents' merged capture against the switch's recording of the same run:
/// in each direction, the frames sent the same and in the same order (where the
/// switch changed none), and those delivered the same. The agents stop capturing
/// before the teardown and the switch after it, so the switch's may hold more
/// after the agents' last frame (a late retransmission, a disconnect). What
/// differs, in words: nothing when the two agree.
pub(super) fn against_switch(switch: &Path, merged: &Path) -> Result<Vec<String>> {
    let (sw, ag) = (directions(switch)?, directions(merged)?);
    let mut differs = Vec::new();
    for (src, s) in &sw {
        let none = Direction::default();
        let a = ag.get(src).unwrap_or(&none);
        let n = a.sent.len();
        if !s.changed && (n > s.sent.len() || s.sent[..n] != a.sent[..]) {
            let at =
                s.sent.iter().zip(&a.sent).position(|(x, y)| x != y).unwrap_or(n.min(s.sent.len()));
            differs.push(format!(
                "from {src}: the switch saw {} frames sent, the hosts {n}, differing from sent frame {} on",
                s.sent.len(),
                at + 1
            ));
        } else if s.sent.is_empty() != a.sent.is_empty() {
            differs.push(format!(
                "from {src}: the switch saw {} frames sent, the hosts {n}",
                s.sent.len()
            ));
        }
        let extra = a.delivered.iter().filter(|f| s.delivered.binary_search(f).is_err()).count();
        if extra > 0 {
            differs.push(format!(
                "to {src}'s peer: {extra} frames the hosts saw delivered the switch never delivered"
            ));
        }
    }
    for src in ag.keys().filter(|src| !sw.contains_key(src)) {
        differs.push(format!("from {src}: frames the hosts saw, the switch none"));
    }
    Ok(differs)
}

/// Stops every endpoint's capture, keeps each beside `out` and merges them into
/// `out`; `facts` says each endpoint's address.
pub(super) fn finish(
    agents: &mut BTreeMap<String, Agent>,
    running: &Capturing,
    out: &Path,
    facts: &BTreeMap<String, EndpointFacts>,
) -> Result<Merged> {
    let names: Vec<String> = running.how.keys().cloned().collect();
    for name in &names {
        agent(agents, name)?.send(&ToAgent::CaptureStop)?;
    }
    let mut stopped = Vec::new();
    for name in &names {
        match agent(agents, name)?.recv(CAPTURE_WITHIN)? {
            FromAgent::Captured { bytes, frames, dropped, cut_short } => {
                stopped.push((name, bytes, frames, dropped, cut_short))
            }
            other => return Err(unexpected(name, "Captured", &other)),
        }
    }
    let mut incomplete = Vec::new();
    let mut kept = Vec::new();
    for &(name, bytes, frames, dropped, cut_short) in &stopped {
        if bytes > CAPTURE_MAX {
            bail!("endpoint {name}'s agent says its capture holds {bytes} bytes, more than any agent keeps ({CAPTURE_MAX})");
        }
        if dropped > 0 {
            incomplete.push(format!("the capture at {name} dropped {dropped} frames"));
        }
        if cut_short {
            incomplete.push(format!("the capture at {name} was cut short at {bytes} bytes"));
        }
        let body = fetch(agent(agents, name)?, name, bytes)?;
        let path = beside(out, name, &body);
        publish(&path, &body).with_context(|| format!("keeping {name}'s capture"))?;
        kept.push((name.clone(), path, frames));
    }
    let said_one = |(name, path, frames): &(String, PathBuf, u64)| {
        let how = running.how.get(name).map(String::as_str).unwrap_or("?");
        let noun = if *frames == 1 { "frame" } else { "frames" };
        format!("{name}: {how}, {frames} {noun} in {}", path.display())
    };
    let from: Vec<String> = kept.iter().map(said_one).collect();
    let said = merge_into(out, &kept, facts)?;
    Ok(Merged {
        path: out.to_path_buf(),
        said: format!("the agents' captures, merged by frame identity ({}){said}", from.join("; ")),
        incomplete,
    })
}

fn agent<'a>(agents: &'a mut BTreeMap<String, Agent>, name: &str) -> Result<&'a mut Agent> {
    agents.get_mut(name).ok_or_else(|| anyhow!("no agent for endpoint {name}"))
}

/// The `bytes` of a stopped capture, chunk by chunk, each checked against what
/// was asked: an agent cannot make the controller hold more than it said.
fn fetch(a: &mut Agent, name: &str, bytes: u64) -> Result<Vec<u8>> {
    let mut body = Vec::with_capacity(usize::try_from(bytes).unwrap_or(0));
    while (body.len() as u64) < bytes {
        let offset = body.len() as u64;
        match a.request(&ToAgent::CaptureRead { offset }, CAPTURE_WITHIN)? {
            FromAgent::CaptureChunk { offset: at, bytes: chunk } => {
                let n = chunk.0.len() as u64;
                if at != offset || n == 0 || n > CAPTURE_CHUNK || offset + n > bytes {
                    bail!("endpoint {name}'s agent sent {n} bytes of its capture at {at} when asked for those at {offset} of {bytes}");
                }
                body.extend_from_slice(&chunk.0);
            }
            other => return Err(unexpected(name, "CaptureChunk", &other)),
        }
    }
    Ok(body)
}

/// Where endpoint `name`'s own capture is kept: beside the merged one, named
/// for the endpoint, `.pcap` or `.pcapng` as its first bytes say.
fn beside(out: &Path, name: &str, body: &[u8]) -> PathBuf {
    let stem = out.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let safe: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    let ext = if body.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]) { "pcapng" } else { "pcap" };
    out.with_file_name(format!("{stem}.{safe}.{ext}"))
}

/// Writes `body` to `path` whole, or not at all.
fn publish(path: &Path, body: &[u8]) -> Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(body)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Merges the kept captures into `out`: two hosts' by frame identity; one host's
/// (every endpoint on one address: nothing crosses a wire) as it is. What the
/// merge found, to follow the report's word on where the wire came from.
fn merge_into(
    out: &Path,
    kept: &[(String, PathBuf, u64)],
    facts: &BTreeMap<String, EndpointFacts>,
) -> Result<String> {
    let ip_of = |name: &str| -> Result<IpAddr> {
        let f = facts.get(name).ok_or_else(|| anyhow!("endpoint {name} set nothing up"))?;
        f.ip.parse()
            .map_err(|_| anyhow!("endpoint {name}'s address `{}` is not an IP address", f.ip))
    };
    let mut hosts: Vec<(IpAddr, &String, &PathBuf)> = Vec::new();
    for (name, path, _) in kept {
        let ip = ip_of(name)?;
        if !hosts.iter().any(|(h, ..)| *h == ip) {
            hosts.push((ip, name, path));
        }
    }
    let read = |p: &Path| {
        Whole::read(p).map_err(|e| e.into_inner().context(format!("reading {}", p.display())))
    };
    match hosts.as_slice() {
        [(h, name, path)] => {
            let one = read(path)?;
            let frames = one.view();
            // Everything the one capture holds, as it holds it, as a pcapng:
            // against an address no frame has, no frame is between two hosts.
            let nobody = match h {
                IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
                IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
            };
            let m = merge::merge(
                &Taken { host: *h, frames: &frames },
                &Taken { host: nobody, frames: &[] },
            );
            write(out, ([name.as_str(), "-"], [*h, nobody]), &m, [&frames, &[]])
                .map_err(|e| e.into_inner().context(format!("writing {}", out.display())))?;
            Ok(": one host, nothing crossed a wire".into())
        }
        [(ha, na, pa), (hb, nb, pb)] => {
            let (a, b) = (read(pa)?, read(pb)?);
            let (va, vb) = (a.view(), b.view());
            let m = merge::merge(&Taken { host: *ha, frames: &va }, &Taken { host: *hb, frames: &vb });
            write(out, ([na.as_str(), nb.as_str()], [*ha, *hb]), &m, [&va, &vb])
                .map_err(|e| e.into_inner().context(format!("writing {}", out.display())))?;
            let lost = m.count(Side::A, Seen::SenderOnly) + m.count(Side::B, Seen::SenderOnly);
            let made = m.count(Side::A, Seen::ReceiverOnly) + m.count(Side::B, Seen::ReceiverOnly);
            let mut said = String::new();
            if lost > 0 {
                said.push_str(&format!("; {lost} seen at their sender only (not delivered)"));
            }
            if made > 0 {
                said.push_str(&format!("; {made} seen at their receiver only (made or changed on the way)"));
            }
            Ok(said)
        }
        more => bail!(
            "the agents' captures merge two hosts' views, and this scenario's endpoints are on {} addresses\nhint: capture its wire with a switch (the lab, --bridge) or -i",
            more.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dissector::capture::{OutPacket, PcapngWriter};
    use dissector::craft::{rc_packet, Encap, Host};
    use dissector::wire::Opcode;
    use dissector::LinkType;

    /// A frame from host `from` to `to`: `op` of `psn`, IP identification `ident`.
    fn roce(from: u8, to: u8, op: u8, psn: u32, ident: u16) -> Vec<u8> {
        let enc = Encap { ip_ident: ident, ..Encap::default() };
        rc_packet(&enc, &Host::v4(from), &Host::v4(to), Opcode(op), psn, &[7; 8])
    }

    /// A pcapng of `frames`, each with its comment (marks), in order.
    fn capture(dir: &Path, name: &str, frames: &[(&[u8], Option<String>)]) -> PathBuf {
        let path = dir.join(name);
        let mut f = Vec::new();
        let mut w = PcapngWriter::new(&mut f, "test").expect("writer");
        let id = w.add_interface(LinkType::ETHERNET, 0, None).expect("interface");
        for (i, (data, comment)) in frames.iter().enumerate() {
            let p = OutPacket { comment: comment.as_deref(), ..OutPacket::new(id, i as u64, data) };
            w.write_packet(&p).expect("packet");
        }
        w.flush().expect("flush");
        drop(w);
        std::fs::write(&path, f).expect("write");
        path
    }

    /// What the switch dropped and the hosts saw at its sender only agrees, as
    /// does a disconnect after the agents stopped; a frame a host's capture
    /// missed, or one sent in another order, does not.
    #[test]
    fn the_hosts_merged_capture_is_held_to_the_switchs_recording() {
        use lab::mark::{Mark, Marks, RuleRef};
        let dir = tempfile::tempdir().expect("dir");
        let (w1, w2, w2again, ack, late) = (
            roce(1, 2, 0x0a, 1, 1),
            roce(1, 2, 0x0a, 2, 2),
            roce(1, 2, 0x0a, 2, 3),
            roce(2, 1, 0x11, 2, 9),
            roce(1, 2, 0x11, 5, 4),
        );
        let dropped = Marks(vec![Mark::Dropped(RuleRef { index: 1, rule: "drop".into() })]);
        let switch = capture(
            dir.path(),
            "switch.pcapng",
            &[(&w1, None), (&w2, dropped.comment()), (&w2again, None), (&ack, None), (&late, None)],
        );
        let lost = Marks(vec![Mark::SenderOnly { from: "a".into(), to: "b".into() }]);
        let agrees = capture(
            dir.path(),
            "agrees.pcapng",
            &[(&w1, None), (&w2, lost.comment()), (&w2again, None), (&ack, None)],
        );
        assert_eq!(against_switch(&switch, &agrees).expect("compared"), Vec::<String>::new());
        let missed = capture(
            dir.path(),
            "missed.pcapng",
            &[(&w2, lost.comment()), (&w2again, None), (&ack, None)],
        );
        let d = against_switch(&switch, &missed).expect("compared");
        assert_eq!(
            d,
            ["from 10.0.0.1: the switch saw 4 frames sent, the hosts 2, differing from sent frame 1 on"]
        );
        let reordered = capture(
            dir.path(),
            "reordered.pcapng",
            &[(&w1, None), (&w2again, None), (&w2, lost.comment()), (&ack, None)],
        );
        assert_eq!(against_switch(&switch, &reordered).expect("compared").len(), 1);
        // Delivered at the hosts, dropped at the switch: not the same wire.
        let delivered = capture(
            dir.path(),
            "delivered.pcapng",
            &[(&w1, None), (&w2, None), (&w2again, None), (&ack, None)],
        );
        let d = against_switch(&switch, &delivered).expect("compared");
        assert_eq!(
            d,
            ["to 10.0.0.1's peer: 1 frames the hosts saw delivered the switch never delivered"]
        );
    }

    /// Every endpoint on one address (two agents on one host): nothing crosses a
    /// wire, and the one capture, a pcap from a capture command, is kept whole
    /// as a pcapng, no frame marked lost.
    #[test]
    fn one_hosts_capture_is_the_wire_as_it_is() {
        use dissector::capture::PcapWriter;
        let dir = tempfile::tempdir().expect("dir");
        let (send, ack) = (roce(1, 1, 0x04, 1, 1), roce(1, 1, 0x11, 1, 2));
        let pcap = dir.path().join("x.a.pcap");
        let mut f = Vec::new();
        let mut w = PcapWriter::new(&mut f, LinkType::ETHERNET, 0).expect("writer");
        for (i, data) in [&send, &ack].into_iter().enumerate() {
            w.write_packet(i as u64, data, data.len() as u32).expect("packet");
        }
        w.flush().expect("flush");
        drop(w);
        std::fs::write(&pcap, f).expect("write");
        let facts = |ip: &str| EndpointFacts::rxe0(ip, None);
        let eps =
            BTreeMap::from([("a".to_string(), facts("10.0.0.1")), ("b".into(), facts("10.0.0.1"))]);
        let kept = [("a".to_string(), pcap.clone(), 2), ("b".to_string(), pcap, 2)];
        let out = dir.path().join("x.pcapng");
        assert_eq!(
            merge_into(&out, &kept, &eps).expect("merged"),
            ": one host, nothing crossed a wire"
        );
        let mut r = dissector::capture::open(&out).expect("a capture");
        let mut got = Vec::new();
        while let Some(p) = r.next_packet().expect("readable") {
            got.push((p.data.to_vec(), p.comment.map(str::to_string)));
        }
        assert_eq!(got, [(send, None), (ack, None)]);
        assert!(std::fs::read(&out).expect("bytes").starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]));
    }

    /// A host's own capture is named for its endpoint, as its format says, and
    /// an endpoint name never leads out of the run's directory.
    #[test]
    fn each_hosts_capture_is_kept_beside_the_merged_one() {
        let out = Path::new("/runs/x/send.pcapng");
        let ng = [0x0a, 0x0d, 0x0d, 0x0a, 0];
        assert_eq!(beside(out, "requester", &ng), Path::new("/runs/x/send.requester.pcapng"));
        assert_eq!(beside(out, "b", &[0xd4, 0xc3]), Path::new("/runs/x/send.b.pcap"));
        assert_eq!(beside(out, "../etc", &ng), Path::new("/runs/x/send.___etc.pcapng"));
    }
}
