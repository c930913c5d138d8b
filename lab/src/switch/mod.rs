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
//!
//! Owns: the switch's sockets, its thread and the runs on it. The rooms:
//! - this file: the [`Switch`] handle (the public API) and the thread's loop, which
//!   polls the sockets and takes commands;
//! - `wire`: the four UDP sockets ([`Wire`], [`Ports`], [`socket_drops`]);
//! - `port`: a side of the switch ([`Port`]): the switch's end of the UDP wire,
//!   or a network interface through `AF_PACKET` ([`LinkPort`]);
//! - `ring`: an interface port's receive ring, shared with the kernel;
//! - `veth`: a namespace of veth pairs to try interface ports on without NICs;
//! - `runs`: the runs in progress, which run a frame belongs to (by [`Claim`]),
//!   beginning and ending them;
//! - `rules`: a received frame through the run's fault rules and `respond` rules;
//! - `roce`: the RoCE fields rules match on and the byte changes faults make
//!   ([`RoceView`], [`apply_modification`]);
//! - `deliver`: sending, recording and holding back frames;
//! - `report`: what is counted ([`Counters`]) and a run's end ([`RunReport`]).
//!
//! Imports: the vocabulary below it: [`fault`](super::fault) (the rules),
//! [`claim`](super::claim), [`mark`](super::mark) (what a frame's capture comment
//! says), [`record`](super::record) (the capture), [`control`](super::control)'s
//! `WireFrame` (the live view) and, in `rules` and `runs`, `respond` (the crafted
//! answers); the frames are decoded by `dissector`.
use std::collections::VecDeque;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use dissector::frame;
use dissector::LinkType;
use nix::poll::{poll, PollFd, PollFlags};

use super::claim::Claim;
use super::control::WireFrame;
use super::fault::{Dir, Rule};
use super::mark::{Mark, Marks};
use super::record::Recorder;

mod deliver;
mod port;
mod report;
mod ring;
mod roce;
mod rules;
mod runs;
mod sockopt;
#[cfg(test)]
mod tests;
pub mod veth;
mod wire;

use deliver::{Held, Outbox};
pub use port::{
    interfaces, Burst, LinkPort, LinkState, LinkWatch, Port, PortError, MIN_MTU, SEND_BATCH,
};
pub use report::{Counters, RuleReport, RunReport};
pub use roce::{apply_modification, parse_roce, RoceView};
use runs::Run;
pub use wire::{socket_drops, Ports, Wire};

/// Frames read from one socket before looking at the other.
const BURST: usize = 256;

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
    /// How many of `rules`, from the first, are the lab's standing rules.
    pub standing: Standing,
}

/// The lab's standing rules at the front of a run's rules. Their random draws
/// (`prob`) go on from run to run, seeded once from `seed` (rule `i` from
/// `seed + i` unless it names its own), so that over the lab's life a
/// `prob=0.5` rule fires on half the frames it matches. Were they seeded again
/// for every run, every run would replay the same first draws: a rule whose
/// first draw says no would never fire on a run's first frame. Their counts go on
/// too: a standing `nth` or `limit` counts over the lab's life, as the fault-rule
/// reference says; each run's report gives what matched within it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Standing {
    pub count: usize,
    pub seed: u64,
}

/// Names a run in progress, to end it.
pub type RunId = u64;

