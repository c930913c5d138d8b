//! The lab's software switch: the wire between the two VMs.
//!
//! Each VM's NIC is a qemu `-netdev dgram` whose socket we create ([`Wire`]): a UDP
//! socket on 127.0.0.1 *connected* to the switch's socket for that VM, handed to
//! qemu as a file descriptor (`local.type=fd`). One Ethernet frame travels per
//! datagram. Nothing binds a fixed port, so labs side by side never collide, and
//! because both ends are connected the kernel drops datagrams from anyone else.
//!
//! One thread moves frames ([`Switch::spawn`]): it polls both sockets, forwards each
//! frame to the other VM, applies the run's fault rules, records every frame with
//! the sender as its pcapng interface, and counts everything, so a run can prove its
//! capture is complete: `recorded = received + duplicated + injected` and every
//! received frame is either forwarded, dropped by a rule, or counted as a send error.
//!
//! Runs either have the switch to themselves (every frame is theirs, fault rules
//! allowed) or share it, each with a [`Claim`] on its own QPs and ports and no
//! rules: then each frame is counted and recorded for the run that claims it
//! (see [`claim`](super::claim)), and those counts balance per run as above.
//!
//! The capture shows the wire as the receiver sees it: a frame is recorded when the
//! switch hands it on (a delayed or reordered frame at its delivery time, after the
//! frames that overtook it), a dropped frame when it arrived, with a comment.
use std::collections::VecDeque;
use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use dissector::frame::{self, Frame, Net};
use dissector::wire::{icrc, ipv4, Psn};
use dissector::LinkType;
use serde::{Deserialize, Serialize};

use super::claim::{Claim, Owner};
use super::control::WireFrame;
use super::fault::{Action, Dir, Offset, Real, Rng, Rule};
use super::mark::{Mark, Marks, RuleRef};
use super::record::Recorder;
use super::respond::{Request, Responder};

/// Socket buffers: a burst of ib_write_bw must fit while the switch thread is busy.
const SOCKET_BUFFER: usize = 8 << 20;
/// Frames read from one socket before looking at the other.
const BURST: usize = 256;

/// The four sockets of the wire.
#[derive(Debug)]
pub struct Wire {
    /// The switch's socket for VM a (connected to `vm_a`), and for VM b.
    pub switch_a: UdpSocket,
    pub switch_b: UdpSocket,
    /// The sockets qemu uses as the VMs' NIC backends.
    pub vm_a: UdpSocket,
    pub vm_b: UdpSocket,
}

fn set_buffers(s: &UdpSocket) -> io::Result<()> {
    for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF, libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
        let v = SOCKET_BUFFER as libc::c_int;
        // SAFETY: a valid fd and a pointer to a c_int of the stated size.
        let r = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                &v as *const _ as *const libc::c_void,
                size_of::<libc::c_int>() as u32,
            )
        };
        // The *FORCE variants need CAP_NET_ADMIN; without it the plain ones (capped
        // by net.core.[rw]mem_max) are what we get.
        if r != 0 && matches!(opt, libc::SO_RCVBUF | libc::SO_SNDBUF) {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

impl Wire {
    pub fn new() -> io::Result<Wire> {
        let bind = || -> io::Result<UdpSocket> {
            let s = UdpSocket::bind("127.0.0.1:0")?;
            set_buffers(&s)?;
            Ok(s)
        };
        let (switch_a, switch_b, vm_a, vm_b) = (bind()?, bind()?, bind()?, bind()?);
        switch_a.connect(vm_a.local_addr()?)?;
        vm_a.connect(switch_a.local_addr()?)?;
        switch_b.connect(vm_b.local_addr()?)?;
        vm_b.connect(switch_b.local_addr()?)?;
        switch_a.set_nonblocking(true)?;
        switch_b.set_nonblocking(true)?;
        Ok(Wire { switch_a, switch_b, vm_a, vm_b })
    }

    pub fn ports(&self) -> Ports {
        let p = |s: &UdpSocket| s.local_addr().map(|a| a.port()).unwrap_or(0);
        Ports {
            switch_a: p(&self.switch_a),
            switch_b: p(&self.switch_b),
            vm_a: p(&self.vm_a),
            vm_b: p(&self.vm_b),
        }
    }
}

/// The UDP ports of the wire, on 127.0.0.1.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Ports {
    pub switch_a: u16,
    pub switch_b: u16,
    pub vm_a: u16,
    pub vm_b: u16,
}

impl Ports {
    fn all(&self) -> [u16; 4] {
        [self.switch_a, self.switch_b, self.vm_a, self.vm_b]
    }
}

/// Datagrams the kernel dropped on our sockets because a receive buffer was full
/// (the `drops` column of /proc/net/udp): frames lost before the switch or a VM's
/// qemu could read them.
pub fn socket_drops(ports: &Ports) -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/net/udp") else { return 0 };
    let ours = ports.all();
    let mut drops = 0;
    for line in text.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (Some(local), Some(d)) = (cols.get(1), cols.last()) else { continue };
        let Some((addr, port)) = local.split_once(':') else { continue };
        let port = u16::from_str_radix(port, 16).unwrap_or(0);
        if addr == "0100007F" && ours.contains(&port) {
            drops += d.parse::<u64>().unwrap_or(0);
        }
    }
    drops
}

/// What the switch counted (over its life, or over one run).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Counters {
    /// Frames received from VM a / VM b.
    pub from_a: u64,
    pub from_b: u64,
    /// Of those, RoCE frames (BTH parsed).
    pub roce: u64,
    /// Frames handed to the receiving VM's socket (duplicates and injections included).
    pub forwarded: u64,
    pub dropped: u64,
    pub modified: u64,
    /// Extra copies sent by `dup` rules.
    pub duplicated: u64,
    pub delayed: u64,
    pub reordered: u64,
    pub injected: u64,
    /// Responses built by `respond` rules and sent in the responder's place.
    #[serde(default)]
    pub synthesized: u64,
    /// Frames the switch could not hand on (send failed).
    pub send_errors: u64,
    /// Frames written to the capture.
    pub recorded: u64,
    pub record_errors: u64,
    pub bytes: u64,
}

impl Counters {
    pub fn received(&self) -> u64 {
        self.from_a + self.from_b
    }
    /// Every frame that went through the switch is in the capture exactly once.
    pub fn capture_complete(&self) -> bool {
        self.record_errors == 0 && self.recorded == self.made()
    }
    /// Frames that went through the switch: received, and the ones it made.
    fn made(&self) -> u64 {
        self.received() + self.duplicated + self.injected + self.synthesized
    }
    /// Every frame was forwarded, dropped by a rule, or failed to send.
    pub fn balanced(&self) -> bool {
        self.forwarded + self.dropped + self.send_errors == self.made()
    }
    pub fn summary(&self) -> String {
        format!(
            "{} frames (a→b {}, b→a {}; {} RoCE), forwarded {}, dropped {}, modified {}, duplicated {}, delayed {}, reordered {}, injected {}, synthesized {}, send errors {}",
            self.received(),
            self.from_a,
            self.from_b,
            self.roce,
            self.forwarded,
            self.dropped,
            self.modified,
            self.duplicated,
            self.delayed,
            self.reordered,
            self.injected,
            self.synthesized,
            self.send_errors
        )
    }
}

/// How often each rule matched and fired during a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RuleReport {
    pub rule: String,
    pub matched: u64,
    pub applied: u64,
}

