//! What a run will take, before it starts: the disk its captures fill, the memory
//! judging them holds, and the memory each lab VM registers, estimated from the
//! scenarios' streams and MRs and held against what there is. A run past a budget
//! is refused before anything is sent, saying which scenario asks for what.
//!
//! Owns: the estimates ([`Estimate`]), what this host has ([`Budget`]) and the check.
//! Imports: the scenario model, the judge's [`Packet`] (its size per frame), the lab's
//! VM memory (`lab::vm`), `statvfs` through nix.
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::judge::Packet;
use crate::scenario::model::{Scenario, Step, StreamStep};

/// Bytes a RoCEv2 request frame adds to its payload: Ethernet 14, IPv4 20, UDP 8,
/// BTH 12, RETH 16 (the most a stream's requests carry), ICRC 4.
const REQUEST_HEADERS: u64 = 74;
/// An Acknowledge frame: the headers, an AETH (4) and the ICRC (an ATOMIC
/// Acknowledge's 8 more are within the pcapng block's padding).
const ACK_FRAME: u64 = 62;
/// pcapng's Enhanced Packet Block around each frame, padding and the switch's
/// comment on a marked one included.
const PCAPNG_BLOCK: u64 = 48;
/// What one scenario's setup and exchange put on the wire beyond its streams.
const SCENARIO_BASE: u64 = 64 * 1024;
/// Disk left free after the captures, for other processes: this much, or a
/// tenth of what is free on a small file system (a VM's tmpfs).
const DISK_RESERVE: u64 = 256 * 1024 * 1024;

fn reserve(free: u64) -> u64 {
    DISK_RESERVE.min(free / 10)
}
/// Memory the decoded timeline holds per RoCE frame beyond the packet itself.
const PER_FRAME_EXTRA: u64 = 16;

/// What one scenario's wire is expected to take.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Estimate {
    pub frames: u64,
    pub capture_bytes: u64,
}

/// The frames a stream puts on the wire when nothing is lost: its requests (a
/// message of `len` bytes is `ceil(len / mtu)` packets; a READ is one request and
/// that many response packets) and one acknowledgement per message at most.
fn stream(st: &StreamStep, mtu: u32) -> Estimate {
    let mtu = u64::from(mtu.max(256));
    let (mut frames, mut bytes) = (0u64, 0u64);
    for (_, _, len) in st.order.content.layout() {
        let len = u64::from(len);
        // A READ's data comes back in the responses, its request being the
        // one frame more; every other verb's in its requests, with an ACK.
        let packets = len.div_ceil(mtu).max(1);
        frames += packets + 1;
        bytes += len + packets * (REQUEST_HEADERS + PCAPNG_BLOCK) + ACK_FRAME + PCAPNG_BLOCK;
    }
    Estimate { frames, capture_bytes: bytes }
}

/// The scenario's wire, estimated from its streams.
pub(crate) fn estimate(sc: &Scenario) -> Estimate {
    let mut e = Estimate { frames: 0, capture_bytes: SCENARIO_BASE };
    for s in &sc.steps {
        if let Step::Stream(st) = s {
            let mtu = st
                .order
                .qps
                .first()
                .and_then(|q| sc.qps.iter().find(|x| &x.name == q))
                .map_or(1024, |q| q.params.mtu);
            let one = stream(st, mtu);
            e.frames += one.frames;
            e.capture_bytes += one.capture_bytes;
        }
    }
    e
}

/// `3.2 GB`, `850 MB`.
fn size(b: u64) -> String {
    if b >= 1_000_000_000 {
        format!("{:.1} GB", b as f64 / 1e9)
    } else {
        format!("{} MB", b.div_ceil(1_000_000))
    }
}

/// Free bytes on the file system that holds `dir` (or would, once created).
fn free_disk(dir: &Path) -> Option<u64> {
    let mut at: PathBuf = dir.to_path_buf();
    while !at.exists() {
        at = at
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    }
    let s = nix::sys::statvfs::statvfs(&at).ok()?;
    Some(s.blocks_available() as u64 * s.fragment_size() as u64)
}

/// `MemAvailable` of /proc/meminfo.
fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kb| kb * 1024)
}

