//! `-j N`: `roce flows`, `decode -T fields` and `decode -T parquet` on N threads
//! give the same bytes as on one, on every capture in `captures/` and on a
//! generated capture whose flows — go-back-N after a loss, NAKs, RNR NAKs, a PSN
//! wrap, over several interleaved QPs — cross chunk boundaries (`--chunk-frames`
//! cuts the file into chunks of 1, 3 or 7 frames, so every piece of per-QP state
//! is carried from one chunk to the next); the same with `-c`, with a display
//! filter, and on a damaged file (same frames, same error, same exit code).
use std::path::Path;

use dissector::capture::PcapWriter;
use dissector::craft::{Conversation, Dir, Host, Timed};
use dissector::wire::{Psn, Syndrome};
use dissector::LinkType;
use roce_tests::{captures, roce, scratch, Run};

/// Fields that read earlier frames (the times) and every kind of value.
const FIELDS: &[&str] = &[
    "frame.number",
    "frame.time_relative",
    "frame.time_delta",
    "frame.time_delta_displayed",
    "frame.time_epoch",
    "frame.len",
    "frame.interface_id",
    "frame.comment",
    "frame.protocols",
    "eth.addr",
    "ip.addr",
    "udp.port",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.a",
    "infiniband.aeth.syndrome",
    "infiniband.reth.va",
    "infiniband.immdt",
    "roce.icrc.status",
    "_ws.col.Info",
    "frame.time_delta_displayed",
];

/// Display filters: none, one that keeps about half the frames, one that keeps
/// few (so that many chunks show nothing and time_delta_displayed spans them).
const FILTERS: &[Option<&str>] = &[
    None,
    Some("infiniband.aeth.syndrome"),
    Some("infiniband.aeth.syndrome >= 0x20 || infiniband.bth.psn == 0"),
];

/// `-j` values and chunk sizes compared with `-j 1`.
const SPLITS: &[(&str, &str)] = &[("2", "1"), ("2", "3"), ("4", "7"), ("4", "1")];

fn path_str(p: &Path) -> String {
    p.to_str().expect("utf-8 path").to_string()
}

fn args(base: &[&str], extra: &[String]) -> Vec<String> {
    base.iter().map(|s| s.to_string()).chain(extra.iter().cloned()).collect()
}

fn args_then(a: &[String], more: &[&str]) -> Vec<String> {
    a.iter().cloned().chain(more.iter().map(|s| s.to_string())).collect()
}

fn field_args(filter: Option<&str>) -> Vec<String> {
    let mut v: Vec<String> =
        FIELDS.iter().flat_map(|f| ["-e".to_string(), f.to_string()]).collect();
    if let Some(y) = filter {
        v.extend(["-Y".to_string(), y.to_string()]);
    }
    v
}

/// `roce ARGS -j 1` and `roce ARGS -j J --chunk-frames K`: the same stdout, stderr
/// and exit code.
fn same_as_one_thread(what: &str, a: &[String]) -> Run {
    let one = roce(&args_then(a, &["-j", "1"]));
    assert!(one.code == 0 || one.err.contains("before the error"), "{what}: {a:?}: {}", one.err);
    for (j, k) in SPLITS {
        let many = roce(&args_then(a, &["-j", j, "--chunk-frames", k]));
        assert_eq!(
            (one.code, &one.err),
            (many.code, &many.err),
            "{what}: -j {j} --chunk-frames {k}: {a:?}"
        );
        assert!(one.out == many.out, "{what}: -j {j} --chunk-frames {k} prints otherwise than -j 1: {a:?}\n--- -j 1\n{}\n--- -j {j}\n{}", one.out, many.out);
    }
    one
}

/// `decode -T parquet` at -j 1 and split: byte-identical files, same exit.
fn same_parquet(what: &str, file: &str, extra: &[String]) {
    let tmp = scratch();
    let (a, b) = (tmp.join("one.parquet"), tmp.join("many.parquet"));
    let run = |out: &Path, j: &str, k: &str| {
        let r = roce(&args(
            &[
                "decode",
                "-T",
                "parquet",
                "--row-group",
                "5",
                "-j",
                j,
                "--chunk-frames",
                k,
                "-w",
                &path_str(out),
                file,
            ],
            extra,
        ));
        (r.code, r.err, std::fs::read(out).ok())
    };
    let one = run(&a, "1", "4096");
    assert!(one.2.is_some(), "{what}: no Parquet file at -j 1: {}", one.1);
    for (j, k) in SPLITS {
        let many = run(&b, j, k);
        assert!(
            one == many,
            "{what}: -T parquet -j {j} --chunk-frames {k} differs from -j 1 ({extra:?}): {} / {}",
            one.1,
            many.1
        );
    }
}

