//! Differential tests against tshark 4.0 for display filters and the fields users
//! script against, through the dissector library (no CLI).
//!
//! Every capture under `captures/` is concatenated into one pcapng with `mergecap
//! -a` (so tshark starts once per filter, not once per filter and file); frame N of
//! that file is reported as the capture and frame it came from. For each filter,
//! the frames `dissector::filter` keeps must be the frames `tshark -Y FILTER` keeps.
//!
//! tshark runs with `--disable-protocol rpcordma` (PROTOCOL.md). Frames where
//! tshark 4.0 is wrong or decodes what we do not are left out of the comparison of
//! the filters (and fields) that look at what differs — each skip says why:
//!
//! - `UNDECODED`: RoCE frames whose opcode tshark 4.0 does not decode past the BTH
//!   (CNP 0x81, which it calls Unknown; XRC; FLUSH 0x1C; ATOMIC WRITE 0x1D;
//!   reserved and vendor opcodes), RD-range frames our `TransportHint::Auto` reads
//!   as RD (tshark reads every RD-range opcode as DC), and frames whose decoding
//!   stopped inside the transport headers or payload (tshark and we disagree on
//!   whether a half-present header exists). Skipped for filters on `infiniband.*`
//!   past the BTH, `data`, `frame.protocols` and our `roce.*` fields.
//!
//! `presence_filters_keep_what_tshark_keeps` tests every name a bare test accepts
//! that tshark knows too (its protocols, its whole-header names such as
//! `infiniband.reth`, and every field of tshark's we register), under the same
//! skips; `ieee_802_3_lengths_are_not_ethertypes` does the same for crafted IEEE
//! 802.3 frames, which no capture holds.
//!
//! - `PORT_DISSECTOR`: UDP datagrams to ports other than RoCE's, which tshark hands
//!   to its port dissectors (DNS on 53, …) where we say `data`. Skipped for `data`,
//!   `frame.protocols` and `_ws.col.Protocol`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use dissector::capture;
use dissector::ctx::{Ctx, Shown};
use dissector::fields::Header;
use dissector::fields::{self, Field};
use dissector::filter::{Filter, PROTOCOLS};
use dissector::frame::{self, Frame, Layer, Options};
use dissector::wire::Transport;

