//! Live capture with libpcap, as a [`PacketSource`] like a capture file.
//!
//! ```no_run
//! use dissector::capture::PacketSource;
//! use roce::net::live::{LiveCapture, LiveOptions};
//! # fn main() -> Result<(), dissector::capture::CaptureError> {
//! let mut cap = LiveCapture::open(&LiveOptions { iface: "eth0".into(), count: Some(100), ..Default::default() })?;
//! while let Some(rec) = cap.next_packet()? {
//!     println!("{} {} bytes", rec.number, rec.data.len());
//! }
//! # Ok(()) }
//! ```
//!
//! The capture ends (`next_packet` returns `Ok(None)`) after `count` packets, on
//! Ctrl-C, or when [`LiveCapture::stop_handle`] is set. Ctrl-C is caught by a `ctrlc`
//! handler installed by the first [`LiveCapture::open`] (or [`ctrl_c_flag`]); a
//! second Ctrl-C exits the process at once (exit status 130). SIGTERM (a service
//! manager's or `kill`'s stop) and SIGHUP (a closed terminal) stop it the same way,
//! unless the program started with them ignored (`nohup`); a second one exits at
//! once (128 + the signal's number). Other code that should
//! stop on Ctrl-C can share [`ctrl_c_flag`]; a program that installed its own `ctrlc`
//! handler first should call [`request_stop`] from it.
//!
//! [`FileCapture`] writes a live capture to a pcapng file from a thread of its
//! own, while the caller goes on.
//!
//! Owns: [`LiveCapture`], [`LiveOptions`], [`FileCapture`] and the process's Ctrl-C flag. Imports:
//! dissector's [`PacketSource`], records, interfaces and link types; `pcap`, `ctrlc`,
//! `nix`'s poll.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Once, OnceLock};
use std::thread::JoinHandle;

use dissector::capture::{CaptureError, Interface, PacketSource, Record, RecordFile};
use dissector::LinkType;

/// RoCEv2 (UDP 4791) or RoCEv1 (ethertype 0x8915).
pub const DEFAULT_FILTER: &str = "udp port 4791 or ether proto 0x8915";

/// How often a blocked read wakes up to notice a stop request.
const READ_TIMEOUT_MS: u16 = 100;

/// What to capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveOptions {
    /// Interface name, as `ip link` or `tcpdump -D` shows it.
    pub iface: String,
    /// A pcap-filter(7) expression; empty captures everything.
    pub filter: String,
    /// Bytes kept per packet (0: 262144).
    pub snaplen: u32,
    pub promisc: bool,
    /// Stop after this many packets.
    pub count: Option<u64>,
    /// The kernel's buffer for the capture, in bytes (libpcap's default, 2 MiB,
    /// when none): what a burst may fill while the reader is busy elsewhere.
    pub buffer: Option<u32>,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            iface: String::new(),
            filter: DEFAULT_FILTER.to_string(),
            snaplen: 262_144,
            promisc: false,
            count: None,
            buffer: None,
        }
    }
}

struct CtrlC {
    /// Set by the first Ctrl-C and never cleared.
    pressed: Arc<AtomicBool>,
    /// Ctrl-C presses (and `request_stop` calls) so far; a capture stops when this
    /// moves past the value it saw when it was opened.
    count: AtomicU64,
}

impl CtrlC {
    /// One more stop (Ctrl-C, SIGTERM, SIGHUP, [`request_stop`]): every capture
    /// and the shared flag see it. Returns how many came before it. Only
    /// atomics: a signal handler calls it.
    fn press(&self) -> u64 {
        let before = self.count.fetch_add(1, Ordering::SeqCst);
        self.pressed.store(true, Ordering::SeqCst);
        before
    }
}

static CTRL_C: OnceLock<CtrlC> = OnceLock::new();

