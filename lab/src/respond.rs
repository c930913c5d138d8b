//! The responder the switch plays for `respond` rules: what it knows of each
//! request flow (the MSN a responder would report), the responses it builds with
//! the dissector's emit side, and the real answers it holds back.
//!
//! Owns: building a response from a request frame; which later responder frames a
//! `real=withhold` rule keeps from the requester. Imports: the dissector (frame
//! decoding, the emit side, the opcode table, AETH syndromes) and the fault rules.
use std::collections::HashMap;
use std::net::IpAddr;

use dissector::craft::{self, Encap, Host, Transport};
use dissector::frame::{self, Link, Net};
use dissector::wire::opcode::{Kind, OpInfo};
use dissector::wire::{AethRepr, BthRepr, Opcode, Psn, Syndrome};
use dissector::LinkType;

use super::fault::{Dir, Reply, Respond, MAX_READ_RESPONSE};
use super::mark::RuleRef;

/// The opcodes of RC responses (IBA table 38).
const READ_RESPONSE_ONLY: u8 = 0x10;
const ACKNOWLEDGE: u8 = 0x11;
const ATOMIC_ACKNOWLEDGE: u8 = 0x12;

/// The packet ends a message (requests) or a response (an ACK, the last READ
/// response): not a First without Last, not a Middle.
fn ends_message(info: &OpInfo) -> bool {
    !info.is(Kind::MIDDLE) && (!info.is(Kind::FIRST) || info.is(Kind::LAST))
}

/// One request flow (direction and destination QP), as its responder sees it.
#[derive(Debug, Default, Clone, Copy)]
struct Flow {
    /// The highest PSN delivered so far.
    highest: Option<Psn>,
    /// Messages delivered: the MSN the responder reports in its AETH.
    msn: u32,
}

/// A responder answer a `real=withhold` rule keeps from the requester.
#[derive(Debug, Clone)]
struct Withhold {
    /// The direction responses travel.
    dir: Dir,
    /// The requester's QPN (the responses' destination).
    qp: u32,
    /// The request's PSN: the answer is the first response at or past it.
    psn: Psn,
    by: RuleRef,
}

/// The switch's responder state for one run.
#[derive(Debug, Default)]
pub(crate) struct Responder {
    flows: HashMap<(Dir, u32), Flow>,
    withholds: Vec<Withhold>,
}

/// A request as the switch saw it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request {
    pub dir: Dir,
    pub qp: u32,
    pub psn: Psn,
    pub opcode: u8,
}

impl Responder {
    /// A request frame was delivered: the responder counts it.
    pub(crate) fn delivered(&mut self, r: &Request) {
        let Some(info) = Opcode(r.opcode).info().filter(|i| i.is_request()) else { return };
        let f = self.flows.entry((r.dir, r.qp)).or_default();
        if f.highest.is_none_or(|h| r.psn.after(h)) {
            f.highest = Some(r.psn);
            if ends_message(info) {
                f.msn = (f.msn + 1) & 0xff_ffff;
            }
        }
    }

    /// The MSN a responder that executed `r` would report.
    fn msn_for(&self, r: &Request) -> u32 {
        let f = self.flows.get(&(r.dir, r.qp)).copied().unwrap_or_default();
        let new = f.highest.is_none_or(|h| r.psn.after(h));
        let ends = Opcode(r.opcode).info().is_some_and(ends_message);
        (f.msn + u32::from(new && ends)) & 0xff_ffff
    }

    /// Holds back the responder's answer to `r` (going to `qp`).
    pub(crate) fn withhold(&mut self, r: &Request, qp: u32, by: RuleRef) {
        self.withholds.push(Withhold { dir: r.dir.reverse(), qp, psn: r.psn, by });
    }

