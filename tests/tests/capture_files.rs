//! Capture-file interop with tshark: files from our writers must open in tshark, and
//! our reader must report what tshark reports (frame number, interface, timestamp,
//! lengths) for our files and for files written by Wireshark's editcap.
//!
//! tshark (and editcap, from the same package) must be installed; these tests fail,
//! not skip, without them.

use std::path::{Path, PathBuf};
use std::process::Command;

use dissector::capture::{self, create_atomically, Direction, OutPacket, PcapWriter, PcapngWriter};
use dissector::LinkType;

/// A scratch directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p =
            std::env::temp_dir().join(format!("roce-capture-files-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs a Wireshark tool, failing clearly if it is not installed.
fn run(tool: &str, args: &[&str]) -> std::process::Output {
    match Command::new(tool).args(args).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "`{tool}` is not installed or not on PATH; these interop tests need it \
             (Debian/Ubuntu: apt-get install tshark)"
        ),
        Err(e) => panic!("cannot run {tool}: {e}"),
    }
}

/// One frame as (number, interface id, timestamp in ns, wire length, captured length).
type Row = (u64, u32, u64, u32, u32);

/// `frame.time_epoch` ("1700000000.123456789") as nanoseconds.
fn epoch_ns(s: &str) -> u64 {
    let (sec, frac) = s.split_once('.').unwrap_or((s, ""));
    let mut frac = frac.to_string();
    assert!(frac.len() <= 9, "more than ns precision: {s}");
    while frac.len() < 9 {
        frac.push('0');
    }
    sec.parse::<u64>().expect("seconds") * 1_000_000_000 + frac.parse::<u64>().expect("fraction")
}

fn tshark_rows(path: &Path) -> Vec<Row> {
    let p = path.to_str().expect("utf-8 path");
    let out = run(
        "tshark",
        &[
            "-r",
            p,
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "frame.interface_id",
            "-e",
            "frame.time_epoch",
            "-e",
            "frame.len",
            "-e",
            "frame.cap_len",
        ],
    );
    assert!(out.status.success(), "tshark rejected {p}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .expect("tshark output is UTF-8")
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 5, "unexpected tshark line {l:?}");
            (
                f[0].parse().expect("frame.number"),
                // pcap files have no interface id field.
                if f[1].is_empty() { 0 } else { f[1].parse().expect("frame.interface_id") },
                epoch_ns(f[2]),
                f[3].parse().expect("frame.len"),
                f[4].parse().expect("frame.cap_len"),
            )
        })
        .collect()
}

fn our_rows(path: &Path) -> (Vec<Row>, Option<capture::CaptureError>) {
    let mut r = capture::open(path).expect("open");
    let mut rows = vec![];
    loop {
        match r.next_packet() {
            Ok(Some(rec)) => rows.push((
                rec.number,
                rec.interface,
                rec.ts_ns,
                rec.orig_len,
                rec.data.len() as u32,
            )),
            Ok(None) => return (rows, None),
            Err(e) => return (rows, Some(e)),
        }
    }
}

fn assert_same_as_tshark(path: &Path) -> Vec<Row> {
    let (ours, err) = our_rows(path);
    if let Some(e) = err {
        panic!("our reader failed on {}: {e}", path.display());
    }
    let theirs = tshark_rows(path);
    assert_eq!(ours, theirs, "{}", path.display());
    ours
}

/// Deterministic pseudo-random bytes.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[test]
#[ignore = "needs tshark: bash scripts/setup.sh --test"]
fn our_pcapng_with_two_interfaces_matches_tshark() {
    let dir = TempDir::new("ng");
    let path = dir.path("two-interfaces.pcapng");
    let mut rng = Lcg(7);
    let mut w =
        PcapngWriter::new(create_atomically(&path).unwrap(), "roce capture_files test").unwrap();
    let eth = w.add_interface(LinkType::ETHERNET, 0, Some("eth0")).unwrap();
    let raw = w.add_interface(LinkType::RAW, 96, Some("raw0")).unwrap();
    let mut expect = vec![];
    let mut ts = 1_700_000_000_000_000_000u64;
    for i in 0..60u64 {
        ts += rng.next() % 5_000_000_000 + 1; // every ns digit varies
        let iface = match rng.next() % 3 {
            0 => raw,
            _ => eth,
        };
        let len = (rng.next() % 1500) as usize + if iface == eth { 14 } else { 20 };
        let mut data = rng.bytes(len);
        if iface == raw {
            data[0] = 0x45; // look like IPv4
        }
        let extra = if i % 7 == 0 { 100 } else { 0 };
        let comment = format!("frame {}", i + 1);
        w.write_packet(&OutPacket {
            interface: iface,
            ts_ns: ts,
            data: &data,
            orig_len: len as u32 + extra,
            direction: match i % 3 {
                0 => None,
                1 => Some(Direction::Inbound),
                _ => Some(Direction::Outbound),
            },
            comment: (i % 4 == 0).then_some(comment.as_str()),
        })
        .unwrap();
        let caplen = if iface == raw { len.min(96) } else { len } as u32;
        expect.push((i + 1, iface, ts, len as u32 + extra, caplen));
    }
    w.into_inner().unwrap().commit().unwrap();
    assert!(!dir.path("two-interfaces.pcapng.tmp").exists());

    let rows = assert_same_as_tshark(&path);
    assert_eq!(rows, expect);
    let mut r = capture::open(&path).unwrap();
    while r.next_packet().unwrap().is_some() {}
    let names: Vec<_> =
        r.interfaces().iter().map(|i| (i.link, i.name.clone(), i.tsresol)).collect();
    assert_eq!(
        names,
        [
            (LinkType::ETHERNET, Some("eth0".to_string()), 9),
            (LinkType::RAW, Some("raw0".to_string()), 9)
        ]
    );
}

