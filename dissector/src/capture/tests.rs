//! Reader and writer tests on hand-built fixtures, round trips and hostile input.
//!
//! Owns: tests only. Imports: its parent; proptest.

use super::*;
use proptest::prelude::*;

/// An owned copy of a [`Record`].
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    number: u64,
    ts_ns: u64,
    link: LinkType,
    interface: u32,
    orig_len: u32,
    data: Vec<u8>,
    file_offset: u64,
    direction: Option<Direction>,
    comment: Option<String>,
}

impl From<Record<'_>> for Rec {
    fn from(r: Record<'_>) -> Self {
        Rec {
            number: r.number,
            ts_ns: r.ts_ns,
            link: r.link,
            interface: r.interface,
            orig_len: r.orig_len,
            data: r.data.to_vec(),
            file_offset: r.file_offset,
            direction: r.direction,
            comment: r.comment.map(str::to_owned),
        }
    }
}

/// Reads everything; returns the records and the error that stopped reading, if any.
fn read_all_with(bytes: &[u8], buffer: usize) -> (Vec<Rec>, Option<CaptureError>) {
    let mut r = match Reader::with_options(bytes, buffer, None) {
        Ok(r) => r,
        Err(e) => return (vec![], Some(e)),
    };
    let mut out = vec![];
    loop {
        match r.next_packet() {
            Ok(Some(rec)) => out.push(rec.into()),
            Ok(None) => return (out, None),
            Err(e) => {
                // Fused after an error.
                assert!(matches!(r.next_packet(), Ok(None)));
                return (out, Some(e));
            }
        }
    }
}

fn read_all(bytes: &[u8]) -> (Vec<Rec>, Option<CaptureError>) {
    let (a, ea) = read_all_with(bytes, DEFAULT_BUFFER);
    // A tiny buffer exercises compaction and growth; it must see the same thing.
    let (b, eb) = read_all_with(bytes, 64);
    assert_eq!(a, b);
    assert_eq!(ea.as_ref().map(|e| e.to_string()), eb.as_ref().map(|e| e.to_string()));
    (a, ea)
}

fn read_ok(bytes: &[u8]) -> Vec<Rec> {
    let (recs, err) = read_all(bytes);
    if let Some(e) = err {
        panic!("unexpected error: {e}");
    }
    recs
}

fn read_err(bytes: &[u8]) -> (Vec<Rec>, CaptureError) {
    let (recs, err) = read_all(bytes);
    (recs, err.expect("expected an error"))
}

// ---------- fixture builders ----------

/// Builds bytes in one byte order.
#[derive(Clone)]
struct B {
    be: bool,
    v: Vec<u8>,
}

impl B {
    fn new(be: bool) -> Self {
        B { be, v: vec![] }
    }
    fn u16(mut self, x: u16) -> Self {
        self.v.extend(if self.be { x.to_be_bytes() } else { x.to_le_bytes() });
        self
    }
    fn u32(mut self, x: u32) -> Self {
        self.v.extend(if self.be { x.to_be_bytes() } else { x.to_le_bytes() });
        self
    }
    fn u64(mut self, x: u64) -> Self {
        self.v.extend(if self.be { x.to_be_bytes() } else { x.to_le_bytes() });
        self
    }
    fn raw(mut self, b: &[u8]) -> Self {
        self.v.extend_from_slice(b);
        self
    }
    /// Bytes padded to a multiple of 4.
    fn padded(mut self, b: &[u8]) -> Self {
        self.v.extend_from_slice(b);
        while !self.v.len().is_multiple_of(4) {
            self.v.push(0);
        }
        self
    }
    fn opt(self, code: u16, val: &[u8]) -> Self {
        self.u16(code).u16(val.len() as u16).padded(val)
    }
    fn end_opts(self) -> Self {
        self.u32(0)
    }
    /// Wraps the body built so far into a pcapng block of `btype`.
    fn block(self, btype: u32) -> Vec<u8> {
        let len = 12 + self.v.len() as u32;
        B::new(self.be).u32(btype).u32(len).raw(&self.v).u32(len).v
    }
}

fn shb(be: bool) -> Vec<u8> {
    B::new(be)
        .u32(0x1A2B_3C4D)
        .u16(1)
        .u16(0)
        .u64(u64::MAX)
        .opt(4, b"fixture")
        .end_opts()
        .block(0x0A0D_0D0A)
}

