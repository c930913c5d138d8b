//! Older formats read as they meant it, and fixed into the current one: the
//! issue's `sleep` step, every key format 1 accepted without reading it, inline
//! and dotted step tables, literal `${`, the `format` key itself, and the corpus
//! of files from the history of `scenarios/` (harness/tests/format_corpus/).
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::*;
use crate::scenario::check::parse_cases;
use crate::scenario::file::StepOp;
use crate::scenario::model::{Scenario, Step};

/// A valid scenario around `steps` (a spec id, so no warning is about that).
fn scenario(top: &str, steps: &str) -> String {
    format!(
        r#"{top}name = "legacy"
spec = ["resp.dup.atomic-replays-saved-result"]

[endpoints.a]
[endpoints.b]

[[qp]]
name = "q"
type = "rc"
between = ["b", "a"]

[[mr]]
name = "m"
on = "a"
size = 64

[[mr]]
name = "t"
on = "b"
size = 64
access = ["local_write", "remote_write", "remote_read", "remote_atomic"]
{steps}"#
    )
}

fn load(text: &str) -> Result<Vec<Scenario>, Vec<Diagnostic>> {
    parse_cases(Path::new("t.toml"), text)
}

fn warnings(text: &str) -> Vec<Diagnostic> {
    match load(text) {
        Ok(mut s) => std::mem::take(&mut s[0].warnings),
        Err(e) => panic!("{}", e.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")),
    }
}

fn errors(text: &str) -> Vec<Diagnostic> {
    match load(text) {
        Ok(s) => panic!("loaded: {:?}", s[0].steps),
        Err(e) => e,
    }
}

/// The checked scenarios, warnings left out: what a run would do.
fn model(text: &str) -> String {
    let mut all = load(text).unwrap_or_else(|e| panic!("{}\n{text}", e[0]));
    for s in &mut all {
        s.warnings.clear();
    }
    format!("{all:#?}")
}

/// The fixed text; it loads without a warning about its format, to the same
/// scenario as the old text.
fn fixed(text: &str) -> String {
    let src = Source::new(Path::new("t.toml"), text);
    let l = read(&src).unwrap_or_else(|e| panic!("{}", e[0]));
    let new = fix(text, &l);
    let again = Source::new(Path::new("t.toml"), &new);
    let l2 = read(&again).unwrap_or_else(|e| panic!("{}", e[0]));
    assert!(l2.is_current(), "not current after the fix:\n{new}");
    assert!(l2.warnings.is_empty() && l2.errors.is_empty(), "{:?}", l2.warnings);
    assert_eq!(fix(&new, &l2), new, "a fixed file is fixed again");
    for w in load(&new).unwrap_or_else(|e| panic!("{}\n{new}", e[0]))[0].warnings.iter() {
        assert!(!w.message.contains("format"), "{w}\n{new}");
    }
    if load(text).is_ok() {
        assert_eq!(model(text), model(&new), "{new}");
    }
    new
}

const SLEEP_ON: &str = r#"
[[step]]
on = "b"
op = "sleep"
ms = 300
"#;

#[test]
fn the_issue_s_sleep_step_loads_with_a_warning_at_its_on() {
    let text = scenario("", SLEEP_ON);
    let w = warnings(&text);
    assert_eq!(w.len(), 1, "{w:#?}");
    let line =
        text.lines().collect::<Vec<_>>().iter().rposition(|l| *l == "on = \"b\"").unwrap() + 1;
    assert_eq!((w[0].severity, w[0].line, w[0].col), (Severity::Warning, line, 1));
    assert!(
        w[0].message.starts_with(
            "`on` of a `sleep` step: ignored since format 2 (a `sleep` pauses the whole scenario"
        ),
        "{}",
        w[0].message
    );
    let shown = w[0].to_string();
    assert!(shown.starts_with("warning: ") && shown.contains(" --> t.toml:"), "{shown}");
    assert!(
        shown.contains(&format!("{line} | on = \"b\"\n   | ^^^^^^^^\n")),
        "the caret spans the key and value:\n{shown}"
    );
    assert!(!shown.contains("did you mean"), "{shown}");
    let sc = &load(&text).unwrap()[0];
    assert_eq!(sc.steps, vec![Step::Sleep { ms: 300 }]);
    // Fixed: the line is gone, `format = 3` is there, and nothing else changed.
    let new = fixed(&text);
    assert_eq!(new, scenario("format = 3\n", "\n[[step]]\nop = \"sleep\"\nms = 300\n"));
}

#[test]
fn a_file_of_a_later_format_is_refused_the_dropped_key_with_why() {
    for f in [2, 3] {
        let text = scenario(&format!("format = {f}\n"), SLEEP_ON);
        let e = errors(&text);
        assert_eq!(e.len(), 1, "{e:#?}");
        assert_eq!(e[0].severity, Severity::Error);
        assert!(
            e[0].message.starts_with(&format!(
                "`on` of a `sleep` step: dropped in format 2, and this file says `format = {f}`"
            )),
            "{}",
            e[0].message
        );
        assert_eq!(e[0].hint.as_deref(), Some("remove it (`roce check --fix` does)"));
        // --fix can fix it all the same.
        assert!(fixed(&text).contains("\n[[step]]\nop = \"sleep\"\nms = 300\n"));
    }
}

#[test]
fn a_key_that_never_was_valid_stays_an_error_with_did_you_mean() {
    let e = errors(&scenario("", "[[step]]\nop = \"sleep\"\nmss = 300\n"));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(e[0].message.starts_with("unknown field `mss`"), "{}", e[0].message);
    assert_eq!(e[0].hint.as_deref(), Some("did you mean `ms`?"));
    // A key format 1 had, on a step where format 1 refused it too.
    let e = errors(&scenario(
        "",
        "[[step]]\non = \"a\"\nop = \"send\"\nqp = \"q\"\nsge = [{ mr = \"m\", len = 8 }]\nremote = { mr = \"t\" }\n",
    ));
    assert!(e[0].message.starts_with("unknown field `remote`"), "{e:#?}");
    assert_eq!(e[0].severity, Severity::Error);
}

/// A minimal step of each format 1 op, in the current format.
const FORMAT1_OPS: [(&str, &str); 12] = [
    ("sync", ""),
    ("sleep", "ms = 5\n"),
    ("wait_completions", "on = \"a\"\ncount = 1\n"),
    ("post_recv", "on = \"b\"\nqp = \"q\"\nsge = [{ mr = \"t\" }]\n"),
    ("send", "on = \"a\"\nqp = \"q\"\nsge = [{ mr = \"m\", len = 8 }]\n"),
    ("send_imm", "on = \"a\"\nqp = \"q\"\nsge = [{ mr = \"m\", len = 8 }]\nimm_data = 7\n"),
    ("write", "on = \"a\"\nqp = \"q\"\nsge = [{ mr = \"m\", len = 8 }]\nremote = { mr = \"t\" }\n"),
    (
        "write_imm",
        "on = \"a\"\nqp = \"q\"\nsge = [{ mr = \"m\", len = 8 }]\nremote = { mr = \"t\" }\nimm_data = 7\n",
    ),
    ("read", "on = \"a\"\nqp = \"q\"\nsge = [{ mr = \"m\", len = 8 }]\nremote = { mr = \"t\" }\n"),
    (
        "cmp_swap",
        "on = \"a\"\nqp = \"q\"\nsge = [{ mr = \"m\", len = 8 }]\nremote = { mr = \"t\" }\ncompare = 0\nswap = 1\n",
    ),
    (
        "fetch_add",
        "on = \"a\"\nqp = \"q\"\nsge = [{ mr = \"m\", len = 8 }]\nremote = { mr = \"t\" }\nadd = 1\n",
    ),
    (
        "probe",
        "on = \"a\"\nqp = \"q\"\nprobe = { id = \"p\", opcode = \"RDMA WRITE Only\", remote = { mr = \"t\" }, len = 8 }\n",
    ),
];

/// A value of the right shape for each format 1 step key.
fn value_of(key: &str) -> &'static str {
    match key {
        "on" | "to" => "\"a\"",
        "qp" => "\"q\"",
        "sge" => "[{ mr = \"m\", len = 8 }]",
        "remote" => "{ mr = \"t\" }",
        "flags" => "[\"signaled\"]",
        "probe" => "{ id = \"x\", opcode = \"RDMA WRITE Only\" }",
        _ => "8",
    }
}

