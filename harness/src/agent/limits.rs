//! What one controller may make an agent do: how much memory it may register, how
//! many MRs and QPs, how fast it may send crafted frames, which addresses its
//! QPs may connect to (and so its probes reach: a probe goes only to the peer of
//! one of the scenario's connected QPs), and what it runs to capture its wire
//! (its own `--capture-command`, never the controller's). A request beyond a
//! limit is refused with an error that names the limit and the option that sets
//! it; the agent lives on.
//!
//! Owns: the limits and their checks. Imports: nothing of the agent; the stream
//! vocabulary's bound on a stream's messages ([`STREAM_MESSAGES`]), and `pnet`'s
//! interface list for the networks of the device's address.
use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::protocol::stream::STREAM_MESSAGES;
use crate::protocol::MAX_CQ_DEPTH;

/// The limits, with the defaults `roce agent` starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Bytes registered at once, all MRs together.
    pub(crate) mr_bytes: u64,
    pub(crate) mrs: usize,
    pub(crate) qps: usize,
    /// Crafted frames per second.
    pub(crate) probe_rate: u32,
    pub(crate) allow: Allow,
    /// How this host captures its wire when a controller asks (`CaptureStart`):
    /// the words of `--capture-command`, `{iface}` and `{file}` among them to be
    /// replaced; `None`: through libpcap. Only the agent's own command line sets
    /// it, never a controller.
    pub(crate) capture_command: Option<Vec<String>>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            mr_bytes: 1 << 30,
            mrs: 256,
            qps: 256,
            probe_rate: 1000,
            allow: Allow::LocalSubnet,
            capture_command: None,
        }
    }
}

/// Where a QP may connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Allow {
    /// The subnet of the interface that holds the device's RoCE address.
    LocalSubnet,
    /// These networks (`--allow CIDR`, repeatable).
    Cidrs(Vec<Cidr>),
}

/// `10.0.0.0/24`, `fd00::/64`, or a single address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cidr {
    pub(crate) net: IpAddr,
    pub(crate) prefix: u8,
}

impl std::str::FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Cidr, String> {
        let (a, p) = s.split_once('/').map_or((s, None), |(a, p)| (a, Some(p)));
        let net: IpAddr = a
            .parse()
            .map_err(|_| format!("`{a}` is not an IPv4 or IPv6 address (e.g. 10.0.0.0/24)"))?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| format!("`/{p}`: the prefix length is 0 to {max}"))?,
        };
        Ok(Cidr { net, prefix })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

impl Cidr {
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        // Both as the top bits of a u128 (an IPv4 address in the top 32), so a
        // prefix masks the same way for either family.
        let bits = |ip: IpAddr| -> Option<u128> {
            match (self.net, ip) {
                (IpAddr::V4(_), IpAddr::V4(a)) => Some(u128::from(u32::from(a)) << 96),
                (IpAddr::V6(_), IpAddr::V6(a)) => Some(u128::from(a)),
                (IpAddr::V4(_), IpAddr::V6(a)) => {
                    a.to_ipv4_mapped().map(|a| u128::from(u32::from(a)) << 96)
                }
                (IpAddr::V6(_), IpAddr::V4(_)) => None,
            }
        };
        let (Some(net), Some(addr)) = (bits(self.net), bits(ip)) else { return false };
        let mask = if self.prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(self.prefix)) };
        net & mask == addr & mask
    }
}

/// The networks of this host's interface that holds `ip` (the device's RoCE
/// address), as the kernel has them.
pub(crate) fn subnets_of(ip: IpAddr) -> Vec<Cidr> {
    pnet::datalink::interfaces()
        .into_iter()
        .flat_map(|i| i.ips)
        .filter(|n| n.ip() == ip)
        .map(|n| Cidr { net: n.network(), prefix: n.prefix() })
        .collect()
}

