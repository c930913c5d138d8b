//! `roce merge`'s pipeline: two captures, one taken on each host of an
//! exchange, read whole, merged by frame identity ([`dissector::merge`]) and
//! written as one pcapng that says of each frame who sent it (its interface)
//! and, where it was not seen at both ends, what that means (its comment).
//!
//! Owns: reading the two captures, finding the hosts when not given, the
//! merged capture's interfaces and comments, the [`Summary`]. Imports:
//! dissector (captures, the merge), the lab's marks (what a comment says).
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use dissector::capture::{self, OutPacket, PcapngWriter};
use dissector::merge::{self, Frame, Seen, Side, Taken};
use dissector::LinkType;
use lab::mark::{Mark, Marks};

use super::Error;

/// What to merge, and where to.
#[derive(Debug, Clone)]
pub(crate) struct Merge {
    /// The capture taken at host a, then at host b.
    pub captures: [PathBuf; 2],
    /// Each capture's host address, when the user said; found otherwise.
    pub hosts: Option<[IpAddr; 2]>,
    pub out: PathBuf,
}

/// A capture read whole: each frame's time, link type and bytes.
pub(crate) struct Whole {
    frames: Vec<(u64, LinkType, Vec<u8>)>,
}

impl Whole {
    pub(crate) fn read(path: &Path) -> Result<Whole, Error> {
        let mut r = capture::open(path).map_err(|e| {
            Error::bad_input(anyhow!(
                "{e}\nhint: give two pcap or pcapng captures, one taken on each host"
            ))
        })?;
        let mut frames = Vec::new();
        loop {
            match r.next_packet() {
                Ok(Some(p)) => frames.push((p.ts_ns, p.link, p.data.to_vec())),
                Ok(None) => return Ok(Whole { frames }),
                Err(e) => return Err(Error::bad_input(anyhow!("{e}"))),
            }
        }
    }

    pub(crate) fn view(&self) -> Vec<Frame<'_>> {
        self.frames
            .iter()
            .map(|(ts_ns, link, data)| Frame { ts_ns: *ts_ns, link: *link, data })
            .collect()
    }
}

/// What a merge did, for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    pub hosts: [IpAddr; 2],
    /// Whether the hosts were found rather than given.
    pub found: bool,
    pub read: [usize; 2],
    pub written: usize,
    /// Of the frames each host sent: seen at both ends, at its sender only,
    /// at its receiver only.
    pub sent: [[usize; 3]; 2],
    pub elsewhere: usize,
    pub b_ahead_ns: Option<i64>,
    pub least_delay_ns: Option<i64>,
}

/// Merges `plan.captures` into `plan.out` (whole, or not at all).
pub(crate) fn run(plan: &Merge) -> Result<Summary, Error> {
    let [a, b] = [&plan.captures[0], &plan.captures[1]].map(|p| {
        Whole::read(p).map_err(|e| Error {
            kind: e.kind,
            error: e.error.context(format!("reading {}", p.display())),
        })
    });
    let (a, b) = (a?, b?);
    let (va, vb) = (a.view(), b.view());
    let (hosts, found, m) = match plan.hosts {
        Some(hosts) => {
            if hosts[0] == hosts[1] {
                return Err(Error::bad_input(anyhow!(
                    "both captures are said to be taken at {}\nhint: --hosts names two hosts, the first capture's first",
                    hosts[0]
                )));
            }
            let m = merge::merge(
                &Taken { host: hosts[0], frames: &va },
                &Taken { host: hosts[1], frames: &vb },
            );
            (hosts, false, m)
        }
        None => {
            let ((ha, hb), m) = merge::merge_found(&va, &vb).ok_or_else(|| {
                Error::bad_input(anyhow!(
                    "cannot tell which hosts took {} and {}: no two addresses have frames seen at both ends both ways\nhint: say them: --hosts ADDRESS_A,ADDRESS_B (the host that took the first capture first)",
                    plan.captures[0].display(),
                    plan.captures[1].display()
                ))
            })?;
            ([ha, hb], true, m)
        }
    };
    write(&plan.out, (["a", "b"], hosts), &m, [&va, &vb])?;
    let seen = |s: Side| [Seen::Both, Seen::SenderOnly, Seen::ReceiverOnly].map(|x| m.count(s, x));
    Ok(Summary {
        hosts,
        found,
        read: [va.len(), vb.len()],
        written: m.frames.len(),
        sent: [seen(Side::A), seen(Side::B)],
        elsewhere: m.frames.iter().filter(|f| f.seen == Seen::Elsewhere).count(),
        b_ahead_ns: m.b_ahead_ns,
        least_delay_ns: m.least_delay_ns,
    })
}

