//! `roce probe`: one crafted request, sent now on a raw interface, and what came
//! back — for bring-up, against any QP whose QPN and expected PSN you know.
//!
//! Owns: `roce probe`'s options and printing what came back. Imports: the agent's probe
//! builder (`crate::agent::probe`), the raw link (`crate::net::raw`), the protocol's
//! probe shapes, the scenario checker's payload and content (`crate::scenario`),
//! dissector's craft, wire, capture and print.
use std::io::Write;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use dissector::capture::RecordFile;
use dissector::craft::Host;
use dissector::wire::ethernet::Mac;
use dissector::wire::{Opcode, Psn, Transport};

use super::exit::{help, CommandResult, Exit, Failure};
use crate::agent::probe::{frames, transport, Aim};
use crate::net::raw::{Link, OpenError};
use crate::protocol::{Hex, ProbeOrder, PsnAt};
use crate::scenario::check::probe_payload;
use crate::scenario::model::Content;

/// A number in decimal or `0x` hex (QPNs, PSNs, keys and addresses are usually
/// written in hex).
fn num(s: &str) -> Result<u64, String> {
    dissector::text::parse_u64(s)
        .ok_or_else(|| format!("`{s}` is not a number (decimal, or hex with 0x)"))
}

fn num32(s: &str) -> Result<u32, String> {
    num(s).and_then(|v| u32::try_from(v).map_err(|_| format!("`{s}` does not fit in 32 bits")))
}

fn num24(s: &str) -> Result<u32, String> {
    num32(s).and_then(|v| {
        if v <= 0x00ff_ffff {
            Ok(v)
        } else {
            Err(format!("`{s}` does not fit in 24 bits"))
        }
    })
}

fn num16(s: &str) -> Result<u16, String> {
    num(s).and_then(|v| u16::try_from(v).map_err(|_| format!("`{s}` does not fit in 16 bits")))
}

/// `roce probe`: one crafted request, sent now, and what came back.
#[derive(Debug, clap::Args)]
#[command(after_help = format!("EXAMPLES\n  \
    roce probe --to 10.0.0.2 --qpn 0x11 --psn 100 --opcode 'RDMA WRITE Only' --va 0x7f0000001000 --rkey 0x2e5 --len 8\n  \
    roce probe --to 10.0.0.2 --qpn 0x11 --psn 103 --opcode 'SEND Only' --len 8 --bad-icrc\n  \
    roce probe --dry-run -w probe.pcapng --qpn 0x11 --psn 0 --opcode 'RDMA READ Request' --dma-len 0x80000008\n\n\
The target QP must be in RTR or RTS and connected to this host's address (its answers come here).\n\
Sending raw frames needs root (CAP_NET_RAW).\n\n{}",
    help(&[(Exit::Ok, "sent (answered or not)"), (Exit::BadInput, "bad options, or a target that cannot be probed from here (this host's own address): nothing sent"), (Exit::Setup, "the interface could not be opened, the target's MAC found or the frame sent")])))]
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
    #[arg(long, value_name = "MAC", value_parser = |s: &str| s.parse::<Mac>())]
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
    let ctx = dissector::ctx::Ctx::of(&as_record(number, ts_ns, data), &f, first_ns, first_ns);
    let mut s = String::new();
    dissector::print::line(&ctx, &mut s);
    s
}

