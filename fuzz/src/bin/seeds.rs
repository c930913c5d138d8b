//! Writes the fuzz targets' seeds from the tree: `seeds OUT_DIR` makes
//! `OUT_DIR/<target>/`, one file per seed, named by a hash of its bytes (the same
//! seed from two places is one file).
//!
//! - capture: every capture under `captures/` and `scenarios/` (pcap, pcapng);
//! - frame: each frame of those captures, under its own link type;
//! - filter: the display filters of the tests (`FILTERS`, `REFUSED` in
//!   `tests/tests/*.rs`), `-Y` filters of the docs, and every field name;
//! - scenario: every `*.toml` under `scenarios/` and `docs/`, and the ```` ```toml ````
//!   blocks of the docs and the README;
//! - fault_rule: every `rule = "…"` of the scenarios and docs, `--fault '…'` of the
//!   docs, the rule lines of the fault-rule docs, and the docs' `[[rule]]` files;
//! - profile: `profiles/*.toml`;
//! - handshake, message: made by `roce::inputs` with its fixed key.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use dissector::capture::Reader;
// libFuzzer's runtime answers the coverage hooks the fuzz build instruments this
// binary with too; without a sanitizer's runtime nothing else would.
use libfuzzer_sys as _;

fn main() {
    let out = PathBuf::from(std::env::args().nth(1).expect("usage: seeds OUT_DIR"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut seeds = Seeds { out, counts: Vec::new() };

    let mut captures = files(&root.join("captures"), &["pcap", "pcapng"]);
    captures.extend(files(&root.join("scenarios"), &["pcap", "pcapng"]));
    for c in &captures {
        let bytes = std::fs::read(c).expect("reading a capture");
        seeds.add("capture", &bytes);
        let Ok(mut r) = Reader::new(&bytes[..]) else { continue };
        while let Ok(Some(rec)) = r.next_packet() {
            if let Some(input) = roce::inputs::frame_seed(rec.link, rec.data) {
                seeds.add("frame", &input);
            }
        }
    }

    let mut texts = files(&root.join("docs"), &["md"]);
    texts.push(root.join("README.md"));
    let docs: Vec<String> = texts.iter().filter_map(|p| std::fs::read_to_string(p).ok()).collect();
    let tomls: Vec<PathBuf> = files(&root.join("scenarios"), &["toml"])
        .into_iter()
        .chain(files(&root.join("docs"), &["toml"]))
        .collect();
    let scenario_texts: Vec<String> =
        tomls.iter().filter_map(|p| std::fs::read_to_string(p).ok()).collect();

    for t in &scenario_texts {
        seeds.add("scenario", t.as_bytes());
    }
    for d in &docs {
        for (info, body) in blocks(d) {
            if info.starts_with("toml") {
                seeds.add("scenario", body.as_bytes());
                if body.contains("[[rule]]") {
                    seeds.add("fault_rule", body.as_bytes());
                }
            }
        }
    }

    for t in scenario_texts.iter().chain(&docs) {
        for line in t.lines() {
            if let Some(rule) = quoted_after(line.trim_start(), "rule = ") {
                seeds.add("fault_rule", rule.as_bytes());
            }
        }
    }
    let fault_doc = std::fs::read_to_string(root.join("lab/src/fault/mod.rs")).unwrap_or_default();
    for t in docs.iter().chain(std::iter::once(&fault_doc)) {
        for line in t.lines() {
            let line = line.trim_start().trim_start_matches("//!").trim();
            if let Some(at) = line.find("--fault ") {
                if let Some(rule) = quoted(&line[at + "--fault ".len()..]) {
                    seeds.add("fault_rule", rule.as_bytes());
                }
            }
            let first = line.split_whitespace().next().unwrap_or("");
            if ACTIONS.contains(&first) && line.contains('=') {
                // A rule, then (after two spaces) what it means.
                let rule = line.split("  ").next().unwrap_or(line);
                seeds.add("fault_rule", rule.as_bytes());
            }
        }
    }

    for name in ["filter_diff.rs", "fuzz.rs", "jobs.rs", "tshark_diff.rs", "snapshots.rs"] {
        let text = std::fs::read_to_string(root.join("tests/tests").join(name)).unwrap_or_default();
        for list in ["const FILTERS", "const REFUSED"] {
            let mut rest = &text[..];
            while let Some(at) = rest.find(list) {
                let body = &rest[at..];
                let end = body.find("\n];").unwrap_or(body.len());
                for s in literals(&body[..end]) {
                    seeds.add("filter", s.as_bytes());
                }
                rest = &body[end..];
            }
        }
    }
    for d in &docs {
        let mut rest = &d[..];
        while let Some(at) = rest.find("-Y ") {
            rest = &rest[at + 3..];
            if let Some(f) = quoted(rest) {
                seeds.add("filter", f.as_bytes());
            }
        }
    }
    for (_, name, _) in dissector::fields::Field::ALL {
        seeds.add("filter", name.as_bytes());
    }

    for p in files(&root.join("profiles"), &["toml"]) {
        seeds.add("profile", &std::fs::read(p).expect("reading a profile"));
    }
    for s in roce::inputs::handshake_seeds() {
        seeds.add("handshake", &s);
    }
    for s in roce::inputs::message_seeds() {
        seeds.add("message", &s);
    }

    for (target, n) in &seeds.counts {
        println!("{target:>10}: {n} seeds");
    }
}

/// Actions a fault rule starts with.
const ACTIONS: &[&str] =
    &["drop", "corrupt", "corrupt-icrc", "ce", "dup", "delay", "reorder", "respond"];

struct Seeds {
    out: PathBuf,
    counts: Vec<(String, usize)>,
}

impl Seeds {
    fn add(&mut self, target: &str, bytes: &[u8]) {
        let dir = self.out.join(target);
        std::fs::create_dir_all(&dir).expect("making a seed directory");
        let path = dir.join(format!("{:016x}", fnv(bytes)));
        if path.exists() {
            return;
        }
        std::fs::write(&path, bytes).expect("writing a seed");
        match self.counts.iter_mut().find(|(t, _)| t == target) {
            Some((_, n)) => *n += 1,
            None => self.counts.push((target.to_string(), 1)),
        }
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// Every file below `dir` with one of the extensions, sorted.
fn files(dir: &Path, exts: &[&str]) -> Vec<PathBuf> {
    fn walk(dir: &Path, exts: &[&str], out: &mut BTreeSet<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, exts, out);
            } else if p.extension().and_then(|x| x.to_str()).is_some_and(|x| exts.contains(&x)) {
                out.insert(p);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, exts, &mut out);
    out.into_iter().collect()
}

/// The fenced blocks of a Markdown text: info string and body.
fn blocks(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut open: Option<(String, String)> = None;
    for l in text.lines() {
        let t = l.trim_start();
        match &mut open {
            None => {
                if let Some(info) = t.strip_prefix("```") {
                    open = Some((info.trim().to_string(), String::new()));
                }
            }
            Some((_, body)) => {
                if t.starts_with("```") {
                    out.extend(open.take());
                } else {
                    body.push_str(l);
                    body.push('\n');
                }
            }
        }
    }
    out
}

/// The string quoted right after `prefix` at the start of `line`.
fn quoted_after<'a>(line: &'a str, prefix: &str) -> Option<&'a str> {
    quoted(line.strip_prefix(prefix)?)
}

/// The text of a `"…"` or `'…'` at the start of `s` (no escapes).
fn quoted(s: &str) -> Option<&str> {
    let q = s.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let body = &s[1..];
    body.find(q).map(|end| &body[..end])
}

/// The Rust string literals in `code` (`"…"` with escapes, `r"…"`, `r#"…"#`).
fn literals(code: &str) -> Vec<String> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            i += code[i..].find('\n').unwrap_or(code.len() - i);
            continue;
        }
        if b[i] == b'r' && matches!(b.get(i + 1), Some(b'"' | b'#')) {
            let hashes = code[i + 1..].bytes().take_while(|&c| c == b'#').count();
            let start = i + 1 + hashes + 1;
            let close = format!("\"{}", "#".repeat(hashes));
            if let Some(end) = code.get(start..).and_then(|r| r.find(&close)) {
                out.push(code[start..start + end].to_string());
                i = start + end + close.len();
                continue;
            }
        }
        if b[i] == b'"' {
            let mut s = String::new();
            let mut chars = code[i + 1..].char_indices();
            let mut end = None;
            while let Some((j, c)) = chars.next() {
                match c {
                    '"' => {
                        end = Some(i + 1 + j + 1);
                        break;
                    }
                    '\\' => match chars.next().map(|(_, e)| e) {
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        Some(e) => s.push(e),
                        None => {}
                    },
                    c => s.push(c),
                }
            }
            out.push(s);
            i = end.unwrap_or(b.len());
            continue;
        }
        i += 1;
    }
    out
}