/// The end of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RunReport {
    pub counters: Counters,
    pub rules: Vec<RuleReport>,
    /// Kernel drops on the wire's sockets during the run.
    pub socket_drops: u64,
    pub capture: Option<String>,
    /// Writing the capture failed: the first error.
    pub capture_error: Option<String>,
    pub duration_ms: u64,
    /// Frames not shown live because the client fell behind (the capture and the
    /// counters are unaffected).
    #[serde(default)]
    pub live_skipped: u64,
}

/// A run's setup, handed to the switch thread.
pub struct RunSpec {
    pub rules: Vec<Rule>,
    pub seed: u64,
    pub recorder: Option<Box<dyn Recorder>>,
    pub capture: Option<PathBuf>,
    /// Every frame the run records is also offered here (never blocking the wire).
    pub live: Option<mpsc::SyncSender<WireFrame>>,
    /// Share the switch with other runs, owning only what this claims; `None`:
    /// have it to itself.
    pub claim: Option<Claim>,
}

/// Names a run in progress, to end it.
pub type RunId = u64;

enum Cmd {
    Begin(RunSpec, mpsc::Sender<Result<RunId, String>>),
    End(RunId, mpsc::Sender<Result<RunReport, String>>),
    Stats(mpsc::Sender<(Counters, Vec<Counters>)>),
    Inject(Dir, Vec<u8>, mpsc::Sender<()>),
    Stop,
}

/// Handle to the switch thread. Dropping it stops the thread.
pub struct Switch {
    tx: mpsc::Sender<Cmd>,
    /// Wakes the switch thread from its poll for a command: without it a command
    /// waited for the poll's timeout (up to 20 ms a `begin`, 20 ms an `end`).
    wake: UnixDatagram,
    thread: Option<thread::JoinHandle<()>>,
    ports: Ports,
}

const REPLY_DEADLINE: Duration = Duration::from_secs(10);

impl Switch {
    /// Starts forwarding between the two switch sockets of `wire`. The VM sockets
    /// are not touched (hand them to qemu, or to a test).
    pub fn spawn(wire: &Wire) -> Result<Switch> {
        let ports = wire.ports();
        let a = wire.switch_a.try_clone().context("cloning the switch socket")?;
        let b = wire.switch_b.try_clone().context("cloning the switch socket")?;
        let (tx, rx) = mpsc::channel();
        let (wake, woken) = UnixDatagram::pair().context("creating the switch's wake-up socket")?;
        wake.set_nonblocking(true).context("the switch's wake-up socket")?;
        woken.set_nonblocking(true).context("the switch's wake-up socket")?;
        let thread = thread::Builder::new()
            .name("lab-switch".into())
            .spawn(move || Engine::new([a, b], ports).run(rx, woken))
            .context("starting the switch thread")?;
        Ok(Switch { tx, wake, thread: Some(thread), ports })
    }

    pub fn ports(&self) -> Ports {
        self.ports
    }

    fn ask<T>(&self, make: impl FnOnce(mpsc::Sender<T>) -> Cmd) -> Result<T> {
        let (tx, rx) = mpsc::channel();
        self.tx.send(make(tx)).map_err(|_| anyhow::anyhow!("the switch thread has stopped"))?;
        // A full wake-up socket means the thread has been woken already.
        let _ = self.wake.send(&[1]);
        rx.recv_timeout(REPLY_DEADLINE).map_err(|_| {
            anyhow::anyhow!("the switch thread did not answer within {REPLY_DEADLINE:?}")
        })
    }

    pub fn begin(&self, spec: RunSpec) -> Result<RunId> {
        self.ask(|tx| Cmd::Begin(spec, tx))?.map_err(anyhow::Error::msg)
    }

    pub fn end(&self, run: RunId) -> Result<RunReport> {
        self.ask(|tx| Cmd::End(run, tx))?.map_err(anyhow::Error::msg)
    }

    /// Lifetime counters, and those of each run in progress.
    pub fn stats(&self) -> Result<(Counters, Vec<Counters>)> {
        self.ask(Cmd::Stats)
    }

    /// Puts a frame on the wire as if `dir`'s sender had sent it (no rules applied).
    pub fn inject(&self, dir: Dir, frame: Vec<u8>) -> Result<()> {
        self.ask(|tx| Cmd::Inject(dir, frame, tx))
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        let _ = self.tx.send(Cmd::Stop);
        let _ = self.wake.send(&[1]);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// The fields of a RoCE frame that rules match on and faults change.
///
/// Built on `dissector::frame::decode` (lax: a frame that stops early still shows
/// its BTH); only what the switch needs is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceView {
    pub opcode: u8,
    pub qp: u32,
    pub psn: u32,
    /// Offsets in the frame: IP header, its length (IPv4; 0 for IPv6), UDP, BTH,
    /// payload start, ICRC.
    pub ip: usize,
    pub ipv4_header_len: usize,
    pub udp: usize,
    pub bth: usize,
    pub payload: usize,
    pub icrc: Option<usize>,
}

pub fn parse_roce(data: &[u8], opts: &frame::Options) -> Option<RoceView> {
    roce_view(&frame::decode(LinkType::ETHERNET, data, opts), data)
}

/// [`parse_roce`] of a frame already decoded.
fn roce_view(f: &Frame, data: &[u8]) -> Option<RoceView> {
    let ib = f.ib.as_ref()?;
    let o = f.offsets;
    let ipv4_header_len = match f.net {
        Net::Ipv4(_) => usize::from(data.get(o.net)? & 0x0f) * 4,
        Net::Ipv6(_) => 0,
        _ => return None, // RoCEv1 is not on this wire
    };
    Some(RoceView {
        opcode: ib.bth.opcode.0,
        qp: ib.bth.dest_qp,
        psn: ib.bth.psn.value(),
        ip: o.net,
        ipv4_header_len,
        udp: o.l4,
        bth: o.bth,
        payload: ib.payload.start,
        icrc: ib.icrc.map(|_| o.icrc),
    })
}

/// Recomputes the ICRC of a RoCEv2 frame in place.
fn fix_icrc(frame: &mut [u8], v: &RoceView) -> bool {
    let Some(at) = v.icrc else { return false };
    if at + 4 > frame.len() {
        return false;
    }
    let kind = if v.ipv4_header_len > 0 { icrc::Net::Ipv4 } else { icrc::Net::Ipv6 };
    let c = icrc::compute_covered(kind, &frame[v.ip..at], v.udp - v.ip, v.bth - v.ip);
    frame[at..at + 4].copy_from_slice(&icrc::to_wire(c));
    true
}

fn fix_ipv4_checksum(frame: &mut [u8], v: &RoceView) {
    if v.ipv4_header_len >= 20 && v.ip + v.ipv4_header_len <= frame.len() {
        ipv4::Packet::new_unchecked(&mut frame[v.ip..]).fill_checksum();
    }
}

/// Applies a byte-changing action; returns a description, or why it was skipped.
pub fn apply_modification(
    frame: &mut [u8],
    v: &RoceView,
    action: &Action,
    fix: bool,
) -> Result<String, String> {
    let mut desc = match *action {
        Action::Ce => {
            if v.ipv4_header_len > 0 {
                frame[v.ip + 1] |= 0x03;
                fix_ipv4_checksum(frame, v);
            } else {
                // IPv6 traffic class spans bytes 0–1; ECN is bits 5–4 of byte 1.
                frame[v.ip + 1] |= 0x30;
            }
            "ECN set to CE".to_string()
        }
        Action::CorruptIcrc => {
            let Some(at) = v.icrc.filter(|&a| a + 4 <= frame.len()) else {
                return Err("no ICRC in the frame".into());
            };
            for b in &mut frame[at..at + 4] {
                *b ^= 0xff;
            }
            return Ok("ICRC inverted".into()); // never "fixed"
        }
        Action::Corrupt { at, xor } => {
            let (pos, limit) = match at {
                Offset::Frame(n) => (n, frame.len()),
                Offset::Ip(n) => (v.ip + n, frame.len()),
                Offset::Bth(n) => (v.bth + n, frame.len()),
                Offset::Payload(n) => (v.payload + n, v.icrc.unwrap_or(frame.len())),
            };
            if pos >= limit {
                return Err(format!(
                    "offset {at} is past the end ({} bytes available)",
                    limit.saturating_sub(pos.min(limit))
                ));
            }
            frame[pos] ^= xor;
            if v.ipv4_header_len > 0 && (v.ip..v.ip + v.ipv4_header_len).contains(&pos) {
                fix_ipv4_checksum(frame, v);
            }
            format!("byte {pos} ({at}) xor {xor:#04x}")
        }
        _ => return Err("not a modification".into()),
    };
    if fix && fix_icrc(frame, v) {
        desc.push_str(", ICRC recomputed");
    }
    Ok(desc)
}

struct RuleState {
    rule: Rule,
    matched: u64,
    applied: u64,
    rng: Rng,
}

struct Run {
    id: RunId,
    /// What it owns while it shares the switch; `None`: it has the switch to
    /// itself, and every frame is its.
    owner: Option<Owner>,
    rules: Vec<RuleState>,
    recorder: Option<Box<dyn Recorder>>,
    capture: Option<PathBuf>,
    live: Option<mpsc::SyncSender<WireFrame>>,
    live_skipped: u64,
    capture_error: Option<String>,
    counters: Counters,
    started: Instant,
    drops_at_start: u64,
    /// The responder `respond` rules play; `None` when the run has none.
    responder: Option<Responder>,
}

/// A frame the switch holds back (delay, reorder).
struct Held {
    due: Instant,
    dir: Dir,
    frame: Vec<u8>,
    marks: Marks,
    dups: u32,
    /// Reorder: released right after the next frame in the same direction.
    behind_next: bool,
    /// The run whose rule holds it.
    run: RunId,
}

struct Engine {
    socks: [UdpSocket; 2],
    ports: Ports,
    opts: frame::Options,
    total: Counters,
    /// The runs in progress: one that has the switch to itself, or any number
    /// that share it.
    runs: Vec<Run>,
    next_id: RunId,
    held: VecDeque<Held>,
}

impl Engine {
    fn new(socks: [UdpSocket; 2], ports: Ports) -> Engine {
        Engine {
            socks,
            ports,
            opts: frame::Options::default(),
            total: Counters::default(),
            runs: Vec::new(),
            next_id: 1,
            held: VecDeque::new(),
        }
    }