enum Cmd {
    Begin(RunSpec, mpsc::Sender<Result<RunId, String>>),
    End(RunId, mpsc::Sender<Result<RunReport, String>>),
    Stats(mpsc::Sender<(Counters, Vec<Counters>)>),
    Standing(mpsc::Sender<Vec<RuleReport>>),
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
        Switch::spawn_on([Port::Udp(a), Port::Udp(b)], ports)
    }

    /// Starts forwarding between two ports: frames `a` takes in go out of `b`
    /// (direction a>b) and back. `ports` names the lab wire's UDP sockets, whose
    /// drops the kernel counts in /proc/net/udp (none for interfaces).
    pub fn spawn_on(socks: [Port; 2], ports: Ports) -> Result<Switch> {
        let (tx, rx) = mpsc::channel();
        let (wake, woken) = UnixDatagram::pair().context("creating the switch's wake-up socket")?;
        wake.set_nonblocking(true).context("the switch's wake-up socket")?;
        woken.set_nonblocking(true).context("the switch's wake-up socket")?;
        let thread = thread::Builder::new()
            .name("lab-switch".into())
            .spawn(move || Engine::new(socks, ports).run(rx, woken))
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

    /// How often each standing rule matched and fired over the lab's life (the
    /// runs that ended and those in progress), in the order they were given.
    pub fn standing(&self) -> Result<Vec<RuleReport>> {
        self.ask(Cmd::Standing)
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

/// The switch thread's state.
struct Engine {
    socks: [Port; 2],
    ports: Ports,
    opts: frame::Options,
    total: Counters,
    /// The runs in progress: one that has the switch to itself, or any number
    /// that share it.
    runs: Vec<Run>,
    next_id: RunId,
    held: VecDeque<Held>,
    /// The standing rules' draws and lifetime counts, kept between runs.
    standing: Vec<runs::StandingState>,
    /// Frames decided on, not yet sent and recorded: flushed after every burst
    /// read, every release of held frames and around every command.
    outbox: Outbox,
}

impl Engine {
    fn new(socks: [Port; 2], ports: Ports) -> Engine {
        Engine {
            socks,
            ports,
            opts: frame::Options::default(),
            total: Counters::default(),
            runs: Vec::new(),
            next_id: 1,
            held: VecDeque::new(),
            standing: Vec::new(),
            outbox: Outbox::default(),
        }
    }

    fn run(mut self, rx: mpsc::Receiver<Cmd>, woken: UnixDatagram) {
        let mut buf = [0u8; 64];
        let mut burst = Burst::new();
        loop {
            let wait = self
                .held
                .iter()
                .map(|h| h.due.saturating_duration_since(Instant::now()))
                .min()
                .unwrap_or(Duration::from_millis(20))
                .min(Duration::from_millis(20));
            let mut fds = [
                PollFd::new(self.socks[0].as_fd(), PollFlags::POLLIN),
                PollFd::new(self.socks[1].as_fd(), PollFlags::POLLIN),
                PollFd::new(woken.as_fd(), PollFlags::POLLIN),
            ];
            let ms = u16::try_from(wait.as_millis().max(1)).unwrap_or(u16::MAX);
            // An interrupted or failed wait counts as nothing ready: the loop looks again.
            let n = poll(&mut fds, ms).unwrap_or(0);
            let ready: [bool; 3] =
                std::array::from_fn(|i| fds[i].revents().is_some_and(|r| !r.is_empty()));
            if ready[2] {
                while woken.recv(&mut buf).is_ok() {}
            }
            if n > 0 {
                for (i, dir) in [(0, Dir::AtoB), (1, Dir::BtoA)] {
                    if !ready[i] {
                        continue;
                    }
                    for _ in 0..BURST / Burst::SLOTS {
                        match self.socks[i].recv_burst(&mut burst) {
                            Ok(_) => {
                                for frame in burst.frames() {
                                    self.ingress(dir, frame);
                                }
                                self.flush();
                            }
                            // ECONNREFUSED: an ICMP error from an earlier send to a
                            // VM socket that was gone; nothing to read.
                            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                            Err(_) => break,
                        }
                    }
                }
            }
            self.release_due(false);
            self.flush();
            loop {
                match rx.try_recv() {
                    Ok(Cmd::Stop) | Err(mpsc::TryRecvError::Disconnected) => return,
                    Ok(cmd) => self.command(cmd),
                    Err(mpsc::TryRecvError::Empty) => break,
                }
            }
        }
    }

    /// Frames the kernel dropped before the switch read them: on the lab wire's
    /// UDP sockets (both ends), or on the interfaces it is a port of.
    fn drops(&self) -> u64 {
        let udp = if self.ports == Ports::default() { 0 } else { socket_drops(&self.ports) };
        udp + self.socks.iter().map(Port::drops).sum::<u64>()
    }

    fn command(&mut self, cmd: Cmd) {
        // A command sees every frame decided before it sent and recorded (an
        // `end` the whole of its run), and what it decides goes out before the
        // caller hears back.
        self.flush();
        self.obey(cmd);
        self.flush();
    }

    fn obey(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Begin(spec, reply) => {
                let _ = reply.send(self.begin(spec));
            }
            Cmd::End(id, reply) => {
                let _ = reply.send(self.end(id));
            }
            Cmd::Stats(reply) => {
                let _ = reply.send((self.total, self.runs.iter().map(|r| r.counters).collect()));
            }
            Cmd::Standing(reply) => {
                let _ = reply.send(self.standing_report());
            }
            Cmd::Inject(dir, frame, reply) => {
                let f = frame::decode(LinkType::ETHERNET, &frame, &self.opts);
                let run = self.owner_of(dir, &f);
                self.count(run, |c| c.injected += 1);
                self.egress(
                    run,
                    dir,
                    &frame,
                    &Marks(vec![Mark::Injected]),
                    dissector::capture::unix_now_ns(),
                );
                self.flush();
                let _ = reply.send(());
            }
            Cmd::Stop => {}
        }
    }
}