/// The process-wide Ctrl-C state, with the handler installed on first use.
fn ctrl_c() -> &'static CtrlC {
    let c = CTRL_C.get_or_init(|| {
        // If the program already has a handler, keep it; it can call `request_stop`.
        let _ = ctrlc::try_set_handler(|| {
            // Second Ctrl-C: the user means it.
            if CTRL_C.get().is_some_and(|c| c.press() > 0) {
                std::process::exit(130);
            }
        });
        CtrlC { pressed: Arc::new(AtomicBool::new(false)), count: AtomicU64::new(0) }
    });
    // Once the state is there for them to set: a signal before would be lost.
    static TERMINATION: Once = Once::new();
    TERMINATION.call_once(|| {
        for sig in [libc::SIGTERM, libc::SIGHUP] {
            on_termination(sig);
        }
    });
    c
}

/// `sig` stops as Ctrl-C does, unless it is ignored (a program started under
/// `nohup` keeps SIGHUP ignored, as every tool does) or already has a handler.
fn on_termination(sig: libc::c_int) {
    // SAFETY: an all-zero sigaction is a valid value of the C struct.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: sigaction(2) with a null new action only reads the disposition
    // into `old`, which it may write.
    let read = unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) };
    if read != 0 || old.sa_sigaction != libc::SIG_DFL {
        return;
    }
    // SAFETY: as above, with an action whose handler only touches atomics and
    // calls _exit(2), both async-signal-safe; SA_RESTART keeps blocking calls
    // elsewhere from failing with EINTR.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = terminated as extern "C" fn(libc::c_int) as libc::sighandler_t;
        act.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(sig, &act, std::ptr::null_mut());
    }
}

/// SIGTERM's or SIGHUP's handler: the first stops every capture, as Ctrl-C
/// does; a second exits at once.
extern "C" fn terminated(sig: libc::c_int) {
    if CTRL_C.get().is_some_and(|c| c.press() > 0) {
        // SAFETY: _exit(2) is async-signal-safe.
        unsafe { libc::_exit(128 + sig) };
    }
}

/// The shared flag the Ctrl-C handler sets (installing the handler if not done yet),
/// for other loops that should end on Ctrl-C too. It is never cleared. The handler
/// is `ctrlc`'s one handler per process: code that wants Ctrl-C should use this
/// instead of installing its own.
pub fn ctrl_c_flag() -> Arc<AtomicBool> {
    Arc::clone(&ctrl_c().pressed)
}

/// Stops every open live capture and sets [`ctrl_c_flag`], as Ctrl-C does (without
/// the exit on a second press).
pub fn request_stop() {
    ctrl_c().press();
}

/// Maps a libpcap `DLT_*` value to the `LINKTYPE_*` value files use (they differ for
/// raw IP, whose DLT is platform-dependent).
pub fn linktype_from_dlt(dlt: i32) -> LinkType {
    match dlt {
        12 | 14 => LinkType::RAW, // DLT_RAW on Linux/most BSDs, and on OpenBSD
        _ => LinkType(u16::try_from(dlt).unwrap_or(u16::MAX)),
    }
}

fn device_list() -> String {
    match pcap::Device::list() {
        Ok(devs) if !devs.is_empty() => {
            devs.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", ")
        }
        Ok(_) => {
            "none found (are you allowed to capture? run as root or grant CAP_NET_RAW)".to_string()
        }
        Err(e) => format!("could not list them: {e}"),
    }
}

fn pcap_message(e: &pcap::Error) -> String {
    match e {
        pcap::Error::PcapError(m) => m.clone(),
        other => other.to_string(),
    }
}

/// Turns a libpcap open/activate error into one naming the interface, with a hint.
fn open_error(iface: &str, e: &pcap::Error) -> CaptureError {
    let msg = pcap_message(e);
    let lower = msg.to_ascii_lowercase();
    let hint = if lower.contains("no such device") || lower.contains("doesn't exist") {
        format!("available interfaces: {}", device_list())
    } else if lower.contains("permission") || lower.contains("not permitted") {
        "run as root or grant CAP_NET_RAW (e.g. `sudo setcap cap_net_raw,cap_net_admin=eip $(which roce)`)".to_string()
    } else if lower.contains("not up") {
        format!("bring it up first (`ip link set {iface} up`)")
    } else {
        format!("available interfaces: {}", device_list())
    };
    CaptureError::other(format!("cannot capture: {msg}"), Some(hint))
        .with_origin(format!("interface {iface}"))
}