#[test]
#[ignore = "needs tshark: bash scripts/setup.sh --test"]
fn our_nanosecond_pcap_matches_tshark_and_editcap_conversions_read_back() {
    let dir = TempDir::new("pcap");
    let path = dir.path("ns.pcap");
    let mut rng = Lcg(42);
    let mut w =
        PcapWriter::new(create_atomically(&path).unwrap(), LinkType::ETHERNET, 1024).unwrap();
    let mut ts = 1_600_000_000_000_000_000u64;
    let mut expect = vec![];
    for i in 0..40u64 {
        ts += rng.next() % 3_000_000_000 + 1;
        let len = (rng.next() % 1400) as usize + 60 + if i == 5 { 2000 } else { 0 };
        let data = rng.bytes(len);
        w.write_packet(ts, &data, len as u32).unwrap();
        expect.push((i + 1, 0, ts, len as u32, len.min(1024) as u32));
    }
    w.into_inner().unwrap().commit().unwrap();
    let rows = assert_same_as_tshark(&path);
    assert_eq!(rows, expect);

    // Files written by Wireshark's own writer: microsecond pcap and pcapng.
    let p = path.to_str().unwrap();
    for (fmt, name) in
        [("pcap", "us.pcap"), ("pcapng", "editcap.pcapng"), ("nsecpcap", "ns-again.pcap")]
    {
        let out_path = dir.path(name);
        let o = run("editcap", &["-F", fmt, p, out_path.to_str().unwrap()]);
        assert!(o.status.success(), "editcap -F {fmt}: {}", String::from_utf8_lossy(&o.stderr));
        let rows = assert_same_as_tshark(&out_path);
        assert_eq!(rows.len(), expect.len());
        if fmt == "pcap" {
            // Microseconds: the ns digits are cut.
            for (a, b) in rows.iter().zip(&expect) {
                assert_eq!(a.2, b.2 / 1000 * 1000);
            }
        } else {
            assert_eq!(rows, expect);
        }
    }
}

#[test]
#[ignore = "needs tshark: bash scripts/setup.sh --test"]
fn multi_section_pcapng_matches_tshark_except_interface_numbering() {
    let dir = TempDir::new("sections");
    let mut bytes = vec![];
    for (section, links) in [
        [LinkType::ETHERNET, LinkType::RAW].as_slice(),
        &[LinkType::LINUX_SLL, LinkType::ETHERNET, LinkType::RAW],
    ]
    .iter()
    .enumerate()
    {
        let mut w = PcapngWriter::new(Vec::new(), "sections").unwrap();
        for (i, l) in links.iter().enumerate() {
            w.add_interface(*l, 0, Some(&format!("s{section}if{i}"))).unwrap();
        }
        for i in 0..links.len() as u32 {
            let data = [0x45u8; 40];
            w.write_packet(&OutPacket::new(i, 1_700_000_000_000_000_000 + u64::from(i), &data))
                .unwrap();
        }
        bytes.extend(w.into_inner().unwrap());
    }
    let path = dir.path("sections.pcapng");
    std::fs::write(&path, &bytes).unwrap();
    let (ours, err) = our_rows(&path);
    assert!(err.is_none());
    let theirs = tshark_rows(&path);
    assert_eq!(ours.len(), 5);
    assert_eq!(theirs.len(), 5);
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!((a.0, a.2, a.3, a.4), (b.0, b.2, b.3, b.4));
    }
    // Ours count interfaces over the whole file (so they index `interfaces()`).
    let ids: Vec<u32> = ours.iter().map(|r| r.1).collect();
    assert_eq!(ids, [0, 1, 2, 3, 4]);
}

#[test]
#[ignore = "needs tshark: bash scripts/setup.sh --test"]
fn truncated_file_reads_the_same_complete_frames_as_tshark() {
    let dir = TempDir::new("trunc");
    let path = dir.path("cut.pcapng");
    let mut w = PcapngWriter::new(Vec::new(), "trunc").unwrap();
    w.add_interface(LinkType::ETHERNET, 0, None).unwrap();
    for i in 0..10u64 {
        w.write_packet(&OutPacket::new(0, 1_700_000_000_000_000_000 + i, &[i as u8; 100])).unwrap();
    }
    let mut bytes = w.into_inner().unwrap();
    bytes.truncate(bytes.len() - 50);
    std::fs::write(&path, &bytes).unwrap();
    let (ours, err) = our_rows(&path);
    let err = err.expect("a truncated file is an error");
    assert!(err.is_truncated(), "{err}");
    assert_eq!(err.complete_frames(), Some(9));
    assert!(err.to_string().starts_with(&format!("{}: byte ", path.display())), "{err}");
    assert!(err.to_string().contains("(frame 10)"), "{err}");
    assert_eq!(ours.len(), 9);
    // tshark prints the complete frames, then complains (and exits non-zero).
    let p = path.to_str().unwrap();
    let out = run("tshark", &["-r", p, "-T", "fields", "-e", "frame.number"]);
    let n = String::from_utf8_lossy(&out.stdout).lines().count();
    assert_eq!(n, 9, "tshark stderr: {}", String::from_utf8_lossy(&out.stderr));
}
