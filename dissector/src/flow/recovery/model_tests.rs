//! The go-back-N judge against a model whose truth is known: an RC requester doing
//! go-back-N (rxe's way) through a lossy lab switch to an rxe-like responder, with
//! the capture taken at the switch as the lab takes it, marks included. Random
//! fault schedules on the requester's frames (and lost responses). The judge must
//! put the requests back in the order the requester sent them, however long the
//! switch held one; a correct requester must never be judged broken, and a faulty
//! one (resending past the NAK'd PSN, or skipping a PSN in a resend run) must
//! always be, at the frame that did it — unless the capture fits a correct
//! requester as well (the two cases are in the test).
//!
//! Owns: tests only. Imports: its parent; the wire vocabulary; proptest.

use std::collections::{BTreeMap, VecDeque};

use proptest::prelude::*;

use super::*;
use crate::wire::Syndrome;

/// One tick of model time, in ns (frames go out at most one a tick). The switch's
/// clock reads a ns later each time within a tick, as a real one moves on
/// between two frames: no two records share a timestamp.
const TICK_NS: u64 = 10_000;
/// How long a `reorder` rule holds a frame if no other frame comes to pass it
/// (the lab's default: 100 ms, against the ACK timer's 537 ms in the fault
/// streams): a third of the shortest ACK timer here.
const REORDER_TICKS: u64 = 20;
/// The model runs this long at most; every exchange ends long before.
const MAX_TICKS: u64 = 200_000;

/// One thing the lab switch did to a frame: `lab::mark::Mark`, reduced to what the
/// judge reads (dissector does not depend on lab), with its flags as
/// `lab::mark::Marks` computes them.
#[derive(Debug, Clone, PartialEq)]
enum Mark {
    /// `dropped by rule N …: not delivered`: recorded when it arrived, never handed
    /// on.
    Dropped,
    /// `delayed MS ms by rule N …`: recorded when it left.
    Delayed,
    /// `reordered by rule N …: held behind the next frame`: recorded when it left.
    Reordered,
    /// `arrived MS ms before it was recorded`: on every held frame, when it left.
    Arrived { ns_before: u64 },
    /// `ICRC inverted by rule N …`: handed on, and dropped by the receiver.
    IcrcInverted,
    /// `duplicate K of N (…)`: a copy the switch made, with what it did to the
    /// original.
    Duplicate { original: Vec<Mark> },
}

/// `Marks::dropped`.
fn dropped(m: &[Mark]) -> bool {
    m.iter().any(|m| matches!(m, Mark::Dropped))
}

/// `Marks::held`: delayed or reordered, the original's marks on a copy included.
fn held(m: &[Mark]) -> bool {
    let h = |m: &Mark| matches!(m, Mark::Delayed | Mark::Reordered);
    m.iter().any(|m| h(m) || matches!(m, Mark::Duplicate { original } if original.iter().any(h)))
}

/// `Marks::injected`: a copy the switch made.
fn injected(m: &[Mark]) -> bool {
    m.iter().any(|m| matches!(m, Mark::Duplicate { .. }))
}

/// `Marks::arrived_ns_before`: the frame's own mark (a copy never arrived).
fn arrived_ns_before(m: &[Mark]) -> Option<u64> {
    m.iter().find_map(|m| match m {
        Mark::Arrived { ns_before } => Some(*ns_before),
        _ => None,
    })
}

/// The ICRC the receiver checks is bad (the copy of a corrupted frame too).
fn bad_icrc(m: &[Mark]) -> bool {
    m.iter().any(|m| {
        matches!(m, Mark::IcrcInverted)
            || matches!(m, Mark::Duplicate { original } if original.contains(&Mark::IcrcInverted))
    })
}

/// What the switch's rules do to one frame.
#[derive(Clone, Copy, Default, PartialEq)]
struct Fault {
    drop: bool,
    corrupt: bool,
    dups: u32,
    /// `delay`: ticks held.
    delay: u64,
    /// `reorder`: held until the next frame in its direction has passed.
    reorder: bool,
}