/// Waits until the capture's descriptor is readable or `ms` pass. Interrupted by a
/// signal counts as a wake-up.
#[cfg(unix)]
fn wait_readable(cap: &pcap::Capture<pcap::Active>, ms: u16) -> std::io::Result<()> {
    use nix::poll::{poll, PollFd, PollFlags};
    use std::os::fd::AsFd;
    let mut fds = [PollFd::new(cap.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, ms) {
        Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(()),
        Err(e) => Err(std::io::Error::from(e)),
    }
}

#[cfg(not(unix))]
fn wait_readable(_cap: &pcap::Capture<pcap::Active>, ms: u16) -> std::io::Result<()> {
    std::thread::sleep(std::time::Duration::from_millis(u64::from(ms.min(5))));
    Ok(())
}

/// A running libpcap capture. See the module documentation.
pub struct LiveCapture {
    cap: pcap::Capture<pcap::Active>,
    iface: String,
    link: LinkType,
    snaplen: u32,
    count: Option<u64>,
    seen: u64,
    stop: Arc<AtomicBool>,
    /// Ends the capture once what the kernel captured before it was set is read.
    drain: Arc<AtomicBool>,
    /// `CTRL_C.count` when opened: captures opened after a Ctrl-C still run.
    ctrl_c_seen: u64,
    done: bool,
    /// The current packet, copied out of libpcap's ring (a lent borrow of libpcap's
    /// buffer cannot survive the timeout loop). Reused: no allocation per packet.
    buf: Vec<u8>,
    interfaces: [Interface; 1],
}

impl std::fmt::Debug for LiveCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveCapture")
            .field("iface", &self.iface)
            .field("link", &self.link)
            .field("count", &self.count)
            .field("seen", &self.seen)
            .finish_non_exhaustive()
    }
}

impl LiveCapture {
    /// Opens `opts.iface` (immediate mode, nanosecond timestamps, non-blocking reads
    /// with a 100 ms wait for the descriptor) and applies the filter. Installs the Ctrl-C handler if not done yet.
    pub fn open(opts: &LiveOptions) -> Result<LiveCapture, CaptureError> {
        let iface = opts.iface.as_str();
        let origin = format!("interface {iface}");
        if iface.is_empty() {
            return Err(CaptureError::other(
                "no interface given",
                Some(format!("available interfaces: {}", device_list())),
            ));
        }
        let snaplen = if opts.snaplen == 0 { 262_144 } else { opts.snaplen };
        let cap = pcap::Capture::from_device(iface)
            .map_err(|e| open_error(iface, &e))?
            .promisc(opts.promisc)
            .snaplen(i32::try_from(snaplen).unwrap_or(i32::MAX))
            .timeout(i32::from(READ_TIMEOUT_MS))
            .immediate_mode(true)
            .precision(pcap::Precision::Nano);
        let cap = match opts.buffer {
            Some(bytes) => cap.buffer_size(i32::try_from(bytes).unwrap_or(i32::MAX)),
            None => cap,
        };
        let mut cap =
            cap.open().and_then(|c| c.setnonblock()).map_err(|e| open_error(iface, &e))?;
        if !opts.filter.trim().is_empty() {
            cap.filter(&opts.filter, true).map_err(|e| {
                CaptureError::other(
                    format!("bad capture filter {:?}: {}", opts.filter, pcap_message(&e)),
                    Some("filters use pcap-filter(7) syntax, e.g. \"udp port 4791 or ether proto 0x8915\"".into()),
                )
                .with_origin(origin.clone())
            })?;
        }
        let link = linktype_from_dlt(cap.get_datalink().0);
        let ctrl_c_seen = ctrl_c().count.load(Ordering::SeqCst);
        Ok(LiveCapture {
            cap,
            iface: iface.to_string(),
            link,
            snaplen,
            count: opts.count,
            seen: 0,
            stop: Arc::new(AtomicBool::new(false)),
            drain: Arc::new(AtomicBool::new(false)),
            ctrl_c_seen,
            done: false,
            buf: Vec::with_capacity(usize::try_from(snaplen).unwrap_or(65_536).min(1 << 20)),
            interfaces: [Interface {
                link,
                snaplen,
                name: Some(iface.to_string()),
                description: None,
                tsresol: 9,
                tsoffset: 0,
                section: 0,
            }],
        })
    }

