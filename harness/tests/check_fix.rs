//! `roce check` on a file of an older scenario format, and `roce check --fix`
//! through the real binary: warnings at file:line:col, the file rewritten in the
//! current format with its comments kept, `--dry-run` printing the diff and
//! writing nothing, a file with problems the fix cannot mend left as it is with
//! exit 2. No lab needed.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ROCE: &str = env!("CARGO_BIN_EXE_roce");

fn text(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn roce(args: &[&str], files: &[&Path]) -> Output {
    Command::new(ROCE).args(args).args(files).output().unwrap()
}

/// The issue's file: a `sleep` step with `on`, which format 1 accepted.
const OLD: &str = r#"# The regression suite's own comment.
name = "sleep with an endpoint"
spec = ["resp.dup.atomic-replays-saved-result"]

[endpoints.a]
[endpoints.b]

[[step]]
# Wait for the peer.
on = "b"   # who sleeps (format 1 never read it)
op = "sleep"
ms = 300
"#;

const NEW: &str = r#"# The regression suite's own comment.
format = 3
name = "sleep with an endpoint"
spec = ["resp.dup.atomic-replays-saved-result"]

[endpoints.a]
[endpoints.b]

[[step]]
# Wait for the peer.
op = "sleep"
ms = 300
"#;

fn dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("roce-check-fix-{name}-")).tempdir().unwrap()
}

fn put(d: &Path, name: &str, body: &str) -> PathBuf {
    let p = d.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

/// The names in `d`: nothing left behind by a write.
fn names(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn an_old_file_loads_with_a_warning_and_fix_writes_the_current_form() {
    let d = dir("old");
    let f = put(d.path(), "sleep.toml", OLD);
    let o = roce(&["check"], &[&f]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("warning: `on` of a `sleep` step: ignored since format 2 (a `sleep` pauses the whole scenario"),
        "{}",
        text(&o)
    );
    assert!(err.contains("sleep.toml:10:1\n"), "{}", text(&o));
    assert!(!err.contains("did you mean"), "{}", text(&o));

    let o = roce(&["check", "--fix"], &[&f]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("fixed  ") && out.contains("(format 1 → 3)"), "{}", text(&o));
    assert!(out.contains("10:1  `on` of a `sleep` step: removed"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&f).unwrap(), NEW);
    assert_eq!(names(d.path()), ["sleep.toml"]);

    // Fixed: no warning, and fixing again changes nothing.
    let o = roce(&["check"], &[&f]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(o.stderr.is_empty(), "{}", text(&o));
    let o = roce(&["check", "--fix"], &[&f]);
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("ok     "), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&f).unwrap(), NEW);
}

#[test]
fn dry_run_prints_the_diff_and_writes_nothing() {
    let d = dir("dry");
    let f = put(d.path(), "sleep.toml", OLD);
    let o = roce(&["check", "--fix", "--dry-run"], &[&f]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let diff = String::from_utf8_lossy(&o.stdout);
    let name = f.display().to_string();
    assert!(diff.starts_with(&format!("--- {name}\n+++ {name}\n@@ ")), "{}", text(&o));
    assert!(diff.contains("\n+format = 3\n"), "{diff}");
    assert!(diff.contains("\n-on = \"b\"   # who sleeps (format 1 never read it)\n"), "{diff}");
    assert!(diff.contains("\n # Wait for the peer.\n"), "a comment kept is context: {diff}");
    assert_eq!(
        diff.lines().filter(|l| l.starts_with('+') || l.starts_with('-')).count(),
        4,
        "{diff}"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("would fix  "), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&f).unwrap(), OLD);
    assert_eq!(names(d.path()), ["sleep.toml"]);
    // --dry-run alone is a usage error.
    let o = roce(&["check", "--dry-run"], &[&f]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn a_file_fix_cannot_mend_is_left_as_it_is_and_the_rest_is_fixed() {
    let d = dir("bad");
    let bad_text =
        OLD.replace("ms = 300", "ms = 300\n\n[[step]]\nop = \"send\"\non = \"a\"\nqp = \"nope\"");
    let bad = put(d.path(), "bad.toml", &bad_text);
    let good = put(d.path(), "good.toml", OLD);
    let o = roce(&["check", "--fix"], &[d.path()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.toml:17:") && err.contains("no QP `nope`"), "{}", text(&o));
    assert!(err.contains(&format!("left as it is: {}", bad.display())), "{}", text(&o));
    assert!(err.contains("1 of 2 scenario files have problems --fix cannot mend"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&bad).unwrap(), bad_text);
    assert_eq!(std::fs::read_to_string(&good).unwrap(), NEW);
    assert_eq!(names(d.path()), ["bad.toml", "good.toml"]);
    // A file that is not TOML, and a format this roce does not know.
    let junk = put(d.path(), "bad.toml", "name = \n");
    let o = roce(&["check", "--fix"], &[&junk]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("TOML syntax"), "{}", text(&o));
    let future = put(d.path(), "bad.toml", &format!("format = 9\n{OLD}"));
    for args in [&["check"][..], &["check", "--fix"]] {
        let o = roce(args, &[&future]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("format 9 is newer than this roce reads (formats 1 to 3)"),
            "{}",
            text(&o)
        );
        assert!(err.contains("bad.toml:1:10"), "{}", text(&o));
    }
    assert_eq!(std::fs::read_to_string(&future).unwrap(), format!("format = 9\n{OLD}"));
}

/// A file that says `format = 3` with a key format 2 dropped is refused by
/// `roce check` (the error says it was dropped), and fixed by --fix.
#[test]
fn a_dropped_key_in_a_current_file_is_an_error_that_fix_mends() {
    let d = dir("current");
    let f = put(d.path(), "x.toml", &NEW.replace("op = \"sleep\"", "on = \"b\"\nop = \"sleep\""));
    let o = roce(&["check"], &[&f]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "error: `on` of a `sleep` step: dropped in format 2, and this file says `format = 3`"
        ),
        "{}",
        text(&o)
    );
    assert!(!err.contains("did you mean"), "{}", text(&o));
    let o = roce(&["check", "--fix"], &[&f]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&f).unwrap(), NEW);
}

/// `roce schema` has the `format` key.
#[test]
fn the_schema_says_format() {
    let o = Command::new(ROCE).arg("schema").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = &v["properties"]["format"];
    assert_eq!(f["maximum"], 3, "{f}");
    assert!(f["description"].as_str().unwrap_or("").contains("current one is 3"), "{f}");
}
