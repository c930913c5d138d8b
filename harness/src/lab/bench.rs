//! `roce lab bench`: the lab's own numbers, measured.
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;

use super::record::read_capture;
use super::run::{execute, RunArgs};
use super::state::LabPaths;
use super::switch::parse_roce;
use super::vm::Accel;
use super::{image, up, Progress, UpOpts};

/// Measure the lab (boots its own lab `<name>-bench`, takes it down after).
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Messages for the ib_write_bw throughput run
    #[arg(long, default_value_t = 5000)]
    pub writes: u32,
    /// Message size for the ib_write_bw run
    #[arg(long, default_value_t = 64)]
    pub size: u32,
    #[arg(long, value_enum, default_value = "auto")]
    pub accel: Accel,
    /// Scenarios to time on the booted lab (skipped if the directory is missing)
    #[arg(long, default_value = "scenarios", value_name = "DIR")]
    pub scenarios: std::path::PathBuf,
}

struct Row(String, String);

pub fn run(paths: &LabPaths, args: BenchArgs) -> Result<u8> {
    let p = Progress::new(false);
    let mut rows = Vec::new();

    let t = Instant::now();
    let (img, built) = image::build(&image::BuildOpts { root: paths.root.clone(), mirror: None, force: false }, &p)?;
    rows.push(Row(
        "image build".into(),
        if built {
            format!("{:.1} s (built now)", t.elapsed().as_secs_f64())
        } else {
            format!("{:.1} s (when built; cached now)", img.manifest.build_secs)
        },
    ));

    let bench = LabPaths::new(&paths.root, &format!("{}-bench", paths.name))?;
    super::stop(&bench)?;
    let _guard = DownOnDrop(bench.clone());
    let r = up(&bench, &UpOpts { accel: args.accel, boot_timeout: Duration::from_secs(300), idle_timeout_min: 10, rules: vec![], seed: 1 }, &p)?;
    rows.push(Row(
        "boot of the pair".into(),
        format!(
            "{:.1} s to rxe0 ACTIVE on both ({:.1} s wall for `up`; {})",
            r.boot_ms.unwrap_or(0) as f64 / 1000.0,
            r.wall.as_secs_f64(),
            r.accel
        ),
    ));

    let dir = std::env::temp_dir().join(format!("roce-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let one = |a: &str, b: &str, file: &str| RunArgs {
        a: Some(a.into()),
        b: Some(b.into()),
        write: Some(dir.join(file)),
        timeout: 180,
        fault: vec![],
        faults: None,
        seed: None,
        delay: None,
        ready_timeout: 60,
        wire: false,
        quiet: true,
        json: false,
    };
    p.say("run: ibv_rc_pingpong -g 1 -n 10");
    let o = execute(&bench, &one("ibv_rc_pingpong -g 1 -n 10", "ibv_rc_pingpong -g 1 -n 10 {a}", "rc.pcapng"), &[], 1)?;
    if !o.success() {
        bail!("the ibv_rc_pingpong run failed: {:?}", o.sides.iter().map(|s| s.status.describe()).collect::<Vec<_>>());
    }
    rows.push(Row(
        "one `lab run` (ibv_rc_pingpong -n 10)".into(),
        format!(
            "{:.1} s wall ({} frames, b waited {:.1} s for a to listen)",
            o.wall.as_secs_f64(),
            o.report.counters.received(),
            o.waited_for_listen.unwrap_or_default().as_secs_f64()
        ),
    ));

    let w = format!("ib_write_bw -d rxe0 -x 1 -s {} -n {} -F", args.size, args.writes);
    p.say(&format!("run: {w}"));
    let o = execute(&bench, &one(&w, &format!("{w} {{a}}"), "write_bw.pcapng"), &[], 1)?;
    if !o.success() {
        bail!("the ib_write_bw run failed: {:?}", o.sides.iter().map(|s| (s.status.describe(), s.stderr.clone())).collect::<Vec<_>>());
    }
    let c = o.report.counters;
    let (_, pkts) = read_capture(&dir.join("write_bw.pcapng")).map_err(anyhow::Error::msg)?;
    let opts = dissector::frame::Options::default();
    let roce: Vec<u64> = pkts.iter().filter(|p| parse_roce(&p.data, &opts).is_some()).map(|p| p.ts_ns).collect();
    let span_ns = match (roce.iter().min(), roce.iter().max()) {
        (Some(a), Some(b)) if b > a => b - a,
        _ => 0,
    };
    let rate = if span_ns > 0 { roce.len() as f64 / (span_ns as f64 / 1e9) } else { 0.0 };
    let lossless = o.report.socket_drops == 0 && c.send_errors == 0 && c.capture_complete() && pkts.len() as u64 == c.recorded;
    rows.push(Row(
        format!("switch under ib_write_bw (-s {} -n {})", args.size, args.writes),
        format!(
            "{rate:.0} RoCE frames/s over {:.2} s ({} RoCE of {} frames); capture {} frames = counters {}; socket drops {}; send errors {} → {}",
            span_ns as f64 / 1e9,
            roce.len(),
            c.received(),
            pkts.len(),
            c.recorded,
            o.report.socket_drops,
            c.send_errors,
            if lossless { "no loss" } else { "LOSS" }
        ),
    ));
    rows.push(Row("ib_write_bw run wall time".into(), format!("{:.1} s", o.wall.as_secs_f64())));
    if args.scenarios.is_dir() {
        rows.push(scenarios(&bench, &args.scenarios, &dir, &p)?);
    }
    let _ = std::fs::remove_dir_all(&dir);

    println!("roce lab bench ({} cores on this host)", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0));
    let width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    for Row(k, v) in &rows {
        println!("  {k:width$}  {v}");
    }
    Ok(if lossless { 0 } else { 1 })
}

