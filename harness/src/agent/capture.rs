//! One capture of one scenario's wire on the agent's own host (`CaptureStart`,
//! `CaptureStop`, then `CaptureRead`s): RoCEv2 (UDP 4791) on the network
//! interface of the device port's GID, through libpcap (the `live` feature), or
//! with the command the agent was started with (`roce agent --capture-command`;
//! never one the controller names). The file lives in a private temporary
//! directory that goes when the capture does, so a session leaves nothing
//! behind, however it ends.
//!
//! Owns: [`Capture`] (running), [`Captured`] (stopped, read in chunks), the
//! lookup of the GID's interface ([`netdev`]) and the capture command's parsing
//! ([`parse_command`]) and substitution ([`substitute`]). Imports: the protocol's
//! capture bounds, the executor's error type, `crate::net::live` (libpcap),
//! dissector's capture reader and writer; `lab::progress::to_stderr` for its
//! log lines.
use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::protocol::{CAPTURE_CHUNK, CAPTURE_MAX};

/// What went wrong, in words (the executor makes it the agent's error).
type Result<T> = std::result::Result<T, String>;

fn fail<T>(m: impl Into<String>) -> Result<T> {
    Err(m.into())
}

/// What a capture keeps: RoCEv2.
pub(crate) const FILTER: &str = "udp port 4791";
/// The kernel's buffer for a libpcap capture (as `tcpdump -B 65536`): a stream
/// of tens of thousands of frames fits while the capture thread waits for a
/// CPU (libpcap's default, 2 MiB, dropped a fifth of an 8-QP stream's frames in
/// a TCG lab VM).
const BUFFER: u32 = 64 << 20;
/// What a capture says of its receive ring: the size the kernel gave it, and the
/// size asked where it got less (libpcap takes a smaller ring without a word
/// when the kernel refuses the memory, and a burst then overflows it sooner).
fn ring_said(got: Option<u64>, asked: u64) -> String {
    let mib = |b: u64| format!("{:.0} MiB", b as f64 / f64::from(1u32 << 20));
    match got {
        None => String::new(),
        Some(g) if g >= asked => format!(", a {} ring", mib(g)),
        Some(g) => format!(", a {} ring of the {} asked", mib(g), mib(asked)),
    }
}

/// The argument the capture file's path replaces (it must be there).
pub(crate) const FILE_ARG: &str = "{file}";
/// The argument the interface's name replaces.
pub(crate) const IFACE_ARG: &str = "{iface}";
/// A capture command as the agent takes it.
pub(crate) const COMMAND_EXAMPLE: &str =
    "--capture-command 'tcpdump -i {iface} -w {file} udp port 4791'";
/// Where the kernel says which interface holds a device port's GID.
const SYSFS: &str = "/sys/class/infiniband";
/// The longest interface name Linux allows (IFNAMSIZ less its NUL).
const IFNAME_MAX: usize = 15;
/// How long a capture command has to make its file before it counts as running.
const STARTS_WITHIN: Duration = Duration::from_secs(2);
/// How long a capture command has to end after SIGINT before it is killed.
const STOPS_WITHIN: Duration = Duration::from_secs(5);
/// The lines of a failed command's output an error carries.
const TAIL_LINES: usize = 8;

const NO_NETDEV_HINT: &str = "a device without a network interface (hardware offload) cannot be captured with libpcap here: start the agent with --capture-command, e.g. ibdump";

/// A line of the agent's log on stderr.
fn say(line: &str) {
    lab::progress::to_stderr(format!("roce agent: {line}\n").as_bytes());
}

/// `--capture-command`'s value: its words (split on whitespace, no shell), one of
/// them exactly `{file}`, the file the agent reads the capture from.
pub(crate) fn parse_command(s: &str) -> std::result::Result<Vec<String>, String> {
    let argv: Vec<String> = s.split_whitespace().map(str::to_string).collect();
    let Some(program) = argv.first() else {
        return Err(format!("the capture command is empty\nhint: e.g. {COMMAND_EXAMPLE}"));
    };
    if program == FILE_ARG || program == IFACE_ARG {
        return Err(format!(
            "the capture command `{s}` starts with `{program}`: its first word is the program to run\nhint: e.g. {COMMAND_EXAMPLE}"
        ));
    }
    if !argv.iter().any(|a| a == FILE_ARG) {
        return Err(format!(
            "the capture command `{s}` has no `{FILE_ARG}` argument (a word of its own): the agent names the file the command writes and reads the capture from it\nhint: e.g. {COMMAND_EXAMPLE}"
        ));
    }
    Ok(argv)
}

