//! `roce decode -T parquet` and `roce flows --parquet`, read back by pyarrow — an
//! independent reader — and checked against `roce`'s own `-T fields` and `--json`
//! output: every column typed as its field, every value equal, on every capture in
//! `captures/`, across row groups. pyarrow lives in its own virtualenv
//! (`scripts/setup.sh --test` makes it; `ROCE_PYTHON` names another Python).
//! Several captures make a Hive-partitioned dataset, which DuckDB and Spark (local
//! mode, Java 17), in the same virtualenv, query to the same per-QP counts as
//! `roce flows`.
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
    python_with("pyarrow")
}

/// The test virtualenv's Python, which must be able to import `module`.
fn python_with(module: &str) -> PathBuf {
    let py = std::env::var_os("ROCE_PYTHON").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/roce/py/bin/python")
    });
    let ok = Command::new(&py)
        .args(["-c", &format!("import {module}")])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "no {module} at {}: `bash scripts/setup.sh --test` installs it (or set ROCE_PYTHON)",
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

/// What the guide's DuckDB and Spark query needs of every frame (docs/src/guide/parquet.md).
const QP_FIELDS: &[&str] = &[
    "frame.number",
    "roce.flow",
    "roce.transport",
    "infiniband.deth.srcqp",
    "infiniband.bth.psn",
    "roce.opcode.role",
    "roce.aeth.type",
    "infiniband.mad.mgmtclass",
];

/// The partition name of a capture below `captures/`: its path there, without the
/// extension (what `roce decode captures/ -T parquet -w DIR` names it).
fn partition_name(cap: &std::path::Path) -> String {
    let rel = cap.strip_prefix(root().join("captures")).unwrap();
    rel.with_extension("").to_str().unwrap().to_string()
}

