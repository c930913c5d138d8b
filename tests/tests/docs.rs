//! The book (`docs/`) and the README, tested like code:
//!
//! - the generated reference pages (`docs/src/reference/…`, see `docs/pages.rs`) are
//!   what the tool prints now: a stale page fails, and `ROCE_BLESS=1` rewrites it;
//! - every ```` ```toml ```` block is a whole scenario that `roce check` accepts. A block
//!   that is only part of one is marked ```` ```toml,fragment ```` and must still be
//!   valid TOML;
//! - every ```` ```console ```` block is a transcript: each `$ roce …` line is run from
//!   the repository's root and what it printed (standard output, then standard error)
//!   must be the lines below it, where a line `…` stands for any number of lines;
//! - `mdbook build docs` succeeds (ignored unless mdbook is installed).
//!
//! The conventions are written for the reader in `docs/src/reference/doc-tests.md`.
use std::path::{Path, PathBuf};

use roce_tests::{roce, root, scratch};

#[path = "docs/pages.rs"]
mod pages;

/// Every Markdown file of the book and the README, sorted.
fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut v = vec![root().join("README.md")];
    walk(&root().join("docs/src"), &mut v);
    v.sort();
    v
}

/// A fenced code block: its info string, its first line's number (1-based) and body.
#[derive(Debug)]
struct Block {
    info: String,
    line: usize,
    body: String,
}

/// The fenced (```` ``` ````) blocks of a Markdown text, in order.
fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, l) in text.lines().enumerate() {
        let t = l.trim_start();
        match &mut open {
            None => {
                if let Some(info) = t.strip_prefix("```") {
                    open = Some(Block {
                        info: info.trim().to_string(),
                        line: i + 2,
                        body: String::new(),
                    });
                }
            }
            Some(b) => {
                if t.starts_with("```") {
                    out.extend(open.take());
                } else {
                    b.body.push_str(l);
                    b.body.push('\n');
                }
            }
        }
    }
    assert!(open.is_none(), "an unclosed code block");
    out
}

/// The repository's root as the working directory: the examples' paths are relative
/// to it. Every test of this file sets the same directory, so running side by side
/// is harmless.
fn at_root() {
    std::env::set_current_dir(root()).expect("cd to the repository root");
}

#[test]
fn generated_pages_are_current() {
    at_root();
    let bless = std::env::var_os("ROCE_BLESS").is_some_and(|v| v != "0");
    let mut stale = Vec::new();
    for page in pages::all() {
        let path = root().join("docs/src").join(page.path);
        let now = std::fs::read_to_string(&path).unwrap_or_default();
        if now != page.text {
            if bless {
                std::fs::write(&path, &page.text).expect("write the page");
            } else {
                stale.push(page.path);
            }
        }
    }
    assert!(
        stale.is_empty(),
        "generated pages differ from what the tool prints now: {stale:?}\n\
         regenerate them with `ROCE_BLESS=1 cargo test -p roce-tests --test docs` and review the diff"
    );
}

/// The generated pages say what they must: the names a newcomer looked for.
#[test]
fn generated_pages_name_what_newcomers_looked_for() {
    let names = pages::names();
    for want in [
        "| `0x1c` | RC FLUSH | `FLUSH` |",
        "| `0x1d` | RC ATOMIC WRITE | `ATOMIC WRITE` |",
        "| `0x17` | RC SEND Only with Invalidate | `SEND Only with Invalidate` |",
        "`NAK Remote Access Error`",
        "| `psn_sequence_error` |",
    ] {
        assert!(names.contains(want), "names.md lacks {want:?}");
    }
    let format = pages::scenario_format();
    for want in ["### op = \"atomic_write\"", "### op = \"flush\"", "`flush_global`", "`count`"] {
        assert!(format.contains(want), "scenario-format.md lacks {want:?}");
    }
}