/// The command's argv as run: each `{iface}` replaced by `iface` (an error when
/// the GID has no interface), each `{file}` by `file`.
pub(crate) fn substitute(
    argv: &[String],
    iface: Option<&str>,
    file: &Path,
) -> Result<Vec<OsString>> {
    argv.iter()
        .map(|a| match a.as_str() {
            FILE_ARG => Ok(file.as_os_str().to_os_string()),
            IFACE_ARG => match iface {
                Some(i) => Ok(OsString::from(i)),
                None => fail(format!(
                    "the capture command names `{IFACE_ARG}`, but the device's GID has no network interface\nhint: {NO_NETDEV_HINT} (whose command names the device, not an interface)"
                )),
            },
            _ => Ok(OsString::from(a)),
        })
        .collect()
}

/// `Ok` when `name` can be an interface's name: 1 to 15 bytes, no `/`, no
/// whitespace or control characters.
pub(crate) fn check_iface(name: &str) -> std::result::Result<(), String> {
    let why = if name.is_empty() {
        "it is empty"
    } else if name.len() > IFNAME_MAX {
        "it is longer than the 15 bytes Linux allows"
    } else if name.contains('/') {
        "it holds a `/`"
    } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        "it holds whitespace or control characters"
    } else {
        return Ok(());
    };
    Err(format!("`{}` is not an interface name: {why}", name.escape_debug()))
}

/// The network interface of `device`'s `port` GID `gid_index`, as the kernel
/// has it (`/sys/class/infiniband/DEV/ports/PORT/gid_attrs/ndevs/INDEX`).
pub(crate) fn netdev(device: &str, port: u8, gid_index: u8) -> Result<String> {
    netdev_in(Path::new(SYSFS), device, port, gid_index)
}

fn netdev_in(root: &Path, device: &str, port: u8, gid_index: u8) -> Result<String> {
    let p = root
        .join(device)
        .join("ports")
        .join(port.to_string())
        .join("gid_attrs/ndevs")
        .join(gid_index.to_string());
    let name = match std::fs::read_to_string(&p) {
        Ok(s) => s.trim().to_string(),
        Err(e) => {
            return fail(format!(
                "{device} port {port} GID index {gid_index} has no network interface to capture ({}: {e})\nhint: {NO_NETDEV_HINT}",
                p.display()
            ))
        }
    };
    check_iface(&name).map_err(|why| {
        format!(
            "the interface of {device} port {port} GID index {gid_index} ({}): {why}\nhint: {NO_NETDEV_HINT}",
            p.display()
        )
    })?;
    Ok(name)
}

/// The last [`TAIL_LINES`] lines of a command's output file, for an error.
fn tail(log: &Path) -> String {
    let Ok(bytes) = std::fs::read(log) else { return String::new() };
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let last = &lines[lines.len().saturating_sub(TAIL_LINES)..];
    if last.is_empty() {
        return "; it said nothing".to_string();
    }
    format!("; it said:\n  {}", last.join("\n  "))
}

/// What tcpdump says it dropped when it ends (`N packets dropped by kernel`,
/// `… by interface`); 0 when the command says nothing of it.
fn dropped_said(log: &Path) -> u64 {
    let Ok(bytes) = std::fs::read(log) else { return 0 };
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| {
            let (n, rest) = l.trim().split_once(' ')?;
            let by = rest
                .strip_prefix("packets dropped by ")
                .or(rest.strip_prefix("packet dropped by "))?;
            (by.starts_with("kernel") || by.starts_with("interface"))
                .then(|| n.parse::<u64>().ok())?
        })
        .fold(0, u64::saturating_add)
}

/// A running capture of one scenario's wire. Dropping it stops it (the command
/// is killed, the libpcap thread stopped) and removes its file.
pub(crate) struct Capture {
    how: String,
    /// Before `dir`: what writes into it stops before it is removed.
    way: Way,
    file: PathBuf,
    max: u64,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture").field("how", &self.how).field("file", &self.file).finish()
    }
}

