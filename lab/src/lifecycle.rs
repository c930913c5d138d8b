//! Bringing a lab up and down: `up` starts the daemon (`roce lab __daemon`, see
//! [`daemon`](crate::daemon)) in its own session and waits until both VMs are ready;
//! `stop`/`down` ask it to go and clean up after one that crashed; `status` asks it how
//! it is. `usable` and `heal` judge a lab from one answer of its daemon (a private
//! `Health`), never from two that could disagree.
//!
//! Owns: a lab's [`Definition`] (what every restart brings back), [`UpOpts`], [`up`],
//! [`heal`], [`usable`], [`down`], [`stop`], [`status`], [`all_labs`], [`lab_paths`].
//! Imports: [`client`](crate::client) (the control socket), [`control`](crate::control),
//! [`image`](crate::image), [`progress`](crate::progress), [`state`](crate::state),
//! [`vm`](crate::vm), and [`fault`](crate::fault)'s rules.
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::control::Request;
use crate::progress::Progress;
use crate::state::{self, default_root, own_image, Flock, LabPaths, Vm};
use crate::tap::WireKind;
use crate::vm::Accel;
use crate::{client, fault, image};

/// The lab named `name` (default: $ROCE_LAB_NAME, else the image's own lab:
/// `default` for bookworm, else the image's name) under the cache directory `dir`
/// (default: [`default_root`]).
pub fn lab_paths(
    dir: Option<PathBuf>,
    name: Option<String>,
    image: image::Release,
) -> Result<LabPaths> {
    let root = dir.unwrap_or_else(default_root);
    let name = name
        .or_else(|| std::env::var("ROCE_LAB_NAME").ok().filter(|n| !n.is_empty()))
        .unwrap_or_else(|| image.default_lab().into());
    LabPaths::new(&root, &name)
}

/// What a lab is: its image, its standing fault rules and their seed, and how long
/// it may stay idle. `up` keeps it in the lab's directory when it boots the lab;
/// every restart (by `roce lab up`, `run`, `suite` or `fuzz`, after a VM died or hung)
/// brings the lab back exactly as it says, and `roce lab down` forgets it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Definition {
    pub image: image::Release,
    /// Standing fault rules: applied to every frame while the lab is up.
    pub rules: Vec<fault::Rule>,
    /// The seed of the rules' draws (`prob`, `jitter`).
    pub seed: u64,
    pub idle_timeout_min: u64,
    /// What joins the VMs to the switch (a definition from before there was a
    /// choice: the UDP wire).
    #[serde(default)]
    pub wire: WireKind,
}

impl Definition {
    /// A lab with no standing rules, idle for at most two hours: what `roce run`
    /// boots when it finds no lab.
    pub fn plain(image: image::Release) -> Definition {
        Definition { image, rules: Vec::new(), seed: 1, idle_timeout_min: 120, wire: WireKind::Udp }
    }

    /// "with its 2 standing fault rules (seed 3)", or "" for a lab without any.
    pub fn with_rules(&self) -> String {
        match self.rules.len() {
            0 => String::new(),
            1 => format!(" with its standing fault rule (seed {})", self.seed),
            n => format!(" with its {n} standing fault rules (seed {})", self.seed),
        }
    }

    /// The definition the lab `paths` was last booted with, unless it was taken
    /// down since (or never booted). One that cannot be read is an error, not a
    /// plain lab: a restart must not quietly drop the rules it was given.
    pub fn remembered(paths: &LabPaths) -> Result<Option<Definition>> {
        let path = paths.definition();
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("reading the lab's definition {}", path.display()))
            }
        };
        serde_json::from_slice(&text).map(Some).map_err(|e| {
            anyhow::anyhow!(
                "the lab's definition {} is unreadable: {e}\nhint: `roce lab --name {} down` forgets it (and its standing rules); then `roce lab up --fault …` defines the lab again",
                path.display(),
                paths.name
            )
        })
    }

    fn remember(&self, paths: &LabPaths) -> Result<()> {
        let json = serde_json::to_vec_pretty(self).context("the lab's definition")?;
        dissector::capture::write_whole(&paths.definition(), |w| {
            use std::io::Write;
            w.write_all(&json)
        })
        .with_context(|| {
            format!("keeping the lab's definition in {}", paths.definition().display())
        })
    }
}

