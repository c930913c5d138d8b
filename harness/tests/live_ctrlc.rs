//! Ctrl-C (a real SIGINT to this test process) ends a live capture cleanly: the
//! capture returns `Ok(None)` instead of the process dying. Alone in its own test
//! binary because the signal and the stop flag are process-wide. Needs root (or
//! CAP_NET_RAW) for the capture on `lo`.

use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use roce::net::live::{LiveCapture, LiveOptions};

#[test]
#[ignore = "needs root (CAP_NET_RAW to capture on lo): bash scripts/test.sh runs it as root"]
fn sigint_stops_the_capture_cleanly() {
    // A shell starting us as a background job (`cmd &` without job control) hands
    // SIGINT down ignored, and the live capture rightly leaves an ignored SIGINT
    // alone. This test is about a terminal's Ctrl-C, so start from the default.
    // SAFETY: signal(2) with SIG_DFL only changes the disposition; done before the
    // capture installs its handler.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
    let mut cap = LiveCapture::open(&LiveOptions {
        iface: "lo".into(),
        // Matches nothing: the capture sits idle until stopped.
        filter: "udp port 4791 and host 127.0.0.1 and udp src port 1 and udp dst port 1".into(),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    // Fallback so the test can never hang even if the signal is lost.
    let stop = cap.stop_handle();
    thread::spawn(move || {
        thread::sleep(Duration::from_secs(15));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let pid = std::process::id().to_string();
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(300));
        let st = Command::new("kill").args(["-INT", &pid]).status().expect("run kill");
        assert!(st.success());
    });
    let (tx, rx) = mpsc::channel();
    let t = Instant::now();
    thread::spawn(move || {
        let mut n = 0u64;
        let res = loop {
            match cap.next_packet() {
                Ok(Some(_)) => n += 1,
                Ok(None) => break Ok(n),
                Err(e) => break Err(e.to_string()),
            }
        };
        let _ = tx.send(res);
    });
    let res = rx.recv_timeout(Duration::from_secs(20)).expect("capture did not end within 20 s");
    assert_eq!(res, Ok(0));
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "Ctrl-C took {took:?} to stop the capture (watchdog fired?)"
    );
    assert!(
        roce::net::live::ctrl_c_flag().load(std::sync::atomic::Ordering::SeqCst),
        "the shared flag stays set"
    );

    // A capture opened after the Ctrl-C is not stopped by it.
    let mut cap = LiveCapture::open(&LiveOptions {
        iface: "lo".into(),
        filter: "udp port 4791 and host 127.0.0.1 and udp src port 1 and udp dst port 1".into(),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let stop = cap.stop_handle();
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(500));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let t = Instant::now();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(cap.next_packet().map(|r| r.is_none()).map_err(|e| e.to_string()));
    });
    assert_eq!(rx.recv_timeout(Duration::from_secs(20)).expect("second capture hung"), Ok(true));
    assert!(t.elapsed() >= Duration::from_millis(400), "the old Ctrl-C stopped a new capture");
}
