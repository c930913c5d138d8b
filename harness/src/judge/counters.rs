//! A device's counters, read: what each driver's counter names mean, each
//! endpoint's counters set against the wire wherever both count the same thing
//! (a counter that disagrees with the wire is a driver bug worth a look), and
//! `[[expect.counters]]`.
//!
//! The meanings come from each driver's source (rxe: where
//! `rxe_counter_inc` is called) or its kernel documentation; a driver or a
//! counter the table does not know is shown, never dropped, and never read.
//!
//! Owns: [`Meaning`], the driver table, [`reports`], the observations a
//! disagreement makes ([`observations`]), [`verdict`]. Imports:
//! `super::timeline`, the results' counter shapes and verdicts, the scenario's
//! counter expectation, dissector's ACK classes.
use std::collections::BTreeMap;
use std::net::IpAddr;

use dissector::wire::AckClass;

use super::timeline::{Packet, Timeline};
use crate::protocol::CounterDeltas;
use crate::results::{
    counter_key, counter_key_endpoint, CounterReport, EndpointFacts, Evidence, Reconciled, Verdict,
    VerdictKind,
};
use crate::scenario::model::CounterExpect;

/// What a counter counts, in the judge's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Meaning {
    /// RoCE packets the device sent (every one: requests, responses, ACKs,
    /// retransmissions, CM MADs on QP1).
    Sent,
    /// RoCE packets the device took in (past its header and ICRC checks).
    Received,
    /// RNR NAKs it sent, as a responder.
    RnrNakSent,
    /// RNR NAKs it acted on, as a requester.
    RnrNakReceived,
    /// PSN sequence error NAKs it acted on, as a requester.
    SeqNakReceived,
    /// Duplicate requests it received, as a responder.
    DuplicateRequest,
    /// Requests past the PSN it expected, as a responder.
    OutOfSequence,
    /// Work requests completed in error after the retry count ran out.
    RetryExceeded,
    /// Work requests completed in error after the RNR retry count ran out.
    RnrRetryExceeded,
    /// The requester's ACK timer expired.
    AckTimeout,
    /// CNPs it sent, as the notification point.
    CnpSent,
    /// CNPs it acted on, as the reaction point.
    CnpHandled,
}

impl Meaning {
    /// Every meaning, as `[[expect.counters]]` may name one instead of a driver's
    /// counter (`counter = "rnr_naks_sent"`): the same scenario then reads rxe's
    /// `send_rnr_err` and another driver's name for it.
    pub(crate) const ALL: [Meaning; 12] = [
        Meaning::Sent,
        Meaning::Received,
        Meaning::RnrNakSent,
        Meaning::RnrNakReceived,
        Meaning::SeqNakReceived,
        Meaning::DuplicateRequest,
        Meaning::OutOfSequence,
        Meaning::RetryExceeded,
        Meaning::RnrRetryExceeded,
        Meaning::AckTimeout,
        Meaning::CnpSent,
        Meaning::CnpHandled,
    ];

    /// Its name in a scenario file.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Meaning::Sent => "packets_sent",
            Meaning::Received => "packets_received",
            Meaning::RnrNakSent => "rnr_naks_sent",
            Meaning::RnrNakReceived => "rnr_naks_received",
            Meaning::SeqNakReceived => "seq_naks_received",
            Meaning::DuplicateRequest => "duplicate_requests",
            Meaning::OutOfSequence => "out_of_sequence_requests",
            Meaning::RetryExceeded => "retry_exceeded",
            Meaning::RnrRetryExceeded => "rnr_retry_exceeded",
            Meaning::AckTimeout => "ack_timeouts",
            Meaning::CnpSent => "cnps_sent",
            Meaning::CnpHandled => "cnps_handled",
        }
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            Meaning::Sent => "RoCE packets sent",
            Meaning::Received => "RoCE packets received",
            Meaning::RnrNakSent => "RNR NAKs sent",
            Meaning::RnrNakReceived => "RNR NAKs received",
            Meaning::SeqNakReceived => "PSN sequence error NAKs received",
            Meaning::DuplicateRequest => "duplicate requests received",
            Meaning::OutOfSequence => "out-of-sequence requests received",
            Meaning::RetryExceeded => "retry count exceeded",
            Meaning::RnrRetryExceeded => "RNR retry count exceeded",
            Meaning::AckTimeout => "ACK timeouts",
            Meaning::CnpSent => "CNPs sent",
            Meaning::CnpHandled => "CNPs handled",
        }
    }
}

