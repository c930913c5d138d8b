//! `roce run SCENARIO…|DIR`: every file checked first (a bad one runs nothing), the
//! options settled into a [`RunPlan`], the scenarios run one after the other, each
//! result printed as it is judged, then the reports written.
//!
//! Owns: `roce run`'s options, their settling into a [`RunPlan`], and what is written
//! after the run. Imports: `crate::controller` (the run), `crate::render`,
//! `crate::results` (report, profile), the scenario model, the agent's key, live
//! capture options (`crate::net::live`), the lab's state, images and progress,
//! dissector's clock, `super::check`, `super::exit`.
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail};
use clap::Args;

use super::exit::{help, CommandResult, Exit, Failure};
use super::write_file;
use crate::bridge::client::Bridge;
use crate::controller::{self, Endpoints, RunPlan, WireSource};
use crate::render;
use crate::results::profile::{self, HeldTo, Profile};
use crate::results::snapshots::{Fields, Store};
use crate::results::Report;
use crate::scenario::model::Scenario;

/// Scenarios side by side on one lab, at most: each has its own agents in both
/// VMs and its own block of connection ports.
const MAX_JOBS: u16 = 16;

pub(super) const EXIT: &[(Exit, &str)] = &[
    (Exit::Ok, "every expectation held (scenarios the device cannot run skipped, said as such)"),
    (Exit::Failed, "some failed, or a scenario could not be carried out"),
    (Exit::BadInput, "bad scenario files, profile or options: nothing run"),
    (Exit::Setup, "no lab to run in, or an output that cannot be written: nothing run"),
    (Exit::Skipped, "with --fail-on-skip: a scenario was skipped, none failed"),
];

