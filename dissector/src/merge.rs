//! Two hosts' captures of one exchange made one timeline: each frame matched
//! across the two by what it is, never by the captures' clocks, which are two
//! hosts' and need not agree.
//!
//! A capture taken on a host holds what the host sent and what reached it. A
//! frame one host sent the other is in its sender's capture and, if it arrived,
//! in its receiver's. [`merge`] matches the two copies by the frame's identity
//! ([`Identity`]: addresses, IP protocol and identification, and the IP payload
//! with its TCP or UDP checksum left out; for RoCE, the BTH through the ICRC)
//! and keeps one, saying where it was seen ([`Seen`]):
//! - at both ends: it crossed;
//! - at its sender only: lost on the way (or the receiver's capture missed it);
//! - at its receiver only: made or changed on the way (a switch's answer; a
//!   frame a switch modified is then its changed copy here and its original
//!   seen at the sender only).
//!
//! What a switch or router on the way may change (MACs, TTL, DSCP and ECN, the
//! IP checksum, Ethernet padding) is not part of the identity; neither is the
//! TCP or UDP checksum, which a sender's capture often shows unfinished (left to
//! the NIC). A frame the sending NIC splits (TCP segmentation offload) matches
//! nothing. Two copies of one frame (a retransmission identical to the byte,
//! IP identification included, as some NICs send them) are matched in order.
//!
//! **Order.** Each direction keeps its sender's order; a frame seen at its
//! receiver only goes after the frame its receiver saw before it (just before
//! the first frame seen at both ends, when it saw none before). The two
//! directions are interleaved by time, on the first capture's clock: the second
//! capture's clock is set against it by the matched frames themselves. With
//! `d_ab` the least of (received at b − sent at a) over the frames a sent and
//! `d_ba` the least of (received at a − sent at b) over b's, b's clock is ahead
//! by `(d_ab − d_ba) / 2` (NTP's estimate, exact when the least delay is the
//! same both ways); with frames matched one way only, by `d_ab` (or `−d_ba`),
//! taking the path's delay as nothing.
//!
//! Owns: [`merge`] and its vocabulary. Imports: the frame decoder only.
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;

use crate::frame::{self, Net};
use crate::LinkType;

/// One frame of a capture, as [`merge`] takes it.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    pub ts_ns: u64,
    pub link: LinkType,
    pub data: &'a [u8],
}

/// A capture and the address of the host it was taken on.
#[derive(Debug, Clone, Copy)]
pub struct Taken<'a> {
    pub host: IpAddr,
    pub frames: &'a [Frame<'a>],
}

/// Which of the two captures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    A,
    B,
}

impl Side {
    /// The other capture.
    pub fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// Where a frame of the merged timeline was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Seen {
    /// Sent by one host, received by the other: in both captures.
    Both,
    /// Sent by one host to the other, never seen there.
    SenderOnly,
    /// Seen by one host as coming from the other, never sent by it as such.
    ReceiverOnly,
    /// Not a frame between the two hosts (ARP, other peers' traffic): as its
    /// capture holds it.
    Elsewhere,
}

/// One frame of the merged timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Merged {
    /// On the first capture's clock: its sender's time (the receiver's for a
    /// frame seen at its receiver only).
    pub ts_ns: u64,
    /// The copy kept: the receiver's for a frame that crossed (what arrived),
    /// else the only one there is.
    pub side: Side,
    /// Its index in that capture.
    pub index: usize,
    /// Which host sent it, for a frame between the two; else the capture it
    /// was seen in.
    pub from: Side,
    pub seen: Seen,
}

/// The merged timeline, and how the two clocks were set against each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merge {
    pub frames: Vec<Merged>,
    /// How far b's clock is ahead of a's (negative: behind), as the matched
    /// frames say; none when no frame was matched (b's times are then taken as
    /// they are).
    pub b_ahead_ns: Option<i64>,
    /// The least one-way delay, as frames matched both ways say (half the sum of
    /// the least differences each way, whatever the clocks); none unless frames
    /// were matched both ways. Never negative when each capture was taken where
    /// it is said to be.
    pub least_delay_ns: Option<i64>,
}

