//! The checker on scenario texts: what loads, with which defaults, and every problem reported once, where it is.
use super::expect::count_range;
use super::*;
use crate::vocab::WcOpcode;

const GOOD: &str = r#"
name = "RC SEND"
[endpoints.a]
[endpoints.b]

[[qp]]
name = "q"
type = "rc"
between = ["a", "b"]

[[mr]]
name = "rbuf"
on = "b"
size = 64
access = ["local_write"]

[[mr]]
name = "msg"
on = "a"
size = 64
init = { text = "hello" }

[[step]]
on = "b"
op = "post_recv"
qp = "q"
wr_id = 1
sge = [{ mr = "rbuf" }]

[[step]]
on = "a"
op = "send"
qp = "q"
wr_id = 2
sge = [{ mr = "msg", len = 5 }]

[[expect.completion]]
on = "b"
wr_id = 1
status = "IBV_WC_SUCCESS"
opcode = "recv"

[[expect.wire]]
qp = "q"
from = "a"
sequence = ["SEND Only"]
responses = ["Acknowledge+"]

[[expect.memory]]
on = "b"
mr = "rbuf"
equals = { text = "hello" }
"#;

const PROBE: &str = r#"
name = "probe"
[endpoints.a]
[endpoints.b]

[[qp]]
name = "q"
type = "rc"
between = ["b", "a"]

[[mr]]
name = "target"
on = "b"
size = 16
access = ["local_write", "remote_write"]

[[step]]
on = "a"
op = "probe"
qp = "q"
probe = { id = "one", opcode = "RDMA WRITE Only", remote = { mr = "target" }, len = 8, settle_ms = 600 }

[[step]]
on = "a"
op = "probe"
qp = "q"
probe = { id = "two", opcode = "RDMA WRITE Only", remote = { mr = "target" }, len = 8, settle_ms = 600 }
"#;

#[test]
fn probe_waits_are_bounded_and_fit_the_timeout() {
    parse_str(Path::new("t.toml"), PROBE).unwrap_or_else(|e| panic!("{}", e[0]));
    // One wait far too long: located at its `settle_ms`.
    let e = errors(&PROBE.replacen("settle_ms = 600", "settle_ms = 600000", 1));
    assert_eq!(e.len(), 1, "{e:#?}");
    let m = e[0].to_string();
    assert!(m.contains("t.toml:21:") && m.contains("at most 10000 ms, not 600000"), "{m}");
    // Each wait sane, together longer than the scenario: reported at the second.
    let e = errors(&format!("timeout_ms = 1100\n{PROBE}"));
    assert_eq!(e.len(), 1, "{e:#?}");
    let m = e[0].to_string();
    assert!(
        m.contains("t.toml:28:")
            && m.contains("wait 1200 ms in all")
            && m.contains("1100 ms timeout"),
        "{m}"
    );
    parse_str(Path::new("t.toml"), &format!("timeout_ms = 1201\n{PROBE}"))
        .unwrap_or_else(|e| panic!("{}", e[0]));
}

#[test]
fn a_probes_quiet_gap_is_shorter_than_its_wait() {
    let quiet =
        |q: &str| PROBE.replacen("settle_ms = 600", &format!("settle_ms = 600, quiet_ms = {q}"), 1);
    let sc = parse_str(Path::new("t.toml"), &quiet("15")).unwrap_or_else(|e| panic!("{}", e[0]));
    let gaps: Vec<Option<u64>> = sc
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Act { action: Action::Probe(p), .. } => Some(p.quiet_ms),
            _ => None,
        })
        .collect();
    // The agent is told the gap of the probe that set one, and no other.
    assert_eq!(gaps, [Some(15), None]);
    for (bad, says) in
        [("600", "ends no wait shorter"), ("900", "ends no wait shorter"), ("0", "would not wait")]
    {
        let e = errors(&quiet(bad));
        assert_eq!(e.len(), 1, "{e:#?}");
        let m = e[0].to_string();
        assert!(m.contains("t.toml:21:") && m.contains(says) && m.contains("hint:"), "{bad}: {m}");
    }
}

#[test]
fn completion_grace_is_bounded_and_reaches_the_model() {
    let sc = parse_str(Path::new("t.toml"), GOOD).unwrap_or_else(|e| panic!("{}", e[0]));
    assert_eq!(sc.completion_grace_ms, None, "unset: the agent's own default");
    for ok in [0, 10, 1000] {
        let sc = parse_str(Path::new("t.toml"), &format!("completion_grace_ms = {ok}\n{GOOD}"))
            .unwrap_or_else(|e| panic!("{}", e[0]));
        assert_eq!(sc.completion_grace_ms, Some(ok));
    }
    for bad in ["1001", "9223372036854775807"] {
        let e = errors(&format!("completion_grace_ms = {bad}\n{GOOD}"));
        assert_eq!(e.len(), 1, "{e:#?}");
        let m = e[0].to_string();
        assert!(
            m.contains(&format!("a completion grace of {bad} ms: give 0 to 1000"))
                && m.contains("--> t.toml:1:23\n")
                && m.contains("hint:"),
            "{m}"
        );
    }
}

#[test]
fn scenario_timeout_is_bounded() {
    for bad in ["0", "999", "3600001", "9223372036854775807"] {
        let e = errors(&format!("timeout_ms = {bad}\n{GOOD}"));
        assert_eq!(e.len(), 1, "{e:#?}");
        let m = e[0].to_string();
        assert!(
            m.starts_with("error: a timeout of")
                && m.contains("--> t.toml:1:14\n")
                && m.contains(&format!("a timeout of {bad} ms")),
            "{m}"
        );
    }
    parse_str(Path::new("t.toml"), &format!("timeout_ms = 3600000\n{GOOD}"))
        .unwrap_or_else(|e| panic!("{}", e[0]));
}

fn errors(text: &str) -> Vec<Diagnostic> {
    match parse_str(Path::new("t.toml"), text) {
        Ok(_) => panic!("should not parse"),
        Err(e) => e,
    }
}

const STREAM: &str = r#"
name = "stream"
[endpoints.a]
[endpoints.b]
[[qp]]
name = "q"
type = "rc"
between = ["b", "a"]
max_send_wr = 64
[[mr]]
name = "src"
on = "a"
size = 640000
access = ["local_write"]
[[mr]]
name = "dst"
on = "b"
size = 640000
access = ["local_write", "remote_write"]
[[step]]
op = "stream"
id = "w"
on = "a"
qp = "q"
verb = "write"
count = 10000
window = 32
signal_every = 8
local = { mr = "src" }
remote = { mr = "dst" }
[[expect.stream]]
id = "w"
[[expect.memory]]
on = "b"
mr = "dst"
stream = "w"
"#;

#[test]
fn a_stream_loads_with_its_defaults_and_its_checks() {
    let sc = parse_str(Path::new("t.toml"), STREAM).unwrap_or_else(|e| panic!("{}", e[0]));
    let Step::Stream(st) = &sc.steps[0] else { panic!("{:?}", sc.steps[0]) };
    assert_eq!(
        (st.peer.as_str(), st.order.qps.clone(), st.order.window, st.order.signal_every),
        ("b", vec!["q".to_string()], 32, 8)
    );
    assert_eq!(
        st.order.content,
        StreamContent {
            seed: 1,
            count: 10000,
            sizes: Sizes::Fixed(64),
            ring: None,
            spread: Spread::RoundRobin
        }
    );
    assert_eq!(
        sc.expect.stream,
        vec![StreamExpect {
            id: "w".into(),
            on: "a".into(),
            completed: 10000,
            max_ack_latency_ms: None
        }]
    );
    assert!(
        matches!(&sc.expect.memory[0].want, Memory::Stream { id, content } if id == "w" && content.count == 10000)
    );
}

