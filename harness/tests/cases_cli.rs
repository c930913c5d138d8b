//! Parameterised scenarios through the real binary: `roce check` says how many cases
//! a file expands to and names them, `roce run --list` prints the names without
//! running, `--case` picks by substring or glob, a problem inside a case points at
//! the file and names the case. No lab needed.
use std::path::Path;
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

const FILE: &str = r#"name = "MR access"
spec = ["mr.access.remote-write-denied"]
[endpoints.a]
[endpoints.b]
[[qp]]
name = "q"
type = "rc"
between = ["b", "a"]
[[mr]]
name = "src"
on = "a"
size = 16
[[mr]]
name = "target"
on = "b"
size = 16
access = "${access}"
[[step]]
on = "a"
op = "${op}"
qp = "q"
wr_id = 1
sge = [{ mr = "src" }]
remote = { mr = "target" }
[[expect.completion]]
on = "a"
wr_id = 1
status = "IBV_WC_REM_ACCESS_ERR"

[cases]
access = [["local_write"], ["local_write", "remote_write"]]
op = ["write", "read"]
"#;

fn roce(args: &[&str], file: &Path) -> Output {
    Command::new(ROCE).args(args).arg(file).output().unwrap()
}

#[test]
fn check_counts_the_cases_and_case_selects_them() {
    let dir = std::env::temp_dir().join(format!("roce-cases-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("access.toml");
    std::fs::write(&f, FILE).unwrap();

    let o = roce(&["check"], &f);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("access.toml  4 cases"), "{t}");
    for name in [
        "MR access [access=local_write, op=write]",
        "MR access [access=local_write, op=read]",
        "MR access [access=local_write+remote_write, op=write]",
        "MR access [access=local_write+remote_write, op=read]",
    ] {
        assert!(t.contains(&format!("      {name} (1 step, 1 expectation)")), "{name}: {t}");
    }

    let list = |extra: &[&str]| {
        let mut args = vec!["run", "--list"];
        args.extend_from_slice(extra);
        let o = roce(&args, &f);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect::<Vec<_>>()
    };
    assert_eq!(list(&[]).len(), 4);
    // A substring, letter case ignored.
    assert_eq!(
        list(&["--case", "OP=READ"]),
        [
            "MR access [access=local_write, op=read]",
            "MR access [access=local_write+remote_write, op=read]"
        ]
    );
    // A glob over the whole name; several patterns: any.
    assert_eq!(
        list(&["--case", "*[access=local_write, *"]),
        ["MR access [access=local_write, op=write]", "MR access [access=local_write, op=read]"]
    );
    assert_eq!(
        list(&["--case", "*remote_write, op=write]", "--case", "*local_write, op=read]"]),
        [
            "MR access [access=local_write, op=read]",
            "MR access [access=local_write+remote_write, op=write]"
        ]
    );
    // `roce suite` selects the same way.
    let o = Command::new(ROCE)
        .args(["suite", "--list", "--case", "op=write"])
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 2, "{}", text(&o));
    // Nothing matching: refused, saying how to see the names.
    let o = roce(&["run", "--list", "--case", "op=atomic"], &f);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("matches none of the 4 scenarios and cases") && t.contains("--list"), "{t}");

    // A bad value in one case: at the placeholder's place in the file, that case named.
    std::fs::write(&f, FILE.replace(r#"op = ["write", "read"]"#, r#"op = ["write", "raed"]"#))
        .unwrap();
    let o = roce(&["check"], &f);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("unknown variant `raed`"), "{t}");
    assert!(
        t.contains(
            "(in cases `access=local_write, op=raed`, `access=local_write+remote_write, op=raed`)"
        ),
        "{t}"
    );
    assert!(t.contains("access.toml:20:6"), "{t}");
    assert!(t.contains("did you mean `read`?"), "{t}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_shipped_matrix_checks() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let o = roce(&["check"], &repo.join("scenarios/conformance/mr_access_write.toml"));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("4 cases") && t.contains("MR access: WRITE [remote_write]"), "{t}");
}