/// `-` for none, else what the rules do: `drop`, `bad`, `dup2`, `delay7`, `reorder`.
impl std::fmt::Debug for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut w = Vec::new();
        if self.drop {
            w.push("drop".to_string());
        }
        if self.corrupt {
            w.push("bad".to_string());
        }
        if self.dups > 0 {
            w.push(format!("dup{}", self.dups));
        }
        if self.delay > 0 {
            w.push(format!("delay{}", self.delay));
        }
        if self.reorder {
            w.push("reorder".to_string());
        }
        f.write_str(&if w.is_empty() { "-".to_string() } else { w.join("+") })
    }
}

/// How the requester goes wrong, once, on the first NAK PSN Sequence Error it
/// acts on from its `nth` on where it can.
#[derive(Debug, Clone, Copy)]
enum Faulty {
    /// Resends from `by` PSNs past the NAK'd one.
    PastNak { nth: usize, by: u32 },
    /// Resends from the NAK'd PSN, but skips the one `after` PSNs on.
    Skip { nth: usize, after: u32 },
}

#[derive(Debug, Clone)]
struct Exchange {
    first_psn: u32,
    /// Packets per WRITE message (Only, or First, Middle…, Last).
    messages: Vec<u32>,
    window: u32,
    /// Ticks from the requester to the switch, and from the switch to the
    /// responder (each way).
    lat_a: u64,
    lat_b: u64,
    /// The requester's ACK timer, in ticks.
    timeout: u64,
    /// For the requester's transmissions in the order it makes them.
    req_faults: Vec<Fault>,
    /// For the responder's responses: lost on the way back.
    resp_drops: Vec<bool>,
    faulty: Option<Faulty>,
}

/// One frame in the capture.
#[derive(Debug, Clone)]
struct Rec {
    ts_ns: u64,
    psn: Psn,
    /// For responses.
    ack: Option<AckKind>,
    marks: Vec<Mark>,
    /// For requests: which of the requester's transmissions it is.
    sent: usize,
    /// How many frames the capture held when it reached the switch.
    recorded_before: usize,
}

#[derive(Debug, Clone)]
enum Ev {
    /// The requester's transmission `sent` reaches the switch.
    ReqAtSwitch {
        sent: usize,
        psn: Psn,
        ack_req: bool,
    },
    ReqAtResponder {
        psn: Psn,
        ack_req: bool,
    },
    RespAtSwitch {
        psn: Psn,
        ack: AckKind,
    },
    RespAtRequester {
        psn: Psn,
        ack: AckKind,
    },
}

/// A frame the switch holds back.
struct Held {
    /// When it arrived, by the switch's clock.
    arrived_ns: u64,
    due: u64,
    behind_next: bool,
    rec: Rec,
    dups: u32,
    ack_req: bool,
}

/// The violation the faulty requester committed: the transmission that did it,
/// the PSNs it left out (not yet acknowledged when it went), and the NAK'd PSN.
#[derive(Debug, Clone, Copy)]
struct Committed {
    sent: usize,
    skipped_from: Psn,
    skipped_to: Psn,
    nak_psn: Psn,
}

struct Model<'a> {
    x: &'a Exchange,
    t: u64,
    seq: u64,
    events: BTreeMap<(u64, u64), Ev>,
    capture: Vec<Rec>,
    held: VecDeque<Held>,
    resps_seen: usize,
    /// The switch's clock: the tick it last read, and how many times within it.
    clock: (u64, u64),
    // Requester.
    total: u32,
    una: u32,
    next: u32,
    sent_hi: u32,
    deadline: Option<u64>,
    sent: usize,
    naks_acted: usize,
    /// The wrong step decided on a NAK: when `next` comes to the first, it goes
    /// on from the second instead, leaving out PSNs from .. to, the NAK'd PSN's.
    /// Another go-back before then calls it off.
    pending: Option<(u32, u32, Psn, Psn, Psn)>,
    committed: Option<Committed>,
    // Responder.
    epsn: Psn,
    nak_sent: bool,
}

impl<'a> Model<'a> {
    fn new(x: &'a Exchange) -> Self {
        Model {
            x,
            t: 0,
            seq: 0,
            events: BTreeMap::new(),
            capture: Vec::new(),
            held: VecDeque::new(),
            resps_seen: 0,
            clock: (0, 0),
            total: x.messages.iter().sum(),
            una: 0,
            next: 0,
            sent_hi: 0,
            deadline: None,
            sent: 0,
            naks_acted: 0,
            pending: None,
            committed: None,
            epsn: Psn::new(x.first_psn),
            nak_sent: false,
        }
    }

