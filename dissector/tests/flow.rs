//! Flow analysis over crafted conversations whose ground truth we know.

use dissector::craft::{Conversation, Dir};
use dissector::flow::{Analyzer, Report};
use dissector::frame::{self, Options};
use dissector::wire::mad::{CmMessage, CmRep, CmReq};
use dissector::wire::{Psn, Syndrome, Transport};
use dissector::LinkType;

fn analyze(c: &Conversation) -> Report {
    let mut a = Analyzer::new();
    for (i, t) in c.frames.iter().enumerate() {
        let f = frame::decode(LinkType::ETHERNET, &t.data, &Options::default());
        a.add(i as u64 + 1, t.ts_ns, t.data.len() as u32, &f, &t.data);
    }
    a.report()
}

#[test]
fn send_and_ack_one_message_with_latency() {
    let mut c = Conversation::new();
    let p = c.send(Dir::AtoB, 64, None);
    c.wait(10_000);
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    let r = analyze(&c);
    assert_eq!(r.flows.len(), 2);
    let a = &r.flows[0];
    assert_eq!((a.counters.sends.messages, a.counters.sends.bytes), (1, 64));
    assert_eq!(
        (a.counters.acks, a.counters.naks, a.counters.retransmissions, a.counters.gaps),
        (1, 0, 0, 0)
    );
    assert_eq!(a.paired_with, Some(2));
    assert_eq!(a.paired_by, Some("address"));
    let l = a.ack_latency.unwrap();
    assert_eq!((l.samples, l.min_ns, l.max_ns), (1, 12_000, 12_000));
    assert_eq!(a.counters.icrc_bad, 0);
    assert_eq!(a.counters.icrc_checked, 1);
}

#[test]
fn multi_packet_write_is_one_message_and_ack_coalesces() {
    let mut c = Conversation::new(); // MTU 1024
    let p = c.write(Dir::AtoB, 0x1000, 0x55, 3000, None);
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    let p2 = c.write(Dir::AtoB, 0x1000, 0x55, 100, Some(7));
    c.ack(Dir::BtoA, p2, Syndrome::ACK, 1);
    let r = analyze(&c);
    let a = &r.flows[0];
    assert_eq!(a.counters.requests, 4);
    assert_eq!(
        (a.counters.writes.messages, a.counters.writes.bytes, a.counters.largest_message),
        (2, 3100, 3000)
    );
    assert_eq!(a.counters.psn_first, Some(100));
    assert_eq!(a.counters.psn_last, Some(103));
    assert_eq!(a.counters.acks, 2);
    assert_eq!(a.counters.coalesced_acks, 0, "first ACK covers 3 packets but is the first seen");
    assert_eq!(a.counters.acked_packets, 2);
    assert_eq!(a.counters.broken_messages, 0);
}

#[test]
fn nak_is_tied_to_the_request_it_answers() {
    let mut c = Conversation::new();
    let p = c.write(Dir::AtoB, 0x1000, 0xbad, 64, None);
    c.ack(Dir::BtoA, p, Syndrome::nak(2), 0);
    let r = analyze(&c);
    let a = &r.flows[0];
    assert_eq!(a.counters.naks, 1);
    let e = &a.nak_events[0];
    assert_eq!((e.frame, e.psn, e.request_frame), (2, 100, Some(1)));
    assert_eq!(e.syndrome, "NAK Remote Access Error");
    assert_eq!(e.wc_status, Some("IBV_WC_REM_ACCESS_ERR"));
    assert!(r.to_string().contains("frame 2: NAK Remote Access Error for PSN 100 (request in frame 1) → requester completes with IBV_WC_REM_ACCESS_ERR"));
}

#[test]
fn lost_packet_gap_nak_and_go_back_n() {
    let mut c = Conversation::new();
    c.mtu = 256;
    // A 4-packet WRITE, PSN 100..=103, whose second packet (PSN 101) is lost before
    // the capture point.
    let last = c.write(Dir::AtoB, 0, 1, 1024, None);
    assert_eq!(last, Psn::new(103));
    let sent: Vec<_> = c.frames.iter().map(|f| f.data.clone()).collect();
    c.frames.remove(1);
    // The responder NAKs with the PSN it expected; the requester goes back to 101.
    c.ack(Dir::BtoA, Psn::new(101), Syndrome::nak(0), 0);
    for data in &sent[1..] {
        c.wait(1_000);
        let ts = c.frames.last().unwrap().ts_ns + 1_000;
        c.frames.push(dissector::craft::Timed { ts_ns: ts, data: data.clone() });
    }
    c.ack(Dir::BtoA, Psn::new(103), Syndrome::ACK, 1);
    let r = analyze(&c);
    let a = &r.flows[0];
    assert_eq!((a.counters.gaps, a.counters.missing_psns), (1, 1));
    assert_eq!((a.gap_events[0].expected, a.gap_events[0].got), (101, 102));
    assert_eq!(a.counters.out_of_order, 1, "101 arrives late, never seen before");
    assert_eq!(a.counters.retransmissions, 2, "102 and 103 are seen twice");
    assert_eq!(a.counters.naks, 1);
    assert_eq!(a.nak_events[0].syndrome, "NAK PSN Sequence Error");
    assert_eq!(a.nak_events[0].request_frame, None, "PSN 101 was never captured before the NAK");
    assert_eq!(a.counters.ack_regressions, 0);
    assert_eq!((a.counters.writes.messages, a.counters.writes.bytes), (1, 1024), "{r}");
}

