//! `roce fuzz`: crafted requests into the lab's live QPs until a budget or a
//! duration is spent, or `--replay DIR`: every saved finding run again.
//!
//! Owns: `roce fuzz`'s options, their checking, the progress line and the
//! summary. Imports: `crate::fuzz` (the fuzzer), `crate::controller` (the lab's
//! endpoints, and the runs of `--replay`), `super::check`, `super::run`,
//! `super::exit`.
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;

use super::exit::{help, CommandResult, Exit, Failure};
use crate::controller::{self, RunPlan, WireSource};
use crate::fuzz::corpus::Corpus;
use crate::fuzz::{self, FuzzPlan, FuzzReport};
use crate::results::Status;

const EXIT: &[(Exit, &str)] = &[
    (Exit::Ok, "no finding (with --replay: no saved finding reproduces)"),
    (Exit::Failed, "findings (with --replay: a saved finding still reproduces)"),
    (Exit::BadInput, "bad options or a --replay directory without findings: nothing run"),
    (Exit::Setup, "no lab to run in, or an output that cannot be written"),
];

#[derive(Debug, Args)]
#[command(after_help = format!(
    "Each batch is a scenario: MRs `target` (every remote access) and `locked` (none) on\nb, QPs rc, uc, ud and rc_err (moved to ERR) on b probed from a, then a WRITE on a\nfresh QP. One probe draw in four sends a request message of a capture below\n--corpus (default ./captures), one packet changed. Oracles: memory (`locked`\nunchanged, nothing written outside any MR), kernel (oops, BUG, WARNING, KASAN,\nlockups on either console; a VM that dies), liveness (the fresh WRITE lands),\nprotocol (nothing answers what IBA drops). Each new finding is run 3 times\nmore (confirmed, or intermittent: seen 2 of 4 runs), minimised by delta\ndebugging (probes, then each probe's changes, then the QPs, MRs, windows, steps\nand expectations it shows without) and written as\nOUT/findings/<oracle>-<n>/finding.toml (+ .pcapng): `roce run` it; a kernel finding also as repro.c, a standalone C program (`roce repro`).\n\nOUTPUT (in --out)\n  fuzz.json     the run: executions, coverage cells, findings\n  findings/     each finding's scenario and capture\n  batches/      the last batch run, and its capture\n\n{}",
    help(EXIT)
))]
pub struct FuzzArgs {
    /// The seed every batch is drawn from: the same seed draws the same batches
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Stop after this long: `90s`, `30m`, `2h` (or seconds) [default: with no
    /// --budget, 10m]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Stop after this many batches
    #[arg(long, value_name = "N")]
    pub budget: Option<u64>,
    /// Crafted requests per batch
    #[arg(long, value_name = "N", default_value_t = fuzz::DEFAULT_BATCH as u16, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub batch: u16,
    /// Record each finding as first seen: no second run, no minimisation
    #[arg(long)]
    pub no_minimise: bool,
    /// Seed responder batches with the request messages of the captures below
    /// DIR (.pcap, .pcapng) [default: ./captures when there is one]
    #[arg(long, value_name = "DIR", conflicts_with = "no_corpus")]
    pub corpus: Option<PathBuf>,
    /// Draw every probe from the catalogue of opcodes, no captured message
    #[arg(long)]
    pub no_corpus: bool,
    /// Draw every batch afresh: no batch drawn from one that reached new rxe
    /// functions (the coverage is read and reported all the same)
    #[arg(long)]
    pub unguided: bool,
    /// Run every finding.toml below DIR (a fuzzing run's --out, or
    /// scenarios/findings) and say which still reproduce
    #[arg(long, value_name = "DIR", conflicts_with_all = ["duration", "budget", "no_minimise"])]
    pub replay: Option<PathBuf>,
    /// Where to write [default: roce-fuzz/<time>]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The lab to run in (booted if it is not up) [default: the image's own lab]
    #[arg(long, value_name = "NAME", conflicts_with = "endpoints")]
    pub lab: Option<String>,
    /// The lab's VM image: bookworm, trixie or trixie-backports [default: the image
    /// the lab named by --lab is up with, else bookworm]
    #[arg(long, value_name = "bookworm|trixie|trixie-backports", conflicts_with = "endpoints")]
    pub image: Option<lab::image::Release>,
    /// Fuzz real hosts instead of the lab: `a=HOST:PORT,b=HOST:PORT`, each running
    /// `roce agent --listen HOST:PORT --key-file FILE`. No kernel is read there:
    /// the device's async events, its counters and the agents' own liveness
    /// stand in for the kernel oracle
    #[arg(long, value_name = "EP=HOST:PORT,…", requires = "bridge")]
    pub endpoints: Option<String>,
    /// With --endpoints: the key the agents and the bridge were started with
    #[arg(long, value_name = "FILE", requires = "endpoints")]
    pub key_file: Option<PathBuf>,
    /// With --endpoints: the `roce bridge --listen HOST:PORT` standing in the
    /// wire between the hosts, which records each batch's wire (the probes'
    /// answers are judged from it) and applies requester batches' rules
    #[arg(long, value_name = "HOST:PORT", requires_all = ["endpoints", "key_file"])]
    pub bridge: Option<String>,
    /// The lab's cache directory [default: $ROCE_LAB_DIR or ~/.cache/roce/lab]
    #[arg(long, value_name = "DIR")]
    pub lab_dir: Option<PathBuf>,
    /// For the oracles' own tests: plant a fault every batch carries (a switch
    /// rule), which the oracle named must find
    #[arg(long, value_name = "protocol|liveness", hide = true, value_parser = parse_plant)]
    pub(crate) plant: Option<fuzz::gen::Plant>,
}

fn parse_plant(s: &str) -> Result<fuzz::gen::Plant, String> {
    match s {
        "protocol" => Ok(fuzz::gen::Plant::Protocol),
        "liveness" => Ok(fuzz::gen::Plant::Liveness),
        _ => Err(format!("`{s}`: plant `protocol` or `liveness`")),
    }
}

/// `90s`, `30m`, `2h`, `45` (seconds).
fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => (&t[..i], &t[i..]),
        None => (t, "s"),
    };
    let n: u64 =
        num.parse().map_err(|_| format!("`{s}` is not a duration: say `90s`, `30m` or `2h`"))?;
    let secs = match unit {
        "s" => n,
        "m" | "min" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (s, m or h)")),
    };
    if secs == 0 {
        return Err("a duration of 0 runs nothing".into());
    }
    Ok(Duration::from_secs(secs))
}

