//! `roce lab build`: the lab's VM images, one per Debian [`Release`].
//!
//! Debian from the mirror the host's apt already uses (debootstrap), with the
//! kernel (it ships `rdma_rxe`), rdma-core and the test tools: `bookworm` (Linux
//! 6.1, rdma-core 44; the default), `trixie` (Linux 6.12, rdma-core 56, the verbs
//! rxe gained since) and `trixie-backports` (trixie's user space under the 7.x
//! kernel of its backports suite, installed by apt in the debootstrapped tree).
//! Each is cached in its own directory, `images/<release>/`, beside the others.
//! What boots:
//!
//! - `vmlinux`: the kernel, uncompressed from the Debian bzImage and booted through
//!   its PVH entry. Under TCG this saves the ~5 s the guest spends unpacking an
//!   xz-compressed kernel. (`vmlinuz` is kept as the fallback.)
//! - `initrd.cpio`: a small initramfs of our own: busybox, the ~30 modules the lab
//!   needs (uncompressed: trixie ships them as `.ko.xz`; those built into the
//!   kernel are left out) and an `/init` that loads them, mounts the disk and the host share and
//!   hands over to the init script in the share. Debian's own initramfs (udev,
//!   34 MB) costs ~10 s of boot under TCG.
//! - `disk.img`: the root file system (`mkfs.ext4 -d`, no loop mounts), attached
//!   read-only with `snapshot=on` so both VMs share it.
//!
//! Everything is built in `image.tmp-PID/` and renamed to `image/` only once it has
//! been checked, so a half-written image is never taken for a good one. The
//! manifest records the recipe's hash: a changed recipe means a rebuild.
//!
//! Owns: the releases, the recipe and the build (debootstrap, the disk, the
//! manifest); its rooms: `host` (the host's programs and apt mirror), `apt` (a
//! kernel from another suite), `boot` (`vmlinux` and the initramfs). Imports: the
//! lock ([`Flock`]) and `pid_alive` from [`state`], and [`Progress`] from
//! [`progress`](crate::progress).
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::state::{self, Flock};
use crate::progress::Progress;

mod apt;
mod boot;
mod host;
#[cfg(test)]
mod tests;

use apt::install_kernel_from;
use boot::{extract_vmlinux, write_initramfs};
use host::BUILD_TOOLS;
pub use host::{find_program, host_mirror, require_tools, Tool, QEMU};

/// A build tool's log folded for the terminal: one line per phase (the first of
/// it), then how many lines the phase had once the next begins.
#[derive(Default)]
pub(super) struct Phases {
    phase: String,
    count: usize,
}

impl Phases {
    /// `line` of `tool`'s log belongs to phase `word`.
    pub(super) fn line(&mut self, p: &Progress, tool: &str, word: &str, line: &str) {
        if word != self.phase {
            self.finish(p);
            self.phase = word.to_string();
            self.count = 0;
            p.say(&format!("  {tool}: {line}"));
        }
        self.count += 1;
    }

    /// The last phase's count, once the log has ended.
    pub(super) fn finish(&self, p: &Progress) {
        if self.count > 1 {
            p.say(&format!("  … {}: {} items", self.phase, self.count));
        }
    }
}

/// Bump when the build steps change in a way the hash below cannot see.
const RECIPE_VERSION: u32 = 2;

/// A Debian release the lab can boot: one kernel and one rdma-core each.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Release {
    /// Debian 12: Linux 6.1, rdma-core 44. The default image.
    #[default]
    Bookworm,
    /// Debian 13: Linux 6.12, rdma-core 56 (rxe with RDMA FLUSH and ATOMIC WRITE).
    Trixie,
    /// Debian 13's user space (rdma-core 56) under the kernel of trixie-backports
    /// (Linux 7.x): the same library, the next kernel.
    #[serde(rename = "trixie-backports")]
    TrixieBackports,
}

impl Release {
    pub const ALL: [Release; 3] = [Release::Bookworm, Release::Trixie, Release::TrixieBackports];