#[test]
fn retransmissions_are_counted_once_per_resent_packet() {
    let mut c = Conversation::new();
    let p = c.send(Dir::AtoB, 10, None);
    c.ack(Dir::BtoA, p, Syndrome::rnr_nak(12), 0);
    c.rewind(Dir::AtoB, p);
    let p2 = c.send(Dir::AtoB, 10, None); // the resend after the RNR timer
    assert_eq!(p, p2);
    c.ack(Dir::BtoA, p2, Syndrome::ACK, 1);
    let r = analyze(&c);
    let a = &r.flows[0];
    assert_eq!(
        (a.counters.requests, a.counters.retransmissions, a.counters.rnr_naks, a.counters.acks),
        (2, 1, 1, 1)
    );
    assert_eq!(a.counters.sends.messages, 1, "a resent message is not a new message");
    assert_eq!(a.nak_events[0].syndrome, "RNR NAK timer=12 (0.64 ms)");
    assert_eq!(a.nak_events[0].request_frame, Some(1));
}

#[test]
fn read_consumes_psns_without_a_gap_and_latency_is_measured() {
    let mut c = Conversation::new();
    let p = c.read_request(Dir::AtoB, 0x2000, 9, 2500); // 3 response packets
    c.wait(5_000);
    c.read_response(Dir::BtoA, p, 2500);
    let s = c.send(Dir::AtoB, 8, None); // PSN p+3
    assert_eq!(s, p.add(3));
    c.ack(Dir::BtoA, s, Syndrome::ACK, 1);
    let r = analyze(&c);
    let a = &r.flows[0];
    assert_eq!(a.counters.gaps, 0, "{r}");
    assert_eq!((a.counters.reads.messages, a.counters.reads.bytes), (1, 2500));
    assert_eq!(a.read_latency.unwrap().min_ns, 7_000);
    assert_eq!(a.counters.acks, 2, "READ Response Last carries an ACK, and the SEND's ACK");
}

#[test]
fn psn_wraps_at_24_bits() {
    let mut c = Conversation::new();
    c.a.psn = Psn::new(0xFF_FFFE);
    for _ in 0..4 {
        let p = c.send(Dir::AtoB, 4, None);
        c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    }
    let r = analyze(&c);
    let a = &r.flows[0];
    assert_eq!((a.counters.psn_first, a.counters.psn_last), (Some(0xFF_FFFE), Some(1)));
    assert_eq!(
        (
            a.counters.gaps,
            a.counters.out_of_order,
            a.counters.retransmissions,
            a.counters.ack_regressions
        ),
        (0, 0, 0, 0)
    );
    assert_eq!(a.counters.acks, 4);
}

#[test]
fn out_of_order_and_ack_regression() {
    let mut c = Conversation::new();
    for _ in 0..3 {
        c.send(Dir::AtoB, 4, None);
    }
    c.frames.swap(1, 2); // 100, 102, 101
    c.ack(Dir::BtoA, Psn::new(102), Syndrome::ACK, 3);
    c.ack(Dir::BtoA, Psn::new(101), Syndrome::ACK, 0);
    let r = analyze(&c);
    let a = &r.flows[0];
    assert_eq!((a.counters.gaps, a.counters.out_of_order, a.counters.retransmissions), (1, 1, 0));
    assert_eq!(a.counters.ack_regressions, 1);
}

#[test]
fn ecn_marks_and_cnps() {
    let mut c = Conversation::new();
    c.encap.ecn = 3;
    let p = c.send(Dir::AtoB, 4, None);
    c.encap.ecn = 0;
    c.cnp(Dir::BtoA);
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    let r = analyze(&c);
    assert_eq!(r.flows[0].counters.ecn_ce, 1);
    assert_eq!(r.flows[1].counters.cnps, 1);
    assert_eq!(r.flows[1].counters.becn, 1);
    assert_eq!(r.totals.cnps, 1);
}

#[test]
fn ud_flows_are_keyed_by_source_qp() {
    let mut c = Conversation::new();
    c.transport = Transport::Ud;
    c.ud_send(Dir::AtoB, 16, None, 0x1111);
    c.a.qpn = 0x99;
    c.ud_send(Dir::AtoB, 16, Some(5), 0x1111);
    let r = analyze(&c);
    assert_eq!(r.flows.len(), 2);
    assert_eq!(r.flows[0].src_qp, Some(0x11));
    assert_eq!(r.flows[1].src_qp, Some(0x99));
    assert_eq!(r.flows[0].transport, "UD");
}