/// What format 1's check refused, read from its parse.rs (4ac89b5^): `remote` on
/// a step with no remote address, `probe` on a step that posts something else,
/// and `sge`, `remote`, `imm_data` on a probe (they go inside `probe = { … }`).
fn refused_by_format1(op: &str, key: &str) -> bool {
    match key {
        "remote" => matches!(op, "post_recv" | "send" | "send_imm" | "probe"),
        "probe" => !matches!(op, "sync" | "sleep" | "wait_completions" | "probe"),
        "sge" | "imm_data" => op == "probe",
        _ => false,
    }
}

/// Whether the current format has `key` on a step of `op` (serde says).
fn current_has(op: &str, key: &str) -> bool {
    let text = format!("op = \"{op}\"\n{key} = {}\n", value_of(key));
    let table: toml::Table = text.parse().unwrap();
    match StepOp::deserialize(toml::Value::Table(table)) {
        Ok(_) => true,
        Err(e) => !e.to_string().contains(&format!("unknown field `{key}`")),
    }
}

/// Every key format 1 accepted on a step of every op it had and never read, and
/// only those: each loads with a warning in a format 1 file, and is gone when
/// fixed; every key the current format has, or format 1 refused, is left alone.
#[test]
fn every_key_format_1_accepted_without_reading_it_is_a_warning() {
    let mut warned = 0;
    for (op, body) in FORMAT1_OPS {
        for key in FORMAT1_STEP_KEYS {
            let expect = !current_has(op, key) && !refused_by_format1(op, key);
            assert_eq!(dropped(op, key).is_some(), expect, "{op}.{key}");
            if !expect || body.lines().any(|l| l.starts_with(&format!("{key} ="))) {
                continue;
            }
            let step = format!("[[step]]\nop = \"{op}\"\n{body}{key} = {}\n", value_of(key));
            let text = scenario("", &step);
            let w = warnings(&text);
            assert_eq!(w.len(), 1, "{op}.{key}: {w:#?}");
            assert!(
                w[0].message
                    .starts_with(&format!("`{key}` of a `{op}` step: ignored since format 2 (")),
                "{}",
                w[0].message
            );
            let new = fixed(&text);
            let step = &new[new.rfind("[[step]]").unwrap()..];
            assert!(!step.contains(&format!("\n{key} = ")), "{new}");
            warned += 1;
        }
    }
    // As docs/format-changes.md counts them: 15 keys on a sync, 14 on a sleep,
    // 12 on a wait_completions, 9 on a probe and on a post_recv, 7 on a send, 6
    // on a send_imm, 8 on a write and on a read, 7 on a write_imm, 6 on a
    // cmp_swap, 7 on a fetch_add.
    assert_eq!(warned, 108);
    // Ops that came later have no such keys.
    assert_eq!(dropped("stream", "ms"), None);
    assert_eq!(dropped("bind_mw", "to"), None);
}

