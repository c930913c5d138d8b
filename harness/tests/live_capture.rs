//! Live capture on the loopback interface (needs root or CAP_NET_RAW; the test
//! environment runs as root). Only ever sends to 127.0.0.1. Every test is bounded by a
//! deadline: the capture's stop handle is set by a watchdog, and the test thread
//! waits for the capture thread with a timeout, so nothing can hang.

use std::net::UdpSocket;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dissector::capture::{OutPacket, PcapngWriter, Reader};
use dissector::LinkType;
use roce::net::live::{LiveCapture, LiveOptions};

const DEADLINE: Duration = Duration::from_secs(20);

#[derive(Debug, Clone)]
struct Got {
    number: u64,
    ts_ns: u64,
    link: LinkType,
    orig_len: u32,
    data: Vec<u8>,
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// Runs `f` on a thread and fails the test if it does not finish within the deadline.
fn within_deadline<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(DEADLINE + Duration::from_secs(5)) {
        Ok(v) => v,
        Err(_) => panic!("{what} did not finish within {DEADLINE:?}"),
    }
}

#[test]
#[ignore = "needs root (CAP_NET_RAW to capture on lo): bash scripts/test.sh runs it as root"]
fn captures_exactly_five_udp_datagrams_on_lo() {
    // Bind the sender first so the filter can also name its port: other processes
    // (a soft-RoCE lab on lo, another test) may send to 4791 on 127.0.0.1 too.
    let sender = UdpSocket::bind("127.0.0.1:0").expect("bind sender");
    let sport = sender.local_addr().expect("local addr").port();
    let filter = format!("udp port 4791 and host 127.0.0.1 and udp src port {sport}");
    let mut cap = LiveCapture::open(&LiveOptions {
        iface: "lo".into(),
        filter,
        snaplen: 65_535,
        promisc: false,
        count: Some(5),
        // A kernel buffer of its own size (the agent's captures ask for one).
        buffer: Some(4 << 20),
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cap.link(), LinkType::ETHERNET, "lo is DLT_EN10MB");
    let stop = cap.stop_handle();

    let payloads: Vec<Vec<u8>> = (0..5)
        .map(|i| {
            format!("roce live test datagram {i} from pid {}", std::process::id()).into_bytes()
        })
        .collect();
    let to_send = payloads.clone();
    let t0 = now_ns();
    // The capture is open, so nothing sent from here on can be missed.
    let sender_thread = thread::spawn(move || {
        for p in &to_send {
            sender.send_to(p, "127.0.0.1:4791").expect("send to 127.0.0.1:4791");
            thread::sleep(Duration::from_millis(20));
        }
        // Extra datagrams that count=5 must leave unread.
        for _ in 0..3 {
            let _ = sender.send_to(b"extra", "127.0.0.1:4791");
        }
    });
    // Watchdog: stop the capture at the deadline so the loop below ends regardless.
    let watchdog_stop = stop.clone();
    thread::spawn(move || {
        thread::sleep(DEADLINE);
        watchdog_stop.store(true, Ordering::SeqCst);
    });

    let (got, after, interfaces) = within_deadline("live capture", move || {
        let mut got = vec![];
        while let Some(r) = cap.next_packet().unwrap_or_else(|e| panic!("{e}")) {
            got.push(Got {
                number: r.number,
                ts_ns: r.ts_ns,
                link: r.link,
                orig_len: r.orig_len,
                data: r.data.to_vec(),
            });
        }
        // After count is reached it stays at the end.
        let after = cap.next_packet().map(|r| r.is_none());
        (got, after, cap.interfaces().to_vec())
    });
    sender_thread.join().expect("sender");
    let t1 = now_ns();
    assert!(!stop.load(Ordering::SeqCst), "the watchdog had to stop the capture");
    assert!(matches!(after, Ok(true)));

    assert_eq!(got.len(), 5, "expected exactly the 5 datagrams, got {got:#?}");
    for (i, (g, p)) in got.iter().zip(&payloads).enumerate() {
        assert_eq!(g.number, i as u64 + 1);
        assert_eq!(g.link, LinkType::ETHERNET);
        // Ethernet (14) + IPv4 (20) + UDP (8), then our payload.
        assert_eq!(g.data.len(), 42 + p.len(), "frame {}", g.number);
        assert_eq!(&g.data[42..], &p[..], "frame {}", g.number);
        assert_eq!(&g.data[12..14], [0x08, 0x00], "IPv4 ethertype");
        assert_eq!(&g.data[26..30], [127, 0, 0, 1], "source address");
        assert_eq!(&g.data[30..34], [127, 0, 0, 1], "destination address");
        assert_eq!(u16::from_be_bytes([g.data[34], g.data[35]]), sport);
        assert_eq!(u16::from_be_bytes([g.data[36], g.data[37]]), 4791);
        assert_eq!(g.orig_len as usize, g.data.len());
        assert!(
            g.ts_ns >= t0.saturating_sub(1_000_000_000) && g.ts_ns <= t1 + 1_000_000_000,
            "timestamp {}",
            g.ts_ns
        );
    }
    assert!(got.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
    // Timestamps are nanoseconds: with µs precision all would end in 000.
    let ns_digits = got.iter().filter(|g| g.ts_ns % 1000 != 0).count();
    assert!(
        ns_digits > 0,
        "timestamps look like microseconds: {:?}",
        got.iter().map(|g| g.ts_ns).collect::<Vec<_>>()
    );

    // Written with PcapngWriter and read back: the same bytes.
    let mut w = PcapngWriter::new(Vec::new(), "roce live test").expect("writer");
    let iface = &interfaces[0];
    let id = w.add_interface(iface.link, iface.snaplen, iface.name.as_deref()).expect("idb");
    for g in &got {
        w.write_packet(&OutPacket {
            interface: id,
            ts_ns: g.ts_ns,
            data: &g.data,
            orig_len: g.orig_len,
            direction: None,
            comment: None,
        })
        .expect("write");
    }
    let bytes = w.into_inner().expect("flush");
    let mut r = Reader::new(&bytes[..]).expect("reader");
    for g in &got {
        let rec = r.next_packet().expect("read").expect("a record");
        assert_eq!(rec.number, g.number);
        assert_eq!(rec.data, &g.data[..]);
        assert_eq!(rec.ts_ns, g.ts_ns);
        assert_eq!(rec.orig_len, g.orig_len);
        assert_eq!(rec.link, LinkType::ETHERNET);
    }
    assert!(r.next_packet().expect("end").is_none());
    assert_eq!(r.interfaces()[0].name.as_deref(), Some("lo"));
}

#[test]
#[ignore = "needs root (CAP_NET_RAW to capture on lo): bash scripts/test.sh runs it as root"]
fn stop_handle_ends_an_idle_capture() {
    // A filter nothing matches: the capture only ever sees read timeouts.
    let mut cap = LiveCapture::open(&LiveOptions {
        iface: "lo".into(),
        filter: "udp port 4791 and host 127.0.0.1 and udp src port 1 and udp dst port 1".into(),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let stop = cap.stop_handle();
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::SeqCst);
    });
    let t = Instant::now();
    let n = within_deadline("idle capture", move || {
        let mut n = 0;
        while cap.next_packet().unwrap_or_else(|e| panic!("{e}")).is_some() {
            n += 1;
        }
        n
    });
    assert_eq!(n, 0);
    assert!(t.elapsed() < Duration::from_secs(5), "stop took {:?}", t.elapsed());
}

#[test]
#[ignore = "needs root (CAP_NET_RAW to capture on lo): bash scripts/test.sh runs it as root"]
fn count_zero_ends_at_once() {
    let mut cap = LiveCapture::open(&LiveOptions {
        iface: "lo".into(),
        count: Some(0),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(cap.next_packet().unwrap().is_none());
}

#[test]
#[ignore = "needs root (CAP_NET_RAW to capture on lo): bash scripts/test.sh runs it as root"]
fn unknown_interface_lists_the_available_ones() {
    let e = LiveCapture::open(&LiveOptions { iface: "nosuchif0".into(), ..Default::default() })
        .unwrap_err();
    let s = e.to_string();
    assert!(s.starts_with("interface nosuchif0: "), "{s}");
    assert!(s.contains("available interfaces:") && s.contains("lo"), "{s}");
}

#[test]
#[ignore = "needs root (CAP_NET_RAW to capture on lo): bash scripts/test.sh runs it as root"]
fn bad_filter_quotes_the_filter_and_libpcap() {
    let e = LiveCapture::open(&LiveOptions {
        iface: "lo".into(),
        filter: "udp prot 4791".into(),
        ..Default::default()
    })
    .unwrap_err();
    let s = e.to_string();
    assert!(s.starts_with("interface lo: bad capture filter \"udp prot 4791\": "), "{s}");
    assert!(s.contains("syntax error") || s.contains("unknown"), "{s}");
    assert!(s.contains("hint: filters use pcap-filter(7) syntax"), "{s}");
}
