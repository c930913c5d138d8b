//! The executor over in-memory streams: answers in order, refusals, limits, garbage and oversize messages.
use super::*;
use crate::protocol::Setup;

fn talk(msgs: &[ToAgent]) -> Vec<FromAgent> {
    let mut input = Vec::new();
    for m in msgs {
        protocol::write_msg(&mut input, m).unwrap();
    }
    let mut out = Vec::new();
    serve(&mut &input[..], &mut out, &Limits::default(), &mut Device::default(), &mut || {})
        .unwrap();
    let mut r = &out[..];
    let mut v = Vec::new();
    while let Some(m) = protocol::read_msg::<_, FromAgent>(&mut r).unwrap() {
        v.push(m);
    }
    v
}

#[test]
fn answers_in_order_and_refuses_what_it_cannot_do() {
    let a = talk(&[
        ToAgent::Hello { version: protocol::VERSION },
        ToAgent::Hello { version: 99 },
        ToAgent::Do { index: 0, action: Action::Sleep { ms: 0 }, judged: false },
        ToAgent::ReadMemory { mr: "x".into() },
        ToAgent::Listen { qp: "q".into(), port: 18600 },
        ToAgent::Teardown,
    ]);
    assert_eq!(a.len(), 6);
    assert!(matches!(&a[0], FromAgent::Hello { version, .. } if *version == protocol::VERSION));
    assert!(matches!(&a[1], FromAgent::Error { message, .. } if message.contains("version 99")));
    assert!(
        matches!(&a[2], FromAgent::Error { message, .. } if message.contains("Setup comes first"))
    );
    assert!(matches!(&a[3], FromAgent::Error { .. }));
    assert!(
        matches!(&a[4], FromAgent::Error { message, .. } if message.contains("Setup comes first"))
    );
    assert_eq!(a[5], FromAgent::TornDown { counters: None }, "nothing set up, nothing counted");
}

/// Limits are checked before the device is touched (so this runs on a host
/// without RDMA): a refusal names the limit and its option, and the agent
/// answers the next request.
#[test]
fn a_setup_beyond_the_limits_is_refused_and_the_agent_lives_on() {
    let big = |n: usize, size: u64| {
        let mrs: Vec<protocol::MrSetup> = (0..n)
            .map(|i| protocol::MrSetup {
                name: format!("m{i}"),
                size,
                access: crate::vocab::Access(1),
                fill: protocol::Fill::Zero,
            })
            .collect();
        ToAgent::Setup(Setup {
            device: None,
            port: 1,
            gid_index: None,
            cq_depth: None,
            qps: vec![],
            mrs,
            srqs: vec![],
            mws: vec![],
        })
    };
    let a = talk(&[big(1, 2 << 30), big(300, 8), ToAgent::Hello { version: protocol::VERSION }]);
    assert!(
        matches!(&a[0], FromAgent::Error { message, .. } if message.contains("refused: 2147483648 bytes of MRs asked, this agent allows 1073741824 (--max-mr-bytes)")),
        "{a:?}"
    );
    assert!(
        matches!(&a[1], FromAgent::Error { message, .. } if message.contains("300 MRs asked") && message.contains("--max-mrs")),
        "{a:?}"
    );
    assert!(matches!(&a[2], FromAgent::Hello { .. }), "{a:?}");
}

/// A request that would hold the agent waiting longer than it allows is refused
/// at once (before anything else about it is looked at), and the next is served.
#[test]
fn waits_beyond_the_limit_are_refused() {
    let long = crate::agent::limits::MAX_WAIT_MS + 1;
    let a = talk(&[
        ToAgent::Do { index: 0, action: Action::Sleep { ms: long }, judged: false },
        ToAgent::Do {
            index: 1,
            action: Action::WaitCompletions { count: 1, within_ms: u64::MAX },
            judged: false,
        },
        ToAgent::Do { index: 2, action: Action::AwaitNotify { within_ms: long }, judged: false },
        ToAgent::Completions { min: 1, wait_ms: long, grace_ms: None },
        ToAgent::Do { index: 3, action: Action::Sleep { ms: 1 }, judged: false },
    ]);
    for r in &a[..4] {
        assert!(
            matches!(r, FromAgent::Error { message, .. } if message.contains("refused: a wait of") && message.contains("at most 900000 ms")),
            "{r:?}"
        );
    }
    // Within the limit, the request goes on to what it needs (a Setup, here).
    assert!(
        matches!(&a[4], FromAgent::Error { message, .. } if message.contains("Setup comes first")),
        "{:?}",
        a[4]
    );
}

