//! The bridge's speed on two interfaces: the switch between two veth pairs in a
//! namespace of its own (as `roce bridge` between two NIC ports), recording on.
//! Prints figures; asserts nothing (`cargo bench -p lab --bench bridge`, as
//! root).
//!
//! - **Throughput**: a host end blasts RoCE WRITE Only frames (`FRAME` bytes on
//!   the wire) as fast as it can; the other host end counts what arrives. The
//!   rate is what crossed per second, with what the kernel dropped before the
//!   switch read it.
//! - **Latency**: frames paced one per 200 µs, each stamped; the time from the
//!   send on `a0` to the receive on `b0` through the switch, against the same
//!   over one bare veth hop (`a0` to `a1`, no switch). The switch's path has two
//!   hops; what it adds is the difference.
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dissector::craft::{build, Encap, Host, Transport};
use dissector::wire::ethernet::Mac;
use dissector::wire::{BthRepr, Opcode, Psn};
use lab::record::{PcapngRecorder, Recorder};
use lab::switch::veth::Netns;
use lab::switch::{Burst, LinkPort, Port, Ports, RunSpec, Switch};

const FRAMES: u64 = 400_000;
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

/// Waits up to `ms` for a frame on `p`.
fn wait_readable(p: &impl AsFd, ms: u16) -> bool {
    use nix::poll::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(p.as_fd(), PollFlags::POLLIN)];
    poll(&mut fds, ms).unwrap_or(0) > 0
}

/// One-way times (µs) of `SAMPLES` paced frames from `tx` to `rx`.
fn latencies(tx: &LinkPort, rx: &LinkPort) -> Vec<f64> {
    let start = Instant::now();
    let mut sent = vec![Duration::ZERO; SAMPLES];
    let mut got = Vec::with_capacity(SAMPLES);
    let mut buf = vec![0u8; 2048];
    for (i, at) in sent.iter_mut().enumerate() {
        let f = frame(i as u64);
        *at = start.elapsed();
        let _ = tx.send(&f);
        let until = Instant::now() + Duration::from_micros(200);
        while Instant::now() < until {
            while let Ok(n) = rx.recv(&mut buf) {
                if let Some(s) = seq_of(&buf[..n]).filter(|s| (*s as usize) < SAMPLES) {
                    got.push((s as usize, start.elapsed()));
                }
            }
        }
    }
    while wait_readable(rx, 50) {
        while let Ok(n) = rx.recv(&mut buf) {
            if let Some(s) = seq_of(&buf[..n]).filter(|s| (*s as usize) < SAMPLES) {
                got.push((s as usize, start.elapsed()));
            }
        }
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

fn main() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("bridge bench: needs root (a network namespace, raw sockets); nothing measured");
        std::process::exit(2);
    }
    let ns = Netns::new("bench").expect("the bench's namespace");
    let open = |names: &[&'static str]| -> Vec<LinkPort> {
        ns.open(names).expect("opening ports").into_iter().map(|p| p.expect("a port")).collect()
    };
    // One bare veth hop first: a0 to a1, nothing between.
    let mut bare = open(&["a0", "a1"]).into_iter();
    let (a0, a1) = (bare.next().unwrap(), bare.next().unwrap());
    let hop = latencies(&a0, &a1);
    drop((a0, a1));

    let mut ports = open(&["a1", "b1", "a0", "b0"]).into_iter();
    let (a1, b1, a0, b0) = (
        ports.next().unwrap(),
        ports.next().unwrap(),
        ports.next().unwrap(),
        ports.next().unwrap(),
    );
    let switch = Switch::spawn_on([Port::Link(a1), Port::Link(b1)], Ports::default()).unwrap();
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
    let through = latencies(&a0, &b0);
    switch.end(run).unwrap();

    // Throughput (recording): blast from a0, count at b0.
    let run = begin(&switch);
    let done = Arc::new(AtomicBool::new(false));
    // The sender and the counter read and write in batches, as the switch
    // does: on two cores they share with it, the less they take the more the
    // figure is the switch's.
    let b0 = Port::Link(b0);
    let counter = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut burst = Burst::new();
            let (mut n, mut first, mut last) = (0u64, None, Instant::now());
            loop {
                if !wait_readable(&b0, 500) {
                    if done.load(Ordering::SeqCst) {
                        break;
                    }
                    continue;
                }
                while let Ok(k) = b0.recv_burst(&mut burst) {
                    n += k as u64;
                    last = Instant::now();
                    first.get_or_insert(last);
                }
            }
            (n, first.map(|f| last.duration_since(f)).unwrap_or_default())
        })
    };
    let a0 = Port::Link(a0);
    let f = frame(u64::MAX);
    let batch = vec![f.as_slice(); 32];
    let cpu_before = switch_cpu();
    let t = Instant::now();
    let mut sent = 0u64;
    while sent < FRAMES {
        let want = usize::try_from(FRAMES - sent).unwrap_or(usize::MAX).min(batch.len());
        if let Ok(n) = a0.send_batch(&batch[..want]) {
            sent += n as u64;
        }
    }
    let send_time = t.elapsed();
    done.store(true, Ordering::SeqCst);
    let (received, span) = counter.join().unwrap();
    let cpu = switch_cpu().zip(cpu_before).map(|(after, before)| after - before);
    let rep = switch.end(run).unwrap();
    let _ = std::fs::remove_file(&cap);

    let fps = |n: u64, d: Duration| n as f64 / d.as_secs_f64().max(1e-9);
    println!(
        "bridge bench: the switch between two veth pairs, recording to pcapng ({} bytes a frame)",
        f.len()
    );
    println!(
        "  throughput: {sent} frames sent in {:.2} s ({:.0}/s offered); {received} arrived, {:.0} frames/s; switch forwarded {}, kernel drops before the switch {}, recorded {}",
        send_time.as_secs_f64(),
        fps(sent, send_time),
        fps(received, span),
        rep.counters.forwarded,
        rep.socket_drops,
        rep.counters.recorded
    );
    if let Some(cpu) = cpu {
        println!(
            "  the switch thread's CPU time meanwhile: {cpu:.2} s: {:.0} frames per CPU-second (what one core of its own would carry)",
            rep.counters.forwarded as f64 / cpu.max(1e-9)
        );
    }
    println!(
        "  one bare veth hop: median {:.1} µs, p99 {:.1} µs ({} samples)",
        pct(&hop, 0.5),
        pct(&hop, 0.99),
        hop.len()
    );
    println!(
        "  through the switch (two hops): median {:.1} µs, p99 {:.1} µs ({} samples)",
        pct(&through, 0.5),
        pct(&through, 0.99),
        through.len()
    );
    println!(
        "  added by the switch: median {:.1} µs, p99 {:.1} µs",
        pct(&through, 0.5) - 2.0 * pct(&hop, 0.5),
        pct(&through, 0.99) - 2.0 * pct(&hop, 0.99)
    );
}