#[derive(Debug, Args)]
#[command(after_help = help(EXIT))]
pub struct RunArgs {
    /// Scenario files, or directories of them (every *.toml below, in name order)
    #[arg(required = true, value_name = "SCENARIO|DIR")]
    pub paths: Vec<PathBuf>,
    /// The lab to run in (booted if it is not up, reused if it is) [default: the
    /// image's own lab: `default` for bookworm, else the image's name]
    #[arg(long, value_name = "NAME", conflicts_with = "endpoints")]
    pub lab: Option<String>,
    /// The lab's VM image: bookworm (Linux 6.1, rdma-core 44), trixie (Linux 6.12,
    /// rdma-core 56) or trixie-backports (Linux 7.x, trixie's rdma-core 56)
    /// [default: the image the lab named by --lab is up with, else bookworm]
    #[arg(long, value_name = "bookworm|trixie|trixie-backports", conflicts_with = "endpoints")]
    pub image: Option<lab::image::Release>,
    /// The lab's cache directory [default: $ROCE_LAB_DIR or ~/.cache/roce/lab]
    #[arg(long, value_name = "DIR")]
    pub lab_dir: Option<PathBuf>,
    /// Agents on real hosts instead of the lab: `a=HOST:PORT,b=HOST:PORT`, each
    /// running `roce agent --listen HOST:PORT`
    #[arg(long, value_name = "EP=HOST:PORT,…")]
    pub endpoints: Option<String>,
    /// With --endpoints: the key the agents (and the bridge) were started with
    /// (`roce agent --key-file`); without it the agents must listen unauthenticated
    #[arg(long, value_name = "FILE", requires = "endpoints")]
    pub key_file: Option<PathBuf>,
    /// With --endpoints: a `roce bridge --listen HOST:PORT` stands in the wire
    /// between the hosts. It applies scenarios' [[fault]] rules and records
    /// each scenario's wire (no -i needed); it takes the same --key-file
    #[arg(long, value_name = "HOST:PORT", requires_all = ["endpoints", "key_file"], conflicts_with_all = ["iface", "pcap"])]
    pub bridge: Option<String>,
    /// With --endpoints: capture each scenario's wire on this interface (libpcap)
    #[arg(short = 'i', long = "interface", value_name = "IFACE", requires = "endpoints")]
    pub iface: Option<String>,
    /// The capture filter for -i
    #[arg(short = 'f', long = "filter", value_name = "FILTER", default_value = crate::net::live::DEFAULT_FILTER, requires = "iface")]
    pub filter: String,
    /// With --endpoints and one scenario: judge the wire from this capture (pcap or
    /// pcapng, e.g. from ibdump or tcpdump on a host), recorded while it ran
    #[arg(long, value_name = "FILE", requires = "endpoints", conflicts_with = "iface")]
    pub pcap: Option<PathBuf>,
    /// Each endpoint's agent captures its own host's RoCE traffic (libpcap on
    /// the device's interface, or the agent's --capture-command), and the two
    /// captures are merged by frame identity: the wire judged with --endpoints
    /// and no switch. Through a switch (the lab, --bridge) the merged capture is
    /// kept beside its recording (<scenario>.agents.pcapng). Each host's own
    /// capture is kept too (<scenario>.<endpoint>.pcapng)
    #[arg(long, conflicts_with_all = ["iface", "pcap"])]
    pub capture_at_agents: bool,
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
    ///
    /// In the lab, without it, results are held to the profile of the lab image's
    /// kernel (profiles/rxe-linux-<major.minor>.toml, found at or above the
    /// scenarios), when there is one; the first line says which
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Judge against IBA alone: no profile, not even the lab kernel's (a
    /// scenario that crashes the setup then runs, and crashes it)
    #[arg(long, conflicts_with = "profile")]
    pub no_profile: bool,
    /// Write what this setup did as a device profile (from every scenario carried
    /// out to the end), to compare later runs with --profile
    #[arg(long, value_name = "FILE")]
    pub record_profile: Option<PathBuf>,
    /// Only the summary line per scenario (failures still show their details)
    #[arg(long, short)]
    pub quiet: bool,
    /// Say where each scenario's time went (agent start, device open, setup,
    /// connection, steps, completions, memory, teardown, capture, judging) and,
    /// at the end, the mean per phase; the JSON report has them always
    #[arg(long)]
    pub timings: bool,
    /// Run up to N scenarios side by side on the lab. Each scenario's capture still
    /// holds only its own frames (told apart by its QPNs and connection ports);
    /// scenarios with [[fault]] rules, probes or timer checks run alone
    #[arg(short = 'j', long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=MAX_JOBS as i64))]
    pub jobs: u16,
    /// Exit 4 when a scenario was skipped (the device lacks a verb it needs) and
    /// none failed; by default a skip does not change the exit status
    #[arg(long)]
    pub fail_on_skip: bool,
    /// Only the scenarios and cases whose name matches: a glob over the whole
    /// name when PATTERN has `*` or `?` (`'*[op=read*'`), else a substring
    /// (`op=read`); letter case ignored. Repeat it for any of several
    #[arg(long = "case", value_name = "PATTERN")]
    pub cases: Vec<String>,
    /// Print the name of every scenario and case that would run (after --case),
    /// one a line, and run nothing
    #[arg(long)]
    pub list: bool,
    /// Keep each scenario's wire, in a normal form, in DIR (its path below the
    /// directory given, `.wire`) and compare every run with it: a change no
    /// expectation names fails as `wire changed`, with the diff, and the new wire
    /// is left beside as `.wire.new`. A scenario without one gets it
    #[arg(long, value_name = "DIR")]
    pub snapshots: Option<PathBuf>,
    /// With --snapshots (or a profile that names them): take this run's wire as
    /// the snapshot where it changed
    #[arg(long)]
    pub accept: bool,
    /// With --snapshots: fields the snapshots also show, comma-separated:
    /// `ip.dsfield` (DSCP and ECN), `udp.srcport` (by class: p1, p2, … as first
    /// seen). Snapshots kept with other fields are another form
    #[arg(long, value_name = "FIELDS", value_delimiter = ',')]
    pub snapshot_fields: Vec<String>,
}