impl Merge {
    /// How many frames were seen as `seen`, of those `from` sent.
    pub fn count(&self, from: Side, seen: Seen) -> usize {
        self.frames.iter().filter(|f| f.from == from && f.seen == seen).count()
    }
}

/// What makes two captured copies one frame: the IP addresses, protocol and
/// identification, and a hash of the IP payload (its TCP or UDP checksum left
/// out); [`merge`] compares the bytes too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Identity {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    pub ident: u32,
    pub payload: u64,
}

/// A frame's IP packet, as matching reads it.
struct Ip<'a> {
    src: IpAddr,
    dst: IpAddr,
    protocol: u8,
    ident: u32,
    /// The IP payload (from the first header after the fixed IP header),
    /// without link padding.
    payload: &'a [u8],
    /// Where in `payload` a TCP or UDP checksum is, left out of the identity.
    checksum: Option<usize>,
}

fn ip_of<'a>(f: &Frame<'a>) -> Option<Ip<'a>> {
    let d = frame::decode(f.link, f.data, &frame::Options::default());
    let at = d.offsets.l4;
    let (src, dst, protocol, ident, end) = match d.net {
        Net::Ipv4(h) => {
            let end = d.offsets.net + usize::from(h.total_len);
            (IpAddr::V4(h.src), IpAddr::V4(h.dst), h.protocol, u32::from(h.ident), end)
        }
        Net::Ipv6(h) => {
            let end = d.offsets.net + 40 + usize::from(h.payload_len);
            (IpAddr::V6(h.src), IpAddr::V6(h.dst), h.next_header, h.flow_label, end)
        }
        _ => return None,
    };
    let payload = f.data.get(at..end.min(f.data.len()))?;
    // Past IPv6 extension headers, the transport header starts later.
    let transport = d.offsets.transport.checked_sub(at);
    let checksum = match (&d.udp, &d.tcp) {
        (Some(_), _) => transport.map(|t| t + 6),
        (_, Some(_)) => transport.map(|t| t + 16),
        _ => None,
    };
    Some(Ip { src, dst, protocol, ident, payload, checksum })
}

impl Ip<'_> {
    /// The payload's bytes, the checksum's two left out.
    fn parts(&self) -> [&[u8]; 2] {
        match self.checksum.filter(|c| c + 2 <= self.payload.len()) {
            Some(c) => [&self.payload[..c], &self.payload[c + 2..]],
            None => [self.payload, &[]],
        }
    }

    fn identity(&self) -> Identity {
        let mut h = std::hash::DefaultHasher::new();
        for p in self.parts() {
            p.hash(&mut h);
        }
        Identity {
            src: self.src,
            dst: self.dst,
            protocol: self.protocol,
            ident: self.ident,
            payload: h.finish(),
        }
    }

    fn same(&self, other: &Ip<'_>) -> bool {
        self.parts() == other.parts()
    }
}

/// One direction's frames: what the sender's capture holds and what the
/// receiver's, by index, matched in order.
struct Direction {
    from: Side,
    /// The sender's frames (indices into its capture), each with the index of
    /// its receiver's copy when it has one.
    sent: Vec<(usize, Option<usize>)>,
    /// The receiver's frames matched to nothing, each with the index of the
    /// receiver's frame before it that was matched (none: before them all).
    unsent: Vec<(usize, Option<usize>)>,
}