/// What an agent's limits refuse; the controller is sent its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    #[error("refused: a stream of {count} messages, this agent allows {STREAM_MESSAGES}")]
    LongStream { count: u64 },
    #[error(
        "refused: {peer} is outside {}: {}; this agent's QPs connect (and its probes go) only there\nhint: start the agent with --allow CIDR to widen it",
        if *.given { "the networks --allow gives" } else { "the subnet of the RoCE interface (the default of --allow)" },
        if .nets.is_empty() { "none found".to_string() } else { .nets.iter().map(Cidr::to_string).collect::<Vec<_>>().join(", ") }
    )]
    OutsideAllowed {
        peer: IpAddr,
        /// The networks allowed; `given`: by `--allow` (else the interface's subnet).
        nets: Vec<Cidr>,
        given: bool,
    },
    #[error("refused: {asked} {what} asked, this agent allows {allowed} ({flag})")]
    TooMuch { what: &'static str, asked: u64, allowed: u64, flag: &'static str },
    #[error("refused: {frames} crafted frames now would pass this agent's limit of {rate} per second (--max-probe-rate); {recent} sent in the last second")]
    ProbeRate { frames: usize, rate: u32, recent: usize },
    #[error("refused: a wait of {ms} ms in one request, this agent waits at most {} ms (a scenario's steps each wait far less)", MAX_WAIT_MS)]
    LongWait { ms: u64 },
    #[error("refused: a CQ of {cqe} completions, this agent makes them of 1 to {} (the kernel pins what a CQ holds)", MAX_CQ_DEPTH)]
    CqDepth { cqe: u32 },
}

/// A CQ depth within [`MAX_CQ_DEPTH`] (and not 0).
pub(crate) fn cq_depth_ok(cqe: u32) -> Result<(), Refused> {
    if crate::protocol::cq_depth_fits(cqe) {
        Ok(())
    } else {
        Err(Refused::CqDepth { cqe })
    }
}

/// The longest one request may keep the agent waiting (a `sleep`, a wait for
/// completions or a CQ notification): a session holds its thread meanwhile.
pub(crate) const MAX_WAIT_MS: u64 = 15 * 60 * 1000;

impl Limits {
    /// `Ok` when one request may wait `ms`.
    pub(crate) fn may_wait(&self, ms: u64) -> Result<(), Refused> {
        if ms > MAX_WAIT_MS {
            return Err(Refused::LongWait { ms });
        }
        Ok(())
    }

    /// `Ok` when a stream of `count` messages may run.
    pub(crate) fn may_stream(&self, count: u64) -> Result<(), Refused> {
        if count > STREAM_MESSAGES {
            return Err(Refused::LongStream { count });
        }
        Ok(())
    }

    /// `Ok` when a QP of a device whose address is `mine` may connect to `peer`.
    pub(crate) fn may_connect(&self, mine: IpAddr, peer: IpAddr) -> Result<(), Refused> {
        let (nets, given) = match &self.allow {
            Allow::Cidrs(c) => (c.clone(), true),
            Allow::LocalSubnet => (subnets_of(mine), false),
        };
        if nets.iter().any(|n| n.contains(peer)) {
            return Ok(());
        }
        Err(Refused::OutsideAllowed { peer, nets, given })
    }

    /// `Ok` when `mrs` more MRs of `bytes` in all keep the endpoint within limits,
    /// with `qps` QPs.
    pub(crate) fn may_set_up(&self, mrs: usize, bytes: u64, qps: usize) -> Result<(), Refused> {
        let checks = [
            ("MRs", mrs as u64, self.mrs as u64, "--max-mrs"),
            ("bytes of MRs", bytes, self.mr_bytes, "--max-mr-bytes"),
            ("QPs", qps as u64, self.qps as u64, "--max-qps"),
        ];
        match checks.into_iter().find(|(_, asked, allowed, _)| asked > allowed) {
            Some((what, asked, allowed, flag)) => {
                Err(Refused::TooMuch { what, asked, allowed, flag })
            }
            None => Ok(()),
        }
    }
}

/// Crafted frames sent in the last second, against [`Limits::probe_rate`].
#[derive(Debug, Default)]
pub(crate) struct ProbeRate {
    sent: VecDeque<Instant>,
}

