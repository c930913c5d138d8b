//! The seed scenarios, run for real: `roce suite scenarios/` against the lab, held
//! to the shipped rxe profile, with the suite, JSON and JUnit reports checked;
//! `roce probe` from inside a VM. Needs the VM images, so the tests are `#[ignore]`d:
//! scripts/test.sh runs them after `roce lab build`.
// The lab tests are named `in_lab::…` so that scripts/test.sh can run every other
// ignored test (tshark, pyarrow, chromium, root) before the VM images exist.
mod in_lab {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use serde_json::Value;

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
    }

    struct Lab(String);

    impl Drop for Lab {
        /// Down, and its state (logs, consoles, the copy of `roce` the VMs run:
        /// 84 MB a lab) gone with it, unless the test failed: then it is kept
        /// for reading.
        fn drop(&mut self) {
            let roce = |args: &[&str]| {
                Command::new(env!("CARGO_BIN_EXE_roce"))
                    .args(["lab", "--name", &self.0])
                    .args(args)
                    .output()
            };
            let dir = roce(&["status", "--json"])
                .ok()
                .and_then(|o| serde_json::from_slice::<Value>(&o.stdout).ok())
                .and_then(|v| v["dir"].as_str().map(std::path::PathBuf::from));
            let _ = roce(&["down"]);
            if let Some(dir) = dir.filter(|_| !std::thread::panicking()) {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }

    /// Each device's counters, set against the switch's recording in a run's JSON
    /// report: every scenario run reads both ends' (rxe's), and what they count
    /// sent and received is what the wire carried (or within what the wire cannot
    /// tell), except where the device profile the run is held to records the
    /// kernel's miscount (`"counter a rcvd_pkts" = "device 0, wire 1"`, a note
    /// saying why) and the run drew exactly that.
    fn counters_agree_with_the_wire(scenarios: &[Value]) {
        let mut read = 0;
        let mut disagree = Vec::new();
        for s in scenarios.iter().filter(|s| s["status"] != "skipped") {
            let Some(counters) = s["counters"].as_object() else { continue };
            read += usize::from(counters.len() == 2);
            for (ep, c) in counters {
                assert_eq!(c["driver"], "rxe", "{:#}: {c:#}", s["name"]);
                for x in c["reconciled"].as_array().into_iter().flatten() {
                    let (device, wire) = (x["device"].as_u64(), x["wire"].as_u64());
                    let least = x["wire_min"].as_u64().or(wire);
                    // The observation key profiles record a counter under.
                    let key = format!("counter {ep} {}", x["counter"].as_str().unwrap_or(""));
                    let explained = s["verdicts"].as_array().into_iter().flatten().any(|v| {
                        v["kind"] == "profile" && v["pass"] == true && v["observation"] == key
                    });
                    if !(explained || (least <= device && device <= wire)) {
                        disagree.push(format!("{} on {ep}: {x}", s["name"]));
                    }
                }
            }
        }
        assert!(read >= 250, "only {read} scenarios read both ends' counters");
        assert!(disagree.is_empty(), "counters against the wire:\n{}", disagree.join("\n"));
    }

    /// The agents' captures of each scenario, merged, hold the same frames as
    /// the switch's recording of it, as the run's report says (`agents_capture`:
    /// never differing in the frames sent, their order or those delivered),
    /// for 250 scenarios at least; and every wire judged is the switch's,
    /// which `wire_from` names as `switch` says. A host capture that says it
    /// is incomplete (libpcap in a TCG VM can fall behind a 64-QP stream and
    /// count what it dropped) is not held to the switch's: that it says so is
    /// what the report promises.
    fn agents_agree_with_the_switch(scenarios: &[Value], switch: impl Fn(&str) -> bool) {
        let (mut compared, mut incomplete) = (0, 0);
        let mut disagree = Vec::new();
        for s in scenarios.iter().filter(|s| s["status"] != "skipped") {
            let from = s["wire_from"].as_str().unwrap_or_default();
            assert!(switch(from), "{:#}: the wire came from {from}", s["name"]);
            let a = &s["agents_capture"];
            if a["path"].as_str().is_none() {
                continue;
            }
            if a["incomplete"].as_array().is_some_and(|x| !x.is_empty()) {
                incomplete += 1;
                continue;
            }
            compared += 1;
            if a["differs"].as_array().is_some_and(|x| !x.is_empty()) {
                disagree.push(format!("{:#}: differs: {}", s["name"], a["differs"]));
            }
        }
        assert!(
            compared >= 250,
            "only {compared} scenarios captured whole at their agents ({incomplete} incomplete)"
        );
        assert!(
            disagree.is_empty(),
            "the agents' whole captures against the switch's:\n{}",
            disagree.join("\n")
        );
    }

    /// `roce ARGS`: its exit code and all it said (stdout, then stderr).
    fn said(args: &[&str]) -> (Option<i32>, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_roce")).args(args).output().expect("roce");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    }

    /// `roce suite scenarios/` on `image` in `lab`, held to `profile`.
    fn suite_on(lab: &Lab, image: &str, profile: &str, out_dir: &Path) -> std::process::Output {
        suite_with(lab, image, profile, out_dir, &[])
    }

    fn suite_with(
        lab: &Lab,
        image: &str,
        profile: &str,
        out_dir: &Path,
        extra: &[&str],
    ) -> std::process::Output {
        let out = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["suite", "--image", image, "--lab", &lab.0])
            .args(extra)
            .arg("--out")
            .arg(out_dir)
            .arg("--junit")
            .arg(out_dir.join("junit.xml"))
            .arg("--profile")
            .arg(repo().join("profiles").join(profile))
            .arg(repo().join("scenarios"))
            .output()
            .expect("running roce suite");
        eprintln!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    #[test]
    #[ignore = "needs the lab: bash scripts/test.sh builds the VM images, then runs it"]
    fn seed_scenarios_pass_on_every_image_and_the_diffs_show_what_the_kernel_changed() {
        let out_dir = std::env::temp_dir().join(format!("roce-scenarios-{}", std::process::id()));
        let json = out_dir.join("report.json");
        let junit = out_dir.join("junit.xml");
        let lab = Lab(format!("scen-{}", std::process::id()));
        // Each host captures its own wire too: the same verdicts, and the hosts'
        // captures, merged, hold what the switch recorded (below).
        let out =
            suite_with(&lab, "bookworm", "rxe-linux-6.1.toml", &out_dir, &["--capture-at-agents"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "every seed scenario passes in the lab, as the rxe profile recorded"
        );

        // suite.json: no times, no addresses; what passed and what rxe did.
        let suite: Value = serde_json::from_slice(
            &std::fs::read(out_dir.join("suite.json")).expect("suite.json written"),
        )
        .expect("suite.json parses");
        assert_eq!(suite["profile"], "rxe-linux-6.1", "{suite:#}");
        assert_eq!(suite["failed"], 0, "{suite:#}");
        assert!(suite["setup"]["a"]["kernel"].as_str().is_some_and(|k| !k.is_empty()), "{suite:#}");
        let obs = |name_part: &str, key: &str| -> String {
            let sc = suite["scenarios"]
                .as_object()
                .expect("scenarios")
                .iter()
                .find(|(n, _)| n.contains(name_part))
                .unwrap_or_else(|| panic!("no scenario {name_part}"));
            sc.1["observations"][key]
                .as_str()
                .unwrap_or_else(|| panic!("{name_part}: no {key}: {:#}", sc.1))
                .to_string()
        };
        // The crafted probes met a real rxe responder.
        assert_eq!(
            obs("conformance: a PSN ahead", "probe ahead"),
            "NAK PSN Sequence Error (PSN next)"
        );
        assert_eq!(obs("conformance: a duplicate WRITE", "probe dup"), "ACK (PSN next-1)");
        assert_eq!(obs("conformance: a bad ICRC", "probe bad_icrc"), "no answer");
        assert_eq!(obs("misaligned atomic", "probe misaligned"), "NAK Invalid Request (PSN next)");
        assert_eq!(obs("CE-marked SEND", "wire q from a: CNP after CE"), "no");
        // The requester met responses the switch crafted: a ghost ACK taken (the
        // deviation recorded, not failed), every RNR timer code waited out, the NAK
        // codes' completion statuses, credits ignored.
        assert_eq!(
            obs("requester: a ghost ACK", "deviation: memory of MR target on b at offset 0"),
            "deviates"
        );
        assert_eq!(
            obs("requester: RNR NAK with each timer code", "wire q from a: RNR timer"),
            "honoured"
        );
        assert_eq!(
            obs("requester: unsolicited NAKs", "completion a wr_id 21"),
            "IBV_WC_REM_ACCESS_ERR"
        );
        assert_eq!(
            obs("requester: unsolicited NAKs", "completion a wr_id 22"),
            "IBV_WC_WR_FLUSH_ERR"
        );
        assert_eq!(
            obs(
                "requester: an ACK with zero credits",
                "wire q from a: after an ACK with 0 credits"
            ),
            "sent 2 new requests on"
        );
        // The fuzzer's findings are suite cases: rxe ACKs a SEND with Invalidate it
        // could not carry out, and the profile keeps that deviation.
        assert_eq!(
            obs(
                "finding: a SEND with Invalidate of a type 1 window is ACKed",
                "deviation: completion of wr_id 4 on a"
            ),
            "deviates"
        );
        // The responder raises no async event for an R_Key violation (C9-222.1):
        // recorded, not failed.
        assert_eq!(obs("an R_Key violation raises", "deviation: events on b"), "deviates");

        let report: Value =
            serde_json::from_slice(&std::fs::read(&json).expect("JSON report written"))
                .expect("JSON report parses");
        let scenarios = report["scenarios"].as_array().expect("scenarios array");
        let files = roce::scenario::discover(&[repo().join("scenarios")]).expect("scenarios/");
        assert!(
            files.iter().any(|f| f.starts_with(repo().join("scenarios/faults"))),
            "the fault scenarios are part of the suite"
        );
        assert!(
            files.iter().any(|f| f.starts_with(repo().join("scenarios/conformance"))),
            "the conformance probes are part of the suite"
        );
        assert!(
            files.iter().any(|f| f.starts_with(repo().join("scenarios/requester"))),
            "the requester cases are part of the suite"
        );
        // Every scenario was held to the profile.
        for s in scenarios.iter().filter(|s| s["status"] != "skipped") {
            assert!(
                s["verdicts"].as_array().is_some_and(|v| v.iter().any(|v| v["kind"] == "profile")),
                "{:#}",
                s["name"]
            );
        }
        counters_agree_with_the_wire(scenarios);
        // Libpcap on each VM's rxe interface, merged by frame identity, against
        // the switch's recording: drops, copies, held and changed frames,
        // synthesized answers, lossy 8-QP streams. The wire judged is the switch's.
        agents_agree_with_the_switch(scenarios, |from| from == "the lab's switch");

        // One result per scenario, a parameterised file's cases each one.
        let listed = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["run", "--list"])
            .arg(repo().join("scenarios"))
            .output()
            .expect("roce run --list");
        let cases = String::from_utf8_lossy(&listed.stdout).lines().count();
        assert!(cases > files.len(), "the parameterised files count each case");
        assert_eq!(scenarios.len(), cases, "one result per scenario and case");
        // On 6.1 the scenarios that need RDMA FLUSH or ATOMIC WRITE (Linux 6.2+) are
        // skipped, saying why, the one that re-registers an MR (rxe 6.1 has no
        // rereg_user_mr: EOPNOTSUPP), and the two fuzzing findings that panic VM b,
        // which the profile names under [crashes]; nothing else is.
        for s in scenarios.iter().filter(|s| s["status"] == "skipped") {
            let (file, why) =
                (s["file"].as_str().unwrap_or("?"), s["skip_reason"].as_str().unwrap_or(""));
            if file.ends_with("/mr/rereg.toml") {
                assert!(why.contains("the device lacks ibv_rereg_mr"), "{s:#}");
                continue;
            }
            if file.contains("/findings/") {
                assert!(
                    file.ends_with("_panics/finding.toml")
                        && why.contains("crashes this setup, says the profile")
                        && why.contains("NULL pointer dereference"),
                    "{s:#}"
                );
                continue;
            }
            assert!(
                file.contains("/verbs/flush") || file.contains("/verbs/atomic_write"),
                "only FLUSH, ATOMIC WRITE and re-registration are skipped on 6.1: {s:#}"
            );
            assert!(
                why.contains("the device lacks") && why.contains("rxe gained it in Linux 6.2"),
                "{s:#}"
            );
        }
        assert_eq!(
            scenarios.iter().filter(|s| s["status"] == "skipped").count(),
            12,
            "the nine FLUSH and ATOMIC WRITE scenarios, the re-registration and two panics"
        );
        for s in scenarios.iter().filter(|s| s["status"] != "skipped") {
            let name = s["name"].as_str().unwrap_or("?");
            let verdicts = s["verdicts"].as_array().expect("verdicts");
            assert!(!verdicts.is_empty(), "{name}: a scenario without expectations proves nothing");
            assert!(verdicts.iter().all(|v| v["pass"] == true), "{name}: {s:#}");
            // The capture of each scenario is kept next to the report.
            if let Some(cap) = s["capture"].as_str() {
                assert!(Path::new(cap).exists(), "{name}: capture {cap} kept");
            }
        }
        let xml = std::fs::read_to_string(&junit).expect("JUnit report written");
        assert!(xml.contains("<testsuite") && xml.contains(&format!("tests=\"{cases}\"")), "{xml}");
        assert!(xml.contains("failures=\"0\""), "{xml}");

        // rdma_cm: each side learned the other's MR from the REQ/REP private data, and
        // the REQ on the wire carries the active side's MR (after librdmacm's header).
        let cm = scenarios
            .iter()
            .find(|s| s["file"].as_str().is_some_and(|f| f.contains("rdma_cm")))
            .expect("rdma_cm scenario");
        let conns = cm["connections"].as_array().expect("connections");
        assert_eq!(conns.len(), 2, "{cm:#}");
        assert!(
            conns.iter().all(|c| c["peer_mrs_from_cm"] == 1),
            "both sides took the peer's MR from private data: {cm:#}"
        );
        let src = &cm["endpoints"]["a"]["mrs"][0];
        // "roce", version 1, 1 entry carried of 1, then address, rkey, length.
        let want = format!(
            "726f636501010100{:016x}{:08x}{:08x}",
            src["addr"].as_u64().expect("addr"),
            src["rkey"].as_u64().expect("rkey"),
            src["len"].as_u64().expect("len")
        );
        let decoded = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["decode", "--json"])
            .arg(cm["capture"].as_str().expect("rdma_cm capture"))
            .output()
            .expect("roce decode");
        let req = String::from_utf8_lossy(&decoded.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|f| f["mad"]["cm"]["type"] == "REQ")
            .expect("a REQ in the rdma_cm capture");
        let private = req["mad"]["private_data"].as_str().expect("REQ private data");
        assert!(
            req["mad"]["rdma_cm"]["dst"].as_str().is_some_and(|d| d.starts_with("10.0.0.")),
            "{req:#}"
        );
        // (JSON shows private data without its zero padding.)
        let want = want.trim_end_matches("00");
        assert_eq!(
            private.get(72..).unwrap_or(""),
            want,
            "the REQ's private data after the 36-byte rdma_cm header: {req:#}"
        );

        // A stream: every message completed and checked where it landed, with the
        // numbers of the run.
        let load = scenarios
            .iter()
            .find(|s| s["name"] == "load: WRITE stream, every byte checked")
            .expect("the WRITE stream scenario");
        let st = &load["streams"][0];
        assert_eq!(
            (st["completed"].as_u64(), st["count"].as_u64(), st["qps"].as_u64()),
            (Some(10000), Some(10000), Some(1)),
            "{load:#}"
        );
        assert!(
            st["elapsed_us"].as_u64() > Some(0)
                && st["latency_us"]["samples"].as_u64() == Some(1250),
            "every 8th of 10,000 signalled: {load:#}"
        );
        assert!(load["verdicts"].to_string().contains("all 10000 messages"), "{load:#}");

        // The loopback case says why its wire is empty.
        let loopback = scenarios
            .iter()
            .find(|s| s["file"].as_str().is_some_and(|f| f.contains("loopback")))
            .expect("loopback scenario");
        assert!(loopback.to_string().contains("same rxe device"), "{loopback:#}");

        // `roce probe`, ad hoc, from inside VM a: to a QPN nobody has on b (dropped,
        // no answer), and refused toward its own address (rxe would never see it).
        let probe = |to: &str| {
            let cmd = format!("/host/roce probe --to {to} --qpn 0xfff00 --psn 0 --opcode 'SEND Only' --len 8 --wait-ms 300");
            Command::new(env!("CARGO_BIN_EXE_roce"))
                .args(["lab", "--name", &lab.0, "exec", "a", "--", &cmd])
                .output()
                .expect("roce lab exec")
        };
        let out = probe("10.0.0.2");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{text}");
        assert!(text.contains("1 frame(s) sent on eth0 (10.0.0.1"), "{text}");
        assert!(text.contains("RC SEND Only") && text.contains("QP=0x0fff00"), "{text}");
        assert!(text.contains("no answer within 300 ms"), "{text}");
        let out = probe("10.0.0.1");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert!(text.contains("this host's own address"), "{text}");
        // One VM pair at a time on this host.
        drop(lab);

        // The second setup: Linux 6.12 and rdma-core 56, held to its own profile.
        let lab = Lab(format!("scen6-{}", std::process::id()));
        let out6 =
            std::env::temp_dir().join(format!("roce-scenarios-trixie-{}", std::process::id()));
        let out = suite_on(&lab, "trixie", "rxe-linux-6.12.toml", &out6);
        assert_eq!(
            out.status.code(),
            Some(0),
            "every seed scenario passes on trixie, as its rxe profile recorded"
        );
        // The same suite four at a time on the same lab: nothing changes, and each
        // scenario's capture holds its own frames and no other's.
        let out6j =
            std::env::temp_dir().join(format!("roce-scenarios-trixie-j4-{}", std::process::id()));
        let out = suite_with(&lab, "trixie", "rxe-linux-6.12.toml", &out6j, &["-j", "4"]);
        drop(lab);
        assert_eq!(out.status.code(), Some(0), "every seed scenario passes with -j 4 too");
        let diff = Command::new(env!("CARGO_BIN_EXE_roce"))
            .arg("diff")
            .arg(out6.join("suite.json"))
            .arg(out6j.join("suite.json"))
            .output()
            .expect("roce diff");
        let text = String::from_utf8_lossy(&diff.stdout);
        assert_eq!(diff.status.code(), Some(0), "-j 4 against -j 1: {text}");
        assert!(text.contains("nothing changed"), "{text}");
        for dir in [&out6, &out6j] {
            let report: Value = serde_json::from_slice(
                &std::fs::read(dir.join("report.json")).expect("report.json written"),
            )
            .expect("report.json parses");
            captures_hold_their_own_frames(&report);
            if dir == &out6 {
                counters_agree_with_the_wire(report["scenarios"].as_array().expect("scenarios"));
            }
        }
        let _ = std::fs::remove_dir_all(&out6j);
        let suite6: Value = serde_json::from_slice(
            &std::fs::read(out6.join("suite.json")).expect("suite.json written"),
        )
        .expect("suite.json parses");
        assert_eq!(suite6["profile"], "rxe-linux-6.12", "{suite6:#}");
        assert_eq!(
            suite6["skipped"].as_u64().unwrap_or(0),
            2,
            "6.12 has every verb the scenarios require but MR re-registration (rxe has no rereg_user_mr); the unbound-window SEND with Invalidate panics it: {suite6:#}"
        );
        assert!(
            suite6["setup"]["a"]["kernel"].as_str().is_some_and(|k| k.starts_with("6.12.")),
            "{suite6:#}"
        );
        // The regression report between the two: the kernels, and the responder's
        // length check that Linux 6.2 fixed (a READ over 2^31 bytes: Invalid Request
        // now, where 6.1 never ran the check and said Remote Access Error) …
        let diff = Command::new(env!("CARGO_BIN_EXE_roce"))
            .arg("diff")
            .arg(out_dir.join("suite.json"))
            .arg(out6.join("suite.json"))
            .output()
            .expect("roce diff");
        let text = String::from_utf8_lossy(&diff.stdout);
        assert_eq!(diff.status.code(), Some(1), "a diff with changes exits 1: {text}");
        assert!(text.contains("endpoint a kernel: 6.1.") && text.contains("→ 6.12."), "{text}");
        assert!(
        text.contains("probe read_too_large: NAK Remote Access Error (PSN next) → NAK Invalid Request (PSN next)"),
        "{text}"
    );
        // … and which also made 6.1 deliver a SEND Only longer than the path MTU.
        assert!(
            text.contains("probe long_send: ACK (PSN next) → NAK Invalid Request (PSN next)"),
            "{text}"
        );
        assert!(
            text.contains("completion b wr_id 7: IBV_WC_SUCCESS → IBV_WC_REM_INV_REQ_ERR"),
            "{text}"
        );
        // The third setup: trixie's rdma-core 56 under the Linux 7.x of
        // trixie-backports, held to its own profile. Against 6.12, one thing changed:
        // the responder now raises the access error event an R_Key violation calls
        // for (C9-222.1), where 6.12 recorded the deviation.
        let lab = Lab(format!("scen7-{}", std::process::id()));
        let out7 = std::env::temp_dir().join(format!("roce-scenarios-7x-{}", std::process::id()));
        let out = suite_on(&lab, "trixie-backports", "rxe-linux-7.3.toml", &out7);
        drop(lab);
        assert_eq!(
            out.status.code(),
            Some(0),
            "every seed scenario passes on trixie-backports, as its rxe profile recorded"
        );
        let suite7: Value = serde_json::from_slice(
            &std::fs::read(out7.join("suite.json")).expect("suite.json written"),
        )
        .expect("suite.json parses");
        assert_eq!(suite7["profile"], "rxe-linux-7.3", "{suite7:#}");
        let report7: Value = serde_json::from_slice(
            &std::fs::read(out7.join("report.json")).expect("report.json written"),
        )
        .expect("report.json parses");
        counters_agree_with_the_wire(report7["scenarios"].as_array().expect("scenarios"));
        assert_eq!(
            suite7["skipped"].as_u64().unwrap_or(0),
            2,
            "MR re-registration (rxe has no rereg_user_mr) and the unbound-window panic: {suite7:#}"
        );
        assert!(
            suite7["setup"]["a"]["kernel"].as_str().is_some_and(|k| k.starts_with("7.")),
            "{suite7:#}"
        );
        let diff = Command::new(env!("CARGO_BIN_EXE_roce"))
            .arg("diff")
            .arg(out6.join("suite.json"))
            .arg(out7.join("suite.json"))
            .output()
            .expect("roce diff");
        let text = String::from_utf8_lossy(&diff.stdout);
        assert_eq!(diff.status.code(), Some(1), "a diff with changes exits 1: {text}");
        assert!(text.contains("endpoint a kernel: 6.12.") && text.contains("→ 7."), "{text}");
        assert!(text.contains("deviation: events on b: deviates → holds"), "{text}");
        let changed = text
            .lines()
            .filter(|l| l.trim_start().starts_with(['+', '-', '−', '~', '✓', '✗']))
            .count();
        assert_eq!(changed, 1, "only the R_Key violation's event changed: {text}");
        let _ = std::fs::remove_dir_all(&out_dir);
        let _ = std::fs::remove_dir_all(&out6);
        let _ = std::fs::remove_dir_all(&out7);
    }

    /// Every RoCE frame in each scenario's capture is addressed to one of that
    /// scenario's QPs at the address that received it, or is its rdma_cm exchange
    /// (QP1); and the captures hold frames. Probes are left out: they aim at QPs
    /// that do not exist on purpose (and run with the wire to themselves).
    fn captures_hold_their_own_frames(report: &Value) {
        let mut seen = 0;
        for s in report["scenarios"].as_array().expect("scenarios") {
            let probes =
                s["verdicts"].as_array().is_some_and(|v| v.iter().any(|v| v["kind"] == "probe"));
            let (Some(cap), Some(eps), false) =
                (s["capture"].as_str(), s["endpoints"].as_object(), probes)
            else {
                continue;
            };
            let mine: Vec<(String, u64)> = eps
                .values()
                .flat_map(|e| {
                    e["qps"].as_array().into_iter().flatten().map(move |q| {
                        (e["ip"].as_str().unwrap_or("").to_string(), q["qpn"].as_u64().unwrap_or(0))
                    })
                })
                .collect();
            let (_, pkts) =
                lab::record::read_capture(Path::new(cap)).unwrap_or_else(|e| panic!("{cap}: {e}"));
            for (n, p) in pkts.iter().enumerate() {
                let f = dissector::frame::decode(
                    dissector::LinkType::ETHERNET,
                    &p.data,
                    &dissector::frame::Options::default(),
                );
                let dst = match &f.net {
                    dissector::frame::Net::Ipv4(r) => r.dst.to_string(),
                    dissector::frame::Net::Ipv6(r) => r.dst.to_string(),
                    _ => continue,
                };
                let Some(ib) = &f.ib else { continue };
                if ib.bth.dest_qp == 1 {
                    continue;
                }
                let to = (dst, u64::from(ib.bth.dest_qp));
                assert!(
                    mine.contains(&to),
                    "{}: frame {} goes to QPN {:#x} at {}, not one of this scenario's QPs {mine:?}",
                    s["name"],
                    n + 1,
                    to.1,
                    to.0
                );
                seen += 1;
            }
        }
        assert!(seen > 100, "the captures hold the scenarios' RoCE frames ({seen})");
    }

    /// Waits (up to `within`) until the lab's daemon reports a recording run, and
    /// returns the qemu pid of VM b then.
    fn qemu_b_once_running(paths: &lab::state::LabPaths, within: std::time::Duration) -> i32 {
        let until = std::time::Instant::now() + within;
        loop {
            if let Ok(st) = lab::client::request(paths, &lab::control::Request::Status) {
                if st["phase"] == "ready" && !st["run"].is_null() {
                    return st["vms"][1]["qemu_pid"].as_i64().expect("qemu pid") as i32;
                }
            }
            assert!(
                std::time::Instant::now() < until,
                "no scenario started in the lab within {within:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// The lab as a bench of real wires: each VM's test NIC a host tap, the switch
    /// between the two taps through AF_PACKET, as `roce bridge` stands between two
    /// NIC ports. The whole suite, held to the same profile as on the UDP wire,
    /// passes (so every verdict is the UDP lab's), each device's counters agree
    /// with the switch's recording, and the taps go with the lab.
    #[test]
    #[ignore = "needs the lab: bash scripts/test.sh builds the VM images, then runs it"]
    fn the_suite_through_host_taps_gives_the_udp_wires_verdicts() {
        let roce = said;
        let lab = Lab(format!("tap-{}", std::process::id()));
        let (code, said) = roce(&["lab", "--name", &lab.0, "up", "--wire", "tap"]);
        assert_eq!(code, Some(0), "{said}");
        assert!(said.contains("wire: a host tap per VM"), "{said}");
        let status = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["lab", "--name", &lab.0, "status", "--json"])
            .output()
            .expect("roce lab status");
        let st: Value = serde_json::from_slice(&status.stdout).expect("status JSON");
        let taps: Vec<String> = st["taps"]
            .as_array()
            .expect("the lab names its taps")
            .iter()
            .filter_map(|t| t.as_str().map(str::to_string))
            .collect();
        assert_eq!(taps.len(), 2, "{st:#}");
        let exists = |name: &str| {
            Command::new("ip")
                .args(["link", "show", name])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        for t in &taps {
            assert!(exists(t), "tap {t} is there while the lab is up");
            // Lab frames only: the host has no address on it, IPv6 included.
            let addr = Command::new("ip").args(["-o", "addr", "show", "dev", t]).output().unwrap();
            assert!(addr.stdout.is_empty(), "{}", String::from_utf8_lossy(&addr.stdout));
        }
        let out_dir = std::env::temp_dir().join(format!("roce-taps-{}", std::process::id()));
        let json = out_dir.join("report.json");
        let profile = repo().join("profiles").join("rxe-linux-6.1.toml");
        let (code, said) = roce(&[
            "run",
            "--lab",
            &lab.0,
            "-q",
            "--profile",
            profile.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
            repo().join("scenarios").to_str().unwrap(),
        ]);
        assert_eq!(
            code,
            Some(0),
            "every scenario as the profile recorded it on the UDP wire:\n{said}"
        );
        let report: Value =
            serde_json::from_slice(&std::fs::read(&json).expect("report")).expect("JSON");
        counters_agree_with_the_wire(report["scenarios"].as_array().expect("scenarios"));
        drop(lab);
        for t in &taps {
            assert!(!exists(t), "tap {t} went with the lab");
        }
        let _ = std::fs::remove_dir_all(&out_dir);
    }

    /// A bench: the lab as two real hosts (`--wire bench`: each VM's NIC a host
    /// tap, its agent reached over TCP, keyed), `roce bridge` between the two
    /// taps, and a scratch directory holding the key.
    struct Bench {
        dir: PathBuf,
        key: String,
        /// `a=HOST:PORT,b=HOST:PORT`: where the agents listen.
        eps: String,
        bridge: BridgeProc,
        lab: Lab,
    }

    fn bench(what: &str) -> Bench {
        let dir = std::env::temp_dir().join(format!("roce-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let key = dir.join("bench.key").to_str().expect("utf-8").to_string();
        assert_eq!(said(&["agent", "--gen-key", &key]).0, Some(0));
        let lab = Lab(format!("{what}-{}", std::process::id()));
        let (code, text) =
            said(&["lab", "--name", &lab.0, "up", "--wire", "bench", "--key-file", &key]);
        assert_eq!(code, Some(0), "{text}");
        let status = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["lab", "--name", &lab.0, "status", "--json"])
            .output()
            .expect("roce lab status");
        let st: Value = serde_json::from_slice(&status.stdout).expect("status JSON");
        let two = |v: &Value| -> Vec<String> {
            let all = v.as_array().map(|a| a.iter().filter_map(|t| t.as_str()).map(String::from));
            all.map(Iterator::collect).unwrap_or_default()
        };
        let (taps, agents) = (two(&st["taps"]), two(&st["agents_at"]));
        assert!(taps.len() == 2 && agents.len() == 2, "{st:#}");
        assert!(st["counters"].is_null(), "no switch of the lab's on a bench: {st:#}");
        let bridge = BridgeProc::start(&taps, &key);
        let eps = format!("a={},b={}", agents[0], agents[1]);
        Bench { dir, key, eps, bridge, lab }
    }

    /// `roce bridge` between two taps, keyed with `key`, as on two NIC ports of
    /// a box in the middle: where it serves controllers, its stderr read on.
    struct BridgeProc {
        child: std::process::Child,
        at: String,
        log: std::thread::JoinHandle<String>,
    }

    impl BridgeProc {
        fn start(taps: &[String], key: &str) -> BridgeProc {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_roce"));
            cmd.args(["bridge", "--port", &taps[0], "--port", &taps[1]])
                .args(["--listen", "127.0.0.1:0", "--key-file", key])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            // A test run from a background job (CI's) hands SIGTERM's siblings
            // down ignored, and the bridge leaves an ignored signal alone: start
            // it as a service manager would, so that SIGTERM ends it.
            // SAFETY: signal(2) is async-signal-safe; only the child's disposition.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                    libc::signal(libc::SIGTERM, libc::SIG_DFL);
                    Ok(())
                });
            }
            let mut child = cmd.spawn().expect("roce bridge");
            let mut err = std::io::BufReader::new(child.stderr.take().expect("its stderr"));
            let at = loop {
                let mut line = String::new();
                let n =
                    std::io::BufRead::read_line(&mut err, &mut line).expect("the bridge's stderr");
                assert!(n > 0, "the bridge ended before it listened");
                if let Some(rest) = line.strip_prefix("serving controllers on ") {
                    break rest.split(',').next().expect("an address").to_string();
                }
            };
            // Its log goes on while it serves: read, or the pipe fills.
            let log = std::thread::spawn(move || {
                let mut rest = String::new();
                let _ = std::io::Read::read_to_string(&mut err, &mut rest);
                rest
            });
            BridgeProc { child, at, log }
        }

        /// Ends it as at Ctrl-C: how it exited, its report and its log.
        fn stop(mut self) -> (std::process::ExitStatus, String, String) {
            // SAFETY: kill(2) on the bridge we started.
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
            let mut report = String::new();
            if let Some(mut o) = self.child.stdout.take() {
                let _ = std::io::Read::read_to_string(&mut o, &mut report);
            }
            let ended = self.child.wait().expect("the bridge ends");
            (ended, report, self.log.join().unwrap_or_default())
        }
    }

    /// The lab as two real hosts on a bench: each VM's NIC a host tap with
    /// nothing between the two, `roce bridge` standing there as on two NIC ports
    /// of a box in the middle, each VM's agent reached over TCP on a management
    /// link of its own (keyed), never over the lab's control channel. The whole
    /// suite, run as against hardware (`--endpoints … --bridge …`) and held to
    /// the same profile as in the lab, passes: every verdict is the lab's, fault
    /// and requester-side scenarios included. Each device's counters agree with
    /// the bridge's recording, so do the hosts' own captures (`--capture-at-agents`),
    /// and the bridge served every scenario's run to its end.
    #[test]
    #[ignore = "needs the lab: bash scripts/test.sh builds the VM images, then runs it"]
    fn the_suite_on_a_bench_through_roce_bridge_gives_the_labs_verdicts() {
        let roce = said;
        let Bench { dir, key, eps, bridge, lab: _lab } = bench("bench");
        let (k, at) = (key.as_str(), bridge.at.clone());
        let out_dir = dir.join("out");
        let profile = repo().join("profiles").join("rxe-linux-6.1.toml");
        let (code, said) = roce(&[
            "suite",
            "--endpoints",
            &eps,
            "--key-file",
            k,
            "--bridge",
            &at,
            "--capture-at-agents",
            "-q",
            "--profile",
            profile.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
            repo().join("scenarios").to_str().unwrap(),
        ]);
        let (ended, report, log) = bridge.stop();
        assert_eq!(code, Some(0), "every verdict as the profile recorded it in the lab:\n{said}");
        assert!(!said.contains("left out"), "no scenario left out: {said}");
        let json = out_dir.join("report.json");
        let rep: Value =
            serde_json::from_slice(&std::fs::read(&json).expect("report")).expect("JSON");
        let scenarios = rep["scenarios"].as_array().expect("scenarios");
        counters_agree_with_the_wire(scenarios);
        // Each host's own capture (libpcap in each VM), merged by frame
        // identity, against the bridge's recording on the taps: the bridge's
        // stays the judged wire.
        agents_agree_with_the_switch(scenarios, |from| from.starts_with("the bridge at "));
        let faulted = scenarios
            .iter()
            .filter(|s| {
                s["status"] == "passed" && s["faults"].as_array().is_some_and(|f| !f.is_empty())
            })
            .count();
        assert!(
            faulted >= 20,
            "fault and requester-side scenarios ran through the bridge ({faulted})"
        );
        // A run on the bridge for each scenario that got as far as recording
        // (one skipped later, when its device refused a verb, had one too).
        let recorded = scenarios.iter().filter(|s| s["capture"].is_string()).count();
        assert!(recorded >= 270, "{recorded} scenarios recorded");
        assert_eq!(ended.code(), Some(0), "{report}{log}");
        assert!(
            report.contains(&format!(
                "served {recorded} run(s): {recorded} ended by their controller"
            )),
            "one bridge run per recorded scenario, each ended by the controller:\n{report}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `roce fuzz` against two real hosts through `roce bridge` (the lab as a
    /// bench, as above): a fault planted in the bridge's rules is found,
    /// confirmed and minimised as in the lab, its wire is the bridge's
    /// recording, and no kernel is read (the device's events and counters and
    /// the agents' liveness stand in for it, and the report says so).
    #[test]
    #[ignore = "needs the lab: bash scripts/test.sh builds the VM images, then runs it"]
    fn fuzz_through_roce_bridge_finds_a_planted_fault_on_real_hosts() {
        let Bench { dir, key, eps, bridge, lab: _lab } = bench("fuzzbench");
        let k = key.as_str();
        let out_dir = dir.join("out");
        let hosts = ["fuzz", "--endpoints", &eps, "--key-file", k, "--bridge", &bridge.at];
        let out = ["protocol", "--out", out_dir.to_str().unwrap()];
        let (code, text) = said(&[&hosts[..], &ONE_PLANTED_BATCH, &out].concat());
        let (ended, report, log) = bridge.stop();
        assert_eq!(code, Some(1), "findings: exit 1\n{text}");
        let r: Value =
            serde_json::from_slice(&std::fs::read(out_dir.join("fuzz.json")).expect("fuzz.json"))
                .expect("fuzz.json parses");
        let findings = r["findings"].as_array().expect("findings");
        let f = finding(&r, "protocol", "at RC in ERR");
        assert_eq!(f["confirmed"], true, "{f:#}");
        assert_eq!(f["probes"].as_array().map(Vec::len), Some(1), "minimised to one probe: {f:#}");
        assert!(Path::new(f["capture"].as_str().expect("its capture")).exists(), "{f:#}");
        assert!(findings.iter().all(|f| f["oracle"] != "kernel"), "no kernel is read: {r:#}");
        assert!(
            r["rxe"]["off"].as_str().is_some_and(|w| !w.is_empty()),
            "the report says why no rxe coverage: {r:#}"
        );
        // Every run went through the bridge, which recorded it: the batch,
        // and each run confirming and minimising its finding.
        assert_eq!(ended.code(), Some(0), "{report}{log}");
        let runs = 1 + f["minimise_runs"].as_u64().expect("minimise_runs");
        assert!(
            report.contains(&format!("served {runs} run(s): {runs} ended by their controller")),
            "{runs} runs on the bridge:\n{report}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    #[ignore = "needs the lab: bash scripts/test.sh builds the VM images, then runs it"]
    fn a_vm_that_dies_or_hangs_fails_its_scenario_and_the_run_goes_on() {
        let lab = Lab(format!("dead-{}", std::process::id()));
        let paths = lab::state::LabPaths::new(&lab::default_root(), &lab.0).expect("lab paths");
        let dir = std::env::temp_dir().join(format!("roce-deadvm-{}", std::process::id()));
        let scen = dir.join("scenarios");
        std::fs::create_dir_all(&scen).expect("scenario dir");
        // b waits for a receive completion that never comes: the controller is waiting
        // on b's agent when the test kills (then freezes) VM b.
        std::fs::write(scen.join("1_killed.toml"), never_completes("VM b killed", 60_000, 90_000))
            .expect("write");
        std::fs::write(scen.join("2_frozen.toml"), never_completes("VM b frozen", 60_000, 90_000))
            .expect("write");
        std::fs::copy(repo().join("scenarios/rc_send_tcp.toml"), scen.join("3_send.toml"))
            .expect("copy");
        let json = dir.join("report.json");
        let child = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["run", "--lab", &lab.0, "--out"])
            .arg(dir.join("out"))
            .arg("--json")
            .arg(&json)
            .arg(&scen)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("roce run");
        let t0 = std::time::Instant::now();

        // 1: qemu of VM b dies mid-scenario.
        let pid = qemu_b_once_running(&paths, std::time::Duration::from_secs(300));
        std::thread::sleep(std::time::Duration::from_secs(4));
        let killed_at = t0.elapsed();
        assert!(Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .expect("kill")
            .success());
        // 2: once the lab is back (a new qemu), VM b freezes (qemu stopped: its
        // sockets stay open, nothing closes; only the missing heartbeat tells).
        let until = std::time::Instant::now() + std::time::Duration::from_secs(300);
        let pid2 = loop {
            let p = qemu_b_once_running(&paths, std::time::Duration::from_secs(300));
            if p != pid {
                break p;
            }
            assert!(std::time::Instant::now() < until, "the lab did not come back after VM b died");
            std::thread::sleep(std::time::Duration::from_millis(200));
        };
        std::thread::sleep(std::time::Duration::from_secs(4));
        assert!(Command::new("kill")
            .args(["-STOP", &pid2.to_string()])
            .status()
            .expect("kill")
            .success());

        let out = child.wait_with_output().expect("roce run ends");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("{stdout}\n{stderr}");
        assert_eq!(out.status.code(), Some(1), "two scenarios fail, the run itself completes");
        let report: Value = serde_json::from_slice(&std::fs::read(&json).expect("JSON report"))
            .expect("JSON parses");
        let s = report["scenarios"].as_array().expect("scenarios");
        assert_eq!(s.len(), 3, "{report:#}");
        let err = |i: usize| s[i]["error"].as_str().unwrap_or("").to_string();
        // The death is told at once (not after the step's 60 s or a request deadline),
        // naming the VM.
        assert!(err(0).contains("VM b") && err(0).contains("went away"), "{:#}", s[0]);
        let d0 = s[0]["duration_s"].as_f64().expect("duration");
        assert!(
            d0 < killed_at.as_secs_f64() + 10.0,
            "the dead VM was noticed {d0} s into the scenario (killed at ~{killed_at:?})"
        );
        // The frozen VM is called hung after the heartbeat timeout.
        assert!(err(1).contains("VM b: stopped answering (hung guest?)"), "{:#}", s[1]);
        assert!(s[1]["duration_s"].as_f64().expect("duration") < 45.0, "{:#}", s[1]);
        // The run went on, on a lab brought back for it.
        assert_eq!(s[2]["pass"], true, "{:#}", s[2]);
        assert!(
            stdout.contains("restarting it") || stderr.contains("restarting it"),
            "the restart is said"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `roce run --lab NAME --json FILE ARGS…`: the exit code, the report, stdout, stderr.
    fn run_json(
        lab: &Lab,
        dir: &Path,
        tag: &str,
        args: &[&str],
    ) -> (Option<i32>, Value, String, String) {
        let json = dir.join(format!("{tag}.json"));
        let out = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["run", "--lab", &lab.0, "--out"])
            .arg(dir.join(tag))
            .arg("--json")
            .arg(&json)
            .args(args)
            .output()
            .expect("roce run");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        eprintln!("{stdout}\n{stderr}");
        let report = std::fs::read(&json)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        (out.status.code(), report, stdout, stderr)
    }

    /// Whether the report's only scenario failed its memory expectation and nothing else.
    fn memory_alone_failed(report: &Value) -> bool {
        let s = &report["scenarios"][0];
        let failed: Vec<&str> = s["verdicts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["pass"] == false)
            .filter_map(|v| v["kind"].as_str())
            .collect();
        s["pass"] == false && failed == ["memory"]
    }

    /// A lab that heals keeps what it was told (issue: a healed lab forgot its
    /// standing rules). A standing rule corrupts every READ response's payload with
    /// the ICRC fixed, so the device accepts it: `rc_read.toml` completes and its
    /// memory check fails. VM b is killed; the next run finds the lab broken,
    /// restarts it on the first try, says it brings the rule back, and the same
    /// scenario fails the same way.
    #[test]
    #[ignore = "needs the lab: bash scripts/test.sh builds the VM images, then runs it"]
    fn a_healed_lab_keeps_its_standing_rules_and_heals_on_the_first_run() {
        let lab = Lab(format!("plant-{}", std::process::id()));
        let paths = lab::state::LabPaths::new(&lab::default_root(), &lab.0).expect("lab paths");
        let dir = std::env::temp_dir().join(format!("roce-plant-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let rule = "corrupt op=read-response-only at=payload+1 icrc=fix";
        let up = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["lab", "--name", &lab.0, "up", "--fault", rule, "--seed", "3"])
            .output()
            .expect("roce lab up");
        let said = String::from_utf8_lossy(&up.stdout);
        assert!(up.status.success(), "{said}{}", String::from_utf8_lossy(&up.stderr));
        assert!(said.contains("standing fault rule (seed 3): corrupt"), "{said}");
        let read = repo().join("scenarios/rc_read.toml");
        let read = read.to_str().expect("utf-8 path");

        let (code, report, stdout, _) = run_json(&lab, &dir, "before", &["--no-profile", read]);
        assert_eq!(code, Some(1), "{report:#}");
        assert!(memory_alone_failed(&report), "the rule corrupts the READ: {report:#}");
        assert!(
            stdout.starts_with("held to IBA alone (--no-profile)"),
            "the first line says what it is held to: {stdout}"
        );

        // VM b dies while the lab is idle; the daemon marks the lab broken.
        let st = lab::status(&paths).expect("the lab is up");
        let qemu_b = st["vms"][1]["qemu_pid"].as_i64().expect("qemu pid");
        assert!(Command::new("kill")
            .args(["-KILL", &qemu_b.to_string()])
            .status()
            .expect("kill")
            .success());
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while lab::usable(&paths).is_ok() {
            assert!(std::time::Instant::now() < until, "the daemon never noticed VM b die");
            std::thread::sleep(std::time::Duration::from_millis(200));
        }

        // The first run after it heals the lab (no error, no second try) with the rule.
        let (code, report, _, stderr) = run_json(&lab, &dir, "after", &["--no-profile", read]);
        assert!(
            stderr.contains("is not usable")
                && stderr.contains("with its standing fault rule (seed 3)"),
            "the restart is said, and that it brings the rule back: {stderr}"
        );
        assert_eq!(code, Some(1), "{report:#}");
        assert!(
            memory_alone_failed(&report),
            "the rule is still in force after the heal: {report:#}"
        );
        let st = lab::status(&paths).expect("the lab is up again");
        assert_ne!(st["vms"][1]["qemu_pid"].as_i64(), Some(qemu_b), "VM b is a new one");
        assert_eq!(
            st["standing_rules"][0].as_str().map(|r| r.starts_with("corrupt")),
            Some(true),
            "{st:#}"
        );
        let counts = &st["standing_counts"][0];
        assert!(counts["applied"].as_u64().is_some_and(|n| n >= 1), "{st:#}");

        // `down` forgets the definition: the next boot is plain.
        let down = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["lab", "--name", &lab.0, "down"])
            .status()
            .expect("roce lab down");
        assert!(down.success());
        assert!(
            lab::Definition::remembered(&paths).is_ok_and(|d| d.is_none()),
            "down forgets what the lab was told"
        );
        let (code, report, _, _) = run_json(&lab, &dir, "plain", &["--no-profile", read]);
        assert_eq!(code, Some(0), "a plain lab passes the READ: {report:#}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// README command 1's promise: in the lab, without `--profile`, a run is held to
    /// the lab kernel's profile, says so first, and skips what that profile knows
    /// crashes the kernel, with its reason, rather than panicking VM b.
    #[test]
    #[ignore = "needs the lab: bash scripts/test.sh builds the VM images, then runs it"]
    fn without_a_profile_the_lab_kernels_profile_holds_and_its_crashes_are_skipped() {
        let lab = Lab(format!("kprof-{}", std::process::id()));
        let dir = std::env::temp_dir().join(format!("roce-kprof-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let panics = repo().join("scenarios/findings/send_inv_unbound_type2_window_panics");
        let read = repo().join("scenarios/rc_read.toml");
        let (code, report, stdout, _) = run_json(
            &lab,
            &dir,
            "default",
            &[panics.to_str().expect("utf-8"), read.to_str().expect("utf-8")],
        );
        let first = stdout.lines().next().unwrap_or("");
        assert!(
            first.starts_with("held to ")
                && first
                    .contains("profiles/rxe-linux-6.1.toml, the lab kernel's profile (Linux 6.1.")
                && first.ends_with("; --no-profile judges against IBA alone"),
            "{stdout}"
        );
        assert_eq!(code, Some(0), "green: the crash is skipped, the READ passes: {report:#}");
        let s = report["scenarios"].as_array().expect("scenarios");
        let skipped =
            s.iter().find(|s| s["name"].as_str().is_some_and(|n| n.contains("never bound panics")));
        let skipped = skipped.expect("the crash reproducer is reported");
        assert_eq!(skipped["status"], "skipped", "{skipped:#}");
        assert!(
            skipped["skip_reason"]
                .as_str()
                .is_some_and(|e| e.contains("crashes this setup, says the profile")
                    && e.contains("__rxe_put")),
            "skipped with the profile's reason: {skipped:#}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// What `roce new` writes is a scenario that passes as written: every
    /// built-in template, run in the lab as a newcomer would first run it, passes
    /// and follows IBA (its expectations are the spec's, not a profile's).
    #[test]
    #[ignore = "needs the lab: bash scripts/test.sh builds the VM images, then runs it"]
    fn every_template_of_roce_new_passes_in_the_lab() {
        let lab = Lab(format!("tpl-{}", std::process::id()));
        let dir = std::env::temp_dir().join(format!("roce-tpl-{}", std::process::id()));
        let scen = dir.join("mine");
        let templates = ["write", "send", "read", "atomic", "ud", "fault"];
        for t in templates {
            let out = Command::new(env!("CARGO_BIN_EXE_roce"))
                .args(["new", "--from", t])
                .arg(scen.join(format!("first_{t}")))
                .output()
                .expect("roce new");
            assert!(out.status.success(), "{t}: {}", String::from_utf8_lossy(&out.stderr));
        }
        let (code, report, _, _) = run_json(&lab, &dir, "tpl", &[scen.to_str().expect("utf-8")]);
        assert_eq!(code, Some(0), "{report:#}");
        let s = report["scenarios"].as_array().expect("scenarios");
        assert_eq!(s.len(), templates.len(), "{report:#}");
        for sc in s {
            assert_eq!(sc["iba"], "follows", "{sc:#}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The real-host mode, for real inside the lab: each VM runs `roce agent --listen
    /// --key-file` as `nobody` with only CAP_NET_RAW and CAP_IPC_LOCK (as the book's
    /// systemd unit does), and a controller in VM a drives them over the VMs' network.
    /// After 1,000 connections of garbage, scenarios with verbs and crafted probes
    /// pass through the authenticated agents; a controller killed mid-scenario, and one stopped (silent beyond the heartbeat
    /// deadline), leave no QP, MR, PD or CQ behind (`rdma resource`).
    #[test]
    #[ignore = "needs the lab: bash scripts/test.sh builds the VM images, then runs it"]
    fn keyed_unprivileged_agents_serve_and_free_everything_of_a_killed_or_silent_controller() {
        let lab = Lab(format!("agent-{}", std::process::id()));
        let exec = |vm: &str, cmd: &str, stdin: Option<&[u8]>| -> String {
            let mut c = Command::new(env!("CARGO_BIN_EXE_roce"));
            c.args(["lab", "--name", &lab.0, "exec", "--timeout", "120"]);
            if stdin.is_some() {
                c.arg("-i");
            }
            c.args([vm, "--", cmd])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut child = c.spawn().expect("roce lab exec");
            if let Some(data) = stdin {
                use std::io::Write;
                child.stdin.take().expect("stdin").write_all(data).expect("stdin written");
            }
            let out = child.wait_with_output().expect("roce lab exec");
            let text = String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "VM {vm}: {cmd}\n{text}");
            text
        };
        // Boots the lab (a `roce run` would too); then one key, in both VMs.
        let up = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["lab", "--name", &lab.0, "up"])
            .output()
            .expect("roce lab up");
        assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
        let key = exec(
            "a",
            "mkdir -p /tmp/r && /host/roce agent --gen-key /tmp/r/k && cat /tmp/r/k",
            None,
        );
        let key = key.lines().find(|l| l.len() == 64).expect("a 64-hex-digit key").to_string();
        exec("b", &format!("mkdir -p /tmp/r && umask 077 && echo {key} > /tmp/r/k"), None);
        for (vm, ip) in [("a", "10.0.0.1"), ("b", "10.0.0.2")] {
            let log = exec(
            vm,
            &format!(
                "chown nobody /tmp/r /tmp/r/k && setsid setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=+net_raw,+ipc_lock \
                 --ambient-caps=+net_raw,+ipc_lock /host/roce agent --listen {ip}:7000 --key-file /tmp/r/k --heartbeat-deadline 5 \
                 > /tmp/r/agent.log 2>&1 < /dev/null & \
                 for i in $(seq 100); do grep -q 'must prove' /tmp/r/agent.log && break; sleep 0.1; done; \
                 cat /tmp/r/agent.log; ps -o user= -C roce"
            ),
            None,
        );
            assert!(
                log.contains("a controller must prove it has the key") && log.contains("nobody"),
                "{log}"
            );
        }
        // 1,000 connections of garbage (0 to 96 random bytes each) at agent b first.
        let flood = exec(
        "a",
        "bash -c 'for i in $(seq 1000); do head -c $((i % 97)) /dev/urandom 2>/dev/null > /dev/tcp/10.0.0.2/7000 || true; done; echo flood done'",
        None,
    );
        assert!(flood.contains("flood done"), "{flood}");
        let mut tar = Command::new("tar")
            .arg("c")
            .arg("-C")
            .arg(repo())
            .arg("scenarios")
            .output()
            .expect("tar");
        assert!(tar.status.success());
        exec("a", "tar x -C /tmp/r", Some(&std::mem::take(&mut tar.stdout)));
        let run = exec(
        "a",
        "cd /tmp/r && /host/roce run --endpoints a=10.0.0.1:7000,b=10.0.0.2:7000 --key-file /tmp/r/k -i eth0 --out /tmp/r/out \
         scenarios/rc_send_tcp.toml scenarios/rc_read.toml scenarios/atomics.toml scenarios/conformance/psn_ahead.toml scenarios/conformance/unknown_rkey.toml",
        None,
    );
        assert!(run.contains("5 passed, 0 failed"), "{run}");

        // A controller that dies, then one that falls silent, in the middle of a
        // scenario that holds a QP pair and 512 KiB of registered memory (the most
        // that is read back whole).
        let sleepy = "name = \"sleepy\"\n[endpoints.a]\n[endpoints.b]\n[[qp]]\nname = \"q\"\ntype = \"rc\"\nbetween = [\"b\", \"a\"]\n\
                  [[mr]]\nname = \"m\"\non = \"b\"\nsize = 524288\naccess = [\"local_write\", \"remote_write\"]\n\
                  [[step]]\nop = \"sleep\"\nms = 25000\n[[expect.memory]]\non = \"b\"\nmr = \"m\"\nunchanged = true\n";
        exec("a", "cat > /tmp/r/sleepy.toml", Some(sleepy.as_bytes()));
        let script = "cd /tmp/r; R='/host/roce run --endpoints a=10.0.0.1:7000,b=10.0.0.2:7000 --key-file /tmp/r/k sleepy.toml'\n\
                  echo \"before: $(rdma resource show)\"\n\
                  $R > ctl1.log 2>&1 & C=$!; sleep 4; echo \"running: $(rdma resource show)\"\n\
                  kill -9 $C; sleep 1; echo \"killed: $(rdma resource show)\"\n\
                  $R > ctl2.log 2>&1 & C=$!; sleep 4; echo \"running2: $(rdma resource show)\"\n\
                  kill -STOP $C; sleep 8; echo \"silent: $(rdma resource show)\"\n\
                  kill -9 $C; tail -3 agent.log\n";
        let out = exec("a", "sh", Some(script.as_bytes()));
        let line = |tag: &str| {
            out.lines()
                .find(|l| l.starts_with(tag))
                .unwrap_or_else(|| panic!("no `{tag}` in {out}"))
                .to_string()
        };
        let counts = |l: &str| -> String {
            l.split_once("rxe0:").map(|x| x.1.trim().to_string()).unwrap_or_default()
        };
        let before = counts(&line("before:"));
        assert!(before.contains("qp ") && before.contains("mr 0"), "{out}");
        assert_ne!(
            counts(&line("running:")),
            before,
            "the scenario holds resources while it runs: {out}"
        );
        assert_eq!(
            counts(&line("killed:")),
            before,
            "a killed controller's resources are freed: {out}"
        );
        assert_ne!(counts(&line("running2:")), before, "{out}");
        assert_eq!(
        counts(&line("silent:")),
        before,
        "a silent controller is dropped at the heartbeat deadline and its resources freed: {out}"
    );
        assert!(out.contains("not even a heartbeat, for 5s: dropped"), "{out}");
        let b = exec("b", "rdma resource show; cat /tmp/r/agent.log", None);
        assert!(b.contains(&format!("rxe0: {before}")), "VM b is back to its baseline too: {b}");
    }

    /// The lab's agents stay up from one scenario to the next: a scenario that leaves
    /// its QP in the error state, receives flushed and MRs registered is followed by
    /// one that, while it sleeps, finds the device holding only its own resources
    /// (`rdma resource` in VM b: the baseline plus one PD, CQ, QP and MR), not the
    /// last scenario's.
    #[test]
    #[ignore = "needs the lab: bash scripts/test.sh builds the VM images, then runs it"]
    fn a_kept_agent_starts_each_scenario_on_a_clean_device() {
        let lab = Lab(format!("clean-{}", std::process::id()));
        let rdma = |vm: &str| -> String {
            let out = Command::new(env!("CARGO_BIN_EXE_roce"))
                .args(["lab", "--name", &lab.0, "exec", vm, "--", "rdma resource show"])
                .output()
                .expect("lab exec");
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            text.split_once("rxe0:").map(|x| x.1.trim().to_string()).unwrap_or(text)
        };
        let up = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["lab", "--name", &lab.0, "up"])
            .output()
            .expect("roce lab up");
        assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
        let baseline = rdma("b");
        let dir = std::env::temp_dir().join(format!("roce-clean-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::copy(
            repo().join("scenarios/write_mr_without_remote_write.toml"),
            dir.join("1_error.toml"),
        )
        .expect("copy");
        std::fs::write(
        dir.join("2_sleepy.toml"),
        "name = \"sleepy\"\n[endpoints.a]\n[endpoints.b]\n[[qp]]\nname = \"q\"\ntype = \"rc\"\nbetween = [\"b\", \"a\"]\n\
         [[mr]]\nname = \"m\"\non = \"b\"\nsize = 4096\naccess = [\"local_write\", \"remote_write\"]\n\
         [[step]]\nop = \"sleep\"\nms = 8000\n[[expect.memory]]\non = \"b\"\nmr = \"m\"\nunchanged = true\n",
    )
    .expect("write");
        let json = dir.join("r.json");
        let mut run = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["run", "--timings", "--lab", &lab.0, "--out"])
            .arg(dir.join("out"))
            .arg("--json")
            .arg(&json)
            .arg(&dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("roce run");
        // VM b's device while the run goes on: each scenario holds one CQ, QP and MR
        // there, and the kept agent one PD from its first scenario on; a leak from
        // the first would show as more during the second.
        let count = |s: &str, what: &str| -> i64 {
            let w: Vec<&str> = s.split_whitespace().collect();
            w.windows(2).find(|p| p[0] == what).and_then(|p| p[1].parse().ok()).unwrap_or(-1)
        };
        let mut samples = Vec::new();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(180);
        while run.try_wait().expect("roce run").is_none() {
            if std::time::Instant::now() > until {
                let _ = run.kill();
                panic!("roce run of two short scenarios did not end within 180 s");
            }
            samples.push(rdma("b"));
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        let out = run.wait_with_output().expect("roce run");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
        for what in ["pd", "cq", "qp", "mr"] {
            let base = count(&baseline, what);
            assert!(
                samples.iter().all(|s| count(s, what) <= base + 1),
                "{what}: never more than one scenario's worth over `{baseline}`: {samples:#?}"
            );
        }
        assert!(
            samples.iter().any(|s| ["pd", "cq", "qp", "mr"]
                .iter()
                .all(|w| count(s, w) == count(&baseline, w) + 1)),
            "the 8 s scenario was seen holding its own resources: {samples:#?}"
        );
        // The agents were kept: the second scenario did not start its own.
        let report: Value =
            serde_json::from_slice(&std::fs::read(&json).expect("report")).expect("json");
        let start = |i: usize| {
            report["scenarios"][i]["timings_ms"]["agent_start"]
                .as_f64()
                .expect("agent_start timing")
        };
        assert!(
            start(1) < start(0) / 3.0,
            "kept agents start in a fraction of the time: {} ms then {} ms",
            start(0),
            start(1)
        );
        // So was the device context (and the PD, which the counts above allow): the
        // second scenario did not open the device again.
        let open = |i: usize| {
            report["scenarios"][i]["timings_ms"]["device_open"]
                .as_f64()
                .expect("device_open timing")
        };
        assert!(
            open(1) < open(0) / 3.0,
            "a kept context is not opened again: {} ms then {} ms",
            open(0),
            open(1)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A scenario for VM b that posts a receive and waits for a completion that
    /// never comes, `within_ms` long, in a scenario that gives itself `timeout_ms`.
    fn never_completes(name: &str, within_ms: u64, timeout_ms: u64) -> String {
        format!(
        "name = \"{name}\"\ntimeout_ms = {timeout_ms}\n[endpoints.a]\n[endpoints.b]\n[[qp]]\nname = \"q\"\ntype = \"rc\"\nbetween = [\"b\", \"a\"]\n\
         [[mr]]\nname = \"rbuf\"\non = \"b\"\nsize = 64\naccess = [\"local_write\"]\n\
         [[step]]\non = \"b\"\nop = \"post_recv\"\nqp = \"q\"\nwr_id = 1\nsge = [{{ mr = \"rbuf\" }}]\n\
         [[step]]\non = \"b\"\nop = \"wait_completions\"\ncount = 1\nwithin_ms = {within_ms}\n\
         [[expect.completion]]\non = \"b\"\ncount = 1\n"
    )
    }

    /// `roce run -j N` of the files in `dir` on `lab`, started: JSON report to `json`.
    fn run_side_by_side(lab: &Lab, jobs: &str, dir: &Path, json: &Path) -> std::process::Child {
        Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["run", "-j", jobs, "--lab", &lab.0, "--out"])
            .arg(dir.join("out"))
            .arg("--json")
            .arg(json)
            .arg(dir.join("scenarios"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("roce run")
    }

    /// Side by side on one lab (`-j`), a scenario that hangs fails alone, at its own
    /// deadline: the others pass, and the hung agent is stopped rather than waited
    /// for. Then VM b dies under two scenarios at once: both fail naming it, the lab
    /// is brought back once, and the scenarios after them pass.
    #[test]
    #[ignore = "needs the lab: bash scripts/test.sh builds the VM images, then runs it"]
    fn side_by_side_a_hung_scenario_fails_alone_at_its_deadline_and_a_dead_vm_heals_once() {
        let lab = Lab(format!("hang-{}", std::process::id()));
        let paths = lab::state::LabPaths::new(&lab::default_root(), &lab.0).expect("lab paths");
        let up = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["lab", "--name", &lab.0, "up"])
            .output()
            .expect("roce lab up");
        assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
        let base = std::env::temp_dir().join(format!("roce-hang-{}", std::process::id()));
        let others =
            ["rc_send_tcp", "rc_read", "rc_write_rdma_cm", "atomics", "ud_send", "send_write_imm"];
        let fill = |dir: &Path, first: &[(&str, String)]| {
            let scen = dir.join("scenarios");
            std::fs::create_dir_all(&scen).expect("scenario dir");
            for (file, text) in first {
                std::fs::write(scen.join(file), text).expect("write");
            }
            for (i, o) in others.iter().enumerate() {
                std::fs::copy(
                    repo().join(format!("scenarios/{o}.toml")),
                    scen.join(format!("5{i}_{o}.toml")),
                )
                .expect("copy");
            }
        };
        let report = |json: &Path| -> Vec<Value> {
            let r: Value = serde_json::from_slice(&std::fs::read(json).expect("JSON report"))
                .expect("JSON parses");
            r["scenarios"].as_array().expect("scenarios").clone()
        };

        // 1: the first scenario's wait would last 120 s; its deadline is 6 s.
        let hung = base.join("hung");
        fill(&hung, &[("1_hung.toml", never_completes("hung", 120_000, 6_000))]);
        let json = hung.join("r.json");
        let out =
            run_side_by_side(&lab, "3", &hung, &json).wait_with_output().expect("roce run ends");
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(1), "one scenario fails, the run completes: {text}");
        let s = report(&json);
        assert_eq!(s.len(), 1 + others.len(), "{text}");
        let err = s[0]["error"].as_str().unwrap_or("");
        assert!(
        err.contains("step 2 (wait_completions on b)")
            && err.contains(
                "deadline (6000 ms, timeout_ms) passed while endpoint b's agent was still at it"
            ),
        "{:#}",
        s[0]
    );
        // Its agent, still waiting, was stopped: not waited for (120 s), nor given
        // the usual time to tear down.
        let d = s[0]["duration_s"].as_f64().expect("duration");
        assert!(d < 20.0, "the hung scenario took {d} s: {:#}", s[0]);
        for x in &s[1..] {
            assert_eq!(x["pass"], true, "{x:#}");
        }

        // 2: VM b dies while two scenarios wait on it.
        let dead = base.join("dead");
        fill(
            &dead,
            &[
                ("1_killed.toml", never_completes("killed 1", 60_000, 90_000)),
                ("2_killed.toml", never_completes("killed 2", 60_000, 90_000)),
            ],
        );
        let json = dead.join("r.json");
        let child = run_side_by_side(&lab, "2", &dead, &json);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(300);
        let pid = loop {
            if let Ok(st) = lab::client::request(&paths, &lab::control::Request::Status) {
                if st["runs"].as_u64() == Some(2) {
                    break st["vms"][1]["qemu_pid"].as_i64().expect("qemu pid");
                }
            }
            assert!(
                std::time::Instant::now() < until,
                "two scenarios did not start side by side within 300 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        };
        std::thread::sleep(std::time::Duration::from_secs(4));
        assert!(Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .expect("kill")
            .success());
        let out = child.wait_with_output().expect("roce run ends");
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(1), "{text}");
        let s = report(&json);
        assert_eq!(s.len(), 2 + others.len(), "{text}");
        for x in &s[..2] {
            assert!(
                x["error"].as_str().unwrap_or("").contains("VM b"),
                "a scenario on the dead VM says so: {x:#}"
            );
        }
        for x in &s[2..] {
            assert_eq!(x["pass"], true, "{x:#}");
        }
        assert_eq!(
            text.matches("restarting it").count(),
            1,
            "the lab is brought back once: {text}"
        );
        let _ = std::fs::remove_dir_all(&base);
    }

    fn roce(args: &[&str]) -> std::process::Output {
        let out =
            Command::new(env!("CARGO_BIN_EXE_roce")).args(args).output().expect("running roce");
        eprintln!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The C reproducers of the kernel findings (`roce repro`), built on the host
    /// with nothing but cc and libibverbs, run in the lab's VMs by `roce lab run`:
    /// each takes VM b down with the BUG line its finding records, and `roce lab
    /// run` says so. The lab is brought back between them by `roce lab up`.
    #[test]
    #[ignore = "needs the lab: bash scripts/test.sh builds the VM images, then runs it"]
    fn c_reproducers_of_the_kernel_findings_panic_vm_b_as_their_scenarios_do() {
        let lab = Lab(format!("repro-{}", std::process::id()));
        let tmp = std::env::temp_dir().join(format!("roce-repro-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).expect("temp dir");
        for finding in
            ["write_dma_len_zero_with_payload_panics", "send_inv_unbound_type2_window_panics"]
        {
            let dir = repo().join("scenarios/findings").join(finding);
            // What the scenario's kernel oracle saw, as the finding records it.
            let toml = std::fs::read_to_string(dir.join("finding.toml")).expect("finding");
            let want = toml
                .lines()
                .find_map(|l| l.split_once("BUG on VM b: ").map(|(_, s)| s.trim().to_string()))
                .expect("the finding records its BUG line");
            // The committed reproducer is what `roce repro` writes (a unit test
            // holds it to that); build it as a kernel developer would.
            let c = tmp.join(format!("{finding}.c"));
            let made = roce(&[
                "repro",
                &dir.join("finding.toml").to_string_lossy(),
                "-o",
                &c.to_string_lossy(),
            ]);
            assert!(made.status.success());
            let bin = tmp.join(finding);
            let cc = Command::new("cc")
                .args(["-O2", "-o"])
                .arg(&bin)
                .arg(&c)
                .arg("-libverbs")
                .output()
                .expect("cc");
            assert!(cc.status.success(), "{}", String::from_utf8_lossy(&cc.stderr));
            let up = roce(&["lab", "--name", &lab.0, "up", "--image", "bookworm"]);
            assert!(up.status.success(), "the lab is up (again)");
            let status: Value = serde_json::from_slice(
                &roce(&["lab", "--name", &lab.0, "status", "--json"]).stdout,
            )
            .expect("status JSON");
            let share = PathBuf::from(status["share"].as_str().expect("the share"));
            std::fs::copy(&bin, share.join("repro")).expect("into the share");
            let out = roce(&[
                "lab",
                "--name",
                &lab.0,
                "run",
                "--json",
                "--timeout",
                "120",
                "--a",
                "/host/repro a",
                "--b",
                "/host/repro b 10.0.0.1",
            ]);
            let run: Value = serde_json::from_slice(&out.stdout).expect("run JSON");
            let said: Vec<(String, String)> = run["kernel"]
                .as_array()
                .expect("kernel reports")
                .iter()
                .map(|k| {
                    (
                        k["vm"].as_str().unwrap_or("").to_string(),
                        k["line"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect();
            let bug = said
                .iter()
                .find(|(vm, l)| vm == "b" && l.starts_with("BUG:"))
                .unwrap_or_else(|| panic!("{finding}: no BUG on VM b: {said:?}"));
            // `address: 0000000000000104` as the fuzzer keeps it: `address: N`.
            let line = match bug.1.split_once("address: ") {
                Some((head, rest)) => {
                    let tail = rest.trim_start_matches(|c: char| c.is_ascii_hexdigit());
                    format!("{head}address: N{tail}")
                }
                None => bug.1.clone(),
            };
            assert_eq!(line, want, "{finding}: the reproducer's BUG is the scenario's");
            assert!(said.iter().all(|(vm, _)| vm == "b"), "VM a's kernel said nothing: {said:?}");
            // a tells that b stopped answering; it does not hang.
            assert!(
                run["sides"][0]["stdout"]
                    .as_str()
                    .unwrap_or("")
                    .contains("the other end stopped answering"),
                "{run:#}"
            );
        }
        let _ = std::fs::remove_dir_all(&tmp);
    }

    /// `roce fuzz` with a fault planted in every batch (a switch rule): the oracle
    /// it is for finds it, the finding is confirmed and minimised to what it
    /// takes, and its scenario reproduces it with `roce run` and `--replay`.
    #[test]
    #[ignore = "needs the lab: bash scripts/test.sh builds the VM images, then runs it"]
    fn fuzz_finds_minimises_and_reproduces_planted_faults() {
        let lab = Lab(format!("fuzz-{}", std::process::id()));
        let base = std::env::temp_dir().join(format!("roce-fuzz-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = |p: &str| base.join(p).to_string_lossy().into_owned();
        let fuzz = |plant: &str, out: &str| {
            let lab = ["fuzz", "--image", "bookworm", "--lab", &lab.0];
            roce(&[&lab[..], &ONE_PLANTED_BATCH, &[plant, "--out", &dir(out)]].concat())
        };
        let report = |out: &str| -> Value {
            serde_json::from_slice(
                &std::fs::read(base.join(out).join("fuzz.json")).expect("fuzz.json"),
            )
            .expect("fuzz.json parses")
        };

        // Protocol: the switch ACKs requests to the QP in ERR, which IBA says
        // answers nothing. One probe at rc_err is all it takes.
        let out = fuzz("protocol", "protocol");
        assert_eq!(out.status.code(), Some(1), "findings: exit 1");
        let r = report("protocol");
        let planted: Vec<&Value> = r["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| {
                f["oracle"] == "protocol"
                    && f["signature"].as_str().is_some_and(|s| s.contains("at RC in ERR"))
            })
            .collect();
        assert!(!planted.is_empty(), "{r:#}");
        let f = planted[0];
        assert_eq!(f["confirmed"], true, "{f:#}");
        assert_eq!(f["probes"].as_array().map(Vec::len), Some(1), "minimised to one probe: {f:#}");
        // The switch answers whatever the request: every change the probe was
        // drawn with is undone (minimisation's second stage, the fields).
        assert!(f["probes"][0].as_str().is_some_and(|p| p.ends_with("[plain] at rc_err")), "{f:#}");
        assert!(
            r["executions"].as_u64().is_some_and(|n| n > 0)
                && r["cells_reached"].as_u64().is_some_and(|n| n > 0),
            "{r:#}"
        );
        // The kernel's function tracer saw rxe's receive path: coverage from
        // the target, some of what the module has.
        let rxe = &r["rxe"];
        assert!(rxe["off"].is_null(), "{rxe:#}");
        let reached = |f: &str| rxe["reached"].as_array().is_some_and(|a| a.iter().any(|x| x == f));
        assert!(reached("rxe_rcv") && reached("rxe_responder"), "{rxe:#}");
        let (n, of) =
            (rxe["functions"].as_u64().unwrap_or(0), rxe["traceable"].as_u64().unwrap_or(0));
        assert!(n > 20 && n < of, "{n} of {of}: {rxe:#}");
        let scenario = f["scenario"].as_str().expect("its scenario").to_string();
        let text = std::fs::read_to_string(&scenario).expect("finding.toml");
        assert!(text.contains("respond with=ack") && text.contains("responses = []"), "{text}");
        // And the setup: of the batch's QPs only rc_err, still moved to ERR;
        // no receives, no liveness WRITE; the file says what went.
        assert!(text.contains("name = \"rc_err\"") && text.contains("state = \"err\""), "{text}");
        for gone in ["name = \"uc\"", "name = \"fresh\"", "op = \"post_recv\""] {
            assert!(!text.contains(gone), "{gone} left out: {text}");
        }
        let left_out = f["setup_left_out"].as_str().unwrap_or_default();
        assert!(left_out.contains("uc") && left_out.contains("fresh"), "{f:#}");
        assert!(text.contains(left_out), "the header says what was left out: {text}");
        assert!(Path::new(&scenario).with_file_name("finding.pcapng").exists());
        // Reproduced by roce run, and by --replay.
        let run = roce(&[
            "run",
            "--image",
            "bookworm",
            "--lab",
            &lab.0,
            "--out",
            &dir("rerun"),
            &scenario,
        ]);
        assert_eq!(
            run.status.code(),
            Some(1),
            "the finding's scenario fails while the fault is there"
        );
        assert!(
            String::from_utf8_lossy(&run.stdout).contains("no answer"),
            "the probe's verdict says what IBA wants"
        );
        let replay = roce(&[
            "fuzz",
            "--image",
            "bookworm",
            "--lab",
            &lab.0,
            "--replay",
            &dir("protocol"),
            "--out",
            &dir("replay"),
        ]);
        assert_eq!(replay.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&replay.stdout).contains("still reproduces"), "{replay:?}");

        // Liveness: the switch drops everything a sends on the fresh QP. No probe
        // is needed for that: minimised to none.
        let out = fuzz("liveness", "liveness");
        assert_eq!(out.status.code(), Some(1));
        let r = report("liveness");
        let f = finding(&r, "liveness", "fresh QP");
        assert_eq!(f["confirmed"], true, "{f:#}");
        assert_eq!(f["probes"].as_array().map(Vec::len), Some(0), "no probe needed: {f:#}");
        // Its setup is the fresh QP's WRITE and what it needs: none of the
        // QPs the probes aim at.
        let text = std::fs::read_to_string(f["scenario"].as_str().expect("its scenario"))
            .expect("finding.toml");
        assert!(text.contains("name = \"fresh\"") && text.contains("wr_id = 99"), "{text}");
        assert!(!text.contains("name = \"rc_err\"") && !text.contains("name = \"uc\""), "{text}");
        let _ = std::fs::remove_dir_all(&base);
    }

    /// The finding of `fuzz.json` `r` that oracle `oracle` found, whose
    /// signature says `says`.
    fn finding<'a>(r: &'a Value, oracle: &str, says: &str) -> &'a Value {
        r["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .find(|f| {
                f["oracle"] == oracle && f["signature"].as_str().is_some_and(|s| s.contains(says))
            })
            .unwrap_or_else(|| panic!("a {oracle} finding saying `{says}`: {r:#}"))
    }

    /// One batch of 8 with a fault planted, which `--plant` names next: batch 0
    /// of seed 11 has a probe at rc_err (see the test above).
    const ONE_PLANTED_BATCH: [&str; 7] =
        ["--seed", "11", "--budget", "1", "--batch", "8", "--plant"];
}