/// Each driver's counter names and what they mean: rxe from its source
/// (`drivers/infiniband/sw/rxe`, where `rxe_counter_inc` is called); mlx5,
/// bnxt_re and irdma from their drivers' counter tables (`mlx5/counters.c`,
/// `bnxt_re/hw_counters.c`, `irdma/verbs.c`) and their documentation. Only
/// counters whose meaning is plain from there; the rest are shown, not read.
const TABLE: &[(&str, &[(&str, Meaning)])] = &[
    (
        "rxe",
        &[
            // rxe_xmit_packet, once the packet went out (QP1's MADs, ACKs and
            // responses included).
            ("sent_pkts", Meaning::Sent),
            // rxe_rcv, past the header and ICRC checks (duplicates included).
            ("rcvd_pkts", Meaning::Received),
            // rxe_responder, once per RNR NAK.
            ("send_rnr_err", Meaning::RnrNakSent),
            ("rcvd_rnr_err", Meaning::RnrNakReceived),
            ("rcvd_seq_err", Meaning::SeqNakReceived),
            ("duplicate_request", Meaning::DuplicateRequest),
            ("out_of_seq_request", Meaning::OutOfSequence),
            ("retry_exceeded_err", Meaning::RetryExceeded),
            ("retry_rnr_exceeded_err", Meaning::RnrRetryExceeded),
        ],
    ),
    (
        "mlx5",
        &[
            // The PMA's port counters: the function's RDMA traffic only.
            ("port_xmit_packets", Meaning::Sent),
            ("port_rcv_packets", Meaning::Received),
            ("out_of_sequence", Meaning::OutOfSequence),
            ("duplicate_request", Meaning::DuplicateRequest),
            // Despite the name: RNR NAKs received.
            ("rnr_nak_retry_err", Meaning::RnrNakReceived),
            ("packet_seq_err", Meaning::SeqNakReceived),
            ("local_ack_timeout_err", Meaning::AckTimeout),
            // Linux 6.11 on.
            ("req_transport_retries_exceeded", Meaning::RetryExceeded),
            ("req_rnr_retries_exceeded", Meaning::RnrRetryExceeded),
            ("np_cnp_sent", Meaning::CnpSent),
            ("rp_cnp_handled", Meaning::CnpHandled),
        ],
    ),
    (
        "bnxt_re",
        &[
            // Linux 6.6 on, on its P5 chips.
            ("tx_roce_only_pkts", Meaning::Sent),
            ("rx_roce_only_pkts", Meaning::Received),
            ("rnr_naks_rcvd", Meaning::RnrNakReceived),
            ("seq_err_naks_rcvd", Meaning::SeqNakReceived),
            ("dup_req", Meaning::DuplicateRequest),
            ("tx_cnp_pkts", Meaning::CnpSent),
        ],
    ),
    ("irdma", &[("cnpSent", Meaning::CnpSent), ("cnpHandled", Meaning::CnpHandled)]),
];

/// The table's driver for what the agent said drives the device (its PCI
/// driver, or `rxe` for Soft-RoCE), else by the kernel's name for the device
/// (`rxe0`, `mlx5_1`).
pub(crate) fn driver(c: &CounterDeltas) -> Option<&'static str> {
    let by_module = match c.driver.as_deref() {
        Some("rdma_rxe" | "rxe") => Some("rxe"),
        Some("mlx5_core") => Some("mlx5"),
        Some("bnxt_en") => Some("bnxt_re"),
        Some("ice" | "i40e" | "idpf") => Some("irdma"),
        _ => None,
    };
    by_module.or_else(|| by_name(&c.device))
}

/// The driver whose names a device's counters go by, from the kernel's name for
/// it; a renamed device (`rocep1s0f0`) says nothing.
fn by_name(device: &str) -> Option<&'static str> {
    TABLE.iter().map(|(d, _)| *d).find(|d| {
        device.strip_prefix(d).is_some_and(|rest| {
            let rest = rest.strip_prefix('_').unwrap_or(rest);
            rest.bytes().last().is_some_and(|b| b.is_ascii_digit())
                && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        })
    })
}

/// `driver`'s counter for `m`, when it has one the table knows.
fn counter_for(driver: &str, m: Meaning) -> Option<&'static str> {
    let (_, names) = TABLE.iter().find(|(d, _)| *d == driver)?;
    names.iter().find(|(_, x)| *x == m).map(|(n, _)| *n)
}