    /// The image's name: the Debian suite its kernel comes from.
    pub fn name(self) -> &'static str {
        match self {
            Release::Bookworm => "bookworm",
            Release::Trixie => "trixie",
            Release::TrixieBackports => "trixie-backports",
        }
    }

    /// The Debian release (codename) debootstrap installs: the user space.
    pub fn suite(self) -> &'static str {
        match self {
            Release::Bookworm => "bookworm",
            Release::Trixie | Release::TrixieBackports => "trixie",
        }
    }

    /// The suite the kernel comes from when it is not [`suite`](Release::suite)
    /// itself: installed with `apt-get install -t SUITE` once debootstrap is done.
    pub fn kernel_suite(self) -> Option<&'static str> {
        match self {
            Release::Bookworm | Release::Trixie => None,
            Release::TrixieBackports => Some("trixie-backports"),
        }
    }

    /// What it brings, for help texts and errors.
    pub fn describe(self) -> &'static str {
        match self {
            Release::Bookworm => "Debian 12: Linux 6.1, rdma-core 44",
            Release::Trixie => "Debian 13: Linux 6.12, rdma-core 56",
            Release::TrixieBackports => {
                "Debian 13 with the backports kernel: Linux 7.x, rdma-core 56"
            }
        }
    }

    /// The name of the lab that boots this image when none is given: `default` for
    /// the default image (as before there were two), the release's name otherwise.
    pub fn default_lab(self) -> &'static str {
        match self {
            Release::Bookworm => "default",
            r => r.name(),
        }
    }
}

impl std::fmt::Display for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Release {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Release, String> {
        Release::ALL.into_iter().find(|r| r.name() == s).ok_or_else(|| {
            let all: Vec<String> =
                Release::ALL.iter().map(|r| format!("{} ({})", r.name(), r.describe())).collect();
            format!("no lab image `{s}`; there are: {}", all.join(", "))
        })
    }
}
/// What the issue asks for, plus busybox (the initramfs' shell).
pub const PACKAGES: &[&str] = &[
    "linux-image-amd64",
    "rdma-core",
    "ibverbs-utils",
    "ibverbs-providers",
    "rdmacm-utils",
    "perftest",
    "iproute2",
    "kmod",
    "udev",
    "procps",
    "tcpdump",
    "busybox-static",
];
/// What an image whose kernel comes from another suite ([`Release::kernel_suite`])
/// installs from it with apt once debootstrap is done.
pub const KERNEL_PACKAGES: &[&str] = &["linux-image-amd64"];
/// What debootstrap adds for such an image in the kernel's place: the initramfs
/// generator the kernel package depends on (`dracut | initramfs-tools`), named so
/// that apt keeps it rather than pulling dracut in.
const KERNEL_TOOLS: &[&str] = &["initramfs-tools"];

/// What debootstrap installs for `release`: [`PACKAGES`], less the kernel when it
/// comes from another suite (apt installs it afterwards).
fn debootstrap_packages(release: Release) -> Vec<&'static str> {
    match release.kernel_suite() {
        None => PACKAGES.to_vec(),
        Some(_) => PACKAGES
            .iter()
            .copied()
            .filter(|p| !KERNEL_PACKAGES.contains(p))
            .chain(KERNEL_TOOLS.iter().copied())
            .collect(),
    }
}

/// Modules the initramfs loads (their dependencies come along).
pub const MODULES: &[&str] = &[
    "virtio_pci",
    "virtio_blk",
    "crc32c_generic",
    "ext4",
    "virtio_net",
    "virtio_console",
    "9pnet_virtio",
    "9p",
    "rdma_rxe",
    "rdma_ucm",
];
/// [`MODULES`] that a 7.x kernel no longer has: `crc32c_generic` (ext4's
/// checksums, which Linux 6.1 and 6.12 take from the crypto API) became
/// `crc32c-cryptoapi`, and ext4 now calls the built-in crc32c library instead.
const GONE_IN_7X: &[&str] = &["crc32c_generic"];

/// The modules the initramfs of `release` loads.
pub fn modules(release: Release) -> Vec<&'static str> {
    match release {
        Release::Bookworm | Release::Trixie => MODULES.to_vec(),
        Release::TrixieBackports => {
            MODULES.iter().copied().filter(|m| !GONE_IN_7X.contains(m)).collect()
        }
    }
}
const INITRD_INIT: &str = include_str!("../assets/initrd-init.sh");