    /// Counts in the lifetime totals and, when a run owns the frame, in its.
    fn count(&mut self, run: Option<usize>, f: impl Fn(&mut Counters)) {
        f(&mut self.total);
        if let Some(r) = run.and_then(|i| self.runs.get_mut(i)) {
            f(&mut r.counters);
        }
    }

    /// The run a frame sent in `dir` belongs to (an index into `runs`).
    fn owner_of(&mut self, dir: Dir, f: &Frame) -> Option<usize> {
        match self.runs.first() {
            None => None,
            Some(r) if r.owner.is_none() => Some(0),
            Some(_) => {
                self.runs.iter_mut().position(|r| r.owner.as_mut().is_some_and(|o| o.owns(dir, f)))
            }
        }
    }

    fn index_of(&self, run: RunId) -> Option<usize> {
        self.runs.iter().position(|r| r.id == run)
    }

    /// Why a run with `spec` cannot start now, if it cannot.
    fn refuse(&self, spec: &RunSpec) -> Option<String> {
        if self.runs.iter().any(|r| r.owner.is_none()) {
            return Some(
                "a run is already in progress on this lab, with the switch to itself".into(),
            );
        }
        let Some(claim) = &spec.claim else {
            return (!self.runs.is_empty()).then(|| {
                format!(
                    "{} runs share the switch now; a run that needs it to itself waits for them",
                    self.runs.len()
                )
            });
        };
        if !spec.rules.is_empty() {
            return Some("a run that shares the switch cannot apply fault rules (they would act on the other runs' frames too)".into());
        }
        self.runs
            .iter()
            .filter_map(|r| r.owner.as_ref())
            .find_map(|o| o.claim().overlaps(claim))
            .map(|what| format!("its claim overlaps a run in progress: {what}"))
    }

    fn run(mut self, rx: mpsc::Receiver<Cmd>, woken: UnixDatagram) {
        let mut buf = vec![0u8; 65536];
        loop {
            let wait = self
                .held
                .iter()
                .map(|h| h.due.saturating_duration_since(Instant::now()))
                .min()
                .unwrap_or(Duration::from_millis(20))
                .min(Duration::from_millis(20));
            let mut fds = [
                libc::pollfd { fd: self.socks[0].as_raw_fd(), events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: self.socks[1].as_raw_fd(), events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: woken.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            ];
            // SAFETY: fds is a valid array of three pollfd for the duration of the call.
            let n = unsafe {
                libc::poll(
                    fds.as_mut_ptr(),
                    fds.len() as libc::nfds_t,
                    wait.as_millis().max(1) as libc::c_int,
                )
            };
            if fds[2].revents != 0 {
                while woken.recv(&mut buf).is_ok() {}
            }
            if n > 0 {
                for (i, dir) in [(0, Dir::AtoB), (1, Dir::BtoA)] {
                    if fds[i].revents == 0 {
                        continue;
                    }
                    for _ in 0..BURST {
                        match self.socks[i].recv(&mut buf) {
                            Ok(len) => self.ingress(dir, &buf[..len]),
                            // ECONNREFUSED: an ICMP error from an earlier send to a
                            // VM socket that was gone; nothing to read.
                            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                            Err(_) => break,
                        }
                    }
                }
            }
            self.release_due(false);
            loop {
                match rx.try_recv() {
                    Ok(Cmd::Stop) | Err(mpsc::TryRecvError::Disconnected) => return,
                    Ok(cmd) => self.command(cmd),
                    Err(mpsc::TryRecvError::Empty) => break,
                }
            }
        }
    }

    fn command(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Begin(spec, reply) => {
                let r = if let Some(why) = self.refuse(&spec) {
                    Err(why)
                } else {
                    self.release_due(true);
                    let responder = spec
                        .rules
                        .iter()
                        .any(|r| matches!(r.action, Action::Respond(_)))
                        .then(Responder::default);
                    let rules = spec
                        .rules
                        .into_iter()
                        .enumerate()
                        .map(|(i, rule)| {
                            let seed = rule.seed.unwrap_or(spec.seed.wrapping_add(i as u64));
                            RuleState { rule, matched: 0, applied: 0, rng: Rng::new(seed) }
                        })
                        .collect();
                    let id = self.next_id;
                    self.next_id += 1;
                    self.runs.push(Run {
                        id,
                        owner: spec.claim.map(Owner::new),
                        rules,
                        recorder: spec.recorder,
                        capture: spec.capture,
                        live: spec.live,
                        live_skipped: 0,
                        capture_error: None,
                        counters: Counters::default(),
                        started: Instant::now(),
                        drops_at_start: socket_drops(&self.ports),
                        responder,
                    });
                    Ok(id)
                };
                let _ = reply.send(r);
            }
            Cmd::End(id, reply) => {
                // Whatever a rule still holds belongs to this run.
                self.release_due(true);
                let r = match self.index_of(id).map(|i| self.runs.remove(i)) {
                    None => Err("no such run in progress".to_string()),
                    Some(mut run) => {
                        if let Some(rec) = run.recorder.take() {
                            if let Err(e) = rec.finish() {
                                run.capture_error
                                    .get_or_insert(format!("finishing the capture: {e}"));
                            }
                        }
                        Ok(RunReport {
                            counters: run.counters,
                            rules: run
                                .rules
                                .iter()
                                .map(|s| RuleReport {
                                    rule: s.rule.to_string(),
                                    matched: s.matched,
                                    applied: s.applied,
                                })
                                .collect(),
                            socket_drops: socket_drops(&self.ports)
                                .saturating_sub(run.drops_at_start),
                            capture: run.capture.map(|p| p.display().to_string()),
                            capture_error: run.capture_error,
                            duration_ms: run.started.elapsed().as_millis() as u64,
                            live_skipped: run.live_skipped,
                        })
                    }
                };
                let _ = reply.send(r);
            }
            Cmd::Stats(reply) => {
                let _ = reply.send((self.total, self.runs.iter().map(|r| r.counters).collect()));
            }
            Cmd::Inject(dir, frame, reply) => {
                let f = frame::decode(LinkType::ETHERNET, &frame, &self.opts);
                let run = self.owner_of(dir, &f);
                self.count(run, |c| c.injected += 1);
                self.egress(run, dir, &frame, &Marks(vec![Mark::Injected]), now_ns());
                let _ = reply.send(());
            }
            Cmd::Stop => {}
        }
    }