/// The fault-rule page's `op=` names are the ones the rule parser takes (through
/// `roce check`, which parses a scenario's `[[fault]]` rules with it), and the
/// forms it says are refused are refused.
#[test]
fn fault_rule_op_names_are_what_the_parser_takes() {
    at_root();
    let dir = scratch();
    let scenario = |ops: &[String]| {
        let mut text = String::from("name = \"op names\"\n\n[endpoints.a]\n[endpoints.b]\n");
        for op in ops {
            text.push_str(&format!("\n[[fault]]\nrule = \"drop op={op}\"\n"));
        }
        text
    };
    let names: Vec<String> = pages::fault_ops()
        .into_iter()
        .flat_map(|r| r.any.into_iter().chain(r.one.into_iter().map(|(n, _)| n)))
        .chain(["0x11", "17", "SEND_ONLY", "UD-Send-Only"].map(String::from))
        .collect();
    assert!(names.len() > 100, "{names:?}");
    let file = dir.join("op_names.toml");
    std::fs::write(&file, scenario(&names)).expect("write");
    let r = roce(&["check", file.to_str().expect("utf-8 path")]);
    assert_eq!(r.code, 0, "{}{}", r.out, r.err);
    for refused in ["rc-write-only", "rc-ack", "rc-atomic-ack"] {
        std::fs::write(&file, scenario(&[refused.to_string()])).expect("write");
        let r = roce(&["check", file.to_str().expect("utf-8 path")]);
        let said = format!("{}{}", r.out, r.err);
        assert!(r.code != 0 && said.contains("unknown opcode"), "{refused}: {said}");
    }
}

/// The first scenario of the guide starts with the current `format`, as
/// `roce schema` says it.
#[test]
fn the_first_example_says_the_current_format() {
    let schema = pages::scenario_format();
    let current = schema
        .split("the current one is ")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .expect("the schema names the current format");
    let text = std::fs::read_to_string(root().join("docs/src/guide/first-scenario.md"))
        .expect("first-scenario.md");
    let first = blocks(&text).into_iter().find(|b| b.info == "toml").expect("a toml block");
    let line = first.body.lines().next().unwrap_or_default();
    assert_eq!(
        line.split('#').next().map(str::trim),
        Some(format!("format = {current}").as_str()),
        "the first example starts with `format = {current}`:\n{}",
        first.body
    );
}

#[test]
fn block_parser_reads_info_lines_and_bodies() {
    let b = blocks("text\n```toml,fragment\na = 1\n```\n\n```console\n$ roce x\nout\n```\n");
    assert_eq!(b.len(), 2);
    assert_eq!(
        (b[0].info.as_str(), b[0].line, b[0].body.as_str()),
        ("toml,fragment", 3, "a = 1\n")
    );
    assert_eq!((b[1].info.as_str(), b[1].body.as_str()), ("console", "$ roce x\nout\n"));
}