/// The real hosts of `--endpoints`, through `--bridge`, else the lab.
fn endpoints(a: &FuzzArgs) -> Result<controller::Endpoints, Failure> {
    match &a.endpoints {
        Some(e) => {
            let r = super::run::remote_agents(e, a.key_file.as_deref(), a.bridge.as_deref())?;
            Ok(controller::Endpoints::Remote(r))
        }
        None => controller::lab_endpoints(a.lab_dir.clone(), a.lab.clone(), a.image)
            .map_err(Failure::setup),
    }
}

/// `roce fuzz`.
pub(super) fn run(a: FuzzArgs, out: &mut dyn Write, err: &mut dyn Write) -> CommandResult {
    if let Some(dir) = &a.replay {
        return replay(&a, dir, out, err);
    }
    let dir = a.out.clone().unwrap_or_else(|| super::run::timestamped("roce-fuzz"));
    let corpus = match (&a.corpus, a.no_corpus) {
        (_, true) => Corpus::default(),
        (Some(dir), false) => {
            let c = Corpus::load(dir).map_err(Failure::input)?;
            if c.is_empty() {
                return Err(Failure::input(anyhow!(
                    "roce fuzz --corpus {}: no RC, UC or UD request message in its captures\nhint: give a directory of .pcap/.pcapng files with RoCE traffic, or --no-corpus",
                    dir.display()
                )));
            }
            c
        }
        (None, false) if Path::new("captures").is_dir() => {
            Corpus::load(Path::new("captures")).map_err(Failure::input)?
        }
        (None, false) => Corpus::default(),
    };
    let duration = match (a.duration, a.budget) {
        (None, None) => Some(Duration::from_secs(600)),
        (d, _) => d,
    };
    let endpoints = endpoints(&a)?;
    let plan = FuzzPlan {
        endpoints,
        seed: a.seed,
        budget: a.budget,
        duration,
        batch: usize::from(a.batch),
        minimise: !a.no_minimise,
        plant: a.plant,
        corpus,
        guided: !a.unguided,
    };
    // On a terminal, a live bar; otherwise (a CI log) a line every 10 batches.
    let bar = std::io::stderr().is_terminal().then(|| progress_bar(plan.budget, plan.duration));
    if let Some(b) = &bar {
        // A lab restart (after a crash) says so above the bar, not through it.
        let b = b.clone();
        lab::progress_to(move |line| b.println(line));
    }
    let report = fuzz::fuzz(&plan, &dir, |r, new| {
        let line = progress_line(r);
        let first = r.findings.len() - new.len();
        for (i, f) in new.iter().enumerate() {
            let said = format!(
                "finding {} ({}, {}): {}\n  {}",
                first + i + 1,
                f.oracle.name(),
                f.shown.describe(),
                f.signature,
                f.scenario.display()
            );
            match &bar {
                Some(b) => b.println(said),
                None => drop(writeln!(err, "{said}")),
            }
        }
        match &bar {
            Some(b) => {
                // Along the budget in batches, else along the duration in seconds.
                b.set_position(if plan.budget.is_some() { r.batches } else { r.elapsed_s as u64 });
                b.set_message(line);
            }
            None if r.batches % 10 == 0 => drop(writeln!(err, "{line}")),
            None => {}
        }
    })
    .map_err(Failure::setup);
    if let Some(b) = bar {
        lab::progress_to_stderr();
        b.finish_and_clear();
    }
    let report = report?;
    summary(&report, &dir, out)?;
    Ok(if report.findings.is_empty() { Exit::Ok } else { Exit::Failed })
}