/// Files that must be in the image, each with the alternatives a Debian layout may
/// use (paths relative to the root file system).
const REQUIRED: &[(&str, &[&str])] = &[
    ("busybox", &["usr/bin/busybox", "bin/busybox"]),
    ("ibv_devinfo", &["usr/bin/ibv_devinfo"]),
    ("ibv_rc_pingpong", &["usr/bin/ibv_rc_pingpong"]),
    ("ibv_uc_pingpong", &["usr/bin/ibv_uc_pingpong"]),
    ("ibv_ud_pingpong", &["usr/bin/ibv_ud_pingpong"]),
    ("ibv_srq_pingpong", &["usr/bin/ibv_srq_pingpong"]),
    ("ib_send_bw", &["usr/bin/ib_send_bw"]),
    ("ib_write_bw", &["usr/bin/ib_write_bw"]),
    ("ib_read_bw", &["usr/bin/ib_read_bw"]),
    ("ib_atomic_bw", &["usr/bin/ib_atomic_bw"]),
    ("rping", &["usr/bin/rping"]),
    ("udaddy", &["usr/bin/udaddy"]),
    ("ucmatose", &["usr/bin/ucmatose"]),
    ("rdma", &["usr/bin/rdma", "usr/sbin/rdma", "sbin/rdma", "bin/rdma"]),
    ("ip", &["usr/bin/ip", "usr/sbin/ip", "sbin/ip", "bin/ip"]),
    ("ss", &["usr/bin/ss", "bin/ss"]),
    ("tcpdump", &["usr/bin/tcpdump", "usr/sbin/tcpdump"]),
    ("modprobe", &["usr/sbin/modprobe", "sbin/modprobe", "usr/bin/kmod", "bin/kmod"]),
    ("the rxe verbs provider", &["etc/libibverbs.d/rxe.driver"]),
];

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub recipe: String,
    pub suite: String,
    pub kernel_release: String,
    /// `vmlinux` (PVH boot) or `vmlinuz`.
    pub boot_kernel: String,
    pub mirror: String,
    /// What dpkg says is installed, for the packages that make the setup
    /// (`linux-image-*`, `rdma-core`, `libibverbs1`, `perftest`, `libc6`).
    #[serde(default)]
    pub versions: std::collections::BTreeMap<String, String>,
    pub packages: Vec<String>,
    pub modules: Vec<String>,
    pub built_at_unix: u64,
    pub build_secs: f64,
    pub disk_bytes: u64,
}

/// A built image.
#[derive(Debug, Clone)]
pub struct Image {
    pub dir: PathBuf,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    pub disk: PathBuf,
    pub manifest: Manifest,
}