    fn psn(&self, k: u32) -> Psn {
        Psn::new(self.x.first_psn).add(k)
    }

    fn index(&self, p: Psn) -> u32 {
        p.diff(Psn::new(self.x.first_psn)) as u32
    }

    /// The requester asks for an ACK on the last packet of each message (rxe).
    fn ack_req(&self, k: u32) -> bool {
        let mut end = 0;
        for &n in &self.x.messages {
            end += n;
            if k + 1 == end {
                return true;
            }
            if k < end {
                return false;
            }
        }
        false
    }

    fn at(&mut self, t: u64, e: Ev) {
        self.seq += 1;
        self.events.insert((t, self.seq), e);
    }

    /// The switch's clock, in ns.
    fn now(&mut self) -> u64 {
        if self.clock.0 != self.t {
            self.clock = (self.t, 0);
        }
        self.clock.1 += 1;
        self.t * TICK_NS + self.clock.1
    }

    fn record(&mut self, rec: Rec) {
        self.capture.push(rec);
    }

    /// The switch hands a frame on (and its copies), recording each as it leaves:
    /// the frame at `rec.ts_ns`, its copies as they are made.
    fn deliver(&mut self, rec: Rec, dups: u32, ack_req: bool) {
        for k in 0..=dups {
            let r = if k == 0 {
                rec.clone()
            } else {
                let marks = vec![Mark::Duplicate { original: rec.marks.clone() }];
                Rec { marks, ts_ns: self.now(), ..rec.clone() }
            };
            let bad = bad_icrc(&r.marks);
            let (psn, ack) = (r.psn, r.ack);
            self.record(r);
            if bad {
                continue; // the receiver drops it: bad ICRC
            }
            match ack {
                None => self.at(self.t + self.x.lat_b, Ev::ReqAtResponder { psn, ack_req }),
                Some(ack) => self.at(self.t + self.x.lat_a, Ev::RespAtRequester { psn, ack }),
            }
        }
    }

    /// A held frame goes on, marked with when it arrived (`lab::switch`'s
    /// `release`).
    fn release(&mut self, h: Held) {
        let ts_ns = self.now();
        let mut marks = h.rec.marks;
        marks.push(Mark::Arrived { ns_before: ts_ns - h.arrived_ns });
        self.deliver(Rec { ts_ns, marks, ..h.rec }, h.dups, h.ack_req);
    }