/// Every ```toml block of the book and the README is a scenario `roce check` accepts;
/// a ```toml,fragment block is at least valid TOML. Fragments stay few.
#[test]
fn every_toml_example_checks() {
    at_root();
    let dir = scratch();
    let (mut whole, mut fragments) = (0, 0);
    let mut failures = Vec::new();
    for md in markdown_files() {
        let text = std::fs::read_to_string(&md).expect("read");
        let rel = md.strip_prefix(root()).unwrap_or(&md).display().to_string();
        for b in blocks(&text) {
            let mut words = b.info.split(',').map(str::trim);
            if words.next() != Some("toml") {
                continue;
            }
            let attrs: Vec<&str> = words.collect();
            // A fixture the examples after it `use`: written where they find it,
            // checked through them.
            if let Some(path) = attrs.iter().find_map(|a| a.strip_prefix("file=")) {
                let file = dir.join(path);
                std::fs::create_dir_all(file.parent().expect("a parent")).expect("mkdir");
                std::fs::write(&file, &b.body).expect("write");
                continue;
            }
            if attrs.contains(&"fragment") {
                fragments += 1;
                if let Err(e) = b.body.parse::<toml::Table>() {
                    failures.push(format!("{rel}:{}: a fragment that is not TOML: {e}", b.line));
                }
                continue;
            }
            whole += 1;
            let file = dir.join(format!("{}-{}.toml", rel.replace('/', "_"), b.line));
            std::fs::write(&file, &b.body).expect("write");
            let r = roce(&["check", file.to_str().expect("utf-8 path")]);
            if r.code != 0 {
                failures.push(format!(
                    "{rel}:{}: roce check exit {}:\n{}{}",
                    b.line, r.code, r.out, r.err
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(whole >= 3, "only {whole} whole scenarios in the docs: the examples went missing?");
    assert!(
        fragments <= whole,
        "{fragments} fragments against {whole} whole scenarios: keep fragments few"
    );
}

/// Splits a command line as a POSIX shell would for the quoting the docs use:
/// words, '…' and "…" (with \" inside).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    cur.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => cur.extend(chars.next()),
                        c => cur.push(c),
                    }
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

#[test]
fn shell_words_split_as_the_shell_does() {
    assert_eq!(
        shell_words(r#"roce decode -Y "a == \"x\"" 'b c' d"#),
        ["roce", "decode", "-Y", "a == \"x\"", "b c", "d"]
    );
}

/// Whether `got` is what `want` shows, where a `…` line of `want` stands for any
/// number of lines (none included).
fn matches_shown(want: &[&str], got: &[&str]) -> bool {
    match want.split_first() {
        None => got.is_empty(),
        Some((&"…", rest)) => (0..=got.len()).any(|i| matches_shown(rest, &got[i..])),
        Some((w, rest)) => {
            got.first().is_some_and(|g| g.trim_end() == w.trim_end())
                && matches_shown(rest, &got[1..])
        }
    }
}

#[test]
fn elisions_match_any_run_of_lines() {
    assert!(matches_shown(&["a", "…", "d"], &["a", "b", "c", "d"]));
    assert!(matches_shown(&["a", "…", "b"], &["a", "b"]));
    assert!(!matches_shown(&["a", "…", "d"], &["a", "b", "c"]));
    assert!(!matches_shown(&["a", "b"], &["a", "b", "c"]));
}

/// Commands a transcript may run: those that need no lab, no device and no root.
const RUNNABLE: [&str; 6] = ["decode", "flows", "check", "coverage", "schema", "run"];

/// Every ```console transcript: each `$ roce …` is run and prints what is shown.
#[test]
fn every_console_example_prints_what_it_shows() {
    at_root();
    let mut failures = Vec::new();
    let mut ran = 0;
    for md in markdown_files() {
        let text = std::fs::read_to_string(&md).expect("read");
        let rel = md.strip_prefix(root()).unwrap_or(&md).display().to_string();
        for b in blocks(&text).into_iter().filter(|b| b.info == "console") {
            // Commands and the lines each is shown to print.
            let mut cmds: Vec<(usize, String, Vec<&str>)> = Vec::new();
            for (i, l) in b.body.lines().enumerate() {
                match l.strip_prefix("$ ") {
                    Some(c) => cmds.push((b.line + i, c.to_string(), Vec::new())),
                    None => match cmds.last_mut() {
                        Some(c) => c.2.push(l),
                        None => failures.push(format!(
                            "{rel}:{}: a console block must begin with `$ `",
                            b.line + i
                        )),
                    },
                }
            }
            for (line, cmd, shown) in cmds {
                let words = shell_words(&cmd);
                let ok_cmd = words.first().map(String::as_str) == Some("roce")
                    && words.get(1).is_some_and(|w| RUNNABLE.contains(&w.as_str()))
                    && (words[1] != "run" || words.iter().any(|w| w == "--list"));
                if !ok_cmd {
                    failures.push(format!("{rel}:{line}: `{cmd}`: a console example runs only roce {RUNNABLE:?} (run with --list); show other commands in ```sh or ```text"));
                    continue;
                }
                ran += 1;
                let r = roce(&words[1..]);
                let printed = format!("{}{}", r.out, r.err);
                let got: Vec<&str> = printed.lines().collect();
                // A trailing blank line of the output is not shown.
                let got = match got.split_last() {
                    Some((l, rest)) if l.trim().is_empty() => rest.to_vec(),
                    _ => got,
                };
                if !matches_shown(&shown, &got) {
                    failures.push(format!(
                        "{rel}:{line}: `{cmd}` (exit {}) printed:\n{printed}\n— the docs show:\n{}",
                        r.code,
                        shown.join("\n")
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran >= 5, "only {ran} console examples ran: the transcripts went missing?");
}

/// Every relative link of the README and the book to a file of the repository
/// (`[text](path)`, the anchor aside) names a file that is there.
#[test]
fn relative_links_name_files_that_exist() {
    let mut broken = Vec::new();
    let mut seen = 0;
    for md in markdown_files() {
        let text = std::fs::read_to_string(&md).expect("read");
        let dir = md.parent().expect("a dir");
        for target in text.split("](").skip(1).filter_map(|s| s.split(')').next()) {
            let file = target.split('#').next().unwrap_or(target);
            if file.is_empty() || file.contains("://") || file.contains(' ') {
                continue;
            }
            seen += 1;
            if !dir.join(file).exists() {
                broken.push(format!(
                    "{}: {target}",
                    md.strip_prefix(root()).unwrap_or(&md).display()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "links to nothing: {broken:#?}");
    assert!(seen >= 30, "only {seen} links followed");
}

/// `mdbook build docs` succeeds and writes every chapter of SUMMARY.md; no link
/// between chapters points at a page that is not there.
#[test]
#[ignore = "needs mdbook: bash scripts/setup.sh --test"]
fn the_book_builds() {
    let out = scratch();
    let dest = out.join("book");
    let r = std::process::Command::new("mdbook")
        .arg("build")
        .arg(root().join("docs"))
        .arg("--dest-dir")
        .arg(&dest)
        .output()
        .expect("mdbook on PATH (bash scripts/setup.sh --test installs it)");
    let log =
        format!("{}{}", String::from_utf8_lossy(&r.stdout), String::from_utf8_lossy(&r.stderr));
    assert!(r.status.success(), "mdbook build failed:\n{log}");
    let summary = std::fs::read_to_string(root().join("docs/src/SUMMARY.md")).expect("SUMMARY.md");
    let mut chapters = 0;
    for target in summary.split("](").skip(1).filter_map(|s| s.split(')').next()) {
        let html = dest.join(target.replace(".md", ".html"));
        assert!(html.is_file(), "{} was not built", html.display());
        chapters += 1;
    }
    assert!(chapters >= 20, "{chapters} chapters");
    // Links between pages: every relative `href="….html"` resolves.
    let mut broken = Vec::new();
    for md in markdown_files().iter().filter(|p| p.starts_with(root().join("docs/src"))) {
        let rel = md.strip_prefix(root().join("docs/src")).expect("under src");
        let html_path = dest.join(rel.with_extension("html"));
        let Ok(html) = std::fs::read_to_string(&html_path) else { continue };
        for href in html.split("href=\"").skip(1).filter_map(|s| s.split('"').next()) {
            if href.contains("://") || href.starts_with('#') || href.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = href.split_once('#').unwrap_or((href, ""));
            if file.ends_with(".html") {
                let p = html_path.parent().expect("a dir").join(file);
                match std::fs::read_to_string(&p) {
                    Err(_) => broken.push(format!("{}: {href}", rel.display())),
                    Ok(target) => {
                        if !anchor.is_empty() && !target.contains(&format!("id=\"{anchor}\"")) {
                            broken.push(format!("{}: {href} (no such heading)", rel.display()));
                        }
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:?}");
}