pub struct UpOpts {
    /// The image both VMs boot.
    pub image: image::Release,
    pub accel: Accel,
    pub boot_timeout: Duration,
    pub idle_timeout_min: u64,
    /// Standing fault rules and their seed. None: the lab is booted as it was last
    /// defined (its [`Definition::remembered`]), so a lab that crashed or timed
    /// out comes back with the rules it was given.
    pub rules: Vec<fault::Rule>,
    pub seed: u64,
    /// The wire asked for; `None`: as the lab was last defined (else UDP).
    pub wire: Option<WireKind>,
}

impl UpOpts {
    /// How `roce run`, `suite` and `fuzz` boot a lab they need: with whatever it
    /// was last defined as (plain if it never was).
    pub fn for_runs(image: image::Release) -> UpOpts {
        let plain = Definition::plain(image);
        UpOpts {
            image,
            accel: Accel::Auto,
            boot_timeout: Duration::from_secs(300),
            idle_timeout_min: plain.idle_timeout_min,
            rules: plain.rules,
            seed: plain.seed,
            wire: None,
        }
    }

    /// The definition a boot with these options gives `paths`: the options' own
    /// when they set rules, else the one the lab was last booted with (for this
    /// image).
    fn definition(&self, paths: &LabPaths) -> Result<Definition> {
        let asked = Definition {
            image: self.image,
            rules: self.rules.clone(),
            seed: self.seed,
            idle_timeout_min: self.idle_timeout_min,
            wire: self.wire.unwrap_or_default(),
        };
        let Some(mut was) = Definition::remembered(paths)?.filter(|d| d.image == self.image) else {
            return Ok(asked);
        };
        if !asked.rules.is_empty() {
            (was.rules, was.seed, was.idle_timeout_min) =
                (asked.rules, asked.seed, asked.idle_timeout_min);
        }
        if let Some(w) = self.wire {
            was.wire = w;
        }
        Ok(was)
    }
}

/// What `up` found or did.
pub struct UpReport {
    pub already_up: bool,
    pub boot_ms: Option<u64>,
    pub wall: Duration,
    pub accel: String,
    pub recovered: Vec<String>,
    pub image: image::Release,
    /// The image's kernel release.
    pub kernel: String,
    /// What the lab is now (for one already up: what it was booted with).
    pub definition: Definition,
}

impl UpReport {
    pub fn describe(&self, paths: &LabPaths) -> String {
        let mut s = String::new();
        for r in &self.recovered {
            s.push_str(&format!("recovered a stale lab: {r}\n"));
        }
        let boot = self
            .boot_ms
            .map(|ms| format!("{:.1} s", ms as f64 / 1000.0))
            .unwrap_or_else(|| "?".into());
        if self.already_up {
            s.push_str(&format!(
                "lab `{}` ({}, kernel {}) was already up (booted in {boot}; {})",
                paths.name, self.image, self.kernel, self.accel
            ));
        } else {
            s.push_str(&format!(
                "lab `{}` ({}, kernel {}) up: booted in {boot} ({})",
                paths.name, self.image, self.kernel, self.accel
            ));
        }
        let wire = match self.definition.wire {
            WireKind::Udp => "wire recorded by the switch",
            WireKind::Tap => "wire: a host tap per VM, recorded by the switch between them",
            WireKind::Bench => "wire: a host tap per VM and nothing between them (a bench: stand `roce bridge` on the taps); agents listen on 127.0.0.1, see `roce lab status`",
        };
        s.push_str(&format!(
            "\n  a: {}  b: {}  — rxe0 ACTIVE, GID index 1 = ::ffff:<ip> on both; {wire}",
            Vm::A.ip(),
            Vm::B.ip()
        ));
        for r in &self.definition.rules {
            s.push_str(&format!("\n  standing fault rule (seed {}): {r}", self.definition.seed));
        }
        s
    }
}