fn idb(be: bool, link: LinkType, snaplen: u32, name: Option<&str>, tsresol: Option<u8>) -> Vec<u8> {
    let mut b = B::new(be).u16(link.0).u16(0).u32(snaplen);
    if let Some(n) = name {
        b = b.opt(2, n.as_bytes());
    }
    if let Some(r) = tsresol {
        b = b.opt(9, &[r]);
    }
    b.end_opts().block(1)
}

fn epb(be: bool, iface: u32, ts: u64, data: &[u8], orig: u32, opts: &[(u16, &[u8])]) -> Vec<u8> {
    let mut b = B::new(be)
        .u32(iface)
        .u32((ts >> 32) as u32)
        .u32(ts as u32)
        .u32(data.len() as u32)
        .u32(orig)
        .padded(data);
    if !opts.is_empty() {
        for (c, v) in opts {
            b = b.opt(*c, v);
        }
        b = b.end_opts();
    }
    b.block(6)
}

fn pcap_file(
    be: bool,
    nanos: bool,
    link: u32,
    snaplen: u32,
    recs: &[(u32, u32, &[u8], u32)],
) -> Vec<u8> {
    let magic = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
    let mut b = B::new(be).u32(magic).u16(2).u16(4).u32(0).u32(0).u32(snaplen).u32(link);
    for &(sec, frac, data, orig) in recs {
        b = b.u32(sec).u32(frac).u32(data.len() as u32).u32(orig).raw(data);
    }
    b.v
}

// ---------- pcap ----------

#[test]
fn pcap_all_four_magics() {
    for be in [false, true] {
        for nanos in [false, true] {
            let f = pcap_file(
                be,
                nanos,
                1,
                65535,
                &[(10, 5, &[1, 2, 3], 60), (11, 999, &[4; 70], 70), (12, 0, &[], 0)],
            );
            let r = Reader::new(&f[..]).unwrap();
            assert_eq!(
                r.format(),
                Format::Pcap { nanos, big_endian: be, link: LinkType::ETHERNET, snaplen: 65535 }
            );
            assert_eq!(r.interfaces().len(), 1);
            assert_eq!(r.interfaces()[0].tsresol, if nanos { 9 } else { 6 });
            let recs = read_ok(&f);
            let m = if nanos { 1 } else { 1000 };
            assert_eq!(recs.len(), 3);
            assert_eq!(recs[0].number, 1);
            assert_eq!(recs[0].ts_ns, 10_000_000_000 + 5 * m);
            assert_eq!(recs[0].data, [1, 2, 3]);
            assert_eq!(recs[0].orig_len, 60);
            assert_eq!(recs[0].file_offset, 24);
            assert_eq!(recs[0].link, LinkType::ETHERNET);
            assert_eq!(recs[1].number, 2);
            assert_eq!(recs[1].ts_ns, 11_000_000_000 + 999 * m);
            assert_eq!(recs[1].data, [4; 70]);
            assert_eq!(recs[1].file_offset, 24 + 16 + 3);
            assert!(recs[2].data.is_empty());
            assert_eq!(recs[2].number, 3);
        }
    }
}

#[test]
fn pcap_header_only_is_empty_capture() {
    let f = pcap_file(false, false, 113, 0, &[]);
    assert!(read_ok(&f).is_empty());
    let r = Reader::new(&f[..]).unwrap();
    assert_eq!(r.interfaces()[0].link, LinkType::LINUX_SLL);
}

#[test]
fn pcap_caplen_over_orig_len_is_tolerated() {
    let f = pcap_file(false, true, 1, 65535, &[(1, 2, &[9; 10], 4)]);
    let recs = read_ok(&f);
    assert_eq!(recs[0].data.len(), 10);
    assert_eq!(recs[0].orig_len, 4);
}

