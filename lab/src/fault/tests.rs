//! Rules: the documented examples round-trip through `Display`, opcode names,
//! errors that point at the offending word, TOML rule files, the seeded `Rng`.
use std::path::Path;

use super::parse::parse_op;
use super::*;

#[test]
fn parses_the_documented_examples_and_round_trips() {
    for s in [
        "drop dir=a>b qp=0x11 psn=4 nth=2",
        "corrupt op=send-only at=payload+0 xor=0x01",
        "corrupt-icrc dir=b>a op=ack nth=1",
        "ce qp=0x12 prob=0.5 seed=7",
        "dup op=write-only copies=1 limit=3",
        "delay dir=a>b ms=20",
        "reorder psn=3",
        "corrupt at=ip+1 icrc=fix",
        "drop op=rc-send-only psn=4-7",
        "drop op=0x81",
        "respond op=write-only nth=1 with=nak code=remote_access_error real=withhold",
        "respond op=send-only with=rnr timer=1-31 real=withhold reply-qp=0x11",
        "respond with=ack credits=0 rpsn=+3 msn=7 real=lost",
        "respond op=read-request with=read-response len=4 fill=0x5a rpsn=-1",
        "respond op=fetchadd with=atomic-ack orig=0x1234",
    ] {
        let r = parse_rule(s).unwrap_or_else(|e| panic!("{e}"));
        let again = parse_rule(&r.to_string()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r, again, "{s} → {r}");
    }
    let r = parse_rule("drop dir=a>b qp=0x11 psn=4 nth=2").unwrap();
    assert_eq!(r.action, Action::Drop);
    let Action::Respond(resp) =
        parse_rule("respond with=ack credits=0 rpsn=-2 real=withhold reply-qp=0x11")
            .unwrap()
            .action
    else {
        panic!()
    };
    assert_eq!(
        resp,
        Respond {
            reply: Reply::Ack { credits: 0 },
            psn_offset: -2,
            msn: None,
            real: Real::Withhold,
            reply_qp: Some(0x11)
        }
    );
    // Keys may come before `with`.
    let Action::Respond(resp) = parse_rule("respond timer=5 with=rnr").unwrap().action else {
        panic!()
    };
    assert_eq!(resp.reply, Reply::Rnr { first: 5, last: 5 });
    assert_eq!((r.dir, r.qp, r.psn, r.nth), (Some(Dir::AtoB), Some(0x11), Some(4..=4), Some(2)));
}

#[test]
fn opcode_names() {
    assert_eq!(parse_op("send-only"), Some(OpMatch::Operation(0x04)));
    assert_eq!(parse_op("SEND_ONLY"), Some(OpMatch::Operation(0x04)));
    assert_eq!(parse_op("ud-send-only"), Some(OpMatch::Exact(0x64)));
    assert_eq!(parse_op("ack"), Some(OpMatch::Operation(0x11)));
    assert_eq!(parse_op("write-only"), Some(OpMatch::Operation(0x0a)));
    assert_eq!(parse_op("rc-rdma-write-only"), Some(OpMatch::Exact(0x0a)));
    assert_eq!(parse_op("17"), Some(OpMatch::Exact(0x11)));
    assert_eq!(parse_op("cnp"), Some(OpMatch::Exact(0x81)));
    assert_eq!(parse_op("bogus"), None);
    let m = OpMatch::Operation(0x04);
    assert!(
        m.matches(0x04)
            && m.matches(0x24)
            && m.matches(0x64)
            && !m.matches(0x05)
            && !m.matches(0x84)
    );
}

fn error_at(s: &str) -> (String, String) {
    let e = parse_rule(s).unwrap_err();
    (s[e.span.clone()].to_string(), e.to_string())
}

