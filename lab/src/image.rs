//! `roce lab build`: the lab's VM image.
//!
//! Debian bookworm from the mirror the host's apt already uses (debootstrap), with
//! the kernel (it ships `rdma_rxe`), rdma-core and the test tools. What boots:
//!
//! - `vmlinux`: the kernel, uncompressed from the Debian bzImage and booted through
//!   its PVH entry. Under TCG this saves the ~5 s the guest spends unpacking an
//!   xz-compressed kernel. (`vmlinuz` is kept as the fallback.)
//! - `initrd.cpio`: a small initramfs of our own: busybox, the ~30 modules the lab
//!   needs and an `/init` that loads them, mounts the disk and the host share and
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
const RECIPE_VERSION: u32 = 1;
pub const SUITE: &str = "bookworm";
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

pub fn recipe_hash() -> String {
    let v = RECIPE_VERSION.to_string();
    let mut parts = vec![v.as_str(), SUITE, INITRD_INIT];
    parts.extend(PACKAGES);
    parts.push("--");
    parts.extend(MODULES);
    fnv(&parts)
}

pub fn image_dir(root: &Path) -> PathBuf {
    root.join("image")
}

impl Image {
    /// The image under `root`, if it is complete and built from the current recipe.
    pub fn open(root: &Path) -> Result<Image> {
        let dir = image_dir(root);
        let hint = "run `roce lab build` (add `--dir` if you use one)";
        let mpath = dir.join("manifest.json");
        let text = fs::read_to_string(&mpath).with_context(|| format!("no lab image at {} ({hint})", dir.display()))?;
        let manifest: Manifest =
            serde_json::from_str(&text).with_context(|| format!("{} is damaged ({hint})", mpath.display()))?;
        if manifest.recipe != recipe_hash() {
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

pub const QEMU: Tool = Tool { program: "qemu-system-x86_64", package: "qemu-system-x86", why: "runs the lab VMs" };
const BUILD_TOOLS: &[Tool] = &[
    Tool { program: "debootstrap", package: "debootstrap", why: "builds the VM's root file system" },
    Tool { program: "mkfs.ext4", package: "e2fsprogs", why: "makes the VM disk (needs -d, e2fsprogs ≥ 1.43)" },
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
    !["-security", "-updates", "-backports", "-proposed-updates"].iter().any(|s| suite.ends_with(s)) && !suite.contains('/')
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
        if enabled && types.split_whitespace().any(|t| t == "deb") && suites.split_whitespace().any(main_suite) {
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
    pub mirror: Option<String>,
    pub force: bool,
}

/// Builds the image unless an up-to-date one is there. Returns it and whether it
/// was built now.
pub fn build(opts: &BuildOpts, p: &Progress) -> Result<(Image, bool)> {
    if !opts.force {
        if let Ok(img) = Image::open(&opts.root) {
            return Ok((img, false));
        }
    }
    require_tools(BUILD_TOOLS)?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "building the lab image needs root (debootstrap chroots and creates device nodes)\n\
             hint: run `sudo roce lab build --dir {}` once; booting the lab afterwards does not need root",
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
        if let Ok(img) = Image::open(&opts.root) {
            return Ok((img, false));
        }
    }
    remove_stale_temp_dirs(&opts.root);
    let mirror = match &opts.mirror {
        Some(m) => m.clone(),
        None => host_mirror()?,
    };
    let start = Instant::now();
    let tmp = opts.root.join(format!("image.tmp-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp)?;
    let result = build_into(&tmp, &opts.root, &mirror, p, start);
    match result {
        Ok(manifest) => {
            let final_dir = image_dir(&opts.root);
            let old = opts.root.join(format!("image.old-{}", std::process::id()));
            if final_dir.exists() {
                fs::rename(&final_dir, &old).with_context(|| format!("moving the old image {} aside", final_dir.display()))?;
            }
            fs::rename(&tmp, &final_dir).with_context(|| format!("publishing the image as {}", final_dir.display()))?;
            let _ = fs::remove_dir_all(&old);
            p.say(&format!(
                "image ready in {:.0} s: {} (kernel {}, disk {} MiB)",
                manifest.build_secs,
                final_dir.display(),
                manifest.kernel_release,
                manifest.disk_bytes >> 20
            ));
            Ok((Image::open(&opts.root)?, true))
        }
        Err(e) => {
            let log = tmp.join("debootstrap.log");
            let keep = opts.root.join("last-failed-build.log");
            let _ = fs::copy(&log, &keep);
            let _ = fs::remove_dir_all(&tmp);
            Err(e.context(format!("building the lab image failed (nothing was published; log kept at {})", keep.display())))
        }
    }
}

fn remove_stale_temp_dirs(root: &Path) {
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

fn build_into(tmp: &Path, root: &Path, mirror: &str, p: &Progress, start: Instant) -> Result<Manifest> {
    let rootfs = tmp.join("rootfs");
    let cache = root.join("debs");
    fs::create_dir_all(&cache)?;
    p.say(&format!("debootstrap {SUITE} from {mirror} (packages cached in {})", cache.display()));
    debootstrap(&rootfs, &cache, mirror, &tmp.join("debootstrap.log"), p)?;

    p.say("checking the root file system");
    let missing: Vec<&str> = REQUIRED
        .iter()
        .filter(|(_, alts)| !alts.iter().any(|a| rootfs.join(a).exists()))
        .map(|(n, _)| *n)
        .collect();
    let (release, vmlinuz) = find_kernel(&rootfs)?;
    let moddir = rootfs.join("lib/modules").join(&release);
    let rxe = moddir.join("kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko");
    let mut missing: Vec<String> = missing.into_iter().map(String::from).collect();
    if !rxe.exists() {
        missing.push(format!("rdma_rxe.ko (looked for {})", rxe.display()));
    }
    if !missing.is_empty() {
        bail!("the image lacks: {}", missing.join(", "));
    }
    // Room for the mount points the initramfs uses; no documentation.
    fs::create_dir_all(rootfs.join("host"))?;
    for d in ["usr/share/doc", "usr/share/man", "usr/share/info", "var/cache/apt/archives", "var/lib/apt/lists"] {
        let _ = fs::remove_dir_all(rootfs.join(d));
        let _ = fs::create_dir_all(rootfs.join(d));
    }

    p.say(&format!("kernel {release}: preparing a direct boot"));
    fs::copy(&vmlinuz, tmp.join("vmlinuz")).context("copying the kernel")?;
    let boot_kernel = match extract_vmlinux(&vmlinuz, &tmp.join("vmlinux")) {
        Ok(()) => "vmlinux".to_string(),
        Err(e) => {
            p.say(&format!("warning: booting the compressed kernel (slower under TCG): {e:#}"));
            "vmlinuz".to_string()
        }
    };
    let busybox = REQUIRED[0].1.iter().map(|a| rootfs.join(a)).find(|p| p.exists()).context("busybox")?;
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
        recipe: recipe_hash(),
        suite: SUITE.into(),
        kernel_release: release,
        boot_kernel,
        mirror: mirror.into(),
        packages: PACKAGES.iter().map(|s| s.to_string()).collect(),
        modules: MODULES.iter().map(|s| s.to_string()).collect(),
        built_at_unix: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        build_secs: start.elapsed().as_secs_f64(),
        disk_bytes: size,
    };
    fs::write(tmp.join("manifest.json"), serde_json::to_vec_pretty(&manifest)?)?;
    Ok(manifest)
}

fn debootstrap(rootfs: &Path, cache: &Path, mirror: &str, log: &Path, p: &Progress) -> Result<()> {
    let mut child = Command::new(find_program("debootstrap").context("debootstrap")?)
        .arg("--variant=minbase")
        .arg(format!("--cache-dir={}", cache.display()))
        .arg(format!("--include={}", PACKAGES.join(",")))
        .arg(SUITE)
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
    for pipe in [child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>), child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>)]
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
    kernels.pop().ok_or_else(|| anyhow::anyhow!("no kernel (vmlinuz-*) in {}: did linux-image-amd64 install?", boot.display()))
}

/// Uncompresses the ELF kernel inside an xz-compressed bzImage (with the host's
/// `xz`), for qemu's PVH direct boot.
fn extract_vmlinux(bzimage: &Path, out: &Path) -> Result<()> {
    let data = fs::read(bzimage)?;
    const XZ_MAGIC: &[u8] = b"\xfd7zXZ\x00";
    let at = data.windows(XZ_MAGIC.len()).position(|w| w == XZ_MAGIC).context("the kernel is not xz-compressed")?;
    let xz = find_program("xz").context("no `xz` on this host (package xz-utils)")?;
    let mut child = Command::new(xz)
        .args(["-dc", "--single-stream"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().context("xz stdin")?;
    let payload = data[at..].to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&payload);
    });
    let mut elf = Vec::new();
    child.stdout.take().context("xz stdout")?.read_to_end(&mut elf)?;
    let _ = feeder.join();
    let _ = child.wait();
    if !elf.starts_with(b"\x7fELF") || elf.len() < 1 << 20 {
        bail!("what xz produced is not an ELF kernel");
    }
    fs::write(out, elf)?;
    Ok(())
}

/// `modules.dep` → the load order (dependencies first) of `MODULES`.
fn module_order(moddir: &Path) -> Result<Vec<String>> {
    let dep_path = moddir.join("modules.dep");
    let text = fs::read_to_string(&dep_path).with_context(|| format!("reading {}", dep_path.display()))?;
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
        let (path, ds) = deps.get(name).with_context(|| format!("module {name} is not in modules.dep"))?;
        for d in ds {
            visit(d, deps, seen, order)?;
        }
        order.push(path.clone());
        Ok(())
    }
    let (mut seen, mut order) = (Vec::new(), Vec::new());
    for m in MODULES {
        visit(m, &deps, &mut seen, &mut order)?;
    }
    if let Some(c) = order.iter().find(|p| !p.ends_with(".ko")) {
        bail!("module {c} is compressed; the lab's initramfs loads plain .ko files only");
    }
    Ok(order)
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
        let name = format!("{i:02}-{}", rel.rsplit('/').next().unwrap_or(rel));
        cpio.file(&format!("modules/{name}"), 0o644, &fs::read(moddir.join(rel))?);
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
        let fields = [self.ino, mode, 0, 0, 1, 0, data.len() as u32, 0, 0, 0, 0, name_z.len() as u32, 0];
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
        let list = "# deb http://old/debian bookworm main\ndeb-src http://src/debian bookworm main\n\
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
    fn recipe_hash_is_stable() {
        assert_eq!(recipe_hash(), recipe_hash());
        assert_eq!(fnv(&["a", "b"]), fnv(&["a", "b"]));
        assert_ne!(fnv(&["ab"]), fnv(&["a", "b"]));
    }
}
