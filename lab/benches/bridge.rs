//! The bridge's speed on two interfaces, as `roce bridge` between two NIC ports:
//! the switch, recording to pcapng, between two veth pairs in a namespace of
//! its own, and between two host taps (the lab's tap topology, where qemu holds
//! the taps' descriptors; here the bench does). Prints figures; asserts nothing
//! (`cargo bench -p lab --bench bridge`, as root).
//!
//! - **Throughput** (RFC 2544): the most frames a second one host end can offer,
//!   paced, with none lost on the way to the other, found by halving the
//!   interval between a rate with loss and one without.
//! - **Forwarding rate at the most load offered**: a host end blasts RoCE WRITE
//!   Only frames (`FRAME` bytes on the wire) as fast as it can; the other host
//!   end counts what arrives. The rate is what crossed per second, with what
//!   the kernel dropped before the switch read it; the switch thread's CPU
//!   time gives what it carries on a core of its own.
//! - **Latency**: frames paced one per 200 µs, each stamped; the time from the
//!   send at one host end to the receive at the other through the switch,
//!   against the same over the bare hops without it (a veth hop each way; a
//!   tap's descriptor to its interface, and back). What the switch adds is the
//!   difference.
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dissector::craft::{build, Encap, Host, Transport};
use dissector::wire::ethernet::Mac;
use dissector::wire::{BthRepr, Opcode, Psn};
use lab::record::{PcapngRecorder, Recorder};
use lab::switch::veth::Netns;
use lab::switch::{Burst, LinkPort, Port, Ports, RunId, RunSpec, Switch, Wire};
use lab::tap::Tap;

const FRAMES: u64 = 400_000;
/// Frames a paced trial offers.
const PACED: u64 = 200_000;
const PAYLOAD: usize = 64;
const SAMPLES: usize = 5_000;

fn frame(seq: u64) -> Vec<u8> {
    let host = |last: u8| Host {
        mac: Mac([0x52, 0x54, 0, 0, 0, last]),
        ip: std::net::Ipv4Addr::new(10, 0, 0, last).into(),
    };
    let mut payload = vec![0u8; PAYLOAD];
    payload[..8].copy_from_slice(&seq.to_be_bytes());
    let t = Transport {
        bth: BthRepr {
            opcode: Opcode(0x0a),
            p_key: 0xffff,
            dest_qp: 0x11,
            psn: Psn::new(seq as u32),
            ..Default::default()
        },
        payload,
        ..Default::default()
    };
    build(&Encap::default(), &host(1), &host(2), &t)
}

/// The sequence number a bench frame carries (the payload's first 8 bytes).
fn seq_of(f: &[u8]) -> Option<u64> {
    // Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + RETH 16.
    let at = 14 + 20 + 8 + 12 + 16;
    f.get(at..at + 8).map(|b| u64::from_be_bytes(b.try_into().unwrap_or([0; 8])))
}

/// A host end: where the bench sends from or counts at.
enum End {
    /// One of the switch's own kinds of port: a veth end (a packet socket),
    /// or a UDP socket of the lab's wire.
    Port(Port),
    /// A tap's descriptor, as qemu holds it: a write is a frame the interface
    /// receives, a read one it sent.
    Tap(File),
}

impl End {
    fn tap(t: Tap) -> End {
        // SAFETY: fcntl(2) on a descriptor we own, with no pointers.
        unsafe { libc::fcntl(t.fd.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        End::Tap(File::from(t.fd))
    }

    /// Sends as many of `frames` as go at once: how many went.
    fn send(&self, frames: &[&[u8]]) -> usize {
        match self {
            End::Port(p) => p.send_batch(frames).unwrap_or(0),
            End::Tap(f) => frames.iter().take_while(|x| (&*f).write(x).is_ok()).count(),
        }
    }

    /// Reads every frame waiting, each given to `seen`: how many.
    fn drain(&self, burst: &mut Burst, buf: &mut [u8], mut seen: impl FnMut(&[u8])) -> u64 {
        let mut n = 0;
        match self {
            End::Port(p) => {
                while p.recv_burst(burst).is_ok() {
                    for f in burst.frames() {
                        seen(f);
                        n += 1;
                    }
                }
            }
            End::Tap(f) => {
                while let Ok(k) = (&*f).read(buf) {
                    seen(&buf[..k]);
                    n += 1;
                }
            }
        }
        n
    }
}

impl AsFd for End {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            End::Port(p) => p.as_fd(),
            End::Tap(f) => f.as_fd(),
        }
    }
}

