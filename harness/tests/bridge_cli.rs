//! `roce bridge` as a user runs it: between two interfaces, with two hosts on
//! either side. Here the hosts are network namespaces of the test's own, each
//! with one end of a veth pair (addresses 10.9.0.x exist only inside them); the
//! bridge runs in a third, on the other ends. Nothing touches the host's own
//! interfaces. Bad options and interfaces need no root and run everywhere.
use std::path::PathBuf;
use std::process::{Command, Output};

fn roce(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roce")).args(args).output().expect("running roce")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
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
    let udp_in = || -> u64 {
        let o = Command::new("ip")
            .args(["netns", "exec", hb, "cat", "/proc/net/snmp"])
            .output()
            .unwrap();
        let s = String::from_utf8_lossy(&o.stdout).to_string();
        let mut udp = s.lines().filter(|l| l.starts_with("Udp:"));
        let (names, values) = (udp.next().unwrap_or(""), udp.next().unwrap_or(""));
        let at = names.split_whitespace().position(|n| n == "NoPorts").unwrap_or(0);
        values.split_whitespace().nth(at).and_then(|v| v.parse().ok()).unwrap_or(0)
    };
    let before = udp_in();
    let bridge = Command::new("ip")
        .args([
            "netns",
            "exec",
            br,
            env!("CARGO_BIN_EXE_roce"),
            "bridge",
            "--port",
            "a1",
            "--port",
            "b1",
            "--duration",
            "3",
        ])
        .arg("--pcap")
        .arg(&pcap)
        .args(["--fault", "drop op=send-only"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    for i in 0..5 {
        ip(&["netns", "exec", ha, "bash", "-c", &format!("echo msg{i} > /dev/udp/10.9.0.2/9999")]);
    }
    let out = bridge.wait_with_output().unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
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

/// `roce bridge` in the bench's namespace, for `secs`, recording to `pcap`.
fn bridge_in(bench: &Bench, secs: &str, pcap: &std::path::Path) -> std::process::Child {
    Command::new("ip")
        .args(["netns", "exec", &bench.ns[0], env!("CARGO_BIN_EXE_roce"), "bridge"])
        .args(["--port", "a1", "--port", "b1", "--duration", secs, "--pcap"])
        .arg(pcap)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting roce bridge")
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
    let br = &bench.ns[0];
    let dir = std::env::temp_dir().join(format!("roce-bridge-flap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("wire.pcapng");
    let bridge = bridge_in(&bench, "5", &pcap);
    let pause = |ms| std::thread::sleep(std::time::Duration::from_millis(ms));
    pause(800);
    send(&bench, 1, "before");
    send(&bench, 2, "answer");
    pause(300);
    ip(&["-n", br, "link", "set", "a1", "down"]);
    pause(700);
    // b's frame for a: a1 cannot send it.
    send(&bench, 2, "while-down");
    pause(800);
    ip(&["-n", br, "link", "set", "a1", "up"]);
    pause(700);
    send(&bench, 1, "after");
    let out = bridge.wait_with_output().unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
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
    let bridge = bridge_in(&bench, "3", &pcap);
    std::thread::sleep(std::time::Duration::from_millis(800));
    send(&bench, 1, "before");
    std::thread::sleep(std::time::Duration::from_millis(300));
    ip(&["-n", &bench.ns[0], "link", "del", "a1"]);
    let out = bridge.wait_with_output().unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("port a (a1): gone (the interface was removed): frames for it are not carried from now on"), "{t}");
    assert!(t.contains("at the end: gone (the interface was removed)"), "{t}");
    assert!(t.contains(&format!("capture: {}", pcap.display())), "{t}");
    let _ = std::fs::remove_dir_all(&dir);
}
