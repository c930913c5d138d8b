//! A device port's counters, read from sysfs before and after a scenario: every
//! file of `/sys/class/infiniband/DEV/ports/N/hw_counters` (the driver's own
//! counters: rxe's `sent_pkts`, mlx5's `out_of_sequence`, …) and of
//! `…/counters` (the port counters some drivers have), by file name. Nothing is
//! interpreted here; the judge's table gives the names meanings.
//!
//! Owns: [`read`], [`read_settled`], [`driver`], [`deltas`]. Imports: the
//! protocol's [`CounterDeltas`].
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::protocol::CounterDeltas;

/// Where the kernel shows RDMA devices.
const SYSFS: &str = "/sys/class/infiniband";

/// The most counter files read from one directory: drivers have tens of them.
const MAX_FILES: usize = 512;

/// Not counters: `hw_counters/lifespan` is how long the kernel caches them (ms).
const NOT_COUNTERS: [&str; 1] = ["lifespan"];

/// The counters of `device`'s port `port` now, by name (empty when it has none,
/// or the device name is not one sysfs could hold).
pub(super) fn read(device: &str, port: u8) -> BTreeMap<String, u64> {
    read_under(Path::new(SYSFS), device, port)
}

/// The least time a device's counters must hold still before a baseline is
/// taken from them.
const QUIET: Duration = Duration::from_millis(30);

/// The longest a baseline waits for the counters to hold still (a busy shared
/// device may never): then it is taken as they are.
const SETTLE_WITHIN: Duration = Duration::from_millis(600);

/// The longest cache lifespan believed: the file says milliseconds, and a wait
/// longer than this is not one a baseline makes.
const MAX_LIFESPAN_MS: u64 = 200;

/// The counters of `device`'s port `port` once they hold still: read, then read
/// again after a quiet gap until two reads agree. Two things make a single read
/// the wrong baseline. A frame the wire carried to the device before the
/// scenario began (the last scenario's rdma_cm DREP, say) may be counted a few
/// milliseconds later, under this scenario's count and in no recording of it;
/// and the kernel serves `hw_counters` from a cache `lifespan` milliseconds old
/// (10 ms, which a 250 Hz kernel such as the lab's shows as 12), so a read right
/// after another's (the last scenario's teardown) is
/// that read again. The gap is longer than the cache's lifespan, so the second
/// read is the device's own. `earlier`: a read already made, and when (the
/// setup's): the first of the two, so the gap may have gone by already.
pub(super) fn read_settled(
    device: &str,
    port: u8,
    earlier: Option<(BTreeMap<String, u64>, Instant)>,
) -> BTreeMap<String, u64> {
    let lifespan = lifespan_under(Path::new(SYSFS), device, port);
    let gap = QUIET.max(lifespan * 2);
    let earlier = earlier.map(|(read, at)| (read, at.elapsed()));
    settle(earlier, || read(device, port), gap, SETTLE_WITHIN, std::thread::sleep)
}

/// Reads (with `read`) until two reads `gap` apart agree, or `within` has gone
/// by: the last read. The first is `earlier`'s (a read, and how long ago it
/// was made) when given.
fn settle<R, S>(
    earlier: Option<(BTreeMap<String, u64>, Duration)>,
    mut read: R,
    gap: Duration,
    within: Duration,
    mut sleep: S,
) -> BTreeMap<String, u64>
where
    R: FnMut() -> BTreeMap<String, u64>,
    S: FnMut(Duration),
{
    let until = Instant::now() + within;
    let (mut last, mut ago) = earlier.unwrap_or_else(|| (read(), Duration::ZERO));
    // A device without counters has nothing to settle.
    if last.is_empty() {
        return last;
    }
    loop {
        sleep(gap.saturating_sub(std::mem::take(&mut ago)));
        let now = read();
        if now == last || Instant::now() >= until {
            return now;
        }
        last = now;
    }
}

/// How long the kernel caches `device`'s port counters (`hw_counters/lifespan`,
/// milliseconds; none said: none).
fn lifespan_under(root: &Path, device: &str, port: u8) -> Duration {
    let Some(dir) = port_dir(root, device, port) else { return Duration::ZERO };
    let file = dir.join("hw_counters/lifespan");
    let ms = std::fs::read_to_string(file).ok().and_then(|t| t.trim().parse::<u64>().ok());
    Duration::from_millis(ms.unwrap_or(0).min(MAX_LIFESPAN_MS))
}

