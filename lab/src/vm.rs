//! qemu: the command line of a lab VM, and choosing between KVM and TCG.
//!
//! Owns: the qemu command line and the accelerator choice. Imports:
//! [`image`] (what boots, qemu's path), [`state`](super::state) (the
//! lab's files) and [`guest`](super::guest)'s port name.
use std::fs;
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::image::{self, Image};
use super::state::{LabPaths, Vm};

/// How qemu executes the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// KVM if it works here (probed once per host boot), else TCG.
    Auto,
    Kvm,
    /// Pure emulation: slow but works everywhere (nested KVM hangs on some hosts).
    Tcg,
}

impl Accel {
    pub const ALL: [Accel; 3] = [Accel::Auto, Accel::Kvm, Accel::Tcg];

    pub fn name(self) -> &'static str {
        match self {
            Accel::Auto => "auto",
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

impl std::str::FromStr for Accel {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Accel, String> {
        Accel::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| format!("`{s}` is not an accelerator: auto, kvm or tcg"))
    }
}

pub const MEMORY_MB: u32 = 512;

/// A VM's NIC backend, as a descriptor qemu inherits: a UDP socket connected to
/// the switch's, or a tap the switch is a port of.
#[derive(Debug, Clone, Copy)]
pub enum NetFd {
    Dgram(RawFd),
    Tap(RawFd),
}

impl NetFd {
    pub fn fd(self) -> RawFd {
        match self {
            NetFd::Dgram(fd) | NetFd::Tap(fd) => fd,
        }
    }
}

/// What a VM needs besides the image and its lab's paths.
pub struct VmSpec<'a> {
    pub vm: Vm,
    pub accel: Accel,
    /// The descriptor qemu uses as the NIC backend.
    pub net: Option<NetFd>,
    /// A management link (qemu's user networking, isolated from the host's
    /// networks) whose agent port is forwarded from this port of 127.0.0.1.
    pub mgmt: Option<u16>,
    pub paths: &'a LabPaths,
    pub probe: bool,
}

fn qemu_program() -> Result<PathBuf> {
    image::require_tools(&[image::QEMU])?;
    image::find_program(image::QEMU.program).context("qemu")
}

pub fn command(img: &Image, spec: &VmSpec) -> Result<Command> {
    let vm = spec.vm;
    let p = spec.paths;
    let mut c = Command::new(qemu_program()?);
    c.arg("-name").arg(format!("roce-lab-{}-{},process=roce-lab-{}", p.name, vm.name(), vm.name()));
    match spec.accel {
        Accel::Kvm => c.args(["-accel", "kvm", "-cpu", "host"]),
        _ => c.args(["-accel", "tcg", "-cpu", "max"]),
    };
    c.args([
        "-m",
        &MEMORY_MB.to_string(),
        "-smp",
        "1",
        "-nodefaults",
        "-no-user-config",
        "-no-reboot",
    ]);
    c.args(["-display", "none", "-monitor", "none"]);
    c.arg("-serial").arg(format!("file:{}", p.console(vm).display()));
    c.arg("-kernel").arg(&img.kernel).arg("-initrd").arg(&img.initrd);
    c.arg("-drive").arg(format!("file={},format=raw,if=virtio,snapshot=on", img.disk.display()));
    c.arg("-virtfs")
        .arg(format!("local,path={},mount_tag=host,security_model=none", p.share().display()));
    c.args(["-device", "virtio-serial-pci"]);
    c.arg("-chardev")
        .arg(format!("socket,id=ctl,path={},server=on,wait=off", p.agent_socket(vm).display()));
    c.args(["-device", &format!("virtserialport,chardev=ctl,name={}", super::guest::PORT_NAME)]);
    if let Some(net) = spec.net {
        match net {
            NetFd::Dgram(fd) => {
                c.arg("-netdev").arg(format!("dgram,id=wire,local.type=fd,local.str={fd}"))
            }
            // No vnet header: the guest computes its own checksums, so what the
            // tap carries is what a NIC would put on a wire.
            NetFd::Tap(fd) => c.arg("-netdev").arg(format!("tap,id=wire,fd={fd},vhost=off")),
        };
        c.arg("-device").arg(format!("virtio-net-pci,netdev=wire,mac={},romfile=", vm.mac()));
    }
    if let Some(port) = spec.mgmt {
        // `restrict=on`: the guest reaches nothing of the host's or beyond; only
        // the forwarded port reaches it. A PCI slot after the wire's, so the
        // wire stays eth0 and this is eth1.
        c.arg("-netdev").arg(format!(
            "user,id=mgmt,restrict=on,ipv6=off,hostfwd=tcp:127.0.0.1:{port}-:{}",
            super::guest::MGMT_AGENT_PORT
        ));
        c.arg("-device")
            .arg(format!("virtio-net-pci,netdev=mgmt,addr=0x10,romfile=,mac={}", vm.mgmt_mac()));
    }
    if !spec.probe {
        c.arg("-pidfile").arg(p.qemu_pidfile(vm));
    }
    let peer = vm.peer();
    let mut append = format!(
        "console=ttyS0 quiet loglevel=4 panic=-1 net.ifnames=0 cryptomgr.notests lab.vm={} lab.ip={} lab.peer={} lab.peer_mac={}",
        vm.name(),
        vm.ip(),
        peer.ip(),
        peer.mac()
    );
    if spec.probe {
        append.push_str(" lab.probe=1");
    }
    if spec.mgmt.is_some() {
        append.push_str(&format!(" lab.mgmt={}", super::guest::MGMT_AGENT_PORT));
    }
    c.arg("-append").arg(append);
    Ok(c)
}