    /// The link type of the interface, as file link types number it.
    pub fn link(&self) -> LinkType {
        self.link
    }

    /// The interface, described as a pcapng IDB would (e.g. for a [`PcapngWriter`]).
    ///
    /// [`PcapngWriter`]: dissector::capture::PcapngWriter
    pub fn interfaces(&self) -> &[Interface] {
        &self.interfaces
    }

    /// The snap length in effect.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// Packets returned so far.
    pub fn packets(&self) -> u64 {
        self.seen
    }

    /// Setting this flag ends this capture (within the 100 ms read timeout).
    pub fn stop_handle(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// Setting this flag ends this capture once every packet the kernel
    /// captured before it was set has been returned: nothing already on its
    /// way to this capture is lost, as it can be with [`stop_handle`].
    ///
    /// [`stop_handle`]: LiveCapture::stop_handle
    pub fn drain_handle(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.drain)
    }

    /// The bytes of the receive ring the kernel gave this capture. libpcap asks
    /// for the buffer size and, where the kernel refuses that much memory,
    /// quietly takes a smaller ring; this is the size of its socket's mapping
    /// (`socket:[inode]` in `/proc/self/maps`). `None` where there is no ring.
    pub fn ring_bytes(&self) -> Option<u64> {
        use std::os::fd::AsRawFd;
        // `socket:[inode]`, as the maps name the socket's mapping.
        let fd = self.cap.as_raw_fd();
        let socket = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        ring_of(&maps, socket.to_str()?)
    }

    /// libpcap's counters (received, dropped by the kernel, dropped by the interface).
    pub fn stats(&mut self) -> Result<pcap::Stat, CaptureError> {
        self.cap.stats().map_err(|e| {
            CaptureError::other(
                format!("cannot read capture statistics: {}", pcap_message(&e)),
                None,
            )
            .with_origin(format!("interface {}", self.iface))
        })
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
            || ctrl_c().count.load(Ordering::Relaxed) != self.ctrl_c_seen
    }

    /// The next packet; `Ok(None)` once `count` packets were returned, or after a stop.
    pub fn next_packet(&mut self) -> Result<Option<Record<'_>>, CaptureError> {
        if self.done || self.count.is_some_and(|c| self.seen >= c) {
            self.done = true;
            return Ok(None);
        }
        let (ts_ns, orig_len) = loop {
            if self.stopped() {
                self.done = true;
                return Ok(None);
            }
            match self.cap.next_packet() {
                Ok(p) => {
                    let h = *p.header;
                    self.buf.clear();
                    self.buf.extend_from_slice(p.data);
                    let sec = u64::try_from(h.ts.tv_sec).unwrap_or(0);
                    // With nanosecond precision libpcap puts nanoseconds in tv_usec.
                    let frac = u64::try_from(h.ts.tv_usec).unwrap_or(0);
                    break (sec.saturating_mul(1_000_000_000).saturating_add(frac), h.len);
                }
                Err(pcap::Error::TimeoutExpired) => {
                    // Nothing ready (non-blocking, immediate mode): all that was
                    // captured before a drain was asked for has been read.
                    if self.drain.load(Ordering::SeqCst) {
                        self.done = true;
                        return Ok(None);
                    }
                    // Else wait for the fd, at most one read timeout, then look
                    // at the stop flags again.
                    if let Err(e) = wait_readable(&self.cap, READ_TIMEOUT_MS) {
                        self.done = true;
                        return Err(CaptureError::other(
                            format!("waiting for packets failed: {e}"),
                            None,
                        )
                        .with_origin(format!("interface {}", self.iface)));
                    }
                    continue;
                }
                Err(pcap::Error::NoMorePackets) => {
                    self.done = true;
                    return Ok(None);
                }
                Err(e) => {
                    self.done = true;
                    return Err(CaptureError::other(
                        format!("capture failed after {} packets: {}", self.seen, pcap_message(&e)),
                        Some("was the interface removed or taken down?".into()),
                    )
                    .with_origin(format!("interface {}", self.iface)));
                }
            }
        };
        self.seen += 1;
        Ok(Some(Record {
            number: self.seen,
            ts_ns,
            link: self.link,
            interface: 0,
            orig_len,
            data: &self.buf,
            file_offset: 0,
            direction: None,
            comment: None,
        }))
    }
}

