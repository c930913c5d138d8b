//! Crafted packets: a RoCEv2 request built field by field with the dissector's emit
//! side ([`dissector::craft::build`]), sent raw on an Ethernet interface through
//! pnet's datalink layer, and the target's answers read back from the same
//! interface. The scenario step `op = "probe"` (run by the endpoint agent, in the
//! name of one of its connected QPs) and `roce probe` (ad hoc, against any QP whose
//! QPN and PSN you know) both use it.
//!
//! The sender does not need an RDMA device: the frame is complete (Ethernet, IPv4
//! or IPv6, UDP 4791, BTH, extension headers, payload, ICRC). The target's answers
//! go to the sender's IP address, where an rxe device (if any) drops them: no QP
//! there expects them.
use std::io::BufRead;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use dissector::craft::{self, Encap, Host, IcrcMode};
use dissector::wire::ethernet::Mac;
use dissector::wire::ext::{AtomicEthRepr, DethRepr, RethRepr};
use dissector::wire::{BthRepr, Headers, Opcode, Psn, Transport};
use pnet::datalink::{self, Channel, DataLinkReceiver, DataLinkSender, NetworkInterface};
use pnet::packet::arp::{ArpHardwareTypes, ArpOperations, ArpPacket, MutableArpPacket};
use pnet::packet::ethernet::{EtherTypes, EthernetPacket, MutableEthernetPacket};
use pnet::packet::{MutablePacket as _, Packet as _};
use pnet::util::MacAddr;
use serde::{Deserialize, Serialize};

use crate::scenario::model::{Content, OpcodeRef, ProbeSpec};
use crate::scenario::parse::content_bytes;

/// Q_Key of a UD probe when the spec does not say (the scenarios' default).
pub const DEFAULT_QKEY: u32 = 0x1111_1111;
/// The default partition.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// The opcode a probe names. A name without a transport takes the QP's
/// (`"RDMA WRITE Only"` on an RC QP is 0x0a); with one (`"UD SEND Only"`) it is
/// taken as written, so a probe can carry an opcode its QP type does not allow.
pub fn opcode(r: &OpcodeRef, qp: Transport) -> Result<Opcode, String> {
    let name = match r {
        OpcodeRef::Number(n) => return Ok(Opcode(*n)),
        OpcodeRef::Name(n) => n.trim(),
    };
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ").to_ascii_lowercase();
    let want = norm(name);
    let found = Opcode::all().find(|i| {
        let full = norm(&i.opcode.to_string());
        full == want || (i.transport == qp && norm(i.name) == want)
    });
    found.map(|i| i.opcode).ok_or_else(|| {
        let known: Vec<&str> = Opcode::all().filter(|i| i.transport == qp).map(|i| i.name).collect();
        format!("unknown opcode `{name}` for a {qp} QP (known: {})", known.join(", "))
    })
}

/// The payload: `payload` (a pattern repeated to `len`), or `len` zero bytes.
pub fn payload(spec: &ProbeSpec) -> Result<Vec<u8>, String> {
    let len = spec.len.map(|l| l as usize);
    match (&spec.payload, len) {
        (Some(c @ Content::Pattern(_)), None) => content_bytes(c, 0).and_then(|b| if b.is_empty() { Err("an empty pattern".into()) } else { Ok(b) }),
        (Some(c), Some(l)) => {
            let mut b = content_bytes(c, l)?;
            if b.len() > l {
                return Err(format!("a payload of {} bytes, but `len` is {l}", b.len()));
            }
            b.resize(l, 0);
            Ok(b)
        }
        (Some(c), None) => content_bytes(c, 0),
        (None, l) => Ok(vec![0; l.unwrap_or(0)]),
    }
}

/// What a probe is sent to, resolved: the target QP and where its memory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aim {
    /// The QP transport the probe speaks (the prober's QP type).
    pub transport: Transport,
    /// The target's QPN (BTH DestQP unless the spec overrides it).
    pub dest_qp: u32,
    /// The prober's QPN (DETH source QP for UD opcodes).
    pub src_qp: u32,
    /// The PSN the target expects next, as far as the prober knows.
    pub next: u32,
    /// VA and rkey for RETH / AtomicETH.
    pub remote: Option<(u64, u32)>,
}

