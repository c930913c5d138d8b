//! One insta snapshot of `roce decode` and one of `roce flows` per capture in
//! `captures/` (snapshots in `captures/snapshots/`). Review changes with
//! `cargo insta review`; regenerate deliberately, never blindly.

use roce_tests::roce;

#[test]
fn decode_and_flows_of_every_capture() {
    insta::glob!("../../captures", "**/*.{pcap,pcapng}", |path| {
        let p = path.to_str().expect("utf-8 path");
        let d = roce(&["decode", p]);
        let f = roce(&["flows", p]);
        insta::with_settings!({
            snapshot_path => "../../captures/snapshots",
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!("decode", format!("exit {}\n{}{}", d.code, d.out, d.err));
            insta::assert_snapshot!("flows", format!("exit {}\n{}{}", f.code, f.out, f.err));
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