    /// Held frames of this direction go out behind the one that just passed.
    fn release_reordered(&mut self, request: bool) {
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].behind_next && self.held[i].rec.ack.is_none() == request {
                let h = self.held.remove(i).expect("in range");
                self.release(h);
            } else {
                i += 1;
            }
        }
    }

    fn release_due(&mut self) {
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].due <= self.t {
                let h = self.held.remove(i).expect("in range");
                self.release(h);
            } else {
                i += 1;
            }
        }
    }

    /// A frame reaches the switch: through the rules, as `lab::switch` does.
    fn ingress(&mut self, rec: Rec, f: Fault, ack_req: bool) {
        let request = rec.ack.is_none();
        let rec = Rec { ts_ns: self.now(), recorded_before: self.capture.len(), ..rec };
        if f.drop {
            self.record(Rec { marks: vec![Mark::Dropped], ..rec });
            return;
        }
        let mut marks = Vec::new();
        if f.corrupt {
            marks.push(Mark::IcrcInverted);
        }
        if f.delay > 0 {
            marks.push(Mark::Delayed);
        }
        if f.reorder {
            marks.push(Mark::Reordered);
        }
        let rec = Rec { marks, ..rec };
        if f.delay > 0 || f.reorder {
            let due = self.t + f.delay.max(if f.reorder { REORDER_TICKS } else { 0 });
            let arrived_ns = rec.ts_ns;
            let behind_next = f.reorder;
            self.held.push_back(Held { arrived_ns, due, behind_next, rec, dups: f.dups, ack_req });
        } else {
            self.deliver(rec, f.dups, ack_req);
            self.release_reordered(request);
        }
    }

    fn respond(&mut self, psn: Psn, syndrome: u8) {
        let ack = Syndrome(syndrome).kind();
        self.at(self.t + self.x.lat_b, Ev::RespAtSwitch { psn, ack });
    }

    /// rxe's responder: a PSN ahead draws one NAK PSN Sequence Error until the
    /// expected one comes; a duplicate is ACKed again (its last in-order PSN);
    /// the expected one is taken, and ACKed if it asks.
    fn responder(&mut self, psn: Psn, ack_req: bool) {
        let d = psn.diff(self.epsn);
        if d > 0 {
            if !self.nak_sent {
                self.nak_sent = true;
                self.respond(self.epsn, 0x60);
            }
        } else if d < 0 {
            self.respond(self.epsn.add(Psn::MASK), 0x1f);
        } else {
            self.nak_sent = false;
            self.epsn = self.epsn.add(1);
            if ack_req {
                self.respond(psn, 0x1f);
            }
        }
    }

    /// Goes back to `k` after a NAK of it: right, or (once) wrong.
    fn go_back_after_nak(&mut self, k: u32) {
        self.next = k;
        self.pending = None;
        if self.committed.is_some() || self.x.faulty.is_none() {
            return;
        }
        self.naks_acted += 1;
        let nak_psn = self.psn(k);
        match self.x.faulty {
            Some(Faulty::PastNak { nth, by })
                if self.naks_acted > nth && k + by < self.sent_hi && by < self.x.window =>
            {
                self.next = k + by;
                let (from, to) = (nak_psn, self.psn(k + by - 1));
                self.pending = Some((k + by, k + by, from, to, nak_psn));
            }
            Some(Faulty::Skip { nth, after })
                if self.naks_acted > nth && k + after + 1 < self.sent_hi =>
            {
                let s = self.psn(k + after);
                self.pending = Some((k + after, k + after + 1, s, s, nak_psn));
            }
            _ => {}
        }
    }

    fn requester_hears(&mut self, psn: Psn, ack: AckKind) {
        let k = self.index(psn);
        match ack {
            AckKind::Ack { .. } => {
                if k + 1 > self.una && k < self.total {
                    self.una = k + 1;
                    self.next = self.next.max(self.una);
                    self.deadline = Some(self.t + self.x.timeout);
                }
            }
            AckKind::Nak(NakCode::PsnSequenceError) => {
                // A NAK behind what it already knows is stale (rxe ignores it).
                if k >= self.una && k < self.total {
                    self.una = k;
                    self.deadline = Some(self.t + self.x.timeout);
                    self.go_back_after_nak(k);
                }
            }
            _ => unreachable!("the model's responder sends ACKs and sequence NAKs"),
        }
    }

    fn requester_acts(&mut self) {
        if self.una < self.next && self.deadline.is_some_and(|d| self.t >= d) {
            // The ACK timer: back to the oldest PSN not acknowledged.
            self.next = self.una;
            self.pending = None;
            self.deadline = Some(self.t + self.x.timeout);
        }
        if self.next >= self.total || self.next - self.una >= self.x.window {
            return;
        }
        // The wrong step, once it is taken: the skip, and the transmission that
        // shows it.
        if let Some((at, then, from, to, nak_psn)) = self.pending {
            if self.next == at {
                self.pending = None;
                self.next = then;
                self.committed = Some(Committed {
                    sent: self.sent,
                    skipped_from: from,
                    skipped_to: to,
                    nak_psn,
                });
            }
        }
        let k = self.next;
        let (psn, ack_req) = (self.psn(k), self.ack_req(k));
        if self.una == self.next || self.deadline.is_none() {
            self.deadline = Some(self.t + self.x.timeout);
        }
        self.at(self.t + self.x.lat_a, Ev::ReqAtSwitch { sent: self.sent, psn, ack_req });
        self.sent += 1;
        self.next += 1;
        self.sent_hi = self.sent_hi.max(self.next);
    }

    fn drain(&mut self) {
        while let Some(entry) = self.events.first_entry() {
            if entry.key().0 > self.t {
                break;
            }
            match entry.remove() {
                Ev::ReqAtSwitch { sent, psn, ack_req } => {
                    let f = self.x.req_faults.get(sent).copied().unwrap_or_default();
                    let rec = Rec {
                        ts_ns: 0,
                        psn,
                        ack: None,
                        marks: Vec::new(),
                        sent,
                        recorded_before: 0,
                    };
                    self.ingress(rec, f, ack_req);
                }
                Ev::ReqAtResponder { psn, ack_req } => self.responder(psn, ack_req),
                Ev::RespAtSwitch { psn, ack } => {
                    let drop = self.x.resp_drops.get(self.resps_seen).copied().unwrap_or(false);
                    self.resps_seen += 1;
                    let f = Fault { drop, ..Fault::default() };
                    let rec = Rec {
                        ts_ns: 0,
                        psn,
                        ack: Some(ack),
                        marks: Vec::new(),
                        sent: 0,
                        recorded_before: 0,
                    };
                    self.ingress(rec, f, false);
                }
                Ev::RespAtRequester { psn, ack } => self.requester_hears(psn, ack),
            }
        }
    }

    /// Runs the exchange to its end: every PSN acknowledged, nothing in flight.
    fn run(mut self) -> Self {
        while self.una < self.total || !self.events.is_empty() || !self.held.is_empty() {
            assert!(self.t < MAX_TICKS, "the model never finished: {:?}", self.x);
            self.release_due();
            self.drain();
            self.requester_acts();
            self.drain();
            self.t += 1;
        }
        self
    }
}

