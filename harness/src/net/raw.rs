//! Raw Ethernet frames out and in, on a host interface, through pnet's datalink
//! layer (AF_PACKET: needs root or CAP_NET_RAW): what crafted packets are sent
//! with, the interface and MACs they need found, and the answers read back.
//!
//! Owns: interface lookup, ARP, raw send and receive. Imports: dissector only.
use std::io::BufRead;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use dissector::craft::Host;
use dissector::wire::ethernet::{self, Mac};
use pnet::datalink::{self, Channel, DataLinkReceiver, DataLinkSender, NetworkInterface};
use pnet::packet::arp::{ArpHardwareTypes, ArpOperations, ArpPacket, MutableArpPacket};
use pnet::packet::ethernet::{EtherTypes, EthernetPacket, MutableEthernetPacket};
use pnet::packet::{MutablePacket as _, Packet as _};
use pnet::util::MacAddr;

/// An Ethernet interface opened for raw frames, and the two ends of the wire.
pub(crate) struct Link {
    pub iface: String,
    pub src: Host,
    pub dst: Host,
    tx: Box<dyn DataLinkSender>,
    rx: Box<dyn DataLinkReceiver>,
}

/// Why a [`Link`] could not be opened: the target asked for cannot work from
/// here (the caller's input), or this host cannot send to it (its setup).
#[derive(Debug)]
pub(crate) enum OpenError {
    /// The arguments name something that cannot be probed from here.
    Target(String),
    /// The interface could not be opened or the peer's MAC found.
    Host(String),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Target(m) | OpenError::Host(m) => f.write_str(m),
        }
    }
}

impl From<OpenError> for String {
    fn from(e: OpenError) -> String {
        e.to_string()
    }
}

fn mac(m: MacAddr) -> Mac {
    Mac([m.0, m.1, m.2, m.3, m.4, m.5])
}

/// The interface named, or the one that holds `local`, or the one on the peer's
/// subnet.
fn find_iface(
    local: Option<IpAddr>,
    peer: IpAddr,
    name: Option<&str>,
) -> Result<NetworkInterface, String> {
    let all = datalink::interfaces();
    let found = match (name, local) {
        (Some(n), _) => all.iter().find(|i| i.name == n),
        (None, Some(ip)) => all.iter().find(|i| i.ips.iter().any(|n| n.ip() == ip)),
        (None, None) => all.iter().find(|i| i.ips.iter().any(|n| n.contains(peer))),
    };
    found.cloned().ok_or_else(|| match name {
        Some(n) => format!(
            "no interface `{n}` (have: {})",
            all.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ")
        ),
        None => match local {
            Some(ip) => format!("no interface holds {ip}: the probe is sent from the interface of the endpoint's RoCE address"),
            None => format!("no interface is on {peer}'s subnet\nhint: say which with -i IFACE"),
        },
    })
}

/// The MAC of `ip` in the kernel's neighbour table, when it is complete.
fn arp_table(ip: IpAddr, iface: &str) -> Option<Mac> {
    let f = std::fs::File::open("/proc/net/arp").ok()?;
    for line in std::io::BufReader::new(f).lines().skip(1).map_while(Result::ok) {
        let c: Vec<&str> = line.split_whitespace().collect();
        if let [addr, _, flags, hw, _, dev] = c[..] {
            if addr.parse::<IpAddr>().ok() == Some(ip) && dev == iface && flags != "0x0" {
                return hw.parse().ok();
            }
        }
    }
    None
}

impl Link {
    /// Opens the interface holding `local` (or `iface`) for the target at `peer`;
    /// its MAC from the neighbour table, else by ARP (IPv4), unless given.
    pub(crate) fn open(
        local: Option<IpAddr>,
        peer: IpAddr,
        iface: Option<&str>,
        peer_mac: Option<Mac>,
    ) -> Result<Link, OpenError> {
        let ni = find_iface(local, peer, iface).map_err(OpenError::Target)?;
        let src_ip = match local {
            Some(ip) => ip,
            None => {
                ni.ips.iter().map(|n| n.ip()).find(|ip| ip.is_ipv4() == peer.is_ipv4()).ok_or_else(
                    || {
                        OpenError::Target(format!(
                            "{} has no {} address to send from",
                            ni.name,
                            if peer.is_ipv4() { "IPv4" } else { "IPv6" }
                        ))
                    },
                )?
            }
        };
        if ni.ips.iter().any(|n| n.ip() == peer) {
            return Err(OpenError::Target(format!(
                "{peer} is this host's own address: a frame sent on {} never reaches a local rxe device\nhint: probe from another host or VM",
                ni.name
            )));
        }
        let src_mac = ni.mac.map(mac).ok_or_else(|| {
            OpenError::Target(format!(
                "{} has no MAC address (not an Ethernet interface?)",
                ni.name
            ))
        })?;
        let cfg = datalink::Config {
            // Short: a probe's quiet gap is a few milliseconds.
            read_timeout: Some(Duration::from_millis(2)),
            ..Default::default()
        };
        let (tx, rx) = match datalink::channel(&ni, cfg) {
            Ok(Channel::Ethernet(tx, rx)) => (tx, rx),
            Ok(_) => {
                return Err(OpenError::Target(format!("{}: not an Ethernet channel", ni.name)))
            }
            Err(e) => {
                return Err(OpenError::Host(format!(
                    "opening {} for raw frames: {e}\nhint: crafted packets need root (CAP_NET_RAW)",
                    ni.name
                )))
            }
        };
        let mut link = Link {
            iface: ni.name.clone(),
            src: Host { mac: src_mac, ip: src_ip },
            dst: Host { mac: Mac([0xff; 6]), ip: peer },
            tx,
            rx,
        };
        link.dst.mac = match peer_mac.or_else(|| arp_table(peer, &ni.name)) {
            Some(m) => m,
            None => link.arp(Duration::from_secs(1)).map_err(OpenError::Host)?,
        };
        Ok(link)
    }