/// A name sysfs could hold for a device: one path component, not `.` or `..`.
fn device_name(device: &str) -> bool {
    !device.is_empty() && !device.contains(['/', '\0']) && !device.starts_with('.')
}

/// `device`'s port `port` under `root`, when the name is one sysfs could hold.
fn port_dir(root: &Path, device: &str, port: u8) -> Option<PathBuf> {
    device_name(device).then(|| root.join(device).join("ports").join(port.to_string()))
}

fn read_under(root: &Path, device: &str, port: u8) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let Some(port_dir) = port_dir(root, device, port) else { return out };
    // The driver's own counters first: a port counter of the same name is the
    // same count, where a driver has both.
    for dir in ["hw_counters", "counters"] {
        let Ok(entries) = std::fs::read_dir(port_dir.join(dir)) else { continue };
        for e in entries.flatten().take(MAX_FILES) {
            let name = e.file_name().to_string_lossy().into_owned();
            if NOT_COUNTERS.contains(&name.as_str()) || out.contains_key(&name) {
                continue;
            }
            // A counter is one decimal number; anything else (a directory, an
            // unreadable file) is not one.
            let value =
                std::fs::read_to_string(e.path()).ok().and_then(|t| t.trim().parse::<u64>().ok());
            if let Some(v) = value {
                out.insert(name, v);
            }
        }
    }
    out
}

/// What drives `device`: its PCI device's driver (`mlx5_core`, `bnxt_en`), or
/// `rdma_rxe` for a Soft-RoCE device (no PCI device; a `parent` netdev).
pub(super) fn driver(device: &str) -> Option<String> {
    driver_under(Path::new(SYSFS), device)
}

fn driver_under(root: &Path, device: &str) -> Option<String> {
    if !device_name(device) {
        return None;
    }
    let dev = root.join(device);
    if let Ok(link) = std::fs::read_link(dev.join("device/driver")) {
        return link.file_name().map(|n| n.to_string_lossy().into_owned());
    }
    let soft = dev.join("parent").exists() && device.starts_with("rxe");
    soft.then(|| "rdma_rxe".to_string())
}

