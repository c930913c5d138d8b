//! A bridge server on a switch over the lab's 127.0.0.1 UDP wire, served on a
//! loopback port, driven by the controller's client: what a controller on a
//! real bench sees, without interfaces or root.
use std::net::UdpSocket;

use dissector::craft::{build, Encap, Host, Transport};
use dissector::wire::ethernet::Mac;
use dissector::wire::{BthRepr, Opcode, Psn};
use lab::fault::parse_rule;
use lab::switch::Wire;

use super::client::Bridge;
use super::*;

/// The server's deadline for a message (the real one is [`MESSAGE_WITHIN`]).
const WITHIN: Duration = Duration::from_millis(500);

struct Bench {
    server: Arc<Server>,
    addr: String,
    vm_a: UdpSocket,
    vm_b: UdpSocket,
    dir: tempfile::TempDir,
}

fn key(b: u8) -> Key {
    Key::from_bytes([b; 32])
}

fn bench() -> Bench {
    let w = Wire::new().unwrap();
    let switch = Arc::new(Switch::spawn(&w).unwrap());
    for s in [&w.vm_a, &w.vm_b] {
        s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    }
    let port = |n: &str| BridgePort { name: n.into(), mtu: 1500, link: true };
    let server = Server::new(switch, vec![port("eth2"), port("eth3")], WITHIN).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    server.spawn(l, key(7)).unwrap();
    Bench { server, addr, vm_a: w.vm_a, vm_b: w.vm_b, dir: tempfile::tempdir().unwrap() }
}

/// A RoCEv2 SEND Only from a (10.0.0.1) to b, PSN `psn`.
fn send_only(psn: u32) -> Vec<u8> {
    let host = |last: u8| Host {
        mac: Mac([0x52, 0x54, 0, 0, 0, last]),
        ip: std::net::Ipv4Addr::new(10, 0, 0, last).into(),
    };
    let t = Transport {
        bth: BthRepr {
            opcode: Opcode(4),
            p_key: 0xffff,
            dest_qp: 0x11,
            psn: Psn::new(psn),
            ..Default::default()
        },
        payload: b"hello".to_vec(),
        ..Default::default()
    };
    build(&Encap::default(), &host(1), &host(2), &t)
}

/// As `roce bridge` ends: the server's directory goes (its threads never end,
/// so nothing else would remove it).
impl Drop for Bench {
    fn drop(&mut self) {
        self.server.stop();
    }
}

impl Bench {
    fn bridge(&self, k: u8) -> Bridge {
        Bridge::new(&self.addr, key(k))
    }

    /// Sends `n` SENDs a → b; how many reached b.
    fn carry(&self, n: u32) -> usize {
        for psn in 0..n {
            self.vm_a.send(&send_only(psn)).unwrap();
        }
        let mut buf = vec![0u8; 65536];
        let mut got = 0;
        while self.vm_b.recv(&mut buf).is_ok() {
            got += 1;
        }
        got
    }

    fn no_run(&self) -> bool {
        lock(&self.server.active).is_none() && self.server.holder.busy().is_none()
    }