/// What `counter` of `driver` means, when the table knows.
pub(crate) fn meaning(driver: &str, counter: &str) -> Option<Meaning> {
    let (_, names) = TABLE.iter().find(|(d, _)| *d == driver)?;
    names.iter().find(|(n, _)| *n == counter).map(|(_, m)| *m)
}

/// Each endpoint's counters as the report shows them, with every counter the
/// wire can count set against it. The wire is only read where it is complete:
/// the lab switch's recording, which holds every frame it carried.
pub(crate) fn reports(o: &Evidence, wire: Option<&Timeline>) -> BTreeMap<String, CounterReport> {
    let complete = o.wire.as_ref().is_some_and(|w| w.counters.capture_complete());
    let mut out = BTreeMap::new();
    for (ep, c) in &o.counters {
        let driver = driver(c);
        let mine = o.endpoints.get(ep);
        let ip = mine.and_then(|f| f.ip.parse::<IpAddr>().ok());
        let mut reconciled = match (driver, mine.zip(ip), wire.filter(|_| complete)) {
            (Some(d), Some((mine, ip)), Some(t)) => {
                reconcile(Endpoint { name: ep, facts: mine, ip }, d, c, o, t)
            }
            _ => Vec::new(),
        };
        // Two endpoints on one device: what they send each other never reaches
        // the wire (the device loops it back), so the wire cannot count it.
        let looped = o.endpoints.iter().any(|(e, f)| e != ep && Some(&f.ip) == mine.map(|x| &x.ip));
        if looped {
            for x in &mut reconciled {
                x.wire_min = Some(0);
                x.wire = x.wire.max(x.device);
                x.note = Some("its peer is on the same device: what they send each other is looped back inside it, never on the wire".into());
            }
        }
        out.insert(
            ep.clone(),
            CounterReport {
                device: c.device.clone(),
                port: c.port,
                driver: driver.map(str::to_string),
                deltas: c.deltas.clone(),
                reset: c.reset.clone(),
                reconciled,
            },
        );
    }
    out
}

/// Each counter that disagrees with the wire, as an observation (`counter a
/// rcvd_pkts` = `device 0, wire 1`): what a device profile records, so a
/// setup's known miscount is held to as profiled (and one that stops, or
/// changes, is a difference), while a counter that agrees records nothing.
pub(crate) fn observations(
    reports: &BTreeMap<String, CounterReport>,
) -> impl Iterator<Item = (String, String)> + '_ {
    reports.iter().flat_map(|(ep, c)| {
        c.reconciled.iter().filter(|x| !x.agrees()).map(move |x| {
            (counter_key(ep, &x.counter), format!("device {}, wire {}", x.device, x.wire_text()))
        })
    })
}

/// Whether a profile's observation `key` is judged in a run whose counters are
/// `reports`: every key is, but a counter's on an endpoint whose counters were
/// not set against the wire (scenarios run side by side read none; a run
/// without the switch's recording cannot weigh them).
pub(crate) fn judged(key: &str, reports: &BTreeMap<String, CounterReport>) -> bool {
    counter_key_endpoint(key).is_none_or(|ep| reports.get(ep).is_some_and(CounterReport::weighed))
}

/// Made by the switch, not sent by any device: a copy, an injected frame, a
/// response a `respond` rule synthesized.
fn switch_made(p: &Packet) -> bool {
    p.marks.injected() || p.marks.synthesized()
}

/// The endpoint whose counters are read: its name, what it set up, its address.
#[derive(Clone, Copy)]
struct Endpoint<'a> {
    name: &'a str,
    facts: &'a EndpointFacts,
    ip: IpAddr,
}