/// The budgets a run is held to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    /// Free disk where the captures go.
    pub disk: Option<u64>,
    /// Memory the controller may use for decoded timelines (half of what is
    /// available: the renderers and the lab need the rest).
    pub memory: Option<u64>,
    /// Memory of each endpoint, when the endpoints are the lab's VMs.
    pub vm_memory: Option<u64>,
}

impl Budget {
    /// This machine's, for captures under `out_dir`; `lab`: the endpoints are the
    /// lab's VMs.
    pub(crate) fn here(out_dir: &Path, lab: bool) -> Budget {
        Budget {
            disk: free_disk(out_dir),
            memory: available_memory().map(|m| m / 2),
            vm_memory: lab.then(|| u64::from(lab::vm::MEMORY_MB) * 1024 * 1024),
        }
    }
}

/// Refuses a run that would not fit: its captures on the disk, their decoded
/// timelines in memory (a run keeps each scenario's for its reports), or one
/// endpoint's MRs in its lab VM (which also holds its kernel and the agent).
pub(crate) fn check(scenarios: &[(PathBuf, Scenario)], out_dir: &Path, b: Budget) -> Result<()> {
    let estimates: Vec<(&PathBuf, Estimate)> =
        scenarios.iter().map(|(f, sc)| (f, estimate(sc))).collect();
    let biggest = estimates.iter().max_by_key(|(_, e)| e.capture_bytes);
    let named = |what: &str| match biggest {
        Some((f, e)) if estimates.len() > 1 => format!(
            "; the most {what}: {} ({} frames, {})",
            f.display(),
            e.frames,
            size(e.capture_bytes)
        ),
        _ => String::new(),
    };
    let disk: u64 = estimates.iter().map(|(_, e)| e.capture_bytes).sum();
    if let Some(free) = b.disk {
        if disk > free.saturating_sub(reserve(free)) {
            bail!(
                "this run's captures would take about {} under {}, which has {} free (less {} kept free){}; nothing was run\nhint: --out on a disk with room, or fewer or shorter messages",
                size(disk),
                out_dir.display(),
                size(free),
                size(reserve(free)),
                named("of them")
            );
        }
    }
    let frames: u64 = estimates.iter().map(|(_, e)| e.frames).sum();
    let memory = frames * (std::mem::size_of::<Packet>() as u64 + PER_FRAME_EXTRA);
    if let Some(m) = b.memory {
        if memory > m {
            bail!(
                "judging this run would hold about {} frames decoded, {} of memory, and half of what is available is {}{}; nothing was run\nhint: run its scenarios one `roce run` at a time, or fewer messages",
                frames,
                size(memory),
                size(m),
                named("frames")
            );
        }
    }
    if let Some(vm) = b.vm_memory {
        // The guest's kernel, rdma-core and the agent take about a quarter.
        let room = vm / 4 * 3;
        for (f, sc) in scenarios {
            let mut per: std::collections::BTreeMap<&str, u64> = Default::default();
            for m in &sc.mrs {
                *per.entry(&m.on).or_default() += m.size;
            }
            if let Some((on, bytes)) = per.into_iter().find(|(_, b)| *b > room) {
                let mib = |b: u64| b.div_ceil(1 << 20);
                bail!(
                    "{}: endpoint {on} registers {} MiB of MRs, and a lab VM has {} MiB of memory ({} MiB of it for MRs); nothing was run\nhint: smaller MRs (a stream's memory check reads only what it wrote), or endpoints on real hosts (--endpoints)",
                    f.display(),
                    mib(bytes),
                    mib(vm),
                    mib(room)
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A WRITE stream round a 64 KiB ring, and `big` more MRs of 64 MB on a.
    fn scenario(count: u64, size: u32, verb: &str, big: usize) -> Scenario {
        let mut text = format!(
            "name = 'x'\n[endpoints.a]\n[endpoints.b]\n[[qp]]\nname = 'q'\ntype = 'rc'\nbetween = ['b', 'a']\nmtu = 1024\n\
             [[mr]]\nname = 'src'\non = 'a'\nsize = 65536\naccess = ['local_write', 'remote_read']\n[[mr]]\nname = 'dst'\non = 'b'\nsize = 65536\naccess = ['local_write', 'remote_write', 'remote_read']\n\
             [[step]]\nop = 'stream'\nid = 'w'\non = 'a'\nqp = 'q'\nverb = '{verb}'\ncount = {count}\nsize = {size}\nseed = 1\nlocal = {{ mr = 'src' }}\nremote = {{ mr = 'dst' }}\n"
        );
        if verb == "write" {
            text += "ring = 65536\n";
        }
        for k in 0..big {
            text += &format!(
                "[[mr]]\nname = 'big{k}'\non = 'a'\nsize = 64000000\naccess = ['local_write']\n"
            );
        }
        crate::scenario::check::parse_str(Path::new("t.toml"), &text)
            .unwrap_or_else(|e| panic!("{}", e[0]))
    }

    /// 100,000 WRITEs of 2,000 bytes at a 1,024 MTU: two packets and an ACK each,
    /// however small the ring they go round.
    #[test]
    fn a_streams_wire_is_estimated_from_its_messages() {
        let e = estimate(&scenario(100_000, 2000, "write", 0));
        assert_eq!(e.frames, 300_000);
        assert_eq!(
            e.capture_bytes,
            SCENARIO_BASE
                + 100_000
                    * (2000 + 2 * (REQUEST_HEADERS + PCAPNG_BLOCK) + ACK_FRAME + PCAPNG_BLOCK)
        );
        assert_eq!(
            estimate(&scenario(10, 64, "read", 0)).frames,
            20,
            "a READ of one packet: its request and its response"
        );
    }

    /// Each budget refuses with what and where; a run that fits passes.
    #[test]
    fn runs_past_a_budget_are_refused_before_they_start() {
        let runs =
            vec![(PathBuf::from("scenarios/load/big.toml"), scenario(100_000, 2000, "write", 0))];
        let out = Path::new("/nonexistent/roce-runs/1");
        let room = Budget {
            disk: Some(10_000_000_000),
            memory: Some(10_000_000_000),
            vm_memory: Some(512 * 1024 * 1024),
        };
        check(&runs, out, room).unwrap();
        let e =
            check(&runs, out, Budget { disk: Some(250_000_000), ..room }).unwrap_err().to_string();
        assert!(e.starts_with("this run's captures would take about 236 MB under /nonexistent/roce-runs/1, which has 250 MB free (less 25 MB kept free)"), "{e}");
        assert!(e.contains("hint: --out on a disk with room"), "{e}");
        let e =
            check(&runs, out, Budget { memory: Some(1_000_000), ..room }).unwrap_err().to_string();
        assert!(e.starts_with("judging this run would hold about 300000 frames decoded"), "{e}");
        let heavy = vec![(PathBuf::from("scenarios/heavy.toml"), scenario(10, 64, "write", 7))];
        let e = check(&heavy, out, room).unwrap_err().to_string();
        assert!(e.starts_with("scenarios/heavy.toml: endpoint a registers 428 MiB of MRs, and a lab VM has 512 MiB of memory (384 MiB of it for MRs)"), "{e}");
        check(&heavy, out, Budget { vm_memory: None, ..room }).unwrap();
        // A small file system (a VM's 240 MB tmpfs) keeps a tenth free, not 256 MB:
        // a megabyte of captures fits.
        let small = vec![(PathBuf::from("scenarios/rc_read.toml"), scenario(10, 64, "write", 0))];
        check(&small, out, Budget { disk: Some(240_000_000), ..room }).unwrap();
        let e =
            check(&runs, out, Budget { disk: Some(240_000_000), ..room }).unwrap_err().to_string();
        assert!(e.contains("which has 240 MB free (less 24 MB kept free)"), "{e}");
        check(&runs, out, Budget { disk: None, memory: None, vm_memory: None }).unwrap();
    }

    #[test]
    fn the_reserve_is_256_mib_or_a_tenth() {
        assert_eq!((reserve(240_000_000), reserve(10_000_000_000)), (24_000_000, DISK_RESERVE));
    }

    #[test]
    fn free_disk_reads_the_nearest_existing_directory() {
        assert!(free_disk(Path::new("/nonexistent/a/b")).is_some_and(|b| b > 0));
        assert!(free_disk(Path::new("relative/not/there")).is_some());
    }
}