impl ProbeRate {
    /// Counts `frames` more now, or refuses them (nothing counted) when they would
    /// pass `rate` per second.
    pub(crate) fn take(&mut self, frames: usize, rate: u32, now: Instant) -> Result<(), Refused> {
        while self.sent.front().is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1)) {
            self.sent.pop_front();
        }
        if self.sent.len() + frames > rate as usize {
            return Err(Refused::ProbeRate { frames, rate, recent: self.sent.len() });
        }
        self.sent.extend(std::iter::repeat_n(now, frames));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_parse_and_contain() {
        let n: Cidr = "10.0.0.0/24".parse().unwrap();
        assert!(n.contains("10.0.0.2".parse().unwrap()));
        assert!(!n.contains("10.0.1.2".parse().unwrap()));
        assert!(
            n.contains("::ffff:10.0.0.9".parse().unwrap()),
            "an IPv4-mapped address is the IPv4 one"
        );
        assert!(!n.contains("fd00::1".parse().unwrap()));
        let one: Cidr = "192.0.2.7".parse().unwrap();
        assert_eq!(one.to_string(), "192.0.2.7/32");
        assert!(
            one.contains("192.0.2.7".parse().unwrap())
                && !one.contains("192.0.2.8".parse().unwrap())
        );
        let v6: Cidr = "fd00:1::/32".parse().unwrap();
        assert!(
            v6.contains("fd00:1:ffff::1".parse().unwrap())
                && !v6.contains("fd00:2::1".parse().unwrap())
        );
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("203.0.113.1".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Cidr>().unwrap_err().contains("0 to 32"));
        assert!("ten/8".parse::<Cidr>().unwrap_err().contains("not an IPv4 or IPv6 address"));
    }

    #[test]
    fn connections_outside_the_allowed_networks_are_refused_naming_the_limit() {
        let l = Limits {
            allow: Allow::Cidrs(vec!["10.0.0.0/24".parse().unwrap()]),
            ..Limits::default()
        };
        let me = "10.0.0.1".parse().unwrap();
        assert!(l.may_connect(me, "10.0.0.2".parse().unwrap()).is_ok());
        let e = l.may_connect(me, "198.51.100.9".parse().unwrap()).unwrap_err();
        assert!(matches!(&e, Refused::OutsideAllowed { given: true, nets, .. } if nets.len() == 1));
        let text = e.to_string();
        assert!(
            text.contains("198.51.100.9 is outside the networks --allow gives: 10.0.0.0/24")
                && text.contains("--allow CIDR"),
            "{text}"
        );
        // The default: the local interface's subnet. Loopback's is 127.0.0.0/8 here.
        let d = Limits::default();
        assert!(d.may_connect("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap()).is_ok());
        let e = d.may_connect("127.0.0.1".parse().unwrap(), "10.9.9.9".parse().unwrap());
        assert!(matches!(e, Err(Refused::OutsideAllowed { given: false, .. })));
        assert!(e.unwrap_err().to_string().contains("(the default of --allow)"));
    }

    #[test]
    fn counts_and_bytes_beyond_the_limits_are_refused() {
        let l = Limits { mr_bytes: 4096, mrs: 2, qps: 1, ..Limits::default() };
        assert!(l.may_set_up(2, 4096, 1).is_ok());
        let e = l.may_set_up(3, 10, 1).unwrap_err();
        assert_eq!(e.to_string(), "refused: 3 MRs asked, this agent allows 2 (--max-mrs)");
        let flag = |e: Refused| match e {
            Refused::TooMuch { flag, .. } => flag,
            other => panic!("not a count: {other}"),
        };
        assert_eq!(flag(l.may_set_up(1, 4097, 1).unwrap_err()), "--max-mr-bytes");
        assert_eq!(flag(l.may_set_up(1, 1, 2).unwrap_err()), "--max-qps");
        assert_eq!(
            l.may_stream(STREAM_MESSAGES + 1),
            Err(Refused::LongStream { count: STREAM_MESSAGES + 1 })
        );
    }

    #[test]
    fn the_probe_rate_is_a_sliding_second() {
        let mut r = ProbeRate::default();
        let t = Instant::now();
        assert!(r.take(3, 4, t).is_ok());
        let e = r.take(2, 4, t + Duration::from_millis(500)).unwrap_err();
        assert_eq!(e, Refused::ProbeRate { frames: 2, rate: 4, recent: 3 });
        let text = e.to_string();
        assert!(
            text.contains("limit of 4 per second") && text.contains("3 sent in the last second")
        );
        assert!(r.take(1, 4, t + Duration::from_millis(500)).is_ok(), "a refusal counted nothing");
        assert!(
            r.take(3, 4, t + Duration::from_millis(1000)).is_ok(),
            "the first three have left the window"
        );
    }

    #[test]
    fn a_cq_is_made_of_1_to_the_most_completions() {
        assert!(cq_depth_ok(1).is_ok() && cq_depth_ok(MAX_CQ_DEPTH).is_ok());
        for bad in [0, MAX_CQ_DEPTH + 1, u32::MAX] {
            let e = cq_depth_ok(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("a CQ of {bad} completions")), "{e}");
        }
    }
}