/// Merges the capture taken at host a with the one taken at host b.
pub fn merge(a: &Taken<'_>, b: &Taken<'_>) -> Merge {
    fn ips<'a>(t: &Taken<'a>, hosts: (IpAddr, IpAddr)) -> Vec<Option<Ip<'a>>> {
        t.frames.iter().map(|f| ip_of(f).filter(|ip| between(ip, hosts.0, hosts.1))).collect()
    }
    let (ia, ib) = (ips(a, (a.host, b.host)), ips(b, (a.host, b.host)));
    let at = |s: Side| match s {
        Side::A => (a, &ia),
        Side::B => (b, &ib),
    };
    let dirs = [Side::A, Side::B].map(|from| {
        let (sender, s_ips) = at(from);
        let (_, r_ips) = at(from.other());
        direction(from, sender.host, s_ips, r_ips)
    });
    // b's clock against a's, from the least one-way difference each way.
    let ts = |s: Side, i: usize| i128::from(at(s).0.frames[i].ts_ns);
    let least = |d: &Direction| {
        d.sent.iter().filter_map(|&(s, r)| Some(ts(d.from.other(), r?) - ts(d.from, s))).min()
    };
    let (d_ab, d_ba) = (least(&dirs[0]), least(&dirs[1]));
    let ahead = match (d_ab, d_ba) {
        (Some(ab), Some(ba)) => Some((ab - ba) / 2),
        (Some(ab), None) => Some(ab),
        (None, Some(ba)) => Some(-ba),
        (None, None) => None,
    };
    let ns = |x: i128| x.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    let b_ahead_ns = ahead.map(ns);
    let least_delay_ns = d_ab.zip(d_ba).map(|(ab, ba)| ns((ab + ba) / 2));
    // A time of capture `s` on a's clock.
    let on_a = |s: Side, i: usize| -> u64 {
        let t = match s {
            Side::A => ts(s, i),
            Side::B => ts(s, i) - ahead.unwrap_or(0),
        };
        t.clamp(0, i128::from(u64::MAX)) as u64
    };
    let mut lists: Vec<Vec<Merged>> = Vec::new();
    for d in &dirs {
        let (from, to) = (d.from, d.from.other());
        let mut list = Vec::with_capacity(d.sent.len() + d.unsent.len());
        // Frames seen at the receiver only go after the receiver's matched
        // frame before them, each time kept from going back.
        let mut unsent = d.unsent.iter().peekable();
        let mut place_unsent = |list: &mut Vec<Merged>, upto: Option<usize>| {
            while let Some(&&(i, _)) = unsent.peek().filter(|(_, after)| *after == upto) {
                unsent.next();
                let floor = list.last().map_or(0, |m: &Merged| m.ts_ns);
                let ts_ns = on_a(to, i).max(floor);
                list.push(Merged { ts_ns, side: to, index: i, from, seen: Seen::ReceiverOnly });
            }
        };
        // Those the receiver saw before any matched frame go just before the
        // first matched one (or after everything, when none was).
        let mut first = true;
        for &(s, r) in &d.sent {
            if r.is_some() && first {
                place_unsent(&mut list, None);
                first = false;
            }
            let (side, index, seen) = match r {
                Some(r) => (to, r, Seen::Both),
                None => (from, s, Seen::SenderOnly),
            };
            list.push(Merged { ts_ns: on_a(from, s), side, index, from, seen });
            if r.is_some() {
                place_unsent(&mut list, r);
            }
        }
        if first {
            place_unsent(&mut list, None);
        }
        // Any left (after a matched frame the sender's order put elsewhere).
        for &(i, _) in unsent {
            let floor = list.last().map_or(0, |m| m.ts_ns);
            let ts_ns = on_a(to, i).max(floor);
            list.push(Merged { ts_ns, side: to, index: i, from, seen: Seen::ReceiverOnly });
        }
        lists.push(list);
    }
    for (side, ips) in [(Side::A, &ia), (Side::B, &ib)] {
        let list = (0..ips.len())
            .filter(|&i| ips[i].is_none())
            .map(|i| Merged {
                ts_ns: on_a(side, i),
                side,
                index: i,
                from: side,
                seen: Seen::Elsewhere,
            })
            .collect();
        lists.push(list);
    }
    Merge { frames: interleave(lists), b_ahead_ns, least_delay_ns }
}