/// The capture, a line a frame, for a failing case.
fn show(capture: &[Rec]) -> String {
    let mut out = String::new();
    for (i, r) in capture.iter().enumerate() {
        let what = match r.ack {
            None => format!("req #{:<3}", r.sent),
            Some(AckKind::Ack { .. }) => "ACK     ".to_string(),
            Some(_) => "NAK     ".to_string(),
        };
        out += &format!(
            "{:>4} {:>6} {what} {:>8} {:?}\n",
            i + 1,
            r.ts_ns / TICK_NS,
            r.psn.value(),
            r.marks
        );
    }
    out
}

/// The capture as the harness hands it to the judge (`roce::judge::pair` and
/// `Packet::recovery`): frames numbered in capture order, the switch's copies
/// left out, delivered unless dropped or its ICRC bad, held (delayed or reordered)
/// for as long as its `arrived` mark says.
fn packets(capture: &[Rec]) -> (Vec<Packet>, Vec<Packet>) {
    let (mut reqs, mut resps) = (Vec::new(), Vec::new());
    for (i, r) in capture.iter().enumerate() {
        if injected(&r.marks) {
            continue;
        }
        let p = Packet {
            number: i as u64 + 1,
            ts_ns: r.ts_ns,
            psn: r.psn,
            delivered: !dropped(&r.marks) && !bad_icrc(&r.marks),
            held_ns: if held(&r.marks) { arrived_ns_before(&r.marks).unwrap_or(0) } else { 0 },
            ack: r.ack,
        };
        if r.ack.is_none() {
            reqs.push(p);
        } else {
            resps.push(p);
        }
    }
    (reqs, resps)
}

fn fault() -> impl Strategy<Value = Fault> {
    let none = Fault::default();
    prop_oneof![
        24 => Just(none),
        2 => Just(Fault { drop: true, ..none }),
        2 => Just(Fault { corrupt: true, ..none }),
        2 => (1u32..=2).prop_map(move |dups| Fault { dups, ..none }),
        2 => Just(Fault { reorder: true, ..none }),
        2 => (1u64..=40).prop_map(move |delay| Fault { delay, ..none }),
        // Several rules on one frame, as the lab's rules stack.
        1 => (any::<bool>(), 0u32..=1, prop_oneof![Just(0u64), 1u64..=40], any::<bool>()).prop_map(
            |(corrupt, dups, delay, reorder)| Fault { drop: false, corrupt, dups, delay, reorder }
        ),
    ]
}

