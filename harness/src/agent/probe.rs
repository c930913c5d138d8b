//! Crafted packets: a RoCEv2 request built field by field with the dissector's emit
//! side ([`dissector::craft::build`]) from a [`ProbeOrder`]. The agent sends them for
//! a scenario's `op = "probe"` step (in the name of one of its connected QPs), and
//! `roce probe` for bring-up (against any QP whose QPN and PSN you know), both on a
//! raw interface ([`crate::net::raw`]).
//!
//! The sender needs no RDMA device: the frame is complete (Ethernet, IPv4 or IPv6,
//! UDP 4791, BTH, extension headers, payload, ICRC). The target's answers go to the
//! sender's IP address, where an rxe device (if any) drops them: no QP there
//! expects them.
//!
//! Owns: turning a [`ProbeOrder`] into frames, and its PSN arithmetic ([`Aim`]).
//! Imports: the protocol's probe shapes (`crate::protocol`), dissector's `craft` and
//! `wire`.
use dissector::craft::{self, Encap, Host, IcrcMode};
use dissector::wire::ext::{AtomicEthRepr, DethRepr, RethRepr};
use dissector::wire::{BthRepr, Headers, Opcode, Psn};

use crate::protocol::{ProbeOrder, SentFrame};

/// What a probe is sent to, resolved: the target QP and where its memory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Aim {
    /// The target's QPN (BTH DestQP unless the order overrides it).
    pub dest_qp: u32,
    /// The prober's QPN (DETH source QP for UD opcodes).
    pub src_qp: u32,
    /// The PSN the target expects next, as far as the prober knows.
    pub next: Psn,
    /// VA and rkey for RETH / AtomicETH.
    pub remote: Option<(u64, u32)>,
}

/// The probe's PSN, given what `next` is (24-bit wrap).
pub(crate) fn psn(order: &ProbeOrder, next: Psn) -> Psn {
    order.psn.resolve(next)
}

/// The transport part of the probe (BTH … payload, ICRC mode), and what it is.
/// Refused: a payload on an opcode that carries none.
pub(crate) fn transport(
    order: &ProbeOrder,
    aim: &Aim,
) -> Result<(craft::Transport, SentFrame), String> {
    let op = Opcode(order.opcode);
    let psn = psn(order, aim.next);
    let headers = op.info().map_or(Headers::PAYLOAD, |i| i.headers);
    let data = order.payload.0.clone();
    if !data.is_empty() && !headers.contains(Headers::PAYLOAD) {
        return Err(format!("{op} carries no payload"));
    }
    let (va, rkey) = aim.remote.unwrap_or((0, 0));
    let mut t = craft::Transport {
        bth: BthRepr {
            opcode: op,
            solicited_event: order.bth.solicited,
            mig_req: true,
            pad_count: 0,
            tver: order.bth.tver & 0xf,
            p_key: order.p_key,
            fecn: false,
            becn: false,
            resv6: 0,
            dest_qp: order.dest_qp.unwrap_or(aim.dest_qp) & 0x00ff_ffff,
            ack_req: order.ack_req,
            resv7: 0,
            psn,
        },
        deth: DethRepr { q_key: order.q_key, src_qp: aim.src_qp },
        reth: RethRepr { va, r_key: rkey, dma_len: order.dma_len.unwrap_or(data.len() as u32) },
        atomiceth: AtomicEthRepr {
            va,
            r_key: rkey,
            swap_add: order.swap_add,
            compare: order.compare,
        },
        immdt: order.imm_data,
        payload: data,
        icrc: if order.bad_icrc { IcrcMode::Corrupt } else { IcrcMode::Correct },
        pad: order.bth.pad.map(|p| p & 3),
        ..Default::default()
    };
    if headers.contains(Headers::IETH) {
        t.ieth = rkey;
    }
    let sent =
        SentFrame { opcode: op.0, dest_qp: t.bth.dest_qp, psn: psn.value(), len: t.payload.len() };
    Ok((t, sent))
}

/// The order's frames (one per copy) from `src` to `dst`, and what each is.
pub(crate) fn frames(
    order: &ProbeOrder,
    aim: &Aim,
    src: &Host,
    dst: &Host,
) -> Result<Vec<(Vec<u8>, SentFrame)>, String> {
    let (t, sent) = transport(order, aim)?;
    let port = order.udp_src_port.unwrap_or(0xC000 | (aim.src_qp & 0x3fff) as u16);
    let enc = Encap { udp_src_port: port, ..Encap::default() };
    let f = craft::build(&enc, src, dst, &t);
    Ok((0..order.copies.max(1)).map(|_| (f.clone(), sent.clone())).collect())
}