/// `a=host:port,b=host:port`.
fn parse_endpoints(s: &str) -> anyhow::Result<BTreeMap<String, String>> {
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

/// `<dir>/<unix time>`: where captures go when `--out` is not given.
pub(super) fn timestamped(dir: &str) -> PathBuf {
    let secs = dissector::capture::unix_now().as_secs();
    PathBuf::from(dir).join(secs.to_string())
}

/// `--endpoints`, `--key-file` and `--bridge`: the real hosts' agents, the key
/// they were started with, and the bridge between them, each checked for its
/// shape (and the key read) before anything runs.
pub(super) fn remote_agents(
    endpoints: &str,
    key_file: Option<&Path>,
    bridge: Option<&str>,
) -> Result<controller::RemoteAgents, Failure> {
    let addrs = parse_endpoints(endpoints).map_err(Failure::input)?;
    let key = key_file.map(crate::agent::auth::Key::load).transpose().map_err(Failure::input)?;
    let bridge = match (bridge, &key) {
        (Some(addr), Some(k)) => Some(bridge_at(addr, k).map_err(Failure::input)?),
        _ => None,
    };
    Ok(controller::RemoteAgents { addrs, key, bridge })
}

/// `--bridge HOST:PORT`, checked for its shape (whether it answers is the
/// first scenario's to find out).
fn bridge_at(addr: &str, key: &crate::agent::auth::Key) -> anyhow::Result<Bridge> {
    match addr.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {
            Ok(Bridge::new(addr, key.clone()))
        }
        _ => bail!("--bridge {addr}: not HOST:PORT\nhint: where `roce bridge --listen HOST:PORT` serves, e.g. --bridge 192.0.2.9:7100"),
    }
}

/// The scenarios with `[[fault]]` rules, which need the lab's switch.
pub(super) fn with_faults(loaded: &[(PathBuf, Scenario)]) -> Vec<String> {
    loaded
        .iter()
        .filter(|(_, sc)| !sc.faults.is_empty())
        .map(|(f, _)| f.display().to_string())
        .collect()
}

/// The options, settled: every input checked before the lab is booted or anything
/// is written.
pub(super) fn plan(
    args: &RunArgs,
    loaded: &[(PathBuf, Scenario)],
    out_dir: PathBuf,
) -> Result<Planned, Failure> {
    if args.pcap.is_some() && loaded.len() != 1 {
        return Err(Failure::input(anyhow!(
            "roce run: --pcap holds the wire of one scenario, but {} were given\nhint: run them one at a time, or capture with -i IFACE or --capture-at-agents",
            loaded.len()
        )));
    }
    let remote = args
        .endpoints
        .as_deref()
        .map(|e| remote_agents(e, args.key_file.as_deref(), args.bridge.as_deref()))
        .transpose()?;
    if remote.is_some() && args.jobs > 1 {
        return Err(Failure::input(anyhow!(
            "roce run: -j {} runs scenarios side by side on the lab, whose switch tells their frames apart; an agent on a real host serves one controller at a time\nhint: leave out -j with --endpoints",
            args.jobs
        )));
    }
    if remote.is_some() && args.bridge.is_none() {
        let faults = with_faults(loaded);
        if !faults.is_empty() {
            return Err(Failure::input(anyhow!(
                "roce run: {} [[fault]] rules, which need a switch in the wire: {}; nothing was run\nhint: run them in the lab (no --endpoints), through a bridge between the hosts (--bridge HOST:PORT), or leave them out",
                if faults.len() == 1 { "a scenario has" } else { "scenarios have" },
                faults.join(", ")
            )));
        }
    }
    let snapshot_fields = Fields::parse(&args.snapshot_fields).map_err(|e| {
        Failure::input(anyhow!(
            "roce run: --snapshot-fields: {e}\nhint: --snapshot-fields ip.dsfield,udp.srcport"
        ))
    })?;
    let named = args.profile.as_deref().map(Profile::load).transpose().map_err(Failure::input)?;
    // Read once, before anything runs: its crashes are left out of the run, and
    // the profile recorded after it keeps its notes.
    let previous = args.record_profile.as_deref().map(previous_profile).transpose()?.flatten();
    // Before the lab boots: a run that does not fit is refused at once.
    let budget = controller::budget::Budget::here(&out_dir, remote.is_none());
    controller::budget::check(loaded, &out_dir, budget)
        .map_err(|e| Failure::input(anyhow!("roce run: {e}")))?;
    let remote_hosts = remote.is_some();
    let (endpoints, wire) = match remote {
        Some(r) => {
            let wire = match (&args.iface, &args.pcap, &args.bridge) {
                (_, _, Some(_)) => WireSource::Switch,
                _ if args.capture_at_agents => WireSource::Agents,
                (Some(i), _, _) => {
                    WireSource::Live { iface: i.clone(), filter: args.filter.clone() }
                }
                (None, Some(p), _) => WireSource::File(p.clone()),
                (None, None, None) => WireSource::None,
            };
            (Endpoints::Remote(r), wire)
        }
        None => (
            controller::lab_endpoints(args.lab_dir.clone(), args.lab.clone(), args.image)
                .map_err(Failure::setup)?,
            WireSource::Switch,
        ),
    };
    let (profile, held_to) = match (named, &endpoints) {
        (Some(p), _) => (Some(p), HeldTo::Named(args.profile.clone().unwrap_or_default())),
        (None, _) if args.no_profile => (None, HeldTo::Iba("--no-profile")),
        (None, _) if args.record_profile.is_some() => (None, HeldTo::Iba("recording a profile")),
        (None, _) if remote_hosts => (None, HeldTo::Iba("real hosts: --profile FILE names theirs")),
        (None, Endpoints::Lab(lab)) => lab_kernel_profile(lab, loaded)?,
        (None, _) => (None, HeldTo::Iba("no --profile")),
    };
    // What crashes this setup is not run: the profile's word for it, and the
    // word of the one about to be recorded again.
    let mut crashes = profile.as_ref().map(|p| p.crashes.clone()).unwrap_or_default();
    if let Some(prev) = &previous {
        crashes.extend(prev.crashes.clone());
    }
    // --snapshots, else the directory the profile names.
    let snapshots = args.snapshots.clone().or_else(|| profile.as_ref()?.snapshots_dir());
    if snapshots.is_none() && (args.accept || !args.snapshot_fields.is_empty()) {
        return Err(Failure::input(anyhow!(
            "roce run: {} keeps wire snapshots, but no directory was given for them\nhint: add --snapshots DIR (or name `snapshots = \"DIR\"` in the profile)",
            if args.accept { "--accept" } else { "--snapshot-fields" }
        )));
    }
    let snapshots = snapshots.map(|dir| {
        let named: Vec<(PathBuf, String)> =
            loaded.iter().map(|(f, sc)| (f.clone(), sc.name.clone())).collect();
        Store::new(dir, args.accept, &args.paths, &named)
    });
    let snapshots = snapshots.map(|mut s| {
        s.fields = snapshot_fields;
        s
    });
    let run = RunPlan {
        endpoints,
        wire,
        at_agents: args.capture_at_agents,
        out_dir,
        profile,
        jobs: usize::from(args.jobs),
        crashes,
        snapshots,
    };
    Ok(Planned { run, held_to, previous })
}