/// One frame of a probe, as the report and the expectations find it on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentFrame {
    pub opcode: u8,
    pub dest_qp: u32,
    pub psn: u32,
    pub len: usize,
}

/// The transport part of the probe (BTH … payload, ICRC mode) and its PSN.
pub fn transport(spec: &ProbeSpec, aim: &Aim) -> Result<(craft::Transport, SentFrame), String> {
    let op = opcode(&spec.opcode, aim.transport)?;
    let psn = spec.psn.as_ref().map_or(Ok(aim.next), |p| p.resolve(aim.next))?;
    let headers = op.info().map_or(Headers::PAYLOAD, |i| i.headers);
    let data = payload(spec)?;
    if !data.is_empty() && !headers.contains(Headers::PAYLOAD) {
        return Err(format!("{op} carries no payload"));
    }
    let (va, rkey) = aim.remote.unwrap_or((0, 0));
    let mut t = craft::Transport {
        bth: BthRepr {
            opcode: op,
            solicited_event: false,
            mig_req: true,
            pad_count: 0,
            tver: 0,
            p_key: spec.p_key.unwrap_or(DEFAULT_PKEY),
            fecn: false,
            becn: false,
            resv6: 0,
            dest_qp: spec.dest_qp.unwrap_or(aim.dest_qp) & 0x00ff_ffff,
            ack_req: spec.ack_req.unwrap_or(true),
            resv7: 0,
            psn: Psn::new(psn),
        },
        deth: DethRepr { q_key: spec.q_key.unwrap_or(DEFAULT_QKEY), src_qp: aim.src_qp },
        reth: RethRepr { va, r_key: rkey, dma_len: spec.dma_len.unwrap_or(data.len() as u32) },
        atomiceth: AtomicEthRepr {
            va,
            r_key: rkey,
            swap_add: spec.swap.or(spec.add).unwrap_or(0),
            compare: spec.compare.unwrap_or(0),
        },
        immdt: spec.imm_data.unwrap_or(0),
        payload: data,
        icrc: if spec.bad_icrc == Some(true) { IcrcMode::Corrupt } else { IcrcMode::Correct },
        ..Default::default()
    };
    if headers.contains(Headers::IETH) {
        t.ieth = rkey;
    }
    let sent = SentFrame { opcode: op.0, dest_qp: t.bth.dest_qp, psn, len: t.payload.len() };
    Ok((t, sent))
}

/// `spec`'s frames (one per copy) from `src` to `dst`, and what each is.
pub fn frames(spec: &ProbeSpec, aim: &Aim, src: &Host, dst: &Host) -> Result<Vec<(Vec<u8>, SentFrame)>, String> {
    let (t, sent) = transport(spec, aim)?;
    let enc = Encap { udp_src_port: 0xC000 | (aim.src_qp & 0x3fff) as u16, ..Encap::default() };
    let f = craft::build(&enc, src, dst, &t);
    Ok((0..spec.copies.unwrap_or(1).max(1)).map(|_| (f.clone(), sent.clone())).collect())
}

/// `next` after the probe: one on when it was sent at `"next"` (or `moves_next`
/// says so).
pub fn advance(spec: &ProbeSpec, next: u32) -> u32 {
    let at_next = matches!(spec.psn.as_ref().map(|p| p.offset()), None | Some(Ok(Ok(0))));
    if spec.moves_next.unwrap_or(at_next) {
        (next + 1) & 0x00ff_ffff
    } else {
        next
    }
}

/// An Ethernet interface opened for raw frames, and the two ends of the wire.
pub struct Link {
    pub iface: String,
    pub src: Host,
    pub dst: Host,
    tx: Box<dyn DataLinkSender>,
    rx: Box<dyn DataLinkReceiver>,
}

fn mac(m: MacAddr) -> Mac {
    Mac([m.0, m.1, m.2, m.3, m.4, m.5])
}

