//! `roce decode -T parquet` and `roce flows --parquet`, read back by pyarrow — an
//! independent reader — and checked against `roce`'s own `-T fields` and `--json`
//! output: every column typed as its field, every value equal, on every capture in
//! `captures/`, across row groups. pyarrow lives in its own virtualenv
//! (`scripts/setup.sh --test` makes it; `ROCE_PYTHON` names another Python).
use std::path::PathBuf;
use std::process::Command;

use roce_tests::{captures, roce, root, scratch, temporaries};

/// Every type of column: integers printed in decimal and in hex, a flag, a
/// timestamp and relative times, addresses, lists (`ip.addr`, `udp.port`), bytes
/// and text.
const FIELDS: &[&str] = &[
    "frame.number",
    "frame.len",
    "frame.time_epoch",
    "frame.time_relative",
    "frame.time_delta",
    "eth.src",
    "ip.src",
    "ip.addr",
    "udp.port",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.a",
    "infiniband.aeth.syndrome",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.immdt",
    "_ws.col.Info",
];

fn python() -> PathBuf {
    let py = std::env::var_os("ROCE_PYTHON").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/roce/py/bin/python")
    });
    let ok = Command::new(&py).args(["-c", "import pyarrow"]).status().is_ok_and(|s| s.success());
    assert!(
        ok,
        "no pyarrow at {}: `bash scripts/setup.sh --test` installs it (or set ROCE_PYTHON)",
        py.display()
    );
    py
}

fn check(args: &[&str]) -> String {
    let out = Command::new(python())
        .arg(root().join("tests/parquet/check_parquet.py"))
        .args(args)
        .output()
        .expect("python runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}:\n{text}");
    text
}

fn fields_args(fields: &[&str]) -> Vec<String> {
    fields.iter().flat_map(|f| ["-e".to_string(), f.to_string()]).collect()
}

#[test]
#[ignore = "needs pyarrow: bash scripts/setup.sh --test"]
fn every_capture_reads_back_typed_and_equal_to_fields() {
    let tmp = scratch();
    let caps = captures();
    assert!(caps.len() >= 20, "the captures in captures/ and captures/lab/");
    for (i, cap) in caps.iter().enumerate() {
        let cap = cap.to_str().unwrap();
        let pq = tmp.join(format!("{i}.parquet"));
        let txt = tmp.join(format!("{i}.txt"));
        // Row groups of 7 rows: lists and nulls cross group boundaries.
        let mut args = vec![
            "decode".to_string(),
            "-r".into(),
            cap.into(),
            "-T".into(),
            "parquet".into(),
            "--row-group".into(),
            "7".into(),
            "-w".into(),
        ];
        args.push(pq.to_str().unwrap().into());
        args.extend(fields_args(FIELDS));
        let r = roce(&args);
        assert_eq!(r.code, 0, "{cap}: {}", r.err);
        assert!(r.out.is_empty(), "-T parquet prints nothing: {}", r.out);
        let mut args =
            vec!["decode".to_string(), "-r".into(), cap.into(), "-T".into(), "fields".into()];
        args.extend(fields_args(FIELDS));
        let f = roce(&args);
        assert_eq!(f.code, 0, "{cap}: {}", f.err);
        std::fs::write(&txt, &f.out).unwrap();
        let mut a = vec![pq.to_str().unwrap(), txt.to_str().unwrap()];
        a.extend(FIELDS);
        let said = check(&a);
        assert!(said.contains("equal to -T fields"), "{cap}: {said}");
        assert_eq!(temporaries(pq.parent().unwrap()), Vec::<String>::new(), "no temporary left");
    }
}