/// Starts qemu so that it dies with the calling thread's process (PR_SET_PDEATHSIG):
/// however the daemon ends, no qemu outlives it. `keep_fd` is inherited.
pub fn spawn(mut c: Command, keep_fd: Option<RawFd>, log: &Path) -> Result<Child> {
    let parent = std::process::id() as i32;
    let log_file = fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    c.stdin(Stdio::null()).stdout(log_file.try_clone()?).stderr(log_file);
    // SAFETY: only async-signal-safe calls (prctl, getppid, fcntl, _exit) between
    // fork and exec.
    unsafe {
        c.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            if let Some(fd) = keep_fd {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    c.spawn().context("starting qemu-system-x86_64")
}

#[derive(Debug, Serialize, Deserialize)]
struct ProbeCache {
    boot_id: String,
    kvm_works: bool,
    detail: String,
}

fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default().trim().to_string()
}

/// Opens /dev/kvm: present and usable by us.
fn kvm_device_usable() -> bool {
    fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_ok()
}

/// Resolves `auto`: TCG unless /dev/kvm is usable *and* a VM actually boots under
/// KVM within a deadline (nested KVM can hang the guest early in boot). The answer
/// is cached per host boot in `<root>/kvm-probe.json`.
pub fn resolve_accel(
    want: Accel,
    img: &Image,
    paths: &LabPaths,
    say: &dyn Fn(&str),
) -> Result<(Accel, String)> {
    match want {
        Accel::Tcg => return Ok((Accel::Tcg, "tcg (asked for)".into())),
        Accel::Kvm => {
            if !kvm_device_usable() {
                bail!("--accel kvm: /dev/kvm is missing or not accessible to this user");
            }
            return Ok((Accel::Kvm, "kvm (asked for)".into()));
        }
        Accel::Auto => {}
    }
    if !kvm_device_usable() {
        return Ok((Accel::Tcg, "tcg (no usable /dev/kvm)".into()));
    }
    let cache_path = paths.root.join("kvm-probe.json");
    let id = boot_id();
    if let Ok(text) = fs::read_to_string(&cache_path) {
        if let Ok(c) = serde_json::from_str::<ProbeCache>(&text) {
            if c.boot_id == id {
                let a = if c.kvm_works { Accel::Kvm } else { Accel::Tcg };
                return Ok((a, format!("{} (KVM probe cached: {})", a.name(), c.detail)));
            }
        }
    }
    say("probing KVM (once per host boot; up to 20 s)");
    let (works, detail) = probe_kvm(img, paths, Duration::from_secs(20))?;
    let _ = fs::write(
        &cache_path,
        serde_json::to_vec(&ProbeCache { boot_id: id, kvm_works: works, detail: detail.clone() })?,
    );
    let a = if works { Accel::Kvm } else { Accel::Tcg };
    Ok((a, format!("{} (KVM probe: {detail})", a.name())))
}

/// Boots VM a with `-accel kvm` and `lab.probe=1` (the guest init powers off at
/// once) and waits for the guest's "probe ok" on the console.
fn probe_kvm(img: &Image, paths: &LabPaths, deadline: Duration) -> Result<(bool, String)> {
    fs::create_dir_all(paths.share())?;
    let spec = VmSpec { vm: Vm::A, accel: Accel::Kvm, net: None, mgmt: None, paths, probe: true };
    let c = command(img, &spec)?;
    let log = paths.dir.join("kvm-probe.log");
    let mut child = spawn(c, None, &log)?;
    let start = Instant::now();
    let console = paths.console(Vm::A);
    let result = loop {
        let out = fs::read_to_string(&console).unwrap_or_default();
        if out.contains("roce-lab: probe ok") {
            break (true, format!("guest booted in {:.1} s", start.elapsed().as_secs_f64()));
        }
        if let Ok(Some(st)) = child.try_wait() {
            let said = fs::read_to_string(&log).unwrap_or_default();
            let first: String = said
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .chars()
                .take(100)
                .collect();
            break (false, format!("qemu exited ({st}) before the guest came up: {first}"));
        }
        if start.elapsed() > deadline {
            break (
                false,
                format!("guest not up after {} s (nested KVM hang?)", deadline.as_secs()),
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = child.kill();
    let _ = child.wait();
    let _ = fs::remove_file(&console);
    Ok(result)
}
