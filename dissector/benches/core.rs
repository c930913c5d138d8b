//! `cargo bench -p dissector --bench core` — in-memory throughput of the core, no I/O:
//! frame decoding, `-T fields` formatting of the 13 benchmark fields, ICRC checks,
//! a display filter, and flow analysis. Prints figures; asserts nothing.
use std::time::Instant;

use dissector::craft::{Conversation, Dir};
use dissector::ctx::{Ctx, Shown};
use dissector::fields::{self, Field};
use dissector::flow::Analyzer;
use dissector::frame::{self, Options};
use dissector::wire::Syndrome;
use dissector::LinkType;

fn main() {
    let mut frames = Vec::new();
    let mut convs: Vec<Conversation> = (0..8u32)
        .map(|i| {
            let mut c = Conversation::new();
            c.a.qpn = 0x100 + i;
            c.b.qpn = 0x200 + i;
            c
        })
        .collect();
    let want: usize =
        std::env::var("CORE_BENCH_PACKETS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    while frames.len() < want {
        for c in convs.iter_mut() {
            c.frames.clear();
            let p = c.write(Dir::AtoB, 0x7f00_0000_0000, 0x1234, 64, None);
            c.ack(Dir::BtoA, p, Syndrome::ACK, 1);
            frames.append(&mut c.frames);
        }
    }
    if let Ok(path) = std::env::var("CORE_BENCH_DUMP") {
        let f = std::fs::File::create(&path).expect("create dump file");
        let mut w = dissector::capture::PcapWriter::new(
            std::io::BufWriter::new(f),
            LinkType::ETHERNET,
            65535,
        )
        .expect("pcap header");
        for f in &frames {
            w.write_packet(f.ts_ns, &f.data, f.data.len() as u32).expect("write");
        }
        w.flush().expect("flush");
        println!("wrote {} frames to {path}", frames.len());
    }
    // One contiguous buffer, as a file reader hands out slices of its read buffer.
    let mut arena = Vec::new();
    let mut spans = Vec::with_capacity(frames.len());
    for f in &frames {
        spans.push((arena.len(), arena.len() + f.data.len(), f.ts_ns));
        arena.extend_from_slice(&f.data);
    }
    drop(frames);
    struct F<'a> {
        data: &'a [u8],
        ts_ns: u64,
    }
    let frames: Vec<F<'_>> =
        spans.iter().map(|&(a, b, ts_ns)| F { data: &arena[a..b], ts_ns }).collect();
    let n = frames.len() as f64;
    let bytes: usize = frames.iter().map(|f| f.data.len()).sum();
    let opts = Options::default();
    let reps: usize =
        std::env::var("CORE_BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    println!(
        "{} packets, {} bytes; each stage run {reps} times, best and median shown",
        frames.len(),
        bytes
    );
    // Each stage runs `reps` times: the best run is the machine's speed, the median
    // shows how much a shared VM disturbs it.
    let measure = |what: &str, f: &mut dyn FnMut()| {
        let mut secs: Vec<f64> = (0..reps.max(1))
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .collect();
        secs.sort_by(f64::total_cmp);
        let (best, median) = (secs[0], secs[secs.len() / 2]);
        println!(
            "{what:<28} {:>7.1} ns/packet (median {:>6.1}) {:>8.2} M packets/s {:>8.0} MB/s",
            best * 1e9 / n,
            median * 1e9 / n,
            n / best / 1e6,
            bytes as f64 / best / 1e6
        );
    };

    let mut fr = frame::decode(LinkType::ETHERNET, &[], &opts);
    measure("decode_into (reused Frame)", &mut || {
        let mut roce = 0usize;
        for f in &frames {
            frame::decode_into(&mut fr, LinkType::ETHERNET, f.data, &opts);
            roce += fr.ib.is_some() as usize;
        }
        assert_eq!(roce, frames.len());
    });

    measure("decode + ICRC", &mut || {
        let mut ok = 0usize;
        for f in &frames {
            frame::decode_into(&mut fr, LinkType::ETHERNET, f.data, &opts);
            ok += fr.icrc_check(f.data).is_some_and(|c| c.ok()) as usize;
        }
        assert_eq!(ok, frames.len());
    });

    let names = [
        "frame.number",
        "ip.src",
        "ip.dst",
        "udp.srcport",
        "infiniband.bth.opcode",
        "infiniband.bth.destqp",
        "infiniband.bth.psn",
        "infiniband.bth.a",
        "infiniband.aeth.syndrome",
        "infiniband.aeth.msn",
        "infiniband.reth.va",
        "infiniband.reth.r_key",
        "infiniband.reth.dmalen",
    ];
    // Each field's own writer, as `roce decode -T fields` renders them.
    let writers: Vec<fields::Writer> =
        names.iter().map(|n| Field::lookup(n).unwrap().writer()).collect();
    let mut out = Vec::with_capacity(1 << 20);
    measure("decode + 13 fields", &mut || {
        for (i, f) in frames.iter().enumerate() {
            frame::decode_into(&mut fr, LinkType::ETHERNET, f.data, &opts);
            let c = Ctx {
                number: i as u64 + 1,
                ts_ns: f.ts_ns,
                first_ts_ns: 0,
                prev_ts_ns: 0,
                orig_len: f.data.len() as u32,
                interface: 0,
                data: f.data,
                frame: &fr,
                comment: None,
            };
            for (k, write) in writers.iter().enumerate() {
                if k > 0 {
                    out.push(b'\t');
                }
                write(&c, Shown::every(&c), &mut out);
            }
            out.push(b'\n');
            if out.len() > (1 << 20) - 512 {
                out.clear();
            }
        }
    });

    let filter = dissector::filter::Filter::compile("infiniband.bth.opcode == 0x11 && infiniband.aeth.syndrome >= 0x60 || ip.addr == 10.9.0.0/16")
        .expect("the benchmark filter compiles");
    measure("decode + display filter", &mut || {
        let mut kept = 0usize;
        for (i, f) in frames.iter().enumerate() {
            frame::decode_into(&mut fr, LinkType::ETHERNET, f.data, &opts);
            let c = Ctx {
                number: i as u64 + 1,
                ts_ns: f.ts_ns,
                first_ts_ns: 0,
                prev_ts_ns: 0,
                orig_len: f.data.len() as u32,
                interface: 0,
                data: f.data,
                frame: &fr,
                comment: None,
            };
            kept += filter.matches(&c) as usize;
        }
        assert_eq!(kept, 0, "no NAKs and no 10.9/16 in the benchmark traffic");
    });

    measure("decode + flow analysis", &mut || {
        let mut an = Analyzer::new();
        for (i, f) in frames.iter().enumerate() {
            frame::decode_into(&mut fr, LinkType::ETHERNET, f.data, &opts);
            an.add(i as u64 + 1, f.ts_ns, f.data.len() as u32, &fr, f.data);
        }
        assert_eq!(an.flows().len(), 16);
    });

    measure("flow fast path (roce flows)", &mut || {
        let mut an = Analyzer::new();
        for (i, f) in frames.iter().enumerate() {
            an.add_captured(
                i as u64 + 1,
                f.ts_ns,
                f.data.len() as u32,
                LinkType::ETHERNET,
                f.data,
                &opts,
                &mut fr,
            );
        }
        assert_eq!(an.flows().len(), 16);
    });
}