#[test]
fn errors_point_at_the_offending_token() {
    let cases = [
        ("dorp qp=1", "dorp", "unknown action"),
        ("drop qpx=1", "qpx", "unknown key"),
        ("drop qp=zz", "zz", "bad value `zz` for `qp`"),
        ("drop qp=0x1000000", "0x1000000", "24 bits"),
        ("drop dir=a<b", "a<b", "expected a>b"),
        ("drop psn=7-4", "7-4", "range"),
        ("drop nth=0", "0", "count from 1"),
        ("drop prob=1.5", "1.5", "between 0 and 1"),
        ("drop op=send-onyl", "send-onyl", "unknown opcode"),
        ("drop xor=1", "xor", "only applies to `corrupt`"),
        ("drop ms=5", "ms", "only applies to `delay`"),
        ("corrupt xor=0", "0", "non-zero"),
        ("corrupt at=tail+1", "tail+1", "expected N, ip+N"),
        ("dup copies=99", "99", "expected 1 to 16"),
        ("delay ms=999999", "999999", "at most"),
        ("drop qp=1 qp=2", "qp", "given twice"),
        ("drop qp", "qp", "not a key=value"),
        ("drop icrc=fix", "icrc", "only applies to actions that change bytes"),
        ("drop nth=2 prob=0.5", "prob", "exclude each other"),
        ("drop qp=", "", "empty"),
        ("drop with=ack", "with", "only applies to `respond`"),
        ("respond with=nack", "nack", "unknown response"),
        ("respond with=nak", "with=nak", "needs a `code`"),
        ("respond with=nak code=bogus", "bogus", "unknown NAK code"),
        ("respond with=ack code=invalid_request", "code", "only applies to `with=nak`"),
        (
            "respond credits=0 with=nak code=invalid_request",
            "credits",
            "only applies to `with=ack`",
        ),
        ("respond with=rnr timer=32", "32", "0–31"),
        ("respond with=rnr timer=9-3", "9-3", "0–31"),
        ("respond with=read-response len=5000", "5000", "one packet"),
        ("respond with=ack rpsn=3", "3", "like +3"),
        ("respond with=ack real=maybe", "maybe", "keep, withhold or lost"),
        ("respond with=ack reply-qp=0x1000000", "0x1000000", "24 bits"),
    ];
    for (input, token, msg) in cases {
        let (got, text) = error_at(input);
        assert_eq!(got, token, "{input}: {text}");
        assert!(text.contains(msg), "{input}: expected `{msg}` in\n{text}");
    }
    let e = parse_rule("").unwrap_err();
    assert!(e.to_string().contains("empty rule"));
    // The caret sits under the token.
    let text = parse_rule("drop qp=1 bogus=2").unwrap_err().to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[2], "1 | drop qp=1 bogus=2");
    assert_eq!(lines[3], "  |           ^^^^^");
    // A command-line rule says which `--fault` it is, and the column in it.
    let e = parse_rules(&["drop".into(), "drop op=é bogus=2".into()]).unwrap_err();
    assert_eq!(e.origin.as_deref(), Some("--fault #2"));
    let text = e.to_string();
    assert!(text.starts_with("error: bad value `é` for `op`: unknown opcode\n"), "{text}");
    assert!(
        text.contains("\n --> --fault #2:1:9\n  |\n1 | drop op=é bogus=2\n  |         ^\n"),
        "{text}"
    );
    assert!(text.contains("\n  = hint: use a number (0x11) or a name"), "{text}");
}

#[test]
fn toml_rules() {
    let text = "seed = 9\n\n[[rule]]\naction = \"drop\"\ndir = \"a>b\"\nqp = 17\npsn = 4\nnth = 2\n\n[[rule]]\naction = \"ce\"\nprob = 0.25\n";
    let (rules, seed) = parse_rules_toml(text, Path::new("f.toml")).unwrap();
    assert_eq!(seed, Some(9));
    assert_eq!(rules.len(), 2);
    assert_eq!(rules[0], parse_rule("drop dir=a>b qp=0x11 psn=4 nth=2").unwrap());
    assert_eq!(rules[1].prob, Some(0.25));

    let e = parse_rules_toml(
        "[[rule]]\naction = \"drop\"\n\n[[rule]]\naction = \"drop\"\nqpx = 1\n",
        Path::new("f.toml"),
    )
    .unwrap_err();
    assert_eq!(e.origin.as_deref(), Some("f.toml:4:1 (rule #2)"), "{e}");
    // The rule text is rebuilt from the table, not the file's: no excerpt of it.
    assert!(
        e.to_string().starts_with(
            "error: unknown key `qpx` (at `qpx`)\n--> f.toml:4:1 (rule #2)\n = hint: keys are"
        ),
        "{e}"
    );
    let e = parse_rules_toml("[[rule]]\ndir = \"a>b\"\n", Path::new("f.toml")).unwrap_err();
    assert!(e.to_string().contains("missing `action`"), "{e}");
    let e = parse_rules_toml("rules = 1\n", Path::new("f.toml")).unwrap_err();
    assert!(e.to_string().contains("unknown top-level key `rules`"), "{e}");
    let e = parse_rules_toml("[[rule]\n", Path::new("f.toml")).unwrap_err();
    assert!(e.to_string().contains("f.toml:1:"), "{e}");
}

#[test]
fn rng_is_reproducible() {
    let a: Vec<u64> = {
        let mut r = Rng::new(42);
        (0..5).map(|_| r.next_u64()).collect()
    };
    let b: Vec<u64> = {
        let mut r = Rng::new(42);
        (0..5).map(|_| r.next_u64()).collect()
    };
    assert_eq!(a, b);
    let mut r = Rng::new(1);
    assert!((0..1000).map(|_| r.next_f64()).all(|x| (0.0..1.0).contains(&x)));
}
