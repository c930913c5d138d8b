//! One insta snapshot of `roce decode`, one of `roce flows` and one of `roce
//! decode --normalised` (the wire snapshot's form) per capture in
//! `captures/` (snapshots in `captures/snapshots/`). Review changes with
//! `cargo insta review`; regenerate deliberately, never blindly.

use roce_tests::roce;

#[test]
fn decode_and_flows_of_every_capture() {
    insta::glob!("../../captures", "**/*.{pcap,pcapng}", |path| {
        let p = path.to_str().expect("utf-8 path");
        let d = roce(&["decode", p]);
        let f = roce(&["flows", p]);
        let n = roce(&["decode", "--normalised", p]);
        insta::with_settings!({
            snapshot_path => "../../captures/snapshots",
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!("decode", format!("exit {}\n{}{}", d.code, d.out, d.err));
            insta::assert_snapshot!("flows", format!("exit {}\n{}{}", f.code, f.out, f.err));
            insta::assert_snapshot!("normalised", format!("exit {}\n{}{}", n.code, n.out, n.err));
        });
    });
}

#[test]
fn verbose_and_json_of_one_capture() {
    let p = roce_tests::root().join("captures/rc_rdma.pcap");
    let p = p.to_str().unwrap();
    let v = roce(&["decode", "-V", "-c", "12", p]);
    assert_eq!(v.code, 0, "{}", v.err);
    insta::with_settings!({ snapshot_path => "../../captures/snapshots", prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_snapshot!("verbose@rc_rdma.pcap", v.out);
    });
    let j = roce(&["decode", "--json", p]);
    assert_eq!(j.code, 0);
    let lines: Vec<serde_json::Value> =
        j.out.lines().map(|l| serde_json::from_str(l).expect("valid JSON line")).collect();
    assert!(lines.len() > 20);
    assert_eq!(lines[0]["roce"]["opcode"], 10);
    assert_eq!(lines[0]["roce"]["reth"]["dmalen"], 64);
    assert_eq!(lines[0]["roce"]["icrc"]["ok"], true);
    assert_eq!(lines[1]["roce"]["aeth"]["type"], "ACK");
}

/// A change planted in a recorded wire that no expectation names shows in the
/// normal form, in the lines of the frame it touched: an extra duplicate ACK,
/// and an RNR NAK with another timer (its ICRC made good, so only the timer
/// differs). The same frames written again read the same.
#[test]
fn a_change_planted_in_the_wire_shows_in_its_normal_form() {
    use dissector::capture::{self, PcapWriter};
    use dissector::frame::{self, Options};
    use dissector::wire::icrc;

    let src = roce_tests::root().join("captures/rc_naks.pcap");
    let mut r = capture::open(&src).expect("the capture reads");
    let mut frames: Vec<(u64, Vec<u8>, dissector::LinkType)> = Vec::new();
    while let Some(rec) = r.next_packet().expect("undamaged") {
        frames.push((rec.ts_ns, rec.data.to_vec(), rec.link));
    }
    let dir = roce_tests::scratch();
    let normalised = |name: &str, frames: &[(u64, Vec<u8>, dissector::LinkType)]| {
        let sub = dir.join(name);
        std::fs::create_dir_all(&sub).unwrap();
        let path = sub.join("wire.pcap");
        let mut w =
            PcapWriter::new(std::fs::File::create(&path).unwrap(), frames[0].2, 65535).unwrap();
        for (ts, data, _) in frames {
            w.write_packet(*ts, data, data.len() as u32).unwrap();
        }
        drop(w);
        let run = roce(&["decode", "--normalised", path.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{}", run.err);
        run.out
    };
    let decoded = |data: &[u8], link| frame::decode(link, data, &Options::default());
    let same = normalised("same", &frames);
    // An ACK answered twice.
    let ack = frames
        .iter()
        .position(|(_, d, l)| {
            let f = decoded(d, *l);
            f.ib.as_ref().is_some_and(|ib| {
                ib.bth.opcode.0 == 0x11 && ib.aeth.is_some_and(|a| a.syndrome.0 >> 5 == 0)
            })
        })
        .expect("an ACK");
    let mut dup = frames.clone();
    dup.insert(ack + 1, frames[ack].clone());
    let with_dup = normalised("dup", &dup);
    // Every RNR NAK with another timer.
    let is_rnr = |d: &[u8], l| {
        decoded(d, l).ib.as_ref().and_then(|ib| ib.aeth).is_some_and(|a| a.syndrome.0 >> 5 == 1)
    };
    let mut timer = frames.clone();
    for (_, data, link) in timer.iter_mut().filter(|(_, d, l)| is_rnr(d, *l)) {
        let f = decoded(data, *link);
        let o = f.offsets;
        let syndrome = o.bth + 12;
        assert_eq!(
            Some(data[syndrome]),
            f.ib.as_ref().and_then(|ib| ib.aeth).map(|a| a.syndrome.0)
        );
        data[syndrome] = 0x20 | ((data[syndrome] + 2) & 0x1f);
        let kind = match f.net {
            frame::Net::Ipv4(_) => icrc::Net::Ipv4,
            _ => icrc::Net::Ipv6,
        };
        let crc = icrc::compute_covered(kind, &data[o.net..o.icrc], o.l4 - o.net, o.bth - o.net);
        data[o.icrc..o.icrc + 4].copy_from_slice(&icrc::to_wire(crc));
    }
    let with_timer = normalised("timer", &timer);

    let original = roce(&["decode", "--normalised", src.to_str().unwrap()]).out;
    assert_eq!(
        same.lines().skip(2).collect::<Vec<_>>(),
        original.lines().skip(2).collect::<Vec<_>>(),
        "written again, the same wire (the title names the file)"
    );
    // The lines one has more of than the other (`+` new, `-` gone), as many
    // times as it has more.
    let changed = |a: &str, b: &str| -> Vec<String> {
        let mut count: std::collections::BTreeMap<&str, i32> = Default::default();
        a.lines().for_each(|l| *count.entry(l.trim()).or_default() -= 1);
        b.lines().for_each(|l| *count.entry(l.trim()).or_default() += 1);
        count
            .into_iter()
            .flat_map(|(l, n)| {
                let sign = if n > 0 { '+' } else { '-' };
                (0..n.unsigned_abs()).map(move |_| format!("{sign}{l}"))
            })
            .collect()
    };
    let d = changed(&same, &with_dup);
    assert_eq!(d.len(), 1, "{d:?}\n{with_dup}");
    assert!(d[0].starts_with("+⟳ the line above, repeated"), "{d:?}");
    let d = changed(&same, &with_timer);
    assert_eq!(d.len(), 2, "{d:?}");
    assert!(d.iter().any(|l| l.starts_with("+RNR NAK") && l.contains("timer 14")), "{d:?}");
    assert!(d.iter().any(|l| l.starts_with("-RNR NAK") && l.contains("timer 12")), "{d:?}");
    assert!(!with_timer.contains("ICRC bad"), "{with_timer}");
}