#[test]
fn a_dropped_key_s_comments_and_layout() {
    let text = scenario(
        "# The scenario's own comment.\n\n",
        "\n[[step]]\n# Wait a while.\non = \"b\"   # the endpoint: never read\nop = \"sleep\"\nqp = \"q\"\n\nms = 300 # a pause\n\n# The next step.\n[[step]]\nop = \"sync\"\nremote.mr = \"t\"\nremote.offset = 8\nsge = [\n  { mr = \"m\" },  # in an array\n]\n",
    );
    let w = warnings(&text);
    assert_eq!(w.len(), 4, "{w:#?}");
    let new = fixed(&text);
    assert!(
        new.starts_with("# The scenario's own comment.\n\nformat = 3\nname = \"legacy\"\n"),
        "{new}"
    );
    assert!(
        new.ends_with("\n[[step]]\n# Wait a while.\nop = \"sleep\"\n\nms = 300 # a pause\n\n# The next step.\n[[step]]\nop = \"sync\"\n"),
        "{new}"
    );
}

#[test]
fn inline_step_tables_keep_one_comma_between_what_is_kept() {
    for (steps, want) in [
        (
            "step = [{ on = \"b\", op = \"sleep\", ms = 3 }, { op = \"sync\", qp = \"q\", wr_id = 4 }]\n",
            "step = [{ op = \"sleep\", ms = 3 }, { op = \"sync\" }]\n",
        ),
        (
            "step = [{ op = \"sleep\", ms = 3, on = \"b\" }, {op=\"sync\",remote.mr=\"t\",remote.offset=8,qp=\"q\"}]\n",
            "step = [{ op = \"sleep\", ms = 3 }, {op=\"sync\"}]\n",
        ),
        (
            "step = [{ qp = \"q\", op = \"sleep\", on = \"b\", ms = 3 }]\n",
            "step = [{ op = \"sleep\", ms = 3 }]\n",
        ),
    ] {
        // Before the tables: a top-level key.
        let text = scenario(steps, "");
        assert!(!warnings(&text).is_empty());
        let new = fixed(&text);
        assert!(new.starts_with(&format!("format = 3\n{want}")), "{new}");
    }
}