#[test]
fn garbage_is_answered_not_fatal_and_oversize_ends_the_stream() {
    let mut input = Vec::new();
    input.extend_from_slice(&3u32.to_be_bytes());
    input.extend_from_slice(b"{x}");
    protocol::write_msg(&mut input, &ToAgent::Teardown).unwrap();
    let mut out = Vec::new();
    serve(&mut &input[..], &mut out, &Limits::default(), &mut Device::default(), &mut || {})
        .unwrap();
    let mut r = &out[..];
    assert!(matches!(
        protocol::read_msg::<_, FromAgent>(&mut r).unwrap(),
        Some(FromAgent::Error { .. })
    ));
    assert_eq!(
        protocol::read_msg::<_, FromAgent>(&mut r).unwrap(),
        Some(FromAgent::TornDown { counters: None })
    );
    let huge = (u32::MAX).to_be_bytes();
    let mut out = Vec::new();
    assert!(serve(
        &mut &huge[..],
        &mut out,
        &Limits::default(),
        &mut Device::default(),
        &mut || {}
    )
    .is_err());
    assert!(!out.is_empty(), "the refusal is said before the stream ends");
}

/// A verb the device lacks is said as such: the controller skips the scenario.
#[test]
fn an_unsupported_verb_is_said_as_such() {
    let e = AgentError::from(VerbError::from_errno(
        "ibv_wr_flush",
        libc::EOPNOTSUPP,
        Some("kernel 6.2 or later".into()),
    ));
    match e.into_msg() {
        FromAgent::Error { unsupported, verb, errno, hint, .. } => {
            assert!(unsupported);
            assert_eq!(verb.as_deref(), Some("ibv_wr_flush"));
            assert_eq!(errno, Some(libc::EOPNOTSUPP));
            assert_eq!(hint.as_deref(), Some("kernel 6.2 or later"));
        }
        other => panic!("{other:?}"),
    }
    let e = AgentError::from(VerbError::from_errno("ibv_reg_mr", libc::ENOMEM, None));
    assert!(matches!(e.into_msg(), FromAgent::Error { unsupported: false, .. }));
}

#[test]
fn gid_text() {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&[10, 0, 0, 1]);
    assert_eq!(gid_ip(&g).to_string(), "10.0.0.1");
    assert_eq!(unhex16(&dissector::text::hex_string(&g)).unwrap(), g);
    assert!(unhex16("zz").is_err());
    assert!(unhex16("00").is_err());
}

#[test]
fn capture_requests_out_of_order_are_refused() {
    let a = talk(&[
        ToAgent::CaptureStart,
        ToAgent::CaptureStop,
        ToAgent::CaptureRead { offset: 0 },
        ToAgent::Teardown,
    ]);
    let said = |m: &FromAgent| match m {
        FromAgent::Error { message, .. } => message.clone(),
        other => panic!("not an error: {other:?}"),
    };
    assert!(said(&a[0]).contains("Setup comes first"), "{:?}", a[0]);
    assert_eq!(said(&a[1]), "no capture runs: CaptureStart comes first");
    assert_eq!(said(&a[2]), "no stopped capture to read: CaptureStop comes first");
    assert_eq!(a[3], FromAgent::TornDown { counters: None });
}

/// A capture (made by a command that copies a capture file) is stopped, read
/// in order, and gone at Teardown.
#[test]
fn a_capture_is_stopped_read_and_torn_down() {
    let fx = tempfile::tempdir().unwrap();
    let fixture = fx.path().join("f.pcap");
    let mut w = dissector::capture::PcapWriter::new(
        std::fs::File::create(&fixture).unwrap(),
        dissector::LinkType::ETHERNET,
        0,
    )
    .unwrap();
    for i in 0..4u8 {
        w.write_packet(u64::from(i), &[i; 64], 64).unwrap();
    }
    w.into_inner().unwrap();
    let bytes = std::fs::read(&fixture).unwrap();
    let argv = ["cp", fixture.to_str().unwrap(), "{file}"].map(String::from);
    let running = super::super::capture::Capture::run_command(&argv, None, protocol::CAPTURE_MAX);
    let mut agent = Agent { capture: Some(running.unwrap()), ..Agent::default() };
    let n = bytes.len() as u64;
    assert_eq!(
        agent.handle(ToAgent::CaptureStop),
        FromAgent::Captured { bytes: n, frames: 4, dropped: 0, cut_short: false }
    );
    assert!(matches!(agent.handle(ToAgent::CaptureStop), FromAgent::Error { .. }));
    assert_eq!(
        agent.handle(ToAgent::CaptureRead { offset: 0 }),
        FromAgent::CaptureChunk { offset: 0, bytes: Hex(bytes.clone()) }
    );
    assert_eq!(
        agent.handle(ToAgent::CaptureRead { offset: 7 }),
        FromAgent::CaptureChunk { offset: 7, bytes: Hex(bytes[7..].to_vec()) }
    );
    assert_eq!(
        agent.handle(ToAgent::CaptureRead { offset: n }),
        FromAgent::CaptureChunk { offset: n, bytes: Hex(Vec::new()) }
    );
    assert_eq!(agent.handle(ToAgent::Teardown), FromAgent::TornDown { counters: None });
    assert!(matches!(agent.handle(ToAgent::CaptureRead { offset: 0 }), FromAgent::Error { .. }));
}