/// `roce probe`.
pub(super) fn run(a: ProbeArgs, out: &mut dyn Write, err: &mut dyn Write) -> CommandResult {
    let qp_transport = match a.transport.as_str() {
        "uc" => Transport::Uc,
        "ud" => Transport::Ud,
        _ => Transport::Rc,
    };
    // The frame first: a bad opcode or payload is said before any interface is opened.
    let bad = |e: String| Failure::input(anyhow!("roce probe: {e}"));
    let opcode = match num(&a.opcode).ok().and_then(|v| u8::try_from(v).ok()) {
        Some(n) => Opcode(n),
        None => Opcode::from_name(&a.opcode, qp_transport).ok_or_else(|| {
            let known: Vec<&str> = Opcode::names(qp_transport).collect();
            bad(format!(
                "unknown opcode `{}` for a {qp_transport} QP (known: {})",
                a.opcode,
                known.join(", ")
            ))
        })?,
    };
    let payload =
        probe_payload(a.pattern.clone().map(Content::Pattern).as_ref(), a.len).map_err(bad)?;
    let order = ProbeOrder {
        id: "probe".into(),
        qp: String::new(),
        opcode: opcode.0,
        psn: PsnAt::Absolute(a.psn),
        moves_next: false,
        remote: None,
        dma_len: a.dma_len,
        payload: Hex(payload),
        imm_data: a.imm.unwrap_or(0),
        compare: a.compare.unwrap_or(0),
        swap_add: a.swap.unwrap_or(0),
        ack_req: !a.no_ack_req,
        bad_icrc: a.bad_icrc,
        bth: Default::default(),
        udp_src_port: None,
        p_key: a.p_key,
        dest_qp: None,
        q_key: a.q_key,
        copies: a.copies,
        settle_ms: 0,
        quiet_ms: None,
    };
    let aim = Aim {
        dest_qp: a.qpn,
        src_qp: a.src_qpn,
        next: Psn::new(a.psn),
        remote: Some((a.va, a.rkey)),
    };
    transport(&order, &aim).map_err(bad)?;
    let mut link = None;
    let (src, dst) = if a.dry_run {
        let from = a.from.unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let to = a.to.unwrap_or(IpAddr::from([0, 0, 0, 0]));
        (
            Host { mac: Mac([0; 6]), ip: from },
            Host { mac: a.dst_mac.unwrap_or(Mac([0xff; 6])), ip: to },
        )
    } else {
        let to = a.to.ok_or_else(|| Failure::input(anyhow!("--to is required")))?;
        let l = Link::open(a.from, to, a.iface.as_deref(), a.dst_mac).map_err(|e| match e {
            OpenError::Target(m) => Failure::input(anyhow!("roce probe: {m}")),
            OpenError::Host(m) => Failure::setup(anyhow!("roce probe: {m}")),
        })?;
        let ends = (l.src, l.dst);
        link = Some(l);
        ends
    };
    let frames = frames(&order, &aim, &src, &dst).map_err(bad)?;
    let t0 = Instant::now();
    let first_ns = dissector::capture::unix_now_ns();
    let mut record: Vec<(u64, Vec<u8>)> = Vec::new();
    for (f, _) in &frames {
        if let Some(l) = link.as_mut() {
            l.send(f).map_err(|e| Failure::setup(anyhow!("roce probe: {e}")))?;
        }
        record.push((dissector::capture::unix_now_ns(), f.to_vec()));
    }
    let how = match &link {
        Some(l) => {
            format!("sent on {} ({} {} → {} {})", l.iface, l.src.ip, l.src.mac, l.dst.ip, l.dst.mac)
        }
        None => "not sent (--dry-run)".into(),
    };
    writeln!(out, "{} frame(s) {how}:", frames.len())?;
    for (i, (ts, f)) in record.iter().enumerate() {
        writeln!(out, "  {}", line(i as u64 + 1, *ts, first_ns, f))?;
    }
    if let Some(l) = link.as_mut() {
        let answers = l.answers(t0 + Duration::from_millis(a.wait_ms));
        if answers.is_empty() {
            writeln!(
                out,
                "no answer within {} ms (dropped, or the QP is not connected to {})",
                a.wait_ms, l.src.ip
            )?;
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
        let mut w = RecordFile::create(path, concat!("roce ", env!("CARGO_PKG_VERSION")))?;
        for (i, (ts, f)) in record.iter().enumerate() {
            w.write(&as_record(i as u64 + 1, *ts, f))?;
        }
        w.commit()?;
        writeln!(err, "roce probe: wrote {} frame(s) to {}", record.len(), path.display())?;
    }
    Ok(Exit::Ok)
}