/// What [`plan`] settles, for [`execute`].
pub(super) struct Planned {
    run: RunPlan,
    /// What the results are held to (the first line printed).
    held_to: HeldTo,
    /// The profile `--record-profile` replaces, as it was read before the run
    /// (none without that option, or when its file is new).
    previous: Option<Profile>,
}

/// The profile of the lab image's kernel, found at or above the scenarios (or the
/// working directory), when there is one.
fn lab_kernel_profile(
    lab: &controller::LabRef,
    loaded: &[(PathBuf, Scenario)],
) -> Result<(Option<Profile>, HeldTo), Failure> {
    let img = lab::image::Image::open(&lab.paths.root, lab.image).map_err(Failure::setup)?;
    let kernel = img.manifest.kernel_release.clone();
    let mut near: Vec<PathBuf> = loaded.iter().map(|(f, _)| f.clone()).collect();
    near.extend(std::env::current_dir().ok());
    match profile::for_kernel(&kernel, &near) {
        Ok(path) => {
            let p = Profile::load(&path).map_err(Failure::input)?;
            Ok((Some(p), HeldTo::LabKernel { path, kernel }))
        }
        Err(looked_for) => Ok((None, HeldTo::NoProfileFor { kernel, looked_for })),
    }
}

/// The profile `--record-profile` is about to replace, for its notes: none if the
/// file is new; an error (before anything runs) if it is something else, which
/// would be lost.
fn previous_profile(path: &Path) -> Result<Option<Profile>, Failure> {
    if !path.exists() {
        return Ok(None);
    }
    Profile::load(path)
        .map(Some)
        .map_err(|e| Failure::input(e.context(format!("--record-profile {} would overwrite a file that is not a roce profile; nothing was run", path.display()))))
}

