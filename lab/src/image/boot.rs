//! What boots besides the disk: `vmlinux` uncompressed from the Debian bzImage
//! (for qemu's PVH entry) and our own initramfs (busybox, the lab's modules in
//! load order, `/init`), written as a cpio "newc" archive.
//!
//! Owns: unpacking the kernel and its modules, their load order, the cpio writer.
//! Imports: `/init` and `find_program` (to find the host's decompressors) from
//! [`image`](super).
use std::fs;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use super::{find_program, INITRD_INIT};

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
pub(super) fn extract_vmlinux(bzimage: &Path, out: &Path) -> Result<()> {
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

/// `modules.dep` → the load order (dependencies first) of `modules`, leaving out
/// those `modules.builtin` says are part of the kernel.
fn module_order(moddir: &Path, modules: &[&str]) -> Result<Vec<String>> {
    let dep_path = moddir.join("modules.dep");
    let text =
        fs::read_to_string(&dep_path).with_context(|| format!("reading {}", dep_path.display()))?;
    let builtin = fs::read_to_string(moddir.join("modules.builtin")).unwrap_or_default();
    module_order_from(&text, &builtin, modules)
}

pub(super) fn module_order_from(
    text: &str,
    builtin: &str,
    modules: &[&str],
) -> Result<Vec<String>> {
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
    for m in modules.iter().filter(|m| !builtin.iter().any(|b| b == *m)) {
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
pub(super) fn write_initramfs(
    moddir: &Path,
    modules: &[&str],
    busybox: &Path,
    out: &Path,
) -> Result<usize> {
    let order = module_order(moddir, modules)?;
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
pub(super) struct Cpio {
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
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }
    fn dir(&mut self, name: &str) {
        self.entry(name, 0o040755, &[]);
    }
    pub(super) fn file(&mut self, name: &str, perm: u32, data: &[u8]) {
        self.entry(name, 0o100000 | perm, data);
    }
    pub(super) fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[]);
        self.buf
    }
}