/// The counters of `c` whose meaning the wire shows, each with the wire's count.
fn reconcile(
    ep: Endpoint<'_>,
    driver: &str,
    c: &CounterDeltas,
    o: &Evidence,
    t: &Timeline,
) -> Vec<Reconciled> {
    let ip = ep.ip;
    // What its device sent, and what reached it, as the wire saw them.
    let sent: Vec<&Packet> =
        t.packets.iter().filter(|p| p.src == Some(ip) && !switch_made(p)).collect();
    let delivered: Vec<&Packet> =
        t.packets.iter().filter(|p| p.dst == Some(ip) && p.delivered()).collect();
    let count = |of: &[&Packet], f: fn(&Packet) -> bool| of.iter().filter(|p| f(p)).count() as u64;
    let src = ip.to_string();
    // Probes are crafted by the agent and sent past the device.
    let probed: u64 = o.probes.iter().filter(|p| p.src == src).map(|p| p.frames.len() as u64).sum();
    let probes_in: u64 =
        o.probes.iter().filter(|p| p.dst == src).map(|p| p.frames.len() as u64).sum();
    let mut out = Vec::new();
    for (name, &device) in &c.deltas {
        let Some(m) = meaning(driver, name) else { continue };
        let mut wire_min = None;
        let (wire, note) = match m {
            Meaning::Sent => {
                let n = sent.len() as u64;
                let bye = count(&sent, disconnect);
                let early = before_baseline(&sent, o);
                if bye + early > 0 {
                    wire_min = Some(n.saturating_sub(probed + bye + early));
                }
                let mut notes = Vec::new();
                if probed > 0 {
                    notes.push(format!(
                        "{probed} crafted probe frames it sent are not the device's"
                    ));
                }
                if early > 0 {
                    notes.push(early_note(early));
                }
                (n.saturating_sub(probed), (!notes.is_empty()).then(|| notes.join("; ")))
            }
            Meaning::Received => {
                let n = delivered.len() as u64;
                // What reaches a QP in the error state: rxe up to Linux 6.12
                // drops it before it counts it (rxe_rcv's check_type_state),
                // 7.x counts it; the wire cannot tell which.
                let dead = after_error(ep, o, t);
                let late = count(&delivered, released_at_the_end);
                let mut notes = Vec::new();
                if dead > 0 {
                    notes.push(format!("{dead} reached a QP of it in the error state (after a NAK that ends the connection), which a device may not count"));
                }
                if late > 0 {
                    notes.push(format!("{late} held by the switch until the run was over reached it after its QPs were gone"));
                }
                // A datagram whose Q_Key is not its QP's is dropped uncounted
                // (IBA 10.2.4, rxe's header check).
                let qkey = wrong_qkey(ep.facts, &delivered);
                if qkey > 0 {
                    notes.push(format!(
                        "{qkey} datagrams with another Q_Key than their QP's, which it drops"
                    ));
                }
                // A disconnect on QP1 may come after its counters were read.
                let bye = count(&delivered, disconnect);
                let wire = n.saturating_sub(late + qkey);
                if dead > 0 {
                    wire_min = Some(wire.saturating_sub(dead));
                }
                if bye > 0 {
                    wire_min = Some(wire_min.unwrap_or(wire).saturating_sub(bye));
                    notes.push(format!("{bye} rdma_cm disconnect messages, which may come after its counters were read"));
                }
                // Traffic the scenario left running (retries that never end,
                // a late answer) reaches it as it tears down: a frame that
                // finds its QP gone is dropped before it is counted.
                let trailing = match o.settled_ns {
                    Some(at) => count_after(&delivered, at),
                    None => 0,
                };
                if trailing > 0 {
                    wire_min = Some(wire_min.unwrap_or(wire).saturating_sub(trailing));
                    notes.push(format!("{trailing} reached it after the run stopped waiting for traffic, as its QPs were being destroyed: one that found its QP gone is not counted"));
                }
                let early = before_baseline(&delivered, o);
                if early > 0 {
                    wire_min = Some(wire_min.unwrap_or(wire).saturating_sub(early));
                    notes.push(early_note(early));
                }
                if probes_in > 0 {
                    // A probe the device drops (a bad header, another P_Key or
                    // Q_Key, no such QP) is dropped before it is counted.
                    wire_min = Some(wire_min.unwrap_or(wire).saturating_sub(probes_in));
                    notes.push(format!("{probes_in} crafted probes reached it, which a device drops uncounted when it refuses them"));
                }
                // A frame whose ICRC is bad is not delivered, as the wire sees
                // it: a device that counts it took in what it should have dropped.
                let bad = t
                    .packets
                    .iter()
                    .filter(|p| p.dst == Some(ip) && !p.marks.dropped() && p.icrc_ok == Some(false))
                    .count() as u64;
                if bad > 0 && device > wire {
                    notes.push(format!("{bad} with a bad ICRC (as roce computes it) reached it: one it counted, it took in"));
                }
                (wire, (!notes.is_empty()).then(|| notes.join("; ")))
            }
            Meaning::RnrNakSent => {
                (count(&sent, |p| p.ack_class() == Some(AckClass::RnrNak)), None)
            }
            _ => continue,
        };
        out.push(Reconciled {
            counter: name.clone(),
            meaning: m.describe().to_string(),
            device,
            wire,
            wire_min,
            note,
        });
    }
    out
}