/// A ring: 10,000 messages of 64..=1024 bytes go round 64 KiB, so MRs far
/// smaller than the stream's bytes hold it, and the memory check knows.
#[test]
fn a_ring_lets_a_long_stream_go_round_a_small_region() {
    let text =
        STREAM.replace("window = 32", "window = 32\nring = 65536\nsize = { min = 64, max = 1024 }");
    let sc = parse_str(Path::new("t.toml"), &text).unwrap_or_else(|e| panic!("{}", e[0]));
    let Step::Stream(st) = &sc.steps[0] else { panic!() };
    assert_eq!(st.order.content.ring, Some(65536));
    assert!(
        st.order.content.total() > 640_000 && st.order.content.span() <= 65536,
        "{} bytes round {}",
        st.order.content.total(),
        st.order.content.span()
    );
    assert!(
        matches!(&sc.expect.memory[0].want, Memory::Stream { content, .. } if content.ring == Some(65536))
    );
}

#[test]
fn a_stream_that_does_not_fit_says_where_and_why() {
    let cases = [
            // 10,000 × 65 bytes do not fit the 640,000-byte MRs.
            (STREAM.replace("window = 32", "window = 32\nsize = 65"), "t.toml:30:", "the stream needs 650000 bytes from offset 0 of MR `src`, which has 640000"),
            (STREAM.replace("window = 32", "window = 65"), "t.toml:27:", "a window of 65: give 1 to 64"),
            (STREAM.replace("signal_every = 8", "signal_every = 33"), "t.toml:28:", "signalling every 33-th message: give 1 to the window (32)"),
            (STREAM.replace("verb = \"write\"", "verb = \"wirte\""), "t.toml:25:", "a stream of `wirte`"),
            (STREAM.replace("count = 10000", "count = 0"), "t.toml:26:", "a stream of 0 messages"),
            (STREAM.replace("qp = \"q\"", "qp = \"q\"\nqps = [\"q\"]"), "t.toml:", "say which QPs carry the stream"),
            (STREAM.replace("id = \"w\"\n[[expect.memory]]", "id = \"x\"\n[[expect.memory]]"), "t.toml:32:", "no stream step named `x`"),
            (STREAM.replace("on = \"b\"\nmr = \"dst\"\nstream", "on = \"a\"\nmr = \"src\"\nstream"), "t.toml:36:", "stream `w` lands in MR `dst` on `b` from offset 0"),
            (STREAM.replace("verb = \"write\"", "verb = \"write\"\nadd = 1"), "t.toml:", "`add` is for a `fetch_add` or `atomics` stream"),
            (STREAM.replace("verb = \"write\"", "verb = \"fetch_add\"\ncmp_swap_every = 3"), "t.toml:", "`cmp_swap_every` is for an `atomics` stream"),
            (STREAM.replace("qp = \"q\"", "qps = [\"q\", \"q\"]").replace("verb = \"write\"", "verb = \"atomics\""), "t.toml:24:7\n", "an `atomics` stream with CmpSwap over 2 QPs"),
            (STREAM.replace("window = 32", "window = 32\nring = 2000"), "t.toml:", "a ring of 2000 bytes: with a window of 32, messages of up to 64 bytes need at least 2176"),
            (STREAM.replace("verb = \"write\"", "verb = \"read\"\nring = 4096"), "t.toml:", "`ring` is for `write`, `write_imm` and `send` streams: a READ stream reads the peer's MR"),
            (STREAM.replace("window = 32", "window = 32\nring = 20000000"), "t.toml:", "a ring of 20000000 bytes: at most 16777216"),
        ];
    for (text, at, what) in cases {
        let e = errors(&text);
        let m = e[0].to_string();
        // The location is on the ` --> ` line under the message.
        assert!(m.contains(&format!("--> {at}")) && m.contains(what), "{what}: {m}");
    }
    // A large MR is not read back whole: `equals` there is refused.
    let big = STREAM
        .replace(
            "size = 640000\naccess = [\"local_write\", \"remote_write\"]",
            "size = 640000\naccess = [\"local_write\", \"remote_write\"]\ninit = { u64 = 1 }",
        )
        .replace("stream = \"w\"", "equals = { u64 = 1 }");
    let m = errors(&big)[0].to_string();
    assert!(
        m.contains("MR `dst` has 640000 bytes: MRs larger than 524288 are not read back whole")
            && m.contains("stream = "),
        "{m}"
    );
}

/// A place checked more than once (both ends of a QP, every QP of a group) is
/// one problem, said once.
#[test]
fn one_problem_is_said_once() {
    let access = GOOD.replace(
        "between = [\"a\", \"b\"]",
        "between = [\"a\", \"b\"]\naccess = [\"flush_globl\"]",
    );
    let e = errors(&access);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].to_string().contains("unknown access flag `flush_globl`"), "{}", e[0]);
    let group = STREAM.replace("name = \"q\"\ntype", "name = \"q\"\ncount = 3\ntype")
        + "[[expect.wire]]\nqp = \"q\"\nfrom = \"a\"\nrnr_naks = \"0-4\"\n";
    let e = errors(&group);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].to_string().contains("`0-4` is not a count"), "{}", e[0]);
}

#[test]
fn a_qp_count_makes_that_many_and_what_names_it_applies_to_each() {
    let text = STREAM.replace("name = \"q\"\ntype", "name = \"q\"\ncount = 3\ntype")
            + "[[expect.wire]]\nqp = \"q\"\nfrom = \"a\"\nmax_retransmissions = 5\nrnr_naks = \"0..2\"\n[[fault]]\nrule = \"drop prob=0.01 seed=7\"\nfrom = \"a\"\nqp = \"q\"\n";
    let sc = parse_str(Path::new("t.toml"), &text).unwrap_or_else(|e| panic!("{}", e[0]));
    let names: Vec<&str> = sc.qps.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(names, ["q[0]", "q[1]", "q[2]"]);
    let Step::Stream(st) = &sc.steps[0] else { panic!() };
    assert_eq!(
        st.order.qps,
        ["q[0]", "q[1]", "q[2]"],
        "a stream on the group goes over all of them"
    );
    let wire: Vec<&str> = sc.expect.wire.iter().map(|w| w.qp.as_str()).collect();
    assert_eq!(wire, ["q[0]", "q[1]", "q[2]"]);
    assert!(sc
        .expect
        .wire
        .iter()
        .all(|w| w.max_retransmissions == Some(5) && w.rnr_naks == Some((0, 2))));
    let faults: Vec<Option<&str>> = sc.faults.iter().map(|f| f.qp.as_deref()).collect();
    assert_eq!(faults, [Some("q[0]"), Some("q[1]"), Some("q[2]")]);
    // A single work request names one of them.
    let one = text.replace(
        "[[step]]\nop = \"stream\"",
        "[[step]]\nop = \"send\"\non = \"a\"\nqp = \"q\"\n[[step]]\nop = \"stream\"",
    );
    let m = errors(&one)[0].to_string();
    assert!(m.contains("`q` is 3 QPs (`count = 3`)") && m.contains("`q[0]` to `q[2]`"), "{m}");
    let m = errors(&STREAM.replace("name = \"q\"\ntype", "name = \"q\"\ncount = 0\ntype"))[0]
        .to_string();
    assert!(m.contains("--> t.toml:7:") && m.contains("a count of 0: give 1 to 256"), "{m}");
}

#[test]
fn count_ranges_include_both_ends() {
    assert_eq!(count_range("0..10"), Ok((0, 10)));
    assert_eq!(count_range("5.."), Ok((5, u64::MAX)));
    assert_eq!(count_range("..3"), Ok((0, 3)));
    assert_eq!(count_range("2"), Ok((2, 2)));
    assert_eq!(count_range("1..=4"), Ok((1, 4)));
    assert!(count_range("4..1").is_err_and(|m| m.contains("is empty")));
    assert!(count_range("a..b").is_err_and(|m| m.contains("`a` is not a count")));
}

