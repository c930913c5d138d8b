//! The CLI as a user meets it: exit codes, error messages that say what and where,
//! `-c`, `-w`, `-E`, `-G`, `--roce-port`, and the loopback hint.

use std::path::PathBuf;

use roce_tests::{copy_tree, roce, root, scratch, temporaries};

fn capture(name: &str) -> String {
    root().join("captures").join(name).to_str().expect("utf-8").to_string()
}

#[test]
fn not_a_capture_file_is_explained() {
    let tmp = scratch();
    let p = tmp.join("text.pcap");
    std::fs::write(&p, "this is not a capture\n").unwrap();
    let r = roce(&["decode", p.to_str().unwrap()]);
    assert_eq!(r.code, 2, "bad input: the one code for it, as in every command");
    assert!(r.err.contains("not a pcap or pcapng file"), "{}", r.err);
    assert!(r.err.contains("text.pcap"), "names the file: {}", r.err);
    assert!(r.out.is_empty());
}

#[test]
fn missing_file_names_the_path() {
    let r = roce(&["flows", "/nonexistent/x.pcap"]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("/nonexistent/x.pcap"), "{}", r.err);
}

#[test]
fn truncated_file_keeps_the_frames_before_the_damage() {
    let tmp = scratch();
    let bytes = std::fs::read(capture("rc_rdma.pcap")).unwrap();
    let p = tmp.join("cut.pcap");
    std::fs::write(&p, &bytes[..1000]).unwrap();
    let r = roce(&["decode", p.to_str().unwrap()]);
    assert_eq!(r.code, 2, "a damaged file is bad input");
    assert_eq!(r.out.lines().count(), 2, "the two complete frames are printed: {}", r.out);
    assert!(r.err.contains("frame 3"), "says where: {}", r.err);
    assert!(r.err.contains("2 frames were decoded before the error"), "{}", r.err);
    let f = roce(&["flows", p.to_str().unwrap()]);
    assert_eq!(f.code, 2);
    assert!(f.out.contains("2 frames: 2 RoCE"), "{}", f.out);
}

#[test]
fn unknown_field_suggests_the_right_one() {
    let r =
        roce(&["decode", "-T", "fields", "-e", "infiniband.bth.dstqp", &capture("rc_rdma.pcap")]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("did you mean 'infiniband.bth.destqp'"), "{}", r.err);
    assert!(r.out.is_empty(), "nothing half-printed");
}

#[test]
fn field_options_and_count() {
    let r = roce(&[
        "decode",
        "-c",
        "2",
        "-T",
        "fields",
        "-E",
        "header=y",
        "-E",
        "separator=,",
        "-e",
        "frame.number",
        "-e",
        "infiniband.bth.opcode",
        "-e",
        "infiniband.aeth.syndrome",
        "-e",
        "roce.aeth.type",
        &capture("rc_naks.pcap"),
    ]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(r.out, "frame.number,infiniband.bth.opcode,infiniband.aeth.syndrome,roce.aeth.type\n1,10,,\n2,17,98,NAK\n");
    let bad = roce(&[
        "decode",
        "-T",
        "fields",
        "-e",
        "frame.number",
        "-E",
        "colour=red",
        &capture("rc_naks.pcap"),
    ]);
    assert_eq!(bad.code, 2);
    assert!(bad.err.contains("unsupported"), "{}", bad.err);
}

#[test]
fn list_fields() {
    let r = roce(&["decode", "-G", "fields"]);
    assert_eq!(r.code, 0);
    assert!(r.out.lines().any(|l| l.starts_with("infiniband.bth.psn\t")));
    assert!(r.out.lines().any(|l| l.starts_with("roce.icrc.status\t")));
}

#[test]
fn write_copy_is_complete_and_readable() {
    let tmp = scratch();
    let out = tmp.join("copy.pcapng");
    let r =
        roce(&["decode", "-c", "5", "-w", out.to_str().unwrap(), &capture("rc_send_cm.pcapng")]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(temporaries(out.parent().unwrap()), Vec::<String>::new(), "temporary renamed away");
    let again = roce(&["decode", out.to_str().unwrap()]);
    assert_eq!(again.code, 0);
    assert_eq!(again.out, r.out, "the copy decodes to the same lines");
}

#[test]
fn extra_roce_port() {
    // malformed.pcap frame 18 is RoCE-shaped traffic to UDP port 53.
    let plain = roce(&[
        "decode",
        "-T",
        "fields",
        "-e",
        "infiniband.bth.opcode",
        &capture("malformed.pcap"),
    ]);
    let with = roce(&[
        "decode",
        "--roce-port",
        "53",
        "-T",
        "fields",
        "-e",
        "infiniband.bth.opcode",
        &capture("malformed.pcap"),
    ]);
    assert_eq!(plain.out.lines().nth(17), Some(""));
    assert_eq!(with.out.lines().nth(17), Some("4"));
}

#[test]
fn no_roce_frames_explains_rxe_loopback() {
    let tmp = scratch();
    // What a capture of two QPs on one rxe device looks like: ARP, nothing else.
    let out = tmp.join("arp.pcap");
    let f = std::fs::File::create(&out).unwrap();
    let mut w =
        dissector::capture::PcapWriter::new(f, dissector::LinkType::ETHERNET, 65535).unwrap();
    let mut arp = vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, 0x08, 0x06];
    arp.extend_from_slice(&[
        0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
    ]);
    w.write_packet(1_000, &arp, arp.len() as u32).unwrap();
    w.flush().unwrap();
    drop(w);
    let d = roce(&["decode", out.to_str().unwrap()]);
    assert_eq!(d.code, 0);
    assert!(d.err.contains("looped back inside the driver"), "{}", d.err);
    let f = roce(&["flows", out.to_str().unwrap()]);
    assert!(f.out.contains("looped back inside the driver"), "{}", f.out);
}

#[test]
fn usage_errors_exit_2() {
    let r = roce(&["decode", "--no-such-flag"]);
    assert_eq!(r.code, 2);
    let r = roce(&["decode"]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("no input"), "{}", r.err);
    let h = roce(&["--help"]);
    assert_eq!(h.code, 0);
    assert!(h.out.contains("decode") && h.out.contains("flows"));
}

#[test]
fn json_lines_parse() {
    let r = roce(&["decode", "--json", &capture("rc_send_cm.pcapng")]);
    assert_eq!(r.code, 0);
    let v: Vec<serde_json::Value> =
        r.out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(v[0]["mad"]["cm"]["type"], "REQ");
    assert_eq!(v[0]["mad"]["cm"]["local_qpn"], 0x11);
    assert_eq!(v[1]["mad"]["cm"]["type"], "REP");
    assert!(v.iter().all(|o| o["frame"]["number"].is_u64()));
    let f = roce(&["flows", "--json", &capture("rc_naks.pcap")]);
    let rep: serde_json::Value = serde_json::from_str(&f.out).unwrap();
    assert_eq!(rep["flows"][0]["naks"], 4);
    assert_eq!(rep["flows"][0]["nak_events"][0]["wc_status"], "IBV_WC_REM_ACCESS_ERR");
}

#[test]
#[ignore = "needs root (CAP_NET_RAW to capture on lo): bash scripts/test.sh runs it as root"]
fn live_capture_on_loopback_decodes_and_saves() {
    let tmp = scratch();
    use std::net::UdpSocket;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    // Only loopback: a sender bound to its own port, so the filter sees nothing else.
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port();
    let done = Arc::new(AtomicBool::new(false));
    let sender = {
        let done = done.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            // RC SEND Only to QP 0x12, PSN 5, payload "ping", ICRC left zero.
            let pkt = [
                4u8, 0, 0xff, 0xff, 0, 0, 0, 0x12, 0x80, 0, 0, 5, b'p', b'i', b'n', b'g', 0, 0, 0,
                0,
            ];
            while !done.load(Ordering::Relaxed) {
                let _ = sock.send_to(&pkt, "127.0.0.1:4791");
                std::thread::sleep(Duration::from_millis(50));
                if start.elapsed() > Duration::from_secs(20) {
                    roce::net::live::request_stop(); // deadline: never hang the suite
                    break;
                }
            }
        })
    };
    let out = tmp.join("live.pcapng");
    let filter = format!("udp src port {port} and udp dst port 4791");
    let r = roce(&["decode", "-i", "lo", "-f", &filter, "-c", "3", "-w", out.to_str().unwrap()]);
    done.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    assert_eq!(r.code, 0, "{}", r.err);
    let lines: Vec<&str> = r.out.lines().collect();
    assert_eq!(lines.len(), 3, "{}", r.out);
    for l in &lines {
        assert!(
            l.contains("127.0.0.1 → 127.0.0.1  RC SEND Only  QP=0x000012 PSN=5 AckReq Len=4"),
            "{l}"
        );
        assert!(l.contains("[BAD ICRC 0x00000000"), "the zero ICRC is flagged: {l}");
    }
    let again = roce(&["decode", out.to_str().unwrap()]);
    assert_eq!(again.out, r.out, "the -w copy holds the same frames");
}