    /// Waits for the session thread to let go of its controller.
    fn settle(&self) {
        let until = Instant::now() + Duration::from_secs(5);
        while !self.no_run() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn a_run_applies_the_controllers_rules_and_brings_back_its_recording() {
    let b = bench();
    let rule = parse_rule("drop dir=a>b op=send-only nth=2").unwrap();
    let run = b.bridge(7).begin(&[rule], 1, Duration::from_secs(60)).unwrap();
    assert_eq!(run.ports.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["eth2", "eth3"]);
    // The bridge's clock is this host's, read before its answer came: a bound
    // at or below zero, within the answer's round trip.
    assert!((-5_000_000_000..=0).contains(&run.clock_ahead_ns), "{}", run.clock_ahead_ns);
    assert_eq!(b.carry(4), 3, "the second SEND is dropped by the run's rule");
    let cap = b.dir.path().join("wire.pcapng");
    let rep = run.end(&cap).unwrap();
    assert_eq!(rep.capture.as_deref(), Some(cap.to_str().unwrap()));
    assert_eq!((rep.counters.recorded, rep.counters.dropped), (4, 1), "{rep:?}");
    assert_eq!((rep.rules[0].matched, rep.rules[0].applied), (4, 1));
    let (ifaces, packets) = lab::record::read_capture(&cap).unwrap();
    assert_eq!(ifaces, ["a", "b"]);
    assert_eq!(packets.len(), 4);
    assert_eq!(packets[1].data, send_only(1), "the capture holds the frames as sent");
    assert!(packets[1].comment.as_deref().is_some_and(|c| c.contains("drop")), "{packets:?}");
    // The bridge keeps nothing of it, and is free for the next run.
    b.settle();
    assert_eq!(std::fs::read_dir(b.server.dir.path()).unwrap().count(), 0);
    assert_eq!(b.server.ended.load(Ordering::SeqCst), 1);
    // Without a run, no rule: every frame crosses.
    assert_eq!(b.carry(4), 4);
    let again = b.bridge(7).begin(&[], 1, Duration::from_secs(60)).unwrap();
    assert_eq!(again.end(&b.dir.path().join("2.pcapng")).unwrap().counters.recorded, 0);
}

#[test]
fn a_controller_that_goes_away_mid_run_leaves_a_plain_cable() {
    let b = bench();
    let all = parse_rule("drop dir=a>b op=send-only").unwrap();
    let run = b.bridge(7).begin(&[all], 1, Duration::from_secs(60)).unwrap();
    assert_eq!(b.carry(2), 0, "the run drops every SEND");
    drop(run);
    b.settle();
    assert!(b.no_run(), "the bridge ended the run of a controller that went away");
    assert_eq!(b.server.abandoned.load(Ordering::SeqCst), 1);
    assert_eq!(std::fs::read_dir(b.server.dir.path()).unwrap().count(), 0, "its recording is gone");
    assert_eq!(b.carry(3), 3, "forwarding goes on without the rule");
    // At the bridge's end, nothing of its runs is left behind.
    assert!(!b.server.stop(), "no run in progress");
    assert!(!b.server.dir.path().exists());
}

#[test]
fn a_run_not_ended_in_the_time_it_asked_for_is_ended_by_the_bridge() {
    let b = bench();
    let all = parse_rule("drop dir=a>b op=send-only").unwrap();
    // The bridge waits the time asked for and its message deadline more.
    let run = b.bridge(7).begin(&[all], 1, Duration::from_millis(1)).unwrap();
    let until = Instant::now() + WITHIN + Duration::from_secs(10);
    while !b.no_run() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(b.no_run(), "still held after {:?}", WITHIN + Duration::from_secs(10));
    assert_eq!(b.carry(2), 2);
    let e = run.end(&b.dir.path().join("late.pcapng")).unwrap_err();
    assert!(format!("{e:#}").contains("the bridge at"), "{e:#}");
    assert!(!b.dir.path().join("late.pcapng").exists(), "nothing half-written");
}

#[test]
fn a_second_controller_is_told_who_holds_the_bridge_and_a_wrong_key_is_refused() {
    let b = bench();
    let first = b.bridge(7).begin(&[], 1, Duration::from_secs(60)).unwrap();
    let e = b.bridge(7).begin(&[], 1, Duration::from_secs(60)).unwrap_err();
    let said = format!("{e:#}");
    assert!(said.contains("busy: serving the controller at 127.0.0.1:"), "{said}");
    let e = b.bridge(8).begin(&[], 1, Duration::from_secs(60)).unwrap_err();
    assert!(format!("{e:#}").contains("authenticating with the bridge at"), "{e:#}");
    // The first one's run was not disturbed.
    assert_eq!(b.carry(2), 2);
    let rep = first.end(&b.dir.path().join("first.pcapng")).unwrap();
    assert_eq!(rep.counters.recorded, 2);
}

#[test]
fn a_rule_the_bridge_cannot_read_is_refused_and_no_run_begins() {
    let b = bench();
    let (stream, session) = crate::agent::auth::dial(
        &b.addr,
        &key(7),
        (Duration::from_secs(5), Duration::from_secs(5)),
        "the bridge",
        "",
    )
    .unwrap();
    let (mut r, mut w) = session.wrap(stream.try_clone().unwrap(), stream.try_clone().unwrap());
    protocol::write_msg(&mut w, &ToBridge::Hello { version: BRIDGE_VERSION }).unwrap();
    let hello: Option<FromBridge> = protocol::read_msg(&mut r).unwrap();
    assert!(matches!(hello, Some(FromBridge::Hello { .. })), "{hello:?}");
    let bad = ToBridge::Begin { rules: vec!["drop op=nonsense".into()], seed: 1, within_ms: 1000 };
    protocol::write_msg(&mut w, &bad).unwrap();
    match protocol::read_msg::<_, FromBridge>(&mut r).unwrap() {
        Some(FromBridge::Error { message, .. }) => {
            assert!(message.contains("nonsense"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    let long = ToBridge::Begin { rules: vec![], seed: 1, within_ms: RUN_MOST_MS + 1 };
    protocol::write_msg(&mut w, &long).unwrap();
    let said: Option<FromBridge> = protocol::read_msg(&mut r).unwrap();
    assert!(matches!(said, Some(FromBridge::Error { .. })), "{said:?}");
    assert!(lock(&b.server.active).is_none());
    assert_eq!(b.carry(2), 2);
}

#[test]
fn fault_rules_cross_as_text_unchanged() {
    // What the controller resolves a scenario's [[fault]] to, and the bridge reads back.
    for text in [
        "drop dir=a>b op=send-only nth=2",
        "delay op=read-response-first ms=300",
        "corrupt op=write-only at=payload+0 xor=0x01 icrc=fix",
        "drop op=ack qp=0x11 prob=0.5 seed=9 limit=3",
    ] {
        let r = parse_rule(text).unwrap();
        assert_eq!(parse_rule(&r.to_string()).unwrap(), r, "{text}");
    }
}

#[test]
fn a_bench_cabled_the_other_way_round_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("w.pcapng");
    let mut rec: Box<dyn lab::record::Recorder> = Box::new(PcapngRecorder::create(&cap).unwrap());
    // a's SEND (from 10.0.0.1) as a bridge whose first port faces b records it.
    rec.record(lab::fault::Dir::BtoA, 1, &send_only(0), None).unwrap();
    rec.finish().unwrap();
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let mut sides = client::Sides::new();
    sides.insert(ip("10.0.0.1"), ("a".into(), 0));
    sides.insert(ip("10.0.0.2"), ("b".into(), 1));
    let said = client::wrong_way(&cap, &sides).expect("the other way round");
    assert!(said.contains("frame 1 from endpoint a (10.0.0.1) came in on its side b"), "{said}");
    // Cabled as the sides say: nothing to say.
    sides.insert(ip("10.0.0.1"), ("a".into(), 1));
    assert_eq!(client::wrong_way(&cap, &sides), None);
}