fn exchange() -> impl Strategy<Value = Exchange> {
    (
        prop_oneof![Just(0u32), Just(0xff_fff0), 0u32..=Psn::MASK],
        prop::collection::vec(prop_oneof![3 => Just(1u32), 2 => 2u32..=4], 1..=10),
        2u32..=8,
        (0u64..=2, 0u64..=3),
        60u64..=150,
        prop::collection::vec(fault(), 0..=60),
        prop::collection::vec(prop::bool::weighted(0.08), 0..=30),
        prop_oneof![
            2 => Just(None),
            1 => (0usize..=2, 1u32..=3).prop_map(|(nth, by)| Some(Faulty::PastNak { nth, by })),
            1 => (0usize..=2, 1u32..=3).prop_map(|(nth, after)| Some(Faulty::Skip { nth, after })),
        ],
    )
        .prop_map(
            |(
                first_psn,
                messages,
                window,
                (lat_a, lat_b),
                timeout,
                req_faults,
                resp_drops,
                faulty,
            )| Exchange {
                first_psn,
                messages,
                window,
                lat_a,
                lat_b,
                timeout,
                req_faults,
                resp_drops,
                faulty,
            },
        )
}

/// Cases a run (each a whole exchange through the model, and the judge on it).
const CASES: u32 = 4096;

/// [`CASES`] cases unless `PROPTEST_CASES` asks for more (or fewer).
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(CASES)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn the_judge_reports_exactly_the_violations_the_requester_committed(x in exchange()) {
        let m = Model::new(&x).run();
        let (reqs, resps) = packets(&m.capture);
        let rec = |s: &Sent| &m.capture[s.p.number as usize - 1];
        // The judge takes the requests back to the order the requester sent them
        // in, each after exactly the responses recorded before it reached the switch.
        let order = send_order(&reqs, &resps);
        let sent: Vec<usize> = order.iter().map(|s| rec(s).sent).collect();
        prop_assert!(
            sent.windows(2).all(|w| w[0] < w[1]),
            "not the requester's order: {sent:?}\n{}",
            show(&m.capture)
        );
        for s in &order {
            let before = rec(s).recorded_before as u64;
            prop_assert!(
                resps.iter().all(|r| (r.number < s.heard_below) == (r.number <= before)),
                "frame {} arrived after frame {before}, taken as before {}\n{}",
                s.p.number,
                s.heard_below,
                show(&m.capture)
            );
        }
        let g = go_back_n(&reqs, &resps);
        match m.committed {
            None => prop_assert!(
                g.violations.is_empty(),
                "a correct requester judged broken: {:?}\n{}",
                g.violations,
                show(&m.capture)
            ),
            Some(c) => {
                let at = order.iter().position(|s| rec(s).sent == c.sent);
                let at = at.expect("it went out");
                let x = rec(&order[at]);
                // Only what was still unacknowledged when it went is skipped: a PSN
                // an ACK had covered by then (one the NAK's PSN drew late, say)
                // may be left out. The capture point hears every response before
                // the requester does, so the responses recorded before the frame
                // reached it say what the requester may have known.
                let acked = resps
                    .iter()
                    .filter(|r| r.delivered && r.number <= x.recorded_before as u64)
                    .filter_map(acknowledges)
                    .reduce(|a, b| if b.after(a) { b } else { a });
                // Nor is a resend that goes on from the transmission just before it
                // (its PSN less one): the capture fits the run that one belongs to,
                // going on before the NAK reached the requester.
                let goes_on = at > 0 && order[at - 1].p.psn.add(1) == x.psn;
                // The one it committed, at the frame that did it.
                let frame = order[at].p.number;
                let caught = g.violations.iter().any(|v| {
                    matches!(v, Violation::ResentPastNak { frame: f, .. }
                        | Violation::ResentPastUnacked { frame: f, .. } if *f == frame)
                });
                if acked.is_none_or(|a| c.skipped_to.after(a)) && !goes_on {
                    prop_assert!(
                        caught,
                                "a violation missed: PSN {} to {} skipped after a NAK of {} (frame {}): {:?}, {c:?}\n{}",
                        c.skipped_from,
                        c.skipped_to,
                        c.nak_psn,
                        frame,
                        g.violations,
                        show(&m.capture)
                    );
                }
            }
        }
    }
}