/// The terminal's live bar: along `--budget` batches when there is one, else
/// along the duration; the time ticks on while a finding is minimised.
fn progress_bar(budget: Option<u64>, duration: Option<Duration>) -> indicatif::ProgressBar {
    let (len, template) = match budget {
        Some(n) => (n, "{spinner} {elapsed_precise} [{bar:24}] {pos}/{len} batches  {msg}"),
        None => (
            duration.map_or(0, |d| d.as_secs()),
            "{spinner} {elapsed_precise} [{bar:24}] {percent:>3}% of the time  {msg}",
        ),
    };
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}

fn progress_line(r: &FuzzReport) -> String {
    format!(
        "batch {}: {} executions, {:.2}/s, {} of {} cells, {} findings",
        r.batches,
        r.executions,
        r.executions_per_s,
        r.cells_reached,
        r.cells_total,
        r.findings.len()
    )
}

fn summary(r: &FuzzReport, dir: &Path, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "roce fuzz --seed {}: {} batches, {} executions in {:.0} s ({:.0} s of it minimising): {:.2} executions/s",
        r.seed, r.batches, r.executions, r.elapsed_s, r.minimise_s, r.executions_per_s
    )?;
    if !r.batch_ms.is_empty() {
        let mut parts = r.batch_ms.clone();
        parts.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        let total: f64 = parts.iter().map(|p| p.ms).sum();
        let each: Vec<String> = parts
            .iter()
            .filter(|p| p.ms >= 1.0)
            .map(|p| format!("{} {:.0}", p.part, p.ms))
            .collect();
        writeln!(out, "a batch's {total:.0} ms (mean): {}", each.join(", "))?;
    }
    if r.corpus_messages > 0 {
        writeln!(
            out,
            "seeds: {} request messages from {} captures",
            r.corpus_messages,
            r.corpus_files.len()
        )?;
    }
    writeln!(
        out,
        "coverage: {} of {} cells (opcode × change × QP) reached; {} never",
        r.cells_reached,
        r.cells_total,
        r.unreached.len()
    )?;
    match &r.rxe.off {
        None => writeln!(
            out,
            "rxe coverage (function tracer): {} of {} rdma_rxe functions reached, {} caller → callee pairs; {}",
            r.rxe.functions,
            r.rxe.traceable,
            r.rxe.edges,
            if r.rxe.guided {
                format!("{} batches kept for new ones, {} drawn from them", r.rxe.kept, r.rxe.drawn_from_kept)
            } else {
                "unguided".to_string()
            }
        )?,
        Some(why) => writeln!(out, "rxe coverage: none ({why})")?,
    }
    for f in &r.findings {
        writeln!(
            out,
            "finding ({}, {}): {}\n  {} item(s) kept after {} minimisation runs: {}\n  reproduce: roce run {}",
            f.oracle.name(),
            f.shown.describe(),
            f.signature,
            f.probes.len(),
            f.minimise_runs,
            f.probes.join("; "),
            f.scenario.display()
        )?;
        if let Some(l) = &f.setup_left_out {
            writeln!(out, "  left out of the batch's setup, not needed: {l}")?;
        }
        match &f.reproducer {
            Ok(c) => writeln!(
                out,
                "  in C, for upstream: {} (cc -o repro {} -libverbs)",
                c.display(),
                c.display()
            )?,
            Err(why) if f.oracle == fuzz::Oracle::Kernel => {
                writeln!(out, "  no C reproducer: {why}")?
            }
            Err(_) => {}
        }
    }
    if r.avoided > 0 {
        writeln!(
            out,
            "{} item(s) left out of later batches: each was a confirmed kernel finding's reproducer again",
            r.avoided
        )?;
    }
    for n in &r.not_run {
        writeln!(out, "not run: {n}")?;
    }
    writeln!(out, "{} findings; report: {}", r.findings.len(), dir.join("fuzz.json").display())
}