/// `flows --parquet DIR` at -j 1 and split: the same two files, each split into a
/// directory of its own.
fn same_flow_parquet(what: &str, file: &str) {
    let tmp = scratch();
    let read =
        |d: &Path| ["flows.parquet", "events.parquet"].map(|f| std::fs::read(d.join(f)).ok());
    let one_dir = tmp.join("flows-one");
    let one = roce(&["flows", "-j", "1", "--parquet", &path_str(&one_dir), file]);
    for (j, k) in SPLITS {
        let tmp = scratch();
        let dir = tmp.join("flows-many");
        let many =
            roce(&["flows", "-j", j, "--chunk-frames", k, "--parquet", &path_str(&dir), file]);
        assert_eq!(one.code, many.code);
        assert!(
            read(&one_dir) == read(&dir),
            "{what}: flows --parquet -j {j} --chunk-frames {k} differs from -j 1"
        );
    }
}

fn every_output_the_same(what: &str, file: &str) {
    for flt in FILTERS {
        let fa = field_args(*flt);
        same_as_one_thread(what, &args(&["decode", "-T", "fields", file], &fa));
        same_parquet(what, file, &fa);
        let y: Vec<String> = flt.iter().flat_map(|y| ["-Y".to_string(), y.to_string()]).collect();
        same_as_one_thread(what, &args(&["flows", file], &y));
        same_as_one_thread(what, &args(&["flows", "--json", file], &y));
    }
    // -E options go through the same renderer, holes included.
    same_as_one_thread(
        what,
        &args(
            &[
                "decode",
                "-T",
                "fields",
                "-E",
                "header=y",
                "-E",
                "quote=d",
                "-E",
                "occurrence=l",
                "-E",
                "separator=;",
                file,
            ],
            &field_args(None),
        ),
    );
    same_flow_parquet(what, file);
}

#[test]
fn every_capture_gives_the_same_output_on_any_number_of_threads() {
    let caps = captures();
    assert!(caps.len() > 10);
    for c in &caps {
        let name = c.file_name().and_then(|n| n.to_str()).unwrap_or("?").to_string();
        every_output_the_same(&name, &path_str(c));
    }
}

fn host(last: u8) -> Host {
    Host {
        mac: dissector::wire::ethernet::Mac([0x02, 0, 0, 0, 0, last]),
        ip: std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 1, last)),
    }
}

/// One QP pair's traffic: WRITEs acknowledged, a lost packet answered by a PSN
/// Sequence Error NAK and resent (go-back-N), a SEND answered twice by an RNR NAK
/// before it is taken, a Remote Access Error NAK, and PSNs that wrap past 2^24.
fn qp_pair(i: u8) -> Vec<Timed> {
    let mut c = Conversation::between(host(1), 0x100 + u32::from(i), host(2), 0x200 + u32::from(i));
    // Near the top of the 24-bit PSN space: the exchange wraps.
    let start = Psn::new(0xFF_FFF0 + u32::from(i));
    c.a.psn = start;
    c.b.epsn = start;
    c.gap_ns = 1_000 + 100 * u64::from(i);
    c.mtu = 256;
    for round in 0..6u32 {
        let p = c.write(Dir::AtoB, 0x1000, 0x77, 64, None);
        c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
        // A 4-packet WRITE whose second packet is lost: NAK, go back, resend.
        let last = c.write_losing(Dir::AtoB, 0x2000, 0x77, 1024, 1);
        c.ack(Dir::BtoA, last, Syndrome::ACK, 1);
        // A SEND with no receive posted: RNR NAK twice, then taken.
        let p = c.send(Dir::AtoB, 32, Some(round));
        for _ in 0..2 {
            c.ack(Dir::BtoA, p, Syndrome::rnr_nak(12), 0);
            c.wait(640_000);
            c.rewind(Dir::AtoB, p);
            c.send(Dir::AtoB, 32, Some(round));
        }
        c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
        if round == 3 {
            let p = c.write(Dir::AtoB, 0x3000, 0xbad, 64, None);
            c.ack(Dir::BtoA, p, Syndrome::nak(2), 0);
        }
    }
    c.frames
}

/// Four QP pairs' traffic, interleaved by time: each flow's recoveries are spread
/// over many chunks and mixed with the others'.
fn interleaved_capture(path: &Path) {
    let mut frames: Vec<Timed> = (0..4).flat_map(qp_pair).collect();
    frames.sort_by_key(|t| t.ts_ns);
    let mut w =
        PcapWriter::new(std::fs::File::create(path).expect("create"), LinkType::ETHERNET, 65535)
            .expect("pcap header");
    for t in &frames {
        w.write_packet(t.ts_ns, &t.data, t.data.len() as u32).expect("write");
    }
    w.flush().expect("flush");
}