impl PacketSource for LiveCapture {
    fn next_packet(&mut self) -> Result<Option<Record<'_>>, CaptureError> {
        LiveCapture::next_packet(self)
    }
}

/// The snap length that keeps `iface`'s whole frames: its MTU and room for the
/// link header with two VLAN tags; 0 (libpcap's default) where the MTU cannot be
/// read. In immediate mode libpcap's ring (TPACKET_V2) holds a frame a slot, each
/// slot as long as the snap length: at libpcap's default of 256 KiB, a 128 MiB
/// ring held about 500 frames, and a TCG lab VM's capture thread, waiting for
/// the CPU, dropped up to 12,397 frames of a 64-QP stream; with slots for MTU
/// 1500 it dropped none (two runs).
pub fn whole_frames(iface: &str) -> u32 {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/mtu"))
        .ok()
        .and_then(|m| m.trim().parse::<u32>().ok())
        .map_or(0, |mtu| mtu.saturating_add(64).clamp(256, 262_144))
}

/// The bytes mapped of `socket` (`socket:[inode]`) in a `/proc/PID/maps` text
/// (a packet socket's ring is mapped once), or `None`.
fn ring_of(maps: &str, socket: &str) -> Option<u64> {
    maps.lines().filter(|l| l.split_whitespace().last() == Some(socket)).find_map(|l| {
        let (from, to) = l.split_whitespace().next()?.split_once('-')?;
        let (from, to) = (u64::from_str_radix(from, 16).ok()?, u64::from_str_radix(to, 16).ok()?);
        to.checked_sub(from)
    })
}

/// A live capture written to a pcapng file by a thread of its own while the
/// caller goes on: what an agent records of its host's wire
/// (`--capture-at-agents`) and the controller of its `-i` interface. Dropping
/// it stops the capture at once, without reading what the kernel still holds.
pub struct FileCapture {
    /// Ends the capture at once.
    stop: Arc<AtomicBool>,
    /// Ends it once what the kernel captured is read ([`FileCapture::finish`]).
    drain: Arc<AtomicBool>,
    done: Option<JoinHandle<Result<Written, String>>>,
    /// The receive ring the kernel gave it ([`LiveCapture::ring_bytes`]).
    ring: Option<u64>,
}

/// What a finished [`FileCapture`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    pub frames: u64,
    /// Frames the kernel or the interface dropped before libpcap read them.
    pub dropped: u64,
    /// It stopped at the most bytes it was allowed.
    pub cut_short: bool,
}

/// Room for a pcapng file's section and interface headers, before any packet.
pub const FILE_HEADERS: u64 = 256;

/// The most an Enhanced Packet Block of `r` takes in a pcapng file (its data
/// padded to 4 bytes, and a direction option).
fn block_size(r: &Record<'_>) -> u64 {
    let caplen = r.data.len().min(dissector::capture::MAX_WRITE_CAPLEN) as u64;
    32 + caplen.div_ceil(4) * 4 + 12
}

impl FileCapture {
    /// Opens the capture `opts` asks for and writes what it captures to
    /// `path` (a pcapng file naming `writer` as what wrote it), at most `max`
    /// bytes; returns once the capture is open, or why it could not be.
    pub fn start(
        opts: LiveOptions,
        path: &Path,
        writer: &str,
        max: u64,
    ) -> Result<FileCapture, String> {
        let (path, writer) = (path.to_path_buf(), writer.to_string());
        let (tx, rx) = mpsc::channel();
        let done = std::thread::Builder::new()
            .name("roce-capture".into())
            .spawn(move || -> Result<Written, String> {
                let opened = LiveCapture::open(&opts).map_err(|e| e.to_string()).and_then(|c| {
                    let out = RecordFile::create(&path, &writer)
                        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                    Ok((c, out))
                });
                let (mut cap, mut out) = match opened {
                    Ok(o) => o,
                    Err(e) => {
                        let _ = tx.send(Err(e.clone()));
                        return Err(e);
                    }
                };
                let _ = tx.send(Ok((cap.stop_handle(), cap.drain_handle(), cap.ring_bytes())));
                let (written, failed) = write_all(&mut cap, &mut out, max);
                out.commit().map_err(|e| format!("cannot finish {}: {e}", path.display()))?;
                match failed {
                    Some(e) => Err(format!("{e} (after {} frames)", written.frames)),
                    None => Ok(written),
                }
            })
            .map_err(|e| format!("cannot start the capture thread: {e}"))?;
        match rx.recv() {
            Ok(Ok((stop, drain, ring))) => Ok(FileCapture { stop, drain, done: Some(done), ring }),
            Ok(Err(e)) => {
                let _ = done.join();
                Err(e)
            }
            Err(_) => {
                let _ = done.join();
                Err("the capture thread ended".to_string())
            }
        }
    }