/// Every seed scenario is a valid scenario file; a broken one is refused with every
/// problem at file:line:col, exit 2, and a hint.
#[test]
fn check_validates_the_seed_scenarios_and_locates_problems() {
    let tmp = scratch();
    let dir = root().join("scenarios");
    let r = roce(&["check", dir.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    let files = scenario_files().len();
    assert!(files >= 21, "the seed suite, faults included");
    assert_eq!(r.out.lines().filter(|l| l.starts_with("ok  ")).count(), files, "{}", r.out);
    // Every shipped fixture is used: one no scenario uses is setup nobody checks.
    let r = roce(&["check", dir.join("fixtures").to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(!r.err.contains("no scenario beside it uses"), "{}", r.err);
    assert!(r.out.contains("fixture  "), "{}", r.out);

    let text = std::fs::read_to_string(dir.join("rc_send_tcp.toml"))
        .unwrap()
        .replace("access = [\"local_write\"]", "access = [\"local_wirte\"]")
        .replace("opcode = \"IBV_WC_RECV\"", "opcode = \"IBV_WC_RECEIVE\"");
    let p = tmp.join("broken.toml");
    std::fs::write(&p, &text).unwrap();
    let r = roce(&["check", p.to_str().unwrap()]);
    assert_eq!(r.code, 2);
    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    assert!(r.err.contains(&format!("broken.toml:{}:", line_of("local_wirte"))), "{}", r.err);
    assert!(r.err.contains("hint: did you mean `local_write`?"), "{}", r.err);
    assert!(r.err.contains(&format!("broken.toml:{}:", line_of("IBV_WC_RECEIVE"))), "{}", r.err);
    assert!(r.err.contains("nothing was run"), "{}", r.err);

    let r = roce(&["check", "/nonexistent/dir"]);
    assert_ne!(r.code, 0);
    assert!(r.err.contains("/nonexistent/dir"), "{}", r.err);

    // Fault rules are checked with the rest: their own syntax, and what a scenario
    // must say instead (`from`/`qp`, known PSNs).
    let text = std::fs::read_to_string(dir.join("faults/write_drop_middle.toml")).unwrap();
    let p = beside_fixtures(&tmp.join(""), "faults").join("badfault.toml");
    std::fs::write(&p, text.replace("rule = \"drop psn=101 nth=1\"", "rule = \"drpo psn=101\""))
        .unwrap();
    let r = roce(&["check", p.to_str().unwrap()]);
    assert_eq!(r.code, 2);
    assert!(
        r.err.contains(&format!(
            "error: fault rule: unknown action `drpo` (at `drpo`)\n  --> {}:{}:8\n",
            p.display(),
            line_of_in(&text, "drop psn=101")
        )),
        "{}",
        r.err
    );
    // Its QP's fixed PSNs come from a fixture: without them, PSNs are random.
    let qp = tmp.join("fixtures/rc_q_mtu1024_fixed_psn.toml");
    let fixture = std::fs::read_to_string(&qp).unwrap();
    assert!(fixture.contains("\npsn = "), "{fixture}");
    let random_psns: String =
        fixture.lines().filter(|l| !l.starts_with("psn =")).map(|l| format!("{l}\n")).collect();
    std::fs::write(&qp, random_psns).unwrap();
    std::fs::write(&p, text.replace("nth=1\"", "nth=1 dir=a>b\"")).unwrap();
    let r = roce(&["check", p.to_str().unwrap()]);
    assert_eq!(r.code, 2);
    assert!(
        r.err.contains("`dir=` in a scenario's fault rule") && r.err.contains("say `from = \"a\"`"),
        "{}",
        r.err
    );
    assert!(
        r.err.contains("whose starting PSNs are random")
            && r.err.contains("psn = { a = 100, b = 500 }"),
        "{}",
        r.err
    );

    // A `respond` rule answers one requester: without `from` it cannot know whose
    // QP the answer goes to; its own keys are checked with the caret's token.
    let text = std::fs::read_to_string(dir.join("requester/ghost_ack.toml")).unwrap();
    std::fs::write(&p, text.replace("from = \"a\"\nqp = \"q\"\n", "")).unwrap();
    let r = roce(&["check", p.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(
        r.err.contains(&format!(
            "error: `respond` answers one requester: it needs `from` and `qp`\n  --> {}:{}:8\n",
            p.display(),
            line_of_in(&text, "respond op=")
        )),
        "{}",
        r.err
    );
    std::fs::write(&p, text.replace("with=ack rpsn=+8", "with=nak code=bogus")).unwrap();
    let r = roce(&["check", p.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(
        r.err.contains("unknown NAK code (at `bogus`)")
            && r.err.contains("codes are psn_sequence_error, invalid_request"),
        "{}",
        r.err
    );
    std::fs::write(&p, text.replace("real=lost", "real=lost reply-qp=0x11")).unwrap();
    let r = roce(&["check", p.to_str().unwrap()]);
    assert!(r.code == 2 && r.err.contains("`reply-qp=` in a scenario's fault rule"), "{}", r.err);

    // Faults need a switch in the wire: on real hosts without a bridge that is
    // bad input, nothing run, and the hint names the bridge.
    let out = tmp.join("faults-remote-out");
    let fault = dir.join("faults/write_drop_ack.toml");
    let r = roce(&[
        "run",
        "--endpoints",
        "a=127.0.0.1:1,b=127.0.0.1:2",
        "--out",
        out.to_str().unwrap(),
        fault.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(
        r.err.contains("need a switch in the wire")
            && r.err.contains("write_drop_ack.toml")
            && r.err.contains("--bridge HOST:PORT"),
        "{}",
        r.err
    );
    assert!(!out.exists(), "nothing was run, nothing written");

    // --bridge: with the agents' key, of the shape HOST:PORT, and the wire's
    // only source (it records, so -i and --pcap have nothing to add).
    let key = tmp.join("bridge.key");
    let _ = std::fs::remove_file(&key);
    let r = roce(&["agent", "--gen-key", key.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    let eps = "a=127.0.0.1:1,b=127.0.0.1:2";
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--endpoints", eps, "--out", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.push(fault.to_str().unwrap());
        roce(&args)
    };
    let r = run(&["--bridge", "127.0.0.1:3"]);
    assert!(r.code == 2 && r.err.contains("--key-file"), "{}", r.err);
    let k = key.to_str().unwrap();
    let r = run(&["--bridge", "nowhere", "--key-file", k]);
    assert!(r.code == 2 && r.err.contains("--bridge nowhere: not HOST:PORT"), "{}", r.err);
    let r = run(&["--bridge", "127.0.0.1:3", "--key-file", k, "-i", "lo"]);
    assert!(r.code == 2 && r.err.contains("cannot be used with"), "{}", r.err);
    assert!(!out.exists(), "nothing was run, nothing written");
    // Given a bridge, a fault scenario is run: here it stops at its agents.
    let r = run(&["--bridge", "127.0.0.1:3", "--key-file", k]);
    assert_eq!(r.code, 1, "{}{}", r.out, r.err);
    assert!(r.out.contains("connecting to endpoint a's agent at 127.0.0.1:1"), "{}", r.out);
}

/// A fixture given to `roce check` is checked through the scenarios beside it
/// that use it, and a problem it causes is shown at its line; `run` refuses it
/// as no scenario; `--fix` leaves it alone.
#[test]
fn a_fixture_is_checked_through_its_users() {
    let tmp = scratch();
    let srq = root().join("scenarios/conformance/srq");
    let sub = beside_fixtures(&tmp.join(""), "conformance/srq");
    for f in ["empty_rnr.toml", "ack_credits.toml"] {
        std::fs::copy(srq.join(f), sub.join(f)).unwrap();
    }
    let fixture = tmp.join("fixtures/transport/srq_s.toml");
    let r = roce(&["check", fixture.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.out.contains("used by 2 scenario files, checked with them"), "{}", r.out);
    assert!(r.out.contains("srq/empty_rnr.toml  3 cases"), "{}", r.out);
    // A bad key in the fixture: shown in it, for the scenarios that use it.
    let text = std::fs::read_to_string(&fixture).unwrap();
    std::fs::write(&fixture, text.replace("max_wr = 8", "max_wrs = 8")).unwrap();
    let r = roce(&["check", fixture.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.out);
    let line = line_of_in(&text, "max_wr = 8");
    assert!(r.err.contains(&format!("{}:{line}:", fixture.display())), "{}", r.err);
    assert!(r.err.contains("(in a fixture") && r.err.contains("empty_rnr.toml uses)"), "{}", r.err);
    std::fs::write(&fixture, &text).unwrap();
    // Run: not a scenario; nothing run.
    let r = roce(&["run", "--endpoints", "a=127.0.0.1:1,b=127.0.0.1:2", fixture.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("this is a fixture") && r.err.contains("roce check"), "{}", r.err);
    // --fix: left as it is, said so, no failure.
    let r = roce(&["check", "--fix", fixture.to_str().unwrap()]);
    assert_eq!((r.code, std::fs::read_to_string(&fixture).unwrap()), (0, text), "{}", r.err);
    assert!(r.err.contains("skipped") && r.err.contains("a fixture"), "{}", r.err);
    // A fixture nobody uses: its TOML alone, said as a warning.
    let lone = tmp.join("fixtures/lone.toml");
    std::fs::write(&lone, "[endpoints.a]\n").unwrap();
    let r = roce(&["check", lone.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.err.contains("no scenario beside it uses"), "{}", r.err);
}

/// `scenarios/fixtures` copied into `tmp`, so that a scenario's copy written at
/// `tmp/SUB/x.toml` finds the fixtures it `use`s (`../fixtures/…`) as the
/// original does; returns `tmp/SUB`.
fn beside_fixtures(tmp: &std::path::Path, sub: &str) -> PathBuf {
    if !tmp.join("fixtures").exists() {
        copy_tree(&root().join("scenarios/fixtures"), &tmp.join("fixtures"));
    }
    let d = tmp.join(sub);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn line_of_in(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

/// The scenario files of the seed suite, subdirectories included.
fn scenario_files() -> Vec<PathBuf> {
    toml_files(false)
}

/// Every TOML file below `scenarios/`, the fixtures' directories' too or not.
fn toml_files(fixtures: bool) -> Vec<PathBuf> {
    fn walk(d: &std::path::Path, fixtures: bool, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                if fixtures || p.file_name().is_none_or(|n| n != "fixtures") {
                    walk(&p, fixtures, out);
                }
            } else if p.extension().is_some_and(|x| x == "toml") {
                out.push(p);
            }
        }
    }
    let mut v = Vec::new();
    walk(&root().join("scenarios"), fixtures, &mut v);
    v
}

/// `roce schema` describes every key the seed scenarios use, where they use it: a
/// field the model gains without the schema knowing would fail here.
#[test]
fn schema_covers_the_seed_scenarios() {
    let r = roce(&["schema"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let schema: serde_json::Value = serde_json::from_str(&r.out).expect("JSON");
    let props = |def: Option<&str>| -> Vec<String> {
        let node = match def {
            None => &schema,
            Some(d) => &schema["$defs"][d],
        };
        node["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("no properties for {def:?}"))
            .keys()
            .cloned()
            .collect()
    };
    let check = |table: &toml::Value, def: Option<&str>, file: &str| {
        let known = props(def);
        for k in table.as_table().expect("table").keys() {
            assert!(
                known.contains(k),
                "{file}: key `{k}` is not in the schema of {def:?}: {known:?}"
            );
        }
    };
    let mut files = 0;
    // Fixtures too: a fixture holds any part of a scenario, `endpoints` included.
    for path in toml_files(true) {
        files += 1;
        let f = path.display().to_string();
        let v: toml::Value = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        check(&v, None, &f);
        for ep in v.get("endpoints").and_then(|e| e.as_table()).into_iter().flat_map(|t| t.values())
        {
            check(ep, Some("Endpoint"), &f);
        }
        for (key, def) in [("qp", "QpSpec"), ("mr", "MrSpec"), ("fault", "FaultSpec")] {
            for t in v.get(key).and_then(|x| x.as_array()).into_iter().flatten() {
                check(t, Some(def), &f);
            }
        }
        // A step's keys depend on its op: each must be in that op's schema.
        for t in v.get("step").and_then(|x| x.as_array()).into_iter().flatten() {
            let op = t["op"].as_str().expect("op");
            let variant = schema["$defs"]["Step"]["oneOf"]
                .as_array()
                .expect("Step is one schema per op")
                .iter()
                .find(|s| s["properties"]["op"]["const"] == op)
                .unwrap_or_else(|| panic!("{f}: op `{op}` is not in the schema"));
            let known: Vec<&String> =
                variant["properties"].as_object().expect("properties").keys().collect();
            for k in t.as_table().expect("table").keys() {
                assert!(
                    known.contains(&k),
                    "{f}: key `{k}` is not in the schema of op `{op}`: {known:?}"
                );
            }
        }
        if let Some(x) = v.get("expect") {
            check(x, Some("Expectations"), &f);
            for (key, def) in [
                ("completion", "CompletionExpect"),
                ("wire", "WireExpect"),
                ("memory", "MemoryExpect"),
            ] {
                for t in x.get(key).and_then(|y| y.as_array()).into_iter().flatten() {
                    check(t, Some(def), &f);
                }
            }
        }
    }
    assert!(files >= 21);
    // Unknown keys are refused by the schema as by the parser.
    assert_eq!(schema["additionalProperties"], serde_json::json!(false));
}

/// `roce run --endpoints` against an agent listening on loopback: the controller, the
/// protocol and the reports work end to end; this host has no RDMA device, so the
/// agent's Setup fails and the report says why, with exit 1 and a JUnit failure.
#[test]
#[ignore = "needs root (CAP_NET_RAW to capture on lo): bash scripts/test.sh runs it as root"]
fn run_against_a_remote_agent_reports_a_setup_failure_with_its_cause() {
    let tmp = scratch();
    // One agent per endpoint (an agent serves one controller connection at a time).
    let addrs: Vec<String> = (0..2)
        .map(|_| {
            format!(
                "127.0.0.1:{}",
                std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
            )
        })
        .collect();
    for a in &addrs {
        let a = a.clone();
        // Detached: the agents serve until the test process ends.
        std::thread::spawn(move || roce(&["agent", "--listen", &a]));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let junit = tmp.join("remote-junit.xml");
    let out = tmp.join("remote-out");
    let sc = root().join("scenarios/rc_send_tcp.toml");
    let eps = format!("a={},b={}", addrs[0], addrs[1]);
    // `roce run` of the scenario against the two agents, with `extra` options.
    let run_remote = |extra: &[&str]| {
        let mut args = vec!["run", "--endpoints", &eps, "--out", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.push(sc.to_str().unwrap());
        roce(&args)
    };
    let r = run_remote(&["--junit", junit.to_str().unwrap(), "-i", "lo"]);
    assert_eq!(r.code, 1, "{}\n{}", r.out, r.err);
    // -i: the scenario's wire was captured on the interface (nothing RoCE on lo).
    assert!(out.join("rc_send_tcp.pcapng").exists(), "{}", r.out);
    assert!(!r.out.contains("no capture was recorded"), "{}", r.out);
    assert!(r.out.contains("✗ RC SEND over a TCP exchange"), "{}", r.out);
    assert!(r.out.contains("run stopped: endpoint"), "{}", r.out);
    // No RDMA here: the agent says which verb failed and why, once, with the hint.
    assert!(
        r.out.contains("ibv_get_device_list failed") || r.out.contains("opening device"),
        "{}",
        r.out
    );
    assert!(
        r.out.contains("hint: this kernel has no RDMA stack") || r.out.contains("no RDMA devices"),
        "{}",
        r.out
    );
    assert_eq!(r.out.matches("hint:").count(), 1, "{}", r.out);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<testsuite name=\"roce run\" tests=\"1\""), "{xml}");
    assert!(xml.contains(" failures=\"1\"") && xml.contains("<failure message="), "{xml}");
    // --pcap: the wire is judged from the user's capture (here one with no RoCE at all).
    let r = run_remote(&["--pcap", &capture("raw_ip.pcap")]);
    assert_eq!(r.code, 1);
    assert!(
        r.out.contains("wire of QP q from a") && !r.out.contains("no capture was recorded"),
        "{}",
        r.out
    );
    let r = roce(&[
        "run",
        "--endpoints",
        "a=x:1,b=y:2",
        "--pcap",
        "p.pcap",
        sc.to_str().unwrap(),
        sc.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("--pcap holds the wire of one scenario"), "{}", r.err);
    let r = roce(&["run", "--endpoints", "a=nowhere", sc.to_str().unwrap()]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("HOST:PORT"), "{}", r.err);
}

/// `roce agent --listen … --key-file`: the controller must have the same key. With
/// it, the run gets as far as this host allows (no RDMA device: Setup fails, said
/// by the agent); with another key, or none, both sides say why, and nothing runs.
#[test]
fn a_keyed_agent_serves_only_a_controller_with_its_key() {
    let tmp = scratch();
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;
    let dir = tmp.join("keys");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (k1, k2) = (dir.join("agent.key"), dir.join("other.key"));
    for k in [&k1, &k2] {
        let r = roce(&["agent", "--gen-key", k.to_str().unwrap()]);
        assert_eq!(r.code, 0, "{}", r.err);
    }
    assert_eq!(std::fs::metadata(&k1).unwrap().permissions().mode() & 0o777, 0o600);
    let again = roce(&["agent", "--gen-key", k1.to_str().unwrap()]);
    assert_eq!(again.code, 2, "an existing key file is never overwritten: {}", again.err);
    // Refused before listening: a key on the command line, and a reachable
    // address without a key.
    let r = roce(&["agent", "--listen", "127.0.0.1:1", "--key", "00ff"]);
    assert!(r.code == 2 && r.err.contains("shows in `ps`"), "{}", r.err);
    let r = roce(&["agent", "--listen", "0.0.0.0:0"]);
    assert!(
        r.code == 2 && r.err.contains("no --key-file") && r.err.contains("--gen-key"),
        "{}",
        r.err
    );
    // --insecure is the way to do that on purpose: it listens, unauthenticated.
    let open = std::net::TcpListener::bind("0.0.0.0:0").unwrap().local_addr().unwrap().port();
    std::thread::spawn(move || {
        roce(&["agent", "--listen", &format!("0.0.0.0:{open}"), "--insecure"])
    });
    // The agent protocol's version (`protocol::VERSION`, read from its source so
    // this test follows each bump): an agent answers another one with an error,
    // not a hello.
    let proto = std::fs::read_to_string(root().join("harness/src/protocol/mod.rs")).unwrap();
    let version: u32 = proto
        .lines()
        .find_map(|l| l.strip_prefix("pub(crate) const VERSION: u32 = "))
        .and_then(|v| v.trim_end_matches(';').parse().ok())
        .expect("protocol::VERSION in harness/src/protocol/mod.rs");
    let hello = format!(r#"{{"msg":"hello","version":{version}}}"#);
    let hello = hello.as_bytes();
    let answer = (0..50)
        .find_map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            let mut s = std::net::TcpStream::connect(("127.0.0.1", open)).ok()?;
            s.set_read_timeout(Some(std::time::Duration::from_secs(5))).ok()?;
            s.write_all(&(hello.len() as u32).to_be_bytes()).ok()?;
            s.write_all(hello).ok()?;
            let mut len = [0u8; 4];
            s.read_exact(&mut len).ok()?;
            let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
            s.read_exact(&mut body).ok()?;
            Some(String::from_utf8_lossy(&body).into_owned())
        })
        .expect("an --insecure agent on 0.0.0.0 answers");
    assert!(answer.contains(r#""msg":"hello""#), "{answer}");

    let addrs: Vec<String> = (0..2)
        .map(|_| {
            format!(
                "127.0.0.1:{}",
                std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
            )
        })
        .collect();
    for a in &addrs {
        let (a, k) = (a.clone(), k1.to_str().unwrap().to_string());
        std::thread::spawn(move || roce(&["agent", "--listen", &a, "--key-file", &k]));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let sc = root().join("scenarios/rc_send_tcp.toml");
    let eps = format!("a={},b={}", addrs[0], addrs[1]);
    let out = tmp.join("keyed-out");
    let run = |key: Option<&std::path::Path>| {
        let mut args = vec![
            "run".to_string(),
            "--endpoints".into(),
            eps.clone(),
            "--out".into(),
            out.to_str().unwrap().into(),
        ];
        if let Some(k) = key {
            args.extend(["--key-file".into(), k.to_str().unwrap().into()]);
        }
        args.push(sc.to_str().unwrap().into());
        roce(&args)
    };
    let r = run(Some(&k1));
    assert_eq!(r.code, 1, "{}\n{}", r.out, r.err);
    assert!(
        r.out.contains("ibv_get_device_list failed") || r.out.contains("opening device"),
        "authenticated, then served up to Setup: {}",
        r.out
    );
    let r = run(Some(&k2));
    assert_eq!(r.code, 1, "{}\n{}", r.out, r.err);
    assert!(r.out.contains("could not prove it has our key"), "{}", r.out);
    let r = run(None);
    assert_eq!(r.code, 1, "{}\n{}", r.out, r.err);
    assert!(r.out.contains("this agent requires authentication"), "{}", r.out);
    // Limits: an agent that allows one MR refuses the scenario's two, says which
    // limit, and serves the next controller.
    let lim = format!(
        "127.0.0.1:{}",
        std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
    );
    {
        let (a, k) = (lim.clone(), k1.to_str().unwrap().to_string());
        std::thread::spawn(move || {
            roce(&["agent", "--listen", &a, "--key-file", &k, "--max-mrs", "1"])
        });
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let two_mrs = dir.join("two_mrs.toml");
    std::fs::write(&two_mrs, "name = 'two MRs'\n[endpoints.a]\n[[mr]]\nname = 'm1'\non = 'a'\nsize = 8\n[[mr]]\nname = 'm2'\non = 'a'\nsize = 8\n[[expect.memory]]\non = 'a'\nmr = 'm1'\nunchanged = true\n").unwrap();
    for _ in 0..2 {
        let r = roce(&[
            "run",
            "--endpoints",
            &format!("a={lim}"),
            "--key-file",
            k1.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            two_mrs.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 1, "{}\n{}", r.out, r.err);
        assert!(
            r.out.contains("refused: 2 MRs asked, this agent allows 1 (--max-mrs)"),
            "{}",
            r.out
        );
    }
    // A key file others can read is refused, with the fix.
    std::fs::set_permissions(&k1, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = run(Some(&k1));
    assert_eq!(r.code, 2, "{}\n{}", r.out, r.err);
    assert!(r.err.contains("chmod 600"), "{}", r.err);
}

/// A stand-in agent on loopback that speaks the agent protocol (4-byte big-endian
/// length, then JSON) and says at Setup that the device lacks a verb, as a real
/// agent does when a verb returns EOPNOTSUPP. Unlike the real agent it does not
/// hang up after Teardown: the controller must close its connection, or the next
/// scenario would find the agent still serving the last one. Returns its address.
fn agent_lacking_a_verb() -> String {
    stand_in_agent(&[])
}

/// A stand-in agent whose device has `features` (what it answers `capabilities`
/// with): it says hello, answers the capability question, and refuses `setup` the
/// way an agent on a device without a verb does.
fn stand_in_agent(features: &'static [&'static str]) -> String {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut s) = conn else { return };
            loop {
                let mut len = [0u8; 4];
                if s.read_exact(&mut len).is_err() {
                    break;
                }
                let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
                s.read_exact(&mut body).unwrap();
                let m: serde_json::Value = serde_json::from_slice(&body).unwrap();
                let answer = match m["msg"].as_str() {
                    Some("hello") => {
                        serde_json::json!({"msg": "hello", "version": m["version"], "agent": "stand-in", "host": "loopback"})
                    }
                    Some("capabilities") => {
                        serde_json::json!({"msg": "capabilities", "device": "rxe0", "features": features})
                    }
                    Some("setup") => {
                        serde_json::json!({"msg": "error", "message": "ibv_advise_mr: Operation not supported",
                        "verb": "ibv_advise_mr", "errno": 95, "hint": "the driver has no ODP", "unsupported": true})
                    }
                    Some("teardown") => serde_json::json!({"msg": "torn_down"}),
                    other => panic!("the stand-in agent got {other:?}"),
                };
                let body = serde_json::to_vec(&answer).unwrap();
                s.write_all(&(body.len() as u32).to_be_bytes()).unwrap();
                s.write_all(&body).unwrap();
            }
        }
    });
    addr
}

/// A verb the device lacks ends the scenario as skipped, with the reason, in every
/// report: − in the terminal, "skipped" in JSON, `<skipped/>` in JUnit; exit 0, and
/// exit 4 with `--fail-on-skip`.
#[test]
fn a_verb_the_device_lacks_skips_the_scenario() {
    let tmp = scratch();
    let eps = format!("a={},b={}", agent_lacking_a_verb(), agent_lacking_a_verb());
    let sc = root().join("scenarios/rc_send_tcp.toml");
    let (json, junit, out) =
        (tmp.join("skip.json"), tmp.join("skip-junit.xml"), tmp.join("skip-out"));
    let args = |extra: &[&str]| {
        let mut a = vec![
            "run",
            "--endpoints",
            &eps,
            "--out",
            out.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ];
        a.extend_from_slice(&["--junit", junit.to_str().unwrap()]);
        a.extend_from_slice(extra);
        a.push(sc.to_str().unwrap());
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let r = roce(&args(&[]));
    assert_eq!(r.code, 0, "{}\n{}", r.out, r.err);
    assert!(r.out.contains("− RC SEND over a TCP exchange"), "{}", r.out);
    assert!(
        r.out.contains("endpoint a: the device lacks ibv_advise_mr (the driver has no ODP)"),
        "{}",
        r.out
    );
    assert!(r.out.contains("0 passed, 0 failed, 1 skipped"), "{}", r.out);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let result = &report["scenarios"][0];
    assert_eq!(result["status"], "skipped", "{report:#}");
    assert!(
        result["skip_reason"].as_str().is_some_and(|r| r.contains("ibv_advise_mr")),
        "{report:#}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("skipped=\"1\"")
            && xml.contains("<skipped message=\"endpoint a: the device lacks ibv_advise_mr"),
        "{xml}"
    );
    let r = roce(&args(&["--fail-on-skip"]));
    assert_eq!(r.code, 4, "{}\n{}", r.out, r.err);
}

/// A scenario's `requires` is asked of every endpoint before anything is set up:
/// an endpoint whose device lacks a feature skips the scenario with the feature
/// and where it comes from; one that has them all goes on to setup.
#[test]
fn a_feature_the_device_lacks_skips_the_scenario_before_setup() {
    let tmp = scratch();
    // One stand-in serves one controller connection at a time: one per endpoint.
    const OLD: &[&str] = &["mw_type1", "mw_type2", "srq"];
    const NEW: &[&str] =
        &["atomic_write", "flush", "flush_persistent", "mw_type1", "mw_type2", "srq"];
    let (old, new) = (stand_in_agent(OLD), stand_in_agent(NEW));
    let sc = root().join("scenarios/verbs/flush.toml");
    let json = tmp.join("feature-skip.json");
    let run = |eps: String| {
        roce(&[
            "run",
            "--endpoints",
            &eps,
            "--out",
            tmp.join("feature-skip-out").to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
            sc.to_str().unwrap(),
        ])
    };
    let r = run(format!("a={new},b={old}"));
    assert_eq!(r.code, 0, "{}\n{}", r.out, r.err);
    assert!(
        r.out.contains("endpoint b: the device lacks RDMA FLUSH (rxe gained it in Linux 6.2)"),
        "{}",
        r.out
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["scenarios"][0]["status"], "skipped", "{report:#}");
    // Both devices have FLUSH: the stand-in's refusal at setup is what skips it now,
    // so the capability question was answered and passed.
    let r = run(format!("a={new},b={}", stand_in_agent(NEW)));
    assert_eq!(r.code, 0, "{}\n{}", r.out, r.err);
    assert!(
        r.out.contains("the device lacks ibv_advise_mr") && !r.out.contains("lacks RDMA FLUSH"),
        "{}",
        r.out
    );
    // A scenario that requires nothing is never asked about (the old stand-in
    // would panic on a question it does not know; this one answers either way).
    let r = roce(&[
        "run",
        "--endpoints",
        &format!("a={old},b={}", stand_in_agent(OLD)),
        "--out",
        tmp.join("feature-skip-out2").to_str().unwrap(),
        root().join("scenarios/rc_send_tcp.toml").to_str().unwrap(),
    ]);
    assert!(r.out.contains("ibv_advise_mr"), "{}", r.out);
}

/// `-Y` works on every output of `decode` (and `-w` writes only what it keeps), on
/// `flows`, and a bad filter fails before anything is read, pointing at the culprit.
#[test]
fn display_filter_applies_to_every_output() {
    let tmp = scratch();
    let naks = capture("rc_naks.pcap");
    let keep = "infiniband.aeth.syndrome >= 0x60";
    let all = roce(&[
        "decode",
        "-T",
        "fields",
        "-e",
        "frame.number",
        "-e",
        "infiniband.aeth.syndrome",
        &naks,
    ]);
    let want: Vec<String> = all
        .out
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .filter(|(_, s)| s.parse::<u8>().is_ok_and(|v| v >= 0x60))
        .map(|(n, _)| n.to_string())
        .collect();
    assert!(want.len() >= 3 && want.len() < all.out.lines().count(), "{}", all.out);
    let numbers = |r: &roce_tests::Run| -> Vec<String> {
        r.out.lines().map(|l| l.split_whitespace().next().unwrap_or("").to_string()).collect()
    };
    // Summary lines and -T fields start with the frame number.
    let text = roce(&["decode", "-Y", keep, &naks]);
    assert_eq!(numbers(&text), want, "{}", text.out);
    let fields = roce(&["decode", "-Y", keep, "-T", "fields", "-e", "frame.number", &naks]);
    assert_eq!(numbers(&fields), want);
    let json = roce(&["decode", "-Y", keep, "--json", &naks]);
    let json_numbers: Vec<String> = json
        .out
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["frame"]["number"].to_string()
        })
        .collect();
    assert_eq!(json_numbers, want);
    let verbose = roce(&["decode", "-Y", keep, "-V", &naks]);
    let trees: Vec<String> = verbose
        .out
        .lines()
        .filter_map(|l| l.strip_prefix("Frame ")?.split_once(':'))
        .map(|(n, _)| n.to_string())
        .collect();
    assert_eq!(trees, want, "{}", verbose.out);
    let w = tmp.join("filtered.pcapng");
    let r = roce(&["decode", "-Y", keep, "-w", w.to_str().unwrap(), &naks]);
    assert_eq!(r.code, 0, "{}", r.err);
    let back =
        roce(&["decode", "-T", "fields", "-e", "infiniband.aeth.syndrome", w.to_str().unwrap()]);
    assert_eq!(back.out.lines().count(), want.len(), "{}", back.out);
    // flows: only the frames kept enter the analysis.
    let flows = roce(&["flows", "--json", "-Y", "frame.number <= 5", &naks]);
    let report: serde_json::Value = serde_json::from_str(&flows.out).unwrap();
    assert_eq!(report["totals"]["frames"], 5, "{report:#}");
    // The first frame's time delta is 0, as in `decode`: it is kept.
    let flows = roce(&["flows", "--json", "-Y", "frame.time_delta == 0", &naks]);
    let first = roce(&[
        "decode",
        "-Y",
        "frame.time_delta == 0",
        "-T",
        "fields",
        "-e",
        "frame.number",
        &naks,
    ]);
    assert!(first.out.starts_with("1\n"), "{}", first.out);
    let report: serde_json::Value = serde_json::from_str(&flows.out).unwrap();
    assert_eq!(report["totals"]["frames"], first.out.lines().count(), "{report:#}");
    // A bad filter: exit 2, nothing printed, the column, a caret and a suggestion.
    let r = roce(&["decode", "-Y", "infiniband.bth.destqpn == 5", &naks]);
    assert_eq!(r.code, 2);
    assert!(r.out.is_empty(), "{}", r.out);
    assert_eq!(
        r.err,
        "roce: error: unknown field or protocol `infiniband.bth.destqpn`\n --> -Y:1:1\n  |\n1 | infiniband.bth.destqpn == 5\n  | ^^^^^^^^^^^^^^^^^^^^^^\n  |\n  = hint: did you mean `infiniband.bth.destqp`? (`roce decode -G fields` lists the fields)\n"
    );
    let r = roce(&["flows", "-Y", "ip.addr == 10.0.0.300", &naks]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains(" --> -Y:1:12\n"), "{}", r.err);
}

/// mlx5 DC frames say so in every output, and `--transport-hint rd` reads the same
/// bytes as IBA Reliable Datagram instead.
#[test]
fn dc_is_marked_and_the_hint_overrides_it() {
    let dc = capture("dc.pcap");
    let line6 = |r: roce_tests::Run| r.out.lines().nth(5).unwrap_or("").to_string();
    let auto = line6(roce(&["decode", &dc]));
    assert!(
        auto.contains("DC RDMA WRITE Only") && auto.contains("R_Key=0x00004321 DMALen=64"),
        "{auto}"
    );
    let rd = line6(roce(&["decode", "--transport-hint", "rd", &dc]));
    assert!(rd.contains("RD RDMA WRITE Only") && !rd.contains("DMALen=64"), "{rd}");
    let json = roce(&["decode", "--json", "-c", "6", &dc]);
    let last: serde_json::Value = serde_json::from_str(json.out.lines().last().unwrap()).unwrap();
    assert_eq!(last["roce"]["transport"], "DC", "{last:#}");
    assert!(roce(&["decode", "-V", "-c", "6", &dc]).out.contains("DC RDMA WRITE Only"));
    let total = roce(&["decode", &dc]).out.lines().count();
    assert_eq!(roce(&["decode", "-Y", "roce.dc", &dc]).out.lines().count(), total);
    assert_eq!(
        roce(&["decode", "-Y", "roce.dc", "--transport-hint", "rd", &dc]).out.lines().count(),
        0
    );
    let flows = roce(&["flows", &dc]).out;
    assert!(flows.contains("DC RDMA WRITE Only ×1") && !flows.contains("RD "), "{flows}");
}

/// Probe steps are checked like the rest: the opcode, the PSN, what the opcode
/// carries, and the expectations that name probes.
#[test]
fn check_refuses_probes_it_could_not_build() {
    let tmp = scratch();
    let dir = root().join("scenarios/conformance");
    let text = std::fs::read_to_string(dir.join("psn_ahead.toml")).unwrap();
    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let p = beside_fixtures(&tmp.join(""), "conformance").join("badprobe.toml");
    let broken = text
        .replace("opcode = \"RDMA WRITE Only\", psn = \"next+3\"", "opcode = \"RDMA WRTE Only\", psn = \"next+3\"")
        .replace("id = \"in_order\", opcode = \"RDMA WRITE Only\", remote = { mr = \"target\", offset = 8 }", "id = \"in_order\", opcode = \"SEND Only\", psn = \"nxt\", remote = { mr = \"target\", offset = 8 }")
        .replace("probe = \"in_order\"", "probe = \"in_ordre\"");
    std::fs::write(&p, &broken).unwrap();
    let r = roce(&["check", p.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.out);
    assert!(
        r.err.contains(&format!(
            "badprobe.toml:{}:",
            line_of("RDMA WRITE Only\", psn = \"next+3\"")
        )) && r.err.contains("unknown opcode `RDMA WRTE Only`"),
        "{}",
        r.err
    );
    assert!(r.err.contains("`nxt` is not a PSN"), "{}", r.err);
    assert!(r.err.contains("SEND Only has no RETH or AtomicETH"), "{}", r.err);
    assert!(
        r.err.contains("no probe `in_ordre`") && r.err.contains("did you mean `in_order`?"),
        "{}",
        r.err
    );
}

/// `roce probe --dry-run -w`: the crafted frame, decoded back by our own decoder
/// from the file it wrote, says exactly what was asked; bad values are refused
/// before anything is built.
#[test]
fn probe_dry_run_builds_the_frame_it_was_asked_for() {
    let tmp = scratch();
    let w = tmp.join("probe.pcapng");
    let r = roce(&[
        "probe",
        "--dry-run",
        "-w",
        w.to_str().unwrap(),
        "--from",
        "10.0.0.1",
        "--to",
        "10.0.0.2",
        "--qpn",
        "0x11",
        "--psn",
        "0xfffffe",
        "--opcode",
        "RDMA WRITE Only",
        "--va",
        "0x7f0000001000",
        "--rkey",
        "0x2e5",
        "--len",
        "8",
        "--pattern",
        "ab",
        "--bad-icrc",
        "--copies",
        "2",
    ]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.out.contains("2 frame(s) not sent (--dry-run)"), "{}", r.out);
    let d = roce(&["decode", "--json", w.to_str().unwrap()]);
    assert_eq!(d.code, 0, "{}", d.err);
    let frames: Vec<serde_json::Value> =
        d.out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(frames.len(), 2);
    let f = &frames[0];
    let s = f.to_string();
    assert!(s.contains("\"RDMA WRITE Only\"") || s.contains("RC RDMA WRITE Only"), "{s}");
    assert!(s.contains("16777214"), "PSN 0xfffffe: {s}");
    assert!(s.contains("0x00007f0000001000") || s.contains("139637976731648"), "VA: {s}");
    let fields = roce(&[
        "decode",
        "-T",
        "fields",
        "-e",
        "infiniband.bth.destqp",
        "-e",
        "infiniband.bth.psn",
        "-e",
        "infiniband.reth.dmalen",
        "-e",
        "roce.icrc.status",
        w.to_str().unwrap(),
    ]);
    assert_eq!(fields.code, 0, "{}", fields.err);
    let first = fields.out.lines().next().unwrap();
    let cols: Vec<&str> = first.split('\t').collect();
    assert_eq!(&cols[..3], &["0x000011", "16777214", "8"], "{first}");
    assert_eq!(cols[3], "bad", "--bad-icrc: {first}");

    let r = roce(&["probe", "--dry-run", "--qpn", "0x1000000", "--psn", "0"]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("does not fit in 24 bits"), "{}", r.err);
    let r = roce(&[
        "probe",
        "--dry-run",
        "--qpn",
        "1",
        "--psn",
        "0",
        "--opcode",
        "Acknowledge",
        "--len",
        "4",
    ]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("carries no payload"), "{}", r.err);
    let r = roce(&["probe", "--qpn", "1", "--psn", "0"]);
    assert_eq!(r.code, 2, "--to is needed to send");
}

/// `roce diff`: two suite reports, what changed between them, exit 1 when
/// something did; a file that is not a suite report is said.
#[test]
fn diff_says_what_changed_between_two_suite_runs() {
    let tmp = scratch();
    let suite = |kernel: &str, cnp: &str, pass: bool| {
        serde_json::json!({
            "setup": { "a": { "device": "rxe0", "kernel": kernel } },
            "passed": 1, "failed": 0,
            "scenarios": {
                "CE-marked SEND": { "file": "faults/send_ce_mark.toml", "pass": pass,
                    "observations": { "wire q from a: CNP after CE": cnp } }
            }
        })
    };
    let (a, b) = (tmp.join("old-suite.json"), tmp.join("new-suite.json"));
    std::fs::write(&a, suite("6.1.0", "no", true).to_string()).unwrap();
    std::fs::write(&b, suite("6.6.0", "yes", false).to_string()).unwrap();
    let r = roce(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(r.out.contains("setup: endpoint a kernel: 6.1.0 → 6.6.0"), "{}", r.out);
    assert!(
        r.out.contains("✗ now failing: CE-marked SEND") && r.out.contains("CNP after CE: no → yes"),
        "{}",
        r.out
    );
    let r = roce(&["diff", a.to_str().unwrap(), a.to_str().unwrap()]);
    assert_eq!(r.code, 0);
    assert!(r.out.contains("nothing changed"), "{}", r.out);
    let r = roce(&["diff", a.to_str().unwrap(), capture("rc_rdma.pcap").as_str()]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("rc_rdma.pcap") && r.err.contains("not a suite.json"), "{}", r.err);
}

/// A profile that cannot be read stops `roce run` before anything runs.
#[test]
fn a_bad_profile_is_a_setup_error() {
    let tmp = scratch();
    let p = tmp.join("bad-profile.toml");
    std::fs::write(&p, "name = \"x\"\n[scenario.s]\nk = 1\n").unwrap();
    let out = tmp.join("bad-profile-out");
    let sc = root().join("scenarios/rc_send_tcp.toml");
    let r = roce(&[
        "run",
        "--profile",
        p.to_str().unwrap(),
        "--endpoints",
        "a=127.0.0.1:1,b=127.0.0.1:2",
        "--out",
        out.to_str().unwrap(),
        sc.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(
        r.err.contains("bad-profile.toml")
            && r.err.contains("not a roce profile")
            && r.err.contains("line 3"),
        "{}",
        r.err
    );
    assert!(!out.exists(), "nothing was run");
    // The shipped profile reads.
    let rxe = root().join("profiles/rxe-linux-6.1.toml");
    let text = std::fs::read_to_string(&rxe).unwrap();
    assert!(text.contains("\"wire q from a: CNP after CE\" = \"no\""), "rxe sends no CNP");
}

/// On real hosts (`--endpoints`) a suite leaves out the scenarios that need the
/// lab's switch, says which, and runs the rest; with nothing left it refuses. The
/// agents' address is a closed loopback port: the run stops at connecting.
#[test]
fn suite_on_real_hosts_leaves_out_fault_scenarios() {
    let tmp = scratch();
    let sc = |p: &str| root().join("scenarios").join(p).to_str().expect("utf-8").to_string();
    let eps = "a=127.0.0.1:1,b=127.0.0.1:1";
    let dir = tmp.join("suite-mixed");
    let r = roce(&[
        "suite",
        "--endpoints",
        eps,
        "--out",
        dir.to_str().unwrap(),
        &sc("faults/write_bad_icrc.toml"),
        &sc("rc_read.toml"),
    ]);
    assert_eq!(r.code, 1, "ran and failed to connect: {}{}", r.out, r.err);
    assert!(
        r.out.contains("left out 1 scenarios with [[fault]] rules")
            && r.out.contains("write_bad_icrc.toml"),
        "{}",
        r.out
    );
    assert!(r.out.contains("connecting to endpoint a's agent at 127.0.0.1:1"), "{}", r.out);
    let suite = std::fs::read_to_string(dir.join("suite.json")).expect("suite.json written");
    let v: serde_json::Value = serde_json::from_str(&suite).expect("json");
    let names: Vec<&String> = v["scenarios"].as_object().expect("scenarios").keys().collect();
    assert_eq!(names, ["RC RDMA READ"], "only the scenario that can run on real hosts: {suite}");

    let r = roce(&[
        "suite",
        "--endpoints",
        eps,
        "--out",
        tmp.join("suite-faults").to_str().unwrap(),
        &sc("faults"),
    ]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("every scenario given needs a switch in the wire"), "{}", r.err);

    // A bad file among them: said where, nothing run, no suite.json.
    let bad = tmp.join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\n[endpoints.a]\n[endpoints.b]\n[[qp]]\nname = \"q\"\ntype = \"rc\"\nbetween = [\"a\", \"c\"]\n").unwrap();
    let out = tmp.join("suite-bad");
    let r = roce(&[
        "suite",
        "--endpoints",
        eps,
        "--out",
        out.to_str().unwrap(),
        bad.to_str().unwrap(),
        &sc("rc_read.toml"),
    ]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("bad.toml:7:") && r.err.contains("no endpoint `c`"), "{}", r.err);
    assert!(!out.join("suite.json").exists());
}

/// A run past a budget is refused before anything starts: no lab booted, no
/// output directory made, exit 2, the scenario and what it asks for named. Here
/// one endpoint registers more MRs than a lab VM has room for.
#[test]
fn a_run_past_its_budget_is_refused_before_it_starts() {
    let tmp = scratch();
    let mut text = String::from("name = \"heavy\"\n[endpoints.a]\n[endpoints.b]\n[[qp]]\nname = \"q\"\ntype = \"rc\"\nbetween = [\"b\", \"a\"]\n");
    for k in 0..7 {
        text += &format!(
            "[[mr]]\nname = \"big{k}\"\non = \"a\"\nsize = 64000000\naccess = [\"local_write\"]\n"
        );
    }
    let file = tmp.join("heavy.toml");
    std::fs::write(&file, text).unwrap();
    let out = tmp.join("heavy-runs");
    let r = roce(&[
        "run",
        "--lab",
        "budget-test-never-booted",
        "--out",
        out.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2, "{}{}", r.out, r.err);
    assert!(
        r.err.contains(
            "heavy.toml: endpoint a registers 428 MiB of MRs, and a lab VM has 512 MiB of memory"
        ),
        "{}",
        r.err
    );
    assert!(r.err.contains("hint: smaller MRs"), "{}", r.err);
    assert!(!out.exists(), "nothing was made");
    assert!(!r.err.contains("booting"), "no lab was booted: {}", r.err);
}

/// `roce completions` prints a script for each shell; `roce man` pages render with
/// `man -l` into text that names the command and its options, without a warning
/// from groff.
#[test]
#[ignore = "needs man (man-db, groff): bash scripts/setup.sh --test installs them"]
fn man_pages_render_with_man() {
    let tmp = scratch();
    let dir = tmp.join("man1");
    let r = roce(&["man", "--dir", dir.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.out.lines().count() > 15, "a page per command: {}", r.out);
    assert_eq!(temporaries(&dir), Vec::<String>::new(), "no temporary left");
    for (page, words) in [
        ("roce.1", &["roce", "decode", "flows", "completions"][..]),
        ("roce-decode.1", &["roce-decode", "--display-filter", "--force", "EXIT STATUS"][..]),
        ("roce-lab-run.1", &["roce-lab-run"][..]),
    ] {
        let out = std::process::Command::new("man")
            .arg("-l")
            .arg(dir.join(page))
            .env("MANWIDTH", "100")
            .env("MAN_KEEP_FORMATTING", "0")
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .output()
            .expect("man runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{page}: {warnings}");
        assert!(warnings.trim().is_empty(), "{page}: {warnings}");
        // man may still embolden with backspaces when not on a terminal.
        let plain: String = {
            let mut s = String::new();
            for c in text.chars() {
                if c == '\u{8}' {
                    s.pop();
                } else {
                    s.push(c);
                }
            }
            s
        };
        for w in words {
            assert!(plain.contains(w), "{page} lacks {w}:\n{plain}");
        }
    }
}

#[test]
fn completions_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let r = roce(&["completions", shell]);
        assert_eq!(r.code, 0, "{shell}: {}", r.err);
        // fish writes a long flag as `-l display-filter`.
        assert!(r.out.contains("decode") && r.out.contains("display-filter"), "{shell}");
    }
    let r = roce(&["completions", "tcsh"]);
    assert_eq!(r.code, 2, "an unknown shell is a usage error");
    assert!(r.err.contains("bash"), "the shells are listed: {}", r.err);
}

/// `roce coverage` says what each observable rule no shipped scenario covers
/// waits on (the format, the device, or a scenario), as the catalogue says:
/// every such rule says it, so a new gap cannot go unexplained, and none that a
/// scenario covers still claims to wait.
#[test]
fn every_uncovered_rule_says_what_it_waits_on() {
    let scenarios = root().join("scenarios");
    let r = roce(&["coverage", "--json", "--scenarios", scenarios.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    let v: serde_json::Value = serde_json::from_str(&r.out).unwrap();
    let waiting = v["waiting"].as_array().unwrap();
    let unsaid: Vec<&str> =
        waiting.iter().filter(|w| w["on"].is_null()).filter_map(|w| w["id"].as_str()).collect();
    assert!(unsaid.is_empty(), "uncovered rules with no `waits` in the catalogue: {unsaid:?}");
    let uncovered: std::collections::BTreeSet<&str> =
        waiting.iter().filter_map(|w| w["id"].as_str()).collect();
    let catalogue = std::fs::read_to_string(root().join("conformance/catalogue.toml")).unwrap();
    let t: toml::Table = catalogue.parse().unwrap();
    let stale: Vec<&str> = t["rule"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r.get("waits").is_some())
        .filter_map(|r| r["id"].as_str())
        .filter(|id| !uncovered.contains(id))
        .collect();
    assert!(stale.is_empty(), "covered rules whose `waits` is stale: {stale:?}");
    let text = roce(&["coverage", "--scenarios", scenarios.to_str().unwrap()]).out;
    assert!(text.contains("not covered, waiting on the format (it cannot say them yet)"), "{text}");
}