/// How a lab is, judged from one answer of its daemon (see [`classify`]), so that
/// one decision never sees it in two states.
#[derive(Debug, PartialEq)]
enum Health {
    /// Its daemon is not running.
    Down,
    /// Both VMs are ready: it takes work.
    Usable,
    /// Its daemon is still booting the VMs: to be waited for, not restarted.
    Booting,
    /// Stopping (or in a phase this build does not know): not usable, yet not
    /// broken either. Says how it is.
    Stopping(String),
    /// A VM died or hung after boot, or its daemon does not answer: beyond waiting
    /// for. Says what is wrong.
    Broken(String),
}

impl Health {
    /// `Err` says why a lab so is not usable.
    fn usable(self) -> std::result::Result<(), String> {
        match self {
            Health::Usable => Ok(()),
            Health::Down => Err("it is down".to_string()),
            Health::Booting => Err("it is booting".to_string()),
            Health::Stopping(why) | Health::Broken(why) => Err(why),
        }
    }
}

/// What the daemon of the lab `paths` answers when asked for its status: `None`
/// when it is down (no daemon running), `Err` when it does not answer.
fn ask(paths: &LabPaths) -> Option<Result<serde_json::Value>> {
    paths.is_running().then(|| client::request(paths, &Request::Status))
}

/// The lab's health from its daemon's answer to one status request ([`ask`]).
fn classify(answer: Option<std::result::Result<&serde_json::Value, &anyhow::Error>>) -> Health {
    let st = match answer {
        None => return Health::Down,
        Some(Err(e)) => return Health::Broken(format!("its daemon does not answer ({e:#})")),
        Some(Ok(st)) => st,
    };
    let error = st["error"].as_str().map(|e| e.lines().next().unwrap_or(e).to_string());
    match st["phase"].as_str() {
        Some("ready") => Health::Usable,
        Some("booting") => Health::Booting,
        Some("failed") => Health::Broken(error.unwrap_or_else(|| "it failed".into())),
        phase => {
            Health::Stopping(error.unwrap_or_else(|| format!("it is {}", phase.unwrap_or("?"))))
        }
    }
}

/// The lab's health now, from one status request.
fn health(paths: &LabPaths) -> Health {
    classify(ask(paths).as_ref().map(Result::as_ref))
}

/// Whether a lab that is up can take work (both VMs ready): `Err` says why not.
/// A lab still booting is not, either.
pub fn usable(paths: &LabPaths) -> std::result::Result<(), String> {
    health(paths).usable()
}

/// Boots the lab (or finds it up) and waits until it is ready. A lab that is up
/// but broken (a VM died) is restarted, and one that is down is booted, as it
/// was last defined unless `opts` gives rules of its own.
pub fn up(paths: &LabPaths, opts: &UpOpts, p: &Progress) -> Result<UpReport> {
    up_or_heal(paths, opts, p, None)
}

/// Brings back the lab `paths`, which is not usable (`why`): stopped and booted
/// again exactly as it was defined (image, standing rules, seed), which the line
/// announcing the restart says. When several callers find it broken at once, the
/// first restarts it and the others find it usable again.
pub fn heal(paths: &LabPaths, opts: &UpOpts, why: &str, p: &Progress) -> Result<UpReport> {
    up_or_heal(paths, opts, p, Some(why))
}