enum Way {
    #[cfg(feature = "live")]
    Live(crate::net::live::FileCapture),
    Command(Run),
}

/// A stopped capture: what it holds, and its file until it is dropped.
#[derive(Debug)]
pub(crate) struct Captured {
    pub(crate) bytes: u64,
    pub(crate) frames: u64,
    pub(crate) dropped: u64,
    /// It reached [`CAPTURE_MAX`] and stopped there.
    pub(crate) cut_short: bool,
    file: PathBuf,
    _dir: tempfile::TempDir,
}

fn private_dir() -> Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix("roce-capture-").tempdir().map_err(|e| {
        format!(
            "cannot make a directory for the capture in {}: {e}\nhint: set TMPDIR to a writable directory with room",
            std::env::temp_dir().display()
        )
    })
}

impl Capture {
    /// Starts capturing the wire of `device`'s `port` on the interface of GID
    /// `gid_index`: with `command` (the agent's `--capture-command`) when given,
    /// else through libpcap.
    pub(crate) fn start(
        device: &str,
        port: u8,
        gid_index: u8,
        command: Option<&[String]>,
    ) -> Result<Capture> {
        match command {
            Some(argv) => {
                // A command that names no interface (ibdump names the device) runs
                // where the GID has none.
                let iface = match netdev(device, port, gid_index) {
                    Ok(i) => Some(i),
                    Err(e) if argv.iter().any(|a| a == IFACE_ARG) => return Err(e),
                    Err(_) => None,
                };
                Capture::run_command(argv, iface.as_deref(), CAPTURE_MAX)
            }
            #[cfg(feature = "live")]
            None => Capture::live(&netdev(device, port, gid_index)?, CAPTURE_MAX),
            #[cfg(not(feature = "live"))]
            None => fail(
                "this agent was built without live capture (libpcap), so it cannot capture its wire\nhint: build roce with `--features live`, or start the agent with --capture-command (e.g. 'tcpdump -i {iface} -w {file} udp port 4791')",
            ),
        }
    }

    /// How it captures (`libpcap on eth1 (…)`, or the command line as run).
    pub(crate) fn how(&self) -> &str {
        &self.how
    }

    /// Runs the capture command `argv` into a file of a fresh private directory;
    /// returns once the file has bytes (or after [`STARTS_WITHIN`]). A command
    /// that ends at once without making it is an error carrying what it said.
    pub(super) fn run_command(argv: &[String], iface: Option<&str>, max: u64) -> Result<Capture> {
        let dir = private_dir()?;
        let file = dir.path().join("capture");
        let log = dir.path().join("command.log");
        let args = substitute(argv, iface, &file)?;
        let how = args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ");
        let Some((program, rest)) = args.split_first() else {
            return fail(format!("the capture command is empty\nhint: e.g. {COMMAND_EXAMPLE}"));
        };
        let out =
            File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let child = Command::new(program)
            .args(rest)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot run the capture command `{how}`: {e}\nhint: install {}, or give its full path in --capture-command",
                    program.to_string_lossy()
                )
            })?;
        let mut run = Run { child, log, signalled: false };
        let until = Instant::now() + STARTS_WITHIN;
        loop {
            if std::fs::metadata(&file).is_ok_and(|m| m.len() > 0) {
                break;
            }
            if let Some(status) = run.ended()? {
                return fail(format!(
                    "the capture command `{how}` ended at once ({status}) without writing its file{}",
                    tail(&run.log)
                ));
            }
            if Instant::now() >= until {
                // Still running: its file may come with its first packet (a
                // buffered writer keeps even the header until then).
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Capture { how, way: Way::Command(run), file, max, dir })
    }

    /// Stops the capture: what it holds, and its file to read.
    pub(crate) fn stop(self) -> Result<Captured> {
        let Capture { how, way, file, max, dir } = self;
        let (frames, dropped, cut_short) = match way {
            #[cfg(feature = "live")]
            Way::Live(cap) => match cap.finish() {
                Ok(w) => (w.frames, w.dropped, w.cut_short),
                Err(e) => return fail(format!("the capture `{how}` failed: {e}")),
            },
            Way::Command(mut run) => {
                let status = run.finish()?;
                if !run.signalled && !status.success() {
                    return fail(format!(
                        "the capture command `{how}` failed ({status}){}",
                        tail(&run.log)
                    ));
                }
                let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
                if bytes == 0 {
                    return fail(format!(
                        "the capture command `{how}` wrote nothing to {} ({status}){}",
                        file.display(),
                        tail(&run.log)
                    ));
                }
                if bytes > max {
                    return fail(format!(
                        "the capture command `{how}` wrote {bytes} bytes, more than the {max} a capture may hold\nhint: capture less: a filter (`udp port 4791`), or a snap length (tcpdump -s 128)"
                    ));
                }
                let frames = count_frames(&file, &how, &run.log)?;
                (frames, dropped_said(&run.log), false)
            }
        };
        let bytes = std::fs::metadata(&file)
            .map(|m| m.len())
            .map_err(|e| format!("the capture `{how}` left no file ({}): {e}", file.display()))?;
        Ok(Captured { bytes, frames, dropped, cut_short, file, _dir: dir })
    }
}