    /// The bytes of the receive ring the kernel gave the capture, where known.
    pub fn ring_bytes(&self) -> Option<u64> {
        self.ring
    }

    /// Ends the capture once every frame the kernel captured so far is
    /// written, and finishes the file: what it wrote.
    pub fn finish(mut self) -> Result<Written, String> {
        self.drain.store(true, Ordering::SeqCst);
        match self.done.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err("its thread panicked".to_string()),
            None => Err("it was stopped already".to_string()),
        }
    }
}

impl Drop for FileCapture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(done) = self.done.take() {
            let _ = done.join();
        }
    }
}

/// Writes what `cap` captures to `out` until it ends or `max` bytes would be
/// passed: what was written, and why it stopped when it failed.
fn write_all(cap: &mut LiveCapture, out: &mut RecordFile, max: u64) -> (Written, Option<String>) {
    let mut w = Written::default();
    let mut size = FILE_HEADERS;
    let failed = loop {
        match cap.next_packet() {
            Ok(None) => break None,
            Ok(Some(r)) => {
                let more = block_size(&r);
                if size.saturating_add(more) > max {
                    w.cut_short = true;
                    break None;
                }
                if let Err(e) = out.write(&r) {
                    break Some(format!("writing the capture: {e}"));
                }
                size += more;
                w.frames += 1;
            }
            Err(e) => break Some(e.to_string()),
        }
    };
    w.dropped = cap.stats().map_or(0, |s| u64::from(s.dropped) + u64::from(s.if_dropped));
    (w, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_frames_are_the_mtu_and_two_tagged_link_headers() {
        let lo = std::fs::read_to_string("/sys/class/net/lo/mtu").unwrap();
        let mtu: u32 = lo.trim().parse().unwrap();
        assert_eq!(whole_frames("lo"), (mtu + 64).min(262_144));
        assert_eq!(whole_frames("nosuch0"), 0, "libpcap's default");
    }

    #[test]
    fn the_ring_is_the_mapping_of_the_captures_socket() {
        let maps = "7fd16c000000-7fd16cadd000 rw-p 00000000 00:00 0 \n\
                    7fd16cadd000-7fd16cedd000 rw-s 00000000 00:09 692923                     socket:[692923]\n\
                    7fd16ceee000-7fd16cef2000 r--p 00000000 fe:00 21532  /usr/lib/libpcap.so\n";
        assert_eq!(ring_of(maps, "socket:[692923]"), Some(4 << 20));
        assert_eq!(ring_of(maps, "socket:[69292]"), None, "another socket");
        assert_eq!(ring_of(maps, "socket:[21532]"), None, "a file's inode is not a socket");
    }

    #[test]
    fn dlt_mapping() {
        assert_eq!(linktype_from_dlt(1), LinkType::ETHERNET);
        assert_eq!(linktype_from_dlt(12), LinkType::RAW);
        assert_eq!(linktype_from_dlt(113), LinkType::LINUX_SLL);
        assert_eq!(linktype_from_dlt(276), LinkType::LINUX_SLL2);
        assert_eq!(linktype_from_dlt(-1), LinkType(u16::MAX));
    }

    #[test]
    fn no_interface_is_an_error_with_a_hint() {
        let e = LiveCapture::open(&LiveOptions::default()).unwrap_err();
        assert!(e.to_string().contains("no interface given"), "{e}");
    }
}