/// A display filter keeps the same frames in both outputs.
#[test]
#[ignore = "needs pyarrow: bash scripts/setup.sh --test"]
fn a_display_filter_applies_to_parquet_too() {
    let tmp = scratch();
    let cap = root().join("captures/lab/rc_drop_retransmit.pcapng");
    let (pq, txt) = (tmp.join("filtered.parquet"), tmp.join("filtered.txt"));
    let base = |t: &str| -> Vec<String> {
        let mut v: Vec<String> = [
            "decode",
            "-r",
            cap.to_str().unwrap(),
            "-Y",
            "infiniband.aeth.syndrome != 0x1f",
            "-T",
            t,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(fields_args(FIELDS));
        v
    };
    let mut a = base("parquet");
    a.extend(["-w".to_string(), pq.to_str().unwrap().to_string()]);
    assert_eq!(roce(&a).code, 0);
    let f = roce(&base("fields"));
    assert_eq!(f.lines_nonempty(), 1, "one NAK in that capture: {}", f.out);
    std::fs::write(&txt, &f.out).unwrap();
    let mut c = vec![pq.to_str().unwrap(), txt.to_str().unwrap()];
    c.extend(FIELDS);
    assert!(check(&c).starts_with("1 rows"));
}

trait Lines {
    fn lines_nonempty(&self) -> usize;
}
impl Lines for roce_tests::Run {
    fn lines_nonempty(&self) -> usize {
        self.out.lines().filter(|l| !l.is_empty()).count()
    }
}

#[test]
#[ignore = "needs pyarrow: bash scripts/setup.sh --test"]
fn flows_tables_read_back_equal_to_the_json_report() {
    let tmp = scratch();
    for name in [
        "lab/rc_drop_retransmit.pcapng",
        "lab/requester_ghost_ack.pcapng",
        "congestion.pcap",
        "lab/read_bw.pcapng",
        "lab/rping.pcapng",
    ] {
        let cap = root().join("captures").join(name);
        let dir = tmp.join(format!("flows-{}", name.replace('/', "_")));
        let json = tmp.join(format!("flows-{}.json", name.replace('/', "_")));
        let r = roce(&["flows", "-r", cap.to_str().unwrap(), "--parquet", dir.to_str().unwrap()]);
        assert_eq!(r.code, 0, "{name}: {}", r.err);
        let j = roce(&["flows", "-r", cap.to_str().unwrap(), "--json"]);
        std::fs::write(&json, &j.out).unwrap();
        let said = check(&["--flows", dir.to_str().unwrap(), json.to_str().unwrap()]);
        assert!(said.contains("equal to the JSON report"), "{name}: {said}");
    }
}

/// Bad use is said before anything is read, and nothing half-written is left.
#[test]
fn parquet_needs_a_file_and_fields_and_leaves_nothing_half_written() {
    let tmp = scratch();
    let cap = root().join("captures/lab/rc_pingpong.pcapng");
    let cap = cap.to_str().unwrap();
    let r = roce(&["decode", "-r", cap, "-T", "parquet", "-e", "frame.number"]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("-w FILE.parquet"), "{}", r.err);
    let out = tmp.join("never.parquet");
    let r = roce(&["decode", "-r", cap, "-T", "parquet", "-w", out.to_str().unwrap()]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("at least one -e FIELD"), "{}", r.err);
    let r = roce(&[
        "decode",
        "-r",
        cap,
        "-T",
        "parquet",
        "-w",
        out.to_str().unwrap(),
        "-e",
        "infiniband.bth.psnn",
    ]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("infiniband.bth.psn"), "did you mean: {}", r.err);
    assert!(!out.exists());
    assert_eq!(temporaries(out.parent().unwrap()), Vec::<String>::new(), "no temporary left");
    let r = roce(&[
        "decode",
        "-r",
        cap,
        "-T",
        "parquet",
        "-w",
        "/nonexistent/dir/x.parquet",
        "-e",
        "frame.number",
    ]);
    assert_eq!(r.code, 3, "{}", r.err);
    assert!(r.err.contains("/nonexistent/dir/x.parquet"), "{}", r.err);
}