/// WRITEs with immediate: the peer's MR as a WRITE stream's, and receives of
/// no bytes; dealt at random when asked.
#[test]
fn a_write_imm_stream_writes_the_peers_mr_and_consumes_its_receives() {
    let imm =
        STREAM.replace("verb = \"write\"", "verb = \"write_imm\"\nspread = \"random\"").replace(
            "remote = { mr = \"dst\" }",
            "remote = { mr = \"dst\" }\nreceive = { depth = 16 }",
        );
    let sc = parse_str(Path::new("t.toml"), &imm).unwrap_or_else(|e| panic!("{}", e[0]));
    let Step::Stream(st) = &sc.steps[0] else { panic!() };
    assert_eq!((st.order.verb, st.order.content.spread), (StreamVerb::WriteImm, Spread::Random));
    let r = st.receive.as_ref().map(|r| (r.mr.clone(), r.offset, r.depth, r.low_water));
    assert_eq!(r, Some((None, 0, 16, 15)));
    let r = st.receive.as_ref().map(|r| (&r.id, &r.qps, r.content, r.within_ms));
    assert_eq!(r, Some((&st.order.id, &st.order.qps, st.order.content, st.order.within_ms)));
    assert!(
        matches!(&sc.expect.memory[0].want, Memory::Stream { id, .. } if id == "w"),
        "its memory is checked as a WRITE's"
    );
    let cases = [
        (
            imm.replace("receive = { depth = 16 }", ""),
            "a `write_imm` stream writes the peer's MR and consumes its receives",
        ),
        (
            imm.replace("receive = { depth = 16 }", "receive = { mr = \"dst\" }"),
            "its receives hold no bytes: leave out `receive.mr`",
        ),
        (imm.replace("spread = \"random\"", "spread = \"randm\""), "a spread of `randm`"),
    ];
    for (text, what) in cases {
        let m = errors(&text)[0].to_string();
        assert!(m.contains(what), "{what}: {m}");
    }
    parse_str(
        Path::new("t.toml"),
        &imm.replace("receive = { depth = 16 }", "receive = { depth = 16 }\nring = 4096"),
    )
    .unwrap_or_else(|e| panic!("{}", e[0]));
    let send = STREAM
        .replace("verb = \"write\"", "verb = \"send\"")
        .replace("remote = { mr = \"dst\" }", "receive = { depth = 8 }");
    assert!(errors(&send)[0]
        .to_string()
        .contains("a `send` stream's receives need an MR to land in"));
}

#[test]
fn a_send_stream_names_the_peers_receives_and_they_must_fit() {
    let send = STREAM
        .replace("verb = \"write\"", "verb = \"send\"")
        .replace(
            "remote = { mr = \"dst\" }",
            "receive = { mr = \"dst\", depth = 8, low_water = 2 }",
        )
        .replace("[[expect.memory]]\non = \"b\"\nmr = \"dst\"\nstream = \"w\"\n", "");
    let sc = parse_str(Path::new("t.toml"), &send).unwrap_or_else(|e| panic!("{}", e[0]));
    let Step::Stream(st) = &sc.steps[0] else { panic!() };
    assert_eq!((st.order.verb, st.order.remote.clone()), (StreamVerb::Send, None));
    let r = st.receive.as_ref().map(|r| (r.mr.as_deref(), r.offset, r.depth, r.low_water));
    assert_eq!(r, Some((Some("dst"), 0, 8, 2)));
    let cases = [
        (
            send.replace(
                "receive = { mr = \"dst\", depth = 8, low_water = 2 }",
                "remote = { mr = \"dst\" }",
            ),
            "a `send` stream goes to the peer's receives",
        ),
        (send.replace("depth = 8", "depth = 17"), "a receive depth of 17: give 1 to 16"),
        (send.replace("low_water = 2", "low_water = 8"), "a low water mark of 8 with 8 receives"),
        (
            send.replace("depth = 8, low_water = 2", "offset = 639990"),
            "16 receives of 64 bytes on each of 1 QPs need 1024 bytes from offset 639990",
        ),
        (
            send.clone() + "[[expect.memory]]\non = \"b\"\nmr = \"dst\"\nstream = \"w\"\n",
            "stream `w` sends: the peer checks each message as it arrives",
        ),
        (
            STREAM.replace("remote = { mr = \"dst\" }", "receive = { mr = \"dst\" }"),
            "`receive` is for a `send` or `write_imm` stream",
        ),
    ];
    for (text, what) in cases {
        let m = errors(&text)[0].to_string();
        assert!(m.contains(what), "{what}: {m}");
    }
}

#[test]
fn a_good_scenario_loads() {
    let sc = parse_str(Path::new("t.toml"), GOOD).unwrap_or_else(|e| panic!("{}", e[0]));
    assert_eq!(sc.steps.len(), 2);
    let seq: Vec<String> =
        sc.expect.wire[0].sequence.iter().flatten().map(|p| p.to_string()).collect();
    assert_eq!(seq, ["SEND Only"]);
    assert_eq!(sc.qps[0].access["a"], Access::REMOTE_ALL, "the default");
    assert_eq!(
        (sc.qps[0].params.timeout, sc.qps[0].params.retry_cnt, sc.qps[0].params.mtu),
        (14, 7, 1024),
        "defaults filled in"
    );
    assert_eq!(sc.mrs[1].access, Access::LOCAL_WRITE);
    assert!(
        matches!(&sc.steps[1], Step::Act { action: Action::Post { verb: Verb::Send { imm: None, qkey: None }, sges, .. }, .. } if sges[0].len == 5)
    );
    assert_eq!(sc.expect.completion[0].opcode, Some(WcOpcode(128)));
}

#[test]
fn unknown_key_is_located_with_a_suggestion() {
    let text = GOOD.replace("access = [\"local_write\"]", "acess = [\"local_write\"]");
    let e = errors(&text);
    assert_eq!(e.len(), 1);
    let line = text.lines().position(|l| l.starts_with("acess")).unwrap() + 1;
    assert_eq!((e[0].line, e[0].col), (line, 1), "{}", e[0]);
    assert!(e[0].message.contains("acess"), "{}", e[0]);
    assert_eq!(e[0].hint.as_deref(), Some("did you mean `access`?"));
    assert!(e[0].to_string().starts_with("error: unknown field `acess`"), "{}", e[0]);
    assert!(e[0].to_string().contains(&format!("--> t.toml:{line}:1\n")), "{}", e[0]);
    assert!(
        e[0].to_string().contains(&format!("\n{line} | acess = [\"local_write\"]\n")),
        "{}",
        e[0]
    );
    assert!(e[0].to_string().contains("| ^^^^^\n"), "{}", e[0]);
}

#[test]
fn syntax_errors_say_where() {
    let e = errors("name = \"x\"\n[endpoints.a\n");
    assert_eq!(e[0].line, 2, "{}", e[0]);
    assert!(e[0].message.starts_with("TOML syntax"), "{}", e[0]);
}

#[test]
fn every_semantic_problem_is_reported_where_it_is() {
    let text = GOOD
        .replace("between = [\"a\", \"b\"]", "between = [\"a\", \"c\"]")
        .replace("sge = [{ mr = \"msg\", len = 5 }]", "sge = [{ mr = \"msgg\", len = 5 }]")
        .replace("status = \"IBV_WC_SUCCESS\"", "status = \"IBV_WC_SUCESS\"")
        .replace("sequence = [\"SEND Only\"]", "sequence = [\"SEND Onyl\"]");
    let e = errors(&text);
    let msgs: Vec<String> = e.iter().map(|d| d.to_string()).collect();
    let find = |needle: &str| {
        msgs.iter()
            .find(|m| m.contains(needle))
            .unwrap_or_else(|| panic!("no `{needle}` in {msgs:#?}"))
    };
    assert!(find("no endpoint `c`").contains("t.toml:9:"), "{msgs:#?}");
    assert!(find("no MR `msgg` on `a`").contains("did you mean `msg`?"));
    assert!(find("unknown status `IBV_WC_SUCESS`").contains("did you mean `IBV_WC_SUCCESS`?"));
    assert!(find("unknown opcode `SEND Onyl`").contains("did you mean `SEND Only`?"));
}