#[test]
fn flows_crossing_chunk_boundaries_are_analysed_as_in_one_pass() {
    let tmp = scratch();
    let p = tmp.join("interleaved.pcap");
    interleaved_capture(&p);
    let file = path_str(&p);
    let r = same_as_one_thread("interleaved", &["flows", "--json", &file].map(String::from));
    assert_eq!(r.code, 0, "{}", r.err);
    // The ground truth the chunks must not disturb: per requester flow, 6 lost
    // packets (one gap each), their go-back-N resends, 6 PSN Sequence Error NAKs,
    // 12 RNR NAKs, one Remote Access Error, and PSNs that wrapped.
    let v: serde_json::Value = serde_json::from_str(&r.out).expect("flows --json");
    let flows = v["flows"].as_array().expect("flows");
    let requesters: Vec<&serde_json::Value> =
        flows.iter().filter(|f| f["requests"].as_u64() > Some(0)).collect();
    assert_eq!(requesters.len(), 4, "{}", r.out);
    for f in requesters {
        assert_eq!(f["gaps"], 6, "{f}");
        assert_eq!(f["rnr_naks"], 12, "{f}");
        assert_eq!(
            f["naks"], 7,
            "6 PSN Sequence Errors and 1 Remote Access Error (RNR NAKs apart): {f}"
        );
        assert!(f["retransmissions"].as_u64() >= Some(6), "{f}");
        assert!(f["psn_first"].as_u64() > f["psn_last"].as_u64(), "the PSNs wrapped: {f}");
        assert!(f["paired_with"].is_number(), "{f}");
    }
    every_output_the_same("interleaved", &file);
    for k in ["2", "5", "64"] {
        let one = roce(&["flows", "-j", "1", &file]);
        let many = roce(&["flows", "-j", "3", "--chunk-frames", k, &file]);
        assert_eq!(one.out, many.out, "--chunk-frames {k}");
    }
}

#[test]
fn count_stops_at_the_same_frame() {
    let tmp = scratch();
    let p = tmp.join("count.pcap");
    interleaved_capture(&p);
    let file = path_str(&p);
    for c in ["1", "5", "17", "100000"] {
        same_as_one_thread(
            "-c",
            &args(&["decode", "-T", "fields", "-c", c, &file], &field_args(None)),
        );
        same_as_one_thread(
            "-c",
            &args(
                &["decode", "-T", "fields", "-c", c, &file],
                &field_args(Some("infiniband.aeth.syndrome")),
            ),
        );
        same_as_one_thread("-c", &["flows", "--json", "-c", c, &file].map(String::from));
        same_parquet("-c", &file, &args(&["-c", c], &field_args(None)));
    }
    let r = roce(&[
        "decode",
        "-T",
        "fields",
        "-e",
        "frame.number",
        "-j",
        "3",
        "--chunk-frames",
        "4",
        "-c",
        "17",
        &file,
    ]);
    assert_eq!(r.out.lines().count(), 17);
}

#[test]
fn a_damaged_file_fails_the_same_way_after_the_same_frames() {
    let tmp = scratch();
    let p = tmp.join("whole.pcap");
    interleaved_capture(&p);
    let bytes = std::fs::read(&p).expect("read");
    // Cut in the middle of a record far into the file, and in an early one.
    for cut in [bytes.len() * 2 / 3 + 7, 1000] {
        let d = tmp.join(format!("cut{cut}.pcap"));
        std::fs::write(&d, &bytes[..cut]).expect("write");
        let file = path_str(&d);
        let r = same_as_one_thread(
            "damaged",
            &args(&["decode", "-T", "fields", &file], &field_args(None)),
        );
        assert_eq!(r.code, 2, "a damaged file is bad input: {}", r.err);
        assert!(r.err.contains("frames were decoded before the error"), "{}", r.err);
        let f = same_as_one_thread("damaged", &["flows", &file].map(String::from));
        assert_eq!(f.code, 2);
        same_as_one_thread(
            "damaged",
            &args(
                &["decode", "-T", "fields", &file],
                &field_args(Some("infiniband.aeth.syndrome")),
            ),
        );
        same_parquet("damaged", &file, &field_args(None));
    }
}

#[test]
fn a_filter_reading_time_delta_displayed_stays_exact() {
    // Whether a frame is kept depends on what was kept before it: one thread
    // decides, whatever -j says.
    let file = path_str(&roce_tests::root().join("captures/rc_naks.pcap"));
    let mut a = field_args(None);
    a.extend([
        "-Y".into(),
        "frame.time_delta_displayed < 0.0001 || infiniband.aeth.syndrome".into(),
    ]);
    same_as_one_thread("delta filter", &args(&["decode", "-T", "fields", &file], &a));
}

#[test]
fn zero_jobs_is_refused() {
    let file = path_str(&roce_tests::root().join("captures/rc_naks.pcap"));
    for cmd in ["decode", "flows"] {
        let r = roce(&[cmd, "-j", "0", &file]);
        assert_eq!(r.code, 2, "{}", r.err);
        assert!(
            r.err.contains("--jobs") && r.err.contains("1..=256"),
            "says which option and what it takes: {}",
            r.err
        );
        assert!(r.out.is_empty());
    }
}