    fn record(&mut self, at: Option<usize>, dir: Dir, ts: u64, frame: &[u8], marks: &Marks) {
        let Some(run) = at.and_then(|i| self.runs.get_mut(i)) else { return };
        let comment = marks.comment();
        let comment = comment.as_deref();
        if let Some(live) = &run.live {
            let w = WireFrame {
                sender: dir,
                ts_ns: ts,
                comment: comment.map(str::to_string),
                data: frame.to_vec(),
            };
            if live.try_send(w).is_err() {
                run.live_skipped += 1;
            }
        }
        let Some(rec) = &mut run.recorder else { return };
        match rec.record(dir, ts, frame, comment) {
            Ok(()) => self.count(at, |c| c.recorded += 1),
            Err(e) => {
                run.capture_error.get_or_insert(format!("writing the capture: {e}"));
                self.count(at, |c| c.record_errors += 1);
            }
        }
    }

    /// Sends `frame` to the VM on the other side of `dir` and records it.
    fn egress(&mut self, run: Option<usize>, dir: Dir, frame: &[u8], marks: &Marks, ts: u64) {
        let out = &self.socks[1 - dir.index()];
        let mut sent = out.send(frame);
        // A full send buffer clears as the kernel delivers; give it a moment.
        let until = Instant::now() + Duration::from_millis(5);
        while matches!(&sent, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            && Instant::now() < until
        {
            thread::yield_now();
            sent = out.send(frame);
        }
        match sent {
            Ok(_) => self.count(run, |c| c.forwarded += 1),
            Err(_) => self.count(run, |c| c.send_errors += 1),
        }
        self.record(run, dir, ts, frame, marks);
    }

    fn ingress(&mut self, dir: Dir, data: &[u8]) {
        let ts = now_ns();
        let len = data.len() as u64;
        let f = frame::decode(LinkType::ETHERNET, data, &self.opts);
        let at = self.owner_of(dir, &f);
        self.count(at, |c| {
            match dir {
                Dir::AtoB => c.from_a += 1,
                Dir::BtoA => c.from_b += 1,
            }
            c.bytes += len;
        });
        let view = roce_view(&f, data);
        if view.is_some() {
            self.count(at, |c| c.roce += 1);
        }
        let (Some(v), Some(run)) = (view, at.and_then(|i| self.runs.get_mut(i))) else {
            self.forward(at, dir, data, ts);
            return;
        };
        let id = run.id;
        let request = Request { dir, qp: v.qp, psn: Psn::new(v.psn), opcode: v.opcode };
        if let Some(resp) = &mut run.responder {
            // The responder's own answer to a request a rule answered instead.
            if let Some(by) = resp.withheld(dir, v.qp, request.psn, v.opcode) {
                self.count(at, |c| c.dropped += 1);
                self.record(at, dir, ts, data, &Marks(vec![Mark::Withheld(by)]));
                return;
            }
        }
        if run.rules.is_empty() {
            self.forward(at, dir, data, ts);
            return;
        }

        let mut frame = data.to_vec();
        let mut marks: Vec<Mark> = Vec::new();
        let (mut drop, mut modified, mut dups, mut hold_ms, mut reorder_ms) =
            (false, false, 0u32, 0u64, None);
        let mut synthesized: Option<(Vec<u8>, RuleRef)> = None;
        for (i, st) in run.rules.iter_mut().enumerate() {
            if !st.rule.matches(dir, v.opcode, v.qp, v.psn) {
                continue;
            }
            st.matched += 1;
            let chosen = match (st.rule.nth, st.rule.prob) {
                (Some(n), _) => st.matched == n,
                (None, Some(p)) => st.rng.next_f64() < p,
                (None, None) => true,
            };
            if !chosen || st.rule.cap().is_some_and(|c| st.applied >= c) {
                continue;
            }
            // One crafted answer per request: a second `respond` waits its turn.
            if synthesized.is_some() && matches!(st.rule.action, Action::Respond(_)) {
                continue;
            }
            st.applied += 1;
            let by = RuleRef { index: i + 1, rule: st.rule.to_string() };
            match st.rule.action {
                Action::Drop => {
                    marks.push(Mark::Dropped(by));
                    drop = true;
                    break;
                }
                Action::Respond(r) => {
                    let Some(resp) = &mut run.responder else { continue };
                    match resp.build(data, &request, &r, st.applied) {
                        Ok(answer) => {
                            match (r.real, r.reply_qp) {
                                (Real::Lost, _) => {
                                    marks.push(Mark::Dropped(by.clone()));
                                    drop = true;
                                }
                                (Real::Withhold, Some(qp)) => {
                                    resp.withhold(&request, qp, by.clone())
                                }
                                _ => {}
                            }
                            synthesized = Some((answer, by));
                            if drop {
                                break;
                            }
                        }
                        Err(why) => marks.push(Mark::Skipped { by, why }),
                    }
                }
                Action::Dup { copies } => dups += copies,
                Action::Delay { ms } => {
                    hold_ms = hold_ms.max(ms);
                    marks.push(Mark::Delayed { by, ms });
                }
                Action::Reorder { ms } => {
                    reorder_ms = Some(ms);
                    marks.push(Mark::Reordered(by));
                }
                ref a => match apply_modification(&mut frame, &v, a, st.rule.fix_icrc) {
                    Ok(what) => {
                        modified = true;
                        marks.push(Mark::Modified { by, what });
                    }
                    Err(why) => marks.push(Mark::Skipped { by, why }),
                },
            }
        }
        let marks = Marks(marks);
        if !drop {
            if let Some(resp) = &mut run.responder {
                resp.delivered(&request);
            }
        }
        // The request first (delivered, held or dropped), then the crafted
        // answer: the capture shows cause before effect, and the answer still
        // reaches the requester before any the responder could give.
        if drop {
            self.count(at, |c| c.dropped += 1);
            self.record(at, dir, ts, &frame, &marks);
        } else {
            if modified {
                self.count(at, |c| c.modified += 1);
            }
            if hold_ms > 0 || reorder_ms.is_some() {
                if hold_ms > 0 {
                    self.count(at, |c| c.delayed += 1);
                }
                if reorder_ms.is_some() {
                    self.count(at, |c| c.reordered += 1);
                }
                let due =
                    Instant::now() + Duration::from_millis(hold_ms.max(reorder_ms.unwrap_or(0)));
                self.held.push_back(Held {
                    due,
                    dir,
                    frame,
                    marks,
                    dups,
                    behind_next: reorder_ms.is_some(),
                    run: id,
                });
            } else {
                self.deliver(at, dir, &frame, &marks, dups, ts);
                self.release_reordered(dir);
            }
        }
        if let Some((answer, by)) = synthesized {
            self.count(at, |c| c.synthesized += 1);
            self.egress(at, dir.reverse(), &answer, &Marks(vec![Mark::Synthesized(by)]), now_ns());
        }
    }

    /// Forwards an untouched frame and lets a reordered one follow it.
    fn forward(&mut self, run: Option<usize>, dir: Dir, data: &[u8], ts: u64) {
        self.egress(run, dir, data, &Marks::default(), ts);
        self.release_reordered(dir);
    }

    fn deliver(
        &mut self,
        run: Option<usize>,
        dir: Dir,
        frame: &[u8],
        marks: &Marks,
        dups: u32,
        ts: u64,
    ) {
        self.egress(run, dir, frame, marks, ts);
        for k in 1..=dups {
            self.count(run, |c| c.duplicated += 1);
            let copy = Marks(vec![Mark::Duplicate { k, of: dups, original: marks.0.clone() }]);
            self.egress(run, dir, frame, &copy, now_ns());
        }
    }

    /// A frame held by `reorder` in direction `dir` goes out now that another frame
    /// has passed it.
    fn release_reordered(&mut self, dir: Dir) {
        if self.held.is_empty() {
            return;
        }
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].behind_next && self.held[i].dir == dir {
                if let Some(h) = self.held.remove(i) {
                    let run = self.index_of(h.run);
                    self.deliver(run, h.dir, &h.frame, &h.marks, h.dups, now_ns());
                }
            } else {
                i += 1;
            }
        }
    }