/// A header condition is a display filter: its own error (did-you-mean included)
/// points into the string at the word, not at the whole item; braces and PSN lists
/// that are not ones say so; an order names single frames.
#[test]
fn header_conditions_psns_and_order_are_checked_where_they_are() {
    let text = GOOD.replace(
        "sequence = [\"SEND Only\"]",
        "sequence = [\"SEND Only {infiniband.bth.sd == 1}\", \"ACK {infiniband.aeth.msn == 1\"]\npsns = [\"first+x\"]\nresponse_psns = \"consecutiv\"",
    ) + "\n[[expect.order]]\nqp = \"q\"\nfirst = \"SEND Only*\"\nthen = \"ACK\"\n";
    let e = errors(&text);
    let msgs: Vec<String> = e.iter().map(|d| d.to_string()).collect();
    let find = |needle: &str| {
        e.iter()
            .find(|d| d.message.contains(needle))
            .unwrap_or_else(|| panic!("no `{needle}` in {msgs:#?}"))
    };
    let d = find("infiniband.bth.sd");
    let line = text.lines().position(|l| l.starts_with("sequence")).unwrap() + 1;
    let col = text.lines().nth(line - 1).unwrap().find("infiniband.bth.sd").unwrap() + 1;
    assert_eq!((d.line, d.col), (line, col), "{d}");
    assert!(
        d.message.starts_with("in the condition of `SEND Only {infiniband.bth.sd == 1}`"),
        "{d}"
    );
    assert!(d.hint.as_deref().is_some_and(|h| h.contains("infiniband.bth.se")), "{d}");
    assert!(find("a `{` without its `}`").hint.is_some());
    assert!(find("`first+x` is not a PSN").line > line);
    assert!(find("`consecutiv` is not a PSN list")
        .hint
        .as_deref()
        .is_some_and(|h| h.contains("consecutive")));
    find("an order names one frame");
    // Written right, the same keys load.
    let ok = GOOD.replace(
        "sequence = [\"SEND Only\"]",
        "sequence = [\"SEND Only {infiniband.bth.se == 0 && infiniband.bth.tver == 0}\"]\npsns = \"consecutive\"\nresponse_psns = [\"first\"]",
    );
    let sc = parse_str(Path::new("t.toml"), &ok).unwrap_or_else(|e| panic!("{}", e[0]));
    assert_eq!(sc.expect.wire[0].psns, Some(Psns::Consecutive));
    assert_eq!(sc.expect.wire[0].response_psns, Some(Psns::Each(vec![WirePsn::First(0)])));
    assert_eq!(sc.expect.conditions(), ["infiniband.bth.se == 0 && infiniband.bth.tver == 0"]);
}

/// A `*` or `+` before a condition, or before a `|`, is not read as a repetition:
/// the hint moves it to the end of the item, where it goes, rather than drop it.
#[test]
fn a_repetition_written_too_early_is_shown_at_the_end_of_the_item() {
    for (written, fixed) in [
        ("ACK* {infiniband.aeth.msn == 2}", "ACK {infiniband.aeth.msn == 2}*"),
        ("ACK+{infiniband.aeth.msn == 2}", "ACK{infiniband.aeth.msn == 2}+"),
        ("RDMA WRITE Middle* | RDMA WRITE Last", "RDMA WRITE Middle | RDMA WRITE Last*"),
    ] {
        let text =
            GOOD.replace("responses = [\"Acknowledge+\"]", &format!("responses = [\"{written}\"]"));
        let text = text.replace(
            "sequence = [\"SEND Only\"]",
            &format!("sequence = [\"{}\"]", written.replace("ACK", "SEND Only")),
        );
        let e = errors(&text);
        assert_eq!(e.len(), 2, "{e:#?}");
        for (d, want) in e.iter().zip([fixed.replace("ACK", "SEND Only"), fixed.to_string()]) {
            let hint = d.hint.as_deref().unwrap_or_default();
            assert!(hint.contains(&format!("`{want}`")) && hint.contains("very end"), "{d}");
            assert!(want.parse::<Pattern>().is_ok(), "{want}");
        }
    }
    // An order names one frame: no repetition is suggested there.
    let text = format!("{GOOD}\n[[expect.order]]\nqp = \"q\"\nfirst = \"SEND Only* {{infiniband.bth.se == 1}}\"\nthen = \"ACK\"\n");
    let e = errors(&text);
    assert!(
        e.iter().all(|d| !d.hint.as_deref().unwrap_or_default().contains("very end")),
        "{e:#?}"
    );
}

#[test]
fn verbs_that_the_qp_type_cannot_carry_are_refused() {
    let text = GOOD.replace("type = \"rc\"", "type = \"uc\"").replace(
            "[[expect.completion]]",
            "[[step]]\non = \"a\"\nop = \"read\"\nqp = \"q\"\nsge = [{ mr = \"msg\" }]\nremote = { mr = \"rbuf\", offset = 3 }\n\n[[expect.completion]]",
        );
    let e = errors(&text);
    assert!(e.iter().any(|d| d.message.contains("UC has no READ")), "{e:#?}");
    // A key an op does not have, and one it needs: serde's own refusal, at the key.
    let text = GOOD.replace("op = \"send\"", "op = \"fetch_add\"");
    let e = errors(&text);
    let all: String = e.iter().map(|d| d.to_string() + "\n").collect();
    assert!(all.contains("missing field `remote`"), "{all}");
    let line = text.lines().position(|l| l.starts_with("op = \"fetch_add\"")).unwrap() - 1;
    assert!(all.contains(&format!("t.toml:{line}:")), "the step's table: {all}");
    let text = GOOD.replace("op = \"send\"", "op = \"fetch_add\"\nremote = { mr = \"rbuf\" }");
    let all: String = errors(&text).iter().map(|d| d.to_string() + "\n").collect();
    assert!(all.contains("missing field `add`"), "{all}");
    let text =
        GOOD.replace("op = \"send\"", "op = \"fetch_add\"\nremote = { mr = \"rbuf\" }\nadd = 1");
    let all: String = errors(&text).iter().map(|d| d.to_string() + "\n").collect();
    assert!(all.contains("8 bytes"), "{all}");
    let text = GOOD.replace("op = \"send\"", "op = \"send\"\nremote = { mr = \"rbuf\" }");
    let e = errors(&text);
    assert!(e[0].message.starts_with("unknown field `remote`"), "a SEND has no remote: {e:#?}");
    let line = text.lines().position(|l| l.starts_with("remote = ")).unwrap() + 1;
    assert_eq!(e[0].line, line, "at the key: {e:#?}");
    let e = errors(&GOOD.replace("op = \"send\"", "op = \"sned\""));
    assert!(
        e[0].message.contains("unknown variant `sned`")
            && e[0].hint.as_deref() == Some("did you mean `send`?"),
        "{e:#?}"
    );
}

#[test]
fn content_payloads_and_psns() {
    assert_eq!(Content::Bytes("de ad".into()).try_bytes(0).unwrap(), [0xde, 0xad]);
    assert_eq!(Content::Pattern("ab 01".into()).try_bytes(5).unwrap(), [0xab, 1, 0xab, 1, 0xab]);
    assert_eq!(Content::U64(1).try_bytes(0).unwrap(), [1, 0, 0, 0, 0, 0, 0, 0]);
    assert!(Content::Bytes("abc".into()).try_bytes(0).unwrap_err().contains("odd"));
    assert!(Content::Bytes("zz".into()).try_bytes(0).unwrap_err().contains("not a hex byte"));
    assert!(Content::Pattern("".into()).try_bytes(4).unwrap_err().contains("empty"));
    assert_eq!(probe_payload(Some(&Content::Pattern("ab".into())), Some(3)).unwrap(), [0xab; 3]);
    assert_eq!(probe_payload(None, Some(2)).unwrap(), [0, 0]);
    assert!(probe_payload(Some(&Content::Text("toolong".into())), Some(2))
        .unwrap_err()
        .contains("`len` is 2"));
    assert_eq!(psn_at(&PsnRef::Relative("next + 3".into())), Ok(PsnAt::Next(3)));
    assert_eq!(psn_at(&PsnRef::Relative("next-1".into())), Ok(PsnAt::Next(-1)));
    assert_eq!(psn_at(&PsnRef::Absolute(5)), Ok(PsnAt::Absolute(5)));
    assert!(psn_at(&PsnRef::Absolute(1 << 24)).unwrap_err().contains("24 bits"));
    assert!(psn_at(&PsnRef::Relative("nxt".into())).unwrap_err().contains("is not a PSN"));
    assert!(psn_at(&PsnRef::Relative("next+8388608".into())).unwrap_err().contains("half"));
    assert_eq!(PsnAt::Next(-1).resolve(Psn::new(0)), Psn::new(0xff_ffff), "24-bit wrap");
}