    /// Asks for the target's MAC (IPv4 ARP).
    fn arp(&mut self, within: Duration) -> Result<Mac, String> {
        let (IpAddr::V4(me), IpAddr::V4(them)) = (self.src.ip, self.dst.ip) else {
            return Err(format!(
                "no neighbour entry for {} on {}\nhint: ping it once, or give its MAC",
                self.dst.ip, self.iface
            ));
        };
        let mut buf = [0u8; 42];
        {
            let mut e = MutableEthernetPacket::new(&mut buf[..]).ok_or("ARP frame buffer")?;
            e.set_destination(MacAddr::broadcast());
            e.set_source(MacAddr::from(self.src.mac.0));
            e.set_ethertype(EtherTypes::Arp);
            let mut a = MutableArpPacket::new(e.payload_mut()).ok_or("ARP buffer")?;
            a.set_hardware_type(ArpHardwareTypes::Ethernet);
            a.set_protocol_type(EtherTypes::Ipv4);
            a.set_hw_addr_len(6);
            a.set_proto_addr_len(4);
            a.set_operation(ArpOperations::Request);
            a.set_sender_hw_addr(MacAddr::from(self.src.mac.0));
            a.set_sender_proto_addr(me);
            a.set_target_hw_addr(MacAddr::zero());
            a.set_target_proto_addr(them);
        }
        self.send(&buf)?;
        let until = Instant::now() + within;
        let mut found = None;
        self.receive(until, |f| {
            let Some(e) = EthernetPacket::new(f) else { return false };
            if e.get_ethertype() != EtherTypes::Arp {
                return false;
            }
            let Some(a) = ArpPacket::new(e.payload()) else { return false };
            if a.get_operation() == ArpOperations::Reply && a.get_sender_proto_addr() == them {
                found = Some(mac(a.get_sender_hw_addr()));
                return true;
            }
            false
        });
        found.ok_or_else(|| {
            format!(
                "{them} did not answer ARP on {} within {within:?}\nhint: is it up, on this link?",
                self.iface
            )
        })
    }

    pub(crate) fn send(&mut self, frame: &[u8]) -> Result<(), String> {
        match self.tx.send_to(frame, None) {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(format!("sending a frame on {}: {e}", self.iface)),
            None => Err(format!("sending a frame on {}: no room in the buffer", self.iface)),
        }
    }

    /// Reads frames until `until`, or until `f` says it has what it wanted.
    pub(crate) fn receive(&mut self, until: Instant, mut f: impl FnMut(&[u8]) -> bool) {
        while Instant::now() < until {
            match self.rx.next() {
                Ok(frame) if f(frame) => return,
                _ => {}
            }
        }
    }

    /// Waits for the target to fall quiet: until `gap` passes with no frame from
    /// it (since the call, or since its last frame), or `most` in all.
    pub(crate) fn until_quiet(&mut self, most: Duration, gap: Duration) {
        let them = self.dst.mac;
        let start = Instant::now();
        let mut last = start;
        while let Some(left) = (start + most).min(last + gap).checked_duration_since(Instant::now())
        {
            if left.is_zero() {
                break;
            }
            if let Ok(f) = self.rx.next() {
                if ethernet::Frame::new_checked(f).is_ok_and(|e| e.src() == them) {
                    last = Instant::now();
                }
            }
        }
    }

    /// Reads the target's RoCEv2 answers (frames from its address to ours) until
    /// `until`: each with the time it arrived.
    pub(crate) fn answers(&mut self, until: Instant) -> Vec<(Instant, Vec<u8>)> {
        let (me, them) = (self.src.ip, self.dst.ip);
        let mut out = Vec::new();
        self.receive(until, |f| {
            let d = dissector::frame::decode(dissector::LinkType::ETHERNET, f, &Default::default());
            if d.ib.is_some() && d.addrs() == Some((them, me)) {
                out.push((Instant::now(), f.to_vec()));
            }
            false
        });
        out
    }
}