/// A REQ from A (comm id, QPN, starting PSN) and B's REP, as rdma_cm sends them.
fn cm_connect(
    c: &mut Conversation,
    (req_id, a_qpn, req_psn): (u32, u32, u32),
    (rep_id, b_qpn, rep_psn): (u32, u32, u32),
) {
    let req = CmMessage::Req(CmReq {
        local_comm_id: req_id,
        service_id: 1,
        local_qkey: 0,
        local_qpn: a_qpn,
        responder_resources: 1,
        initiator_depth: 1,
        transport_type: 0,
        starting_psn: Psn::new(req_psn),
        retry_count: 7,
        p_key: 0xffff,
        path_mtu: 3,
        rnr_retry_count: 7,
        srq: false,
        primary_local_gid: c.a.host.gid(),
        primary_remote_gid: c.b.host.gid(),
    });
    c.cm(Dir::AtoB, req, 1);
    let rep = CmMessage::Rep(CmRep {
        local_comm_id: rep_id,
        remote_comm_id: req_id,
        local_qkey: 0,
        local_qpn: b_qpn,
        starting_psn: Psn::new(rep_psn),
        responder_resources: 1,
        initiator_depth: 1,
        rnr_retry_count: 7,
        srq: false,
    });
    c.cm(Dir::BtoA, rep, 1);
}

#[test]
fn cm_pairs_flows_even_with_several_qps() {
    let mut c = Conversation::new();
    // The REQ carries the PSN the passive side's requests start at.
    cm_connect(&mut c, (1, 0x11, 5000), (2, 0x12, 100));
    // A second, unrelated QP pair between the same hosts.
    let mut other = c.clone();
    other.frames.clear();
    other.a.qpn = 0x21;
    other.b.qpn = 0x22;
    let p = other.send(Dir::AtoB, 4, None);
    c.frames.extend(other.frames);
    let p1 = c.send(Dir::AtoB, 4, None);
    c.ack(Dir::BtoA, p1, Syndrome::ACK, 1);
    let _ = p;
    let r = analyze(&c);
    let conn = r.flows.iter().find(|f| f.dest_qp == 0x12 && f.src_qp.is_none()).unwrap();
    assert_eq!(conn.counters.acks, 1);
    assert_eq!(conn.paired_by, Some("CM"));
    assert_eq!(r.totals.cm_messages, 2);
    let cm = conn.cm.expect("CM facts on the flow");
    assert_eq!(
        (cm.comm_id, cm.sender_qpn, cm.start_psn, cm.req_frame, cm.rep_frame),
        (1, 0x11, 100, 1, 2)
    );
    assert!(
        r.to_string().contains("starting PSN 100 announced in the REP; the first request uses it"),
        "{r}"
    );
    let back = r.flows.iter().find(|f| f.dest_qp == 0x11 && f.src_qp.is_none()).unwrap();
    assert_eq!(back.cm.map(|c| (c.sender_qpn, c.start_psn)), Some((0x12, 5000)));
}

#[test]
fn empty_capture_says_why() {
    let r = analyze(&Conversation::new());
    assert!(r.to_string().contains("looped back inside the driver"));
}

#[test]
fn cm_starting_psn_mismatch_is_reported() {
    let mut c = Conversation::new();
    // The REP announces PSN 100 for A's requests, but A's QP was moved to RTS with 7000.
    let (a_qpn, b_qpn, a_psn, b_psn) = (c.a.qpn, c.b.qpn, c.a.psn.value(), c.b.psn.value());
    cm_connect(&mut c, (7, a_qpn, b_psn), (8, b_qpn, a_psn));
    c.a.psn = Psn::new(7000);
    let p = c.send(Dir::AtoB, 8, None);
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
    let r = analyze(&c);
    let text = r.to_string();
    assert!(
        text.contains("starting PSN 100 announced in the REP; but the first request used PSN 7000"),
        "{text}"
    );
}

#[test]
fn an_ack_for_a_psn_never_sent_is_a_ghost() {
    let mut c = Conversation::new();
    let p = c.write(Dir::AtoB, 0x1000, 0x55, 64, None); // PSN 100
    c.ack(Dir::BtoA, p.add(8), Syndrome::ACK, 1); // 108: never sent
    c.ack(Dir::BtoA, p, Syndrome::ACK, 1); // the real one
                                           // A 3072-byte READ at PSN 101: with the path MTU unknown (256 at least), its
                                           // responses may use PSNs up to 101 + 11, so an ACK of 112 is no ghost, 113 is.
    let r = c.read_request(Dir::AtoB, 0x1000, 0x55, 3 * 1024);
    c.ack(Dir::BtoA, r.add(11), Syndrome::ACK, 2);
    c.ack(Dir::BtoA, r.add(12), Syndrome::ACK, 2);
    let rep = analyze(&c);
    let ghosts: Vec<(u32, u32)> =
        rep.flows[0].ghost_acks.iter().map(|g| (g.psn, g.next_psn)).collect();
    assert_eq!(ghosts, vec![(108, 101), (113, 102)]);
}