#[test]
fn a_literal_dollar_brace_of_format_1_stays_literal_and_is_escaped_when_fixed() {
    let text = scenario(
        "description = \"costs ${HOME}\"\n",
        "[[mr]]\nname = \"x\"\non = \"a\"\nsize = 16\ninit = { text = \"${v}$${w}\" }\n",
    );
    let w = warnings(&text);
    assert_eq!(w.len(), 2, "{w:#?}");
    assert!(w.iter().all(|d| d.message.starts_with(
        "`${` in a string: literal text in format 1, which this file is in; since format 3 it starts a placeholder"
    )));
    let sc = &load(&text).unwrap()[0];
    let x = sc.mrs.iter().find(|m| m.name == "x").unwrap();
    assert_eq!(&x.initial_bytes()[..10], b"${v}$${w}\0");
    let new = fixed(&text);
    assert!(new.contains("description = \"costs $${HOME}\""), "{new}");
    assert!(new.contains("init = { text = \"$${v}$$${w}\" }"), "{new}");
    // Written with an escape, the literal is written anew.
    let esc = scenario("description = \"\\u0024{x}\"\n", "");
    assert!(fixed(&esc).contains("description = \"$${x}\""));
    // Format 3 reads a placeholder: one with no [cases] is refused.
    let e = errors(&scenario("format = 3\ndescription = \"${HOME}\"\n", ""));
    assert!(e[0].message.contains("unknown parameter `HOME`"), "{e:#?}");
}

#[test]
fn a_file_with_cases_reads_placeholders_whatever_its_format() {
    let text = scenario("", "[cases]\nn = [1, 2]\n\n[[step]]\nop = \"sleep\"\nms = \"${n}\"\n");
    let all = load(&text).unwrap_or_else(|e| panic!("{}", e[0]));
    assert_eq!(all.len(), 2);
    assert_eq!(all[1].steps, vec![Step::Sleep { ms: 2 }]);
    assert!(all[0].warnings.is_empty(), "{:#?}", all[0].warnings);
}

#[test]
fn the_format_key_is_a_known_format() {
    for (v, says) in [
        ("0", "there is no format 0: formats are numbered from 1"),
        ("-1", "there is no format -1"),
        ("4", "format 4 is newer than this roce reads (formats 1 to 3)"),
        ("\"3\"", "`format` is a whole number"),
        ("2.5", "`format` is a whole number"),
    ] {
        let text = scenario(&format!("format = {v}\n"), "");
        let e = errors(&text);
        assert_eq!(e.len(), 1, "{e:#?}");
        assert!(e[0].message.starts_with(says), "{}", e[0].message);
        assert_eq!((e[0].line, e[0].col), (1, 10), "{v}");
        assert!(e[0].hint.is_some());
    }
    for v in 1..=CURRENT {
        assert!(load(&scenario(&format!("format = {v}\n"), "")).is_ok());
    }
}

#[test]
fn fixing_sets_the_format_and_a_current_file_is_left_as_it_is() {
    let current = scenario("format = 3\n", SLEEP_ON.replace("on = \"b\"\n", "").as_str());
    let l = read(&Source::new(Path::new("t.toml"), &current)).unwrap();
    assert!(l.is_current());
    assert_eq!(fix(&current, &l), current);
    // A file without `format` is format 1: fixed, it says 3, in place of 1 or 2.
    for top in ["", "format = 1\n", "format = 2\n"] {
        let text = scenario(top, "");
        let l = read(&Source::new(Path::new("t.toml"), &text)).unwrap();
        assert!(!l.is_current());
        assert_eq!(fixed(&text), scenario("format = 3\n", ""));
    }
    // The schema says what `format` is.
    let schema =
        serde_json::to_string(&schemars::schema_for!(crate::scenario::file::ScenarioFile)).unwrap();
    assert!(schema.contains(&format!("the current one is {CURRENT}")), "{schema}");
}

/// One file of the corpus and what reading it must say.
struct Entry {
    old: &'static str,
    current: &'static str,
    /// The warnings about its format: the line of each and how its message starts.
    warnings: &'static [(usize, &'static str)],
}