/// Waits up to `ms` for a frame on `p`.
fn wait_readable(p: &impl AsFd, ms: u16) -> bool {
    use nix::poll::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(p.as_fd(), PollFlags::POLLIN)];
    poll(&mut fds, ms).unwrap_or(0) > 0
}

/// One-way times (µs) of `SAMPLES` paced frames from `tx` to `rx`.
fn latencies(tx: &End, rx: &End) -> Vec<f64> {
    let start = Instant::now();
    let mut sent = vec![Duration::ZERO; SAMPLES];
    let mut got = Vec::with_capacity(SAMPLES);
    let (mut burst, mut buf) = (Burst::new(), vec![0u8; 65_536]);
    let mut take = |rx: &End| {
        rx.drain(&mut burst, &mut buf, |f| {
            if let Some(s) = seq_of(f).filter(|s| (*s as usize) < SAMPLES) {
                got.push((s as usize, start.elapsed()));
            }
        })
    };
    for (i, at) in sent.iter_mut().enumerate() {
        let f = frame(i as u64);
        *at = start.elapsed();
        tx.send(&[&f]);
        let until = Instant::now() + Duration::from_micros(200);
        while Instant::now() < until {
            take(rx);
        }
    }
    while wait_readable(rx, 50) {
        take(rx);
    }
    let mut us: Vec<f64> =
        got.iter().map(|(s, t)| t.saturating_sub(sent[*s]).as_secs_f64() * 1e6).collect();
    us.sort_by(f64::total_cmp);
    us
}

/// The CPU time (user and system, s) the switch's thread has taken so far:
/// from /proc, where it is the thread named `lab-switch`.
fn switch_cpu() -> Option<f64> {
    let tick = 100.0; // USER_HZ, the unit of /proc's times on Linux
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != "lab-switch" {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
        // Fields after the command's closing parenthesis: utime and stime are
        // the 12th and 13th of them.
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let (u, s): (f64, f64) = (f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?);
        return Some((u + s) / tick);
    }
    None
}

