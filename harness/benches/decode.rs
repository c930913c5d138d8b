//! `cargo bench -p roce --bench decode` — prints figures, asserts nothing.
//!
//! Generates a 1,000,000-packet RoCEv2 file (RDMA WRITE Only + ACK over 8 QPs), then
//! times, as separate processes writing to /dev/null:
//! - `roce decode -T fields` with the 13 fields below, and tshark with the same fields
//! - `roce decode -T parquet` with the same fields (the write speed of typed columns)
//!   on the same file (the ratio is printed);
//! - the same with `-Y "infiniband.aeth.syndrome != 0"`, ours and tshark's;
//! - `roce flows`;
//! - each `roce` command on every core (the default) and with `-j 1`;
//! - on a ~1 GB file (`ROCE_BENCH_BIG=0` skips it): `-j` scaling (1, 2 and every
//!   core) of `flows`, `-T fields` and `-T parquet`, and their peak RSS.
//!
//! Each command runs `ROCE_BENCH_RUNS` times (default 5, tshark once: it takes ~30 s)
//! and the best and median runs are shown: on a shared VM one run can be 30% off.
//!
//! Environment: `ROCE_BENCH_PACKETS` (default 1000000), `ROCE_BENCH_BIG_PACKETS`
//! (default 10000000, ≈ 1 GB), `ROCE_BENCH_RUNS` (default 5), `ROCE_BENCH_KEEP=1`
//! (keep the generated file and print its path, e.g. to count instructions under
//! callgrind).
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// The display filter timed with `-Y`: on the bench file it keeps the ACKs (syndrome
/// 0x1F) and drops the WRITEs (no AETH), half the lines.
const FILTER: &str = "infiniband.aeth.syndrome != 0";

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

/// Runs the command `runs` times: best and median wall time, largest peak RSS.
struct Runs {
    best: f64,
    median: f64,
    max_rss_kib: libc::c_long,
}

fn runs(n: u64, mut cmd: impl FnMut() -> Command) -> Runs {
    let mut ms: Vec<Measure> = (0..n.max(1)).map(|_| run(&mut cmd())).collect();
    ms.sort_by(|a, b| a.secs.total_cmp(&b.secs));
    Runs {
        best: ms[0].secs,
        median: ms[ms.len() / 2].secs,
        max_rss_kib: ms.iter().map(|m| m.max_rss_kib).max().unwrap_or(0),
    }
}

