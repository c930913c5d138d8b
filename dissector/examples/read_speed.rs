//! Read-speed micro benchmark for the capture reader.
//!
//! `cargo run --release -p dissector --example read_speed [PACKETS] [BYTES_PER_PACKET]`
//!
//! Writes a pcap (ns) and a pcapng file of PACKETS packets (default 1,000,000 of 128
//! bytes, a typical small RoCE frame) into the temp directory with our writers, then
//! reads each back through `capture::open` (file in the page cache) and from memory,
//! printing records/s and MB/s for the best of three passes. `READ_SPEED_BUFFER=BYTES`
//! overrides the reader's buffer size (default 1 MiB).
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dissector::capture::{self, create_atomically, OutPacket, PcapWriter, PcapngWriter, Reader};
use dissector::LinkType;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let packets: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1_000_000);
    let size: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(128);
    let dir = std::env::temp_dir();
    let pcap = dir.join(format!("read_speed-{}.pcap", std::process::id()));
    let pcapng = dir.join(format!("read_speed-{}.pcapng", std::process::id()));
    let frame: Vec<u8> = (0..size).map(|i| i as u8).collect();

    let t = Instant::now();
    let mut w = PcapWriter::new(create_atomically(&pcap)?, LinkType::ETHERNET, 65535)?;
    for i in 0..packets {
        w.write_packet(1_700_000_000_000_000_000 + i * 1000, &frame, size as u32)?;
    }
    w.into_inner()?.commit()?;
    let mut w = PcapngWriter::new(create_atomically(&pcapng)?, "read_speed")?;
    let a = w.add_interface(LinkType::ETHERNET, 0, Some("eth0"))?;
    let b = w.add_interface(LinkType::ETHERNET, 0, Some("eth1"))?;
    for i in 0..packets {
        let iface = if i % 2 == 0 { a } else { b };
        w.write_packet(&OutPacket::new(iface, 1_700_000_000_000_000_000 + i * 1000, &frame))?;
    }
    w.into_inner()?.commit()?;
    let wt = t.elapsed();
    let total_written = std::fs::metadata(&pcap)?.len() + std::fs::metadata(&pcapng)?.len();
    println!(
        "wrote {packets} packets of {size} bytes twice in {:.3} s ({:.1} M packets/s, {:.0} MB/s)",
        wt.as_secs_f64(),
        2.0 * packets as f64 / wt.as_secs_f64() / 1e6,
        total_written as f64 / wt.as_secs_f64() / 1e6
    );

    for path in [&pcap, &pcapng] {
        bench_file(path, packets)?;
        bench_memory(path, packets)?;
    }
    let _ = std::fs::remove_file(&pcap);
    let _ = std::fs::remove_file(&pcapng);
    Ok(())
}

fn report(what: &str, path: &Path, n: u64, bytes: u64, best: Duration) {
    let s = best.as_secs_f64();
    println!(
        "{:<8} {:<6} {n} records in {:.1} ms: {:.1} M records/s, {:.0} MB/s",
        path.extension().and_then(|e| e.to_str()).unwrap_or(""),
        what,
        s * 1e3,
        n as f64 / s / 1e6,
        bytes as f64 / s / 1e6
    );
}

fn drain<R: std::io::Read>(mut r: Reader<R>, expect: u64) -> Result<u64, capture::CaptureError> {
    let mut n = 0u64;
    let mut check = 0u64;
    while let Some(rec) = r.next_packet()? {
        n += 1;
        check = check.wrapping_add(rec.data.len() as u64 ^ rec.ts_ns);
    }
    assert_eq!(n, expect);
    Ok(std::hint::black_box(check))
}

fn bench_file(path: &PathBuf, packets: u64) -> Result<(), Box<dyn std::error::Error>> {
    let bytes = std::fs::metadata(path)?.len();
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        drain(
            Reader::with_options(
                std::io::BufReader::with_capacity(8192, std::fs::File::open(path)?),
                buffer(),
                None,
            )?,
            packets,
        )?;
        best = best.min(t.elapsed());
    }
    report("file", path, packets, bytes, best);
    Ok(())
}

fn bench_memory(path: &PathBuf, packets: u64) -> Result<(), Box<dyn std::error::Error>> {
    let data = std::fs::read(path)?;
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        drain(Reader::with_options(&data[..], buffer(), None)?, packets)?;
        best = best.min(t.elapsed());
    }
    report("memory", path, packets, data.len() as u64, best);
    Ok(())
}

fn buffer() -> usize {
    std::env::var("READ_SPEED_BUFFER")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(capture::DEFAULT_BUFFER)
}