/// `next` after the probe: one on when the order says it moves.
pub(crate) fn advance(order: &ProbeOrder, next: Psn) -> Psn {
    if order.moves_next {
        next.add(1)
    } else {
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{BthBits, Hex, PsnAt};
    use dissector::frame::{decode, Options};
    use dissector::wire::ethernet::Mac;
    use std::net::{IpAddr, Ipv4Addr};

    fn order(opcode: u8) -> ProbeOrder {
        ProbeOrder {
            id: "p".into(),
            qp: "q".into(),
            opcode,
            psn: PsnAt::Next(0),
            moves_next: true,
            remote: None,
            dma_len: None,
            payload: Hex(vec![]),
            imm_data: 0,
            compare: 0,
            swap_add: 0,
            ack_req: true,
            bad_icrc: false,
            bth: Default::default(),
            udp_src_port: None,
            p_key: 0xffff,
            dest_qp: None,
            q_key: 0x1111_1111,
            copies: 1,
            settle_ms: 20,
            quiet_ms: None,
        }
    }

    fn aim() -> Aim {
        Aim {
            dest_qp: 0x11,
            src_qp: 0x12,
            next: Psn::new(100),
            remote: Some((0x7f00_0000_1000, 0x1234)),
        }
    }

    fn hosts() -> (Host, Host) {
        let h = |last| Host {
            mac: Mac([2, 0, 0, 0, 0, last]),
            ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)),
        };
        (h(1), h(2))
    }

    #[test]
    fn a_write_probe_decodes_as_what_it_says() {
        let (a, b) = hosts();
        let s = ProbeOrder {
            payload: Hex(vec![0xab; 10]),
            psn: PsnAt::Next(3),
            moves_next: false,
            copies: 2,
            ..order(0x0a)
        };
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
        assert_eq!(
            advance(&s, Psn::new(100)),
            Psn::new(100),
            "only a probe that moves `next` moves it"
        );
        assert_eq!(advance(&order(0x0a), Psn::new(0xff_ffff)), Psn::new(0), "24-bit wrap");
    }

    /// TVer, SE, an explicit PadCnt (its pad bytes on the wire, the ICRC still
    /// right) and the UDP source port, as a probe asks for them.
    #[test]
    fn bth_bits_pad_and_source_port() {
        let (a, b) = hosts();
        let s = ProbeOrder {
            payload: Hex(vec![0xab; 8]),
            bth: BthBits { tver: 3, solicited: true, pad: Some(2) },
            udp_src_port: Some(0x1234),
            ..order(0x04)
        };
        let f = frames(&s, &aim(), &a, &b).unwrap();
        let d = decode(dissector::LinkType::ETHERNET, &f[0].0, &Options::default());
        let ib = d.ib.as_ref().unwrap();
        assert_eq!((ib.bth.tver, ib.bth.solicited_event, ib.bth.pad_count), (3, true, 2));
        assert_eq!(d.icrc_check(&f[0].0).map(|c| c.ok()), Some(true));
        let plain = frames(&order(0x04), &aim(), &a, &b).unwrap();
        assert_eq!(f[0].0.len(), plain[0].0.len() + 8 + 2, "8 payload bytes and 2 of pad");
        assert_eq!(d.udp.map(|u| u.src_port), Some(0x1234));
    }

    #[test]
    fn overrides_bad_icrc_and_duplicates() {
        let (a, b) = hosts();
        let s = ProbeOrder {
            bad_icrc: true,
            p_key: 0x7fff,
            dest_qp: Some(0xabcdef),
            psn: PsnAt::Next(-1),
            payload: Hex(vec![0; 4]),
            ..order(0x04)
        };
        let f = frames(&s, &Aim { next: Psn::new(0), ..aim() }, &a, &b).unwrap();
        let d = decode(dissector::LinkType::ETHERNET, &f[0].0, &Options::default());
        let ib = d.ib.as_ref().unwrap();
        assert_eq!(
            (ib.bth.p_key, ib.bth.dest_qp, ib.bth.psn.value()),
            (0x7fff, 0xabcdef, 0xff_ffff)
        );
        assert_eq!(d.icrc_check(&f[0].0).map(|c| c.ok()), Some(false));
        let abs = ProbeOrder { psn: PsnAt::Absolute(7), ..order(0x04) };
        assert_eq!(psn(&abs, Psn::new(100)), Psn::new(7));
    }

    #[test]
    fn atomics_ud_and_refusals() {
        let (a, b) = hosts();
        let f =
            frames(&ProbeOrder { compare: 1, swap_add: 2, ..order(0x13) }, &aim(), &a, &b).unwrap();
        let d = decode(dissector::LinkType::ETHERNET, &f[0].0, &Options::default());
        let at = d.ib.as_ref().unwrap().atomiceth.unwrap();
        assert_eq!((at.va, at.r_key, at.compare, at.swap_add), (0x7f00_0000_1000, 0x1234, 1, 2));
        let f = frames(&ProbeOrder { payload: Hex(vec![0; 8]), ..order(0x64) }, &aim(), &a, &b)
            .unwrap();
        let d = decode(dissector::LinkType::ETHERNET, &f[0].0, &Options::default());
        let deth = d.ib.as_ref().unwrap().deth.unwrap();
        assert_eq!((deth.q_key, deth.src_qp), (0x1111_1111, 0x12));
        assert!(frames(&ProbeOrder { payload: Hex(vec![0; 4]), ..order(0x11) }, &aim(), &a, &b)
            .unwrap_err()
            .contains("no payload"));
    }
}
