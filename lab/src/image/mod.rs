//! `roce lab build`: the lab's VM images, one per Debian [`Release`].
//!
//! Debian from the mirror the host's apt already uses (debootstrap), with the
//! kernel (it ships `rdma_rxe`), rdma-core and the test tools: `bookworm` (Linux
//! 6.1, rdma-core 44; the default) and `trixie` (Linux 6.12, rdma-core 56, the verbs
//! rxe gained since). Each is cached in its own directory, `images/<release>/`,
//! beside the other. What boots:
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
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::state::{self, Flock};
use super::Progress;

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
}

impl Release {
    pub const ALL: [Release; 2] = [Release::Bookworm, Release::Trixie];

    /// The Debian suite (codename), which is also the image's name.
    pub fn name(self) -> &'static str {
        match self {
            Release::Bookworm => "bookworm",
            Release::Trixie => "trixie",
        }
    }

    /// What it brings, for help texts and errors.
    pub fn describe(self) -> &'static str {
        match self {
            Release::Bookworm => "Debian 12: Linux 6.1, rdma-core 44",
            Release::Trixie => "Debian 13: Linux 6.12, rdma-core 56",
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
const INITRD_INIT: &str = include_str!("assets/initrd-init.sh");

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

pub fn recipe_hash(release: Release) -> String {
    let v = RECIPE_VERSION.to_string();
    let mut parts = vec![v.as_str(), release.name(), INITRD_INIT];
    parts.extend(PACKAGES);
    parts.push("--");
    parts.extend(MODULES);
    fnv(&parts)
}

pub fn image_dir(root: &Path, release: Release) -> PathBuf {
    root.join("images").join(release.name())
}

/// Where debootstrap keeps a release's packages between builds.
fn deb_cache(root: &Path, release: Release) -> PathBuf {
    root.join("debs").join(release.name())
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

/// A host program the lab needs, and how to get it.
pub struct Tool {
    pub program: &'static str,
    pub package: &'static str,
    pub why: &'static str,
}

pub const QEMU: Tool =
    Tool { program: "qemu-system-x86_64", package: "qemu-system-x86", why: "runs the lab VMs" };
const BUILD_TOOLS: &[Tool] = &[
    Tool {
        program: "debootstrap",
        package: "debootstrap",
        why: "builds the VM's root file system",
    },
    Tool {
        program: "mkfs.ext4",
        package: "e2fsprogs",
        why: "makes the VM disk (needs -d, e2fsprogs ≥ 1.43)",
    },
    QEMU,
];

/// `program` on PATH (or in the sbin directories a non-root PATH may lack).
pub fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Errors out naming every missing tool and the apt line that installs them.
pub fn require_tools(tools: &[Tool]) -> Result<()> {
    let missing: Vec<&Tool> = tools.iter().filter(|t| find_program(t.program).is_none()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut msg = String::from("the lab needs programs this host lacks:\n");
    for t in &missing {
        msg.push_str(&format!("  {} ({}) — {}\n", t.program, t.package, t.why));
    }
    let pkgs: Vec<&str> = missing.iter().map(|t| t.package).collect();
    msg.push_str(&format!("install them with: sudo apt-get install {}", pkgs.join(" ")));
    msg.push_str("\n(or run `bash scripts/setup.sh`, which installs everything roce needs)");
    bail!(msg)
}

/// The Debian mirror the host's apt uses: the first `deb` source in
/// /etc/apt/sources.list.d/*.sources (deb822) or /etc/apt/sources.list whose suite
/// is not a -security / -updates / -backports one.
pub fn host_mirror() -> Result<String> {
    let mut candidates: Vec<String> = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    if let Ok(rd) = fs::read_dir("/etc/apt/sources.list.d") {
        let mut v: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        v.sort();
        files.extend(v);
    }
    files.push(PathBuf::from("/etc/apt/sources.list"));
    for f in &files {
        let Ok(text) = fs::read_to_string(f) else { continue };
        let name = f.to_string_lossy();
        if name.ends_with(".sources") {
            candidates.extend(mirrors_deb822(&text));
        } else if name.ends_with(".list") {
            candidates.extend(mirrors_one_line(&text));
        }
    }
    candidates.into_iter().next().ok_or_else(|| {
        anyhow::anyhow!(
            "found no Debian mirror in the host's apt sources (/etc/apt/sources.list.d/*.sources, /etc/apt/sources.list)\n\
             hint: pass the Debian mirror to use, e.g. `roce lab build --mirror http://deb.debian.org/debian`"
        )
    })
}

fn main_suite(suite: &str) -> bool {
    !["-security", "-updates", "-backports", "-proposed-updates"].iter().any(|s| suite.ends_with(s))
        && !suite.contains('/')
}

fn mirrors_deb822(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for para in text.split("\n\n") {
        let mut types = "";
        let mut uris = "";
        let mut suites = "";
        let mut enabled = true;
        for line in para.lines() {
            let line = line.trim();
            if line.starts_with('#') {
                continue;
            }
            if let Some((k, v)) = line.split_once(':') {
                match k.trim().to_ascii_lowercase().as_str() {
                    "types" => types = v.trim(),
                    "uris" => uris = v.trim(),
                    "suites" => suites = v.trim(),
                    "enabled" => enabled = v.trim() != "no",
                    _ => {}
                }
            }
        }
        if enabled
            && types.split_whitespace().any(|t| t == "deb")
            && suites.split_whitespace().any(main_suite)
        {
            out.extend(uris.split_whitespace().map(str::to_string));
        }
    }
    out
}

fn mirrors_one_line(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace().peekable();
        if words.next() != Some("deb") {
            continue;
        }
        if words.peek().is_some_and(|w| w.starts_with('[')) {
            for w in words.by_ref() {
                if w.ends_with(']') {
                    break;
                }
            }
        }
        if let (Some(uri), Some(suite)) = (words.next(), words.next()) {
            if main_suite(suite) {
                out.push(uri.to_string());
            }
        }
    }
    out
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
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
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
    let cache = deb_cache(root, release);
    fs::create_dir_all(&cache)?;
    p.say(&format!("debootstrap {release} from {mirror} (packages cached in {})", cache.display()));
    debootstrap(release, &rootfs, &cache, mirror, &tmp.join("debootstrap.log"), p)?;

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
    let n = write_initramfs(&moddir, &busybox, &tmp.join("initrd.cpio"))?;
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
        modules: MODULES.iter().map(|s| s.to_string()).collect(),
        built_at_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
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
    let mut child = Command::new(find_program("debootstrap").context("debootstrap")?)
        .arg("--variant=minbase")
        .arg(format!("--cache-dir={}", cache.display()))
        .arg(format!("--include={}", PACKAGES.join(",")))
        .arg(release.name())
        .arg(rootfs)
        .arg(mirror)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting debootstrap")?;
    let mut logf = fs::File::create(log)?;
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
    // Print one line per phase (Retrieving, Validating, Unpacking, Configuring …)
    // with a count, plus every warning and error.
    let mut phase = String::new();
    let mut count = 0;
    let deadline = Instant::now() + Duration::from_secs(3600);
    let mut last: Vec<String> = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => {
                let _ = writeln!(logf, "{line}");
                last.push(line.clone());
                if last.len() > 15 {
                    last.remove(0);
                }
                if let Some(rest) = line.strip_prefix("I: ") {
                    // Each package is retrieved, then validated: one phase.
                    let word = match rest.split_whitespace().next().unwrap_or("") {
                        "Validating" => "Retrieving".to_string(),
                        w => w.to_string(),
                    };
                    if word != phase {
                        if count > 1 {
                            p.say(&format!("  … {phase}: {count} items"));
                        }
                        phase = word;
                        count = 0;
                        p.say(&format!("  debootstrap: {rest}"));
                    }
                    count += 1;
                    p.live(&format!("debootstrap: {rest}"));
                } else if line.starts_with("W: ") || line.starts_with("E: ") {
                    p.say(&format!("  debootstrap: {line}"));
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if Instant::now() > deadline {
                    let _ = child.kill();
                    bail!("debootstrap ran for over an hour; killed it");
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = child.wait()?;
    for r in readers {
        let _ = r.join();
    }
    if !status.success() {
        bail!(
            "debootstrap failed ({status}); its last lines:\n  {}\nhint: check that {mirror} is reachable (the host's apt uses it), or pass --mirror",
            last.join("\n  ")
        );
    }
    Ok(())
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

/// How the kernel and its modules may be compressed (bookworm: an xz kernel, plain
/// modules; trixie: a zstd kernel, `.ko.xz` modules): the magic that starts the
/// stream, and the host tool that undoes it.
struct Compression {
    magic: &'static [u8],
    tool: &'static str,
    args: &'static [&'static str],
    package: &'static str,
}

const COMPRESSIONS: &[Compression] = &[
    Compression {
        magic: b"\xfd7zXZ\x00",
        tool: "xz",
        args: &["-dc", "--single-stream"],
        package: "xz-utils",
    },
    Compression { magic: b"\x28\xb5\x2f\xfd", tool: "zstd", args: &["-dc"], package: "zstd" },
];

/// `data` through the host's tool for `c`: whether the tool said it succeeded,
/// and what came out.
fn uncompress(c: &Compression, data: &[u8], what: &str) -> Result<(bool, Vec<u8>)> {
    let prog = find_program(c.tool).with_context(|| {
        format!(
            "{what} is {}-compressed and this host has no `{}` (package {})",
            c.tool, c.tool, c.package
        )
    })?;
    let mut child = Command::new(prog)
        .args(c.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("running {}", c.tool))?;
    let mut stdin = child.stdin.take().context("the decompressor's stdin")?;
    let payload = data.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&payload);
    });
    let mut out = Vec::new();
    child.stdout.take().context("the decompressor's stdout")?.read_to_end(&mut out)?;
    let _ = feeder.join();
    let ok = child.wait().is_ok_and(|s| s.success());
    Ok((ok, out))
}

/// Uncompresses the ELF kernel inside a bzImage, for qemu's PVH direct boot. The
/// tool's exit status is not trusted either way (zstd complains about the
/// bzImage's bytes after the frame): what counts is that an ELF kernel came out.
fn extract_vmlinux(bzimage: &Path, out: &Path) -> Result<()> {
    let data = fs::read(bzimage)?;
    let (at, c) = COMPRESSIONS
        .iter()
        .filter_map(|c| data.windows(c.magic.len()).position(|w| w == c.magic).map(|at| (at, c)))
        .min_by_key(|(at, _)| *at)
        .context("the kernel is neither xz- nor zstd-compressed")?;
    let (_, elf) = uncompress(c, &data[at..], "the kernel")?;
    if !elf.starts_with(b"\x7fELF") || elf.len() < 1 << 20 {
        bail!("what {} produced is not an ELF kernel", c.tool);
    }
    fs::write(out, elf)?;
    Ok(())
}

/// `modules.dep` → the load order (dependencies first) of `MODULES`, leaving out
/// those `modules.builtin` says are part of the kernel.
fn module_order(moddir: &Path) -> Result<Vec<String>> {
    let dep_path = moddir.join("modules.dep");
    let text =
        fs::read_to_string(&dep_path).with_context(|| format!("reading {}", dep_path.display()))?;
    let builtin = fs::read_to_string(moddir.join("modules.builtin")).unwrap_or_default();
    module_order_from(&text, &builtin)
}

fn module_order_from(text: &str, builtin: &str) -> Result<Vec<String>> {
    let mut deps: std::collections::HashMap<String, (String, Vec<String>)> = Default::default();
    let base = |p: &str| -> String {
        let f = p.rsplit('/').next().unwrap_or(p);
        f.split(".ko").next().unwrap_or(f).replace('-', "_")
    };
    for line in text.lines() {
        let Some((m, rest)) = line.split_once(':') else { continue };
        deps.insert(base(m), (m.to_string(), rest.split_whitespace().map(base).collect()));
    }
    fn visit(
        name: &str,
        deps: &std::collections::HashMap<String, (String, Vec<String>)>,
        seen: &mut Vec<String>,
        order: &mut Vec<String>,
    ) -> Result<()> {
        if seen.iter().any(|s| s == name) {
            return Ok(());
        }
        seen.push(name.to_string());
        let (path, ds) =
            deps.get(name).with_context(|| format!("module {name} is not in modules.dep"))?;
        for d in ds {
            visit(d, deps, seen, order)?;
        }
        order.push(path.clone());
        Ok(())
    }
    let (mut seen, mut order) = (Vec::new(), Vec::new());
    let builtin: Vec<String> = builtin.lines().map(base).collect();
    for m in MODULES.iter().filter(|m| !builtin.iter().any(|b| b == *m)) {
        visit(m, &deps, &mut seen, &mut order)?;
    }
    Ok(order)
}

/// A module file's bytes, uncompressed (busybox's insmod takes plain ELF only):
/// `.ko` as it is, `.ko.xz` / `.ko.zst` through the host's `xz` / `zstd`.
fn module_bytes(path: &Path) -> Result<Vec<u8>> {
    let data = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let Some(c) = COMPRESSIONS.iter().find(|c| data.starts_with(c.magic)) else { return Ok(data) };
    let (ok, elf) = uncompress(c, &data, &format!("the module {}", path.display()))?;
    if !ok || !elf.starts_with(b"\x7fELF") {
        bail!("could not uncompress {} with {}", path.display(), c.tool);
    }
    Ok(elf)
}

/// Writes the initramfs (cpio "newc"): busybox, the modules, /modules.list, /init.
fn write_initramfs(moddir: &Path, busybox: &Path, out: &Path) -> Result<usize> {
    let order = module_order(moddir)?;
    let mut cpio = Cpio::default();
    for d in ["bin", "dev", "proc", "sys", "newroot", "modules"] {
        cpio.dir(d);
    }
    cpio.file("bin/busybox", 0o755, &fs::read(busybox)?);
    let mut list = String::new();
    for (i, rel) in order.iter().enumerate() {
        let file = rel.rsplit('/').next().unwrap_or(rel);
        let name = format!("{i:02}-{}.ko", file.split(".ko").next().unwrap_or(file));
        cpio.file(&format!("modules/{name}"), 0o644, &module_bytes(&moddir.join(rel))?);
        list.push_str(&name);
        list.push('\n');
    }
    cpio.file("modules.list", 0o644, list.as_bytes());
    cpio.file("init", 0o755, INITRD_INIT.as_bytes());
    fs::write(out, cpio.finish())?;
    Ok(order.len())
}

/// A minimal cpio "newc" archive writer (what the kernel unpacks as initramfs).
#[derive(Default)]
struct Cpio {
    buf: Vec<u8>,
    ino: u32,
}

impl Cpio {
    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.ino += 1;
        let name_z = format!("{name}\0");
        let fields =
            [self.ino, mode, 0, 0, 1, 0, data.len() as u32, 0, 0, 0, 0, name_z.len() as u32, 0];
        self.buf.extend_from_slice(b"070701");
        for f in fields {
            self.buf.extend_from_slice(format!("{f:08X}").as_bytes());
        }
        self.buf.extend_from_slice(name_z.as_bytes());
        self.pad();
        self.buf.extend_from_slice(data);
        self.pad();
    }
    fn pad(&mut self) {
        while self.buf.len() % 4 != 0 {
            self.buf.push(0);
        }
    }
    fn dir(&mut self, name: &str) {
        self.entry(name, 0o040755, &[]);
    }
    fn file(&mut self, name: &str, perm: u32, data: &[u8]) {
        self.entry(name, 0o100000 | perm, data);
    }
    fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[]);
        self.buf
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirrors_from_apt_sources() {
        let deb822 = "Types: deb\n# comment\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\n\
                      Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\nComponents: main\n";
        assert_eq!(mirrors_deb822(deb822), ["http://deb.debian.org/debian"]);
        let sec_only = "Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\n";
        assert!(mirrors_deb822(sec_only).is_empty());
        let disabled = "Enabled: no\nTypes: deb\nURIs: http://x/debian\nSuites: bookworm\n";
        assert!(mirrors_deb822(disabled).is_empty());
        let list =
            "# deb http://old/debian bookworm main\ndeb-src http://src/debian bookworm main\n\
                    deb http://security.debian.org/debian-security bookworm-security main\n\
                    deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main\n";
        assert_eq!(mirrors_one_line(list), ["http://mirror.example/debian"]);
    }

    #[test]
    fn missing_host_tools_are_named_with_their_package() {
        let tools = [
            Tool { program: "roce-no-such-program-1", package: "pkg-one", why: "does one" },
            Tool { program: "sh", package: "dash", why: "is there" },
            Tool { program: "roce-no-such-program-2", package: "pkg-two", why: "does two" },
        ];
        let e = require_tools(&tools).unwrap_err().to_string();
        assert!(e.contains("roce-no-such-program-1 (pkg-one) — does one"), "{e}");
        assert!(e.contains("sudo apt-get install pkg-one pkg-two"), "{e}");
        assert!(!e.contains("dash"), "{e}");
        assert!(require_tools(&tools[1..2]).is_ok());
    }

    #[test]
    fn cpio_newc_layout() {
        let mut c = Cpio::default();
        c.file("init", 0o755, b"#!/bin/sh\n");
        let b = c.finish();
        assert!(b.starts_with(b"070701"));
        assert_eq!(b.len() % 4, 0);
        // name size field (12th) of the first entry: "init\0" = 5
        assert_eq!(&b[6 + 11 * 8..6 + 12 * 8], b"00000005");
        assert!(b.windows(10).any(|w| w == b"TRAILER!!!"));
    }

    #[test]
    fn builtin_modules_are_left_out_and_dependencies_come_first() {
        // Trixie's layout: compressed modules, virtio_pci and virtio_console built in.
        let dep = "kernel/drivers/block/virtio_blk.ko.xz:\n\
                   kernel/crypto/crc32c_generic.ko.xz:\n\
                   kernel/fs/ext4/ext4.ko.xz: kernel/fs/jbd2/jbd2.ko.xz kernel/fs/mbcache.ko.xz\n\
                   kernel/fs/jbd2/jbd2.ko.xz:\nkernel/fs/mbcache.ko.xz:\n\
                   kernel/drivers/net/virtio_net.ko.xz: kernel/net/core/failover.ko.xz\nkernel/net/core/failover.ko.xz:\n\
                   kernel/net/9p/9pnet_virtio.ko.xz: kernel/net/9p/9pnet.ko.xz\nkernel/net/9p/9pnet.ko.xz:\n\
                   kernel/fs/9p/9p.ko.xz: kernel/net/9p/9pnet.ko.xz\n\
                   kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko.xz: kernel/drivers/infiniband/core/ib_core.ko.xz\n\
                   kernel/drivers/infiniband/core/ib_core.ko.xz:\n\
                   kernel/drivers/infiniband/core/rdma_ucm.ko.xz: kernel/drivers/infiniband/core/ib_core.ko.xz\n";
        let builtin =
            "kernel/drivers/virtio/virtio_pci.ko\nkernel/drivers/char/virtio_console.ko\n";
        let order = module_order_from(dep, builtin).expect("every module found");
        let pos = |m: &str| {
            order
                .iter()
                .position(|p| p.ends_with(m))
                .unwrap_or_else(|| panic!("{m} missing from {order:?}"))
        };
        assert!(
            pos("jbd2.ko.xz") < pos("ext4.ko.xz")
                && pos("9pnet.ko.xz") < pos("9p.ko.xz")
                && pos("ib_core.ko.xz") < pos("rdma_rxe.ko.xz")
        );
        assert_eq!(order.iter().filter(|p| p.ends_with("ib_core.ko.xz")).count(), 1, "{order:?}");
        assert!(
            !order.iter().any(|p| p.contains("virtio_pci") || p.contains("virtio_console")),
            "{order:?}"
        );
        // Not built in and not in modules.dep: an error that names it.
        let e = module_order_from(dep, "").unwrap_err().to_string();
        assert!(e.contains("virtio_pci"), "{e}");
    }

    #[test]
    fn setup_versions_come_from_dpkg_and_are_checked() {
        let status = "Package: rdma-core\nStatus: install ok installed\nVersion: 56.1-1\n\n\
                      Package: linux-image-6.12.117+deb13-amd64\nStatus: install ok installed\nVersion: 6.12.117-1\n\n\
                      Package: linux-image-amd64\nStatus: install ok installed\nVersion: 6.12.117-1\n\n\
                      Package: perftest\nStatus: deinstall ok config-files\nVersion: 4.5-1\n\n\
                      Package: libc6\nStatus: install ok installed\nVersion: 2.41-12\n";
        let v = parse_dpkg_status(status);
        assert_eq!(v.get("rdma-core").map(String::as_str), Some("56.1-1"));
        assert_eq!(v.get("linux-image").map(String::as_str), Some("6.12.117-1"));
        assert_eq!(v.get("perftest"), None, "only installed packages count");
        assert!(check_versions(Release::Trixie, "6.12.117+deb13-amd64", &v).is_ok());
        let e =
            check_versions(Release::Bookworm, "6.12.117+deb13-amd64", &v).unwrap_err().to_string();
        assert!(e.contains("not the Linux 6.1.x and rdma-core 44.x"), "{e}");
    }

    #[test]
    fn releases_by_name() {
        assert_eq!("trixie".parse::<Release>(), Ok(Release::Trixie));
        assert_eq!(Release::default(), Release::Bookworm);
        let e = "sid".parse::<Release>().unwrap_err();
        assert!(e.contains("bookworm (Debian 12: Linux 6.1, rdma-core 44), trixie"), "{e}");
        assert_eq!(Release::Trixie.default_lab(), "trixie");
        assert_ne!(
            image_dir(Path::new("/c"), Release::Bookworm),
            image_dir(Path::new("/c"), Release::Trixie)
        );
    }

    #[test]
    fn recipe_hash_is_stable() {
        assert_eq!(recipe_hash(Release::Trixie), recipe_hash(Release::Trixie));
        assert_ne!(recipe_hash(Release::Bookworm), recipe_hash(Release::Trixie));
        assert_eq!(fnv(&["a", "b"]), fnv(&["a", "b"]));
        assert_ne!(fnv(&["ab"]), fnv(&["a", "b"]));
    }
}