#[test]
fn pcap_garbage_caplen_is_an_error_with_offset_and_frame() {
    let mut f = pcap_file(false, false, 1, 65535, &[(1, 0, &[1; 8], 8), (2, 0, &[2; 8], 8)]);
    // Second record's caplen field.
    let at = 24 + 16 + 8;
    f[at + 8..at + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    let (recs, e) = read_err(&f);
    assert_eq!(recs.len(), 1);
    assert_eq!(e.offset(), Some(at as u64));
    assert_eq!(e.frame(), Some(2));
    assert!(!e.is_truncated());
    assert_eq!(
        e.to_string(),
        "byte 48 (frame 2): record claims 4294967295 captured bytes, more than the 262144 allowed; \
         the file is probably corrupt or truncated"
    );
    // Far beyond a small snaplen, though under the absolute limit.
    let f = pcap_file(false, false, 1, 96, &[(1, 0, &[0; 70_000], 70_000)]);
    let (_, e) = read_err(&f);
    assert!(e.to_string().contains("snap length of 96"), "{e}");
}

#[test]
fn pcap_truncated_record_reports_complete_frames() {
    let f = pcap_file(true, false, 1, 65535, &[(1, 0, &[1; 8], 8), (2, 0, &[2; 8], 8)]);
    let (recs, e) = read_err(&f[..f.len() - 3]);
    assert_eq!(recs.len(), 1);
    assert!(e.is_truncated());
    assert_eq!(e.complete_frames(), Some(1));
    assert_eq!(e.frame(), Some(2));
    let s = e.to_string();
    assert!(s.contains("after 1 complete frames"), "{s}");
    assert!(
        s.starts_with("byte 48 (frame 2): the file ends in the middle of a packet record"),
        "{s}"
    );
}

#[test]
fn not_a_capture() {
    let e = Reader::new(&b"<html><body>"[..]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::NotCapture { .. }));
    assert!(
        e.to_string().starts_with("not a pcap or pcapng file (magic 0x3c68746d); hint: "),
        "{e}"
    );
    let e = Reader::new(&[0x1f, 0x8b, 8, 0, 0, 0][..]).unwrap_err();
    assert!(e.to_string().contains("gunzip"), "{e}");
    let e = Reader::new(&[][..]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Empty));
    let e = Reader::new(&[0xd4, 0xc3][..]).unwrap_err();
    assert!(e.to_string().contains("only 2 bytes"), "{e}");
    let e = Reader::new(&[0x34, 0xcd, 0xb2, 0xa1, 0, 0][..]).unwrap_err();
    assert!(e.to_string().contains("editcap"), "{e}");
}