fn print_runs(what: &str, r: &Runs, packets: u64, mb: f64) {
    println!(
        "{what:<34} {:>7.3} s {:>7.2} M packets/s {:>7.1} MB/s  (median {:.3} s, {:.2} M packets/s)  peak RSS {:.1} MiB",
        r.best,
        packets as f64 / r.best / 1e6,
        mb / r.best,
        r.median,
        packets as f64 / r.median / 1e6,
        mib(r.max_rss_kib)
    );
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
    roce::cli::bench_file(&file, packets).expect("generate bench file");
    settle(&file);
    let mb = std::fs::metadata(&file).expect("bench file").len() as f64 / 1e6;
    println!("generated {packets} packets ({mb:.1} MB) in {:.1} s", t.elapsed().as_secs_f64());

    let n = env_u64("ROCE_BENCH_RUNS", 5);
    println!("each roce command run {n} times: best run, then the median");
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    println!("{cores} cores: the default -j uses them all");
    let ours = runs(n, || decode_fields(&file, None, &[]));
    print_runs("roce decode -T fields (13 fields):", &ours, packets, mb);
    let ours_1 = runs(n, || decode_fields(&file, Some(1), &[]));
    print_runs("  the same, -j 1:", &ours_1, packets, mb);
    let pq = dir.join("bench.parquet");
    let parquet = runs(n, || decode_parquet(&file, &pq, None));
    print_runs("roce decode -T parquet (13 fields):", &parquet, packets, mb);
    println!(
        "  Parquet file: {:.1} MB ({:.1} bytes per packet, Snappy)",
        std::fs::metadata(&pq).map_or(0.0, |m| m.len() as f64 / 1e6),
        std::fs::metadata(&pq).map_or(0.0, |m| m.len() as f64) / packets as f64
    );
    let parquet_1 = runs(n, || decode_parquet(&file, &pq, Some(1)));
    print_runs("  the same, -j 1:", &parquet_1, packets, mb);
    let flows = runs(n, || flows_cmd(&file, None));
    print_runs("roce flows:", &flows, packets, mb);
    let flows_1 = runs(n, || flows_cmd(&file, Some(1)));
    print_runs("  the same, -j 1:", &flows_1, packets, mb);
    let have_tshark = Command::new("tshark")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if have_tshark {
        let theirs = runs(1, || {
            let mut c = Command::new("tshark");
            c.args(["-n", "-r"]).arg(&file).args(["--disable-protocol", "rpcordma"]);
            with_fields(&mut c);
            c
        });
        print_runs("tshark -T fields (13 fields):", &theirs, packets, mb);
        print_ratio("roce decode -T fields", &theirs, &ours, &ours_1);
        // The same with the display filter users type most on RoCE captures.
        let ours_y = runs(n, || decode_fields(&file, None, &["-Y", FILTER]));
        print_runs("roce decode -Y … -T fields:", &ours_y, packets, mb);
        let ours_y1 = runs(n, || decode_fields(&file, Some(1), &["-Y", FILTER]));
        print_runs("  the same, -j 1:", &ours_y1, packets, mb);
        let theirs_y = runs(1, || {
            let mut c = Command::new("tshark");
            c.args(["-n", "-r"]).arg(&file).args(["--disable-protocol", "rpcordma", "-Y", FILTER]);
            with_fields(&mut c);
            c
        });
        print_runs("tshark -Y … -T fields:", &theirs_y, packets, mb);
        print_ratio(&format!("with -Y \"{FILTER}\", roce"), &theirs_y, &ours_y, &ours_y1);
    } else {
        println!("tshark not installed: no ratio (apt-get install tshark)");
    }
    if env_u64("ROCE_BENCH_KEEP", 0) == 1 {
        println!("kept {}", file.display());
    } else {
        let _ = std::fs::remove_file(&file);
    }

    if env_u64("ROCE_BENCH_BIG", 1) == 0 {
        return;
    }
    let big_packets = env_u64("ROCE_BENCH_BIG_PACKETS", 10_000_000);
    let big = dir.join("bench-big.pcap");
    roce::cli::bench_file(&big, big_packets).expect("generate big file");
    settle(&big);
    let big_mb = std::fs::metadata(&big).map(|m| m.len()).unwrap_or(0) as f64 / 1e6;
    println!("{big_mb:.0} MB file ({big_packets} packets), -j scaling (one run each):");
    println!("| command | -j | seconds | M packets/s | peak RSS MiB |");
    println!("|---|---|---|---|---|");
    let mut js = vec![1, 2, cores];
    js.dedup();
    let big_pq = dir.join("bench-big.parquet");
    for (what, cmd) in [
        ("roce flows", &(|j| flows_cmd(&big, Some(j))) as &dyn Fn(usize) -> Command),
        ("roce decode -T fields", &|j| decode_fields(&big, Some(j), &[])),
        ("roce decode -T parquet", &|j| decode_parquet(&big, &big_pq, Some(j))),
    ] {
        for &j in &js {
            let m = run(&mut cmd(j));
            println!(
                "| `{what}` | {j} | {:.2} | {:.2} | {:.1} |",
                m.secs,
                big_packets as f64 / m.secs / 1e6,
                mib(m.max_rss_kib)
            );
        }
    }
    let _ = std::fs::remove_file(&big_pq);
    let _ = std::fs::remove_file(&big);
}

/// Writes a generated file out to disk before anything is timed: otherwise the
/// kernel's writeback of its dirty pages takes CPU from the first runs.
fn settle(file: &Path) {
    std::fs::File::open(file).and_then(|f| f.sync_all()).expect("sync the bench file");
}

/// `roce decode -T fields` with the 13 fields, `-j jobs` (default: every core).
fn decode_fields(file: &Path, jobs: Option<usize>, extra: &[&str]) -> Command {
    let mut c = roce();
    c.arg("decode").args(extra);
    with_jobs(with_fields(&mut c), jobs).arg(file);
    c
}

/// `roce decode -T parquet` with the 13 fields into `out`.
fn decode_parquet(file: &Path, out: &Path, jobs: Option<usize>) -> Command {
    let mut c = roce();
    c.args(["decode", "-T", "parquet", "-w"]).arg(out);
    for f in FIELDS {
        c.args(["-e", f]);
    }
    with_jobs(&mut c, jobs).arg(file);
    c
}

fn flows_cmd(file: &Path, jobs: Option<usize>) -> Command {
    let mut c = roce();
    c.arg("flows");
    with_jobs(&mut c, jobs).arg(file);
    c
}

fn with_jobs(cmd: &mut Command, jobs: Option<usize>) -> &mut Command {
    if let Some(j) = jobs {
        cmd.args(["-j", &j.to_string()]);
    }
    cmd
}

/// How many times tshark's speed ours are, every core and `-j 1`.
fn print_ratio(what: &str, theirs: &Runs, ours: &Runs, ours_1: &Runs) {
    println!(
        "ratio: {what} is {:.0}x tshark's speed (best run; {:.0}x at the median); with -j 1 {:.0}x ({:.0}x)",
        theirs.best / ours.best,
        theirs.best / ours.median,
        theirs.best / ours_1.best,
        theirs.best / ours_1.median
    );
}