/// Every capture in `captures/` decoded into one Hive-partitioned dataset (as the
/// guide's `roce decode captures/ -T parquet -w frames/`), and `roce flows --json` of
/// each capture under its partition name: the dataset and the reports' file.
fn qp_dataset(tmp: &roce_tests::Scratch) -> (PathBuf, PathBuf) {
    let ds = tmp.join("dataset");
    let mut args: Vec<String> = ["decode", root().join("captures").to_str().unwrap()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(["-T", "parquet", "-w", ds.to_str().unwrap()].map(String::from));
    args.extend(fields_args(QP_FIELDS));
    let r = roce(&args);
    assert_eq!(r.code, 0, "{}", r.err);
    let mut reports = serde_json::Map::new();
    for cap in captures() {
        let j = roce(&["flows", "-r", cap.to_str().unwrap(), "--json"]);
        assert_eq!(j.code, 0, "{}: {}", cap.display(), j.err);
        let v: serde_json::Value = serde_json::from_str(&j.out).unwrap();
        reports.insert(partition_name(&cap), v);
    }
    let json = tmp.join("reports.json");
    std::fs::write(&json, serde_json::Value::Object(reports).to_string()).unwrap();
    (ds, json)
}

/// How long a query engine may take over the dataset (Spark here: about 20 s).
const ENGINE_WITHIN_SECS: u64 = 300;

/// Runs `tests/parquet/SCRIPT DATASET QUERY REPORTS` with the Python that imports
/// `module`, in a scratch directory (where Spark may leave files), and checks what
/// it says: the counts equal, and counts that could differ — the captures hold
/// resends, NAKs and RNR NAKs.
fn query_counts_what_flows_counts(module: &str, script: &str, query: &str, engine: &str) {
    let tmp = scratch();
    let (ds, json) = qp_dataset(&tmp);
    let cwd = tmp.join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    // A deadline: a JVM that cannot start or bind hangs rather than fails.
    let out = Command::new("timeout")
        .args(["--kill-after=10", &ENGINE_WITHIN_SECS.to_string()])
        .arg(python_with(module))
        .arg(root().join("tests/parquet").join(script))
        .args([
            ds.as_os_str(),
            root().join("tests/parquet").join(query).as_os_str(),
            json.as_os_str(),
        ])
        .current_dir(&cwd)
        // Importing qp_compare.py would leave a __pycache__ in the source tree.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python runs");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() != Some(124),
        "{engine} did not finish within {ENGINE_WITHIN_SECS} s: {said}"
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains(&format!("{engine} equal to roce flows")), "{said}");
    let n = |what: &str| -> u64 {
        let before = said.split(&format!(" {what}")).next().unwrap();
        before.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(n("retransmissions") > 0 && n("NAKs") > 0 && n("RNR NAKs") > 0, "{said}");
    // Seen with --nocapture: how long the engine took.
    print!("{said}");
}

/// Every capture in `captures/` in one dataset, queried with DuckDB by the guide's
/// query: per QP, the same retransmissions, NAKs and RNR NAKs as `roce flows --json`
/// of each capture.
#[test]
#[ignore = "needs duckdb: bash scripts/setup.sh --test"]
fn duckdb_over_a_dataset_counts_what_flows_counts() {
    query_counts_what_flows_counts("duckdb", "check_duckdb.py", "qp_counts.sql", "DuckDB");
}

/// The same dataset, queried by the guide's Spark SQL in Spark's local mode: the
/// same counts.
#[test]
#[ignore = "needs pyspark and Java 17: bash scripts/setup.sh --test"]
fn spark_over_a_dataset_counts_what_flows_counts() {
    query_counts_what_flows_counts("pyspark", "check_spark.py", "qp_counts_spark.sql", "Spark");
}

/// The guide shows the queries the DuckDB and Spark tests run, word for word, and
/// they are one query: Spark SQL quotes the dotted names with backticks where DuckDB
/// has double quotes.
#[test]
fn the_guide_shows_the_query_the_test_runs() {
    let read = |p: &str| std::fs::read_to_string(root().join(p)).unwrap();
    let guide = read("docs/src/guide/parquet.md");
    let (duckdb, spark) =
        (read("tests/parquet/qp_counts.sql"), read("tests/parquet/qp_counts_spark.sql"));
    for (file, sql) in [("qp_counts.sql", &duckdb), ("qp_counts_spark.sql", &spark)] {
        assert!(
            guide.contains(sql.trim_end()),
            "docs/src/guide/parquet.md lacks tests/parquet/{file}"
        );
    }
    assert_eq!(duckdb.replace('"', "`"), spark, "the DuckDB and Spark queries differ");
    // The guide's PySpark lines, as check_spark.py runs them.
    let script = read("tests/parquet/check_spark.py");
    for line in [
        r#"spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")"#,
        r#".createOrReplaceTempView("frames")"#,
    ] {
        assert!(
            guide.contains(line) && script.contains(line),
            "{line}: in the guide and check_spark.py"
        );
    }
    for f in QP_FIELDS {
        assert!(guide.contains(&format!("-e {f}")), "the guide's decode command lacks -e {f}");
    }
}

/// Several captures make a dataset: one partition per capture, names escaped as
/// Hive does, all or nothing, and an existing dataset replaced only with --force.
#[test]
fn several_captures_make_a_partitioned_dataset_whole_or_not_at_all() {
    let tmp = scratch();
    let lab = root().join("captures/lab");
    let (a, b) = (lab.join("rc_pingpong.pcapng"), root().join("captures/rc_naks.pcap"));
    let odd = tmp.join("odd=name.pcap");
    std::fs::copy(&b, &odd).unwrap();
    let ds = tmp.join("ds");
    let run = |inputs: &[&std::path::Path], extra: &[&str]| {
        let mut args: Vec<String> = vec!["decode".into()];
        args.extend(inputs.iter().map(|p| p.to_str().unwrap().to_string()));
        args.extend(
            ["-T", "parquet", "-e", "frame.number", "-w", ds.to_str().unwrap()].map(String::from),
        );
        args.extend(extra.iter().map(|s| s.to_string()));
        roce(&args)
    };
    let r = run(&[&a, &b, &odd], &["-j", "2"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let mut parts: Vec<String> = std::fs::read_dir(&ds)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    parts.sort();
    assert_eq!(parts, ["capture=odd%3Dname", "capture=rc_naks", "capture=rc_pingpong"]);
    for p in &parts {
        let f = ds.join(p).join("part-0.parquet");
        let bytes = std::fs::read(&f).unwrap();
        assert!(bytes.starts_with(b"PAR1") && bytes.ends_with(b"PAR1"), "{}", f.display());
    }
    // Again: refused, the dataset untouched.
    let r = run(&[&a, &b], &[]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("--force"), "{}", r.err);
    assert!(ds.join("capture=odd%3Dname").exists());
    // A damaged capture: the file and frame are named, nothing is written, the old
    // dataset stays.
    let bad = tmp.join("cut.pcapng");
    let whole = std::fs::read(&a).unwrap();
    std::fs::write(&bad, &whole[..whole.len() - 10]).unwrap();
    let r = run(&[&a, &bad], &["--force"]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("cut.pcapng") && r.err.contains("frame "), "{}", r.err);
    assert!(r.err.contains("nothing was written"), "{}", r.err);
    assert!(ds.join("capture=odd%3Dname").exists(), "the old dataset is kept");
    assert_eq!(
        temporaries(tmp.join("x").parent().unwrap()),
        Vec::<String>::new(),
        "no temporary left"
    );
    // --force replaces it.
    let r = run(&[&lab], &["--force"]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(ds.join("capture=rc_drop_retransmit/part-0.parquet").is_file());
    assert!(!ds.join("capture=odd%3Dname").exists(), "replaced, not merged");
    assert_eq!(
        temporaries(tmp.join("x").parent().unwrap()),
        Vec::<String>::new(),
        "no temporary left"
    );
    // Other outputs take one capture.
    let r = roce(&["decode", lab.to_str().unwrap()]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("-T parquet"), "{}", r.err);
}

/// `roce flows --parquet DIR` of several captures: the flow table and the events,
/// each partitioned by capture; the text report of each capture under its name.
#[test]
fn flows_of_several_captures_make_partitioned_tables() {
    let tmp = scratch();
    let dir = tmp.join("flows");
    let (a, b) = (
        root().join("captures/lab/rc_drop_retransmit.pcapng"),
        root().join("captures/rc_naks.pcap"),
    );
    let r = roce(&[
        "flows",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--parquet",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.err);
    for t in ["flows", "events"] {
        for c in ["rc_drop_retransmit", "rc_naks"] {
            assert!(dir.join(format!("{t}/capture={c}/part-0.parquet")).is_file(), "{t} {c}");
        }
    }
    assert!(
        r.out.contains("== rc_drop_retransmit (") && r.out.contains("== rc_naks ("),
        "{}",
        r.out
    );
    let r = roce(&["flows", a.to_str().unwrap(), b.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("--json"), "{}", r.err);
}