/// The frames of a capture file (pcap or pcapng); a file cut off in its last
/// record (a command killed mid-write) counts the whole frames before it.
fn count_frames(file: &Path, how: &str, log: &Path) -> Result<u64> {
    let mut r = dissector::capture::open(file).map_err(|e| {
        format!("the capture command `{how}` did not write a capture: {e}{}", tail(log))
    })?;
    let mut n = 0u64;
    loop {
        match dissector::capture::PacketSource::next_packet(&mut r) {
            Ok(Some(_)) => n += 1,
            Ok(None) => return Ok(n),
            Err(e) if matches!(e.kind(), dissector::capture::ErrorKind::Truncated { .. }) => {
                say(&format!("the capture `{how}`: {e}"));
                return Ok(n);
            }
            Err(e) => {
                return fail(format!("the capture command `{how}` wrote a broken capture: {e}"))
            }
        }
    }
}

impl Captured {
    /// Up to [`CAPTURE_CHUNK`] bytes of the file from `offset`: empty past its end.
    pub(crate) fn read(&self, offset: u64) -> Result<Vec<u8>> {
        let io = |e: std::io::Error| format!("reading the capture {}: {e}", self.file.display());
        let mut f = File::open(&self.file).map_err(io)?;
        if offset >= self.bytes {
            return Ok(Vec::new());
        }
        f.seek(SeekFrom::Start(offset)).map_err(io)?;
        let mut out = Vec::new();
        f.take(CAPTURE_CHUNK.min(self.bytes - offset)).read_to_end(&mut out).map_err(io)?;
        Ok(out)
    }
}

/// A capture command's process and where its output goes. Dropping it ends the
/// process (SIGINT, then SIGKILL).
struct Run {
    child: Child,
    log: PathBuf,
    /// The agent stopped it (it did not end on its own).
    signalled: bool,
}

impl Run {
    /// Its status once it has ended.
    fn ended(&mut self) -> Result<Option<ExitStatus>> {
        self.child.try_wait().map_err(|e| format!("waiting for the capture command: {e}"))
    }

