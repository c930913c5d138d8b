//! `roce run SCENARIO.toml… | DIR`: carry out scenarios with real verbs between two
//! endpoints (the lab's VMs by default), record the wire, judge completions, wire and
//! memory together, and report.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;

use lab::state::LabPaths;
use crate::scenario::runner::{self, Endpoints};

/// Exit codes of `roce run` (also `roce check`).
pub mod exit {
    /// Every expectation of every scenario held.
    pub const PASSED: u8 = 0;
    /// At least one expectation failed, or a scenario could not be carried out.
    pub const FAILED: u8 = 1;
    /// Bad scenario files or options, or no lab to run in: nothing was run.
    pub const SETUP: u8 = 2;
}

#[derive(Debug, Args)]
#[command(after_help = "EXIT STATUS\n  0 every expectation held; 1 some failed (or a scenario could not be carried out); 2 bad scenario files or options: nothing run.")]
pub struct RunArgs {
    /// Scenario files, or directories of them (every *.toml below, in name order)
    #[arg(required = true, value_name = "SCENARIO|DIR")]
    pub paths: Vec<PathBuf>,
    /// The lab to run in (booted if it is not up, reused if it is)
    #[arg(long, value_name = "NAME", conflicts_with = "endpoints")]
    pub lab: Option<String>,
    /// The lab's cache directory [default: $ROCE_LAB_DIR or ~/.cache/roce/lab]
    #[arg(long, value_name = "DIR")]
    pub lab_dir: Option<PathBuf>,
    /// Agents on real hosts instead of the lab: `a=HOST:PORT,b=HOST:PORT`, each
    /// running `roce agent --listen HOST:PORT`
    #[arg(long, value_name = "EP=HOST:PORT,…")]
    pub endpoints: Option<String>,
    /// With --endpoints: capture each scenario's wire on this interface (libpcap)
    #[arg(short = 'i', long = "interface", value_name = "IFACE", requires = "endpoints")]
    pub iface: Option<String>,
    /// The capture filter for -i
    #[arg(short = 'f', long = "filter", value_name = "FILTER", default_value = crate::live::DEFAULT_FILTER, requires = "iface")]
    pub filter: String,
    /// With --endpoints and one scenario: judge the wire from this capture (pcap or
    /// pcapng, e.g. from ibdump or tcpdump on a host), recorded while it ran
    #[arg(long, value_name = "FILE", requires = "endpoints", conflicts_with = "iface")]
    pub pcap: Option<PathBuf>,
    /// Where to keep each scenario's capture (default: roce-runs/<time>)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Write the results as JSON
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the results as JUnit XML (for CI systems)
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write the results as one self-contained HTML page, with a ladder diagram of
    /// each scenario's wire
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Compare with a device profile (profiles/*.toml): where this setup does other
    /// than the profile recorded (another NAK, a CNP or none, …), the scenario fails
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Write what this setup did as a device profile (from every scenario carried
    /// out to the end), to compare later runs with --profile
    #[arg(long, value_name = "FILE")]
    pub record_profile: Option<PathBuf>,
    /// Only the summary line per scenario (failures still show their details)
    #[arg(long, short)]
    pub quiet: bool,
}

/// Every `*.toml` under the given paths, files as given, directories recursively in
/// name order.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("reading the directory {}", dir.display()))?
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out)?;
            } else if p.extension().is_some_and(|x| x == "toml") {
                out.push(p);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out)?;
        } else if p.exists() {
            out.push(p.clone());
        } else {
            bail!("{}: no such file or directory", p.display());
        }
    }
    if out.is_empty() {
        bail!("no scenario files (*.toml) in {}", paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "));
    }
    Ok(out)
}

/// `a=host:port,b=host:port`.
pub fn parse_endpoints(s: &str) -> Result<BTreeMap<String, String>> {
    let mut m = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, addr)) = part.split_once('=') else {
            bail!("--endpoints: `{part}` is not ENDPOINT=HOST:PORT\nhint: e.g. --endpoints a=192.0.2.1:7000,b=192.0.2.2:7000");
        };
        if !addr.contains(':') {
            bail!("--endpoints: `{addr}` (endpoint {name}) has no port\nhint: HOST:PORT, where `roce agent --listen HOST:PORT` runs");
        }
        m.insert(name.trim().to_string(), addr.trim().to_string());
    }
    if m.is_empty() {
        bail!("--endpoints is empty");
    }
    Ok(m)
}

/// `roce-runs/<unix time>`: where captures go when `--out` is not given.
pub fn default_out() -> PathBuf {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    PathBuf::from("roce-runs").join(secs.to_string())
}

/// Where the endpoints are: the lab (booted when needed) or real hosts.
pub fn endpoints(args: &RunArgs) -> Result<Endpoints> {
    if let Some(e) = &args.endpoints {
        return Ok(Endpoints::Remote(parse_endpoints(e)?));
    }
    let root = args.lab_dir.clone().unwrap_or_else(lab::default_root);
    let name = args
        .lab
        .clone()
        .or_else(|| std::env::var("ROCE_LAB_NAME").ok().filter(|n| !n.is_empty()))
        .unwrap_or_else(|| "default".into());
    let paths = LabPaths::new(&root, &name)?;
    if !paths.is_running() {
        boot_lab(&paths, &format!("lab `{name}` is not up: booting it (it stays up for later runs; `roce lab down` stops it)"))?;
    }
    Ok(Endpoints::Lab(paths))
}

fn boot_lab(paths: &LabPaths, why: &str) -> Result<()> {
    let p = lab::Progress::new(false);
    p.say(why);
    let opts = lab::UpOpts {
        accel: lab::vm::Accel::Auto,
        boot_timeout: std::time::Duration::from_secs(300),
        idle_timeout_min: 120,
        rules: vec![],
        seed: 1,
    };
    let up = lab::up(paths, &opts, &p)?;
    p.say(&up.describe(paths));
    Ok(())
}

/// Before a scenario: a lab whose VM died or hung during the last one (or that
/// went down) is brought back, so one broken VM fails one scenario, not the rest.
fn heal_lab(paths: &LabPaths) -> Result<()> {
    let why = if !paths.is_running() {
        "it is down".to_string()
    } else {
        match lab::client::request(paths, &lab::control::Request::Status) {
            Ok(st) if st["phase"] == "ready" => return Ok(()),
            Ok(st) => st["error"].as_str().map(|e| e.lines().next().unwrap_or(e).to_string()).unwrap_or_else(|| format!("it is {}", st["phase"])),
            Err(e) => format!("its daemon does not answer ({e:#})"),
        }
    };
    lab::stop(paths).with_context(|| format!("stopping the broken lab `{}`", paths.name))?;
    boot_lab(paths, &format!("lab `{}` is not usable ({why}): restarting it for the next scenario", paths.name))
}

/// The capture file of a scenario: `<out>/<file stem>.pcapng`, unique.
pub fn capture_path(out: &Path, file: &Path, taken: &mut BTreeMap<PathBuf, ()>) -> PathBuf {
    let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "scenario".into());
    let mut p = out.join(format!("{stem}.pcapng"));
    let mut i = 2;
    while taken.contains_key(&p) {
        p = out.join(format!("{stem}-{i}.pcapng"));
        i += 1;
    }
    taken.insert(p.clone(), ());
    p
}

/// Runs one loaded scenario: the outcome and how long it took.
pub fn run_one(sc: &crate::scenario::model::Scenario, eps: &Endpoints, capture: &Path) -> (runner::Outcome, f64) {
    let t = Instant::now();
    let cap = matches!(eps, Endpoints::Lab(_)).then(|| capture.to_path_buf());
    let o = runner::execute(sc, eps, cap);
    (o, t.elapsed().as_secs_f64())
}

/// A live capture to a pcapng file while a scenario runs on real hosts.
pub struct Recording {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    done: std::thread::JoinHandle<Result<u64>>,
}

impl Recording {
    /// Starts capturing on `iface`; returns once the capture is open.
    pub fn start(iface: &str, filter: &str, path: &Path) -> Result<Recording> {
        let opts = crate::live::LiveOptions { iface: iface.to_string(), filter: filter.to_string(), ..Default::default() };
        let path = path.to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        let done = std::thread::spawn(move || -> Result<u64> {
            let mut cap = match crate::live::LiveCapture::open(&opts) {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.send(Err(anyhow::anyhow!("{e}")));
                    return Ok(0);
                }
            };
            let _ = tx.send(Ok(cap.stop_handle()));
            let mut out = crate::output::PcapngOut::create(&path)?;
            let mut n = 0;
            while let Some(r) = cap.next_packet().map_err(|e| anyhow::anyhow!("{e}"))? {
                out.write(&r)?;
                n += 1;
            }
            out.commit()?;
            Ok(n)
        });
        let stop = rx.recv().map_err(|_| anyhow::anyhow!("the capture thread ended"))??;
        Ok(Recording { stop, done })
    }

    /// Stops the capture and publishes the file; the number of frames.
    pub fn finish(self) -> Result<u64> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.done.join().map_err(|_| anyhow::anyhow!("the capture thread panicked"))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_and_refuse() {
        let m = parse_endpoints("a=192.0.2.1:7000, b=host-b:7001").unwrap();
        assert_eq!(m["a"], "192.0.2.1:7000");
        assert_eq!(m["b"], "host-b:7001");
        assert!(parse_endpoints("a").unwrap_err().to_string().contains("ENDPOINT=HOST:PORT"));
        assert!(parse_endpoints("a=host").unwrap_err().to_string().contains("no port"));
        assert!(parse_endpoints(",").is_err());
    }

    #[test]
    fn discovery_is_recursive_sorted_and_says_what_is_missing() {
        let d = std::env::temp_dir().join(format!("roce-discover-{}", std::process::id()));
        std::fs::create_dir_all(d.join("sub")).unwrap();
        for f in ["b.toml", "a.toml", "notes.md", "sub/c.toml"] {
            std::fs::write(d.join(f), "").unwrap();
        }
        let found = discover(std::slice::from_ref(&d)).unwrap();
        let names: Vec<_> = found.iter().map(|p| p.strip_prefix(&d).unwrap().display().to_string()).collect();
        assert_eq!(names, ["a.toml", "b.toml", "sub/c.toml"]);
        assert!(discover(&[d.join("nope.toml")]).unwrap_err().to_string().contains("no such file"));
        assert!(discover(&[d.join("sub/c.toml")]).is_ok());
        std::fs::remove_dir_all(d.join("sub")).unwrap();
        for f in ["b.toml", "a.toml"] {
            std::fs::remove_file(d.join(f)).unwrap();
        }
        assert!(discover(std::slice::from_ref(&d)).unwrap_err().to_string().contains("no scenario files"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn capture_paths_are_unique() {
        let mut taken = BTreeMap::new();
        let out = Path::new("/r");
        assert_eq!(capture_path(out, Path::new("x/rc_send.toml"), &mut taken), Path::new("/r/rc_send.pcapng"));
        assert_eq!(capture_path(out, Path::new("y/rc_send.toml"), &mut taken), Path::new("/r/rc_send-2.pcapng"));
    }
}

/// One scenario's result, as the reports show it (`roce report` reads it back).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ScenarioResult {
    pub name: String,
    pub file: String,
    pub pass: bool,
    /// Why the run could not be carried out to the end.
    pub error: Option<String>,
    pub verdicts: Vec<crate::scenario::expect::Verdict>,
    pub capture: Option<String>,
    pub duration_s: f64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agent_logs: BTreeMap<String, String>,
    /// What each endpoint set up (device, GID, QPNs, MRs) and how each QP connected:
    /// the numbers to find in the capture.
    pub endpoints: BTreeMap<String, crate::scenario::runner::EndpointFacts>,
    pub connections: Vec<crate::scenario::runner::Connection>,
    /// The scenario's `[[fault]]` rules, as [`describe_fault`] words them.
    #[serde(default)]
    pub faults: Vec<String>,
    /// What this setup did, as a device profile records it.
    #[serde(default)]
    pub observations: BTreeMap<String, String>,
}

/// A `[[fault]]` rule for the reports: `drop psn=101 nth=1 (from a, QP q)`.
pub fn describe_fault(f: &crate::scenario::model::FaultSpec) -> String {
    let scope: Vec<String> = f.from.iter().map(|e| format!("from {e}")).chain(f.qp.iter().map(|q| format!("QP {q}"))).collect();
    if scope.is_empty() {
        f.rule.clone()
    } else {
        format!("{} ({})", f.rule, scope.join(", "))
    }
}

impl ScenarioResult {
    fn not_run(sc: &crate::scenario::model::Scenario, file: &Path, why: &str) -> ScenarioResult {
        ScenarioResult {
            name: sc.name.clone(),
            file: file.display().to_string(),
            pass: false,
            error: Some(why.to_string()),
            verdicts: Vec::new(),
            capture: None,
            duration_s: 0.0,
            agent_logs: BTreeMap::new(),
            endpoints: BTreeMap::new(),
            connections: Vec::new(),
            faults: sc.faults.iter().map(describe_fault).collect(),
            observations: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub scenarios: Vec<ScenarioResult>,
    pub passed: usize,
    pub failed: usize,
    pub duration_s: f64,
    /// The device profile the run was held to (`--profile`), by its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

fn xml_escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '"' => "&quot;".to_string(),
            '\'' => "&apos;".to_string(),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => " ".to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// JUnit XML: one testsuite, one testcase per scenario.
pub fn junit(r: &Report) -> String {
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!(
        "<testsuite name=\"roce run\" tests=\"{}\" failures=\"{}\" errors=\"0\" time=\"{:.3}\">\n",
        r.scenarios.len(),
        r.failed,
        r.duration_s
    ));
    for s in &r.scenarios {
        x.push_str(&format!("  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"", xml_escape(&s.file), xml_escape(&s.name), s.duration_s));
        if s.pass {
            x.push_str("/>\n");
            continue;
        }
        x.push_str(">\n");
        let mut text = String::new();
        if let Some(e) = &s.error {
            text.push_str(&format!("run: {e}\n"));
        }
        for v in s.verdicts.iter().filter(|v| !v.pass) {
            text.push_str(&format!("{}: expected {}; actual {}\n", v.what, v.expected, v.actual));
        }
        let first = text.lines().next().unwrap_or("failed").to_string();
        x.push_str(&format!("    <failure message=\"{}\">{}</failure>\n  </testcase>\n", xml_escape(&first), xml_escape(&text)));
    }
    x.push_str("</testsuite>\n");
    x
}

pub(crate) fn write_atomically(path: &Path, data: &[u8]) -> Result<()> {
    use std::io::Write as _;
    let mut f = dissector::capture::create_atomically(path).with_context(|| format!("creating {}", path.display()))?;
    f.write_all(data).with_context(|| format!("writing {}", path.display()))?;
    f.commit().with_context(|| format!("finishing {}", path.display()))?;
    Ok(())
}

/// Seed scenarios on a booted lab (`roce lab bench`): how many a minute, and what
/// each costs beyond its own traffic (the span from its first frame to its last on
/// the wire).
pub fn bench_scenarios(lab: &LabPaths, dir: &Path, tmp: &Path, p: &lab::Progress) -> Result<(String, String)> {
    let files = discover(&[dir.to_path_buf()])?;
    let eps = Endpoints::Lab(lab.clone());
    let (mut total, mut traffic, mut passed) = (0.0f64, 0.0f64, 0);
    for (i, f) in files.iter().enumerate() {
        let sc = crate::scenario::parse::load(f).map_err(|d| anyhow::anyhow!("{}", d[0]))?;
        p.say(&format!("scenario: {}", sc.name));
        let cap = tmp.join(format!("scenario-{i}.pcapng"));
        let (o, secs) = run_one(&sc, &eps, &cap);
        total += secs;
        if o.error.is_none() && crate::scenario::expect::evaluate(&sc, &o).iter().all(|v| v.pass) {
            passed += 1;
        }
        if let Ok((_, pkts)) = lab::record::read_capture(&cap) {
            if let (Some(a), Some(b)) = (pkts.iter().map(|x| x.ts_ns).min(), pkts.iter().map(|x| x.ts_ns).max()) {
                traffic += (b - a) as f64 / 1e9;
            }
        }
    }
    let n = files.len().max(1) as f64;
    Ok((
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

/// The decoded lines of a capture (for a failing scenario's report).
fn wire_lines(path: &Path, max: usize) -> Vec<String> {
    let Ok(mut r) = dissector::capture::open(path) else { return vec![] };
    let opts = dissector::frame::Options::default();
    let mut out = Vec::new();
    let mut first = None;
    while let Ok(Some(rec)) = r.next_packet() {
        if out.len() >= max {
            out.push("…".into());
            break;
        }
        let f = dissector::frame::decode(rec.link, rec.data, &opts);
        let first_ts = *first.get_or_insert(rec.ts_ns);
        let ctx = dissector::fields::Ctx::of(&rec, &f, first_ts, first_ts);
        let mut line = String::new();
        dissector::print::line(&ctx, &mut line);
        out.push(line);
    }
    out
}

/// Loads and checks every scenario file, in order: each problem goes to `err`,
/// `on_ok` sees each good file. `None` (after saying how many were bad) when any
/// was: then nothing may run. Shared by `roce check` and `roce run`.
pub fn load_all(
    files: &[PathBuf],
    err: &mut dyn std::io::Write,
    mut on_ok: impl FnMut(&Path, &crate::scenario::model::Scenario) -> std::io::Result<()>,
) -> Result<Option<Vec<(PathBuf, crate::scenario::model::Scenario)>>> {
    let mut loaded = Vec::new();
    let mut bad = 0;
    for f in files {
        match crate::scenario::parse::load(f) {
            Ok(sc) => {
                on_ok(f, &sc)?;
                loaded.push((f.clone(), sc));
            }
            Err(d) => {
                bad += 1;
                for x in d {
                    writeln!(err, "{x}")?;
                }
            }
        }
    }
    if bad > 0 {
        writeln!(err, "{bad} of {} scenario files have problems; nothing was run", files.len())?;
        return Ok(None);
    }
    Ok(Some(loaded))
}

/// `roce run`.
pub fn run(args: RunArgs, out: &mut dyn std::io::Write, err: &mut dyn std::io::Write) -> Result<u8> {
    let Some(loaded) = discover_and_load(&args.paths, "roce run", err)? else {
        return Ok(exit::SETUP);
    };
    execute_loaded(args, loaded, out, err).map(|(code, _)| code)
}

/// Every scenario under `paths`, loaded and checked before anything runs. `None`
/// (said on `err`, after `who: `) when there are none or any file is bad.
pub fn discover_and_load(
    paths: &[PathBuf],
    who: &str,
    err: &mut dyn std::io::Write,
) -> Result<Option<Vec<(PathBuf, crate::scenario::model::Scenario)>>> {
    match discover(paths) {
        Ok(files) => load_all(&files, err, |_, _| Ok(())),
        Err(e) => {
            writeln!(err, "{who}: {e:#}")?;
            Ok(None)
        }
    }
}

/// `roce run` over scenarios already loaded and checked (`args.paths` is not
/// looked at; `roce suite` picks what runs on real hosts from them), and the
/// report it made (none when nothing ran: exit 2).
pub fn execute_loaded(
    args: RunArgs,
    loaded: Vec<(PathBuf, crate::scenario::model::Scenario)>,
    out: &mut dyn std::io::Write,
    err: &mut dyn std::io::Write,
) -> Result<(u8, Option<Report>)> {
    if args.pcap.is_some() && loaded.len() != 1 {
        writeln!(err, "roce run: --pcap holds the wire of one scenario, but {} were given\nhint: run them one at a time, or capture with -i IFACE", loaded.len())?;
        return Ok((exit::SETUP, None));
    }
    let eps = match endpoints(&args) {
        Ok(e) => e,
        Err(e) => {
            writeln!(err, "roce run: {e:#}")?;
            return Ok((exit::SETUP, None));
        }
    };
    if let Endpoints::Remote(_) = eps {
        let with_faults: Vec<String> = loaded.iter().filter(|(_, sc)| !sc.faults.is_empty()).map(|(f, _)| f.display().to_string()).collect();
        if !with_faults.is_empty() {
            writeln!(
                err,
                "roce run: {} [[fault]] rules, which need the lab's switch: {}; nothing was run\nhint: run them in the lab (no --endpoints), or leave them out",
                if with_faults.len() == 1 { "a scenario has" } else { "scenarios have" },
                with_faults.join(", ")
            )?;
            return Ok((exit::SETUP, None));
        }
    }
    let profile = match args.profile.as_deref().map(crate::profile::Profile::load).transpose() {
        Ok(p) => p,
        Err(e) => {
            writeln!(err, "roce run: {e:#}")?;
            return Ok((exit::SETUP, None));
        }
    };
    let mut not_in_profile = Vec::new();
    let out_dir = args.out.clone().unwrap_or_else(default_out);
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let start = Instant::now();
    let mut taken = BTreeMap::new();
    let mut results = Vec::new();
    let mut lab_lost: Option<String> = None;
    for (i, (file, sc)) in loaded.iter().enumerate() {
        if let (Endpoints::Lab(paths), true, None) = (&eps, i > 0, &lab_lost) {
            if let Err(e) = heal_lab(paths) {
                writeln!(err, "roce run: the lab cannot be brought back: {e:#}")?;
                lab_lost = Some(format!("not run: the lab could not be brought back ({e:#})"));
            }
        }
        if let Some(why) = &lab_lost {
            let r = ScenarioResult::not_run(sc, file, why);
            print_result(out, &r, args.quiet)?;
            results.push(r);
            continue;
        }
        let cap = capture_path(&out_dir, file, &mut taken);
        let rec = match (&eps, &args.iface) {
            (Endpoints::Remote(_), Some(i)) => Some(Recording::start(i, &args.filter, &cap).with_context(|| format!("capturing on {i}"))?),
            _ => None,
        };
        let (mut o, secs) = run_one(sc, &eps, &cap);
        if let Some(p) = &args.pcap {
            o.capture = Some(p.clone());
        }
        if let Some(r) = rec {
            match r.finish() {
                Ok(_) => o.capture = Some(cap.clone()),
                Err(e) => {
                    o.error.get_or_insert(format!("the capture on {}: {e:#}", args.iface.as_deref().unwrap_or("?")));
                }
            }
        }
        let (mut verdicts, observations) = crate::scenario::expect::judge(sc, &o);
        if let Some(p) = &profile {
            match p.judge(&sc.name, &observations) {
                Some(v) => verdicts.extend(v),
                None => not_in_profile.push(sc.name.clone()),
            }
        }
        let pass = o.error.is_none() && verdicts.iter().all(|v| v.pass);
        let r = ScenarioResult {
            name: sc.name.clone(),
            file: file.display().to_string(),
            pass,
            error: o.error.clone(),
            verdicts,
            capture: o.capture.as_ref().map(|p| p.display().to_string()),
            duration_s: secs,
            agent_logs: o.agent_logs.clone(),
            endpoints: o.endpoints.clone(),
            connections: o.connections.clone(),
            faults: sc.faults.iter().map(describe_fault).collect(),
            observations,
        };
        print_result(out, &r, args.quiet)?;
        results.push(r);
    }
    let passed = results.iter().filter(|r| r.pass).count();
    let report = Report {
        failed: results.len() - passed,
        passed,
        scenarios: results,
        duration_s: start.elapsed().as_secs_f64(),
        profile: profile.as_ref().map(|p| p.name.clone()),
    };
    writeln!(out, "{} passed, {} failed ({} scenarios in {:.1} s); captures in {}", report.passed, report.failed, report.scenarios.len(), report.duration_s, out_dir.display())?;
    if let Some(p) = &args.json {
        write_atomically(p, &serde_json::to_vec_pretty(&report)?)?;
    }
    if let Some(p) = &args.junit {
        write_atomically(p, junit(&report).as_bytes())?;
    }
    if let (Some(p), false) = (&profile, not_in_profile.is_empty()) {
        writeln!(out, "note: the {} profile does not know {} of these scenarios ({}): nothing to compare there", p.name, not_in_profile.len(), not_in_profile.join("; "))?;
    }
    if let Some(path) = &args.record_profile {
        let p = record_profile(path, &report);
        write_atomically(path, p.to_toml().as_bytes())?;
        writeln!(out, "recorded the {} profile from {} scenarios: {}", p.name, p.scenario.len(), path.display())?;
    }
    if let Some(p) = &args.html {
        write_atomically(p, crate::html::render(&report).as_bytes())?;
    }
    Ok((if report.failed == 0 { exit::PASSED } else { exit::FAILED }, Some(report)))
}

/// A profile from a run: every scenario carried out to the end (one whose own
/// expectations failed included: a profile says what the setup does, not what
/// the spec wants), named after the file.
fn record_profile(path: &Path, r: &Report) -> crate::profile::Profile {
    let mut p = crate::profile::Profile {
        name: path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "profile".into()),
        ..Default::default()
    };
    let done: Vec<&ScenarioResult> = r.scenarios.iter().filter(|s| s.error.is_none()).collect();
    let mut devices = std::collections::BTreeSet::new();
    let mut kernels = std::collections::BTreeSet::new();
    for s in &done {
        for e in s.endpoints.values() {
            devices.insert(e.device.clone());
            kernels.extend(e.kernel.clone());
        }
        p.scenario.insert(s.name.clone(), s.observations.clone());
    }
    let join = |v: std::collections::BTreeSet<String>| v.into_iter().collect::<Vec<_>>().join(", ");
    p.recorded.insert("device".into(), join(devices));
    p.recorded.insert("kernel".into(), join(kernels));
    p.recorded.insert("roce".into(), env!("CARGO_PKG_VERSION").into());
    p.recorded.insert("date".into(), today());
    p
}

/// `YYYY-MM-DD` (UTC), from the system clock.
fn today() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    // Days to civil date (Howard Hinnant's algorithm).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn print_result(out: &mut dyn std::io::Write, r: &ScenarioResult, quiet: bool) -> Result<()> {
    let mark = if r.pass { "✓" } else { "✗" };
    writeln!(out, "{mark} {}  ({}, {:.1} s)", r.name, r.file, r.duration_s)?;
    if quiet && r.pass {
        return Ok(());
    }
    if let Some(e) = &r.error {
        writeln!(out, "    run stopped: {}", e.replace('\n', "\n    "))?;
    }
    for v in &r.verdicts {
        let m = if v.pass { "✓" } else { "✗" };
        if v.pass {
            writeln!(out, "    {m} {}: {}", v.what, v.actual)?;
        } else {
            writeln!(out, "    {m} {}\n        expected: {}\n        actual:   {}", v.what, v.expected, v.actual)?;
        }
        if let Some(d) = &v.detail {
            writeln!(out, "        note: {d}")?;
        }
    }
    if !r.pass {
        if let Some(c) = &r.capture {
            let lines = wire_lines(Path::new(c), 40);
            if !lines.is_empty() {
                writeln!(out, "    the wire ({c}):")?;
                for l in lines {
                    writeln!(out, "      {l}")?;
                }
            }
        }
        for (ep, log) in &r.agent_logs {
            writeln!(out, "    agent {ep} said: {}", log.trim().replace('\n', "\n      "))?;
        }
    }
    Ok(())
}