/// What each counter of `device` (driven by `driver`) moved by from `before`
/// to `after`; one that went backwards (the device was reset) is said to have,
/// not given a delta. A counter in only one of them is left out.
pub(super) fn deltas(
    (device, driver, port): (&str, Option<String>, u8),
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> CounterDeltas {
    let mut d = CounterDeltas {
        device: device.to_string(),
        driver,
        port,
        deltas: BTreeMap::new(),
        reset: Vec::new(),
    };
    for (name, &b) in before {
        match after.get(name).map(|&a| a.checked_sub(b)) {
            Some(Some(delta)) => {
                d.deltas.insert(name.clone(), delta);
            }
            Some(None) => d.reset.push(name.clone()),
            None => {}
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn reads_both_directories_by_file_name_and_skips_what_is_not_a_count() {
        let root = std::env::temp_dir().join(format!("roce-counters-{}", std::process::id()));
        let port = root.join("rxe0/ports/1");
        write(&port.join("hw_counters/sent_pkts"), "357827\n");
        write(&port.join("hw_counters/rcvd_pkts"), "12");
        write(&port.join("hw_counters/lifespan"), "10\n");
        write(&port.join("hw_counters/odd"), "N/A\n");
        write(&port.join("counters/port_xmit_packets"), "7\n");
        write(&port.join("counters/sent_pkts"), "1\n");
        std::fs::create_dir_all(port.join("hw_counters/a_directory")).unwrap();
        let c = read_under(&root, "rxe0", 1);
        let want: BTreeMap<String, u64> = [
            ("port_xmit_packets".to_string(), 7),
            ("rcvd_pkts".to_string(), 12),
            ("sent_pkts".to_string(), 357827),
        ]
        .into();
        assert_eq!(c, want, "the driver's own count wins a name both have");
        assert!(read_under(&root, "rxe0", 2).is_empty(), "no such port");
        assert!(read_under(&root, "../rxe0", 1).is_empty(), "not a device name");
        assert!(read_under(&root, "rxe0/ports", 1).is_empty(), "not a device name");
        assert_eq!(driver_under(&root, "rxe0"), None, "no parent: not known as Soft-RoCE");
        write(&root.join("rxe0/parent"), "eth1\n");
        assert_eq!(driver_under(&root, "rxe0").as_deref(), Some("rdma_rxe"));
        std::fs::create_dir_all(root.join("pci/drivers/mlx5_core")).unwrap();
        std::fs::create_dir_all(root.join("mlx5_0/device")).unwrap();
        std::os::unix::fs::symlink(
            root.join("pci/drivers/mlx5_core"),
            root.join("mlx5_0/device/driver"),
        )
        .unwrap();
        assert_eq!(driver_under(&root, "mlx5_0").as_deref(), Some("mlx5_core"));
        assert_eq!(driver_under(&root, "../mlx5_0"), None);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_baseline_waits_for_two_reads_a_gap_apart_that_agree() {
        let m = |n: u64| -> BTreeMap<String, u64> { [("rcvd_pkts".to_string(), n)].into() };
        // A late frame counted between the first and second read: a third read
        // settles it.
        let mut reads = vec![m(5), m(6), m(6), m(7)].into_iter();
        let mut slept = Vec::new();
        let gap = Duration::from_millis(30);
        let got =
            settle(None, || reads.next().unwrap(), gap, Duration::from_secs(60), |d| slept.push(d));
        assert_eq!(got, m(6));
        assert_eq!(slept, vec![gap, gap], "read three times, a gap apart");
        // Still moving when the time is up: the last read, not a wait forever.
        let mut n = 0;
        let got = settle(
            None,
            || {
                n += 1;
                m(n)
            },
            Duration::ZERO,
            Duration::ZERO,
            |_| {},
        );
        assert_eq!(got, m(2));
        // No counters: nothing to wait for.
        let mut calls = 0;
        let got = settle(
            None,
            || {
                calls += 1;
                BTreeMap::new()
            },
            gap,
            Duration::from_secs(60),
            |_| panic!("slept for a device without counters"),
        );
        assert!(got.is_empty());
        assert_eq!(calls, 1);
        // An earlier read counts as the first: only what is left of the gap is
        // waited, and none once it has gone by; one that moved since, a gap more.
        let ms = Duration::from_millis;
        let from = |earlier, reads: Vec<BTreeMap<String, u64>>| {
            let mut reads = reads.into_iter();
            let mut slept = Vec::new();
            let got =
                settle(Some(earlier), || reads.next().unwrap(), gap, ms(60_000), |d| slept.push(d));
            (got, slept)
        };
        assert_eq!(from((m(6), ms(12)), vec![m(6)]), (m(6), vec![ms(18)]));
        assert_eq!(from((m(6), gap * 2), vec![m(6)]), (m(6), vec![Duration::ZERO]));
        let (got, slept) = from((m(6), gap * 2), vec![m(7), m(7)]);
        assert_eq!((got, slept), (m(7), vec![Duration::ZERO, gap]));
    }

    #[test]
    fn the_cache_lifespan_is_read_and_bounded() {
        let root = std::env::temp_dir().join(format!("roce-lifespan-{}", std::process::id()));
        let hw = root.join("rxe0/ports/1/hw_counters");
        write(&hw.join("lifespan"), "10\n");
        assert_eq!(lifespan_under(&root, "rxe0", 1), Duration::from_millis(10));
        write(&hw.join("lifespan"), "99999999\n");
        assert_eq!(lifespan_under(&root, "rxe0", 1), Duration::from_millis(MAX_LIFESPAN_MS));
        write(&hw.join("lifespan"), "soon\n");
        assert_eq!(lifespan_under(&root, "rxe0", 1), Duration::ZERO);
        assert_eq!(lifespan_under(&root, "rxe0", 2), Duration::ZERO, "no such port");
        assert_eq!(lifespan_under(&root, "../rxe0", 1), Duration::ZERO);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn deltas_say_what_moved_and_what_went_backwards() {
        let m = |v: &[(&str, u64)]| -> BTreeMap<String, u64> {
            v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
        };
        let d = deltas(
            ("rxe0", Some("rdma_rxe".into()), 1),
            &m(&[("sent_pkts", 10), ("rcvd_pkts", 5), ("send_rnr_err", 3), ("gone", 1)]),
            &m(&[("sent_pkts", 17), ("rcvd_pkts", 5), ("send_rnr_err", 0), ("new", 4)]),
        );
        assert_eq!(d.deltas, m(&[("rcvd_pkts", 0), ("sent_pkts", 7)]));
        assert_eq!(d.reset, vec!["send_rnr_err".to_string()]);
        assert_eq!((d.device.as_str(), d.driver.as_deref(), d.port), ("rxe0", Some("rdma_rxe"), 1));
    }
}
