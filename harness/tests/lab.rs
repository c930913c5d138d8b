//! End-to-end lab tests: boot the two Soft-RoCE VMs, run real RDMA tools between
//! them, check what the switch recorded. They need the VM image (`roce lab build`)
//! and take about a minute of two cores, so they are `#[ignore]`d: scripts/test.sh
//! builds the images and runs them (`cargo test -p roce --test lab -- --ignored`); CI
//! runs them on every push.
//!
//! One test function, one lab: the steps share a boot and run one after another.
//! The lab gets its own name, and a guard takes it down even when a step fails.
// The lab tests are named `in_lab::…` so that scripts/test.sh can run every other
// ignored test (tshark, pyarrow, chromium, root) before the VM images exist.
mod in_lab {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output};
    use std::time::{Duration, Instant};

    use dissector::capture;
    use dissector::frame::{self, Options};
    use dissector::LinkType;
    use serde_json::Value;

    struct Lab {
        name: String,
    }

    impl Lab {
        fn roce(&self, args: &[&str]) -> Output {
            let out = Command::new(env!("CARGO_BIN_EXE_roce"))
                .args(["lab", "--name", &self.name])
                .args(args)
                .output()
                .expect("running roce");
            eprintln!(
                "$ roce lab --name {} {}\n{}{}",
                self.name,
                args.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            out
        }

        fn status(&self) -> Value {
            let out = self.roce(&["status", "--json"]);
            serde_json::from_slice(&out.stdout).expect("status --json prints JSON")
        }

        /// `roce lab run --json …` → the outcome.
        fn run(&self, args: &[&str]) -> (Value, Output) {
            let mut a = vec!["run", "--json"];
            a.extend_from_slice(args);
            let out = self.roce(&a);
            let v = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("lab run --json: {e}"));
            (v, out)
        }
    }

    impl Drop for Lab {
        fn drop(&mut self) {
            let st = self.status();
            let _ = self.roce(&["down"]);
            if let Some(dir) = st["dir"].as_str() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }

    fn tmpdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("roce-lab-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// The capture's frames, decoded.
    fn decode(path: &Path) -> Vec<(Vec<u8>, u32, Option<String>)> {
        let mut r = capture::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut v = Vec::new();
        while let Some(rec) = r.next_packet().unwrap() {
            v.push((rec.data.to_vec(), rec.interface, rec.comment.map(str::to_string)));
        }
        // Interfaces are known once their blocks have been read.
        let names: Vec<_> =
            r.interfaces().iter().map(|i| i.name.clone().unwrap_or_default()).collect();
        assert_eq!(names, ["a", "b"], "one pcapng interface per sender");
        v
    }

    fn pid_alive(pid: u64) -> bool {
        Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z")
    }

    #[test]
    #[ignore = "needs the lab: bash scripts/test.sh builds the VM images, then runs it"]
    fn lab_end_to_end() {
        let lab = Lab { name: format!("test-{}", std::process::id()) };
        let dir = tmpdir();

        // Boot.
        let t = Instant::now();
        let out = lab.roce(&["up"]);
        assert!(out.status.success(), "lab up failed");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("up: booted in"), "{text}");
        let st = lab.status();
        assert_eq!(st["phase"], "ready");
        eprintln!("boot: {} ms reported, {:.1} s wall", st["boot_ms"], t.elapsed().as_secs_f64());

        // The smoke test: ibv_rc_pingpong between the VMs, its capture decoded.
        let pcap = dir.join("rc.pcapng");
        let (v, _) = lab.run(&[
            "--a",
            "ibv_rc_pingpong -g 1 -n 5",
            "--b",
            "ibv_rc_pingpong -g 1 -n 5 {a}",
            "-w",
            pcap.to_str().unwrap(),
        ]);
        assert_eq!(v["ok"], true, "{v:#}");
        assert!(v["sides"][1]["stdout"].as_str().unwrap().contains("5 iters in"), "{v:#}");
        let frames = decode(&pcap);
        let c = &v["report"]["counters"];
        assert_eq!(
            c["recorded"].as_u64(),
            Some(frames.len() as u64),
            "switch counters = capture frames"
        );
        assert_eq!(
            c["from_a"].as_u64().unwrap() + c["from_b"].as_u64().unwrap(),
            frames.len() as u64
        );
        assert_eq!(v["capture_complete"], true);
        assert_eq!(v["report"]["socket_drops"], 0);
        let opts = Options::default();
        let (mut sends, mut acks, mut roce) = (0, 0, 0);
        for (data, _, _) in &frames {
            let f = frame::decode(LinkType::ETHERNET, data, &opts);
            let Some(ib) = &f.ib else { continue };
            roce += 1;
            let check = f.icrc_check(data).expect("RoCE frames carry an ICRC");
            assert!(check.ok(), "bad ICRC {check:?}");
            match ib.bth.opcode.0 {
                0x00..=0x04 => sends += 1,
                0x11 => acks += 1,
                op => panic!("unexpected opcode {op:#x} in an RC SEND exchange"),
            }
        }
        assert_eq!(c["roce"].as_u64(), Some(roce));
        assert!(sends >= 10 && acks >= 10, "sends {sends}, acks {acks}");

        // exec: exit status, stdout/stderr, timeout.
        let out = lab.roce(&["exec", "b", "--", "echo out; echo err >&2; exit 7"]);
        assert_eq!(out.status.code(), Some(7));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
        assert!(String::from_utf8_lossy(&out.stderr).contains("err"));
        let t = Instant::now();
        let out = lab.roce(&["exec", "a", "--timeout", "2", "--", "sleep 30"]);
        assert_eq!(out.status.code(), Some(124));
        assert!(t.elapsed() < Duration::from_secs(10));

        // exec -i: our stdin reaches the command, which sees its end; without -i the
        // command's stdin is empty.
        let mut child = Command::new(env!("CARGO_BIN_EXE_roce"))
            .args(["lab", "--name", &lab.name, "exec", "-i", "a", "--", "tr a-z A-Z; echo end"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(b"first line\n").unwrap();
            std::thread::sleep(Duration::from_millis(300));
            stdin.write_all(b"second\n").unwrap();
        }
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout), "FIRST LINE\nSECOND\nend\n");
        let out = lab.roce(&["exec", "b", "--", "wc -c"]);
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");

        // Two QPs on the same rxe device: nothing on the wire, and a warning says why.
        let (v, out) = lab.run(&[
            "--a",
            "ibv_rc_pingpong -g 1 -n 3 & sleep 1; ibv_rc_pingpong -g 1 -n 3 10.0.0.1; wait",
            "-w",
            dir.join("same.pcapng").to_str().unwrap(),
        ]);
        assert_eq!(v["ok"], true, "{v:#}");
        assert_eq!(
            v["report"]["counters"]["roce"], 0,
            "loopback inside rxe put RoCE frames on the wire?"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no RoCE frames on the wire: traffic between two QPs on the same rxe device is looped back inside the driver"), "{err}");

        // A dropped packet: the requester retransmits, the run still succeeds, and the
        // capture shows the PSN twice (the first copy commented as dropped).
        let pcap = dir.join("drop.pcapng");
        let (v, _) = lab.run(&[
            "--a",
            "ibv_rc_pingpong -g 1 -n 3",
            "--b",
            "ibv_rc_pingpong -g 1 -n 3 {a}",
            "-w",
            pcap.to_str().unwrap(),
            "--fault",
            "drop dir=b>a op=send-first nth=1",
        ]);
        assert_eq!(v["ok"], true, "{v:#}");
        assert_eq!(v["report"]["counters"]["dropped"], 1);
        assert_eq!(v["report"]["rules"][0]["applied"], 1);
        let frames = decode(&pcap);
        let dropped: Vec<_> = frames
            .iter()
            .filter(|(_, _, c)| c.as_deref().is_some_and(|c| c.contains("dropped")))
            .collect();
        assert_eq!(dropped.len(), 1);
        let psn_of = |d: &[u8]| {
            frame::decode(LinkType::ETHERNET, d, &opts)
                .ib
                .map(|ib| (ib.bth.opcode.0, ib.bth.psn.value()))
        };
        let lost = psn_of(&dropped[0].0).unwrap();
        assert_eq!(dropped[0].1, 1, "sent by b");
        let copies = frames.iter().filter(|(d, i, _)| *i == 1 && psn_of(d) == Some(lost)).count();
        assert_eq!(copies, 2, "the dropped SEND First and its retransmission");

        // --wire: the live lines are exactly `roce decode`'s lines of the recorded capture,
        // each tagged with its direction, the dropped frame with what the rule did.
        let pcap = dir.join("wire.pcapng");
        let out = lab.roce(&[
            "run",
            "--wire",
            "-q",
            "--a",
            "ibv_rc_pingpong -g 1 -n 1",
            "--b",
            "ibv_rc_pingpong -g 1 -n 1 {a}",
            "-w",
            pcap.to_str().unwrap(),
            // Not an ACK: dropping a's last ACK leaves b retrying against a QP that a
            // destroyed when it exited (retry counter exceeded), as on real hardware.
            "--fault",
            "drop dir=b>a op=send-first nth=1",
        ]);
        assert!(out.status.success(), "lab run --wire failed");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let live: Vec<&str> =
            stdout.lines().filter(|l| l.starts_with("[a→b]") || l.starts_with("[b→a]")).collect();
        let decoded =
            Command::new(env!("CARGO_BIN_EXE_roce")).arg("decode").arg(&pcap).output().unwrap();
        assert!(decoded.status.success());
        let decoded = String::from_utf8_lossy(&decoded.stdout);
        let decoded: Vec<&str> = decoded.lines().collect();
        assert_eq!(live.len(), decoded.len(), "one live line per captured frame\n{stdout}");
        let frames = decode(&pcap);
        for ((l, d), (_, iface, _)) in live.iter().zip(&decoded).zip(&frames) {
            let tag = if *iface == 0 { "[a→b]" } else { "[b→a]" };
            assert_eq!(l.strip_prefix(tag), Some(*d), "live line vs roce decode");
        }
        assert_eq!(
            live.iter()
                .filter(|l| l.starts_with("[b→a]")
                    && l.contains("RC SEND First")
                    && l.contains("[comment: dropped by rule 1"))
                .count(),
            1,
            "{stdout}"
        );

        // Crash recovery: kill the daemon hard. qemu dies with it (no orphans); the
        // next `up` cleans the stale state and boots again.
        let st = lab.status();
        let daemon = st["daemon_pid"].as_u64().unwrap();
        let qemus: Vec<u64> =
            st["vms"].as_array().unwrap().iter().map(|v| v["qemu_pid"].as_u64().unwrap()).collect();
        assert!(qemus.iter().all(|&p| pid_alive(p)));
        Command::new("kill").args(["-9", &daemon.to_string()]).status().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while qemus.iter().any(|&p| pid_alive(p)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(!qemus.iter().any(|&p| pid_alive(p)), "qemu outlived its daemon");
        let out = lab.roce(&["status"]);
        assert_eq!(out.status.code(), Some(3));
        assert!(String::from_utf8_lossy(&out.stdout).contains("stale state"));
        // This boot also carries a standing fault rule: it applies to every run.
        let standing = "drop dir=b>a op=send-first nth=1";
        let out = lab.roce(&["up", "--fault", standing]);
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("recovered a stale lab"), "{text}");
        let out = lab.roce(&["exec", "a", "--", "cat /sys/class/infiniband/rxe0/ports/1/state"]);
        assert!(String::from_utf8_lossy(&out.stdout).contains("ACTIVE"));
        let out = lab.roce(&["up", "--fault", standing]);
        assert!(!out.status.success(), "standing rules cannot be changed on a lab that is up");
        assert!(String::from_utf8_lossy(&out.stderr).contains("already up"));
        let (v, _) =
            lab.run(&["--a", "ibv_rc_pingpong -g 1 -n 2", "--b", "ibv_rc_pingpong -g 1 -n 2 {a}"]);
        assert_eq!(v["ok"], true, "{v:#}");
        assert_eq!(v["report"]["counters"]["dropped"], 1, "{v:#}");
        assert_eq!(v["report"]["rules"][0]["applied"], 1, "{v:#}");

        let _ = std::fs::remove_dir_all(&dir);
    }
}