/// Takes a lab down when dropped (also on error paths).
pub struct DownOnDrop(pub LabPaths);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        let _ = super::stop(&self.0);
    }
}

/// Seed scenarios on the booted lab: how many a minute, and what each costs beyond
/// its own traffic (the span from its first frame to its last on the wire).
fn scenarios(lab: &LabPaths, dir: &std::path::Path, tmp: &std::path::Path, p: &Progress) -> Result<Row> {
    let files = crate::run::discover(&[dir.to_path_buf()])?;
    let eps = crate::scenario::runner::Endpoints::Lab(lab.clone());
    let (mut total, mut traffic, mut passed) = (0.0f64, 0.0f64, 0);
    for (i, f) in files.iter().enumerate() {
        let sc = crate::scenario::parse::load(f).map_err(|d| anyhow::anyhow!("{}", d[0]))?;
        p.say(&format!("scenario: {}", sc.name));
        let cap = tmp.join(format!("scenario-{i}.pcapng"));
        let (o, secs) = crate::run::run_one(&sc, &eps, &cap);
        total += secs;
        if o.error.is_none() && crate::scenario::expect::evaluate(&sc, &o).iter().all(|v| v.pass) {
            passed += 1;
        }
        if let Ok((_, pkts)) = read_capture(&cap) {
            if let (Some(a), Some(b)) = (pkts.iter().map(|x| x.ts_ns).min(), pkts.iter().map(|x| x.ts_ns).max()) {
                traffic += (b - a) as f64 / 1e9;
            }
        }
    }
    let n = files.len().max(1) as f64;
    Ok(Row(
        format!("seed scenarios ({})", dir.display()),
        format!(
            "{} in {total:.1} s = {:.0} scenarios/min ({passed} passed); per scenario {:.2} s, of which {:.2} s beyond its own traffic",
            files.len(),
            files.len() as f64 / total * 60.0,
            total / n,
            (total - traffic) / n
        ),
    ))
}