#[test]
fn open_names_the_path() {
    let e = open(std::path::Path::new("/nonexistent/dir/x.pcap")).unwrap_err();
    let s = e.to_string();
    assert!(s.starts_with("/nonexistent/dir/x.pcap: "), "{s}");
    let dir = std::env::temp_dir().join(format!("dissector-open-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.pcap");
    let mut f = pcap_file(false, false, 1, 65535, &[(1, 0, &[1; 8], 8)]);
    f.truncate(f.len() - 1);
    std::fs::write(&p, &f).unwrap();
    let mut r = open(&p).unwrap();
    let e = r.next_packet().unwrap_err();
    assert!(e.to_string().starts_with(&format!("{}: byte 24 (frame 1): ", p.display())), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------- pcapng ----------

fn simple_ng(be: bool) -> Vec<u8> {
    let mut f = shb(be);
    f.extend(idb(be, LinkType::ETHERNET, 0, Some("eth0"), None));
    f.extend(epb(
        be,
        0,
        1_700_000_000_123_456,
        &[0xaa; 61],
        64,
        &[(1, b"hello"), (2, &B::new(be).u32(2).v)],
    ));
    f.extend(epb(be, 0, 1_700_000_001_000_000, &[0xbb; 4], 4, &[]));
    f
}

#[test]
fn pcapng_both_byte_orders() {
    for be in [false, true] {
        let f = simple_ng(be);
        let r = Reader::new(&f[..]).unwrap();
        assert_eq!(r.format(), Format::Pcapng);
        let recs = read_ok(&f);
        assert_eq!(recs.len(), 2);
        let shb_len = shb(be).len() as u64;
        let idb_len = idb(be, LinkType::ETHERNET, 0, Some("eth0"), None).len() as u64;
        assert_eq!(
            recs[0],
            Rec {
                number: 1,
                ts_ns: 1_700_000_000_123_456_000,
                link: LinkType::ETHERNET,
                interface: 0,
                orig_len: 64,
                data: vec![0xaa; 61],
                file_offset: shb_len + idb_len,
                direction: Some(Direction::Outbound),
                comment: Some("hello".into()),
            }
        );
        assert_eq!(recs[1].number, 2);
        assert_eq!(recs[1].ts_ns, 1_700_000_001_000_000_000);
        assert_eq!(recs[1].data, [0xbb; 4]);
        assert_eq!(recs[1].comment, None);
        assert_eq!(recs[1].direction, None);
        let mut r = Reader::new(&f[..]).unwrap();
        while r.next_packet().unwrap().is_some() {}
        assert_eq!(
            r.interfaces(),
            [Interface {
                link: LinkType::ETHERNET,
                snaplen: 0,
                name: Some("eth0".into()),
                description: None,
                tsresol: 6,
                tsoffset: 0,
                section: 0,
            }]
        );
        assert_eq!(r.position(), f.len() as u64);
    }
}

#[test]
fn pcapng_interfaces_with_different_links_and_resolutions() {
    let be = false;
    let mut f = shb(be);
    f.extend(idb(be, LinkType::ETHERNET, 0, Some("eth0"), Some(6)));
    f.extend(idb(be, LinkType::RAW, 128, Some("tun0"), Some(0x80 | 10)));
    f.extend(idb(be, LinkType::LINUX_SLL2, 0, None, Some(9)));
    // Interface 3: if_tsoffset of 100 s and if_description.
    f.extend(
        B::new(be)
            .u16(LinkType::IPV4.0)
            .u16(0)
            .u32(0)
            .opt(3, b"a description")
            .opt(14, &B::new(be).u64(100).v)
            .end_opts()
            .block(1),
    );
    f.extend(epb(be, 1, 1024 * 5 + 512, &[1], 1, &[]));
    f.extend(epb(be, 0, 7, &[2], 1, &[]));
    f.extend(epb(be, 2, 7, &[3], 1, &[]));
    f.extend(epb(be, 3, 7, &[4], 1, &[(2, &B::new(be).u32(1).v)]));
    let recs = read_ok(&f);
    assert_eq!(recs.len(), 4);
    assert_eq!((recs[0].interface, recs[0].link, recs[0].ts_ns), (1, LinkType::RAW, 5_500_000_000));
    assert_eq!((recs[1].interface, recs[1].link, recs[1].ts_ns), (0, LinkType::ETHERNET, 7_000));
    assert_eq!((recs[2].interface, recs[2].link, recs[2].ts_ns), (2, LinkType::LINUX_SLL2, 7));
    assert_eq!(
        (recs[3].interface, recs[3].link, recs[3].ts_ns),
        (3, LinkType::IPV4, 100_000_007_000)
    );
    assert_eq!(recs[3].direction, Some(Direction::Inbound));
    let mut r = Reader::new(&f[..]).unwrap();
    while r.next_packet().unwrap().is_some() {}
    let ifs = r.interfaces();
    assert_eq!(ifs.len(), 4);
    assert_eq!(ifs[1].tsresol, 0x8a);
    assert_eq!(ifs[1].snaplen, 128);
    assert_eq!(ifs[1].name.as_deref(), Some("tun0"));
    assert_eq!(ifs[3].description.as_deref(), Some("a description"));
    assert_eq!(ifs[3].tsoffset, 100);
}

#[test]
fn timestamp_scales() {
    let be = true;
    let mut f = shb(be);
    f.extend(idb(be, LinkType::ETHERNET, 0, None, Some(3))); // ms
    f.extend(idb(be, LinkType::ETHERNET, 0, None, Some(12))); // ps
    f.extend(idb(be, LinkType::ETHERNET, 0, None, Some(0x80 | 30))); // 2^-30
    f.extend(idb(be, LinkType::ETHERNET, 0, None, Some(127))); // 10^-127
    f.extend(epb(be, 0, 1500, &[], 0, &[]));
    f.extend(epb(be, 1, 1_500_000, &[], 0, &[]));
    f.extend(epb(be, 2, 3 << 29, &[], 0, &[]));
    f.extend(epb(be, 3, u64::MAX, &[], 0, &[]));
    f.extend(epb(be, 0, u64::MAX, &[], 0, &[]));
    let ts: Vec<u64> = read_ok(&f).iter().map(|r| r.ts_ns).collect();
    assert_eq!(ts, [1_500_000_000, 1_500, 1_500_000_000, 0, u64::MAX]);
}

#[test]
fn pcapng_two_sections_reset_interfaces() {
    let mut f = simple_ng(false);
    let first = f.len() as u64;
    // Second section, other byte order, one RAW interface.
    f.extend(shb(true));
    f.extend(idb(true, LinkType::RAW, 0, Some("second"), Some(9)));
    f.extend(epb(true, 0, 42, &[5; 5], 5, &[]));
    let recs = read_ok(&f);
    assert_eq!(recs.len(), 3);
    assert_eq!(recs[2].number, 3);
    assert_eq!(recs[2].interface, 1, "interface ids count over all sections");
    assert_eq!(recs[2].link, LinkType::RAW);
    assert_eq!(recs[2].ts_ns, 42);
    assert_eq!(recs[2].data, [5; 5]);
    assert!(recs[2].file_offset > first);
    let mut r = Reader::new(&f[..]).unwrap();
    while r.next_packet().unwrap().is_some() {}
    assert_eq!(r.interfaces().len(), 2);
    assert_eq!(r.interfaces()[1].section, 1);

    // In the second section, interface 1 is not declared even though the file has two.
    let mut g = simple_ng(false);
    g.extend(shb(false));
    g.extend(idb(false, LinkType::RAW, 0, None, None));
    g.extend(epb(false, 1, 42, &[5; 5], 5, &[]));
    let (recs, e) = read_err(&g);
    assert_eq!(recs.len(), 2);
    assert!(matches!(e.kind(), ErrorKind::UndeclaredInterface { id: 1, declared: 1 }), "{e:?}");
    assert_eq!(e.frame(), Some(3));
}

#[test]
fn pcapng_undeclared_interface_is_an_error() {
    let mut f = shb(false);
    f.extend(epb(false, 0, 1, &[1], 1, &[]));
    let (_, e) = read_err(&f);
    assert!(matches!(e.kind(), ErrorKind::UndeclaredInterface { id: 0, declared: 0 }));
    assert_eq!(e.offset(), Some(shb(false).len() as u64));
    assert!(e.to_string().contains("declares only 0 interfaces"), "{e}");
}

#[test]
fn pcapng_simple_packet_block() {
    for be in [false, true] {
        let mut f = shb(be);
        f.extend(idb(be, LinkType::ETHERNET, 8, None, None));
        // orig_len 20 > snaplen 8: caplen is 8; the block carries padding beyond.
        f.extend(B::new(be).u32(20).padded(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]).block(3));
        // orig_len 3 < snaplen: caplen 3 (the rest is padding).
        f.extend(B::new(be).u32(3).padded(&[7, 8, 9]).block(3));
        let recs = read_ok(&f);
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].data, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(recs[0].orig_len, 20);
        assert_eq!(recs[0].ts_ns, 0);
        assert_eq!(recs[1].data, [7, 8, 9]);
        assert_eq!(recs[1].interface, 0);
    }
    // Without an IDB: error.
    let mut f = shb(false);
    f.extend(B::new(false).u32(3).padded(&[7, 8, 9]).block(3));
    assert!(matches!(read_err(&f).1.kind(), ErrorKind::UndeclaredInterface { .. }));
}

#[test]
fn pcapng_obsolete_packet_block() {
    let be = true;
    let mut f = shb(be);
    f.extend(idb(be, LinkType::ETHERNET, 0, None, None));
    f.extend(idb(be, LinkType::RAW, 0, None, None));
    f.extend(
        B::new(be)
            .u16(1) // interface
            .u16(0) // drops
            .u32(0)
            .u32(2_000_000)
            .u32(3)
            .u32(30)
            .padded(&[1, 2, 3])
            .opt(1, b"old")
            .opt(2, &B::new(be).u32(1).v)
            .end_opts()
            .block(2),
    );
    let recs = read_ok(&f);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].interface, 1);
    assert_eq!(recs[0].link, LinkType::RAW);
    assert_eq!(recs[0].ts_ns, 2_000_000_000);
    assert_eq!(recs[0].data, [1, 2, 3]);
    assert_eq!(recs[0].orig_len, 30);
    assert_eq!(recs[0].comment.as_deref(), Some("old"));
    assert_eq!(recs[0].direction, Some(Direction::Inbound));
}