/// Every `finding.toml` below `dir`, run again: which still reproduce.
fn replay(a: &FuzzArgs, dir: &Path, out: &mut dyn Write, err: &mut dyn Write) -> CommandResult {
    let mut files = Vec::new();
    find_findings(dir, &mut files)
        .map_err(|e| Failure::input(anyhow!("roce fuzz --replay {}: {e}", dir.display())))?;
    files.sort();
    if files.is_empty() {
        return Err(Failure::input(anyhow!(
            "roce fuzz --replay {}: no finding.toml below it\nhint: give a fuzzing run's --out directory, or scenarios/findings",
            dir.display()
        )));
    }
    let loaded = super::check::load(&files, "roce fuzz --replay", err)?;
    let work = a.out.clone().unwrap_or_else(|| super::run::timestamped("roce-fuzz-replay"));
    let endpoints = endpoints(a)?;
    let plan = RunPlan {
        endpoints,
        wire: WireSource::Switch,
        at_agents: false,
        out_dir: work,
        profile: None,
        jobs: 1,
        crashes: Default::default(),
        snapshots: None,
    };
    let ran = controller::run_all(&plan, &loaded, |_, _| Ok(())).map_err(Failure::setup)?;
    let (mut still, mut unseen) = (0, 0);
    for r in &ran.report.scenarios {
        if r.status == Status::Skipped {
            let why = r.skip_reason.as_deref().unwrap_or("the device cannot run it");
            writeln!(out, "skipped           {}: {why}", r.file)?;
            continue;
        }
        // A finding records where the device differs from IBA: a deviation
        // shows it as much as a failure does.
        let reproduces = r.status != Status::Passed || r.verdicts.iter().any(|v| !v.held());
        still += usize::from(reproduces);
        // A run that stopped says why first: what a VM's kernel said, if it did.
        let stopped = r.error.as_ref().map(|e| {
            let kernel = e.lines().find(|l| l.starts_with("VM ") && l.contains("'s kernel: "));
            format!(": {}", kernel.or(e.lines().next()).unwrap_or(e))
        });
        let why = stopped
            .or_else(|| {
                r.verdicts.iter().find(|v| !v.held()).map(|v| format!(": {}: {}", v.what, v.actual))
            })
            .unwrap_or_default();
        let flaky = intermittent(Path::new(&r.file));
        match (reproduces, &flaky) {
            (true, None) => writeln!(out, "still reproduces  {}{why}", r.file)?,
            (true, Some(when)) => writeln!(
                out,
                "still reproduces  {} (intermittent, {when} when found){why}",
                r.file
            )?,
            (false, None) => writeln!(out, "fixed             {}", r.file)?,
            (false, Some(when)) => {
                unseen += 1;
                writeln!(
                    out,
                    "not seen this run {}: intermittent ({when} when found); run it several times before calling it fixed",
                    r.file
                )?
            }
        }
    }
    write!(out, "{still} of {} findings still reproduce", ran.report.scenarios.len())?;
    if unseen > 0 {
        write!(out, "; {unseen} intermittent one(s) not seen this run")?;
    }
    writeln!(out)?;
    Ok(if still > 0 { Exit::Failed } else { Exit::Ok })
}

/// `seen 2 of 4 runs` when the finding file says it was intermittent (its title
/// line, written by `roce fuzz`: `# Finding 3 (memory oracle, intermittent: seen 2 of 4 runs): …`).
fn intermittent(file: &Path) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    let title = text.lines().find(|l| l.starts_with("# Finding "))?;
    let (_, rest) = title.split_once("intermittent: ")?;
    rest.split_once(')').map(|(when, _)| when.to_string())
}

fn find_findings(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            find_findings(&p, out)?;
        } else if p.file_name().is_some_and(|n| n == "finding.toml") {
            out.push(p);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_file_says_whether_it_was_intermittent() {
        let dir = std::env::temp_dir().join(format!("roce-flaky-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("finding.toml");
        std::fs::write(
            &f,
            "# Finding 2 (memory oracle, intermittent: seen 2 of 4 runs): a WRITE\nname = \"x\"\n",
        )
        .unwrap();
        assert_eq!(intermittent(&f).as_deref(), Some("seen 2 of 4 runs"));
        std::fs::write(&f, "# Finding 1 (kernel oracle, confirmed): a panic\nname = \"x\"\n")
            .unwrap();
        assert_eq!(intermittent(&f), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("10 parsecs").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("soon").unwrap_err().contains("not a duration"));
    }
}
