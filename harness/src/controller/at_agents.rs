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
        format!("{name}: {how}, {frames} frames in {}", path.display())
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
        [(_, _, path)] => {
            std::fs::copy(path, out).with_context(|| format!("writing {}", out.display()))?;
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