#[test]
fn pcapng_skips_other_blocks() {
    let be = false;
    let mut f = shb(be);
    f.extend(B::new(be).u16(1).u16(8).raw(&[10, 0, 0, 1]).padded(b"host").u32(0).block(4)); // NRB
    f.extend(idb(be, LinkType::ETHERNET, 0, None, None));
    f.extend(B::new(be).u32(0).u32(0).u32(0).end_opts().block(5)); // ISB
    f.extend(B::new(be).u32(0x12345678).padded(b"whatever").block(0x0000_0BAD)); // custom
    f.extend(B::new(be).padded(b"\x01\x02\x03").block(0x7777_7777)); // unknown
    f.extend(B::new(be).u32(0x544c_534b).u32(0).block(0x0A)); // DSB
    f.extend(B::new(be).block(0x99)); // empty unknown block, 12 bytes
    f.extend(epb(be, 0, 1, &[9], 1, &[]));
    let recs = read_ok(&f);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].data, [9]);
}

#[test]
fn pcapng_bad_block_lengths() {
    let base = simple_ng(false);
    let first_epb = shb(false).len() + idb(false, LinkType::ETHERNET, 0, Some("eth0"), None).len();
    // Not a multiple of 4.
    let mut f = base.clone();
    f[first_epb + 4] += 1;
    let (recs, e) = read_err(&f);
    assert!(recs.is_empty());
    assert!(e.to_string().contains("multiple of 4"), "{e}");
    assert_eq!(e.offset(), Some(first_epb as u64));
    // Trailing copy differs: make the length 4 bigger (still inside the file).
    let mut f = base.clone();
    f[first_epb + 4] += 4;
    let (_, e) = read_err(&f);
    assert!(e.to_string().contains("trailing copy"), "{e}");
    // Too big.
    let mut f = base.clone();
    f[first_epb + 4..first_epb + 8].copy_from_slice(&(64u32 << 20).to_le_bytes());
    let (_, e) = read_err(&f);
    assert!(e.to_string().contains("16 MiB"), "{e}");
    // Less than 12.
    let mut f = base.clone();
    f[first_epb + 4..first_epb + 8].copy_from_slice(&8u32.to_le_bytes());
    assert!(read_err(&f).1.to_string().contains("claims length 8"));
    // EPB caplen larger than the block.
    let mut f = base;
    f[first_epb + 20..first_epb + 24].copy_from_slice(&1000u32.to_le_bytes());
    let (_, e) = read_err(&f);
    assert!(e.to_string().contains("room for"), "{e}");
    assert_eq!(e.frame(), Some(1));
}