/// How many frames delivered to `ep` reached one of its QPs after that QP went
/// to the error state, which happens at a NAK that ends the connection (one a
/// requester completes in error): as a responder, from the request the NAK
/// answers on (the NAK leaves after the state changed, so requests right behind
/// that one are already refused); as a requester, from the NAK it took in.
fn after_error(ep: Endpoint<'_>, o: &Evidence, t: &Timeline) -> u64 {
    let ip = ep.ip;
    let peer = o.endpoints.iter().find(|(e, _)| *e != ep.name).map(|(_, f)| f);
    // Each of ep's QPs by its QPN, with its peer's QPN (where ep's answers go).
    let pairs: Vec<(u32, u32)> = ep
        .facts
        .qps
        .iter()
        .filter_map(|q| {
            let theirs = peer?.qps.iter().find(|x| x.name == q.name)?;
            Some((q.qpn, theirs.qpn))
        })
        .collect();
    let to_me = |p: &Packet| p.dst == Some(ip) && p.delivered();
    // From which frame on each of ep's QPs takes in nothing.
    let mut error_from: Vec<(u32, usize)> = Vec::new();
    let mut dead = |qpn: u32, at: usize| match error_from.iter_mut().find(|(q, _)| *q == qpn) {
        Some((_, from)) => *from = (*from).min(at),
        None => error_from.push((qpn, at)),
    };
    for (i, p) in t.packets.iter().enumerate() {
        if !matches!(p.ack_class(), Some(AckClass::Nak(c)) if c.wc_status().is_some()) {
            continue;
        }
        if to_me(p) && pairs.iter().any(|(m, _)| *m == p.dest_qp) {
            dead(p.dest_qp, i + 1);
        } else if p.src == Some(ip) && !switch_made(p) {
            let Some((m, _)) = pairs.iter().find(|(_, peer)| *peer == p.dest_qp) else { continue };
            // The request it answers: the last one to that QP with its PSN.
            let asked = t.packets[..i]
                .iter()
                .rposition(|r| r.is_request && to_me(r) && r.dest_qp == *m && r.psn == p.psn);
            dead(*m, asked.map_or(i + 1, |a| a + 1));
        }
    }
    t.packets
        .iter()
        .enumerate()
        .filter(|(i, p)| {
            to_me(p) && error_from.iter().any(|(q, from)| *q == p.dest_qp && i >= from)
        })
        .count() as u64
}

/// How many of `delivered` reached their device at or after `at_ns` (the
/// switch's clock), not counting frames held to the end of the run (counted
/// apart) or disconnects (whose own note covers them).
fn count_after(delivered: &[&Packet], at_ns: u64) -> u64 {
    delivered
        .iter()
        .filter(|p| p.ts_ns >= at_ns && !released_at_the_end(p) && !disconnect(p))
        .count() as u64
}

/// How many of `frames` the switch carried before every endpoint had read its
/// counters' baseline (the recording starts first): each may already be in a
/// baseline, or not. Disconnects are left to their own note.
fn before_baseline(frames: &[&Packet], o: &Evidence) -> u64 {
    let Some(at) = o.baseline_ns else { return 0 };
    frames.iter().filter(|p| p.ts_ns < at && !disconnect(p)).count() as u64
}

fn early_note(early: u64) -> String {
    format!("{early} crossed the wire before its counters' baseline was read, which may already count them")
}

/// A CM disconnect (DREQ, DREP) on QP1: sent as its QPs go away, it may cross
/// the wire after a device's counters were read.
fn disconnect(p: &Packet) -> bool {
    p.mad.as_deref().is_some_and(|m| m.contains("DREQ") || m.contains("DREP"))
}

/// How many of the datagrams `delivered` to an endpoint that set up `mine`
/// carry another Q_Key than the QP they are for: every device drops them.
fn wrong_qkey(mine: &EndpointFacts, delivered: &[&Packet]) -> u64 {
    let qkey_of = |qpn: u32| mine.qps.iter().find(|q| q.qpn == qpn).and_then(|q| q.qkey);
    let wrong =
        |p: &&&Packet| matches!((p.q_key, qkey_of(p.dest_qp)), (Some(k), Some(q)) if k != q);
    delivered.iter().filter(wrong).count() as u64
}

