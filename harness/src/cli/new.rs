//! `roce new`: a new scenario file in the current format, from a commented
//! template (a WRITE, a SEND, a READ, an atomic, a UD SEND, a fault on the wire)
//! or from an existing scenario, checked before it is written.
//!
//! Owns: `roce new`'s options, the built-in templates (`harness/templates/`) and
//! their output. Imports: `crate::scenario` (checking the new text, an older
//! format brought current), `super::exit`, `super::write_file`; `toml_edit`.
use std::io::Write;
use std::path::{Component, Path, PathBuf};

use anyhow::anyhow;

use super::exit::{help, CommandResult, Exit, Failure};
use crate::scenario::{check, diag::Source, legacy};

#[derive(Debug, clap::Args)]
#[command(after_help = help(&[(Exit::Ok, "the file was written, and it passes `roce check`"), (Exit::BadInput, "the file exists already, the template is none of the built-in ones and no scenario file, or the copy would not pass `roce check` (nothing was written)"), (Exit::Setup, "the file could not be written")]))]
pub struct NewArgs {
    /// The file to write (`.toml` is added when it has no extension); missing
    /// directories are made
    #[arg(value_name = "FILE", required_unless_present = "list")]
    pub path: Option<PathBuf>,
    /// What to start from: a built-in template (`roce new --list`), or an existing
    /// scenario file to copy (its fixtures' paths made relative to the new file)
    #[arg(long, value_name = "TEMPLATE|SCENARIO", default_value = "write")]
    pub from: String,
    /// The scenario's name (default: the file's, `_` and `-` read as spaces)
    #[arg(long)]
    pub name: Option<String>,
    /// List the built-in templates
    #[arg(long, conflicts_with_all = ["path", "name"])]
    pub list: bool,
}

/// The built-in templates: name, what it shows, text (its `name` a placeholder).
const TEMPLATES: [(&str, &str, &str); 6] = [
    (
        "write",
        "an RC RDMA WRITE: completion, wire and memory",
        include_str!("../../templates/write.toml"),
    ),
    ("send", "an RC SEND into a posted receive", include_str!("../../templates/send.toml")),
    (
        "read",
        "an RC RDMA READ and the data it brings back",
        include_str!("../../templates/read.toml"),
    ),
    ("atomic", "an RC FetchAdd on a remote word", include_str!("../../templates/atomic.toml")),
    ("ud", "a UD SEND, its GRH area and no ACK", include_str!("../../templates/ud.toml")),
    (
        "fault",
        "the lab's switch drops a WRITE; the requester resends it",
        include_str!("../../templates/fault.toml"),
    ),
];

pub(super) fn run(a: NewArgs, out: &mut dyn Write, err: &mut dyn Write) -> CommandResult {
    if a.list {
        for (name, what, _) in TEMPLATES {
            writeln!(out, "{name:<8}{what}")?;
        }
        return Ok(Exit::Ok);
    }
    let Some(path) = a.path else {
        return Err(Failure::input(anyhow!("roce new: which file? `roce new FILE`")));
    };
    let path = if path.extension().is_none() { path.with_extension("toml") } else { path };
    if path.exists() {
        return Err(Failure::input(anyhow!(
            "roce new: {} exists already; roce new writes a new file, never over one\nhint: name another file, or edit this one",
            path.display()
        )));
    }
    let (text, from) = source(&a.from, &path)?;
    let name = a.name.unwrap_or_else(|| name_of(&path));
    let text = named(&text, &name).map_err(Failure::input)?;
    // Checked as the file it will be, its fixtures found from where it will be.
    let all = match check::parse_cases(&path, &text) {
        Ok(all) => all,
        Err(problems) => {
            for p in &problems {
                writeln!(err, "{p}\n")?;
            }
            return Err(Failure::input(anyhow!(
                "roce new: the new scenario would not pass `roce check` (above); nothing was written"
            )));
        }
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::setup(anyhow!("roce new: cannot make {}: {e}", dir.display())))?;
    }
    super::write_file(&path, |w| w.write_all(text.as_bytes()))
        .map_err(|e| Failure::setup(e.context(format!("roce new: writing {}", path.display()))))?;
    let shape = all.first().map_or(String::new(), |sc| format!(" ({})", sc.shape()));
    writeln!(out, "wrote {} from {from}: \"{name}\"{shape}", path.display())?;
    writeln!(
        out,
        "next: edit it; `roce check {0}` says what is wrong at file:line:col, `roce run {0}` runs it in the lab",
        path.display()
    )?;
    Ok(Exit::Ok)
}