#[test]
fn pcapng_bad_shb() {
    let mut f = simple_ng(false);
    f[8..12].copy_from_slice(&[1, 2, 3, 4]);
    let e = Reader::new(&f[..]).unwrap_err();
    assert!(e.to_string().contains("byte-order magic"), "{e}");
    let mut f = simple_ng(false);
    f[12] = 2; // major version 2
    let e = Reader::new(&f[..]).unwrap_err();
    assert!(e.to_string().contains("pcapng version 2.0"), "{e}");
}

#[test]
fn large_block_grows_the_buffer() {
    let big = vec![0x5a; 300_000];
    let mut f = shb(false);
    f.extend(idb(false, LinkType::ETHERNET, 0, None, None));
    f.extend(epb(false, 0, 1, &big, 300_000, &[]));
    f.extend(epb(false, 0, 2, &[1], 1, &[]));
    let recs = read_ok(&f);
    assert_eq!(recs[0].data, big);
    assert_eq!(recs[1].data, [1]);
}

#[test]
fn invalid_utf8_comment_keeps_the_valid_prefix() {
    let mut f = shb(false);
    f.extend(idb(false, LinkType::ETHERNET, 0, None, None));
    f.extend(epb(false, 0, 1, &[1], 1, &[(1, b"ok\xffno")]));
    f.extend(epb(false, 0, 1, &[1], 1, &[(1, b"nul\0")]));
    let recs = read_ok(&f);
    assert_eq!(recs[0].comment.as_deref(), Some("ok"));
    assert_eq!(recs[1].comment.as_deref(), Some("nul"));
}

#[test]
fn long_interface_names_are_cut() {
    let long = "é".repeat(1000);
    let mut f = shb(false);
    f.extend(idb(false, LinkType::ETHERNET, 0, Some(&long), None));
    f.extend(epb(false, 0, 1, &[1], 1, &[]));
    let mut r = Reader::new(&f[..]).unwrap();
    r.next_packet().unwrap().unwrap();
    let name = r.interfaces()[0].name.clone().unwrap();
    assert_eq!(name, "é".repeat(128));
}

// ---------- truncation ----------

/// Every prefix of `f` either fails to open, or yields a prefix of the full records
/// and then a clean end or an error; never a panic, never a different record.
fn check_prefixes(f: &[u8]) {
    let full = read_ok(f);
    for n in 0..f.len() {
        let (recs, err) = read_all(&f[..n]);
        assert!(recs.len() <= full.len());
        for (a, b) in recs.iter().zip(&full) {
            assert_eq!(a, b, "prefix {n}");
        }
        if let Some(e) = &err {
            if e.is_truncated() {
                assert_eq!(e.complete_frames(), Some(recs.len() as u64), "prefix {n}: {e}");
            }
        } else if recs.len() < full.len() {
            // A clean end must fall on a record boundary.
            let next = &full[recs.len()];
            assert!(
                next.file_offset >= n as u64,
                "prefix {n} ended cleanly inside frame {}",
                next.number
            );
        }
    }
}

#[test]
fn truncation_at_every_length() {
    check_prefixes(&pcap_file(
        false,
        true,
        1,
        65535,
        &[(1, 2, &[1; 10], 10), (3, 4, &[2; 7], 7), (5, 6, &[], 0)],
    ));
    check_prefixes(&pcap_file(true, false, 1, 65535, &[(1, 2, &[1; 10], 10)]));
    let mut f = simple_ng(true);
    f.extend(shb(false));
    f.extend(idb(false, LinkType::RAW, 0, None, None));
    f.extend(B::new(false).u32(3).padded(&[7, 8, 9]).block(3));
    check_prefixes(&f);
    // A pcapng file cut inside a packet block reports the frame number.
    let g = simple_ng(false);
    let (recs, e) = read_err(&g[..g.len() - 1]);
    assert_eq!(recs.len(), 1);
    assert!(e.is_truncated());
    assert_eq!(e.frame(), Some(2));
}

