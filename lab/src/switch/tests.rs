//! The switch over real 127.0.0.1 UDP sockets, with synthetic RoCE frames
//! standing in for the VMs.
use std::net::UdpSocket;
use std::path::Path;

use super::*;
use crate::fault::parse_rule;
use crate::record::{read_capture, PcapngRecorder};
use crate::switch::veth::Netns;
use dissector::craft::{build, Encap, Host, Transport};
use dissector::wire::ethernet::Mac;
use dissector::wire::{ipv4, BthRepr, Opcode, Psn};

struct Rig {
    vm_a: UdpSocket,
    vm_b: UdpSocket,
    switch: Switch,
    dir: PathBuf,
    /// The run `begin` started.
    run: std::cell::Cell<RunId>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn rig(tag: &str) -> Rig {
    let w = Wire::new().unwrap();
    let switch = Switch::spawn(&w).unwrap();
    for s in [&w.vm_a, &w.vm_b] {
        s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    }
    let dir = std::env::temp_dir().join(format!("roce-switch-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    Rig { vm_a: w.vm_a, vm_b: w.vm_b, switch, dir, run: std::cell::Cell::new(0) }
}

fn host(last: u8) -> Host {
    Host {
        mac: Mac([0x52, 0x54, 0, 0, 0, last]),
        ip: std::net::Ipv4Addr::new(10, 0, 0, last).into(),
    }
}

/// A RoCEv2 frame from a (10.0.0.1) to b, or from b to a.
fn roce(dir: Dir, op: u8, qp: u32, psn: u32, payload: &[u8]) -> Vec<u8> {
    let (src, dst) = match dir {
        Dir::AtoB => (host(1), host(2)),
        Dir::BtoA => (host(2), host(1)),
    };
    let t = Transport {
        bth: BthRepr {
            opcode: Opcode(op),
            p_key: 0xffff,
            dest_qp: qp,
            psn: Psn::new(psn),
            ..Default::default()
        },
        payload: payload.to_vec(),
        ..Default::default()
    };
    build(&Encap::default(), &src, &dst, &t)
}

fn icrc_ok(frame: &[u8]) -> bool {
    let f = frame::decode(LinkType::ETHERNET, frame, &frame::Options::default());
    f.icrc_check(frame).expect("a RoCE frame with ICRC").ok()
}

fn ipv4_ok(frame: &[u8]) -> bool {
    ipv4::Packet::new_unchecked(&frame[14..]).verify_checksum()
}

impl Rig {
    fn send(&self, dir: Dir, frame: &[u8]) {
        match dir {
            Dir::AtoB => self.vm_a.send(frame).unwrap(),
            Dir::BtoA => self.vm_b.send(frame).unwrap(),
        };
    }
    /// Everything that reaches the receiver of `dir` until 300 ms of quiet.
    fn received(&self, dir: Dir) -> Vec<Vec<u8>> {
        let s = match dir {
            Dir::AtoB => &self.vm_b,
            Dir::BtoA => &self.vm_a,
        };
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = s.recv(&mut buf) {
            out.push(buf[..n].to_vec());
        }
        out
    }
    fn begin(&self, rules: &[&str], seed: u64, capture: bool) -> PathBuf {
        let (run, path) = begin_run(&self.switch, &self.dir, rules, seed, capture);
        self.run.set(run);
        path
    }
    fn end(&self) -> Result<RunReport> {
        self.switch.end(self.run.get())
    }
}

/// Begins a run of `switch` with `rules`, recording (with `capture`) to
/// `dir/cap.pcapng`: the run and where it records.
fn begin_run(
    switch: &Switch,
    dir: &Path,
    rules: &[&str],
    seed: u64,
    capture: bool,
) -> (RunId, PathBuf) {
    let path = dir.join("cap.pcapng");
    let recorder: Option<Box<dyn Recorder>> =
        capture.then(|| Box::new(PcapngRecorder::create(&path).unwrap()) as Box<dyn Recorder>);
    let rules = rules.iter().map(|r| parse_rule(r).unwrap()).collect();
    let run = switch
        .begin(RunSpec {
            rules,
            seed,
            recorder,
            capture: capture.then(|| path.clone()),
            live: None,
            claim: None,
            standing: Default::default(),
        })
        .unwrap();
    (run, path)
}

#[test]
fn forwards_both_ways_and_counts() {
    let r = rig("fwd");
    let f1 = roce(Dir::AtoB, 0x04, 0x11, 1, b"ping");
    let f2 = roce(Dir::BtoA, 0x11, 0x12, 1, b"");
    let arp = vec![0xffu8; 42];
    r.send(Dir::AtoB, &f1);
    r.send(Dir::AtoB, &arp);
    r.send(Dir::BtoA, &f2);
    assert_eq!(r.received(Dir::AtoB), vec![f1.clone(), arp]);
    assert_eq!(r.received(Dir::BtoA), vec![f2]);
    let (total, runs) = r.switch.stats().unwrap();
    assert!(runs.is_empty());
    assert_eq!((total.from_a, total.from_b, total.roce, total.forwarded), (2, 1, 2, 3));
    assert!(total.balanced());
}

#[test]
fn records_each_sender_on_its_interface_and_proves_completeness() {
    let r = rig("rec");
    let path = r.begin(&[], 1, true);
    // Each frame carries its own number: the switch reads its two sockets in turn, so
    // frames sent 2 ms apart into different sockets may be read (and recorded) in either
    // order when the switch thread runs late; only each sender's own order is promised.
    let frames: Vec<(Dir, Vec<u8>)> = (0u8..10)
        .map(|i| (if i % 3 == 0 { Dir::BtoA } else { Dir::AtoB }, i))
        .map(|(d, i)| (d, roce(d, 0x04, 0x11, 0, &[i])))
        .collect();
    for (d, f) in &frames {
        r.send(*d, f);
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(r.received(Dir::AtoB).len() + r.received(Dir::BtoA).len(), 10);
    let rep = r.end().unwrap();
    assert!(rep.counters.capture_complete() && rep.counters.balanced(), "{:?}", rep.counters);
    assert_eq!(rep.counters.recorded, 10);
    assert_eq!(rep.capture.as_deref(), Some(path.to_str().unwrap()));
    let (names, pkts) = read_capture(&path).unwrap();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(pkts.len(), 10);
    for d in [Dir::AtoB, Dir::BtoA] {
        let sent: Vec<&Vec<u8>> = frames.iter().filter(|(x, _)| *x == d).map(|(_, f)| f).collect();
        let recorded: Vec<&Vec<u8>> =
            pkts.iter().filter(|p| p.interface as usize == d.index()).map(|p| &p.data).collect();
        assert_eq!(recorded, sent, "{d:?}: each frame on its sender's interface, in its order");
    }
    assert!(pkts.iter().all(|p| p.comment.is_none()));
    assert!(pkts.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
    // A second run may start once the first ended; ending twice is an error.
    assert!(r.end().is_err());
    r.begin(&[], 1, false);
    assert!(r
        .switch
        .begin(RunSpec {
            rules: vec![],
            seed: 1,
            recorder: None,
            capture: None,
            live: None,
            claim: None,
            standing: Default::default(),
        })
        .is_err());
}

#[test]
fn live_stream_carries_what_the_capture_holds_and_never_blocks_the_wire() {
    let r = rig("live");
    let path = r.dir.join("cap.pcapng");
    let recorder: Option<Box<dyn Recorder>> =
        Some(Box::new(PcapngRecorder::create(&path).unwrap()));
    // Room for 3 frames: the 4th and 5th are skipped for the viewer, not for the wire.
    let (tx, rx) = mpsc::sync_channel(3);
    let rules = vec![parse_rule("drop dir=a>b psn=2").unwrap()];
    r.run.set(
        r.switch
            .begin(RunSpec {
                rules,
                seed: 1,
                recorder,
                capture: Some(path.clone()),
                live: Some(tx),
                claim: None,
                standing: Default::default(),
            })
            .unwrap(),
    );
    let frames: Vec<Vec<u8>> = (1..=5).map(|psn| roce(Dir::AtoB, 0x04, 0x11, psn, b"x")).collect();
    for f in &frames {
        r.send(Dir::AtoB, f);
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(r.received(Dir::AtoB).len(), 4, "every frame but the dropped one is delivered");
    let rep = r.end().unwrap();
    assert_eq!((rep.counters.recorded, rep.live_skipped), (5, 2));
    let live: Vec<WireFrame> = rx.try_iter().collect();
    let (_, pkts) = read_capture(&path).unwrap();
    assert_eq!(live.len(), 3);
    for (w, p) in live.iter().zip(&pkts) {
        assert_eq!(
            (w.sender, w.ts_ns, &w.data, &w.comment),
            (Dir::AtoB, p.ts_ns, &p.data, &p.comment)
        );
    }
    assert!(
        live[1].comment.as_deref().is_some_and(|c| c.contains("dropped by rule 1")),
        "{:?}",
        live[1].comment
    );
}

#[test]
fn drop_the_nth_transmission_of_a_psn() {
    let r = rig("nth");
    let path = r.begin(&["drop dir=a>b qp=0x11 psn=4 nth=2"], 1, true);
    let p4 = roce(Dir::AtoB, 0x04, 0x11, 4, b"data");
    let other_qp = roce(Dir::AtoB, 0x04, 0x12, 4, b"data");
    let reverse = roce(Dir::BtoA, 0x04, 0x11, 4, b"data");
    r.send(Dir::AtoB, &p4); // 1st transmission: passes
    r.send(Dir::AtoB, &other_qp); // other QP: not counted
    r.send(Dir::BtoA, &reverse); // other direction: not counted
    r.send(Dir::AtoB, &p4); // 2nd transmission (the retransmission): dropped
    r.send(Dir::AtoB, &p4); // 3rd: passes
    assert_eq!(r.received(Dir::AtoB), vec![p4.clone(), other_qp, p4.clone()]);
    assert_eq!(r.received(Dir::BtoA), vec![reverse.clone()]);
    let rep = r.end().unwrap();
    assert_eq!((rep.counters.dropped, rep.counters.forwarded), (1, 4));
    assert_eq!((rep.rules[0].matched, rep.rules[0].applied), (3, 1));
    assert!(rep.counters.capture_complete() && rep.counters.balanced());
    let (_, pkts) = read_capture(&path).unwrap();
    assert_eq!(pkts.len(), 5, "the dropped frame is recorded too");
    // In its sender's order, though the frames that went out were sent as a
    // batch after the burst they came in was decided.
    let from_a: Vec<bool> =
        pkts.iter().filter(|p| p.data != reverse).map(|p| p.comment.is_some()).collect();
    assert_eq!(from_a, [false, false, true, false]);
    let commented: Vec<&str> = pkts.iter().filter_map(|p| p.comment.as_deref()).collect();
    assert_eq!(commented.len(), 1, "{commented:?}");
    assert!(
        commented[0].contains("dropped by rule 1") && commented[0].contains("not delivered"),
        "{commented:?}"
    );
}

#[test]
fn corrupt_breaks_the_icrc_unless_asked_to_fix_it() {
    let r = rig("corrupt");
    r.begin(
        &[
            "corrupt psn=1 at=payload+2 xor=0x01",
            "corrupt psn=2 icrc=fix",
            "corrupt-icrc psn=3",
            "corrupt psn=4 at=ip+8",
        ],
        1,
        false,
    );
    let frames: Vec<Vec<u8>> =
        (1..=4).map(|psn| roce(Dir::AtoB, 0x04, 0x11, psn, b"abcdefgh")).collect();
    for f in &frames {
        assert!(icrc_ok(f));
        r.send(Dir::AtoB, f);
    }
    let got = r.received(Dir::AtoB);
    assert_eq!(got.len(), 4);
    let v = parse_roce(&frames[0], &frame::Options::default()).unwrap();
    // psn 1: one payload byte flipped, ICRC now wrong, IPv4 header untouched.
    assert_eq!(got[0][v.payload + 2], frames[0][v.payload + 2] ^ 0x01);
    assert_eq!(got[0].iter().zip(&frames[0]).filter(|(x, y)| x != y).count(), 1);
    assert!(!icrc_ok(&got[0]) && ipv4_ok(&got[0]));
    // psn 2: default corrupt (payload+0, xor 0xff), ICRC recomputed: accepted.
    assert_ne!(got[1], frames[1]);
    assert!(icrc_ok(&got[1]));
    // psn 3: only the ICRC differs.
    assert!(!icrc_ok(&got[2]));
    assert_eq!(got[2][..v.icrc.unwrap()], frames[2][..v.icrc.unwrap()]);
    // psn 4: the TTL changed, the IPv4 checksum was fixed (ICRC masks the TTL).
    assert_eq!(got[3][14 + 8], frames[3][14 + 8] ^ 0xff);
    assert!(ipv4_ok(&got[3]) && icrc_ok(&got[3]));
    let rep = r.end().unwrap();
    assert_eq!(rep.counters.modified, 4);
}

#[test]
fn ce_mark_keeps_the_icrc_valid() {
    let r = rig("ce");
    r.begin(&["ce op=write-only"], 1, false);
    let mut t = roce(Dir::AtoB, 0x0a, 0x11, 7, &[1; 16]);
    r.send(Dir::AtoB, &t);
    let other = roce(Dir::AtoB, 0x04, 0x11, 8, b"x");
    r.send(Dir::AtoB, &other);
    let got = r.received(Dir::AtoB);
    let f = frame::decode(LinkType::ETHERNET, &got[0], &frame::Options::default());
    assert_eq!(f.ecn(), Some(3));
    assert!(ipv4_ok(&got[0]) && icrc_ok(&got[0]));
    // Nothing else changed: TOS ECN bits and the header checksum only.
    t[15] |= 3;
    t[24..26].copy_from_slice(&got[0][24..26]);
    assert_eq!(got[0], t);
    assert_eq!(got[1], other);
    assert_eq!(r.end().unwrap().counters.modified, 1);
}

#[test]
fn dup_delay_and_reorder() {
    let r = rig("timing");
    let path = r.begin(&["dup psn=1 copies=2", "delay psn=2 ms=150", "reorder psn=4"], 1, true);
    let f: Vec<Vec<u8>> = (1..=5).map(|psn| roce(Dir::AtoB, 0x04, 0x11, psn, b"x")).collect();
    let t0 = Instant::now();
    for x in &f {
        r.send(Dir::AtoB, x);
        std::thread::sleep(Duration::from_millis(5));
    }
    let s = &r.vm_b;
    let mut order = Vec::new();
    let mut buf = vec![0u8; 2048];
    let mut delayed_at = None;
    while let Ok(n) = s.recv(&mut buf) {
        let psn = parse_roce(&buf[..n], &frame::Options::default()).unwrap().psn;
        if psn == 2 {
            delayed_at = Some(t0.elapsed());
        }
        order.push(psn);
    }
    // psn 1 three times; 4 held until 5 passed; 2 arrives last, ≥150 ms later.
    assert_eq!(order, [1, 1, 1, 3, 5, 4, 2]);
    assert!(delayed_at.unwrap() >= Duration::from_millis(150), "{delayed_at:?}");
    let rep = r.end().unwrap();
    let c = rep.counters;
    assert_eq!((c.duplicated, c.delayed, c.reordered, c.forwarded, c.recorded), (2, 1, 1, 7, 7));
    assert!(c.capture_complete() && c.balanced());
    let (_, pkts) = read_capture(&path).unwrap();
    let comments: Vec<&str> = pkts.iter().map(|p| p.comment.as_deref().unwrap_or("")).collect();
    assert!(
        comments[1].starts_with("duplicate 1 of 2") && comments[2].starts_with("duplicate 2 of 2"),
        "{comments:?}"
    );
    assert!(
        comments[5].contains("reordered by rule 3")
            && comments[6].contains("delayed 150 ms by rule 2"),
        "{comments:?}"
    );
    // Each held frame says when it arrived: taken back to then, the frames the
    // sender sent (the copies left out) are in its order again, 1 to 5.
    let marks: Vec<Marks> = comments.iter().map(|c| Marks::parse(c)).collect();
    assert!(marks[6].arrived_ns_before().is_some_and(|ns| ns >= 150_000_000), "{comments:?}");
    let mut sent: Vec<(u64, u32)> = pkts
        .iter()
        .zip(&marks)
        .filter(|(_, m)| !m.injected())
        .map(|(p, m)| {
            let arrived = p.ts_ns - m.arrived_ns_before().unwrap_or(0);
            (arrived, parse_roce(&p.data, &frame::Options::default()).unwrap().psn)
        })
        .collect();
    sent.sort();
    assert_eq!(sent.iter().map(|s| s.1).collect::<Vec<_>>(), [1, 2, 3, 4, 5], "{comments:?}");
}

/// What the faults guide says of several rules on one frame: copies leave with
/// their original when a hold releases it, copies are never judged (`nth` counts
/// arrivals), and a `drop` ends the list.
#[test]
fn copies_follow_their_held_original_and_are_never_judged() {
    let r = rig("dupheld");
    let rules = [
        "dup psn=1 copies=2",
        "delay psn=1 ms=120",
        // The 2nd frame with PSN 1 to *arrive*: the one sent later, never a copy.
        "corrupt psn=1 nth=2 at=payload+0 xor=0x01",
        "drop psn=3",
        "dup psn=3 copies=1",
    ];
    let path = r.begin(&rules, 1, true);
    let t0 = Instant::now();
    for (psn, payload) in [(1, b"a"), (2, b"b"), (1, b"c"), (3, b"d")] {
        r.send(Dir::AtoB, &roce(Dir::AtoB, 0x04, 0x11, psn, payload));
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(200));
    let got = r.received(Dir::AtoB);
    assert!(t0.elapsed() >= Duration::from_millis(120));
    let seen: Vec<(u32, u8)> = got
        .iter()
        .map(|f| {
            let v = parse_roce(f, &frame::Options::default()).unwrap();
            (v.psn, f[v.payload])
        })
        .collect();
    // PSN 2 first; each held PSN 1 leaves with its two copies right behind it;
    // only the second arrival was changed ('c' to 'b'), its copies with it; PSN 3
    // dropped, and with it the copy a later rule asked for.
    assert_eq!(
        seen,
        [(2, b'b'), (1, b'a'), (1, b'a'), (1, b'a'), (1, b'b'), (1, b'b'), (1, b'b')],
        "{seen:?}"
    );
    let rep = r.end().unwrap();
    assert_eq!((rep.counters.duplicated, rep.counters.dropped), (4, 1), "{:?}", rep.counters);
    let (_, pkts) = read_capture(&path).unwrap();
    let comments: Vec<&str> = pkts.iter().map(|p| p.comment.as_deref().unwrap_or("")).collect();
    assert!(
        comments.iter().any(|c| c.starts_with("duplicate 2 of 2 (delayed 120 ms by rule 2")),
        "{comments:?}"
    );
}

#[test]
fn a_run_ending_releases_held_frames() {
    let r = rig("held");
    r.begin(&["delay ms=5000"], 1, false);
    r.send(Dir::AtoB, &roce(Dir::AtoB, 0x04, 0x11, 1, b"x"));
    std::thread::sleep(Duration::from_millis(50));
    let rep = r.end().unwrap();
    assert_eq!(r.received(Dir::AtoB).len(), 1);
    assert!(rep.counters.balanced(), "{:?}", rep.counters);
}

fn dropped_psns(seed: u64) -> Vec<u32> {
    let r = rig(&format!("prob{seed}"));
    r.begin(&["drop prob=0.5"], seed, false);
    for psn in 0..200 {
        r.send(Dir::AtoB, &roce(Dir::AtoB, 0x04, 0x11, psn, b"x"));
    }
    let got: Vec<u32> = r
        .received(Dir::AtoB)
        .iter()
        .map(|f| parse_roce(f, &frame::Options::default()).unwrap().psn)
        .collect();
    let rep = r.end().unwrap();
    assert_eq!(rep.counters.dropped as usize, 200 - got.len());
    (0..200).filter(|p| !got.contains(p)).collect()
}

#[test]
fn seeded_probability_is_reproducible() {
    let a = dropped_psns(7);
    assert_eq!(a, dropped_psns(7));
    assert_ne!(a, dropped_psns(8));
    assert!((60..140).contains(&a.len()), "{} of 200 dropped at p=0.5", a.len());
}

/// One run as the daemon begins it for a scenario on a lab with the standing
/// rule `rule` (seeded from `lab_seed`): the run's own seed is the same every
/// time, as a scenario's is. One RoCE frame (PSN `psn`) goes a→b; the run's report.
fn one_frame_run(r: &Rig, rule: &Rule, lab_seed: u64, psn: u32) -> RunReport {
    let id = r
        .switch
        .begin(RunSpec {
            rules: vec![rule.clone()],
            seed: 1,
            recorder: None,
            capture: None,
            live: None,
            claim: None,
            standing: Standing { count: 1, seed: lab_seed },
        })
        .unwrap();
    r.send(Dir::AtoB, &roce(Dir::AtoB, 0x04, 0x11, psn, b"data"));
    let _ = r.received(Dir::AtoB);
    let rep = r.switch.end(id).unwrap();
    assert_eq!(rep.rules[0].matched, 1, "a run's report counts its own frames: {rep:?}");
    rep
}

/// The symptom, as the daemon drives the switch: a standing `prob=0.5`
/// rule, one run per scenario (or fuzz batch), each seeing one matching frame.
/// Seeded again in every run, the rule drew the same first number each time and
/// fired in none or all of them; its draws now go on from run to run.
#[test]
fn a_standing_probability_fires_at_its_rate_across_short_runs() {
    let r = rig("standing-prob");
    let rule = parse_rule("corrupt op=rc-send-only at=payload+0 xor=0x01 prob=0.5").unwrap();
    let fired: u64 = (0..80u32).map(|psn| one_frame_run(&r, &rule, 3, psn).rules[0].applied).sum();
    assert!((24..=56).contains(&fired), "fired in {fired} of 80 runs at prob=0.5");
    // The lab's counts over its life: every match and firing, for `roce lab status`.
    let life = r.switch.standing().unwrap();
    assert_eq!((life[0].matched, life[0].applied), (80, fired));
    assert_eq!(life[0].rule, rule.to_string());
}

/// A standing `nth` counts over the lab's life, as the reference says: the third
/// matching frame since the lab came up, whichever run it falls in.
#[test]
fn a_standing_nth_counts_over_the_labs_life() {
    let r = rig("standing-nth");
    let rule = parse_rule("drop nth=3").unwrap();
    let dropped: Vec<u64> =
        (0..5u32).map(|psn| one_frame_run(&r, &rule, 1, psn).counters.dropped).collect();
    assert_eq!(dropped, [0, 0, 1, 0, 0]);
}

/// The draws of a lab brought back with the same definition are the same again:
/// a heal replays the lab as it was defined.
#[test]
fn standing_draws_start_again_from_the_lab_seed_on_a_new_switch() {
    let rule = parse_rule("drop prob=0.5").unwrap();
    let draws = |name: &str| -> Vec<u64> {
        let r = rig(name);
        (0..24u32).map(|psn| one_frame_run(&r, &rule, 5, psn).rules[0].applied).collect()
    };
    let first = draws("standing-a");
    assert_eq!(first, draws("standing-b"));
    assert!(first.contains(&0) && first.contains(&1), "{first:?}");
}

#[test]
fn rules_leave_other_traffic_alone_and_limit_counts() {
    let r = rig("limit");
    r.begin(&["drop limit=2"], 1, false);
    let tcp_like = vec![0x11u8; 60];
    r.send(Dir::AtoB, &tcp_like);
    for psn in 0..4 {
        r.send(Dir::AtoB, &roce(Dir::AtoB, 0x04, 0x11, psn, b"x"));
    }
    let got = r.received(Dir::AtoB);
    assert_eq!(got.len(), 3, "the non-RoCE frame and RoCE psn 2, 3");
    assert_eq!(got[0], tcp_like);
    assert_eq!(r.end().unwrap().counters.dropped, 2);
}

#[test]
fn injected_frames_are_counted_and_recorded() {
    let r = rig("inject");
    let path = r.begin(&[], 1, true);
    let f = roce(Dir::BtoA, 0x81, 0x11, 0, b"");
    r.switch.inject(Dir::BtoA, f.clone()).unwrap();
    assert_eq!(r.received(Dir::BtoA), vec![f]);
    let rep = r.end().unwrap();
    assert_eq!((rep.counters.injected, rep.counters.recorded), (1, 1));
    assert!(rep.counters.capture_complete() && rep.counters.balanced());
    let (_, pkts) = read_capture(&path).unwrap();
    assert_eq!(pkts[0].comment.as_deref(), Some("injected by the lab"));
}

fn syndrome_of(frame: &[u8]) -> (u8, u32, u32, u8) {
    let f = frame::decode(LinkType::ETHERNET, frame, &frame::Options::default());
    let ib = f.ib.expect("RoCE");
    (ib.bth.opcode.0, ib.bth.dest_qp, ib.bth.psn.value(), ib.aeth.map_or(0, |a| a.syndrome.0))
}

/// `respond real=withhold`: the request goes on, the crafted NAK comes back
/// first, the responder's own ACK of it is held back and later ones pass; the
/// capture says which frame is which, and the counts still balance.
#[test]
fn respond_answers_in_the_responders_place() {
    let r = rig("respond");
    let path = r.begin(&["respond dir=a>b op=write-only with=nak code=invalid_request real=withhold reply-qp=0x11"], 1, true);
    let write = roce(Dir::AtoB, 0x0a, 0x22, 5, &[1; 8]);
    r.send(Dir::AtoB, &write);
    assert_eq!(r.received(Dir::AtoB), vec![write.clone()], "the responder gets the request");
    let back = r.received(Dir::BtoA);
    assert_eq!(back.len(), 1);
    assert_eq!(
        syndrome_of(&back[0]),
        (0x11, 0x11, 5, 0x61),
        "NAK Invalid Request to the requester's QP"
    );
    assert!(icrc_ok(&back[0]) && ipv4_ok(&back[0]));
    // The responder's ACK of PSN 5 is withheld; its next one passes.
    r.send(Dir::BtoA, &roce(Dir::BtoA, 0x11, 0x11, 5, &[]));
    assert!(r.received(Dir::BtoA).is_empty());
    r.send(Dir::BtoA, &roce(Dir::BtoA, 0x11, 0x11, 6, &[]));
    assert_eq!(r.received(Dir::BtoA).len(), 1);
    let rep = r.end().unwrap();
    let c = rep.counters;
    assert_eq!((c.synthesized, c.dropped, c.recorded), (1, 1, 4));
    assert!(c.capture_complete() && c.balanced(), "{}", c.summary());
    let (_, pkts) = read_capture(&path).unwrap();
    let marks: Vec<Marks> =
        pkts.iter().map(|p| p.comment.as_deref().map(Marks::parse).unwrap_or_default()).collect();
    assert!(
        marks[0].is_empty() && marks[1].synthesized() && marks[2].withheld() && marks[3].is_empty(),
        "the request, then its answer: {marks:?}"
    );
}

/// `real=lost` keeps the request from the responder; an RNR range sends each
/// code once, then lets the requester through.
#[test]
fn respond_lost_requests_and_rnr_ranges() {
    let r = rig("respond-lost");
    r.begin(&["respond op=send-only with=rnr timer=3-4 real=lost reply-qp=0x11"], 1, false);
    let send = roce(Dir::AtoB, 0x04, 0x22, 9, &[2; 4]);
    let mut timers = Vec::new();
    for _ in 0..3 {
        r.send(Dir::AtoB, &send);
        timers.extend(r.received(Dir::BtoA).iter().map(|f| syndrome_of(f).3));
    }
    assert_eq!(timers, vec![0x23, 0x24], "codes 3 and 4, then no more");
    assert_eq!(r.received(Dir::AtoB).len(), 1, "only the third SEND reached the responder");
    let rep = r.end().unwrap();
    assert_eq!((rep.rules[0].matched, rep.rules[0].applied), (3, 2));
}

#[test]
#[ignore = "needs root (SO_RCVBUFFORCE for the switch's socket buffers): bash scripts/test.sh runs it as root"]
fn a_burst_is_carried_without_loss() {
    let r = rig("burst");
    r.begin(&[], 1, true);
    let n = 20_000;
    let f = roce(Dir::AtoB, 0x0a, 0x11, 0, &[7; 64]);
    let rx = {
        let s = r.vm_b.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 2048];
            let mut got = 0;
            while s.recv(&mut buf).is_ok() {
                got += 1;
            }
            got
        })
    };
    let t = Instant::now();
    for _ in 0..n {
        r.vm_a.send(&f).unwrap();
    }
    let got = rx.join().unwrap();
    let rep = r.end().unwrap();
    let c = rep.counters;
    eprintln!(
        "burst: {n} frames sent in {:?}; {got} received; {c:?}; socket drops {}",
        t.elapsed(),
        rep.socket_drops
    );
    assert_eq!(c.from_a, n);
    assert_eq!(got, n);
    assert_eq!((c.forwarded, c.send_errors, c.recorded), (n, 0, n));
}

/// Runs that share the switch: each records and counts the frames to its own
/// QPs, nothing of the other's; what neither claims goes through unrecorded;
/// a run that needs the switch to itself (or brings rules) waits its turn.
#[test]
fn shared_runs_each_record_only_their_own_frames() {
    let r = rig("shared");
    let start = |name: &str, claim: Claim| {
        let path = r.dir.join(name);
        let recorder: Box<dyn Recorder> = Box::new(PcapngRecorder::create(&path).unwrap());
        let id = r
            .switch
            .begin(RunSpec {
                rules: vec![],
                seed: 1,
                recorder: Some(recorder),
                capture: Some(path.clone()),
                live: None,
                claim: Some(claim),
                standing: Default::default(),
            })
            .unwrap();
        (id, path)
    };
    let (one, p1) =
        start("one.pcapng", Claim { qps_a: vec![0x11], qps_b: vec![0x12], ports: vec![18_600] });
    let (two, p2) =
        start("two.pcapng", Claim { qps_a: vec![0x12], qps_b: vec![0x11], ports: vec![18_700] });
    let overlapping = RunSpec {
        rules: vec![],
        seed: 1,
        recorder: None,
        capture: None,
        live: None,
        claim: Some(Claim { qps_b: vec![0x12], ..Default::default() }),
        standing: Default::default(),
    };
    assert!(r.switch.begin(overlapping).unwrap_err().to_string().contains("QPN 0x12 on VM b"));
    let alone = RunSpec {
        rules: vec![],
        seed: 1,
        recorder: None,
        capture: None,
        live: None,
        claim: None,
        standing: Default::default(),
    };
    assert!(r.switch.begin(alone).unwrap_err().to_string().contains("2 runs share the switch"));
    let with_rules = RunSpec {
        rules: vec![parse_rule("drop").unwrap()],
        seed: 1,
        recorder: None,
        capture: None,
        live: None,
        claim: Some(Claim { qps_b: vec![0x99], ..Default::default() }),
        standing: Default::default(),
    };
    assert!(r.switch.begin(with_rules).unwrap_err().to_string().contains("fault rules"));

    // Interleaved: one's request and ACK, two's, an ARP nobody claims.
    let frames = [
        (Dir::AtoB, roce(Dir::AtoB, 0x04, 0x12, 1, b"one")),
        (Dir::AtoB, roce(Dir::AtoB, 0x04, 0x11, 7, b"two")),
        (Dir::BtoA, roce(Dir::BtoA, 0x11, 0x11, 1, b"")),
        (Dir::AtoB, vec![0xffu8; 42]),
        (Dir::BtoA, roce(Dir::BtoA, 0x11, 0x12, 7, b"")),
    ];
    for (d, f) in &frames {
        r.send(*d, f);
    }
    assert_eq!(r.received(Dir::AtoB).len(), 3, "every frame is forwarded");
    assert_eq!(r.received(Dir::BtoA).len(), 2);
    let (total, runs) = r.switch.stats().unwrap();
    assert_eq!((total.received(), runs.len()), (5, 2));
    let rep1 = r.switch.end(one).unwrap();
    let rep2 = r.switch.end(two).unwrap();
    for (rep, path, mine) in [(&rep1, &p1, [0usize, 2]), (&rep2, &p2, [1, 4])] {
        let c = rep.counters;
        assert_eq!((c.from_a, c.from_b, c.roce, c.forwarded, c.recorded), (1, 1, 2, 2, 2), "{c:?}");
        assert!(c.balanced() && c.capture_complete());
        let (_, got) = read_capture(path).unwrap();
        let want: Vec<&Vec<u8>> = mine.iter().map(|&i| &frames[i].1).collect();
        assert_eq!(got.iter().map(|p| &p.data).collect::<Vec<_>>(), want);
    }
    assert!(r.switch.end(one).is_err(), "ended already");
    let (total, runs) = r.switch.stats().unwrap();
    assert!(runs.is_empty());
    assert_eq!((total.received(), total.recorded), (5, 4), "the ARP frame went through unrecorded");
}

/// Every frame `p` takes in until 300 ms of quiet.
fn drain(p: &Port) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut burst = Burst::new();
    loop {
        let mut fds = [PollFd::new(p.as_fd(), PollFlags::POLLIN)];
        if poll(&mut fds, 300u16).unwrap_or(0) == 0 {
            return out;
        }
        while p.recv_burst(&mut burst).is_ok() {
            out.extend(burst.frames().map(<[u8]>::to_vec));
        }
    }
}

/// Two veth pairs in a namespace of their own (`name`), the switch on one end of
/// each (`a1`, `b1`), the other ends (`a0`, `b0`) standing in for the hosts; and
/// a directory for the recording.
struct VethBridge {
    _ns: Netns,
    switch: Switch,
    host_a: Port,
    host_b: Port,
    dir: std::path::PathBuf,
}

impl VethBridge {
    fn new(name: &str) -> VethBridge {
        let ns = Netns::new(name).unwrap();
        let mut ports = ns.open(&["a1", "b1", "a0", "b0"]).unwrap().into_iter().map(|p| p.unwrap());
        let mut next = || Port::Link(ports.next().unwrap());
        let (a1, b1, host_a, host_b) = (next(), next(), next(), next());
        let switch = Switch::spawn_on([a1, b1], Ports::default()).unwrap();
        let dir = std::env::temp_dir().join(format!("roce-bridge-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        VethBridge { _ns: ns, switch, host_a, host_b, dir }
    }
}

/// The switch between two network interfaces, as it would stand between two
/// NIC ports cabled to hosts under test: here the two ends of two veth pairs in
/// a namespace of their own, the other two ends standing in for the hosts. Frames
/// cross both ways as sent, a fault rule applies, and the recording holds every
/// frame with its sender, balancing the counts as on the lab's UDP wire.
#[test]
#[ignore = "needs root (a network namespace, raw sockets): bash scripts/test.sh runs it as root"]
fn between_two_interfaces_it_forwards_applies_rules_and_records() {
    let VethBridge { _ns, switch, host_a, host_b, dir } = VethBridge::new("bridge");
    let (run, path) = begin_run(&switch, &dir, &["drop op=send-only nth=2"], 1, true);
    let sends: Vec<Vec<u8>> =
        (0..4).map(|i| roce(Dir::AtoB, 0x04, 0x11, i, &[i as u8; 32])).collect();
    let ack = roce(Dir::BtoA, 0x11, 0x12, 3, b"");
    for f in &sends {
        host_a.send_batch(&[f]).unwrap();
    }
    let at_b = drain(&host_b);
    host_b.send_batch(&[&ack]).unwrap();
    let at_a = drain(&host_a);
    let rep = switch.end(run).unwrap();
    assert_eq!(
        at_b,
        vec![sends[0].clone(), sends[2].clone(), sends[3].clone()],
        "the second SEND is dropped, the rest arrive as sent"
    );
    assert_eq!(at_a, vec![ack.clone()]);
    let c = rep.counters;
    assert_eq!((c.from_a, c.from_b, c.forwarded, c.dropped, c.send_errors), (4, 1, 4, 1, 0));
    assert!(c.capture_complete(), "{c:?}");
    let (ifaces, frames) = read_capture(&path).unwrap();
    assert_eq!(ifaces, ["a", "b"]);
    let senders: Vec<u32> = frames.iter().map(|f| f.interface).collect();
    assert_eq!(
        senders,
        [0, 0, 0, 0, 1],
        "four frames a sent (one dropped, recorded as such), one b sent"
    );
    assert_eq!(frames[4].data, ack);
    assert_eq!(rep.socket_drops, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An interface that is down cannot be a port, nor one whose MTU cannot carry
/// a RoCE packet; each error says how to fix it.
#[test]
#[ignore = "needs root (a network namespace, raw sockets): bash scripts/test.sh runs it as root"]
fn a_down_or_small_interface_is_refused() {
    let ns = Netns::new("badport").unwrap();
    let ip = |args: &[&str]| {
        let out =
            std::process::Command::new("ip").args(["-n", ns.name()]).args(args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    ip(&["link", "set", "a1", "down"]);
    ip(&["link", "set", "b1", "mtu", "1000"]);
    let got = ns.open(&["a1", "b1", "nosuch0", "a0"]).unwrap();
    let err = |i: usize| got[i].as_ref().err().cloned();
    assert_eq!(err(0), Some(PortError::Down("a1".into())));
    assert_eq!(err(1), Some(PortError::MtuTooSmall { name: "b1".into(), mtu: 1000 }));
    match err(2) {
        Some(PortError::NoSuchInterface { present, .. }) => {
            assert_eq!(present, ["a0", "a1", "b0", "b1", "lo"], "the namespace's own interfaces")
        }
        other => panic!("{other:?}"),
    }
    // Up, with its peer down: it opens, and says it has no link.
    let a0 = got[3].as_ref().expect("a0 is up with MTU 1500");
    assert_eq!((a0.name(), a0.mtu(), a0.carrier()), ("a0", 1500, false));
}

/// `frame` with the tags (TPID, TCI) put after its MAC addresses, outer first.
fn tagged(frame: &[u8], tags: &[(u16, u16)]) -> Vec<u8> {
    let mut out = frame[..12].to_vec();
    for (tpid, tci) in tags {
        out.extend_from_slice(&tpid.to_be_bytes());
        out.extend_from_slice(&tci.to_be_bytes());
    }
    out.extend_from_slice(&frame[12..]);
    out
}

/// RoCE deployments run on VLANs, their priority (PCP) choosing the lossless
/// class PFC pauses. The kernel takes a frame's outer tag off before a packet
/// socket sees it; the switch puts it back, so a tagged frame crosses as it
/// was sent (802.1Q with its priority, and QinQ with the 802.1ad outer tag),
/// and is recorded so.
#[test]
#[ignore = "needs root (a network namespace, raw sockets): bash scripts/test.sh runs it as root"]
fn vlan_tags_cross_the_bridge_as_sent() {
    let VethBridge { _ns, switch, host_a, host_b, dir } = VethBridge::new("vlan");
    let (run, path) = begin_run(&switch, &dir, &[], 1, true);
    // Priority 3, VLAN 100; and QinQ: service VLAN 200 outside VLAN 100.
    let dot1q = tagged(&roce(Dir::AtoB, 0x04, 0x11, 1, &[7; 32]), &[(0x8100, 3 << 13 | 100)]);
    let qinq = tagged(&roce(Dir::BtoA, 0x11, 0x12, 1, b""), &[(0x88a8, 200), (0x8100, 100)]);
    host_a.send_batch(&[&dot1q]).unwrap();
    let at_b = drain(&host_b);
    host_b.send_batch(&[&qinq]).unwrap();
    let at_a = drain(&host_a);
    let rep = switch.end(run).unwrap();
    assert_eq!(at_b, vec![dot1q.clone()], "the 802.1Q frame arrives tagged, its priority kept");
    assert_eq!(at_a, vec![qinq.clone()], "the QinQ frame keeps both tags");
    let (_, frames) = read_capture(&path).unwrap();
    let recorded: Vec<&[u8]> = frames.iter().map(|f| f.data.as_slice()).collect();
    assert_eq!(recorded, [dot1q.as_slice(), qinq.as_slice()], "recorded as on the wire");
    assert!(icrc_ok(&dot1q) && icrc_ok(&qinq), "a tag is outside what the ICRC covers");
    assert_eq!(rep.counters.forwarded, 2);
    let _ = std::fs::remove_dir_all(&dir);
}