fn up_or_heal(
    paths: &LabPaths,
    opts: &UpOpts,
    p: &Progress,
    heal: Option<&str>,
) -> Result<UpReport> {
    let img = image::Image::open(&paths.root, opts.image)?;
    image::require_tools(&[image::QEMU])?;
    std::fs::create_dir_all(&paths.dir)
        .with_context(|| format!("creating {}", paths.dir.display()))?;
    let start = Instant::now();
    let admin = Flock::lock_within(&paths.admin_lock(), Duration::from_secs(120))?;
    let mut recovered = Vec::new();
    // One answer of its daemon for every decision below: asked again, it could
    // say the lab is in another state.
    let answer = ask(paths);
    let mut already_up = answer.is_some();
    if let Some(Ok(st)) = &answer {
        let running = serde_json::from_value::<image::Release>(st["image"].clone()).ok();
        if let Some(running) = running.filter(|r| *r != opts.image) {
            bail!(
                "lab `{}` is up with the {running} image, not {}\nhint: `roce lab --name {} down` first, or give the {} lab its own name (the default for it is `{}`)",
                paths.name,
                opts.image,
                paths.name,
                opts.image,
                opts.image.default_lab()
            );
        }
    }
    if already_up && !opts.rules.is_empty() {
        bail!(
            "lab `{}` is already up: standing fault rules are set when it boots\nhint: `roce lab down` first, or give the rules to `roce lab run --fault`",
            paths.name
        );
    }
    let definition = opts.definition(paths)?;
    if already_up {
        // Another caller may have healed it while this one waited for the lock:
        // one usable again, or booting again, is waited for, not restarted.
        // (`answer` is some answer here: the lab is not down.)
        let why = match (classify(answer.as_ref().map(Result::as_ref)), heal) {
            (Health::Usable | Health::Booting | Health::Down, _) => None,
            (Health::Broken(why), None) => Some(why),
            // `up` waits for one stopping; a heal restarts it.
            (Health::Stopping(_), None) => None,
            (Health::Stopping(_) | Health::Broken(_), Some(why)) => Some(why.to_string()),
        };
        if let Some(why) = why {
            p.say(&format!(
                "lab `{}` is not usable ({why}): restarting it{}",
                paths.name,
                definition.with_rules()
            ));
            stop(paths).with_context(|| format!("stopping the broken lab `{}`", paths.name))?;
            already_up = false;
        }
    } else if let Some(why) = heal {
        p.say(&format!(
            "lab `{}` is not usable ({why}): booting it again{}",
            paths.name,
            definition.with_rules()
        ));
    }
    if !already_up {
        let lock = Flock::try_lock(&paths.lock())?.ok_or_else(|| {
            anyhow::anyhow!("lab `{}` was taken by another process just now; try again", paths.name)
        })?;
        recovered = state::recover_stale(paths);
        for r in &recovered {
            p.say(&format!("recovered a stale lab: {r}"));
        }
        definition.remember(paths)?;
        spawn_daemon(paths, opts, &definition, lock)?;
        p.say(&format!(
            "lab `{}` booting {} (kernel {}){}: 2 VMs, 512 MiB each",
            paths.name,
            opts.image,
            img.manifest.kernel_release,
            definition.with_rules()
        ));
    }
    drop(admin);

    // Ctrl-C while booting takes the half-booted lab down with us.
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let i = interrupted.clone();
        let _ = ctrlc::set_handler(move || i.store(true, Ordering::SeqCst));
    }
    let deadline = start + opts.boot_timeout + Duration::from_secs(30);
    let mut last_note = Instant::now();
    loop {
        if interrupted.load(Ordering::SeqCst) {
            p.say("interrupted: taking the lab down");
            let _ = stop(paths);
            bail!("interrupted while the lab was booting");
        }
        if !paths.is_running() {
            bail!(
                "the lab daemon exited while booting; its log ({}):\n{}",
                paths.daemon_log().display(),
                state::tail(&paths.daemon_log(), 15)
            );
        }
        let st = client::request(paths, &Request::Status);
        if let Ok(st) = &st {
            match st["phase"].as_str() {
                Some("ready") => {
                    return Ok(UpReport {
                        already_up,
                        boot_ms: st["boot_ms"].as_u64(),
                        wall: start.elapsed(),
                        accel: st["accel"].as_str().unwrap_or("?").to_string(),
                        recovered,
                        image: opts.image,
                        kernel: img.manifest.kernel_release.clone(),
                        definition: if already_up {
                            running_definition(paths, st).unwrap_or(definition)
                        } else {
                            definition
                        },
                    })
                }
                Some("failed") => {
                    let err = st["error"].as_str().unwrap_or("unknown error").to_string();
                    let _ = stop(paths);
                    bail!(
                        "the lab failed to boot: {err}\n(daemon log: {})",
                        paths.daemon_log().display()
                    );
                }
                _ => {}
            }
        }
        if Instant::now() > deadline {
            let _ = stop(paths);
            bail!(
                "the lab was not ready after {} s; consoles: {} {}",
                opts.boot_timeout.as_secs(),
                paths.console(Vm::A).display(),
                paths.console(Vm::B).display()
            );
        }
        if last_note.elapsed() > Duration::from_secs(10) {
            p.say(&format!("… still booting ({:.0} s)", start.elapsed().as_secs_f64()));
            last_note = Instant::now();
        } else {
            p.live(&format!("booting… {:.0} s", start.elapsed().as_secs_f64()));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Starts `roce lab __daemon` in its own session, handing it the lab lock.
fn spawn_daemon(paths: &LabPaths, opts: &UpOpts, def: &Definition, lock: Flock) -> Result<()> {
    let exe = own_image();
    let log = std::fs::File::create(paths.daemon_log())
        .with_context(|| format!("creating {}", paths.daemon_log().display()))?;
    let fd = lock.file().as_raw_fd();
    let mut c = Command::new(exe);
    // `ps` shows `roce lab … __daemon`, not `/proc/self/exe lab …`.
    c.arg0("roce");
    c.arg("lab")
        .arg("--dir")
        .arg(&paths.root)
        .arg("--name")
        .arg(&paths.name)
        .arg("__daemon")
        .arg("--image")
        .arg(def.image.name())
        .arg("--lock-fd")
        .arg(fd.to_string())
        .arg("--accel")
        .arg(opts.accel.name())
        .arg("--idle-timeout")
        .arg(def.idle_timeout_min.to_string())
        .arg("--boot-timeout")
        .arg(opts.boot_timeout.as_secs().to_string())
        .arg("--seed")
        .arg(def.seed.to_string())
        .arg("--rules-json")
        .arg(serde_json::to_string(&def.rules).context("the standing fault rules")?)
        .arg("--wire")
        .arg(def.wire.name())
        .arg("--lab-dir")
        .arg(&paths.dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: setsid and fcntl are async-signal-safe.
    unsafe {
        c.pre_exec(move || {
            // Its own session: a Ctrl-C meant for this terminal does not reach it.
            libc::setsid();
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.spawn().context("starting the lab daemon")?;
    // The daemon holds the lock through its inherited descriptor; ours closes here.
    drop(lock);
    Ok(())
}

/// Asks the daemon to stop and waits until its lock is free; kills it if it does
/// not comply. Returns false if the lab was not up.
pub fn stop(paths: &LabPaths) -> Result<bool> {
    if !paths.is_running() {
        return Ok(false);
    }
    let _ = client::request(paths, &Request::Shutdown);
    let deadline = Instant::now() + Duration::from_secs(20);
    while paths.is_running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    if paths.is_running() {
        if let Some(pid) = state::read_pid(&paths.daemon_pidfile()) {
            state::kill_and_wait(pid, Duration::from_secs(1));
        }
    }
    if let Some(_lock) = Flock::try_lock(&paths.lock())? {
        state::recover_stale(paths);
        Ok(true)
    } else {
        bail!(
            "lab `{}` did not stop (its lock {} is still held)",
            paths.name,
            paths.lock().display()
        )
    }
}

/// What `down` did.
#[derive(Debug, Clone, Default)]
pub struct DownReport {
    /// It was up (and is down now).
    pub was_up: bool,
    /// How long it had been up, when its daemon said.
    pub uptime_s: Option<u64>,
    /// What was cleaned up after a crashed lab.
    pub cleaned: Vec<String>,
}

/// Takes the lab down (or cleans up after a crashed one).
pub fn down(paths: &LabPaths) -> Result<DownReport> {
    let _admin = Flock::lock_within(&paths.admin_lock(), Duration::from_secs(120))?;
    if !paths.is_running() {
        let mut cleaned = Vec::new();
        if paths.dir.exists() {
            if let Some(_l) = Flock::try_lock(&paths.lock())? {
                cleaned = state::recover_stale(paths);
            }
        }
        forget(paths)?;
        return Ok(DownReport { was_up: false, uptime_s: None, cleaned });
    }
    let uptime_s =
        client::request(paths, &Request::Status).ok().and_then(|s| s["uptime_s"].as_u64());
    stop(paths)?;
    forget(paths)?;
    Ok(DownReport { was_up: true, uptime_s, cleaned: Vec::new() })
}

/// `roce lab down` ends what the lab was told: the next boot is plain unless
/// given rules again.
fn forget(paths: &LabPaths) -> Result<()> {
    match std::fs::remove_file(paths.definition()) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e).with_context(|| {
            format!("forgetting the lab's definition {}", paths.definition().display())
        }),
        _ => Ok(()),
    }
}

/// Every lab under `root`, by name.
pub fn all_labs(root: &Path) -> Vec<LabPaths> {
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir(root.join("labs")) {
        for e in rd.flatten() {
            if let Ok(p) = LabPaths::new(root, &e.file_name().to_string_lossy()) {
                v.push(p);
            }
        }
    }
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// What a lab that is up was booted with: its kept definition, when the rules
/// its daemon applies are those (they are, unless the file was changed by hand).
fn running_definition(paths: &LabPaths, st: &serde_json::Value) -> Option<Definition> {
    let kept = Definition::remembered(paths).ok().flatten()?;
    let applied: Vec<&str> =
        st["standing_rules"].as_array()?.iter().filter_map(|r| r.as_str()).collect();
    let said: Vec<String> = kept.rules.iter().map(|r| r.to_string()).collect();
    (applied == said.iter().map(String::as_str).collect::<Vec<_>>()).then_some(kept)
}

/// The daemon's status document of a lab that is up (`None` when it is down).
pub fn status(paths: &LabPaths) -> Option<serde_json::Value> {
    ask(paths).and_then(Result::ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn of(st: serde_json::Value) -> Health {
        classify(Some(Ok(&st)))
    }

    #[test]
    fn classifies_status_documents() {
        assert_eq!(classify(None), Health::Down);
        let e = anyhow::anyhow!("connection refused").context("connecting");
        assert_eq!(
            classify(Some(Err(&e))),
            Health::Broken("its daemon does not answer (connecting: connection refused)".into())
        );
        assert_eq!(of(json!({"phase": "ready", "error": null})), Health::Usable);
        assert_eq!(of(json!({"phase": "booting", "error": null})), Health::Booting);
        assert_eq!(
            of(json!({"phase": "failed", "error": "VM a died\nits console: …"})),
            Health::Broken("VM a died".into())
        );
        assert_eq!(of(json!({"phase": "failed"})), Health::Broken("it failed".into()));
        assert_eq!(
            of(json!({"phase": "stopping", "error": null})),
            Health::Stopping("it is stopping".into())
        );
        assert_eq!(of(json!({})), Health::Stopping("it is ?".into()));
    }

    #[test]
    fn says_why_a_lab_is_not_usable() {
        assert_eq!(Health::Usable.usable(), Ok(()));
        assert_eq!(Health::Down.usable(), Err("it is down".into()));
        assert_eq!(Health::Booting.usable(), Err("it is booting".into()));
        assert_eq!(
            Health::Stopping("it is stopping".into()).usable(),
            Err("it is stopping".into())
        );
        assert_eq!(Health::Broken("VM a died".into()).usable(), Err("VM a died".into()));
    }
}