// ---------- writer → reader ----------

#[test]
fn writer_round_trip_fixed() {
    let mut w = PcapngWriter::new(Vec::new(), "roce").unwrap();
    let a = w.add_interface(LinkType::ETHERNET, 0, Some("eth0")).unwrap();
    let b = w.add_interface(LinkType::LINUX_SLL2, 4, None).unwrap();
    w.write_packet(&OutPacket {
        interface: b,
        ts_ns: u64::MAX,
        data: &[1, 2, 3, 4, 5, 6],
        orig_len: 6,
        direction: Some(Direction::Inbound),
        comment: Some("ü"),
    })
    .unwrap();
    w.write_packet(&OutPacket::new(a, 0, &[])).unwrap();
    let bytes = w.into_inner().unwrap();
    let mut r = Reader::new(&bytes[..]).unwrap();
    let rec = r.next_packet().unwrap().unwrap();
    assert_eq!(rec.data, [1, 2, 3, 4]);
    assert_eq!(rec.orig_len, 6);
    assert_eq!(rec.ts_ns, u64::MAX);
    assert_eq!(rec.link, LinkType::LINUX_SLL2);
    assert_eq!(rec.comment, Some("ü"));
    assert_eq!(rec.direction, Some(Direction::Inbound));
    let rec = r.next_packet().unwrap().unwrap();
    assert_eq!((rec.number, rec.interface, rec.data.len()), (2, 0, 0));
    assert!(r.next_packet().unwrap().is_none());
    assert_eq!(r.interfaces()[0].name.as_deref(), Some("eth0"));
    assert_eq!(r.interfaces()[1].tsresol, 9);
}

#[derive(Debug, Clone)]
struct P {
    iface: u32,
    ts: u64,
    data: Vec<u8>,
    extra: u32,
    dir: Option<Direction>,
    comment: Option<String>,
}