/// At least 40 filters, the issue's first. `kind` says which frames may be skipped.
const FILTERS: &[(&str, Skip)] = &[
    ("infiniband", Skip::None),
    ("infiniband.aeth.syndrome != 0", Skip::Undecoded),
    ("ip.dsfield.ecn == 3", Skip::None),
    ("infiniband.bth.opcode == 0x11 && infiniband.aeth.syndrome >= 0x60", Skip::Undecoded),
    ("ip.addr == 10.0.0.0/24", Skip::None),
    ("infiniband.bth.opcode in {4, 10, 0x11..0x13}", Skip::None),
    ("not infiniband", Skip::None),
    ("!(udp.port == 4791) && ip", Skip::None),
    (
        "(infiniband.bth.a == 1 || infiniband.bth.se == 1) && !(infiniband.bth.opcode == 4)",
        Skip::None,
    ),
    ("udp.port == 4791", Skip::None),
    ("eth.src == 02:00:00:00:00:01", Skip::None),
    ("eth.addr == 52:54:00:00:00:0a", Skip::None),
    ("eth.dst == 02-00-00-00-00-02", Skip::None),
    ("frame.protocols contains \"data\"", Skip::UndecodedAndPorts),
    ("frame.protocols matches \"IP:UDP:INFINIBAND$\"", Skip::UndecodedAndPorts),
    ("ip.addr != 10.0.0.1", Skip::None),
    ("ip.addr ~= 10.0.0.1", Skip::None),
    ("ip.addr === 10.0.0.1", Skip::None),
    ("ip.addr !== 10.0.0.2", Skip::None),
    ("ip.src == 10.0.0.2 and ip.dst == 10.0.0.1", Skip::None),
    ("ip.src < ip.dst", Skip::None),
    ("frame.cap_len < frame.len", Skip::None),
    ("ipv6", Skip::None),
    ("ipv6.addr == fd00::/64", Skip::None),
    ("vlan", Skip::None),
    ("vlan.id == 100", Skip::None),
    ("tcp", Skip::None),
    ("tcp.port == 18515", Skip::None),
    ("tcp.srcport > 30000 and not tcp.dstport in {18515}", Skip::None),
    ("tcp.port != 18515", Skip::None),
    ("arp or lldp", Skip::None),
    ("udp and not infiniband", Skip::None),
    ("data", Skip::UndecodedAndPorts),
    ("infiniband.bth.psn >= 100 && infiniband.bth.psn <= 0x2000", Skip::None),
    ("infiniband.bth.destqp == 0x12", Skip::None),
    ("infiniband.bth.destqp in {0x11, 0x12}", Skip::None),
    ("infiniband.bth.opcode >= 0x40 and infiniband.bth.opcode < 0x60", Skip::None),
    ("infiniband.reth.dmalen > 100", Skip::Undecoded),
    ("infiniband.reth.va", Skip::Undecoded),
    ("infiniband.deth.q_key == 0x80010000", Skip::Undecoded),
    ("infiniband.mad.mgmtclass == 0x07", Skip::Undecoded),
    ("infiniband.immdt", Skip::Undecoded),
    ("infiniband.aeth.syndrome in {0x20..0x3f}", Skip::Undecoded),
    ("infiniband.aeth.msn > 0 and infiniband.aeth.syndrome < 0x20", Skip::Undecoded),
    ("infiniband.atomiceth.swapdt or infiniband.atomicacketh.origremdt", Skip::Undecoded),
    ("infiniband.grh.dgid", Skip::None),
    ("udp.srcport == 69 or udp.length < 8", Skip::None),
    ("frame.len > 1000 || frame.number == 1", Skip::None),
    ("frame.time_delta > 0.0005", Skip::None),
    ("frame.time_epoch >= 1700000000.000010", Skip::None),
    ("frame.comment", Skip::None),
    ("infiniband.bth.m == 0 && infiniband.bth.padcnt > 0", Skip::None),
    ("ip.ttl < 64 or ip.flags.df == 1 and ip.ttl == 64", Skip::Unsupported),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skip {
    None,
    Undecoded,
    UndecodedAndPorts,
    /// A field we do not register (kept in the list to show the error is clear).
    Unsupported,
}

/// Opcodes tshark 4.0 decodes past the BTH (the RD range only when read as DC).
fn tshark_decodes(fr: &Frame) -> bool {
    let Some(ib) = &fr.ib else { return true };
    let op = ib.bth.opcode;
    let known = match op.transport() {
        Transport::Rd => ib.is_dc(),
        Transport::Xrc | Transport::Cnp | Transport::Vendor => false,
        _ => op.info().is_some() && !matches!(op.0 & 0x1F, 0x1C | 0x1D),
    };
    let stopped = fr.stop.is_some_and(|s| {
        matches!(s.layer, Layer::Bth | Layer::ExtHeader | Layer::Payload | Layer::Icrc | Layer::Mad)
    });
    known && !stopped
}

/// UDP not to a RoCE port, with a payload tshark gives to a port dissector.
fn port_dissected(fr: &Frame) -> bool {
    fr.roce.is_none() && fr.udp.is_some_and(|u| u.length > 8)
}

struct Merged {
    path: PathBuf,
    /// For frame N (from 1) of the merged file: its capture and number there.
    origin: Vec<(String, u64)>,
    _dir: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `test` names the temporary directory: tests run in parallel.
fn merged(test: &str) -> Merged {
    let files = roce_tests::captures();
    assert!(
        files.len() >= 20,
        "expected the captures in captures/ and captures/lab/, found {}",
        files.len()
    );
    let dir = std::env::temp_dir().join(format!("roce-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("all.pcapng");
    let out = Command::new("mergecap")
        .arg("-a")
        .arg("-w")
        .arg(&path)
        .args(&files)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run mergecap ({e}); it comes with tshark: `apt-get install tshark`")
        });
    assert!(out.status.success(), "mergecap failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut origin = Vec::new();
    for f in &files {
        let mut r = capture::open(f).unwrap_or_else(|e| panic!("{e}"));
        let name = f.strip_prefix(roce_tests::root()).unwrap_or(f).display().to_string();
        while let Some(rec) = r.next_packet().unwrap_or_else(|e| panic!("{e}")) {
            origin.push((name.clone(), rec.number));
        }
    }
    Merged { path, origin, _dir: TempDir(dir) }
}

fn tshark(path: &Path, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .args(["-n", "--disable-protocol", "rpcordma", "-r"])
        .arg(path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run tshark ({e}); `apt-get install tshark`"));
    assert!(
        out.status.success(),
        "tshark {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One record, decoded, with what a Ctx needs.
struct Rec {
    ts: u64,
    orig_len: u32,
    interface: u32,
    data: Vec<u8>,
    comment: Option<String>,
    frame: Frame,
}

/// Every frame of a capture.
struct Decoded {
    frames: Vec<Rec>,
    first_ts: u64,
}

fn decode_all(path: &Path) -> Decoded {
    let mut r = capture::open(path).unwrap_or_else(|e| panic!("{e}"));
    let mut frames = Vec::new();
    while let Some(rec) = r.next_packet().unwrap_or_else(|e| panic!("{e}")) {
        let fr = frame::decode(rec.link, rec.data, &Options::default());
        frames.push(Rec {
            ts: rec.ts_ns,
            orig_len: rec.orig_len,
            interface: rec.interface,
            data: rec.data.to_vec(),
            comment: rec.comment.map(str::to_string),
            frame: fr,
        });
    }
    let first_ts = frames.first().map_or(0, |f| f.ts);
    Decoded { frames, first_ts }
}

impl Decoded {
    fn ctx(&self, i: usize) -> Ctx<'_> {
        let r = &self.frames[i];
        let prev = if i == 0 { r.ts } else { self.frames[i - 1].ts };
        Ctx {
            number: i as u64 + 1,
            ts_ns: r.ts,
            first_ts_ns: self.first_ts,
            prev_ts_ns: prev,
            orig_len: r.orig_len,
            interface: r.interface,
            data: &r.data,
            frame: &r.frame,
            comment: r.comment.as_deref(),
        }
    }
}

#[test]
#[ignore = "needs tshark: bash scripts/setup.sh --test"]
fn filters_keep_what_tshark_keeps() {
    let m = merged("filters");
    let d = decode_all(&m.path);
    assert_eq!(d.frames.len(), m.origin.len(), "merged file and captures differ in frame count");
    assert!(FILTERS.len() >= 40);
    let mut problems = Vec::new();
    let mut compared = 0;
    let mut nonempty = 0;
    for &(text, skip) in FILTERS {
        let filter = match Filter::compile(text) {
            Ok(f) => f,
            Err(e) => {
                assert_eq!(skip, Skip::Unsupported, "{e}");
                assert!(e.to_string().contains("unknown field"), "{e}");
                continue;
            }
        };
        let theirs: Vec<u64> = tshark(&m.path, &["-Y", text, "-T", "fields", "-e", "frame.number"])
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        let mut ours = Vec::new();
        for i in 0..d.frames.len() {
            if filter.matches(&d.ctx(i)) {
                ours.push(i as u64 + 1);
            }
        }
        let skipped = |n: &u64| {
            let fr = &d.frames[*n as usize - 1].frame;
            match skip {
                Skip::None | Skip::Unsupported => false,
                Skip::Undecoded => !tshark_decodes(fr),
                Skip::UndecodedAndPorts => !tshark_decodes(fr) || port_dissected(fr),
            }
        };
        let ours_c: Vec<u64> = ours.iter().copied().filter(|n| !skipped(n)).collect();
        let theirs_c: Vec<u64> = theirs.iter().copied().filter(|n| !skipped(n)).collect();
        if ours_c != theirs_c {
            let only = |a: &[u64], b: &[u64]| -> Vec<String> {
                a.iter()
                    .filter(|n| !b.contains(n))
                    .take(5)
                    .map(|n| {
                        let (f, k) = &m.origin[*n as usize - 1];
                        format!("{f}#{k}")
                    })
                    .collect()
            };
            problems.push(format!(
                "`{text}`: only we keep {:?}, only tshark keeps {:?}",
                only(&ours_c, &theirs_c),
                only(&theirs_c, &ours_c)
            ));
        }
        compared += 1;
        nonempty += usize::from(!theirs_c.is_empty());
    }
    assert!(
        problems.is_empty(),
        "{} filters differ from tshark:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(compared >= 40, "{compared}");
    assert!(
        nonempty >= 30,
        "only {nonempty} filters kept any frame: the test would not catch much"
    );
}

/// The new fields, value for value, and `frame.time_delta_displayed` under a filter.
#[test]
#[ignore = "needs tshark: bash scripts/setup.sh --test"]
fn new_fields_equal_tshark() {
    const NEW: &[&str] = &[
        "ip.addr",
        "ipv6.addr",
        "eth.addr",
        "udp.port",
        "tcp.port",
        "tcp.srcport",
        "tcp.dstport",
        "frame.time_relative",
        "frame.time_delta",
        "frame.time_delta_displayed",
        "frame.time_epoch",
        "frame.protocols",
        "_ws.col.Protocol",
    ];
    let m = merged("fields");
    let d = decode_all(&m.path);
    let mut args = vec!["-T", "fields"];
    for f in NEW {
        args.extend(["-e", f]);
    }
    let theirs = tshark(&m.path, &args);
    let ids: Vec<Field> =
        NEW.iter().map(|n| Field::lookup(n).unwrap_or_else(|e| panic!("{e}"))).collect();
    let lines: Vec<&str> = theirs.lines().collect();
    assert_eq!(lines.len(), d.frames.len());
    let mut mismatches = BTreeMap::<&str, Vec<String>>::new();
    let mut compared = 0;
    for (i, line) in lines.iter().enumerate() {
        let c = d.ctx(i);
        let fr = c.frame;
        for (k, t) in line.split('\t').enumerate() {
            let name = NEW[k];
            let skip = match name {
                "frame.protocols" => !tshark_decodes(fr) || port_dissected(fr),
                "_ws.col.Protocol" => port_dissected(fr),
                _ => false,
            };
            if skip {
                continue;
            }
            let mut o = Vec::new();
            fields::write(ids[k], &c, &mut o);
            let o = String::from_utf8_lossy(&o);
            if o != t {
                let (f, n) = &m.origin[i];
                mismatches
                    .entry(name)
                    .or_default()
                    .push(format!("{f}#{n}: ours `{o}`, tshark `{t}`"));
            }
            compared += 1;
        }
    }
    let report: Vec<String> = mismatches
        .iter()
        .map(|(k, v)| {
            format!(
                "{k}: {} frames, e.g.\n  {}",
                v.len(),
                v.iter().take(4).cloned().collect::<Vec<_>>().join("\n  ")
            )
        })
        .collect();
    assert!(mismatches.is_empty(), "{}", report.join("\n"));
    assert!(compared > 5000, "{compared}");

    // Displayed delta under a filter: from the previous frame the filter kept.
    let text = "infiniband.aeth.syndrome or tcp";
    let theirs = tshark(
        &m.path,
        &["-Y", text, "-T", "fields", "-e", "frame.number", "-e", "frame.time_delta_displayed"],
    );
    let filter = Filter::compile(text).unwrap_or_else(|e| panic!("{e}"));
    let mut ours = String::new();
    let mut shown = Shown { prev_ts_ns: None };
    for i in 0..d.frames.len() {
        let c = d.ctx(i);
        if filter.matches_shown(&c, shown) {
            let mut v = Vec::new();
            fields::write_shown(Field::FrameTimeDeltaDisplayed, &c, shown, &mut v);
            ours.push_str(&format!("{}\t{}\n", i + 1, String::from_utf8_lossy(&v)));
            shown.prev_ts_ns = Some(c.ts_ns);
        }
    }
    assert!(theirs.lines().count() > 50);
    assert_eq!(ours, theirs);
}

/// DC frames crafted by `dissector::craft::dc_exchange`, written to a pcap: tshark
/// must read each as DC (its Info column starts with `DC `), and every field it
/// shows must equal ours under the default `TransportHint::Auto`.
#[test]
#[ignore = "needs tshark: bash scripts/setup.sh --test"]
fn dc_frames_equal_tshark() {
    const DC_FIELDS: &[&str] = &[
        "infiniband.bth.opcode",
        "infiniband.bth.se",
        "infiniband.bth.padcnt",
        "infiniband.bth.destqp",
        "infiniband.bth.a",
        "infiniband.bth.psn",
        "infiniband.rdeth.eecnxt",
        "infiniband.deth.q_key",
        "infiniband.deth.srcqp",
        "infiniband.reth.va",
        "infiniband.reth.r_key",
        "infiniband.reth.dmalen",
        "infiniband.atomiceth.swapdt",
        "infiniband.atomiceth.cmpdt",
        "infiniband.aeth.syndrome",
        "infiniband.aeth.msn",
        "infiniband.atomicacketh.origremdt",
        "infiniband.immdt",
        "infiniband.invariant.crc",
        "frame.protocols",
        "_ws.col.Protocol",
    ];
    let frames = dissector::craft::dc_exchange();
    let dir = std::env::temp_dir().join(format!("roce-dc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let _cleanup = TempDir(dir.clone());
    let path = dir.join("dc.pcap");
    {
        let f = std::fs::File::create(&path).expect("create dc.pcap");
        let mut w = dissector::capture::PcapWriter::new(
            std::io::BufWriter::new(f),
            dissector::LinkType::ETHERNET,
            65535,
        )
        .expect("pcap header");
        for t in &frames {
            w.write_packet(t.ts_ns, &t.data, t.data.len() as u32).expect("write");
        }
        w.flush().expect("flush");
    }
    let mut args = vec!["-T", "fields", "-e", "_ws.col.Info"];
    for f in DC_FIELDS {
        args.extend(["-e", f]);
    }
    let theirs = tshark(&path, &args);
    let d = decode_all(&path);
    let lines: Vec<&str> = theirs.lines().collect();
    assert_eq!(lines.len(), frames.len());
    assert!(frames.len() >= 15, "{}", frames.len());
    let mut mismatches = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let c = d.ctx(i);
        let ib = c.frame.ib.as_ref().expect("every frame is RoCE");
        assert!(ib.is_dc(), "frame {}: we did not read it as DC", i + 1);
        let mut cols = line.split('\t');
        let info = cols.next().unwrap_or("");
        assert!(info.starts_with("DC "), "frame {}: tshark's Info is `{info}`", i + 1);
        for (name, t) in DC_FIELDS.iter().zip(cols) {
            let mut t = t.to_string();
            // tshark adds ImmDt twice (see tshark_diff.rs).
            if *name == "infiniband.immdt" {
                if let Some((a, b)) = t.split_once(',') {
                    if a == b {
                        t = a.to_string();
                    }
                }
            }
            let mut o = Vec::new();
            fields::write(Field::lookup(name).unwrap_or_else(|e| panic!("{e}")), &c, &mut o);
            let o = String::from_utf8_lossy(&o);
            if o != t {
                mismatches
                    .push(format!("frame {} ({info}): {name}: ours `{o}`, tshark `{t}`", i + 1));
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// The frames `text` keeps in `d`, numbered from 1.
fn ours(d: &Decoded, text: &str) -> Vec<u64> {
    let filter = Filter::compile(text).unwrap_or_else(|e| panic!("`{text}`: {e}"));
    (0..d.frames.len()).filter(|&i| filter.matches(&d.ctx(i))).map(|i| i as u64 + 1).collect()
}

fn theirs(path: &Path, text: &str) -> Vec<u64> {
    tshark(path, &["-Y", text, "-T", "fields", "-e", "frame.number"])
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Which frames a test on `name` may skip: past the BTH, those tshark does not
/// decode as we do (see the module's `UNDECODED`); `data` also `PORT_DISSECTOR`.
fn skip_for(name: &str) -> Skip {
    let whole = |h: &str| name == h || name.starts_with(&format!("{h}."));
    if name == "data" || name == "frame.protocols" {
        Skip::UndecodedAndPorts
    } else if name.starts_with("infiniband.")
        && !whole("infiniband.bth")
        && !whole("infiniband.grh")
    {
        Skip::Undecoded
    } else {
        Skip::None
    }
}

/// A name alone is a presence test (`infiniband.reth`, `ip`, `infiniband.aeth.syndrome`):
/// every such name tshark 4.0 knows too, and combinations people write, keep
/// exactly tshark's frames on every capture. tshark failing on a name (it does not
/// know it) fails the test.
#[test]
#[ignore = "needs tshark: bash scripts/setup.sh --test"]
fn presence_filters_keep_what_tshark_keeps() {
    let m = merged("presence");
    let d = decode_all(&m.path);
    assert_eq!(d.frames.len(), m.origin.len(), "merged file and captures differ in frame count");
    let captures = m.origin.iter().map(|(f, _)| f).collect::<std::collections::BTreeSet<_>>();
    let mut filters: Vec<String> = Vec::new();
    // Our own protocols (`roce`, `roce.icrc`, `roce.dc`) tshark does not have.
    filters.extend(
        PROTOCOLS.iter().map(|(n, _)| *n).filter(|n| !n.starts_with("roce")).map(String::from),
    );
    filters.extend(Header::ALL.iter().map(|(n, _, _)| n.to_string()));
    // Every field of tshark's: not our `roce.*`, nor the columns (tshark 4.0 cannot
    // filter on `_ws.col.*`).
    filters.extend(
        Field::ALL
            .iter()
            .map(|(_, n, _)| *n)
            .filter(|n| !n.starts_with("roce.") && !n.starts_with("_ws."))
            .map(String::from),
    );
    let names = filters.len();
    for f in [
        "!infiniband.reth",
        "!infiniband.aeth",
        "not infiniband.bth",
        "infiniband.aeth && infiniband.aeth.syndrome == 0",
        "infiniband.aeth and not infiniband.atomicacketh",
        "infiniband.reth || infiniband.deth",
        "infiniband.bth && !infiniband.reth && !infiniband.aeth && !infiniband.deth",
        "infiniband.deth && infiniband.mad",
        "eth && !vlan && ip && udp && infiniband.bth",
        "infiniband.grh or ipv6",
        "infiniband.rdeth and infiniband.immdt or infiniband.ieth",
    ] {
        filters.push(f.to_string());
    }
    let mut problems = Vec::new();
    let mut nonempty = 0;
    // Per filter: frames where we and tshark decide differently, all skipped.
    let mut hidden = BTreeMap::<&str, Vec<String>>::new();
    for text in &filters {
        // A combination skips what its strictest part does.
        let skip = text
            .split(|c: char| c.is_whitespace() || c == '!' || c == '(' || c == ')')
            .filter(|w| w.contains('.') || PROTOCOLS.iter().any(|(n, _)| n == w))
            .map(skip_for)
            .max_by_key(|s| match s {
                Skip::None | Skip::Unsupported => 0,
                Skip::Undecoded => 1,
                Skip::UndecodedAndPorts => 2,
            })
            .unwrap_or(Skip::None);
        let (ours, theirs) = (ours(&d, text), theirs(&m.path, text));
        let skipped = |n: &u64| {
            let fr = &d.frames[*n as usize - 1].frame;
            match skip {
                Skip::None | Skip::Unsupported => false,
                Skip::Undecoded => !tshark_decodes(fr),
                Skip::UndecodedAndPorts => !tshark_decodes(fr) || port_dissected(fr),
            }
        };
        let differ = ours.iter().filter(|n| !theirs.contains(n));
        for n in differ.chain(theirs.iter().filter(|n| !ours.contains(n))).filter(|n| skipped(n)) {
            let (f, k) = &m.origin[*n as usize - 1];
            hidden.entry(text).or_default().push(format!("{f}#{k}"));
        }
        let ours_c: Vec<u64> = ours.iter().copied().filter(|n| !skipped(n)).collect();
        let theirs_c: Vec<u64> = theirs.iter().copied().filter(|n| !skipped(n)).collect();
        if ours_c != theirs_c {
            let only = |a: &[u64], b: &[u64]| -> Vec<String> {
                a.iter()
                    .filter(|n| !b.contains(n))
                    .take(5)
                    .map(|n| {
                        let (f, k) = &m.origin[*n as usize - 1];
                        format!("{f}#{k}")
                    })
                    .collect()
            };
            problems.push(format!(
                "`{text}`: only we keep {:?}, only tshark keeps {:?}",
                only(&ours_c, &theirs_c),
                only(&theirs_c, &ours_c)
            ));
        }
        nonempty += usize::from(!theirs_c.is_empty());
    }
    eprintln!(
        "{} filters ({names} names alone) x {} captures ({} frames): {} differ; {nonempty} keep a frame; \
         skipped, where tshark 4.0 does not decode as we do: {}",
        filters.len(),
        captures.len(),
        d.frames.len(),
        problems.len(),
        hidden.iter().map(|(t, v)| format!("\n  `{t}`: {}", v.join(" "))).collect::<String>()
    );
    assert!(
        problems.is_empty(),
        "{} filters differ from tshark:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(names >= 100, "{names}");
    assert!(
        nonempty >= 80,
        "only {nonempty} filters kept any frame: the test would not catch much"
    );
}

/// An IEEE 802.3 frame's type/length field up to 1500 is a length, 1501–1535 is
/// neither, from 0x0600 on it is an ethertype: `eth.type` and `vlan.etype` print
/// only ethertypes, as tshark's do. No capture holds such frames; they are
/// crafted here (an STP-like LLC header after the length, so that tshark decodes
/// LLC and STP, which we do not, and adds no `data`).
#[test]
#[ignore = "needs tshark: bash scripts/setup.sh --test"]
fn ieee_802_3_lengths_are_not_ethertypes() {
    use dissector::wire::ethernet::{self, ethertype, Mac, VlanTag};
    let frame = |type_or_len: u16, vlan: Option<u16>| {
        let mut b = vec![0u8; 64];
        let mut e = ethernet::Frame::new_unchecked(&mut b[..]);
        e.set_dst(Mac([0x01, 0x80, 0xc2, 0, 0, 0]));
        e.set_src(Mac([2, 0, 0, 0, 0, 1]));
        let mut at = ethernet::HEADER_LEN;
        match vlan {
            Some(id) => {
                e.set_ethertype(ethertype::VLAN);
                let tag = VlanTag {
                    tpid: ethertype::VLAN,
                    id,
                    inner_type: type_or_len,
                    ..VlanTag::default()
                };
                tag.emit(&mut b[at..at + ethernet::VLAN_TAG_LEN]);
                at += ethernet::VLAN_TAG_LEN;
            }
            None => e.set_ethertype(type_or_len),
        }
        b[at..at + 3].copy_from_slice(&[0x42, 0x42, 0x03]);
        b
    };
    let kinds: [(u16, Option<u16>); 8] = [
        (0x002e, None),
        (1500, None),
        (1501, None),
        (0x05ff, None),
        (0x0600, None),
        (0x88b5, None),
        (0x002e, Some(100)),
        (0x88b5, Some(100)),
    ];
    let dir = std::env::temp_dir().join(format!("roce-8023-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let _cleanup = TempDir(dir.clone());
    let path = dir.join("ieee8023.pcap");
    {
        let f = std::fs::File::create(&path).expect("create ieee8023.pcap");
        let mut w = dissector::capture::PcapWriter::new(
            std::io::BufWriter::new(f),
            dissector::LinkType::ETHERNET,
            65535,
        )
        .expect("pcap header");
        for (i, (t, vlan)) in kinds.iter().enumerate() {
            let data = frame(*t, *vlan);
            w.write_packet(1_700_000_000_000_000_000 + i as u64 * 1000, &data, data.len() as u32)
                .expect("write");
        }
        w.flush().expect("flush");
    }
    let d = decode_all(&path);
    assert_eq!(d.frames.len(), kinds.len());
    // Fields, value for value; frame.protocols only where the field is no length
    // (after a length tshark decodes LLC, which we do not).
    let names = ["eth.type", "vlan.etype", "vlan.id", "frame.protocols"];
    let mut args = vec!["-T", "fields"];
    for n in names {
        args.extend(["-e", n]);
    }
    let out = tshark(&path, &args);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), kinds.len());
    let mut mismatches = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let c = d.ctx(i);
        let (t, _) = kinds[i];
        for (name, theirs) in names.iter().zip(line.split('\t')) {
            // tshark decodes LLC after a length, and XNS IDP for 0x0600; we neither.
            if *name == "frame.protocols" && (t <= ethertype::MAX_LEN || t == 0x0600) {
                continue;
            }
            let mut o = Vec::new();
            fields::write(Field::lookup(name).unwrap_or_else(|e| panic!("{e}")), &c, &mut o);
            let o = String::from_utf8_lossy(&o);
            if o != theirs {
                mismatches.push(format!(
                    "frame {} ({t:#06x}): {name}: ours `{o}`, tshark `{theirs}`",
                    i + 1
                ));
            }
        }
    }
    for text in [
        "eth",
        "ethertype",
        "vlan",
        "data",
        "eth.type",
        "vlan.etype",
        "!eth.type",
        "eth.type == 0x0600",
    ] {
        let (o, t) = (ours(&d, text), theirs(&path, text));
        if o != t {
            mismatches.push(format!("-Y `{text}`: ours {o:?}, tshark {t:?}"));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    // What the test is about: no length printed as a type.
    let c = d.ctx(0);
    let mut o = Vec::new();
    fields::write(Field::EthType, &c, &mut o);
    assert!(o.is_empty(), "0x002e is a length");
}