/// Merges two captures when nobody says which hosts took them: the hosts are
/// the two addresses most IP frames of both go between, in the order that gives
/// the frames a delay, not a negative one (the other order turns sending into
/// receiving). None when no pair of addresses has frames matched both ways.
/// One merge when the first guess of the order is right, two when not.
pub fn merge_found(a: &[Frame<'_>], b: &[Frame<'_>]) -> Option<((IpAddr, IpAddr), Merge)> {
    let mut pairs: HashMap<(IpAddr, IpAddr), usize> = HashMap::new();
    for f in a.iter().chain(b) {
        if let Some(ip) = ip_of(f) {
            let pair = if ip.src <= ip.dst { (ip.src, ip.dst) } else { (ip.dst, ip.src) };
            *pairs.entry(pair).or_default() += 1;
        }
    }
    // The most frames; the lower addresses on a tie, so that the answer never
    // depends on the map's order.
    let ((x, y), _) = pairs.into_iter().max_by(|(p, n), (q, m)| n.cmp(m).then(q.cmp(p)))?;
    let merged = |ha, hb| merge(&Taken { host: ha, frames: a }, &Taken { host: hb, frames: b });
    let m = merged(x, y);
    match m.least_delay_ns? {
        d if d > 0 => Some(((x, y), m)),
        d if d < 0 => Some(((y, x), merged(y, x))),
        _ => None,
    }
}

/// Whether `ip` goes between the two hosts, either way.
fn between(ip: &Ip<'_>, a: IpAddr, b: IpAddr) -> bool {
    (ip.src == a && ip.dst == b) || (ip.src == b && ip.dst == a)
}

/// The frames `from` (at `host`) sent the other host, matched against what the
/// other's capture holds from it.
fn direction(
    from: Side,
    host: IpAddr,
    sender: &[Option<Ip<'_>>],
    receiver: &[Option<Ip<'_>>],
) -> Direction {
    fn mine<'i, 'a>(ips: &'i [Option<Ip<'a>>], i: usize, host: IpAddr) -> Option<&'i Ip<'a>> {
        ips[i].as_ref().filter(|ip| ip.src == host)
    }
    let mut waiting: HashMap<Identity, VecDeque<usize>> = HashMap::new();
    let mut sent: Vec<(usize, Option<usize>)> = Vec::new();
    for i in 0..sender.len() {
        if let Some(ip) = mine(sender, i, host) {
            waiting.entry(ip.identity()).or_default().push_back(sent.len());
            sent.push((i, None));
        }
    }
    let mut unsent = Vec::new();
    let mut last_matched = None;
    for r in 0..receiver.len() {
        let Some(ip) = mine(receiver, r, host) else { continue };
        let queue = waiting.get_mut(&ip.identity());
        // The earliest unmatched copy the sender sent, the same to the byte.
        let found = queue.and_then(|q| {
            let k = q
                .iter()
                .position(|&k| mine(sender, sent[k].0, host).is_some_and(|s| s.same(ip)))?;
            q.remove(k)
        });
        match found {
            Some(k) => {
                sent[k].1 = Some(r);
                last_matched = Some(r);
            }
            None => unsent.push((r, last_matched)),
        }
    }
    Direction { from, sent, unsent }
}

/// The lists merged into one by time, each keeping its own order (a list whose
/// times go back is not reordered): the head with the earliest time goes
/// first, the earlier list on a tie.
fn interleave(lists: Vec<Vec<Merged>>) -> Vec<Merged> {
    let mut heads: Vec<_> = lists.into_iter().map(|l| l.into_iter().peekable()).collect();
    let mut out = Vec::new();
    loop {
        let next =
            heads.iter_mut().enumerate().filter_map(|(i, h)| h.peek().map(|m| (m.ts_ns, i))).min();
        let Some((_, i)) = next else { return out };
        out.extend(heads[i].next());
    }
}

#[cfg(test)]
mod tests;