fn packet() -> impl Strategy<Value = P> {
    (
        0u32..3,
        any::<u64>(),
        proptest::collection::vec(any::<u8>(), 0..300),
        prop_oneof![Just(0u32), 0u32..2000],
        prop_oneof![Just(None), Just(Some(Direction::Inbound)), Just(Some(Direction::Outbound))],
        proptest::option::of("\\PC{0,20}"),
    )
        .prop_map(|(iface, ts, data, extra, dir, comment)| P {
            iface,
            ts,
            data,
            extra,
            dir,
            comment,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn pcapng_round_trip(packets in proptest::collection::vec(packet(), 0..40)) {
        let links = [LinkType::ETHERNET, LinkType::RAW, LinkType::LINUX_SLL];
        let snaps = [0u32, 100, 65535];
        let mut w = PcapngWriter::new(Vec::new(), "proptest").unwrap();
        for i in 0..3 {
            w.add_interface(links[i], snaps[i], Some(&format!("if{i}"))).unwrap();
        }
        for p in &packets {
            w.write_packet(&OutPacket {
                interface: p.iface,
                ts_ns: p.ts,
                data: &p.data,
                orig_len: p.data.len() as u32 + p.extra,
                direction: p.dir,
                comment: p.comment.as_deref(),
            }).unwrap();
        }
        let bytes = w.into_inner().unwrap();
        let recs = read_ok(&bytes);
        prop_assert_eq!(recs.len(), packets.len());
        for (i, (r, p)) in recs.iter().zip(&packets).enumerate() {
            let snap = snaps[p.iface as usize];
            let cap = if snap == 0 { p.data.len() } else { p.data.len().min(snap as usize) };
            prop_assert_eq!(r.number, i as u64 + 1);
            prop_assert_eq!(r.interface, p.iface);
            prop_assert_eq!(r.link, links[p.iface as usize]);
            prop_assert_eq!(r.ts_ns, p.ts);
            prop_assert_eq!(&r.data[..], &p.data[..cap]);
            prop_assert_eq!(r.orig_len, p.data.len() as u32 + p.extra);
            prop_assert_eq!(r.direction, p.dir);
            prop_assert_eq!(r.comment.as_deref(), p.comment.as_deref());
        }
    }

    #[test]
    fn pcap_round_trip(packets in proptest::collection::vec((0u64..4_000_000_000_000_000_000, proptest::collection::vec(any::<u8>(), 0..300), 0u32..100), 0..40)) {
        let mut w = PcapWriter::new(Vec::new(), LinkType::RAW, 200).unwrap();
        for (ts, data, extra) in &packets {
            w.write_packet(*ts, data, data.len() as u32 + extra).unwrap();
        }
        let bytes = w.into_inner().unwrap();
        let r = Reader::new(&bytes[..]).unwrap();
        prop_assert_eq!(r.format(), Format::Pcap { nanos: true, big_endian: false, link: LinkType::RAW, snaplen: 200 });
        let recs = read_ok(&bytes);
        prop_assert_eq!(recs.len(), packets.len());
        for (r, (ts, data, extra)) in recs.iter().zip(&packets) {
            prop_assert_eq!(r.ts_ns, *ts);
            prop_assert_eq!(&r.data[..], &data[..data.len().min(200)]);
            prop_assert_eq!(r.orig_len, data.len() as u32 + extra);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let _ = read_all(&bytes);
    }

    #[test]
    fn arbitrary_bytes_after_a_magic_never_panic(
        which in 0usize..6,
        bytes in proptest::collection::vec(any::<u8>(), 0..2000),
    ) {
        let mut f = match which {
            0 => pcap_file(false, false, 1, 65535, &[]),
            1 => pcap_file(true, true, 1, 0, &[]),
            2 => pcap_file(false, true, 1, 10, &[]),
            3 => shb(false),
            4 => { let mut f = shb(true); f.extend(idb(true, LinkType::ETHERNET, 0, None, Some(0x85))); f }
            _ => { let mut f = shb(false); f.extend(idb(false, LinkType::RAW, 16, None, None)); f }
        };
        f.extend(bytes);
        let _ = read_all(&f);
    }

    #[test]
    fn corrupted_files_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut f = simple_ng(false);
        f.extend(shb(true));
        f.extend(idb(true, LinkType::RAW, 0, Some("x"), Some(0x8a)));
        f.extend(epb(true, 0, 5, &[1, 2, 3], 3, &[(1, b"c"), (2, &[0, 0, 0, 1])]));
        f.extend(B::new(true).u32(3).padded(&[7, 8, 9]).block(3));
        for (i, v) in &edits {
            let i = i.index(f.len());
            f[i] = *v;
        }
        let n = cut.index(f.len() + 1);
        let _ = read_all(&f[..n]);
        let mut p = pcap_file(true, false, 1, 65535, &[(1, 2, &[1; 10], 10), (3, 4, &[2; 7], 7)]);
        for (i, v) in &edits {
            let i = i.index(p.len());
            p[i] = *v;
        }
        let _ = read_all(&p);
    }
}

/// Records from two interfaces of different link types keep theirs; the file exists
/// only once committed.
#[test]
fn record_file_keeps_interfaces_and_appears_on_commit() {
    let dir = std::env::temp_dir().join(format!("roce-recordfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("out.pcapng");
    let rec = |number, interface, link, data: &'static [u8]| Record {
        number,
        ts_ns: 1_000 * number,
        link,
        interface,
        orig_len: data.len() as u32 + 2,
        data,
        file_offset: 0,
        direction: None,
        comment: None,
    };
    let mut f = RecordFile::create(&path, "test").unwrap();
    f.write(&rec(1, 0, LinkType::ETHERNET, b"abc")).unwrap();
    f.write(&rec(2, 3, LinkType::RAW, b"de")).unwrap();
    f.write(&rec(3, 0, LinkType::ETHERNET, b"f")).unwrap();
    assert!(!path.exists(), "nothing under the real name before commit");
    f.commit().unwrap();
    let mut r = open(&path).unwrap();
    let mut got = Vec::new();
    while let Some(x) = r.next_packet().unwrap() {
        got.push((x.number, x.ts_ns, x.interface, x.link, x.data.to_vec(), x.orig_len));
    }
    assert_eq!(
        got,
        vec![
            (1, 1_000, 0, LinkType::ETHERNET, b"abc".to_vec(), 5),
            (2, 2_000, 1, LinkType::RAW, b"de".to_vec(), 4),
            (3, 3_000, 0, LinkType::ETHERNET, b"f".to_vec(), 3),
        ]
    );
    // Dropped without commit: no file, no temporary left behind.
    let other = dir.join("gone.pcapng");
    drop(RecordFile::create(&other, "test").unwrap());
    assert!(!other.exists() && std::fs::read_dir(&dir).unwrap().count() == 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