    /// Ends it (SIGINT, which a capture tool takes as "finish the file"; SIGKILL
    /// after [`STOPS_WITHIN`]) unless it has ended; its status.
    fn finish(&mut self) -> Result<ExitStatus> {
        if let Some(s) = self.ended()? {
            return Ok(s);
        }
        self.signalled = true;
        // Not yet waited for, so the pid is still this child's (a zombie at worst).
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: kill(2) with a valid signal number on our own child's pid.
            unsafe { libc::kill(pid, libc::SIGINT) };
        }
        let until = Instant::now() + STOPS_WITHIN;
        while Instant::now() < until {
            if let Some(s) = self.ended()? {
                return Ok(s);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        say(&format!(
            "the capture command (pid {}) did not end within {STOPS_WITHIN:?} of SIGINT: killed",
            self.child.id()
        ));
        let _ = self.child.kill();
        self.child.wait().map_err(|e| format!("waiting for the capture command: {e}"))
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

#[cfg(feature = "live")]
mod live {
    use std::sync::atomic::Ordering;
    use std::sync::Once;
    use std::time::Duration;

    use super::{fail, say, Capture, Result, Way, FILTER};
    use crate::net::live::{FileCapture, LiveOptions};

    /// libpcap's first capture installs the process's Ctrl-C/SIGTERM/SIGHUP
    /// handler (`net::live`), which takes the first signal as "stop capturing":
    /// this agent still ends on it, as it did before it ever captured.
    fn end_on_signal() {
        static WATCH: Once = Once::new();
        WATCH.call_once(|| {
            let flag = crate::net::live::ctrl_c_flag();
            let _ = std::thread::Builder::new().name("roce-agent-signal".into()).spawn(move || {
                while !flag.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(100));
                }
                say("interrupted (Ctrl-C, SIGTERM or SIGHUP): ending");
                std::process::exit(130);
            });
        });
    }

    impl Capture {
        /// Captures RoCEv2 on `iface` through libpcap into a pcapng file of a
        /// fresh private directory, at most `max` bytes; returns once the
        /// capture is open.
        pub(super) fn live(iface: &str, max: u64) -> Result<Capture> {
            super::check_iface(iface)?;
            let dir = super::private_dir()?;
            let file = dir.path().join("capture.pcapng");
            let opts = LiveOptions {
                iface: iface.to_string(),
                filter: FILTER.to_string(),
                buffer: Some(super::BUFFER),
                snaplen: crate::net::live::whole_frames(iface),
                ..Default::default()
            };
            let writer = concat!("roce agent ", env!("CARGO_PKG_VERSION"));
            let cap = match FileCapture::start(opts, &file, writer, max) {
                Ok(c) => c,
                Err(e) => return fail(format!("cannot capture on {iface}: {e}")),
            };
            end_on_signal();
            let ring = super::ring_said(cap.ring_bytes(), u64::from(super::BUFFER));
            Ok(Capture {
                how: format!("libpcap on {iface} ({FILTER}){ring}"),
                way: Way::Live(cap),
                file,
                max,
                dir,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use dissector::capture::{PcapWriter, Reader};
    use dissector::LinkType;

    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    /// A pcap file of `packets` frames of `size` bytes in `dir`: its path and bytes.
    fn fixture(dir: &Path, packets: usize, size: usize) -> (PathBuf, Vec<u8>) {
        let p = dir.join("fixture.pcap");
        let mut w = PcapWriter::new(File::create(&p).unwrap(), LinkType::ETHERNET, 0).unwrap();
        for i in 0..packets {
            w.write_packet(1_000_000 + i as u64, &vec![i as u8; size], size as u32).unwrap();
        }
        w.into_inner().unwrap();
        let bytes = fs::read(&p).unwrap();
        (p, bytes)
    }

    /// A command that makes its file from `fixture` and runs until stopped.
    fn copy_then_sleep(fixture: &Path) -> Vec<String> {
        vec![
            "sh".into(),
            "-c".into(),
            r#"cp "$0" "$1" && exec sleep 30"#.into(),
            fixture.to_string_lossy().into_owned(),
            FILE_ARG.into(),
        ]
    }

    #[test]
    fn the_command_is_its_words_with_file_among_them() {
        let argv = parse_command("  tcpdump -i {iface}\t-w {file} udp port 4791 ").unwrap();
        assert_eq!(argv, words("tcpdump -i {iface} -w {file} udp port 4791"));
        let e = parse_command(" \t ").unwrap_err();
        assert!(
            e.contains("is empty") && e.contains(&format!("hint: e.g. {COMMAND_EXAMPLE}")),
            "{e}"
        );
        let e = parse_command("tcpdump -i {iface} -w{file}").unwrap_err();
        assert!(e.contains("has no `{file}` argument") && e.contains(COMMAND_EXAMPLE), "{e}");
        let e = parse_command("{file} -i eth0").unwrap_err();
        assert!(e.contains("its first word is the program"), "{e}");
    }

    #[test]
    fn iface_and_file_replace_whole_arguments_only() {
        let argv = parse_command("tcpdump -i {iface} -w {file} --x={file} udp port 4791").unwrap();
        let got = substitute(&argv, Some("eth1"), Path::new("/tmp/d/capture")).unwrap();
        let want =
            ["tcpdump", "-i", "eth1", "-w", "/tmp/d/capture", "--x={file}", "udp", "port", "4791"]
                .map(OsString::from);
        assert_eq!(got, want);
        let e = substitute(&argv, None, Path::new("/f")).unwrap_err();
        assert!(
            e.contains("names `{iface}`, but the device's GID has no network interface")
                && e.contains("start the agent with --capture-command, e.g. ibdump"),
            "{e}"
        );
        // A command that names the device, not an interface, needs none.
        let ib = parse_command("ibdump -d mlx5_0 -w {file}").unwrap();
        let got = substitute(&ib, None, Path::new("/f")).unwrap();
        assert_eq!(got, ["ibdump", "-d", "mlx5_0", "-w", "/f"].map(OsString::from));
    }

    #[test]
    fn interface_names_are_checked() {
        for ok in ["eth1", "enp1s0f0np0", "a23456789012345"] {
            assert_eq!(check_iface(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("", "it is empty"),
            ("a234567890123456", "longer than the 15 bytes"),
            ("../eth0", "holds a `/`"),
            ("eth 0", "whitespace"),
            ("eth\u{7}", "control"),
        ] {
            let e = check_iface(bad).unwrap_err();
            assert!(e.contains("is not an interface name") && e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn the_interface_of_the_gid_is_the_kernels() {
        let root = tempfile::tempdir().unwrap();
        let ndevs = root.path().join("rxe0/ports/1/gid_attrs/ndevs");
        fs::create_dir_all(&ndevs).unwrap();
        fs::write(ndevs.join("1"), "eth1\n").unwrap();
        fs::write(ndevs.join("2"), "eth1/../x\n").unwrap();
        fs::write(ndevs.join("4"), "\n").unwrap();
        assert_eq!(netdev_in(root.path(), "rxe0", 1, 1).unwrap(), "eth1");
        let e = netdev_in(root.path(), "rxe0", 1, 3).unwrap_err();
        assert!(
            e.contains("rxe0 port 1 GID index 3 has no network interface to capture")
                && e.contains("ndevs/3")
                && e.contains("hint: a device without a network interface (hardware offload)"),
            "{e}"
        );
        let e = netdev_in(root.path(), "rxe0", 1, 2).unwrap_err();
        assert!(e.contains("holds a `/`") && e.contains("--capture-command"), "{e}");
        let e = netdev_in(root.path(), "rxe0", 1, 4).unwrap_err();
        assert!(e.contains("it is empty"), "{e}");
    }

    #[test]
    fn what_tcpdump_says_it_dropped_is_counted() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("log");
        fs::write(
            &log,
            "tcpdump: listening on eth1\n7 packets captured\n9 packets received by filter\n2 packets dropped by kernel\n1 packet dropped by interface\n",
        )
        .unwrap();
        assert_eq!(dropped_said(&log), 3);
        fs::write(&log, "nothing of drops\n").unwrap();
        assert_eq!(dropped_said(&log), 0);
        assert_eq!(dropped_said(&d.path().join("none")), 0);
    }

    /// `cp` makes the file and ends at once: a finished capture, read back in
    /// chunks of at most CAPTURE_CHUNK, empty past its end, gone when dropped.
    #[test]
    fn a_command_that_ends_after_making_the_file_is_a_finished_capture() {
        let fx = tempfile::tempdir().unwrap();
        let (path, bytes) = fixture(fx.path(), 600, 1000);
        assert!(bytes.len() as u64 > CAPTURE_CHUNK, "the fixture spans two chunks");
        let argv = vec!["cp".to_string(), path.to_string_lossy().into_owned(), FILE_ARG.into()];
        let mut c = Capture::run_command(&argv, None, CAPTURE_MAX).unwrap();
        assert!(c.how().starts_with(&format!("cp {} /", path.display())), "{}", c.how());
        assert!(c.how().ends_with("/capture"), "{}", c.how());
        let dir = c.dir.path().to_path_buf();
        // `run_command` returns once the file has its first bytes; `stop` ends a
        // command still running (SIGINT), which cuts a copy short. This command
        // ends by itself: wait for that (a loaded host may still be copying).
        let Way::Command(run) = &mut c.way else { panic!("a command capture") };
        let until = Instant::now() + Duration::from_secs(20);
        while run.ended().unwrap().is_none() {
            assert!(Instant::now() < until, "cp did not end");
            std::thread::sleep(Duration::from_millis(5));
        }
        let got = c.stop().unwrap();
        assert_eq!(
            (got.bytes, got.frames, got.dropped, got.cut_short),
            (bytes.len() as u64, 600, 0, false)
        );
        let first = got.read(0).unwrap();
        assert_eq!(first.len() as u64, CAPTURE_CHUNK);
        let rest = got.read(CAPTURE_CHUNK).unwrap();
        assert_eq!(rest.len(), bytes.len() - CAPTURE_CHUNK as usize);
        assert_eq!([first, rest].concat(), bytes);
        assert_eq!(got.read(10).unwrap()[..], bytes[10..10 + CAPTURE_CHUNK as usize]);
        for past in [got.bytes, got.bytes + 1, got.bytes + CAPTURE_CHUNK, u64::MAX] {
            assert!(got.read(past).unwrap().is_empty(), "offset {past}");
        }
        assert!(dir.join("capture").is_file());
        drop(got);
        assert!(!dir.exists(), "the capture's directory goes with it");
    }

    #[test]
    fn a_command_that_fails_before_making_the_file_says_what_it_said() {
        let argv = words("ls /nonexistent-roce-capture-test {file}");
        let e = Capture::run_command(&argv, None, CAPTURE_MAX).unwrap_err();
        assert!(
            e.contains("the capture command `ls /nonexistent-roce-capture-test /")
                && e.contains("ended at once (exit status: 2) without writing its file")
                && e.contains("it said:\n  ")
                && e.contains("/nonexistent-roce-capture-test"),
            "{e}"
        );
        let e = Capture::run_command(&words("roce-no-such-tool -w {file}"), None, CAPTURE_MAX)
            .unwrap_err();
        assert!(
            e.contains("cannot run the capture command `roce-no-such-tool -w /")
                && e.contains("hint: install roce-no-such-tool"),
            "{e}"
        );
    }

    #[test]
    fn a_running_command_is_stopped_with_sigint_and_its_file_is_the_capture() {
        let fx = tempfile::tempdir().unwrap();
        let (path, bytes) = fixture(fx.path(), 3, 60);
        let c = Capture::run_command(&copy_then_sleep(&path), None, CAPTURE_MAX).unwrap();
        assert!(c.how().starts_with("sh -c "), "{}", c.how());
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        let got = c.stop().unwrap();
        assert!(t.elapsed() < Duration::from_secs(3), "SIGINT ended it, not SIGKILL after 5 s");
        assert_eq!((got.bytes, got.frames, got.cut_short), (bytes.len() as u64, 3, false));
        assert_eq!(got.read(0).unwrap(), bytes);
    }

    #[test]
    fn dropping_a_running_capture_ends_its_command_and_removes_its_file() {
        let fx = tempfile::tempdir().unwrap();
        let (path, _) = fixture(fx.path(), 3, 60);
        let c = Capture::run_command(&copy_then_sleep(&path), None, CAPTURE_MAX).unwrap();
        let dir = c.dir.path().to_path_buf();
        #[allow(irrefutable_let_patterns)]
        let Way::Command(run) = &c.way
        else {
            panic!("not a command")
        };
        let pid = libc::pid_t::try_from(run.child.id()).unwrap();
        // SAFETY: signal 0 only asks whether the process exists.
        assert_eq!(unsafe { libc::kill(pid, 0) }, 0, "it runs");
        drop(c);
        assert!(!dir.exists());
        // SAFETY: as above; the child was waited for, so the pid is gone.
        assert_eq!(unsafe { libc::kill(pid, 0) }, -1, "it ended and was reaped");
    }

    #[test]
    fn a_command_that_writes_too_much_or_no_capture_is_refused() {
        let fx = tempfile::tempdir().unwrap();
        let (path, bytes) = fixture(fx.path(), 3, 60);
        let argv = vec!["cp".to_string(), path.to_string_lossy().into_owned(), FILE_ARG.into()];
        let e = Capture::run_command(&argv, None, 100).unwrap().stop().unwrap_err();
        assert!(
            e.contains(&format!(
                "wrote {} bytes, more than the 100 a capture may hold",
                bytes.len()
            )) && e.contains("hint: capture less"),
            "{e}"
        );
        let text = fx.path().join("text");
        fs::write(&text, "not a capture at all\n").unwrap();
        let argv = vec!["cp".to_string(), text.to_string_lossy().into_owned(), FILE_ARG.into()];
        let e = Capture::run_command(&argv, None, CAPTURE_MAX).unwrap().stop().unwrap_err();
        assert!(
            e.contains("did not write a capture") && e.contains("not a pcap or pcapng file"),
            "{e}"
        );
    }

    #[cfg(not(feature = "live"))]
    #[test]
    fn without_libpcap_only_a_capture_command_captures() {
        let e = Capture::start("rxe0", 1, 1, None).unwrap_err();
        assert!(e.contains("built without live capture") && e.contains("--features live"), "{e}");
    }

    /// A libpcap capture on loopback, where this host lets tests capture (root
    /// or CAP_NET_RAW); skipped elsewhere.
    #[cfg(feature = "live")]
    fn on_loopback(max: u64) -> Option<Capture> {
        match Capture::live("lo", max) {
            Ok(c) => Some(c),
            Err(e) if e.contains("ermission") || e.contains("not permitted") => {
                eprintln!("skipped: cannot capture here: {}", e);
                None
            }
            Err(e) => panic!("{}", e),
        }
    }

    #[cfg(feature = "live")]
    fn send(n: u8, port: u16) {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for i in 0..n {
            s.send_to(&[i; 40], ("127.0.0.1", port)).unwrap();
        }
    }

    #[cfg(feature = "live")]
    #[test]
    fn libpcap_captures_roce_on_the_interface_into_a_pcapng_file() {
        let Some(c) = on_loopback(CAPTURE_MAX) else { return };
        // The ring the kernel gave (libpcap rounds the 64 MiB asked up to whole
        // blocks of frames: 128 MiB here), never less on a host with memory.
        let how = c.how();
        assert!(how.starts_with("libpcap on lo (udp port 4791), a "), "{how}");
        assert!(how.ends_with(" MiB ring") && !how.contains("asked"), "{how}");
        send(10, 4791);
        send(5, 4792);
        std::thread::sleep(Duration::from_millis(200));
        let got = c.stop().unwrap();
        assert!(got.frames >= 10 && !got.cut_short, "{got:?}");
        let mut all = Vec::new();
        loop {
            let b = got.read(all.len() as u64).unwrap();
            if b.is_empty() {
                break;
            }
            all.extend(b);
        }
        assert_eq!(all.len() as u64, got.bytes);
        let mut r = Reader::new(&all[..]).unwrap();
        let mut n = 0;
        while let Some(p) = r.next_packet().unwrap() {
            // Ethernet, IPv4, then UDP's ports: one of them RoCEv2's.
            let ports = [&p.data[34..36], &p.data[36..38]];
            assert!(ports.contains(&&4791u16.to_be_bytes()[..]), "{:?}", p.data);
            n += 1;
        }
        assert_eq!(n, got.frames);
    }

    #[test]
    fn a_ring_smaller_than_asked_is_said() {
        let asked = u64::from(BUFFER);
        assert_eq!(ring_said(None, asked), "");
        assert_eq!(ring_said(Some(asked), asked), ", a 64 MiB ring");
        assert_eq!(ring_said(Some(16 << 20), asked), ", a 16 MiB ring of the 64 MiB asked");
    }

    #[cfg(feature = "live")]
    #[test]
    fn libpcap_stops_at_the_most_a_capture_holds() {
        // Headers, then three records of 82 bytes (14 + 20 + 8 + 40) as counted.
        let max = crate::net::live::FILE_HEADERS + 3 * (32 + 84 + 12);
        let Some(c) = on_loopback(max) else { return };
        send(10, 4791);
        std::thread::sleep(Duration::from_millis(200));
        let got = c.stop().unwrap();
        assert!(got.cut_short && got.frames <= 3 && got.bytes <= max, "{got:?}");
        let file = got.read(0).unwrap();
        let mut r = Reader::new(&file[..]).unwrap();
        let mut n = 0;
        while r.next_packet().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, got.frames, "the file is whole, what it holds counted");
    }
}
