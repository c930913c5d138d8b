//! `cargo bench -p roce --bench decode` — prints figures, asserts nothing.
//!
//! Generates a 1,000,000-packet RoCEv2 file (RDMA WRITE Only + ACK over 8 QPs), then
//! times, as separate processes writing to /dev/null:
//! - `roce decode -T fields` with the 13 fields below, and tshark with the same fields
//!   on the same file (the ratio is printed);
//! - `roce flows`;
//! - the peak RSS of both `roce` commands on a ~1 GB file (`ROCE_BENCH_BIG=0` skips it).
//!
//! Environment: `ROCE_BENCH_PACKETS` (default 1000000), `ROCE_BENCH_BIG_PACKETS`
//! (default 10000000, ≈ 1 GB).
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const FIELDS: &[&str] = &[
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

struct Measure {
    secs: f64,
    max_rss_kib: libc::c_long,
}

/// Runs `cmd` with stdout to /dev/null: its wall time and peak RSS (wait4 reports the
/// resources of exactly the child it reaps).
fn run(cmd: &mut Command) -> Measure {
    let t = Instant::now();
    let child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet reaped; the pointers are to live locals.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(r, pid, "wait4 failed");
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{cmd:?} failed: {status}");
    drop(child); // already reaped; dropping a Child neither waits nor kills
    Measure { secs, max_rss_kib: ru.ru_maxrss }
}

fn roce() -> Command {
    Command::new(env!("CARGO_BIN_EXE_roce"))
}

fn with_fields(cmd: &mut Command) -> &mut Command {
    cmd.args(["-T", "fields"]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    cmd
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn mib(kib: libc::c_long) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let packets = env_u64("ROCE_BENCH_PACKETS", 1_000_000);
    let file = dir.join(format!("bench-{packets}.pcap"));
    let t = Instant::now();
    roce::craft::bench_file(&file, packets).expect("generate bench file");
    let mb = std::fs::metadata(&file).expect("bench file").len() as f64 / 1e6;
    println!("generated {packets} packets ({mb:.1} MB) in {:.1} s", t.elapsed().as_secs_f64());

    let ours = run(with_fields(roce().arg("decode")).arg(&file));
    println!(
        "roce decode -T fields (13 fields): {:>7.2} s {:>8.3} M packets/s {:>7.1} MB/s  peak RSS {:.1} MiB",
        ours.secs,
        packets as f64 / ours.secs / 1e6,
        mb / ours.secs,
        mib(ours.max_rss_kib)
    );
    let flows = run(roce().arg("flows").arg(&file));
    println!(
        "roce flows:                        {:>7.2} s {:>8.3} M packets/s {:>7.1} MB/s  peak RSS {:.1} MiB",
        flows.secs,
        packets as f64 / flows.secs / 1e6,
        mb / flows.secs,
        mib(flows.max_rss_kib)
    );
    let have_tshark = Command::new("tshark").arg("--version").stdout(Stdio::null()).status().is_ok_and(|s| s.success());
    if have_tshark {
        let mut cmd = Command::new("tshark");
        cmd.args(["-n", "-r"]).arg(&file).args(["--disable-protocol", "rpcordma"]);
        let theirs = run(with_fields(&mut cmd));
        println!(
            "tshark -T fields (13 fields):      {:>7.2} s {:>8.3} M packets/s {:>7.1} MB/s  peak RSS {:.1} MiB",
            theirs.secs,
            packets as f64 / theirs.secs / 1e6,
            mb / theirs.secs,
            mib(theirs.max_rss_kib)
        );
        println!("ratio: roce decode -T fields is {:.0}x tshark's speed", theirs.secs / ours.secs);
    } else {
        println!("tshark not installed: no ratio (apt-get install tshark)");
    }
    let _ = std::fs::remove_file(&file);

    if env_u64("ROCE_BENCH_BIG", 1) == 0 {
        return;
    }
    let big_packets = env_u64("ROCE_BENCH_BIG_PACKETS", 10_000_000);
    let big = dir.join("bench-big.pcap");
    roce::craft::bench_file(&big, big_packets).expect("generate big file");
    let big_mb = std::fs::metadata(&big).map(|m| m.len()).unwrap_or(0) as f64 / 1e6;
    let f = run(roce().arg("flows").arg(&big));
    let d = run(with_fields(roce().arg("decode")).arg(&big));
    println!(
        "{big_mb:.0} MB file ({big_packets} packets): roce flows {:.1} s, peak RSS {:.1} MiB; roce decode -T fields {:.1} s, peak RSS {:.1} MiB",
        f.secs,
        mib(f.max_rss_kib),
        d.secs,
        mib(d.max_rss_kib)
    );
    let _ = std::fs::remove_file(&big);
}