/// Runs what is loaded under `plan` and writes the reports `args` asks for.
pub(super) fn execute(
    args: &RunArgs,
    Planned { run: plan, held_to, previous }: &Planned,
    loaded: &[(PathBuf, Scenario)],
    out: &mut dyn Write,
) -> Result<Report, Failure> {
    writeln!(out, "{held_to}")?;
    let r = controller::run_all(plan, loaded, |res, wire| {
        render::text::scenario(out, res, args.quiet, wire)?;
        if args.timings {
            render::text::timings(out, res)?;
        }
        Ok(())
    })?;
    let report = r.report;
    if args.timings {
        render::text::timing_table(out, &report)?;
    }
    render::text::summary(out, &report, &plan.out_dir)?;
    if let Some(p) = &args.json {
        write_file(p, |w| serde_json::to_writer_pretty(w, &report).map_err(std::io::Error::other))?;
    }
    if let Some(p) = &args.junit {
        write_file(p, |w| w.write_all(render::junit::render(&report).as_bytes()))?;
    }
    if let (Some(p), false) = (&plan.profile, r.not_in_profile.is_empty()) {
        writeln!(
            out,
            "note: the {} profile does not know {} of these scenarios ({}): nothing to compare there",
            p.name,
            r.not_in_profile.len(),
            r.not_in_profile.join("; ")
        )?;
    }
    if let Some(path) = &args.record_profile {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "profile".into());
        let p = Profile::record(&name, &report, previous.as_ref());
        write_file(path, |w| w.write_all(render::profile::render(&p).as_bytes()))?;
        writeln!(
            out,
            "recorded the {} profile from {} scenarios: {}",
            p.name,
            p.scenario.len(),
            path.display()
        )?;
    }
    if let Some(p) = &args.html {
        let page = render::html::render_page(&report, None, &|i| {
            r.wires.get(i).and_then(Option::as_ref).map(std::borrow::Cow::Borrowed)
        })
        .0;
        write_file(p, |w| w.write_all(page.as_bytes()))?;
    }
    Ok(report)
}

/// How a run ends: a failure first, then a skip when it is asked to count.
pub(super) fn exit_of(r: &Report, fail_on_skip: bool) -> Exit {
    match (r.failed, r.skipped) {
        (0, 0) => Exit::Ok,
        (0, _) if fail_on_skip => Exit::Skipped,
        (0, _) => Exit::Ok,
        _ => Exit::Failed,
    }
}

/// `roce run`.
pub(super) fn run(args: RunArgs, out: &mut dyn Write, err: &mut dyn Write) -> CommandResult {
    let loaded = super::check::load(&args.paths, "roce run", err)?;
    let loaded = super::check::select(loaded, &args.cases, "roce run")?;
    if args.list {
        super::check::list(&loaded, out)?;
        return Ok(Exit::Ok);
    }
    let plan = plan(&args, &loaded, args.out.clone().unwrap_or_else(|| timestamped("roce-runs")))?;
    let report = execute(&args, &plan, &loaded, out)?;
    Ok(exit_of(&report, args.fail_on_skip))
}

/// `roce lab bench`'s scenario row, on the bench's own booted lab.
pub(super) fn bench_scenarios(
    lab: &lab::state::LabPaths,
    image: lab::image::Release,
    dir: &Path,
    tmp: &Path,
    p: &lab::Progress,
) -> anyhow::Result<Vec<(String, String)>> {
    controller::bench_scenarios(lab, image, dir, tmp, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_change_the_exit_only_when_asked() {
        let r = |failed, skipped| Report {
            scenarios: vec![],
            passed: 1,
            failed,
            skipped,
            duration_s: 0.0,
            profile: None,
        };
        assert_eq!(exit_of(&r(0, 0), true), Exit::Ok);
        assert_eq!(exit_of(&r(0, 2), false), Exit::Ok);
        assert_eq!(exit_of(&r(0, 2), true), Exit::Skipped);
        assert_eq!(exit_of(&r(1, 2), true), Exit::Failed, "a failure says more than a skip");
    }

    #[test]
    fn endpoints_parse_and_refuse() {
        let m = parse_endpoints("a=192.0.2.1:7000, b=host-b:7001").unwrap();
        assert_eq!(m["a"], "192.0.2.1:7000");
        assert_eq!(m["b"], "host-b:7001");
        assert!(parse_endpoints("a").unwrap_err().to_string().contains("ENDPOINT=HOST:PORT"));
        assert!(parse_endpoints("a=host").unwrap_err().to_string().contains("no port"));
        assert!(parse_endpoints(",").is_err());
    }
}