    /// Delivers held frames whose time has come (all of them with `all`).
    fn release_due(&mut self, all: bool) {
        if self.held.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut i = 0;
        while i < self.held.len() {
            if all || self.held[i].due <= now {
                if let Some(h) = self.held.remove(i) {
                    let run = self.index_of(h.run);
                    self.deliver(run, h.dir, &h.frame, &h.marks, h.dups, now_ns());
                }
            } else {
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The switch over real 127.0.0.1 UDP sockets, with synthetic RoCE frames
    //! standing in for the VMs.
    use super::*;
    use crate::fault::parse_rule;
    use crate::record::{read_capture, PcapngRecorder};
    use dissector::craft::{build, Encap, Host, Transport};
    use dissector::wire::ethernet::Mac;
    use dissector::wire::{BthRepr, Opcode, Psn};

    struct Rig {
        vm_a: UdpSocket,
        vm_b: UdpSocket,
        switch: Switch,
        dir: PathBuf,
        /// The run `begin` started.
        run: std::cell::Cell<RunId>,
    }

    impl Drop for Rig {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn rig(tag: &str) -> Rig {
        let w = Wire::new().unwrap();
        let switch = Switch::spawn(&w).unwrap();
        for s in [&w.vm_a, &w.vm_b] {
            s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        }
        let dir = std::env::temp_dir().join(format!("roce-switch-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Rig { vm_a: w.vm_a, vm_b: w.vm_b, switch, dir, run: std::cell::Cell::new(0) }
    }

    fn host(last: u8) -> Host {
        Host {
            mac: Mac([0x52, 0x54, 0, 0, 0, last]),
            ip: std::net::Ipv4Addr::new(10, 0, 0, last).into(),
        }
    }

    /// A RoCEv2 frame from a (10.0.0.1) to b, or from b to a.
    fn roce(dir: Dir, op: u8, qp: u32, psn: u32, payload: &[u8]) -> Vec<u8> {
        let (src, dst) = match dir {
            Dir::AtoB => (host(1), host(2)),
            Dir::BtoA => (host(2), host(1)),
        };
        let t = Transport {
            bth: BthRepr {
                opcode: Opcode(op),
                p_key: 0xffff,
                dest_qp: qp,
                psn: Psn::new(psn),
                ..Default::default()
            },
            payload: payload.to_vec(),
            ..Default::default()
        };
        build(&Encap::default(), &src, &dst, &t)
    }

    fn icrc_ok(frame: &[u8]) -> bool {
        let f = frame::decode(LinkType::ETHERNET, frame, &frame::Options::default());
        f.icrc_check(frame).expect("a RoCE frame with ICRC").ok()
    }

    fn ipv4_ok(frame: &[u8]) -> bool {
        ipv4::Packet::new_unchecked(&frame[14..]).verify_checksum()
    }

    impl Rig {
        fn send(&self, dir: Dir, frame: &[u8]) {
            match dir {
                Dir::AtoB => self.vm_a.send(frame).unwrap(),
                Dir::BtoA => self.vm_b.send(frame).unwrap(),
            };
        }
        /// Everything that reaches the receiver of `dir` until 300 ms of quiet.
        fn received(&self, dir: Dir) -> Vec<Vec<u8>> {
            let s = match dir {
                Dir::AtoB => &self.vm_b,
                Dir::BtoA => &self.vm_a,
            };
            let mut out = Vec::new();
            let mut buf = vec![0u8; 65536];
            while let Ok(n) = s.recv(&mut buf) {
                out.push(buf[..n].to_vec());
            }
            out
        }
        fn begin(&self, rules: &[&str], seed: u64, capture: bool) -> PathBuf {
            let path = self.dir.join("cap.pcapng");
            let recorder: Option<Box<dyn Recorder>> = capture
                .then(|| Box::new(PcapngRecorder::create(&path).unwrap()) as Box<dyn Recorder>);
            let rules = rules.iter().map(|r| parse_rule(r).unwrap()).collect();
            self.run.set(
                self.switch
                    .begin(RunSpec {
                        rules,
                        seed,
                        recorder,
                        capture: capture.then(|| path.clone()),
                        live: None,
                        claim: None,
                    })
                    .unwrap(),
            );
            path
        }
        fn end(&self) -> Result<RunReport> {
            self.switch.end(self.run.get())
        }
    }

    #[test]
    fn forwards_both_ways_and_counts() {
        let r = rig("fwd");
        let f1 = roce(Dir::AtoB, 0x04, 0x11, 1, b"ping");
        let f2 = roce(Dir::BtoA, 0x11, 0x12, 1, b"");
        let arp = vec![0xffu8; 42];
        r.send(Dir::AtoB, &f1);
        r.send(Dir::AtoB, &arp);
        r.send(Dir::BtoA, &f2);
        assert_eq!(r.received(Dir::AtoB), vec![f1.clone(), arp]);
        assert_eq!(r.received(Dir::BtoA), vec![f2]);
        let (total, runs) = r.switch.stats().unwrap();
        assert!(runs.is_empty());
        assert_eq!((total.from_a, total.from_b, total.roce, total.forwarded), (2, 1, 2, 3));
        assert!(total.balanced());
    }

    #[test]
    fn records_each_sender_on_its_interface_and_proves_completeness() {
        let r = rig("rec");
        let path = r.begin(&[], 1, true);
        let frames: Vec<(Dir, Vec<u8>)> = (0..10)
            .map(|i| if i % 3 == 0 { Dir::BtoA } else { Dir::AtoB })
            .map(|d| (d, roce(d, 0x04, 0x11, 0, b"x")))
            .collect();
        for (d, f) in &frames {
            r.send(*d, f);
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(r.received(Dir::AtoB).len() + r.received(Dir::BtoA).len(), 10);
        let rep = r.end().unwrap();
        assert!(rep.counters.capture_complete() && rep.counters.balanced(), "{:?}", rep.counters);
        assert_eq!(rep.counters.recorded, 10);
        assert_eq!(rep.capture.as_deref(), Some(path.to_str().unwrap()));
        let (names, pkts) = read_capture(&path).unwrap();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(pkts.len(), 10);
        for (p, (d, f)) in pkts.iter().zip(&frames) {
            assert_eq!(p.interface as usize, d.index());
            assert_eq!(&p.data, f);
            assert!(p.comment.is_none());
        }
        assert!(pkts.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
        // A second run may start once the first ended; ending twice is an error.
        assert!(r.end().is_err());
        r.begin(&[], 1, false);
        assert!(r
            .switch
            .begin(RunSpec {
                rules: vec![],
                seed: 1,
                recorder: None,
                capture: None,
                live: None,
                claim: None
            })
            .is_err());
    }

    #[test]
    fn live_stream_carries_what_the_capture_holds_and_never_blocks_the_wire() {
        let r = rig("live");
        let path = r.dir.join("cap.pcapng");
        let recorder: Option<Box<dyn Recorder>> =
            Some(Box::new(PcapngRecorder::create(&path).unwrap()));
        // Room for 3 frames: the 4th and 5th are skipped for the viewer, not for the wire.
        let (tx, rx) = mpsc::sync_channel(3);
        let rules = vec![parse_rule("drop dir=a>b psn=2").unwrap()];
        r.run.set(
            r.switch
                .begin(RunSpec {
                    rules,
                    seed: 1,
                    recorder,
                    capture: Some(path.clone()),
                    live: Some(tx),
                    claim: None,
                })
                .unwrap(),
        );
        let frames: Vec<Vec<u8>> =
            (1..=5).map(|psn| roce(Dir::AtoB, 0x04, 0x11, psn, b"x")).collect();
        for f in &frames {
            r.send(Dir::AtoB, f);
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(r.received(Dir::AtoB).len(), 4, "every frame but the dropped one is delivered");
        let rep = r.end().unwrap();
        assert_eq!((rep.counters.recorded, rep.live_skipped), (5, 2));
        let live: Vec<WireFrame> = rx.try_iter().collect();
        let (_, pkts) = read_capture(&path).unwrap();
        assert_eq!(live.len(), 3);
        for (w, p) in live.iter().zip(&pkts) {
            assert_eq!(
                (w.sender, w.ts_ns, &w.data, &w.comment),
                (Dir::AtoB, p.ts_ns, &p.data, &p.comment)
            );
        }
        assert!(
            live[1].comment.as_deref().is_some_and(|c| c.contains("dropped by rule 1")),
            "{:?}",
            live[1].comment
        );
    }

    #[test]
    fn drop_the_nth_transmission_of_a_psn() {
        let r = rig("nth");
        let path = r.begin(&["drop dir=a>b qp=0x11 psn=4 nth=2"], 1, true);
        let p4 = roce(Dir::AtoB, 0x04, 0x11, 4, b"data");
        let other_qp = roce(Dir::AtoB, 0x04, 0x12, 4, b"data");
        let reverse = roce(Dir::BtoA, 0x04, 0x11, 4, b"data");
        r.send(Dir::AtoB, &p4); // 1st transmission: passes
        r.send(Dir::AtoB, &other_qp); // other QP: not counted
        r.send(Dir::BtoA, &reverse); // other direction: not counted
        r.send(Dir::AtoB, &p4); // 2nd transmission (the retransmission): dropped
        r.send(Dir::AtoB, &p4); // 3rd: passes
        assert_eq!(r.received(Dir::AtoB), vec![p4.clone(), other_qp, p4.clone()]);
        assert_eq!(r.received(Dir::BtoA), vec![reverse]);
        let rep = r.end().unwrap();
        assert_eq!((rep.counters.dropped, rep.counters.forwarded), (1, 4));
        assert_eq!((rep.rules[0].matched, rep.rules[0].applied), (3, 1));
        assert!(rep.counters.capture_complete() && rep.counters.balanced());
        let (_, pkts) = read_capture(&path).unwrap();
        assert_eq!(pkts.len(), 5, "the dropped frame is recorded too");
        let commented: Vec<&str> = pkts.iter().filter_map(|p| p.comment.as_deref()).collect();
        assert_eq!(commented.len(), 1, "{commented:?}");
        assert!(
            commented[0].contains("dropped by rule 1") && commented[0].contains("not delivered"),
            "{commented:?}"
        );
    }

    #[test]
    fn corrupt_breaks_the_icrc_unless_asked_to_fix_it() {
        let r = rig("corrupt");
        r.begin(
            &[
                "corrupt psn=1 at=payload+2 xor=0x01",
                "corrupt psn=2 icrc=fix",
                "corrupt-icrc psn=3",
                "corrupt psn=4 at=ip+8",
            ],
            1,
            false,
        );
        let frames: Vec<Vec<u8>> =
            (1..=4).map(|psn| roce(Dir::AtoB, 0x04, 0x11, psn, b"abcdefgh")).collect();
        for f in &frames {
            assert!(icrc_ok(f));
            r.send(Dir::AtoB, f);
        }
        let got = r.received(Dir::AtoB);
        assert_eq!(got.len(), 4);
        let v = parse_roce(&frames[0], &frame::Options::default()).unwrap();
        // psn 1: one payload byte flipped, ICRC now wrong, IPv4 header untouched.
        assert_eq!(got[0][v.payload + 2], frames[0][v.payload + 2] ^ 0x01);
        assert_eq!(got[0].iter().zip(&frames[0]).filter(|(x, y)| x != y).count(), 1);
        assert!(!icrc_ok(&got[0]) && ipv4_ok(&got[0]));
        // psn 2: default corrupt (payload+0, xor 0xff), ICRC recomputed: accepted.
        assert_ne!(got[1], frames[1]);
        assert!(icrc_ok(&got[1]));
        // psn 3: only the ICRC differs.
        assert!(!icrc_ok(&got[2]));
        assert_eq!(got[2][..v.icrc.unwrap()], frames[2][..v.icrc.unwrap()]);
        // psn 4: the TTL changed, the IPv4 checksum was fixed (ICRC masks the TTL).
        assert_eq!(got[3][14 + 8], frames[3][14 + 8] ^ 0xff);
        assert!(ipv4_ok(&got[3]) && icrc_ok(&got[3]));
        let rep = r.end().unwrap();
        assert_eq!(rep.counters.modified, 4);
    }

    #[test]
    fn ce_mark_keeps_the_icrc_valid() {
        let r = rig("ce");
        r.begin(&["ce op=write-only"], 1, false);
        let mut t = roce(Dir::AtoB, 0x0a, 0x11, 7, &[1; 16]);
        r.send(Dir::AtoB, &t);
        let other = roce(Dir::AtoB, 0x04, 0x11, 8, b"x");
        r.send(Dir::AtoB, &other);
        let got = r.received(Dir::AtoB);
        let f = frame::decode(LinkType::ETHERNET, &got[0], &frame::Options::default());
        assert_eq!(f.ecn(), Some(3));
        assert!(ipv4_ok(&got[0]) && icrc_ok(&got[0]));
        // Nothing else changed: TOS ECN bits and the header checksum only.
        t[15] |= 3;
        t[24..26].copy_from_slice(&got[0][24..26]);
        assert_eq!(got[0], t);
        assert_eq!(got[1], other);
        assert_eq!(r.end().unwrap().counters.modified, 1);
    }

    #[test]
    fn dup_delay_and_reorder() {
        let r = rig("timing");
        let path = r.begin(&["dup psn=1 copies=2", "delay psn=2 ms=150", "reorder psn=4"], 1, true);
        let f: Vec<Vec<u8>> = (1..=5).map(|psn| roce(Dir::AtoB, 0x04, 0x11, psn, b"x")).collect();
        let t0 = Instant::now();
        for x in &f {
            r.send(Dir::AtoB, x);
            std::thread::sleep(Duration::from_millis(5));
        }
        let s = &r.vm_b;
        let mut order = Vec::new();
        let mut buf = vec![0u8; 2048];
        let mut delayed_at = None;
        while let Ok(n) = s.recv(&mut buf) {
            let psn = parse_roce(&buf[..n], &frame::Options::default()).unwrap().psn;
            if psn == 2 {
                delayed_at = Some(t0.elapsed());
            }
            order.push(psn);
        }
        // psn 1 three times; 4 held until 5 passed; 2 arrives last, ≥150 ms later.
        assert_eq!(order, [1, 1, 1, 3, 5, 4, 2]);
        assert!(delayed_at.unwrap() >= Duration::from_millis(150), "{delayed_at:?}");
        let rep = r.end().unwrap();
        let c = rep.counters;
        assert_eq!(
            (c.duplicated, c.delayed, c.reordered, c.forwarded, c.recorded),
            (2, 1, 1, 7, 7)
        );
        assert!(c.capture_complete() && c.balanced());
        let (_, pkts) = read_capture(&path).unwrap();
        let comments: Vec<&str> = pkts.iter().map(|p| p.comment.as_deref().unwrap_or("")).collect();
        assert!(
            comments[1].starts_with("duplicate 1 of 2")
                && comments[2].starts_with("duplicate 2 of 2"),
            "{comments:?}"
        );
        assert!(
            comments[5].contains("reordered by rule 3")
                && comments[6].contains("delayed 150 ms by rule 2"),
            "{comments:?}"
        );
    }

    #[test]
    fn a_run_ending_releases_held_frames() {
        let r = rig("held");
        r.begin(&["delay ms=5000"], 1, false);
        r.send(Dir::AtoB, &roce(Dir::AtoB, 0x04, 0x11, 1, b"x"));
        std::thread::sleep(Duration::from_millis(50));
        let rep = r.end().unwrap();
        assert_eq!(r.received(Dir::AtoB).len(), 1);
        assert!(rep.counters.balanced(), "{:?}", rep.counters);
    }

    fn dropped_psns(seed: u64) -> Vec<u32> {
        let r = rig(&format!("prob{seed}"));
        r.begin(&["drop prob=0.5"], seed, false);
        for psn in 0..200 {
            r.send(Dir::AtoB, &roce(Dir::AtoB, 0x04, 0x11, psn, b"x"));
        }
        let got: Vec<u32> = r
            .received(Dir::AtoB)
            .iter()
            .map(|f| parse_roce(f, &frame::Options::default()).unwrap().psn)
            .collect();
        let rep = r.end().unwrap();
        assert_eq!(rep.counters.dropped as usize, 200 - got.len());
        (0..200).filter(|p| !got.contains(p)).collect()
    }

    #[test]
    fn seeded_probability_is_reproducible() {
        let a = dropped_psns(7);
        assert_eq!(a, dropped_psns(7));
        assert_ne!(a, dropped_psns(8));
        assert!((60..140).contains(&a.len()), "{} of 200 dropped at p=0.5", a.len());
    }

    #[test]
    fn rules_leave_other_traffic_alone_and_limit_counts() {
        let r = rig("limit");
        r.begin(&["drop limit=2"], 1, false);
        let tcp_like = vec![0x11u8; 60];
        r.send(Dir::AtoB, &tcp_like);
        for psn in 0..4 {
            r.send(Dir::AtoB, &roce(Dir::AtoB, 0x04, 0x11, psn, b"x"));
        }
        let got = r.received(Dir::AtoB);
        assert_eq!(got.len(), 3, "the non-RoCE frame and RoCE psn 2, 3");
        assert_eq!(got[0], tcp_like);
        assert_eq!(r.end().unwrap().counters.dropped, 2);
    }

    #[test]
    fn injected_frames_are_counted_and_recorded() {
        let r = rig("inject");
        let path = r.begin(&[], 1, true);
        let f = roce(Dir::BtoA, 0x81, 0x11, 0, b"");
        r.switch.inject(Dir::BtoA, f.clone()).unwrap();
        assert_eq!(r.received(Dir::BtoA), vec![f]);
        let rep = r.end().unwrap();
        assert_eq!((rep.counters.injected, rep.counters.recorded), (1, 1));
        assert!(rep.counters.capture_complete() && rep.counters.balanced());
        let (_, pkts) = read_capture(&path).unwrap();
        assert_eq!(pkts[0].comment.as_deref(), Some("injected by the lab"));
    }

    fn syndrome_of(frame: &[u8]) -> (u8, u32, u32, u8) {
        let f = frame::decode(LinkType::ETHERNET, frame, &frame::Options::default());
        let ib = f.ib.expect("RoCE");
        (ib.bth.opcode.0, ib.bth.dest_qp, ib.bth.psn.value(), ib.aeth.map_or(0, |a| a.syndrome.0))
    }

    /// `respond real=withhold`: the request goes on, the crafted NAK comes back
    /// first, the responder's own ACK of it is held back and later ones pass; the
    /// capture says which frame is which, and the counts still balance.
    #[test]
    fn respond_answers_in_the_responders_place() {
        let r = rig("respond");
        let path = r.begin(&["respond dir=a>b op=write-only with=nak code=invalid_request real=withhold reply-qp=0x11"], 1, true);
        let write = roce(Dir::AtoB, 0x0a, 0x22, 5, &[1; 8]);
        r.send(Dir::AtoB, &write);
        assert_eq!(r.received(Dir::AtoB), vec![write.clone()], "the responder gets the request");
        let back = r.received(Dir::BtoA);
        assert_eq!(back.len(), 1);
        assert_eq!(
            syndrome_of(&back[0]),
            (0x11, 0x11, 5, 0x61),
            "NAK Invalid Request to the requester's QP"
        );
        assert!(icrc_ok(&back[0]) && ipv4_ok(&back[0]));
        // The responder's ACK of PSN 5 is withheld; its next one passes.
        r.send(Dir::BtoA, &roce(Dir::BtoA, 0x11, 0x11, 5, &[]));
        assert!(r.received(Dir::BtoA).is_empty());
        r.send(Dir::BtoA, &roce(Dir::BtoA, 0x11, 0x11, 6, &[]));
        assert_eq!(r.received(Dir::BtoA).len(), 1);
        let rep = r.end().unwrap();
        let c = rep.counters;
        assert_eq!((c.synthesized, c.dropped, c.recorded), (1, 1, 4));
        assert!(c.capture_complete() && c.balanced(), "{}", c.summary());
        let (_, pkts) = read_capture(&path).unwrap();
        let marks: Vec<Marks> = pkts
            .iter()
            .map(|p| p.comment.as_deref().map(Marks::parse).unwrap_or_default())
            .collect();
        assert!(
            marks[0].is_empty()
                && marks[1].synthesized()
                && marks[2].withheld()
                && marks[3].is_empty(),
            "the request, then its answer: {marks:?}"
        );
    }

    /// `real=lost` keeps the request from the responder; an RNR range sends each
    /// code once, then lets the requester through.
    #[test]
    fn respond_lost_requests_and_rnr_ranges() {
        let r = rig("respond-lost");
        r.begin(&["respond op=send-only with=rnr timer=3-4 real=lost reply-qp=0x11"], 1, false);
        let send = roce(Dir::AtoB, 0x04, 0x22, 9, &[2; 4]);
        let mut timers = Vec::new();
        for _ in 0..3 {
            r.send(Dir::AtoB, &send);
            timers.extend(r.received(Dir::BtoA).iter().map(|f| syndrome_of(f).3));
        }
        assert_eq!(timers, vec![0x23, 0x24], "codes 3 and 4, then no more");
        assert_eq!(r.received(Dir::AtoB).len(), 1, "only the third SEND reached the responder");
        let rep = r.end().unwrap();
        assert_eq!((rep.rules[0].matched, rep.rules[0].applied), (3, 2));
    }

    #[test]
    #[ignore = "needs root (SO_RCVBUFFORCE for the switch's socket buffers): bash scripts/test.sh runs it as root"]
    fn a_burst_is_carried_without_loss() {
        let r = rig("burst");
        r.begin(&[], 1, true);
        let n = 20_000;
        let f = roce(Dir::AtoB, 0x0a, 0x11, 0, &[7; 64]);
        let rx = {
            let s = r.vm_b.try_clone().unwrap();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 2048];
                let mut got = 0;
                while s.recv(&mut buf).is_ok() {
                    got += 1;
                }
                got
            })
        };
        let t = Instant::now();
        for _ in 0..n {
            r.vm_a.send(&f).unwrap();
        }
        let got = rx.join().unwrap();
        let rep = r.end().unwrap();
        let c = rep.counters;
        eprintln!(
            "burst: {n} frames sent in {:?}; {got} received; {c:?}; socket drops {}",
            t.elapsed(),
            rep.socket_drops
        );
        assert_eq!(c.from_a, n);
        assert_eq!(got, n);
        assert_eq!((c.forwarded, c.send_errors, c.recorded), (n, 0, n));
    }

    /// Runs that share the switch: each records and counts the frames to its own
    /// QPs, nothing of the other's; what neither claims goes through unrecorded;
    /// a run that needs the switch to itself (or brings rules) waits its turn.
    #[test]
    fn shared_runs_each_record_only_their_own_frames() {
        let r = rig("shared");
        let start = |name: &str, claim: Claim| {
            let path = r.dir.join(name);
            let recorder: Box<dyn Recorder> = Box::new(PcapngRecorder::create(&path).unwrap());
            let id = r
                .switch
                .begin(RunSpec {
                    rules: vec![],
                    seed: 1,
                    recorder: Some(recorder),
                    capture: Some(path.clone()),
                    live: None,
                    claim: Some(claim),
                })
                .unwrap();
            (id, path)
        };
        let (one, p1) = start(
            "one.pcapng",
            Claim { qps_a: vec![0x11], qps_b: vec![0x12], ports: vec![18_600] },
        );
        let (two, p2) = start(
            "two.pcapng",
            Claim { qps_a: vec![0x12], qps_b: vec![0x11], ports: vec![18_700] },
        );
        let overlapping = RunSpec {
            rules: vec![],
            seed: 1,
            recorder: None,
            capture: None,
            live: None,
            claim: Some(Claim { qps_b: vec![0x12], ..Default::default() }),
        };
        assert!(r.switch.begin(overlapping).unwrap_err().to_string().contains("QPN 0x12 on VM b"));
        let alone = RunSpec {
            rules: vec![],
            seed: 1,
            recorder: None,
            capture: None,
            live: None,
            claim: None,
        };
        assert!(r.switch.begin(alone).unwrap_err().to_string().contains("2 runs share the switch"));
        let with_rules = RunSpec {
            rules: vec![parse_rule("drop").unwrap()],
            seed: 1,
            recorder: None,
            capture: None,
            live: None,
            claim: Some(Claim { qps_b: vec![0x99], ..Default::default() }),
        };
        assert!(r.switch.begin(with_rules).unwrap_err().to_string().contains("fault rules"));

        // Interleaved: one's request and ACK, two's, an ARP nobody claims.
        let frames = [
            (Dir::AtoB, roce(Dir::AtoB, 0x04, 0x12, 1, b"one")),
            (Dir::AtoB, roce(Dir::AtoB, 0x04, 0x11, 7, b"two")),
            (Dir::BtoA, roce(Dir::BtoA, 0x11, 0x11, 1, b"")),
            (Dir::AtoB, vec![0xffu8; 42]),
            (Dir::BtoA, roce(Dir::BtoA, 0x11, 0x12, 7, b"")),
        ];
        for (d, f) in &frames {
            r.send(*d, f);
        }
        assert_eq!(r.received(Dir::AtoB).len(), 3, "every frame is forwarded");
        assert_eq!(r.received(Dir::BtoA).len(), 2);
        let (total, runs) = r.switch.stats().unwrap();
        assert_eq!((total.received(), runs.len()), (5, 2));
        let rep1 = r.switch.end(one).unwrap();
        let rep2 = r.switch.end(two).unwrap();
        for (rep, path, mine) in [(&rep1, &p1, [0usize, 2]), (&rep2, &p2, [1, 4])] {
            let c = rep.counters;
            assert_eq!(
                (c.from_a, c.from_b, c.roce, c.forwarded, c.recorded),
                (1, 1, 2, 2, 2),
                "{c:?}"
            );
            assert!(c.balanced() && c.capture_complete());
            let (_, got) = read_capture(path).unwrap();
            let want: Vec<&Vec<u8>> = mine.iter().map(|&i| &frames[i].1).collect();
            assert_eq!(got.iter().map(|p| &p.data).collect::<Vec<_>>(), want);
        }
        assert!(r.switch.end(one).is_err(), "ended already");
        let (total, runs) = r.switch.stats().unwrap();
        assert!(runs.is_empty());
        assert_eq!(
            (total.received(), total.recorded),
            (5, 4),
            "the ARP frame went through unrecorded"
        );
    }
}