/// FNV-1a: a hash that is the same on every build of `roce` (unlike std's).
fn fnv(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0u8]) {
            h ^= b as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The recipe of `release`'s image, hashed. Only an image whose kernel comes from
/// another suite hashes that step too, so adding it left the other images' hashes
/// (and their cached images) as they were.
pub fn recipe_hash(release: Release) -> String {
    let v = RECIPE_VERSION.to_string();
    let mut parts = vec![v.as_str(), release.name(), INITRD_INIT];
    parts.extend(PACKAGES);
    parts.push("--");
    parts.extend(MODULES);
    if let Some(suite) = release.kernel_suite() {
        parts.extend(["-- kernel from", suite]);
        parts.extend(KERNEL_PACKAGES);
        parts.push("-- debootstrap");
        parts.extend(debootstrap_packages(release));
        parts.push("-- modules");
        parts.extend(modules(release));
    }
    fnv(&parts)
}

pub fn image_dir(root: &Path, release: Release) -> PathBuf {
    root.join("images").join(release.name())
}

/// Where the packages of a Debian suite are kept between builds: debootstrap's
/// cache for the user space (`trixie` and `trixie-backports` share one), apt's for
/// a kernel from another suite.
fn deb_cache(root: &Path, suite: &str) -> PathBuf {
    root.join("debs").join(suite)
}

/// `roce lab build`, with the options that pick `release`.
fn build_command(release: Release) -> String {
    match release {
        Release::Bookworm => "roce lab build".into(),
        r => format!("roce lab build --release {r}"),
    }
}

impl Image {
    /// The image of `release` under `root`, if it is complete and built from the
    /// current recipe.
    pub fn open(root: &Path, release: Release) -> Result<Image> {
        let dir = image_dir(root, release);
        let hint = format!("run `{}` (add `--dir` if you use one)", build_command(release));
        let mpath = dir.join("manifest.json");
        let text = fs::read_to_string(&mpath)
            .with_context(|| format!("no lab image at {} ({hint})", dir.display()))?;
        let manifest: Manifest = serde_json::from_str(&text)
            .with_context(|| format!("{} is damaged ({hint})", mpath.display()))?;
        if manifest.recipe != recipe_hash(release) {
            bail!("the lab image at {} was built by another version of roce's recipe; {hint} to rebuild it", dir.display());
        }
        let image = Image {
            kernel: dir.join(&manifest.boot_kernel),
            initrd: dir.join("initrd.cpio"),
            disk: dir.join("disk.img"),
            dir,
            manifest,
        };
        for f in [&image.kernel, &image.initrd, &image.disk] {
            if !f.is_file() {
                bail!("the lab image is missing {} ({hint})", f.display());
            }
        }
        Ok(image)
    }
}

pub struct BuildOpts {
    pub root: PathBuf,
    pub release: Release,
    pub mirror: Option<String>,
    pub force: bool,
}

/// Builds the image unless an up-to-date one is there. Returns it and whether it
/// was built now.
pub fn build(opts: &BuildOpts, p: &Progress) -> Result<(Image, bool)> {
    if !opts.force {
        if let Ok(img) = Image::open(&opts.root, opts.release) {
            return Ok((img, false));
        }
    }
    require_tools(BUILD_TOOLS)?;
    if !nix::unistd::geteuid().is_root() {
        bail!(
            "building the lab image needs root (debootstrap chroots and creates device nodes)\n\
             hint: run `sudo {} --dir {}` once; booting the lab afterwards does not need root",
            build_command(opts.release),
            opts.root.display()
        );
    }
    fs::create_dir_all(&opts.root).with_context(|| format!("creating {}", opts.root.display()))?;
    let lock_path = opts.root.join("build.lock");
    let _lock = match Flock::try_lock(&lock_path)? {
        Some(l) => l,
        None => {
            p.say("another `roce lab build` is running; waiting for it (up to 30 min)");
            Flock::lock_within(&lock_path, Duration::from_secs(1800))?
        }
    };
    // The other build may have produced what we need.
    if !opts.force {
        if let Ok(img) = Image::open(&opts.root, opts.release) {
            return Ok((img, false));
        }
    }
    remove_stale_temp_dirs(&opts.root, p);
    let mirror = match &opts.mirror {
        Some(m) => m.clone(),
        None => host_mirror()?,
    };
    let start = Instant::now();
    let tmp = opts.root.join(format!("image.tmp-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp)?;
    let result = build_into(&tmp, &opts.root, opts.release, &mirror, p, start);
    match result {
        Ok(manifest) => {
            let final_dir = image_dir(&opts.root, opts.release);
            fs::create_dir_all(opts.root.join("images"))?;
            let old = opts.root.join(format!("image.old-{}", std::process::id()));
            if final_dir.exists() {
                fs::rename(&final_dir, &old).with_context(|| {
                    format!("moving the old image {} aside", final_dir.display())
                })?;
            }
            fs::rename(&tmp, &final_dir)
                .with_context(|| format!("publishing the image as {}", final_dir.display()))?;
            let _ = fs::remove_dir_all(&old);
            p.say(&format!(
                "image {} ready in {:.0} s: {} (kernel {}, {}, disk {} MiB)",
                opts.release,
                manifest.build_secs,
                final_dir.display(),
                manifest.kernel_release,
                manifest.describe_versions(),
                manifest.disk_bytes >> 20
            ));
            Ok((Image::open(&opts.root, opts.release)?, true))
        }
        Err(e) => {
            let log = tmp.join("debootstrap.log");
            let keep = opts.root.join("last-failed-build.log");
            let _ = fs::copy(&log, &keep);
            let _ = fs::remove_dir_all(&tmp);
            Err(e.context(format!(
                "building the lab image failed (nothing was published; log kept at {})",
                keep.display()
            )))
        }
    }
}

/// Removes what dead builds left behind, and the image and package cache of the
/// layout before there were two images (`image/`, `debs/*.deb`).
fn remove_stale_temp_dirs(root: &Path, p: &Progress) {
    let legacy = root.join("image");
    if legacy.join("manifest.json").is_file() && fs::remove_dir_all(&legacy).is_ok() {
        p.say(&format!(
            "removed the image of an older roce at {} (images now live in images/<release>/)",
            legacy.display()
        ));
    }
    if let Ok(rd) = fs::read_dir(root.join("debs")) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().ends_with(".deb") {
                let _ = fs::remove_file(e.path());
            }
        }
    }
    let Ok(rd) = fs::read_dir(root) else { return };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name.strip_prefix("image.tmp-").or_else(|| name.strip_prefix("image.old-"));
        if let Some(pid) = pid.and_then(|p| p.parse::<i32>().ok()) {
            if !state::pid_alive(pid) {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
}

fn build_into(
    tmp: &Path,
    root: &Path,
    release: Release,
    mirror: &str,
    p: &Progress,
    start: Instant,
) -> Result<Manifest> {
    let rootfs = tmp.join("rootfs");
    let cache = deb_cache(root, release.suite());
    fs::create_dir_all(&cache)?;
    let log = tmp.join("debootstrap.log");
    p.say(&format!(
        "debootstrap {} from {mirror} (packages cached in {})",
        release.suite(),
        cache.display()
    ));
    debootstrap(release, &rootfs, &cache, mirror, &log, p)?;
    if let Some(suite) = release.kernel_suite() {
        let cache = deb_cache(root, suite);
        fs::create_dir_all(&cache)?;
        p.say(&format!(
            "the kernel from {suite}: apt-get install -t {suite} {} (packages cached in {})",
            KERNEL_PACKAGES.join(" "),
            cache.display()
        ));
        install_kernel_from(suite, &rootfs, &cache, mirror, &log, p)?;
    }

    p.say("checking the root file system");
    let missing: Vec<&str> = REQUIRED
        .iter()
        .filter(|(_, alts)| !alts.iter().any(|a| rootfs.join(a).exists()))
        .map(|(n, _)| *n)
        .collect();
    let (kernel, vmlinuz) = find_kernel(&rootfs)?;
    let moddir = rootfs.join("lib/modules").join(&kernel);
    let rxe = moddir.join("kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko");
    let mut missing: Vec<String> = missing.into_iter().map(String::from).collect();
    if !["", ".xz", ".zst"].iter().any(|ext| rxe.with_extension(format!("ko{ext}")).exists()) {
        missing.push(format!("rdma_rxe.ko (looked for {}[.xz|.zst])", rxe.display()));
    }
    if !missing.is_empty() {
        bail!("the image lacks: {}", missing.join(", "));
    }
    let versions = installed_versions(&rootfs)?;
    check_versions(release, &kernel, &versions)?;
    p.say(&format!("{release}: kernel {kernel}, {}", describe_versions(&versions)));
    // Room for the mount points the initramfs uses; no documentation.
    fs::create_dir_all(rootfs.join("host"))?;
    for d in [
        "usr/share/doc",
        "usr/share/man",
        "usr/share/info",
        "var/cache/apt/archives",
        "var/lib/apt/lists",
    ] {
        let _ = fs::remove_dir_all(rootfs.join(d));
        let _ = fs::create_dir_all(rootfs.join(d));
    }

    p.say(&format!("kernel {kernel}: preparing a direct boot"));
    fs::copy(&vmlinuz, tmp.join("vmlinuz")).context("copying the kernel")?;
    let boot_kernel = match extract_vmlinux(&vmlinuz, &tmp.join("vmlinux")) {
        Ok(()) => "vmlinux".to_string(),
        Err(e) => {
            p.say(&format!("warning: booting the compressed kernel (slower under TCG): {e:#}"));
            "vmlinuz".to_string()
        }
    };
    let busybox =
        REQUIRED[0].1.iter().map(|a| rootfs.join(a)).find(|p| p.exists()).context("busybox")?;
    let n = write_initramfs(&moddir, &modules(release), &busybox, &tmp.join("initrd.cpio"))?;
    p.say(&format!("initramfs: busybox and {n} modules"));

    let used = dir_size(&rootfs);
    let size = (used * 3 / 2 + (256 << 20)).max(1 << 30);
    let disk = tmp.join("disk.img");
    p.say(&format!("mkfs.ext4 -d: {} MiB of files into a {} MiB disk", used >> 20, size >> 20));
    let out = Command::new(find_program("mkfs.ext4").context("mkfs.ext4")?)
        .args(["-q", "-F", "-L", "roce-lab", "-d"])
        .arg(&rootfs)
        .arg(&disk)
        .arg(format!("{}k", size >> 10))
        .stdin(Stdio::null())
        .output()
        .context("running mkfs.ext4")?;
    if !out.status.success() {
        bail!(
            "mkfs.ext4 failed ({}): {}\nhint: `-d` needs e2fsprogs 1.43 or newer",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    fs::remove_dir_all(&rootfs).context("removing the build's root file system")?;

    let manifest = Manifest {
        recipe: recipe_hash(release),
        suite: release.name().into(),
        kernel_release: kernel,
        versions,
        boot_kernel,
        mirror: mirror.into(),
        packages: PACKAGES.iter().map(|s| s.to_string()).collect(),
        modules: modules(release).iter().map(|s| s.to_string()).collect(),
        built_at_unix: dissector::capture::unix_now().as_secs(),
        build_secs: start.elapsed().as_secs_f64(),
        disk_bytes: size,
    };
    fs::write(tmp.join("manifest.json"), serde_json::to_vec_pretty(&manifest)?)?;
    Ok(manifest)
}

fn debootstrap(
    release: Release,
    rootfs: &Path,
    cache: &Path,
    mirror: &str,
    log: &Path,
    p: &Progress,
) -> Result<()> {
    let mut cmd = Command::new(find_program("debootstrap").context("debootstrap")?);
    cmd.arg("--variant=minbase")
        .arg(format!("--cache-dir={}", cache.display()))
        .arg(format!("--include={}", debootstrap_packages(release).join(",")))
        .arg(release.suite())
        .arg(rootfs)
        .arg(mirror);
    // Print one line per phase (Retrieving, Validating, Unpacking, Configuring …)
    // with a count, plus every warning and error.
    let mut phases = Phases::default();
    let (status, last) = run_logged(cmd, "debootstrap", log, &mut |line| {
        if let Some(rest) = line.strip_prefix("I: ") {
            // Each package is retrieved, then validated: one phase.
            let word = match rest.split_whitespace().next().unwrap_or("") {
                "Validating" => "Retrieving",
                w => w,
            };
            phases.line(p, "debootstrap", word, rest);
            p.live(&format!("debootstrap: {rest}"));
        } else if line.starts_with("W: ") || line.starts_with("E: ") {
            p.say(&format!("  debootstrap: {line}"));
        }
    })?;
    if !status.success() {
        bail!(
            "debootstrap failed ({status}); its last lines:\n  {}\nhint: check that {mirror} is reachable (the host's apt uses it), or pass --mirror",
            last.join("\n  ")
        );
    }
    Ok(())
}

/// Runs `cmd` (stdin closed), appending each line it prints, stdout and stderr
/// alike, to `log` and handing it to `on_line`; kills it after an hour. Returns
/// how it exited and its last 15 lines, for the error that quotes them.
fn run_logged(
    mut cmd: Command,
    what: &str,
    log: &Path,
    on_line: &mut dyn FnMut(&str),
) -> Result<(std::process::ExitStatus, Vec<String>)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {what}"))?;
    let mut logf = fs::OpenOptions::new().create(true).append(true).open(log)?;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let mut readers = Vec::new();
    for pipe in [
        child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>),
        child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let deadline = Instant::now() + Duration::from_secs(3600);
    let mut last: Vec<String> = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => {
                let _ = writeln!(logf, "{line}");
                on_line(&line);
                last.push(line);
                if last.len() > 15 {
                    last.remove(0);
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if Instant::now() > deadline {
                    let _ = child.kill();
                    bail!("{what} ran for over an hour; killed it");
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = child.wait()?;
    for r in readers {
        let _ = r.join();
    }
    Ok((status, last))
}

fn find_kernel(rootfs: &Path) -> Result<(String, PathBuf)> {
    let boot = rootfs.join("boot");
    let mut kernels: Vec<(String, PathBuf)> = fs::read_dir(&boot)
        .with_context(|| format!("reading {}", boot.display()))?
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_prefix("vmlinuz-").map(|r| (r.to_string(), e.path()))
        })
        .collect();
    kernels.sort();
    kernels.pop().ok_or_else(|| {
        anyhow::anyhow!(
            "no kernel (vmlinuz-*) in {}: did linux-image-amd64 install?",
            boot.display()
        )
    })
}

/// The packages whose versions make a setup, as the image's dpkg database lists them.
const VERSIONED: &[&str] = &["rdma-core", "libibverbs1", "ibverbs-providers", "perftest", "libc6"];

/// Installed versions of [`VERSIONED`] and of the kernel image package, from
/// `var/lib/dpkg/status`.
fn installed_versions(rootfs: &Path) -> Result<std::collections::BTreeMap<String, String>> {
    let path = rootfs.join("var/lib/dpkg/status");
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(parse_dpkg_status(&text))
}

fn parse_dpkg_status(text: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    for para in text.split("\n\n") {
        let field = |k: &str| para.lines().find_map(|l| l.strip_prefix(k).map(str::trim));
        let (Some(pkg), Some(ver)) = (field("Package:"), field("Version:")) else { continue };
        let installed = field("Status:").is_some_and(|s| s.ends_with(" installed"));
        let kernel = pkg.starts_with("linux-image-") && pkg != "linux-image-amd64";
        if installed && (VERSIONED.contains(&pkg) || kernel) {
            let key = if kernel { "linux-image" } else { pkg };
            out.insert(key.to_string(), ver.to_string());
        }
    }
    out
}

/// `rdma-core 56.1-1, perftest 25.01.0+0.80-1, glibc 2.41-12`.
fn describe_versions(v: &std::collections::BTreeMap<String, String>) -> String {
    let get = |k: &str| v.get(k).map(String::as_str).unwrap_or("?");
    format!("rdma-core {}, perftest {}, glibc {}", get("rdma-core"), get("perftest"), get("libc6"))
}

impl Manifest {
    pub fn describe_versions(&self) -> String {
        describe_versions(&self.versions)
    }
}

/// The facts a release's image is built for, checked rather than assumed: its
/// kernel series (which decides what rxe can do) and rdma-core's major version.
fn check_versions(
    release: Release,
    kernel: &str,
    versions: &std::collections::BTreeMap<String, String>,
) -> Result<()> {
    let (series, rdma_core) = match release {
        Release::Bookworm => ("6.1.", "44."),
        Release::Trixie => ("6.12.", "56."),
        Release::TrixieBackports => ("7.", "56."),
    };
    let have = versions.get("rdma-core").map(String::as_str).unwrap_or("none");
    if !kernel.starts_with(series) || !have.starts_with(rdma_core) {
        bail!(
            "the {release} image has kernel {kernel} and rdma-core {have}, not the Linux {series}x and rdma-core {rdma_core}x the {release} lab stands for\n\
             hint: the mirror may serve another Debian release under that name; pass --mirror with a Debian mirror"
        );
    }
    Ok(())
}

fn dir_size(p: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![p.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let Ok(m) = e.path().symlink_metadata() else { continue };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                total += m.len();
            }
        }
    }
    total
}