/// A frame the switch held until the run was over (released before the delay
/// its rule asked for, as every held frame is at the end of a run): it reached
/// its device after the device's QPs were gone.
fn released_at_the_end(p: &Packet) -> bool {
    p.marks.held() && p.marks.arrived_ns_before().is_some_and(|ns| ns < p.marks.least_held_ns())
}

/// `[[expect.counters]]`: what a counter of `on`'s device moved by over the
/// scenario.
pub(crate) fn verdict(e: &CounterExpect, o: &Evidence) -> Verdict {
    let what = format!("counter {} on {}", e.counter, e.on);
    let want = match (e.min, e.max) {
        (Some(a), Some(b)) if a == b => format!("+{a}"),
        (Some(a), Some(b)) => format!("+{a} to +{b}"),
        (Some(a), None) => format!("at least +{a}"),
        (None, Some(b)) => format!("at most +{b}"),
        (None, None) => "any".to_string(),
    };
    let read = o.counters.get(&e.on);
    let by_meaning = Meaning::ALL.into_iter().find(|m| m.name() == e.counter);
    // A meaning is read by the driver's own name for it.
    let table_name = by_meaning.zip(read).and_then(|(m, c)| counter_for(driver(c)?, m));
    let what = match table_name {
        Some(name) => format!("counter {} ({name}) on {}", e.counter, e.on),
        None => what,
    };
    let got = match read {
        None if o.error.is_some() => Err("not read: the run stopped before its teardown".into()),
        None => Err(format!(
            "not read: {}'s agent read no counters (a device without them, or a scenario run side by side with others)",
            e.on
        )),
        Some(c) => match (by_meaning, table_name) {
            (_, Some(name)) => named(c, name),
            (Some(m), None) => Err(format!(
                "{} has no counter the table knows for {} ({})",
                c.device,
                m.describe(),
                driver(c).map_or("a driver the table does not know".to_string(), |d| format!("driver {d}"))
            )),
            (None, None) => named(c, &e.counter),
        },
    };
    match got {
        Ok(d) => {
            let pass = e.min.is_none_or(|a| d >= a) && e.max.is_none_or(|b| d <= b);
            Verdict::new(VerdictKind::Counter, what, pass, want, format!("+{d}"))
        }
        Err(why) => Verdict::new(VerdictKind::Counter, what, false, want, why),
    }
}

/// What counter `name` of `c` moved by, or why it cannot say.
fn named(c: &CounterDeltas, name: &str) -> Result<u64, String> {
    match c.deltas.get(name) {
        Some(&d) => Ok(d),
        None if c.reset.iter().any(|r| r == name) => Err("it went backwards: reset".into()),
        None => {
            let known: Vec<&str> = c.deltas.keys().map(String::as_str).collect();
            let hint = dissector::text::did_you_mean(name, known.iter().copied())
                .map(|m| format!("; did you mean `{m}`?"))
                .unwrap_or_default();
            Err(format!("{} has no counter `{name}`{hint}", c.device))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drivers_by_module_else_by_the_kernels_device_names() {
        let d = |device: &str, module: Option<&str>| {
            driver(&CounterDeltas {
                device: device.into(),
                driver: module.map(str::to_string),
                port: 1,
                deltas: BTreeMap::new(),
                reset: vec![],
            })
        };
        assert_eq!(d("rxe0", None), Some("rxe"));
        assert_eq!(d("rxe12", None), Some("rxe"));
        assert_eq!(d("mlx5_0", None), Some("mlx5"));
        assert_eq!(d("mlx5_bond_0", None), Some("mlx5"), "a bonded port");
        assert_eq!(d("rocep1s0f0", Some("mlx5_core")), Some("mlx5"), "renamed by udev");
        assert_eq!(d("rocep1s0f0", Some("bnxt_en")), Some("bnxt_re"));
        assert_eq!(d("rocep1s0f0", None), None);
        assert_eq!(d("rxe", None), None);
        assert_eq!(d("my_rdma", Some("something_else")), None);
        assert_eq!(meaning("rxe", "sent_pkts"), Some(Meaning::Sent));
        assert_eq!(meaning("mlx5", "sent_pkts"), None);
        assert_eq!(meaning("rxe", "lifespan"), None);
    }
}
