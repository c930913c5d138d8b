//! `roce bridge` as a user runs it: between two interfaces, with two hosts on
//! either side. Here the hosts are network namespaces of the test's own, each
//! with one end of a veth pair (addresses 10.9.0.x exist only inside them); the
//! bridge runs in a third, on the other ends. Nothing touches the host's own
//! interfaces. Bad options and interfaces need no root and run everywhere.
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Output};

fn roce(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roce")).args(args).output().expect("running roce")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn listen_takes_a_key_and_leaves_rules_and_recording_to_its_controllers() {
    let no_key = roce(&["bridge", "--port", "a", "--port", "b", "--listen", "127.0.0.1:0"]);
    assert_eq!(no_key.status.code(), Some(2), "{}", text(&no_key));
    assert!(text(&no_key).contains("--key-file"), "{}", text(&no_key));
    for extra in [["--pcap", "w.pcapng"], ["--fault", "drop op=ack"]] {
        let mut args = vec!["bridge", "--port", "a", "--port", "b", "--listen", "127.0.0.1:0"];
        args.extend(["--key-file", "k"]);
        args.extend(extra);
        let o = roce(&args);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("cannot be used with"), "{}", text(&o));
    }
    let dir = std::env::temp_dir().join(format!("roce-bridge-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let k = dir.join("k");
    std::fs::write(&k, "not a key").unwrap();
    let o = roce(
        &["bridge", "--port", "a", "--port", "b", "--listen", "127.0.0.1:0", "--key-file"]
            .into_iter()
            .chain([k.to_str().unwrap()])
            .collect::<Vec<_>>(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("readable by") || text(&o).contains("not a roce key"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_ports_are_refused_before_anything_is_opened() {
    let one = roce(&["bridge", "--port", "eth0"]);
    assert_eq!(one.status.code(), Some(2), "{}", text(&one));
    assert!(text(&one).contains("1 --port given: a bridge has exactly two"), "{}", text(&one));
    let twice = roce(&["bridge", "--port", "x0", "--port", "x0"]);
    assert_eq!(twice.status.code(), Some(2));
    assert!(text(&twice).contains("--port x0 twice"), "{}", text(&twice));
    let name = roce(&["bridge", "--port", "no/such", "--port", "x0"]);
    assert_eq!(name.status.code(), Some(2));
    assert!(text(&name).contains("`no/such` is not an interface name"), "{}", text(&name));
    let rule = roce(&["bridge", "--port", "a", "--port", "b", "--fault", "drop nth=zero"]);
    assert_eq!(rule.status.code(), Some(2), "{}", text(&rule));
    assert!(text(&rule).contains("--fault #1"), "{}", text(&rule));
    let missing = roce(&["bridge", "--port", "roce-nosuch0", "--port", "roce-nosuch1"]);
    assert_eq!(missing.status.code(), Some(3), "{}", text(&missing));
    let t = text(&missing);
    assert!(
        t.contains("no network interface `roce-nosuch0`")
            && t.contains("hint: the interfaces are:"),
        "{t}"
    );
}

/// Three namespaces: host a (`a0`, 10.9.0.1), host b (`b0`, 10.9.0.2), and the
/// bridge's (`a1`, `b1`, no addresses); removed when dropped.
struct Bench {
    ns: [String; 3],
}

impl Bench {
    fn new() -> Bench {
        // Tests run side by side in one process: each bench its own names.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let p = format!("roce-br{}-{n}", std::process::id());
        let ns = [format!("{p}-br"), format!("{p}-ha"), format!("{p}-hb")];
        let b = Bench { ns };
        let [br, ha, hb] = &b.ns;
        for n in &b.ns {
            ip(&["netns", "add", n]);
            ip(&[
                "netns",
                "exec",
                n,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]);
        }
        ip(&["-n", br, "link", "add", "a1", "type", "veth", "peer", "name", "a0", "netns", ha]);
        ip(&["-n", br, "link", "add", "b1", "type", "veth", "peer", "name", "b0", "netns", hb]);
        ip(&["-n", br, "link", "set", "a1", "up"]);
        ip(&["-n", br, "link", "set", "b1", "up"]);
        ip(&["-n", ha, "addr", "add", "10.9.0.1/24", "dev", "a0"]);
        ip(&["-n", ha, "link", "set", "a0", "up"]);
        ip(&["-n", hb, "addr", "add", "10.9.0.2/24", "dev", "b0"]);
        ip(&["-n", hb, "link", "set", "b0", "up"]);
        b
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        for n in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("running ip");
    assert!(o.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// Host a sends five UDP datagrams to host b through the bridge, which drops
/// none (its rule matches RoCE only): b's kernel takes in all five (nothing
/// listens, so its UDP `NoPorts` counter says so, and it answers ICMP), the
/// bridge reports what it carried and its capture holds every frame, ARP and
/// ICMP included.
#[test]
#[ignore = "needs root (network namespaces, raw sockets): bash scripts/test.sh runs it as root"]
fn between_two_hosts_it_carries_and_records_every_frame() {
    let bench = Bench::new();
    let [br, ha, hb] = &bench.ns;
    let dir = std::env::temp_dir().join(format!("roce-bridge-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap: PathBuf = dir.join("wire.pcapng");
    let udp_in = || no_ports(hb);
    let before = udp_in();
    let mut bridge = Bridge::start(br, Some(&pcap), &["--fault", "drop op=send-only"]);
    for i in 0..5 {
        ip(&["netns", "exec", ha, "bash", "-c", &format!("echo msg{i} > /dev/udp/10.9.0.2/9999")]);
    }
    bridge.until("b's kernel took in the five datagrams", || udp_in() >= before + 5);
    let out = bridge.stop();
    let t = out.said;
    assert_eq!(out.code, Some(0), "{t}");
    assert!(t.contains("a = a1 (MTU 1500, link up) ⇄ b = b1 (MTU 1500, link up)"), "{t}");
    assert!(t.contains("rule `drop op=send-only`: matched 0, applied 0"), "{t}");
    let got = udp_in() - before;
    let decoded =
        Command::new(env!("CARGO_BIN_EXE_roce")).arg("decode").arg(&pcap).output().unwrap();
    let lines = String::from_utf8_lossy(&decoded.stdout).to_string();
    let udp = lines.lines().filter(|l| l.contains("10.9.0.1 → 10.9.0.2  UDP")).count();
    let arp = lines.lines().filter(|l| l.contains("ARP")).count();
    assert_eq!(udp, 5, "{lines}");
    assert!(arp >= 2, "the ARP request and its reply crossed too: {lines}");
    assert_eq!(got, 5, "b's kernel took in the five datagrams");
    let frames = lines.lines().filter(|l| !l.trim().is_empty()).count();
    assert!(t.contains(&format!("capture: {} ({frames} frames)", pcap.display())), "{t}\n{lines}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Listening for controllers, with none connected, the bridge is a plain cable:
/// it says where it serves, carries every frame, and at its end says it served
/// no runs. (A controller's runs through it: `bridge::tests` in the library, on
/// the lab's UDP wire; and the whole suite on a lab bench, `--wire bench`.)
#[test]
#[ignore = "needs root (network namespaces, raw sockets): bash scripts/test.sh runs it as root"]
fn listening_with_no_controller_it_forwards_without_rules() {
    let bench = Bench::new();
    let [br, ha, hb] = &bench.ns;
    let dir = std::env::temp_dir().join(format!("roce-bridge-listen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("bridge.key");
    let _ = std::fs::remove_file(&key);
    assert!(roce(&["agent", "--gen-key", key.to_str().unwrap()]).status.success());
    let before = no_ports(hb);
    let k = key.to_str().unwrap();
    let mut bridge = Bridge::start(br, None, &["--listen", "127.0.0.1:0", "--key-file", k]);
    assert!(bridge.said.contains("serving controllers on 127.0.0.1:"), "{}", bridge.said);
    for i in 0..3 {
        ip(&["netns", "exec", ha, "bash", "-c", &format!("echo msg{i} > /dev/udp/10.9.0.2/9999")]);
    }
    bridge.until("b's kernel took in the three datagrams", || no_ports(hb) >= before + 3);
    let out = bridge.stop();
    assert_eq!(out.code, Some(0), "{}", out.said);
    assert!(out.said.contains("served 0 run(s)"), "{}", out.said);
    assert!(!out.said.contains("capture:"), "no recording of its own: {}", out.said);
    let _ = std::fs::remove_dir_all(&dir);
}

/// UDP datagrams `ns`'s kernel took in for a port nobody listens on (its
/// `NoPorts` counter): each one sent there that arrived.
fn no_ports(ns: &str) -> u64 {
    let o =
        Command::new("ip").args(["netns", "exec", ns, "cat", "/proc/net/snmp"]).output().unwrap();
    let s = String::from_utf8_lossy(&o.stdout).to_string();
    let mut udp = s.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next().unwrap_or(""), udp.next().unwrap_or(""));
    let at = names.split_whitespace().position(|n| n == "NoPorts").unwrap_or(0);
    values.split_whitespace().nth(at).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// `roce bridge` running in the namespace `ns` between `a1` and `b1`, recording
/// to `pcap`, its counters printed every 0.1 s. Each step of a test waits for
/// what shows the step before it happened (a line the bridge says, a host's
/// counter), never for a fixed time: a loaded machine starts and forwards late.
struct Bridge {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    said: String,
}

/// What a stopped bridge said, stdout and stderr, and how it ended.
struct Said {
    code: Option<i32>,
    said: String,
}

impl Bridge {
    /// Started, once it says it is bridging.
    fn start(ns: &str, pcap: Option<&std::path::Path>, extra: &[&str]) -> Bridge {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_roce"), "bridge"])
            // A backstop: a test that fails midway leaves no bridge running.
            .args(["--port", "a1", "--port", "b1", "--every", "0.1", "--duration", "120"])
            .args(
                pcap.map(|p| vec![std::ffi::OsStr::new("--pcap"), p.as_os_str()])
                    .unwrap_or_default(),
            )
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        // A test run from a background job (CI's, under nohup) hands SIGINT and
        // SIGHUP down ignored, and the bridge rightly leaves an ignored signal
        // alone: start it as a terminal would, so that `stop` is its Ctrl-C, its
        // `kill` or its closed terminal.
        // SAFETY: signal(2) is async-signal-safe; only the child's disposition.
        unsafe {
            cmd.pre_exec(|| {
                for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                    libc::signal(sig, libc::SIG_DFL);
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("starting roce bridge");
        let err = child.stderr.take().expect("its stderr");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut b = Bridge { child, lines, said: String::new() };
        b.said_line("bridging ");
        b
    }

    /// Waits until the bridge says a line holding `what` (from the start).
    fn said_line(&mut self, what: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !self.said.lines().any(|l| l.contains(what)) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.said.push_str(&line);
                    self.said.push('\n');
                }
                Err(_) => panic!("the bridge never said `{what}`:\n{}", self.said),
            }
        }
    }

    /// Waits until `done` holds (`what` names it), the bridge running.
    fn until(&mut self, what: &str, mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !done() {
            assert!(
                std::time::Instant::now() < deadline,
                "not seen in 60 s: {what}\n{}",
                self.said
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Stops it as Ctrl-C does, and takes all it said.
    fn stop(self) -> Said {
        self.stop_with(libc::SIGINT)
    }

    /// Stops it with `sig` (each of SIGINT, SIGTERM and SIGHUP ends a bridge
    /// the same way: its capture written, its report said), and takes all it
    /// said.
    fn stop_with(mut self, sig: libc::c_int) -> Said {
        use std::io::Read;
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid");
        // SAFETY: kill(2) on the bridge's own pid (`ip netns exec` execs it).
        unsafe { libc::kill(pid, sig) };
        let mut stdout = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            o.read_to_string(&mut stdout).expect("reading roce bridge's stdout");
        }
        let status = self.child.wait().expect("waiting for roce bridge");
        let rest: Vec<String> = self.lines.iter().collect();
        for l in rest {
            self.said.push_str(&l);
            self.said.push('\n');
        }
        Said { code: status.code(), said: format!("{stdout}{}", self.said) }
    }
}

impl Drop for Bridge {
    /// A test that panicked before `stop`: the bridge goes with it.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn send(bench: &Bench, from: usize, text: &str) {
    let (ns, to) = if from == 1 { (&bench.ns[1], "10.9.0.2") } else { (&bench.ns[2], "10.9.0.1") };
    ip(&["netns", "exec", ns, "bash", "-c", &format!("echo {text} > /dev/udp/{to}/9999")]);
}

/// A port whose link goes down mid-run: said when it goes and when it comes
/// back (with how long it was away), a frame for it meanwhile is in the
/// capture marked as not delivered, and bridging goes on after it.
#[test]
#[ignore = "needs root (network namespaces, raw sockets): bash scripts/test.sh runs it as root"]
fn a_link_that_flaps_is_said_and_bridging_goes_on() {
    let bench = Bench::new();
    let dir = std::env::temp_dir().join(format!("roce-bridge-flap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("wire.pcapng");
    let [br, ha, hb] = &bench.ns;
    let (at_a, at_b) = (no_ports(ha), no_ports(hb));
    let mut bridge = Bridge::start(br, Some(&pcap), &[]);
    send(&bench, 1, "before");
    send(&bench, 2, "answer");
    bridge.until("both datagrams crossed", || no_ports(hb) > at_b && no_ports(ha) > at_a);
    ip(&["-n", br, "link", "set", "a1", "down"]);
    bridge.said_line("port a (a1): set down");
    // b's frame for a: a1 cannot send it.
    send(&bench, 2, "while-down");
    bridge.said_line("send errors 1");
    ip(&["-n", br, "link", "set", "a1", "up"]);
    bridge.said_line("port a (a1): link up again");
    let at_b = no_ports(hb);
    send(&bench, 1, "after");
    bridge.until("the datagram after the flap crossed", || no_ports(hb) > at_b);
    // `kill`, as a service manager stops it: the same end as Ctrl-C's.
    let out = bridge.stop_with(libc::SIGTERM);
    let t = out.said;
    assert_eq!(out.code, Some(0), "{t}");
    assert!(
        t.contains("port a (a1): set down: frames for it cannot be sent until it comes back"),
        "{t}"
    );
    assert!(t.contains("port a (a1): link up again, after "), "{t}");
    assert!(t.contains("port a (a1): without its link 1 time(s), "), "{t}");
    assert!(t.contains("1 frames could not be sent"), "{t}");
    let decoded =
        Command::new(env!("CARGO_BIN_EXE_roce")).arg("decode").arg(&pcap).output().unwrap();
    let lines = String::from_utf8_lossy(&decoded.stdout).to_string();
    let unsent: Vec<&str> =
        lines.lines().filter(|l| l.contains("not delivered: the port could not send it")).collect();
    assert_eq!(unsent.len(), 1, "{lines}");
    assert!(unsent[0].contains("10.9.0.2 → 10.9.0.1  UDP"), "{lines}");
    let after = lines.lines().filter(|l| l.contains("10.9.0.1 → 10.9.0.2  UDP")).count();
    assert_eq!(after, 2, "the frames before and after the flap crossed: {lines}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A port's interface removed mid-run: said at once, and the bridge ends
/// non-zero, its capture written.
#[test]
#[ignore = "needs root (network namespaces, raw sockets): bash scripts/test.sh runs it as root"]
fn a_port_removed_mid_run_is_said_and_fails_the_run() {
    let bench = Bench::new();
    let dir = std::env::temp_dir().join(format!("roce-bridge-gone-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("wire.pcapng");
    let [br, hb] = [&bench.ns[0], &bench.ns[2]];
    let mut bridge = Bridge::start(br, Some(&pcap), &[]);
    let at_b = no_ports(hb);
    send(&bench, 1, "before");
    bridge.until("the datagram crossed", || no_ports(hb) > at_b);
    ip(&["-n", br, "link", "del", "a1"]);
    bridge.said_line("port a (a1): gone");
    // A closed terminal: the same end as Ctrl-C's.
    let out = bridge.stop_with(libc::SIGHUP);
    let t = out.said;
    assert_eq!(out.code, Some(1), "{t}");
    assert!(t.contains("port a (a1): gone (the interface was removed): frames for it are not carried from now on"), "{t}");
    assert!(t.contains("at the end: gone (the interface was removed)"), "{t}");
    assert!(t.contains(&format!("capture: {}", pcap.display())), "{t}");
    let _ = std::fs::remove_dir_all(&dir);
}