fn pct(v: &[f64], p: f64) -> f64 {
    v.get(((v.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(f64::NAN)
}

/// What one trial carried.
struct Trial {
    sent: u64,
    offered: f64,
    received: u64,
    /// What arrived per second, from the first arrival to the last.
    rate: f64,
    forwarded: u64,
    drops: u64,
    send_errors: u64,
    recorded: u64,
    /// The switch thread's CPU time over the trial.
    cpu: Option<f64>,
}

impl Trial {
    /// Frames sent that did not arrive, wherever they were lost.
    fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.received)
    }
}

/// Offers `frames` frames from `a` at `rate` a second (as fast as it can
/// without), counted at `b`, in one recorded run of `switch`'s: what crossed,
/// with the two ends back.
fn trial(
    switch: &Switch,
    begin: &dyn Fn(&Switch) -> RunId,
    a: End,
    b: End,
    rate: Option<f64>,
    frames: u64,
) -> (Trial, End, End) {
    let run = begin(switch);
    let done = Arc::new(AtomicBool::new(false));
    // The sender and the counter read and write in batches, as the switch
    // does: on two cores they share with it, the less they take the more the
    // figure is the switch's.
    let counter = {
        let done = done.clone();
        std::thread::spawn(move || {
            let (mut burst, mut buf) = (Burst::new(), vec![0u8; 65_536]);
            let (mut n, mut first, mut last) = (0u64, None, Instant::now());
            loop {
                if !wait_readable(&b, 200) {
                    if done.load(Ordering::SeqCst) {
                        break;
                    }
                    continue;
                }
                let k = b.drain(&mut burst, &mut buf, |_| {});
                if k > 0 {
                    n += k;
                    last = Instant::now();
                    first.get_or_insert(last);
                }
            }
            (n, first.map(|f| last.duration_since(f)).unwrap_or_default(), b)
        })
    };
    let f = frame(u64::MAX);
    let batch = vec![f.as_slice(); 16];
    let cpu_before = switch_cpu();
    let t = Instant::now();
    let mut sent = 0u64;
    while sent < frames {
        if let Some(rate) = rate {
            // Paced: each batch at its time on a fixed schedule, so a late
            // wake-up is made up by the next batch, not lost.
            let due = t + Duration::from_secs_f64(sent as f64 / rate);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        let want = usize::try_from(frames - sent).unwrap_or(usize::MAX).min(batch.len());
        sent += a.send(&batch[..want]) as u64;
    }
    let send_time = t.elapsed();
    done.store(true, Ordering::SeqCst);
    let (received, span, b) = counter.join().unwrap();
    let cpu = switch_cpu().zip(cpu_before).map(|(after, before)| after - before);
    let rep = switch.end(run).unwrap();
    let fps = |n: u64, d: Duration| n as f64 / d.as_secs_f64().max(1e-9);
    let trial = Trial {
        sent,
        offered: fps(sent, send_time),
        received,
        rate: fps(received, span),
        forwarded: rep.counters.forwarded,
        drops: rep.socket_drops,
        send_errors: rep.counters.send_errors,
        recorded: rep.counters.recorded,
        cpu,
    };
    (trial, a, b)
}

/// The switch on `ports`, between host ends `a` (sending) and `b`: its
/// figures printed under `what`, with `bare`, the latencies of the hops the
/// path through the switch takes without it.
fn measure(what: &str, (ports, wire): ([Port; 2], Ports), a: End, b: End, bare: &[Vec<f64>]) {
    let switch = Switch::spawn_on(ports, wire).unwrap();
    let cap = std::env::temp_dir().join(format!("roce-bridge-bench-{}.pcapng", std::process::id()));
    let begin = |switch: &Switch| {
        switch
            .begin(RunSpec {
                rules: vec![],
                seed: 1,
                recorder: Some(Box::new(PcapngRecorder::create(&cap).unwrap()) as Box<dyn Recorder>),
                capture: Some(cap.clone()),
                live: None,
                claim: None,
                standing: Default::default(),
            })
            .unwrap()
    };

    // Latency through the switch (recording).
    let run = begin(&switch);
    let through = latencies(&a, &b);
    switch.end(run).unwrap();

    // Forwarding rate at the most load offered (recording): blast from a,
    // count at b.
    let (most, a, b) = trial(&switch, &begin, a, b, None, FRAMES);
    println!(
        "bridge bench: the switch between {what}, recording to pcapng ({} bytes a frame)",
        frame(0).len()
    );
    println!(
        "  at the most load offered: {} frames sent at {:.0}/s; {} arrived, {:.0} frames/s; switch forwarded {}, kernel drops before the switch {}, send errors {}, recorded {}",
        most.sent,
        most.offered,
        most.received,
        most.rate,
        most.forwarded,
        most.drops,
        most.send_errors,
        most.recorded
    );
    if let Some(cpu) = most.cpu {
        println!(
            "  the switch thread's CPU time meanwhile: {cpu:.2} s: {:.0} frames per CPU-second (what one core of its own would carry)",
            most.forwarded as f64 / cpu.max(1e-9)
        );
    }

    // Throughput as RFC 2544 defines it: the highest rate offered at which
    // every frame arrives, found by halving the interval.
    let (mut lossless, mut lossy) = (None::<Trial>, most.offered.max(100_000.0) * 1.2);
    let (mut a, mut b, mut tried) = (a, b, Vec::new());
    loop {
        let floor = lossless.as_ref().map_or(0.0, |t| t.offered);
        if lossy - floor <= 10_000.0 {
            break;
        }
        let rate = (floor + lossy) / 2.0;
        let (t, a2, b2) = trial(&switch, &begin, a, b, Some(rate), PACED);
        (a, b) = (a2, b2);
        tried.push(if t.lost() == 0 {
            format!("{:.0}k none lost", t.offered / 1e3)
        } else {
            format!(
                "{:.0}k {} lost ({} before the switch, {} sending, {} after)",
                t.offered / 1e3,
                t.lost(),
                t.drops,
                t.send_errors,
                t.forwarded.saturating_sub(t.received)
            )
        });
        if t.lost() == 0 {
            lossless = Some(t);
        } else {
            lossy = rate;
        }
    }
    let _ = std::fs::remove_file(&cap);
    println!(
        "  throughput (RFC 2544: the most offered with none lost, {PACED} frames a trial): {:.0} frames/s{}",
        lossless.as_ref().map_or(0.0, |t| t.offered),
        lossless.as_ref().and_then(|t| t.cpu.map(|c| format!(", the switch thread busy {:.0} % of it", 100.0 * c / (t.sent as f64 / t.offered)))).unwrap_or_default()
    );
    println!("  trials (offered/s): {}", tried.join(", "));
    for (i, hop) in bare.iter().enumerate() {
        println!(
            "  bare hop {} (no switch): median {:.1} µs, p99 {:.1} µs ({} samples)",
            i + 1,
            pct(hop, 0.5),
            pct(hop, 0.99),
            hop.len()
        );
    }
    println!(
        "  through the switch: median {:.1} µs, p99 {:.1} µs ({} samples)",
        pct(&through, 0.5),
        pct(&through, 0.99),
        through.len()
    );
    let sum = |p: f64| bare.iter().map(|h| pct(h, p)).sum::<f64>();
    println!(
        "  added by the switch: median {:.1} µs, p99 {:.1} µs",
        pct(&through, 0.5) - sum(0.5),
        pct(&through, 0.99) - sum(0.99)
    );
}

fn main() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!(
            "bridge bench: needs root (a network namespace, raw sockets, taps); nothing measured"
        );
        std::process::exit(2);
    }
    let link = |p: LinkPort| End::Port(Port::Link(p));

    // Two veth pairs in a namespace: hosts on a0 and b0, the switch on a1 and b1.
    let ns = Netns::new("bench").expect("the bench's namespace");
    let open = |names: &[&'static str]| -> Vec<LinkPort> {
        ns.open(names).expect("opening ports").into_iter().map(|p| p.expect("a port")).collect()
    };
    let [a0, a1, b1, b0]: [LinkPort; 4] =
        open(&["a0", "a1", "b1", "b0"]).try_into().expect("four ports");
    let (a0, a1, b1, b0) = (link(a0), link(a1), link(b1), link(b0));
    let bare = [latencies(&a0, &a1), latencies(&b1, &b0)];
    drop((a1, b1));
    let [a1, b1]: [LinkPort; 2] = open(&["a1", "b1"]).try_into().expect("two ports");
    measure("two veth pairs", ([Port::Link(a1), Port::Link(b1)], Ports::default()), a0, b0, &bare);
    drop(ns);

    // Two taps: the bench holds their descriptors, as qemu does in the lab.
    let tap = |pattern: &str| Tap::create(pattern).expect("a tap (needs /dev/net/tun)");
    let (ta, tb) = (tap("rbencha%d"), tap("rbenchb%d"));
    let port = |t: &Tap| LinkPort::open(&t.name).expect("a port on the tap");
    let (pa, pb) = (port(&ta), port(&tb));
    let (a, b) = (End::tap(ta), End::tap(tb));
    let (pa, pb) = (link(pa), link(pb));
    let bare = [latencies(&a, &pa), latencies(&pb, &b)];
    let (End::Port(pa), End::Port(pb)) = (pa, pb) else { unreachable!("opened as links above") };
    measure("two taps", ([pa, pb], Ports::default()), a, b, &bare);

    // The lab's own wire, for comparison: UDP sockets on 127.0.0.1, a VM's
    // qemu at each far end (here the bench). The bare hops: the same sockets
    // of a second wire, straight to each other.
    let udp = |s: std::net::UdpSocket| {
        s.set_nonblocking(true).expect("a non-blocking socket");
        End::Port(Port::Udp(s))
    };
    let spare = Wire::new().expect("a UDP wire");
    let bare = [
        latencies(&udp(spare.vm_a), &udp(spare.switch_a)),
        latencies(&udp(spare.switch_b), &udp(spare.vm_b)),
    ];
    let w = Wire::new().expect("a UDP wire");
    let ports = w.ports();
    let (a, b) = (udp(w.vm_a), udp(w.vm_b));
    let sw = [Port::Udp(w.switch_a), Port::Udp(w.switch_b)];
    measure("the lab's UDP wire (two socket pairs on 127.0.0.1)", (sw, ports), a, b, &bare);
}
