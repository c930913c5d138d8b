//! What the lab needs from the host: its programs, named with the Debian package
//! that installs each, and the Debian mirror its apt already uses.
//!
//! Owns: [`Tool`] (and the tools the build needs), [`find_program`],
//! [`require_tools`], [`host_mirror`]. Imports: nothing from the crate.
use std::fs;
use std::path::PathBuf;

use anyhow::{bail, Result};

/// A host program the lab needs, and how to get it.
pub struct Tool {
    pub program: &'static str,
    pub package: &'static str,
    pub why: &'static str,
}

pub const QEMU: Tool =
    Tool { program: "qemu-system-x86_64", package: "qemu-system-x86", why: "runs the lab VMs" };
pub(super) const BUILD_TOOLS: &[Tool] = &[
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

pub(super) fn main_suite(suite: &str) -> bool {
    !["-security", "-updates", "-backports", "-proposed-updates"].iter().any(|s| suite.ends_with(s))
        && !suite.contains('/')
}

pub(super) fn mirrors_deb822(text: &str) -> Vec<String> {
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

pub(super) fn mirrors_one_line(text: &str) -> Vec<String> {
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