/// The interface named, or the one that holds `local`, or the one on the peer's
/// subnet.
fn find_iface(local: Option<IpAddr>, peer: IpAddr, name: Option<&str>) -> Result<NetworkInterface, String> {
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
                return parse_mac(hw).ok();
            }
        }
    }
    None
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Result<Mac, String> {
    let b: Vec<u8> = s.split(':').map(|x| u8::from_str_radix(x, 16)).collect::<Result<_, _>>().map_err(|_| format!("`{s}` is not a MAC address"))?;
    let b: [u8; 6] = b.try_into().map_err(|_| format!("`{s}` is not a MAC address (six bytes, aa:bb:cc:dd:ee:ff)"))?;
    Ok(Mac(b))
}

impl Link {
    /// Opens the interface holding `local` (or `iface`) for the target at `peer`;
    /// its MAC from the neighbour table, else by ARP (IPv4), unless given.
    pub fn open(local: Option<IpAddr>, peer: IpAddr, iface: Option<&str>, peer_mac: Option<Mac>) -> Result<Link, String> {
        let ni = find_iface(local, peer, iface)?;
        let src_ip = match local {
            Some(ip) => ip,
            None => ni
                .ips
                .iter()
                .map(|n| n.ip())
                .find(|ip| ip.is_ipv4() == peer.is_ipv4())
                .ok_or_else(|| format!("{} has no {} address to send from", ni.name, if peer.is_ipv4() { "IPv4" } else { "IPv6" }))?,
        };
        if ni.ips.iter().any(|n| n.ip() == peer) {
            return Err(format!(
                "{peer} is this host's own address: a frame sent on {} never reaches a local rxe device\nhint: probe from another host or VM",
                ni.name
            ));
        }
        let src_mac = ni.mac.map(mac).ok_or_else(|| format!("{} has no MAC address (not an Ethernet interface?)", ni.name))?;
        let cfg = datalink::Config { read_timeout: Some(Duration::from_millis(10)), ..Default::default() };
        let (tx, rx) = match datalink::channel(&ni, cfg) {
            Ok(Channel::Ethernet(tx, rx)) => (tx, rx),
            Ok(_) => return Err(format!("{}: not an Ethernet channel", ni.name)),
            Err(e) => {
                return Err(format!(
                    "opening {} for raw frames: {e}\nhint: crafted packets need root (CAP_NET_RAW)",
                    ni.name
                ))
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
            None => link.arp(Duration::from_secs(1))?,
        };
        Ok(link)
    }

    /// Asks for the target's MAC (IPv4 ARP).
    fn arp(&mut self, within: Duration) -> Result<Mac, String> {
        let (IpAddr::V4(me), IpAddr::V4(them)) = (self.src.ip, self.dst.ip) else {
            return Err(format!("no neighbour entry for {} on {}\nhint: ping it once, or give its MAC", self.dst.ip, self.iface));
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
        found.ok_or_else(|| format!("{them} did not answer ARP on {} within {within:?}\nhint: is it up, on this link?", self.iface))
    }

    pub fn send(&mut self, frame: &[u8]) -> Result<(), String> {
        match self.tx.send_to(frame, None) {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(format!("sending a frame on {}: {e}", self.iface)),
            None => Err(format!("sending a frame on {}: no room in the buffer", self.iface)),
        }
    }

    /// Reads frames until `until`, or until `f` says it has what it wanted.
    pub fn receive(&mut self, until: Instant, mut f: impl FnMut(&[u8]) -> bool) {
        while Instant::now() < until {
            match self.rx.next() {
                Ok(frame) if f(frame) => return,
                _ => {}
            }
        }
    }

    /// Reads the target's RoCEv2 answers (frames from its address to ours) until
    /// `until`: each with the time it arrived.
    pub fn answers(&mut self, until: Instant) -> Vec<(Instant, Vec<u8>)> {
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

/// A number in decimal or `0x` hex (QPNs, PSNs, keys and addresses are usually
/// written in hex).
fn num(s: &str) -> Result<u64, String> {
    let t = s.trim().replace('_', "");
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse(),
    };
    r.map_err(|_| format!("`{s}` is not a number (decimal, or hex with 0x)"))
}

fn num32(s: &str) -> Result<u32, String> {
    num(s).and_then(|v| u32::try_from(v).map_err(|_| format!("`{s}` does not fit in 32 bits")))
}

fn num24(s: &str) -> Result<u32, String> {
    num32(s).and_then(|v| if v <= 0x00ff_ffff { Ok(v) } else { Err(format!("`{s}` does not fit in 24 bits")) })
}

fn num16(s: &str) -> Result<u16, String> {
    num(s).and_then(|v| u16::try_from(v).map_err(|_| format!("`{s}` does not fit in 16 bits")))
}

/// `roce probe`: one crafted request, sent now, and what came back.
#[derive(Debug, clap::Args)]
#[command(after_help = "EXAMPLES\n  \
    roce probe --to 10.0.0.2 --qpn 0x11 --psn 100 --opcode 'RDMA WRITE Only' --va 0x7f0000001000 --rkey 0x2e5 --len 8\n  \
    roce probe --to 10.0.0.2 --qpn 0x11 --psn 103 --opcode 'SEND Only' --len 8 --bad-icrc\n  \
    roce probe --dry-run -w probe.pcapng --qpn 0x11 --psn 0 --opcode 'RDMA READ Request' --dma-len 0x80000008\n\n\
The target QP must be in RTR or RTS and connected to this host's address (its answers come here).\n\
Sending raw frames needs root (CAP_NET_RAW).\n\n\
EXIT STATUS\n  0 sent (answered or not); 2 bad options, or the frame could not be sent.")]
pub struct ProbeArgs {
    /// The target's IP address (its RoCE GID's address)
    #[arg(long, value_name = "IP", required_unless_present = "dry_run")]
    pub to: Option<IpAddr>,
    /// The target QP number (BTH DestQP)
    #[arg(long, value_name = "QPN", value_parser = num24)]
    pub qpn: u32,
    /// The PSN to send (the one the target expects next, or another on purpose)
    #[arg(long, value_name = "PSN", value_parser = num24)]
    pub psn: u32,
    /// The opcode: a name as `roce decode` prints it, or a number
    #[arg(long, value_name = "OPCODE", default_value = "SEND Only")]
    pub opcode: String,
    /// The transport a name without one is taken in
    #[arg(long, value_name = "rc|uc|ud", default_value = "rc", value_parser = ["rc", "uc", "ud"])]
    pub transport: String,
    /// RETH / AtomicETH virtual address
    #[arg(long, value_name = "ADDR", value_parser = num, default_value = "0")]
    pub va: u64,
    /// RETH / AtomicETH R_Key (also the IETH of SEND with Invalidate)
    #[arg(long, value_name = "KEY", value_parser = num32, default_value = "0")]
    pub rkey: u32,
    /// RETH DMA length [default: the payload length]
    #[arg(long, value_name = "N", value_parser = num32)]
    pub dma_len: Option<u32>,
    /// Payload length
    #[arg(long, value_name = "N", value_parser = num32)]
    pub len: Option<u32>,
    /// Payload bytes in hex, repeated to --len ("ab" or "de ad be ef")
    #[arg(long, value_name = "HEX")]
    pub pattern: Option<String>,
    /// ImmDt, for opcodes "with Immediate"
    #[arg(long, value_name = "N", value_parser = num32)]
    pub imm: Option<u32>,
    /// Atomics: the compare value (CmpSwap)
    #[arg(long, value_name = "N", value_parser = num)]
    pub compare: Option<u64>,
    /// Atomics: the swap value (CmpSwap) or the addend (FetchAdd)
    #[arg(long, value_name = "N", value_parser = num)]
    pub swap: Option<u64>,
    /// Clear BTH AckReq
    #[arg(long)]
    pub no_ack_req: bool,
    /// Send it with a wrong ICRC
    #[arg(long)]
    pub bad_icrc: bool,
    /// BTH P_Key (0xffff: full member of the default partition)
    #[arg(long, value_name = "PKEY", value_parser = num16, default_value = "0xffff")]
    pub p_key: u16,
    /// DETH Q_Key (UD opcodes)
    #[arg(long, value_name = "QKEY", value_parser = num32, default_value = "0x11111111")]
    pub q_key: u32,
    /// DETH source QP (UD opcodes)
    #[arg(long, value_name = "QPN", value_parser = num24, default_value = "0")]
    pub src_qpn: u32,
    /// Identical copies to send back to back
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub copies: u32,
    /// The interface to send on [default: the one that reaches --to's subnet, by --from]
    #[arg(short = 'i', long = "interface", value_name = "IFACE")]
    pub iface: Option<String>,
    /// The address to send from [default: the interface's]
    #[arg(long, value_name = "IP")]
    pub from: Option<IpAddr>,
    /// The target's MAC [default: from the neighbour table, else ARP]
    #[arg(long, value_name = "MAC", value_parser = parse_mac)]
    pub dst_mac: Option<Mac>,
    /// How long to listen for answers
    #[arg(long, value_name = "MS", default_value_t = 200)]
    pub wait_ms: u64,
    /// Build and show the frame, send nothing (no root needed)
    #[arg(long)]
    pub dry_run: bool,
    /// Write what was sent and what came back to a pcapng file
    #[arg(short = 'w', value_name = "FILE")]
    pub write: Option<std::path::PathBuf>,
}

/// A frame of ours as a capture record (Ethernet).
fn as_record(number: u64, ts_ns: u64, data: &[u8]) -> dissector::capture::Record<'_> {
    dissector::capture::Record {
        number,
        ts_ns,
        link: dissector::LinkType::ETHERNET,
        data,
        orig_len: data.len() as u32,
        interface: 0,
        direction: None,
        comment: None,
        file_offset: 0,
    }
}

/// One decoded line of a frame, as `roce decode` prints it.
fn line(number: u64, ts_ns: u64, first_ns: u64, data: &[u8]) -> String {
    let f = dissector::frame::decode(dissector::LinkType::ETHERNET, data, &Default::default());
    let ctx = dissector::fields::Ctx::of(&as_record(number, ts_ns, data), &f, first_ns, first_ns);
    let mut s = String::new();
    dissector::print::line(&ctx, &mut s);
    s
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// `roce probe`.
pub fn run(a: ProbeArgs, out: &mut dyn std::io::Write, err: &mut dyn std::io::Write) -> anyhow::Result<u8> {
    let qp_transport = match a.transport.as_str() {
        "uc" => Transport::Uc,
        "ud" => Transport::Ud,
        _ => Transport::Rc,
    };
    let op = match num(&a.opcode).ok().and_then(|v| u8::try_from(v).ok()) {
        Some(n) => OpcodeRef::Number(n),
        None => OpcodeRef::Name(a.opcode.clone()),
    };
    let spec = ProbeSpec {
        id: "probe".into(),
        opcode: op,
        psn: None,
        moves_next: None,
        remote: None,
        dma_len: a.dma_len,
        payload: a.pattern.clone().map(Content::Pattern),
        len: a.len,
        imm_data: a.imm,
        compare: a.compare,
        swap: a.swap,
        add: None,
        ack_req: Some(!a.no_ack_req),
        bad_icrc: Some(a.bad_icrc),
        p_key: Some(a.p_key),
        dest_qp: None,
        q_key: Some(a.q_key),
        copies: Some(a.copies),
        settle_ms: None,
    };
    let aim = Aim { transport: qp_transport, dest_qp: a.qpn, src_qp: a.src_qpn, next: a.psn, remote: Some((a.va, a.rkey)) };
    // The frame first: a bad opcode or payload is said before any interface is opened.
    if let Err(e) = transport(&spec, &aim) {
        writeln!(err, "roce probe: {e}")?;
        return Ok(crate::cli::codes::USAGE);
    }
    let mut link = None;
    let (src, dst) = if a.dry_run {
        let from = a.from.unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let to = a.to.unwrap_or(IpAddr::from([0, 0, 0, 0]));
        (Host { mac: Mac([0; 6]), ip: from }, Host { mac: a.dst_mac.unwrap_or(Mac([0xff; 6])), ip: to })
    } else {
        let to = a.to.ok_or_else(|| anyhow::anyhow!("--to is required"))?;
        match Link::open(a.from, to, a.iface.as_deref(), a.dst_mac) {
            Ok(l) => {
                let ends = (l.src, l.dst);
                link = Some(l);
                ends
            }
            Err(e) => {
                writeln!(err, "roce probe: {e}")?;
                return Ok(crate::cli::codes::USAGE);
            }
        }
    };
    let frames = match frames(&spec, &aim, &src, &dst) {
        Ok(f) => f,
        Err(e) => {
            writeln!(err, "roce probe: {e}")?;
            return Ok(crate::cli::codes::USAGE);
        }
    };
    let t0 = Instant::now();
    let first_ns = unix_ns();
    let mut record: Vec<(u64, Vec<u8>)> = Vec::new();
    for (f, _) in &frames {
        if let Some(l) = link.as_mut() {
            if let Err(e) = l.send(f) {
                writeln!(err, "roce probe: {e}")?;
                return Ok(crate::cli::codes::USAGE);
            }
        }
        record.push((unix_ns(), f.clone()));
    }
    let how = match &link {
        Some(l) => format!("sent on {} ({} {} → {} {})", l.iface, l.src.ip, l.src.mac, l.dst.ip, l.dst.mac),
        None => "not sent (--dry-run)".into(),
    };
    writeln!(out, "{} frame(s) {how}:", frames.len())?;
    for (i, (ts, f)) in record.iter().enumerate() {
        writeln!(out, "  {}", line(i as u64 + 1, *ts, first_ns, f))?;
    }
    if let Some(l) = link.as_mut() {
        let answers = l.answers(t0 + Duration::from_millis(a.wait_ms));
        if answers.is_empty() {
            writeln!(out, "no answer within {} ms (dropped, or the QP is not connected to {})", a.wait_ms, l.src.ip)?;
        } else {
            writeln!(out, "{} answer(s):", answers.len())?;
        }
        for (at, f) in answers {
            let ms = at.duration_since(t0).as_secs_f64() * 1e3;
            let ts = first_ns + at.duration_since(t0).as_nanos() as u64;
            let n = record.len() as u64 + 1;
            writeln!(out, "  {}  (+{ms:.2} ms)", line(n, ts, first_ns, &f))?;
            record.push((ts, f));
        }
    }
    if let Some(path) = &a.write {
        let mut w = crate::output::PcapngOut::create(path)?;
        for (i, (ts, f)) in record.iter().enumerate() {
            w.write(&as_record(i as u64 + 1, *ts, f))?;
        }
        w.commit()?;
        writeln!(err, "roce probe: wrote {} frame(s) to {}", record.len(), path.display())?;
    }
    Ok(crate::cli::codes::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::model::PsnRef;
    use dissector::frame::{decode, Options};
    use std::net::Ipv4Addr;

    fn spec(opcode: &str) -> ProbeSpec {
        ProbeSpec {
            id: "p".into(),
            opcode: OpcodeRef::Name(opcode.into()),
            psn: None,
            moves_next: None,
            remote: None,
            dma_len: None,
            payload: None,
            len: None,
            imm_data: None,
            compare: None,
            swap: None,
            add: None,
            ack_req: None,
            bad_icrc: None,
            p_key: None,
            dest_qp: None,
            q_key: None,
            copies: None,
            settle_ms: None,
        }
    }

    fn aim() -> Aim {
        Aim { transport: Transport::Rc, dest_qp: 0x11, src_qp: 0x12, next: 100, remote: Some((0x7f00_0000_1000, 0x1234)) }
    }

    fn hosts() -> (Host, Host) {
        let h = |last| Host { mac: Mac([2, 0, 0, 0, 0, last]), ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)) };
        (h(1), h(2))
    }

    #[test]
    fn opcodes_by_name_transport_and_number() {
        assert_eq!(opcode(&OpcodeRef::Name("RDMA WRITE Only".into()), Transport::Rc).unwrap(), Opcode(0x0a));
        assert_eq!(opcode(&OpcodeRef::Name("rdma  write only".into()), Transport::Uc).unwrap(), Opcode(0x2a));
        assert_eq!(opcode(&OpcodeRef::Name("UD SEND Only".into()), Transport::Rc).unwrap(), Opcode(0x64));
        assert_eq!(opcode(&OpcodeRef::Number(0x0d), Transport::Rc).unwrap(), Opcode(0x0d));
        let e = opcode(&OpcodeRef::Name("RDMA WRIT Only".into()), Transport::Rc).unwrap_err();
        assert!(e.contains("unknown opcode") && e.contains("RDMA WRITE Only"), "{e}");
        // READ is not a UC operation: by name on a UC QP, it is unknown.
        assert!(opcode(&OpcodeRef::Name("RDMA READ Request".into()), Transport::Uc).is_err());
    }

    #[test]
    fn a_write_probe_decodes_as_what_it_says() {
        let (a, b) = hosts();
        let mut s = spec("RDMA WRITE Only");
        s.payload = Some(Content::Pattern("ab".into()));
        s.len = Some(10);
        s.psn = Some(PsnRef::Relative("next+3".into()));
        s.copies = Some(2);
        let f = frames(&s, &aim(), &a, &b).unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].0, f[1].0, "copies are identical");
        let d = decode(dissector::LinkType::ETHERNET, &f[0].0, &Options::default());
        let ib = d.ib.as_ref().unwrap();
        assert_eq!(ib.bth.opcode, Opcode(0x0a));
        assert_eq!(ib.bth.dest_qp, 0x11);
        assert_eq!(ib.bth.psn.value(), 103);
        assert!(ib.bth.ack_req);
        let reth = ib.reth.unwrap();
        assert_eq!((reth.va, reth.r_key, reth.dma_len), (0x7f00_0000_1000, 0x1234, 10));
        assert_eq!(d.icrc_check(&f[0].0).map(|c| c.ok()), Some(true));
        assert_eq!(f[0].1, SentFrame { opcode: 0x0a, dest_qp: 0x11, psn: 103, len: 10 });
        assert_eq!(advance(&s, 100), 100, "only a probe at `next` moves it");
        assert_eq!(advance(&spec("RDMA WRITE Only"), 0xff_ffff), 0, "24-bit wrap");
        let dropped = ProbeSpec { moves_next: Some(false), ..spec("RDMA WRITE Only") };
        assert_eq!(advance(&dropped, 100), 100, "a probe meant to be dropped leaves `next`");
    }