/// The corpus (harness/tests/format_corpus/README.md says where each file came
/// from): each old file loads with exactly these warnings about its format, to
/// the same checked scenario as its current form, and --fix writes that form.
const CORPUS: [Entry; 8] = [
    Entry { old: "format1/rc_send_tcp.toml", current: "current/rc_send_tcp.toml", warnings: &[] },
    Entry {
        old: "format1/rc_write_rdma_cm.toml",
        current: "current/rc_write_rdma_cm.toml",
        warnings: &[],
    },
    Entry {
        old: "format1/send_without_recv_rnr.toml",
        current: "current/send_without_recv_rnr.toml",
        warnings: &[
            (28, "`count` of a `send` step: ignored since format 2"),
            (29, "`within_ms` of a `send` step: ignored since format 2"),
            (33, "`on` of a `sleep` step: ignored since format 2"),
        ],
    },
    Entry {
        old: "format1/atomics.toml",
        current: "current/atomics.toml",
        warnings: &[
            (43, "`add` of a `cmp_swap` step: ignored since format 2"),
            (46, "`on` of a `sync` step: ignored since format 2"),
            (63, "`compare` of a `fetch_add` step: ignored since format 2"),
            (64, "`swap` of a `fetch_add` step: ignored since format 2"),
        ],
    },
    Entry {
        old: "format1/ud_send.toml",
        current: "current/ud_send.toml",
        warnings: &[
            (33, "`flags` of a `post_recv` step: ignored since format 2"),
            (41, "`imm_data` of a `send` step: ignored since format 2"),
            (46, "`qp` of a `wait_completions` step: ignored since format 2"),
            (47, "`wr_id` of a `wait_completions` step: ignored since format 2"),
        ],
    },
    Entry {
        old: "format1/psn_ahead.toml",
        current: "current/psn_ahead.toml",
        warnings: &[
            (27, "`wr_id` of a `probe` step: ignored since format 2"),
            (34, "`within_ms` of a `probe` step: ignored since format 2"),
        ],
    },
    Entry {
        old: "format2/rnr_timer_zero.toml",
        current: "current/rnr_timer_zero.toml",
        warnings: &[],
    },
    Entry {
        old: "format2/write_drop_middle.toml",
        current: "current/write_drop_middle.toml",
        warnings: &[(6, "`${` in a string: literal text in format 1")],
    },
];

fn corpus(rel: &str) -> (PathBuf, String) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/format_corpus").join(rel);
    let t = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (p, t)
}

#[test]
fn the_corpus_of_every_earlier_form_loads_as_its_current_form() {
    for e in &CORPUS {
        let (old_path, old) = corpus(e.old);
        let (cur_path, cur) = corpus(e.current);
        let mut all =
            parse_cases(&old_path, &old).unwrap_or_else(|d| panic!("{}: {}", e.old, d[0]));
        let ws = std::mem::take(&mut all[0].warnings);
        let about_format: Vec<(usize, String)> = ws
            .iter()
            .filter(|w| w.message.contains("format"))
            .map(|w| (w.line, w.message.clone()))
            .collect();
        assert_eq!(about_format.len(), e.warnings.len(), "{}: {about_format:#?}", e.old);
        for ((line, msg), (want_line, want)) in about_format.iter().zip(e.warnings) {
            assert_eq!(line, want_line, "{}: {msg}", e.old);
            assert!(msg.starts_with(want), "{}: {msg}", e.old);
        }
        for w in &ws {
            assert_eq!(w.severity, Severity::Warning);
        }
        // The current form: no warning about its format, the same scenario.
        let current =
            parse_cases(&cur_path, &cur).unwrap_or_else(|d| panic!("{}: {}", e.current, d[0]));
        assert!(current[0].warnings.iter().all(|w| !w.message.contains("format")), "{}", e.current);
        let strip = |mut v: Vec<Scenario>| {
            v.iter_mut().for_each(|s| s.warnings.clear());
            format!("{v:#?}")
        };
        assert_eq!(strip(all), strip(current), "{} and {}", e.old, e.current);
        // --fix writes exactly the current form.
        let l = read(&Source::new(&old_path, &old)).unwrap();
        assert_eq!(fix(&old, &l), cur, "{} fixed is not {}", e.old, e.current);
        assert_eq!(fixed(&old), cur);
    }
}

/// The corpus README says where every file came from (and which lines were
/// added to it).
#[test]
fn the_corpus_readme_names_every_file() {
    let (_, readme) = corpus("README.md");
    for e in &CORPUS {
        assert!(readme.contains(&format!("| `{}` | `git show ", e.old)), "{}", e.old);
        let name = Path::new(e.old).file_name().unwrap().to_string_lossy();
        assert_eq!(e.current, format!("current/{name}"));
    }
}