/// The merged capture: one interface per host and link type, named for the
/// host (`a 10.0.0.1`, with `names` [a, b]), carrying what it sent, or for a
/// frame not between the two, what its capture saw; on each frame not seen at
/// both ends, its [`Marks`] as a comment.
pub(crate) fn write(
    out: &Path,
    (names, hosts): ([&str; 2], [IpAddr; 2]),
    m: &merge::Merge,
    frames: [&[Frame<'_>]; 2],
) -> Result<(), Error> {
    let name = |s: Side| match s {
        Side::A => names[0],
        Side::B => names[1],
    };
    let index = |s: Side| usize::from(s == Side::B);
    capture::write_whole(out, |w| {
        let mut pc = PcapngWriter::new(w, concat!("roce merge ", env!("CARGO_PKG_VERSION")))?;
        let mut interfaces: Vec<((Side, bool, LinkType), u32)> = Vec::new();
        for f in &m.frames {
            let copy = &frames[index(f.side)][f.index];
            let between = f.seen != Seen::Elsewhere;
            let key = (f.from, between, copy.link);
            let id = match interfaces.iter().find(|(k, _)| *k == key) {
                Some((_, id)) => *id,
                None => {
                    let label = if between {
                        format!("{} {} (sent)", name(f.from), hosts[index(f.from)])
                    } else {
                        format!(
                            "{} {} (seen there, not between the two)",
                            name(f.from),
                            hosts[index(f.from)]
                        )
                    };
                    let id = pc.add_interface(copy.link, 0, Some(&label))?;
                    interfaces.push((key, id));
                    id
                }
            };
            let comment = seen_marks(f.seen, name(f.from), name(f.from.other())).comment();
            let p =
                OutPacket { comment: comment.as_deref(), ..OutPacket::new(id, f.ts_ns, copy.data) };
            pc.write_packet(&p)?;
        }
        pc.flush()
    })
    .map_err(Error::from)
}

/// What a merged frame's comment says of where it was seen (nothing for a
/// frame seen at both ends, or not between the two hosts): the marks the judge
/// reads back.
fn seen_marks(seen: Seen, from: &str, to: &str) -> Marks {
    let (from, to) = (from.to_string(), to.to_string());
    Marks(match seen {
        Seen::Both | Seen::Elsewhere => vec![],
        Seen::SenderOnly => vec![Mark::SenderOnly { from, to }],
        Seen::ReceiverOnly => vec![Mark::ReceiverOnly { from, to }],
    })
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [ha, hb] = self.hosts;
        let how = if self.found { "found from the frames" } else { "as given" };
        writeln!(
            f,
            "hosts ({how}): a {ha} took the first capture ({} frames), b {hb} the second ({})",
            self.read[0], self.read[1]
        )?;
        for (i, (name, host)) in [("a", ha), ("b", hb)].into_iter().enumerate() {
            let [both, sender, receiver] = self.sent[i];
            writeln!(f, "  sent by {name} {host}: {both} seen at both ends, {sender} at {name} only (never reached the other), {receiver} at the other only ({name} never sent them)")?;
        }
        if self.elsewhere > 0 {
            writeln!(f, "  not between the two: {}", self.elsewhere)?;
        }
        match self.b_ahead_ns {
            Some(ns) => {
                write!(f, "  b's clock against a's: {:+.3} ms (times are a's)", ns as f64 / 1e6)?
            }
            None => write!(f, "  no frame seen at both ends: b's times are taken as they are")?,
        }
        if let Some(d) = self.least_delay_ns {
            write!(f, "; least one-way delay {:.3} ms", d as f64 / 1e6)?;
        }
        writeln!(f)?;
        write!(f, "{} frames written", self.written)
    }
}