    #[test]
    fn overrides_bad_icrc_and_duplicates() {
        let (a, b) = hosts();
        let mut s = spec("SEND Only");
        s.bad_icrc = Some(true);
        s.p_key = Some(0x7fff);
        s.dest_qp = Some(0xabcdef);
        s.psn = Some(PsnRef::Relative("next-1".into()));
        s.len = Some(4);
        let f = frames(&s, &Aim { next: 0, ..aim() }, &a, &b).unwrap();
        let d = decode(dissector::LinkType::ETHERNET, &f[0].0, &Options::default());
        let ib = d.ib.as_ref().unwrap();
        assert_eq!((ib.bth.p_key, ib.bth.dest_qp, ib.bth.psn.value()), (0x7fff, 0xabcdef, 0xff_ffff));
        assert_eq!(d.icrc_check(&f[0].0).map(|c| c.ok()), Some(false));
    }

    #[test]
    fn atomics_ud_and_refusals() {
        let (a, b) = hosts();
        let mut s = spec("CmpSwap");
        s.compare = Some(1);
        s.swap = Some(2);
        let f = frames(&s, &aim(), &a, &b).unwrap();
        let d = decode(dissector::LinkType::ETHERNET, &f[0].0, &Options::default());
        let at = d.ib.as_ref().unwrap().atomiceth.unwrap();
        assert_eq!((at.va, at.r_key, at.compare, at.swap_add), (0x7f00_0000_1000, 0x1234, 1, 2));
        let mut u = spec("UD SEND Only");
        u.len = Some(8);
        let f = frames(&u, &aim(), &a, &b).unwrap();
        let d = decode(dissector::LinkType::ETHERNET, &f[0].0, &Options::default());
        let deth = d.ib.as_ref().unwrap().deth.unwrap();
        assert_eq!((deth.q_key, deth.src_qp), (DEFAULT_QKEY, 0x12));
        let mut ack = spec("Acknowledge");
        ack.len = Some(4);
        assert!(frames(&ack, &aim(), &a, &b).unwrap_err().contains("no payload"));
        let mut bad = spec("SEND Only");
        bad.payload = Some(Content::Text("toolong".into()));
        bad.len = Some(2);
        assert!(payload(&bad).unwrap_err().contains("`len` is 2"));
    }

    #[test]
    fn macs_parse() {
        assert_eq!(parse_mac("52:54:00:00:00:0a").unwrap(), Mac([0x52, 0x54, 0, 0, 0, 0x0a]));
        assert!(parse_mac("52:54:00").is_err());
        assert!(parse_mac("zz:54:00:00:00:0a").is_err());
    }
}
