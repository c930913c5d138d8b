//! `roce lab bench`: the lab's own numbers, measured on a lab booted for it.
//!
//! Owns: the measurements and the bench lab's life (booted for it, taken down by
//! [`DownOnDrop`]). Imports: [`lifecycle`](super::lifecycle) (`up`, `stop`),
//! [`progress`](super::progress), [`image`] (the
//! build), [`run`](super::run) (recorded runs), [`record`](super::record) (reading
//! the capture back), [`switch`](super::switch) (`parse_roce`), `state` and `vm`.
use std::time::{Duration, Instant};

use std::path::Path;

use anyhow::{bail, Result};

use super::image;
use super::lifecycle::{stop, up, UpOpts};
use super::progress::Progress;
use super::record::read_capture;
use super::run::{execute, RunPlan};
use super::state::LabPaths;
use super::switch::parse_roce;
use super::vm::Accel;

/// What `roce lab bench` measures.
pub struct BenchPlan {
    /// Messages and message size for the ib_write_bw throughput run.
    pub writes: u32,
    pub size: u32,
    pub accel: Accel,
    /// The image to measure (built first if it is not cached).
    pub image: image::Release,
}

/// The measurements, as (what, measured) rows in the order taken, and whether
/// the throughput run's capture was lossless.
pub struct BenchReport {
    pub rows: Vec<(String, String)>,
    pub lossless: bool,
}

/// Boots a lab of its own (`<name>-bench`), measures it, hands it to `more` for
/// measurements of the caller's (scenarios …), and takes it down.
pub fn measure(
    paths: &LabPaths,
    args: &BenchPlan,
    p: &Progress,
    more: impl FnOnce(&LabPaths, &Path) -> Result<Vec<(String, String)>>,
) -> Result<BenchReport> {
    let mut rows = image_rows(paths, args, p)?;

    let bench = LabPaths::new(&paths.root, &format!("{}-bench", paths.name))?;
    stop(&bench)?;
    let _guard = DownOnDrop(bench.clone());
    rows.push(boot(&bench, args, p)?);

    let dir = std::env::temp_dir().join(format!("roce-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    rows.push(pingpong(&bench, &dir, p)?);
    let lossless = write_bw(&bench, &dir, args, p, &mut rows)?;
    let extra = more(&bench, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    rows.extend(extra?);
    Ok(BenchReport { rows, lossless })
}

/// The image measured (built first if it is not cached): what it holds, and how
/// long its build took.
fn image_rows(paths: &LabPaths, args: &BenchPlan, p: &Progress) -> Result<Vec<(String, String)>> {
    let mut rows = Vec::new();
    let t = Instant::now();
    let (img, built) = image::build(
        &image::BuildOpts {
            root: paths.root.clone(),
            release: args.image,
            mirror: None,
            force: false,
        },
        p,
    )?;
    rows.push((
        "image".into(),
        format!(
            "{} (kernel {}, {})",
            args.image,
            img.manifest.kernel_release,
            img.manifest.describe_versions()
        ),
    ));
    rows.push((
        "image build".into(),
        if built {
            format!("{:.1} s (built now)", t.elapsed().as_secs_f64())
        } else {
            format!("{:.1} s (when built; cached now)", img.manifest.build_secs)
        },
    ));
    Ok(rows)
}

/// Boots the bench lab: how long until rxe0 is ACTIVE in both VMs.
fn boot(bench: &LabPaths, args: &BenchPlan, p: &Progress) -> Result<(String, String)> {
    let r = up(
        bench,
        &UpOpts {
            image: args.image,
            accel: args.accel,
            boot_timeout: Duration::from_secs(300),
            idle_timeout_min: 10,
            rules: vec![],
            seed: 1,
            wire: None,
        },
        p,
    )?;
    Ok((
        "boot of the pair".into(),
        format!(
            "{:.1} s to rxe0 ACTIVE on both ({:.1} s wall for `up`; {})",
            r.boot_ms.unwrap_or(0) as f64 / 1000.0,
            r.wall.as_secs_f64(),
            r.accel
        ),
    ))
}

/// A recorded run of `a` in VM a and `b` in VM b, its capture in `dir/file`.
fn plan(dir: &Path, a: &str, b: &str, file: &str) -> RunPlan {
    RunPlan {
        a: Some(a.into()),
        b: Some(b.into()),
        write: Some(dir.join(file)),
        timeout: Duration::from_secs(180),
        rules: vec![],
        seed: 1,
        delay: None,
        ready_timeout: Duration::from_secs(60),
        echo: false,
        on_wire: None,
    }
}

/// One short `lab run` (ibv_rc_pingpong): its wall time.
fn pingpong(bench: &LabPaths, dir: &Path, p: &Progress) -> Result<(String, String)> {
    p.say("run: ibv_rc_pingpong -g 1 -n 10");
    let o = execute(
        bench,
        plan(dir, "ibv_rc_pingpong -g 1 -n 10", "ibv_rc_pingpong -g 1 -n 10 {a}", "rc.pcapng"),
    )?;
    if !o.success() {
        bail!(
            "the ibv_rc_pingpong run failed: {:?}",
            o.sides.iter().map(|s| s.status.describe()).collect::<Vec<_>>()
        );
    }
    Ok((
        "one `lab run` (ibv_rc_pingpong -n 10)".into(),
        format!(
            "{:.1} s wall ({} frames, b waited {:.1} s for a to listen)",
            o.wall.as_secs_f64(),
            o.report.counters.received(),
            o.waited_for_listen.unwrap_or_default().as_secs_f64()
        ),
    ))
}

/// The switch under ib_write_bw: its frame rate and whether the capture holds
/// every frame (the result).
fn write_bw(
    bench: &LabPaths,
    dir: &Path,
    args: &BenchPlan,
    p: &Progress,
    rows: &mut Vec<(String, String)>,
) -> Result<bool> {
    let w = format!("ib_write_bw -d rxe0 -x 1 -s {} -n {} -F", args.size, args.writes);
    p.say(&format!("run: {w}"));
    let o = execute(bench, plan(dir, &w, &format!("{w} {{a}}"), "write_bw.pcapng"))?;
    if !o.success() {
        bail!(
            "the ib_write_bw run failed: {:?}",
            o.sides.iter().map(|s| (s.status.describe(), s.stderr.clone())).collect::<Vec<_>>()
        );
    }
    let c = o.report.counters;
    let (_, pkts) = read_capture(&dir.join("write_bw.pcapng")).map_err(anyhow::Error::msg)?;
    let opts = dissector::frame::Options::default();
    let roce: Vec<u64> =
        pkts.iter().filter(|p| parse_roce(&p.data, &opts).is_some()).map(|p| p.ts_ns).collect();
    let span_ns = match (roce.iter().min(), roce.iter().max()) {
        (Some(a), Some(b)) if b > a => b - a,
        _ => 0,
    };
    let rate = if span_ns > 0 { roce.len() as f64 / (span_ns as f64 / 1e9) } else { 0.0 };
    let lossless = o.report.socket_drops == 0
        && c.send_errors == 0
        && c.capture_complete()
        && pkts.len() as u64 == c.recorded;
    rows.push((
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
    rows.push(("ib_write_bw run wall time".into(), format!("{:.1} s", o.wall.as_secs_f64())));
    Ok(lossless)
}

/// Takes a lab down when dropped (also on error paths).
pub struct DownOnDrop(pub LabPaths);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        let _ = stop(&self.0);
    }
}