/// The text to start from and how to say where it came from: a template's, or a
/// scenario file's in the current format with its fixtures' paths made relative
/// to `to`.
fn source(from: &str, to: &Path) -> Result<(String, String), Failure> {
    if let Some((name, _, text)) = TEMPLATES.iter().find(|(n, _, _)| *n == from) {
        return Ok((text.to_string(), format!("the `{name}` template")));
    }
    let file = Path::new(from);
    if !file.is_file() {
        let names: Vec<&str> = TEMPLATES.iter().map(|(n, _, _)| *n).collect();
        return Err(Failure::input(anyhow!(
            "roce new --from {from}: no template of that name, and no such scenario file\nhint: the templates are {} (`roce new --list`); or give a scenario file to copy",
            names.join(", ")
        )));
    }
    let text = std::fs::read_to_string(file)
        .map_err(|e| Failure::input(anyhow!("roce new --from {from}: cannot read it: {e}")))?;
    let src = Source::new(file, &text);
    let old = legacy::read(&src).map_err(|ds| {
        Failure::input(anyhow!(
            "roce new --from {from}: {}",
            ds.first().map_or_else(|| "not a scenario".to_string(), ToString::to_string)
        ))
    })?;
    let current = if old.is_current() { text.clone() } else { legacy::fix(&text, &old) };
    let rebased = rebase_uses(&current, file, to).map_err(Failure::input)?;
    Ok((rebased, file.display().to_string()))
}

/// `text` with its top-level `name` set to `name` (comments and layout kept).
fn named(text: &str, name: &str) -> anyhow::Result<String> {
    let mut doc: toml_edit::DocumentMut =
        text.parse().map_err(|e| anyhow!("roce new: the text to start from is not TOML: {e}"))?;
    let decor = doc.get("name").and_then(|i| i.as_value()).map(|v| v.decor().clone());
    let mut value = toml_edit::Value::from(name);
    if let Some(d) = decor {
        *value.decor_mut() = d;
    }
    doc["name"] = toml_edit::Item::Value(value);
    Ok(doc.to_string())
}

/// A scenario's `use` paths, written relative to `from`'s directory, rewritten
/// relative to `to`'s.
fn rebase_uses(text: &str, from: &Path, to: &Path) -> anyhow::Result<String> {
    let mut doc: toml_edit::DocumentMut =
        text.parse().map_err(|e| anyhow!("roce new: the scenario to copy is not TOML: {e}"))?;
    let Some(list) = doc.get_mut("use").and_then(|i| i.as_array_mut()) else {
        return Ok(text.to_string());
    };
    let from_dir = absolute(from.parent().unwrap_or(Path::new("")))?;
    let to_dir = absolute(to.parent().unwrap_or(Path::new("")))?;
    for v in list.iter_mut() {
        if let Some(s) = v.as_str() {
            let target = normal(&from_dir.join(s));
            let rel = relative(&target, &to_dir);
            let decor = v.decor().clone();
            *v = toml_edit::Value::from(rel.to_string_lossy().into_owned());
            *v.decor_mut() = decor;
        }
    }
    Ok(doc.to_string())
}

/// `p` made absolute from the current directory, `.` and `..` resolved by name.
fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    let p = if p.as_os_str().is_empty() { Path::new(".") } else { p };
    Ok(normal(&std::path::absolute(p)?))
}

/// `p` with `.` left out and each `..` taking the name before it away.
fn normal(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// `target` as a path relative to the directory `dir` (both absolute, normal).
fn relative(target: &Path, dir: &Path) -> PathBuf {
    let t: Vec<Component> = target.components().collect();
    let d: Vec<Component> = dir.components().collect();
    let common = t.iter().zip(&d).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..d.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    out
}

/// The scenario name a file's name gives: `rnr_after_reset.toml` → "rnr after reset".
fn name_of(path: &Path) -> String {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let words: Vec<&str> = stem.split(['_', '-', ' ']).filter(|w| !w.is_empty()).collect();
    if words.is_empty() {
        "new scenario".into()
    } else {
        words.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_checks_under_any_name() {
        for (name, _, text) in TEMPLATES {
            let t = named(text, "a \"quoted\" name").unwrap();
            assert!(t.contains(&format!("format = {}", legacy::CURRENT)), "{name}");
            let all = check::parse_cases(Path::new("x.toml"), &t)
                .unwrap_or_else(|d| panic!("{name}: {}", d[0]));
            assert_eq!(all[0].name, "a \"quoted\" name");
            assert!(all[0].warnings.is_empty(), "{name}: {:?}", all[0].warnings);
        }
    }

    #[test]
    fn paths_relative_to_the_new_file() {
        assert_eq!(
            relative(Path::new("/s/fixtures/pair.toml"), Path::new("/s/mine/deep")),
            Path::new("../../fixtures/pair.toml")
        );
        assert_eq!(normal(Path::new("/s/a/../fixtures/./p.toml")), Path::new("/s/fixtures/p.toml"));
        let t = "use = [\"../fixtures/p.toml\"] # shared\nname = \"x\"\n";
        let r = rebase_uses(t, Path::new("/s/conf/a.toml"), Path::new("/s/b.toml")).unwrap();
        assert_eq!(r, "use = [\"fixtures/p.toml\"] # shared\nname = \"x\"\n");
        assert_eq!(name_of(Path::new("dir/rnr_after-reset.toml")), "rnr after reset");
    }
}