    /// A response frame travelling `dir` to `qp`: the rule that withholds it, if
    /// one does. An answer that ends a response settles the rule's claim.
    pub(crate) fn withheld(&mut self, dir: Dir, qp: u32, psn: Psn, opcode: u8) -> Option<RuleRef> {
        if self.withholds.is_empty() {
            return None;
        }
        let info = Opcode(opcode).info().filter(|i| i.is_response())?;
        // At or past the request's PSN, within half the PSN space.
        let i =
            self.withholds.iter().position(|w| w.dir == dir && w.qp == qp && !w.psn.after(psn))?;
        if ends_message(info) {
            Some(self.withholds.remove(i).by)
        } else {
            Some(self.withholds[i].by.clone())
        }
    }

    /// Builds the response `rule` sends for the request frame `data`; `nth` counts
    /// the rule's applications from 1 (an RNR range steps through its codes).
    pub(crate) fn build(
        &self,
        data: &[u8],
        r: &Request,
        rule: &Respond,
        nth: u64,
    ) -> Result<Vec<u8>, String> {
        let opts = frame::Options::default();
        let f = frame::decode(LinkType::ETHERNET, data, &opts);
        let ib = f.ib.as_ref().ok_or("not a RoCE frame")?;
        let info = ib.info.ok_or("an opcode outside the table: nothing answers it")?;
        if info.transport != dissector::wire::Transport::Rc || !info.is_request() {
            return Err(format!("{} is not an RC request: no response answers it", info.name));
        }
        let reply_qp = rule.reply_qp.ok_or(
            "no reply QP: give reply-qp= (a scenario's [[fault]] fills it in from `qp` and `from`)",
        )?;
        let Link::Ethernet { src: smac, dst: dmac } = f.link else {
            return Err("not an Ethernet frame".into());
        };
        let (sip, dip): (IpAddr, IpAddr) = f.addrs().ok_or("no IP header")?;
        let (dscp, ecn) = match f.net {
            Net::Ipv4(h) => (h.dscp, h.ecn),
            Net::Ipv6(h) => (h.traffic_class >> 2, h.traffic_class & 3),
            _ => return Err("RoCEv1 is not on this wire".into()),
        };
        let udp = f.udp.ok_or("no UDP header")?;
        let msn = rule.msn.unwrap_or_else(|| self.msn_for(r));
        let offset = rule.psn_offset.rem_euclid(1 << 24) as u32;
        let mut t = Transport {
            bth: BthRepr {
                p_key: ib.bth.p_key,
                dest_qp: reply_qp,
                psn: ib.bth.psn.add(offset),
                ..Default::default()
            },
            ..Default::default()
        };
        let ack = |s: Syndrome| AethRepr { syndrome: s, msn };
        let (opcode, aeth) = match rule.reply {
            Reply::Ack { credits } => (ACKNOWLEDGE, ack(Syndrome(credits & 0x1f))),
            Reply::Nak(code) => (ACKNOWLEDGE, ack(Syndrome::nak(code))),
            Reply::Rnr { first, last } => {
                let step = u8::try_from(nth.saturating_sub(1)).unwrap_or(u8::MAX);
                (ACKNOWLEDGE, ack(Syndrome::rnr_nak(first.saturating_add(step).min(last))))
            }
            Reply::ReadResponse { len, fill } => {
                let reth = ib
                    .reth
                    .filter(|_| info.is(Kind::READ))
                    .ok_or("a READ Response answers a READ Request only")?;
                let n = len.unwrap_or(reth.dma_len);
                if n > MAX_READ_RESPONSE {
                    return Err(format!("the READ asks {n} bytes; one crafted READ Response carries at most {MAX_READ_RESPONSE}: give len="));
                }
                t.payload = vec![fill; n as usize];
                (READ_RESPONSE_ONLY, ack(Syndrome::ACK))
            }
            Reply::AtomicAck { orig } => {
                if !info.is(Kind::ATOMIC) {
                    return Err("an ATOMIC Acknowledge answers CmpSwap or FetchAdd only".into());
                }
                t.atomicacketh = orig;
                (ATOMIC_ACKNOWLEDGE, ack(Syndrome::ACK))
            }
        };
        t.bth.opcode = Opcode(opcode);
        t.aeth = aeth;
        let enc = Encap {
            vlans: f.vlans.iter().flatten().map(|v| v.id).collect(),
            dscp,
            // A CE mark belongs to the request's path, not to this answer.
            ecn: if ecn == 3 { 2 } else { ecn },
            udp_src_port: udp.src_port,
            ..Encap::default()
        };
        Ok(craft::build(&enc, &Host { mac: dmac, ip: dip }, &Host { mac: smac, ip: sip }, &t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::{parse_rule, Action};
    use dissector::craft::build;
    use dissector::wire::ethernet::Mac;
    use dissector::wire::ext::RethRepr;
    use std::net::Ipv4Addr;

    fn host(last: u8) -> Host {
        Host { mac: Mac([2, 0, 0, 0, 0, last]), ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)) }
    }

    fn request(op: u8, psn: u32, dma_len: u32) -> Vec<u8> {
        let t = Transport {
            bth: BthRepr {
                opcode: Opcode(op),
                p_key: 0xffff,
                dest_qp: 0x22,
                psn: Psn::new(psn),
                ack_req: true,
                ..Default::default()
            },
            reth: RethRepr { va: 0x1000, r_key: 0x99, dma_len },
            payload: if op == 0x0c { vec![] } else { vec![7; 8] },
            ..Default::default()
        };
        build(&Encap { udp_src_port: 0xd00d, dscp: 26, ..Encap::default() }, &host(1), &host(2), &t)
    }

    fn respond(text: &str) -> Respond {
        match parse_rule(text).map(|r| r.action) {
            Ok(Action::Respond(r)) => r,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn decode(data: &[u8]) -> frame::Frame {
        frame::decode(LinkType::ETHERNET, data, &frame::Options::default())
    }

    fn req(op: u8, psn: u32) -> Request {
        Request { dir: Dir::AtoB, qp: 0x22, psn: Psn::new(psn), opcode: op }
    }

    /// A crafted ACK goes back the way the request came, to the reply QP, with the
    /// MSN a responder would report and an ICRC the receiver accepts.
    #[test]
    fn an_ack_is_addressed_back_with_msn_and_a_valid_icrc() {
        let mut r = Responder::default();
        // Two messages delivered before: a WRITE First/Last pair and a SEND Only.
        for (op, psn) in [(0x06, 100), (0x08, 101), (0x04, 102)] {
            r.delivered(&req(op, psn));
        }
        r.delivered(&req(0x04, 102)); // a resend: not counted again
        let data = request(0x0a, 103, 8);
        let out = r
            .build(&data, &req(0x0a, 103), &respond("respond with=ack rpsn=+3 reply-qp=0x11"), 1)
            .unwrap();
        let f = decode(&out);
        let ib = f.ib.as_ref().unwrap();
        assert_eq!((ib.bth.opcode.0, ib.bth.dest_qp, ib.bth.psn.value()), (0x11, 0x11, 106));
        assert_eq!(
            ib.aeth.map(|a| (a.syndrome.0, a.msn)),
            Some((0x1f, 3)),
            "2 messages before, this one makes 3"
        );
        assert_eq!(f.addrs(), Some((host(2).ip, host(1).ip)));
        assert!(
            matches!(f.link, Link::Ethernet { src, dst } if src == host(2).mac && dst == host(1).mac)
        );
        assert_eq!(f.udp.map(|u| (u.src_port, u.dst_port)), Some((0xd00d, 4791)));
        assert!(matches!(f.net, Net::Ipv4(h) if h.dscp == 26));
        assert!(f.icrc_check(&out).unwrap().ok());
        // msn= overrides; a negative offset wraps in 24 bits.
        let out = r
            .build(
                &request(0x0a, 0, 8),
                &req(0x0a, 0),
                &respond("respond with=ack credits=0 rpsn=-1 msn=9 reply-qp=0x11"),
                1,
            )
            .unwrap();
        let f = decode(&out);
        assert_eq!(
            f.ib.as_ref().map(|i| (
                i.bth.psn.value(),
                i.aeth.unwrap().syndrome.0,
                i.aeth.unwrap().msn
            )),
            Some((0xff_ffff, 0, 9))
        );
    }

    #[test]
    fn naks_rnr_ranges_read_responses_and_atomic_acks() {
        let r = Responder::default();
        let syn = |text: &str, op: u8, nth: u64| {
            let out = r.build(&request(op, 7, 16), &req(op, 7), &respond(text), nth).unwrap();
            let f = decode(&out);
            assert!(f.icrc_check(&out).unwrap().ok(), "{text}");
            let ib = f.ib.unwrap();
            (ib.bth.opcode.0, ib.aeth.map(|a| a.syndrome.0), ib.payload.len(), ib.atomicacketh)
        };
        assert_eq!(
            syn("respond with=nak code=remote_access_error reply-qp=1", 0x0a, 1),
            (0x11, Some(0x62), 0, None)
        );
        assert_eq!(
            syn("respond with=rnr timer=1-31 reply-qp=1", 0x04, 1),
            (0x11, Some(0x21), 0, None)
        );
        assert_eq!(
            syn("respond with=rnr timer=1-31 reply-qp=1", 0x04, 31),
            (0x11, Some(0x3f), 0, None)
        );
        assert_eq!(
            syn("respond with=rnr timer=1-31 reply-qp=1", 0x04, 99),
            (0x11, Some(0x3f), 0, None),
            "clamped to the range"
        );
        assert_eq!(
            syn("respond with=read-response fill=0x5a reply-qp=1", 0x0c, 1),
            (0x10, Some(0x1f), 16, None),
            "the request's DMA length"
        );
        assert_eq!(syn("respond with=read-response len=4 reply-qp=1", 0x0c, 1).2, 4);
        assert_eq!(
            syn("respond with=atomic-ack orig=0x1234 reply-qp=1", 0x14, 1),
            (0x12, Some(0x1f), 0, Some(0x1234))
        );
        // What cannot be answered says why.
        let e = |text: &str, op: u8| {
            r.build(&request(op, 7, 16), &req(op, 7), &respond(text), 1).unwrap_err()
        };
        assert!(e("respond with=read-response reply-qp=1", 0x0a).contains("READ Request only"));
        assert!(e("respond with=atomic-ack reply-qp=1", 0x0a).contains("CmpSwap or FetchAdd"));
        assert!(e("respond with=ack", 0x0a).contains("reply-qp"));
        assert!(
            e("respond with=ack reply-qp=1", 0x2a).contains("not an RC request"),
            "UC WRITE Only"
        );
        assert!(r
            .build(
                &request(0x0c, 7, 9000),
                &req(0x0c, 7),
                &respond("respond with=read-response reply-qp=1"),
                1
            )
            .unwrap_err()
            .contains("len="));
    }

    /// The responder's answer at or past the request's PSN is held back; a READ's
    /// First and Middle do not settle the claim, its Last does; others pass.
    #[test]
    fn withholding_takes_the_answer_and_nothing_else() {
        let mut r = Responder::default();
        let by = RuleRef { index: 1, rule: "respond".into() };
        r.withhold(&req(0x0c, 50), 0x11, by.clone());
        assert_eq!(
            r.withheld(Dir::BtoA, 0x11, Psn::new(49), 0x11),
            None,
            "an ACK of an earlier PSN"
        );
        assert_eq!(r.withheld(Dir::BtoA, 0x12, Psn::new(50), 0x11), None, "another QP");
        assert_eq!(r.withheld(Dir::AtoB, 0x11, Psn::new(50), 0x11), None, "the other direction");
        assert_eq!(r.withheld(Dir::BtoA, 0x11, Psn::new(50), 0x0c), None, "a request");
        assert_eq!(
            r.withheld(Dir::BtoA, 0x11, Psn::new(50), 0x0d),
            Some(by.clone()),
            "READ Response First"
        );
        assert_eq!(r.withheld(Dir::BtoA, 0x11, Psn::new(51), 0x0e), Some(by.clone()));
        assert_eq!(
            r.withheld(Dir::BtoA, 0x11, Psn::new(52), 0x0f),
            Some(by.clone()),
            "READ Response Last settles it"
        );
        assert_eq!(r.withheld(Dir::BtoA, 0x11, Psn::new(53), 0x11), None);
    }
}
