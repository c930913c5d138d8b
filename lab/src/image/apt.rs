//! A kernel from another suite than the user space (`trixie-backports`): once
//! debootstrap is done, apt inside the new tree installs it from that suite, which
//! is added to the tree's sources from the same mirror. No bind mounts and no
//! /proc: apt, dpkg and the kernel's maintainer scripts run under `chroot` as in
//! debootstrap's second stage, and a `policy-rc.d` keeps any service from starting.
//! The `.deb`s are kept between builds in a cache of their own, as debootstrap
//! keeps its.
//!
//! Owns: installing the kernel from another suite and that `.deb` cache. Imports:
//! the logged runner, `Phases`, the kernel's package names and `find_program` from
//! [`image`](super); [`Progress`] from [`progress`](crate::progress).
use std::ffi::OsString;
use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::{find_program, run_logged, Phases, KERNEL_PACKAGES};
use crate::progress::Progress;

/// The `deb` line that adds `suite` from `mirror` (main only: the kernel needs nothing else).
pub(super) fn sources_line(mirror: &str, suite: &str) -> String {
    format!("deb {mirror} {suite} main\n")
}

/// Installs [`KERNEL_PACKAGES`] from `suite` into the debootstrapped `rootfs`.
pub(super) fn install_kernel_from(
    suite: &str,
    rootfs: &Path,
    cache: &Path,
    mirror: &str,
    log: &Path,
    p: &Progress,
) -> Result<()> {
    let sources = rootfs.join("etc/apt/sources.list.d").join(format!("{suite}.list"));
    fs::create_dir_all(sources.parent().context("sources.list.d")?)?;
    fs::write(&sources, sources_line(mirror, suite))
        .with_context(|| format!("writing {}", sources.display()))?;
    let policy = rootfs.join("usr/sbin/policy-rc.d");
    fs::write(
        &policy,
        "#!/bin/sh\n# roce lab build: no service starts in the image tree\nexit 101\n",
    )?;
    set_mode(&policy, 0o755)?;
    // debootstrap leaves its own packages in apt's archive: only what apt fetches
    // on top goes back into this suite's cache.
    let archives = rootfs.join("var/cache/apt/archives");
    fs::create_dir_all(&archives)?;
    let debootstrapped = debs(&archives);
    copy_debs(cache, &archives, &[])?;

    let chroot = find_program("chroot").context("chroot (coreutils)")?;
    let apt = |args: &[&str]| {
        let mut cmd = Command::new(&chroot);
        cmd.arg(rootfs)
            .args(["apt-get", "-q", "-o", "Dpkg::Use-Pty=0"])
            .args(args)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("LC_ALL", "C")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .env("DEBCONF_NONINTERACTIVE_SEEN", "true");
        cmd
    };
    let mut install = vec!["install", "-y", "--no-install-recommends", "-t", suite];
    install.extend(KERNEL_PACKAGES);
    for (args, what) in [
        (vec!["update"], format!("apt-get update ({suite} added)")),
        (install, format!("apt-get install -t {suite}")),
    ] {
        p.say(&format!("  {what}"));
        let mut phases = Phases::default();
        let (status, last) = run_logged(apt(&args), "apt-get", log, &mut |line| {
            // One line per phase (Get, Unpacking, Setting up …) with a count, and
            // every warning and error.
            let word = line.split([' ', ':']).next().unwrap_or("");
            if ["Get", "Unpacking", "Setting", "Processing"].contains(&word) {
                phases.line(p, "apt-get", word, line);
            } else if line.starts_with("W: ") || line.starts_with("E: ") {
                p.say(&format!("  apt-get: {line}"));
            }
            p.live(&format!("apt-get: {line}"));
        })?;
        phases.finish(p);
        if !status.success() {
            bail!(
                "{what} in the image tree failed ({status}); its last lines:\n  {}\nhint: check that {mirror} serves {suite} (the kernel comes from there), or pass --mirror",
                last.join("\n  ")
            );
        }
    }
    copy_debs(&archives, cache, &debootstrapped)?;
    fs::remove_file(&policy).context("removing the build's policy-rc.d")?;
    Ok(())
}

/// The names of the `.deb`s in `dir`.
fn debs(dir: &Path) -> Vec<OsString> {
    let Ok(rd) = fs::read_dir(dir) else { return Vec::new() };
    rd.flatten().map(|e| e.file_name()).filter(|n| n.to_string_lossy().ends_with(".deb")).collect()
}

/// Copies the `.deb`s in `from` that `to` lacks, but for those named in `except`.
fn copy_debs(from: &Path, to: &Path, except: &[OsString]) -> Result<()> {
    for name in debs(from) {
        if !except.contains(&name) && !to.join(&name).exists() {
            fs::copy(from.join(&name), to.join(&name)).with_context(|| {
                format!("copying {} to {}", from.join(&name).display(), to.display())
            })?;
        }
    }
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {mode:o} {}", path.display()))
}