const MW: &str = r#"
name = "mw"
requires = ["mw_type2"]
[endpoints.a]
[endpoints.b]

[[qp]]
name = "q"
type = "rc"
between = ["b", "a"]

[[mr]]
name = "msg"
on = "a"
size = 8

[[mr]]
name = "target"
on = "b"
size = 32
access = ["local_write", "mw_bind"]

[[mw]]
name = "w"
on = "b"
type = 2

[[step]]
on = "b"
op = "bind_mw"
qp = "q"
mw = "w"
mr = "target"
offset = 8
len = 16

[[step]]
on = "a"
op = "write"
qp = "q"
sge = [{ mr = "msg" }]
remote = { mw = "w", offset = 4 }

[[step]]
on = "a"
op = "send_inv"
qp = "q"
invalidate = { mw = "w" }
"#;

/// A WRITE through a window lands where the window was bound (its MR, the
/// bind's offset plus its own), its rkey left to the run; a window not bound
/// before the step, or not there, is refused where it is named.
#[test]
fn a_window_is_addressed_where_it_was_bound() {
    let sc = parse_str(Path::new("t.toml"), MW).unwrap_or_else(|e| panic!("{}", e[0]));
    assert_eq!(sc.mws, vec![MwSpec { name: "w".into(), on: "b".into(), kind: MwKind::Type2 }]);
    match &sc.steps[1] {
        Step::Act {
            action: Action::Post { verb: Verb::Write { remote, imm: None }, .. }, ..
        } => assert_eq!(
            remote,
            &RemoteRef { mr: "target".into(), offset: 12, rkey: None, mw: Some("w".into()) }
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(&sc.steps[0], Step::Act { action: Action::Post { verb: Verb::BindMw { len: 16, access, .. }, .. }, .. } if *access == Access(2)),
        "remote_write by default: {:?}",
        sc.steps[0]
    );
    assert!(
        matches!(&sc.steps[2], Step::Act { action: Action::Post { verb: Verb::SendInv { invalidate: Invalidate::Mw { mw, rkey: None } }, .. }, .. } if mw == "w")
    );
    // Without the bind: not bound, said at the WRITE's `remote`.
    let unbound = MW.replace("[[step]]\non = \"b\"\nop = \"bind_mw\"\nqp = \"q\"\nmw = \"w\"\nmr = \"target\"\noffset = 8\nlen = 16\n", "");
    let e = errors(&unbound);
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(
        e[0].message.contains("memory window `w` of `b` is not bound before this step"),
        "{e:#?}"
    );
    let line = unbound.lines().position(|l| l.starts_with("remote = { mw")).unwrap() + 1;
    assert_eq!(e[0].line, line);
    let e = errors(&MW.replace("invalidate = { mw = \"w\" }", "invalidate = { mw = \"x\" }"));
    assert!(
        e[0].message.contains("no memory window `x` on `b`")
            && e[0].hint.as_deref() == Some("did you mean `w`?"),
        "{e:#?}"
    );
    let e = errors(&MW.replace(
        "remote = { mw = \"w\", offset = 4 }",
        "remote = { mw = \"w\", mr = \"target\" }",
    ));
    assert!(e[0].message.contains("one of them"), "{e:#?}");
    let e = errors(&MW.replace("len = 16", "len = 32"));
    assert!(e[0].message.contains("8+32 runs past the end of MR `target`"), "{e:#?}");
}

/// What a scenario uses must be in `requires`, or a device without it would
/// fail the scenario instead of skipping it; the error is at what needs it.
#[test]
fn features_used_must_be_required() {
    let e = errors(&MW.replace("requires = [\"mw_type2\"]", "requires = []"));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(e[0].message.contains("this needs `mw_type2` (type 2 memory windows)"), "{e:#?}");
    assert!(
        e[0].hint.as_deref().is_some_and(|h| h.contains("requires = [\"mw_type2\"]")),
        "{e:#?}"
    );
    let line = MW.lines().position(|l| l == "type = 2").unwrap() + 1;
    assert_eq!(e[0].line, line, "at the window's type");
    let e = errors(
        &MW.replace("requires = [\"mw_type2\"]", "requires = [\"mw_type2\", \"atomic_wirte\"]"),
    );
    assert!(
        e[0].message == "unknown feature `atomic_wirte`"
            && e[0].hint.as_deref() == Some("did you mean `atomic_write`?"),
        "{e:#?}"
    );
    // An access flag a 6.1 kernel refuses counts as using FLUSH.
    let e = errors(&MW.replace(
        "access = [\"local_write\", \"mw_bind\"]",
        "access = [\"local_write\", \"mw_bind\", \"flush_global\"]",
    ));
    assert!(e.iter().any(|d| d.message.contains("this needs `flush` (RDMA FLUSH)")), "{e:#?}");
    let flush = GOOD.replace("name = \"RC SEND\"", "name = \"f\"\nrequires = [\"flush\", \"atomic_write\"]").replace(
            "[[expect.completion]]",
            "[[step]]\non = \"a\"\nop = \"flush\"\nqp = \"q\"\nremote = { mr = \"rbuf\", offset = 16 }\nlevel = \"mr\"\n\n[[step]]\non = \"a\"\nop = \"atomic_write\"\nqp = \"q\"\nremote = { mr = \"rbuf\", offset = 8 }\nvalue = { u64 = 1 }\n\n[[expect.completion]]",
        );
    let sc = parse_str(Path::new("t.toml"), &flush).unwrap_or_else(|e| panic!("{}", e[0]));
    assert_eq!(sc.requires, [Feature::AtomicWrite, Feature::Flush]);
    assert!(
        matches!(
            &sc.steps[2],
            Step::Act {
                action: Action::Post {
                    verb: Verb::Flush {
                        len: 48,
                        placement: Placement::Global,
                        level: Selectivity::Mr,
                        ..
                    },
                    ..
                },
                ..
            }
        ),
        "{:?}",
        sc.steps[2]
    );
    assert!(matches!(
        &sc.steps[3],
        Step::Act { action: Action::Post { verb: Verb::AtomicWrite { value, .. }, .. }, .. }
            if value.0 == [1, 0, 0, 0, 0, 0, 0, 0]
    ));
    let e = errors(
        &flush.replace("requires = [\"flush\", \"atomic_write\"]", "requires = [\"flush\"]"),
    );
    assert!(e.len() == 1 && e[0].message.contains("this needs `atomic_write`"), "{e:#?}");
    let e = errors(
        &flush
            .replace("value = { u64 = 1 }", "value = { bytes = \"01 02\" }")
            .replace("level = \"mr\"", "level = \"all\""),
    );
    let all: String = e.iter().map(|d| d.to_string() + "\n").collect();
    assert!(
        all.contains("8 bytes, not 2") && all.contains("unknown selectivity level `all`"),
        "{all}"
    );
    let e = errors(&flush.replace("offset = 8 }\nvalue", "offset = 4 }\nvalue"));
    assert!(e[0].message.contains("8-byte aligned"), "{e:#?}");
    let e = errors(&flush.replace("type = \"rc\"", "type = \"uc\""));
    assert!(e.iter().any(|d| d.message.contains("atomic_write on UC QP `q`")), "{e:#?}");
}

/// An SRQ is on one end of the QPs that use it; steps and events name it.
#[test]
fn srqs_belong_to_an_end() {
    let text = GOOD.replace("name = \"RC SEND\"", "name = \"s\"\nrequires = [\"srq\"]\n[[srq]]\nname = \"s\"\non = \"b\"")
            .replace("between = [\"a\", \"b\"]", "between = [\"a\", \"b\"]\nsrq = \"s\"")
            .replace("op = \"post_recv\"\nqp = \"q\"", "op = \"post_srq_recv\"\nsrq = \"s\"")
            .replace("[[expect.wire]]", "[[expect.event]]\non = \"b\"\nevent = \"srq_limit_reached\"\nsrq = \"s\"\n\n[[expect.wire]]");
    let sc = parse_str(Path::new("t.toml"), &text).unwrap_or_else(|e| panic!("{}", e[0]));
    assert_eq!(sc.qps[0].srq.as_deref(), Some("s"));
    assert!(
        matches!(&sc.steps[0], Step::Act { action: Action::PostSrqRecv { srq, wr_id: 1, .. }, .. } if srq == "s")
    );
    assert_eq!(sc.expect.event[0].kind, EventType(15));
    let e =
        errors(&text.replace("srq = \"s\"\n\n[[expect.wire]]", "srq = \"t\"\n\n[[expect.wire]]"));
    assert!(
        e[0].message.contains("no SRQ `t`") && e[0].hint.as_deref() == Some("did you mean `s`?"),
        "{e:#?}"
    );
    let e = errors(
        &text.replace("on = \"b\"\nop = \"post_srq_recv\"", "on = \"a\"\nop = \"post_srq_recv\""),
    );
    assert!(e[0].message.contains("SRQ `s` is on `b`, not on `a`"), "{e:#?}");
    let e = errors(&text.replace("requires = [\"srq\"]", ""));
    assert!(e[0].message.contains("this needs `srq`"), "{e:#?}");
    let e = errors(&text.replace("event = \"srq_limit_reached\"", "event = \"srq_limit_reachd\""));
    assert!(e[0].hint.as_deref() == Some("did you mean `IBV_EVENT_SRQ_LIMIT_REACHED`?"), "{e:#?}");
}

/// An event about a QP names one of the endpoint's QPs; it may be a recorded deviation.
#[test]
fn qp_events_name_a_qp_of_their_endpoint() {
    let text = GOOD.replace(
        "[[expect.completion]]",
        "[[expect.event]]\non = \"b\"\nevent = \"qp_access_err\"\nqp = \"q\"\nrecord_deviation = true\n\n[[expect.completion]]",
    );
    let sc = parse_str(Path::new("t.toml"), &text).unwrap_or_else(|e| panic!("{}", e[0]));
    let ev = &sc.expect.event[0];
    assert_eq!((ev.kind, ev.qp.as_deref(), ev.record_deviation), (EventType(3), Some("q"), true));
    let e = errors(&text.replace("qp = \"q\"\nrecord_deviation", "qp = \"r\"\nrecord_deviation"));
    assert!(
        e[0].message.contains("no QP `r`") && e[0].hint.as_deref() == Some("did you mean `q`?"),
        "{e:#?}"
    );
    let three = text.replace("[endpoints.b]", "[endpoints.b]\n[endpoints.c]");
    let e = errors(&three.replace("on = \"b\"\nevent", "on = \"c\"\nevent"));
    assert!(e[0].message.contains("QP `q` is between a and b, not on `c`"), "{e:#?}");
}

/// A NAK key, an opcode pattern, a completion status: each name comes from its
/// one home and a typo gets that home's suggestion.
#[test]
fn names_from_the_vocabulary() {
    let text = GOOD.replace("responses = [\"Acknowledge+\"]", "responses = [\"Acknowledge+\"]\nnaks = [\"invalid_rd_request\", \"rnr\", \"remote_acess_error\"]");
    let e = errors(&text);
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(
        e[0].message == "unknown NAK `remote_acess_error`"
            && e[0].hint.as_deref() == Some("did you mean `remote_access_error`?"),
        "{e:#?}"
    );
    let ok = text.replace(", \"remote_acess_error\"", "");
    let sc = parse_str(Path::new("t.toml"), &ok).unwrap_or_else(|e| panic!("{}", e[0]));
    assert_eq!(
        sc.expect.wire[0].naks,
        Some(vec![NakKind::Nak(dissector::wire::NakCode::InvalidRdRequest), NakKind::Rnr])
    );
    let e = errors(
        &GOOD.replace("responses = [\"Acknowledge+\"]", "responses = [\"NAK Invalid RD Reqest\"]"),
    );
    assert!(
        e[0].message.contains("unknown response `NAK Invalid RD Reqest`")
            && e[0].hint.as_deref() == Some("did you mean `NAK Invalid RD Request`?"),
        "{e:#?}"
    );
}

#[test]
fn spec_names_catalogue_rules_and_an_unknown_one_is_refused_with_the_closest() {
    let text = GOOD.replacen(
        "name = \"RC SEND\"",
        "name = \"RC SEND\"\nspec = [\"op.send.consumes-one-receive\", \"roce.udp.dst-port\"]",
        1,
    );
    let sc = parse_str(Path::new("t.toml"), &text).unwrap_or_else(|e| panic!("{}", e[0]));
    assert_eq!(sc.spec, ["op.send.consumes-one-receive", "roce.udp.dst-port"]);
    assert!(sc.warnings.is_empty(), "{:?}", sc.warnings);

    let typo = GOOD.replacen(
        "name = \"RC SEND\"",
        "name = \"RC SEND\"\nspec = [\"resp.dup.atomic-replays-saved-reslt\"]",
        1,
    );
    let e = errors(&typo);
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(
        e[0].to_string(),
        "error: unknown catalogue rule `resp.dup.atomic-replays-saved-reslt`\n --> t.toml:3:9\n  |\n3 | spec = [\"resp.dup.atomic-replays-saved-reslt\"]\n  |         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n  |\n  = hint: did you mean `resp.dup.atomic-replays-saved-result`?"
    );
    let far = GOOD.replacen("name = \"RC SEND\"", "name = \"RC SEND\"\nspec = [\"zzz\"]", 1);
    let e = errors(&far);
    assert!(
        e[0].hint.as_deref().is_some_and(|h| h.contains("conformance/catalogue.toml")),
        "{e:?}"
    );
    let twice = GOOD.replacen(
        "name = \"RC SEND\"",
        "name = \"RC SEND\"\nspec = [\"roce.udp.dst-port\", \"roce.udp.dst-port\"]",
        1,
    );
    assert!(errors(&twice)[0].message.contains("named twice"));
}

#[test]
fn a_scenario_naming_no_rule_loads_with_a_warning_at_its_name() {
    let sc = parse_str(Path::new("t.toml"), GOOD).unwrap_or_else(|e| panic!("{}", e[0]));
    assert!(sc.spec.is_empty());
    assert_eq!(sc.warnings.len(), 1);
    let w = sc.warnings[0].to_string();
    assert!(
        w.starts_with(
            "warning: the scenario names no rule of the conformance catalogue\n --> t.toml:2:8\n"
        ),
        "{w}"
    );
    assert!(w.contains("= hint: add `spec = "), "{w}");
}

/// `GOOD` with `steps` put before its own steps.
fn good_with(steps: &str) -> String {
    GOOD.replacen("[[step]]", &format!("{steps}\n[[step]]"), 1)
}

#[test]
fn steps_on_verbs_objects_load_with_what_the_device_must_answer() {
    let text = good_with(
        r#"
[[step]]
on = "a"
op = "modify_qp"
qp = "q"
state = "reset"
[[step]]
on = "a"
op = "send"
qp = "q"
sge = [{ mr = "msg", len = 5 }]
expect = "refused"
errno = "einval"
[[step]]
on = "a"
op = "query_qp"
qp = "q"
state = "error"
record_deviation = true
[[step]]
on = "b"
op = "dereg_mr"
mr = "rbuf"
expect = "accepted"
[[step]]
on = "b"
op = "arm_cq"
solicited_only = true
[[step]]
on = "b"
op = "await_notify"
notified = false
"#,
    );
    let sc = parse_str(Path::new("t.toml"), &text).expect("loads");
    assert_eq!(
        sc.steps[0],
        Step::Act {
            on: "a".into(),
            action: Action::ModifyQp {
                qp: "q".into(),
                state: QpStateName::RESET,
                state_only: false,
                access: None
            }
        }
    );
    let answers: Vec<_> =
        sc.expect.step.iter().map(|e| (e.index, e.outcome, e.record_deviation)).collect();
    assert_eq!(
        answers,
        vec![
            (1, Outcome::Refused(Some(Errno(22))), false),
            (2, Outcome::State(QpStateName(6)), true),
            (3, Outcome::Accepted, false),
            (5, Outcome::Notified(false), false),
        ]
    );
    assert_eq!(
        sc.steps[5],
        Step::Act { on: "b".into(), action: Action::AwaitNotify { within_ms: 500 } }
    );
}

#[test]
fn what_a_step_expects_of_the_device_is_checked_where_it_is_written() {
    let cases = [
        (
            "op = \"send\"\nqp = \"q\"\nerrno = \"EINVAL\"",
            "`errno` needs `expect = \"refused\"`",
            "errno",
        ),
        ("op = \"send\"\nqp = \"q\"\nexpect = \"refsued\"", "unknown `expect` `refsued`", "expect"),
        (
            "op = \"send\"\nqp = \"q\"\nexpect = \"refused\"\nerrno = \"EINVALL\"",
            "unknown errno `EINVALL`",
            "errno",
        ),
        ("op = \"send\"\nqp = \"q\"\nexpect = 3", "expected a string", "expect"),
        ("op = \"modify_qp\"\nqp = \"q\"\nstate = \"rts2\"", "unknown QP state `rts2`", "state"),
        (
            "op = \"send\"\nqp = \"q\"\nrecord_deviation = true",
            "`record_deviation` needs `expect`",
            "record_deviation",
        ),
    ];
    for (step, message, key) in cases {
        let text = good_with(&format!(
            "[[step]]\non = \"a\"\nsge = [{{ mr = \"msg\", len = 5 }}]\n{step}\n"
        ));
        let text = text
            .replace("sge = [{ mr = \"msg\", len = 5 }]\nop = \"modify_qp\"", "op = \"modify_qp\"");
        let e = errors(&text);
        assert_eq!(e.len(), 1, "{step}: {e:?}");
        assert!(e[0].message.contains(message), "{step}: {}", e[0].message);
        let line = text.lines().nth(e[0].line - 1).unwrap_or("");
        assert!(line.starts_with(key), "{step}: points at line {line:?}");
    }
}

#[test]
fn an_operation_uc_lacks_loads_when_the_device_is_expected_to_refuse_it_and_never_on_ud() {
    let step = "[[step]]\non = \"a\"\nop = \"read\"\nqp = \"q\"\nsge = [{ mr = \"msg\", len = 5 }]\nremote = { mr = \"rbuf\" }\n";
    for (kind, refused_loads) in [("uc", true), ("ud", false)] {
        let text = GOOD.replace("type = \"rc\"", &format!("type = \"{kind}\""));
        let refused =
            text.replacen("[[step]]", &format!("{step}expect = \"refused\"\n[[step]]"), 1);
        assert_eq!(parse_str(Path::new("t.toml"), &refused).is_ok(), refused_loads, "{kind}");
        let e = errors(&text.replacen("[[step]]", &format!("{step}[[step]]"), 1));
        assert!(e.iter().any(|d| d.message.contains("read on")), "{kind}: {e:?}");
    }
}

/// Waits that reach the scenario's timeout load, with a warning at the step that
/// crosses it; waits that fit say nothing.
#[test]
fn waits_past_the_timeout_are_warned_of_where_they_cross_it() {
    let text = "name = 'w'\nspec = ['roce.udp.dst-port']\ntimeout_ms = 3000\n[endpoints.a]\n[[step]]\nop = 'sleep'\nms = 1000\n[[step]]\nop = 'wait_completions'\non = 'a'\ncount = 0\nwithin_ms = 1500\n[[step]]\nop = 'arm_cq'\non = 'a'\n[[step]]\nop = 'await_notify'\non = 'a'\nnotified = false\nwithin_ms = 600\n[[step]]\nop = 'sleep'\nms = 5000\n";
    let sc = parse_str(Path::new("t.toml"), text).unwrap_or_else(|e| panic!("{}", e[0]));
    assert_eq!(sc.warnings.len(), 1, "{:?}", sc.warnings);
    let w = sc.warnings[0].to_string();
    assert!(
        w.starts_with("warning: the waits up to this step add up to 3100 ms, not less than the scenario's 3000 ms timeout"),
        "{w}"
    );
    assert!(w.contains("t.toml:20:13"), "at the await_notify's within_ms: {w}");
    let fits = text.replace("timeout_ms = 3000", "timeout_ms = 9000");
    let sc = parse_str(Path::new("t.toml"), &fits).unwrap_or_else(|e| panic!("{}", e[0]));
    assert!(sc.warnings.is_empty(), "{:?}", sc.warnings);
}

/// The schema (and so the generated reference) names every value a scenario may
/// write where one is named in a list: each event, access flag and QP state the
/// check reads.
#[test]
fn the_schema_lists_every_event_access_flag_and_qp_state() {
    let schema = serde_json::to_string(&schemars::schema_for!(crate::scenario::file::ScenarioFile))
        .unwrap()
        .replace("\\n", " ");
    for (_, name) in EventType::ALL {
        assert!(schema.contains(&format!("`{name}`")), "the schema lacks {name}");
    }
    for name in Access::names() {
        assert!(
            schema.contains(&format!("`{name}`, ")) || schema.contains(&format!("`{name}` (")),
            "the schema lacks {name}"
        );
    }
    let states = "`reset`, `init`, `rtr`, `rts`, `sqd`, `sqe`, `err`";
    assert!(schema.contains(states), "{schema}");
    for (v, name) in QpStateName::ALL {
        let short = name.trim_start_matches("IBV_QPS_").to_ascii_lowercase();
        assert_eq!(states.contains(&format!("`{short}`")), *v != 7, "{name}");
    }
}

#[test]
fn counter_expectations_say_exactly_or_a_range() {
    let base = "name = 'x'\n[endpoints.a]\n[endpoints.b]\n";
    let sc = parse_str(
        Path::new("t.toml"),
        &format!("{base}[[expect.counters]]\non = 'b'\ncounter = 'send_rnr_err'\nvalue = 1\n[[expect.counters]]\non = 'a'\ncounter = 'sent_pkts'\nmin = 4\n"),
    )
    .unwrap_or_else(|e| panic!("{}", e[0]));
    let got: Vec<_> = sc
        .expect
        .counters
        .iter()
        .map(|c| (c.on.as_str(), c.counter.as_str(), c.min, c.max))
        .collect();
    assert_eq!(
        got,
        vec![("b", "send_rnr_err", Some(1), Some(1)), ("a", "sent_pkts", Some(4), None)]
    );
    for (bad, says) in [
        ("on = 'b'\ncounter = 'x'\n", "say what counter `x` should move by"),
        ("on = 'b'\ncounter = 'x'\nvalue = 1\nmin = 0\n", "`value` is exact"),
        ("on = 'b'\ncounter = 'x'\nmin = 3\nmax = 2\n", "`max = 2` is below `min = 3`"),
        ("on = 'b'\ncounter = '../x'\nvalue = 1\n", "is not a counter's name"),
        ("on = 'c'\ncounter = 'x'\nvalue = 1\n", "`c`"),
    ] {
        let e = errors(&format!("{base}[[expect.counters]]\n{bad}"));
        assert!(e.iter().any(|d| d.message.contains(says)), "{bad}: {e:#?}");
    }
}

#[test]
fn a_cq_is_sized_and_resized() {
    let base = "name = 'x'\n[endpoints.a]\n[endpoints.b]\ncq_depth = 8\n";
    let sc = parse_str(
        Path::new("t.toml"),
        &format!("{base}[[step]]\non = 'b'\nop = 'resize_cq'\ncqe = 1\nexpect = 'refused'\n"),
    )
    .unwrap_or_else(|e| panic!("{}", e[0]));
    assert_eq!((sc.endpoints["a"].cq_depth, sc.endpoints["b"].cq_depth), (None, Some(8)));
    assert_eq!(
        sc.steps[0],
        Step::Act { on: "b".into(), action: Action::ResizeCq { cqe: 1 } },
        "the checked step is the action sent"
    );
    assert_eq!(sc.expect.step[0].outcome, Outcome::Refused(None));
    let e = errors("name = 'x'\n[endpoints.a]\ncq_depth = 0\n");
    assert!(
        e.iter().any(|d| d.message.contains("endpoint `a`: a CQ of 0 completions")
            && d.hint.as_deref() == Some("give 1 to 65536")),
        "{e:#?}"
    );
    let e = errors(&format!("{base}[[step]]\non = 'c'\nop = 'resize_cq'\ncqe = 4\n"));
    assert!(e.iter().any(|d| d.message.contains("`c`")), "{e:#?}");
}

/// `src_qp` names a UD QP of the completion's endpoint, resolved to its other end
/// (the sender); an unknown name is refused where it is, with the closest; a QP
/// `on` is not an end of, an RC QP and a group are refused too.
#[test]
fn a_completions_src_qp_names_a_ud_qp_of_its_endpoint() {
    let base = "name = 'x'\n[endpoints.a]\n[endpoints.b]\n[endpoints.c]\n[[qp]]\nname = 'u'\ntype = 'ud'\nbetween = ['b', 'a']\n[[qp]]\nname = 'r'\ntype = 'rc'\nbetween = ['b', 'a']\n[[qp]]\nname = 'g'\ntype = 'ud'\nbetween = ['b', 'a']\ncount = 2\n[[expect.completion]]\non = 'b'\nwr_id = 1\ngrh = true\npkey_index = 0\n";
    let sc = parse_str(Path::new("t.toml"), &format!("{base}src_qp = 'u'\n"))
        .unwrap_or_else(|e| panic!("{}", e[0]));
    let c = &sc.expect.completion[0];
    assert_eq!(c.src_qp, Some(QpOn { qp: "u".into(), on: "a".into() }));
    assert_eq!((c.grh, c.pkey_index), (Some(true), Some(0)));
    let sc = parse_str(Path::new("t.toml"), &format!("{base}src_qp = 'g[1]'\n"))
        .unwrap_or_else(|e| panic!("{}", e[0]));
    assert_eq!(sc.expect.completion[0].src_qp, Some(QpOn { qp: "g[1]".into(), on: "a".into() }));

    let e = errors(&format!("{base}src_qp = 'v'\n"));
    assert_eq!(e.len(), 1, "{e:#?}");
    let line = base.lines().count() + 1;
    assert_eq!(
        e[0].to_string(),
        format!("error: no QP `v`\n  --> t.toml:{line}:10\n   |\n{line} | src_qp = 'v'\n   |          ^^^\n   |\n   = hint: did you mean `u`?")
    );
    let e = errors(&format!("{base}src_qp = 'u'\n").replace("on = 'b'\nwr_id", "on = 'c'\nwr_id"));
    assert!(
        e.iter().any(|d| d.message == "QP `u` is between b and a, not on `c`"
            && d.line == line
            && d.hint.as_deref().is_some_and(|h| h.contains("the sender is its other end"))),
        "{e:#?}"
    );
    let e = errors(&format!("{base}src_qp = 'r'\n"));
    assert!(
        e[0].message.contains("`src_qp` on QP `r`, which is RC") && e[0].line == line,
        "{e:#?}"
    );
    let e = errors(&format!("{base}src_qp = 'g'\n"));
    assert!(
        e[0].message == "no QP `g`"
            && e[0].hint.as_deref()
                == Some("`g` is a group of 2 QPs: name one of them, `g[0]` to `g[1]`"),
        "{e:#?}"
    );
}

/// An SGE outside its MR is refused, with the key that lets it through;
/// `outside_mr = true` lets it reach into the agent's guard region after the
/// MR, and no further.
#[test]
fn an_sge_outside_its_mr_only_when_said_and_within_the_guard() {
    let past = GOOD.replace(
        "sge = [{ mr = \"msg\", len = 5 }]",
        "sge = [{ mr = \"msg\", offset = 60, len = 8 }]",
    );
    let e = errors(&past);
    assert!(
        e[0].message.contains("SGE 1: 60+8 runs past the end of MR `msg` (64 bytes)"),
        "{e:#?}"
    );
    assert!(e[0].hint.as_deref().is_some_and(|h| h.contains("outside_mr = true")), "{e:#?}");
    let said = past.replace("len = 8 }]", "len = 8, outside_mr = true }]");
    let sc = parse_str(Path::new("t.toml"), &said).unwrap_or_else(|d| panic!("{}", d[0]));
    assert!(
        sc.steps.iter().any(|s| format!("{s:?}").contains("outside_mr: true")),
        "{:?}",
        sc.steps
    );
    let far = said.replace("offset = 60, len = 8", "offset = 60, len = 4101");
    let e = errors(&far);
    assert!(
        e[0].message.contains(
            "runs 4097 bytes past the end of MR `msg`; `outside_mr` reaches at most 4096"
        ),
        "{e:#?}"
    );
    let ok = far.replace("len = 4101", "len = 4100");
    assert!(parse_str(Path::new("t.toml"), &ok).is_ok());
}

/// A WRITE may start before its remote MR (a negative `offset`, as the wire's
/// VA will): what mr.bounds.before-start needs; a stream may not.
#[test]
fn a_remote_offset_before_the_mr_is_sayable_for_one_operation_only() {
    let one = r#"
name = "before"
[endpoints.a]
[endpoints.b]
[[qp]]
name = "q"
type = "rc"
between = ["b", "a"]
[[mr]]
name = "src"
on = "a"
size = 8
[[mr]]
name = "dst"
on = "b"
size = 64
access = ["local_write", "remote_write"]
[[step]]
on = "a"
op = "write"
qp = "q"
sge = [{ mr = "src" }]
remote = { mr = "dst", offset = -1 }
"#;
    let sc = parse_str(Path::new("t.toml"), one).unwrap_or_else(|d| panic!("{}", d[0]));
    let steps = format!("{:?}", sc.steps);
    assert!(steps.contains("mr: \"dst\", offset: -1"), "{steps}");
    let stream =
        STREAM.replace("remote = { mr = \"dst\" }", "remote = { mr = \"dst\", offset = -8 }");
    let e = errors(&stream);
    assert!(
        e.iter().any(|d| d
            .message
            .contains("offset -8: a stream's messages land from the MR's first byte on")),
        "{e:#?}"
    );
}

/// A bind past its MR's end is refused with the key that lets it through;
/// `outside_mr = true` lets it reach into the guard region, and no further.
#[test]
fn a_bind_outside_its_mr_only_when_said_and_within_the_guard() {
    let base = r#"
name = "bind"
requires = ["mw_type2"]
[endpoints.a]
[endpoints.b]
[[qp]]
name = "q"
type = "rc"
between = ["b", "a"]
[[mr]]
name = "target"
on = "b"
size = 16
access = ["local_write", "mw_bind"]
[[mw]]
name = "w"
on = "b"
type = 2
[[step]]
on = "b"
op = "bind_mw"
qp = "q"
mw = "w"
mr = "target"
offset = 8
len = 16
"#;
    let e = errors(base);
    assert!(e[0].message.contains("8+16 runs past the end of MR `target` (16 bytes)"), "{e:#?}");
    assert!(e[0].hint.as_deref().is_some_and(|h| h.contains("outside_mr = true")), "{e:#?}");
    let said = format!("{base}outside_mr = true\n");
    if let Err(e) = parse_str(Path::new("t.toml"), &said) {
        panic!("{e:#?}");
    }
    let far = said.replace("len = 16", "len = 4105");
    let e = errors(&far);
    assert!(e[0].message.contains("runs 4097 bytes past the end of MR `target`"), "{e:#?}");
}
