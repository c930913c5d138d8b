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

use dissector::craft::{self, Encap, Host, IcrcMode};
use dissector::wire::ext::{AtomicEthRepr, DethRepr, RethRepr};
use dissector::wire::{BthRepr, Headers, Opcode, Psn, Transport};
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::model::PsnRef;
    use dissector::frame::{decode, Options};
    use dissector::wire::ethernet::Mac;
    use std::net::{IpAddr, Ipv4Addr};

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
}
