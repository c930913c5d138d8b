//! `roce snapshots`: the changed wires a run left for review (`NAME.wire.new`
//! beside `NAME.wire` in a snapshot directory), listed, reviewed one by one
//! as `cargo insta review` does, or taken or thrown away all at once.
//!
//! Owns: `roce snapshots`' options and its prompt. Imports: the snapshot
//! store's pending changes (`crate::results::snapshots`), `super::exit`.
use std::io::{BufRead, Write};
use std::path::PathBuf;

use anyhow::anyhow;
use clap::{Args, Subcommand};

use super::exit::{help, CommandResult, Exit, Failure};
use crate::results::snapshots::{Change, Pending};

#[derive(Debug, Args)]
pub struct SnapshotsArgs {
    #[command(subcommand)]
    pub command: SnapshotsCommand,
}

#[derive(Debug, Subcommand)]
pub enum SnapshotsCommand {
    /// List the changed wires waiting for review, with how many lines differ.
    #[command(after_help = help(&[(Exit::Ok, "none is waiting"), (Exit::Failed, "some are waiting"), (Exit::BadInput, "DIR is not a directory")]))]
    List(Dir),
    /// Show each changed wire's diff and ask what to do with it: accept, reject,
    /// skip or quit (one answer per line on stdin: `a`, `r`, `s`, `q`).
    #[command(after_help = help(&[(Exit::Ok, "none is left waiting"), (Exit::Failed, "some were skipped or left (quit, or stdin ended)"), (Exit::BadInput, "DIR is not a directory")]))]
    Review(Dir),
    /// Take the changed wires (all, or those NAMEd) as the snapshots.
    #[command(after_help = help(&[(Exit::Ok, "taken"), (Exit::BadInput, "DIR is not a directory, or a NAME waits for no review"), (Exit::Setup, "a file could not be renamed")]))]
    Accept(Named),
    /// Throw the changed wires away (all, or those NAMEd), keeping the snapshots.
    #[command(after_help = help(&[(Exit::Ok, "thrown away"), (Exit::BadInput, "DIR is not a directory, or a NAME waits for no review"), (Exit::Setup, "a file could not be removed")]))]
    Reject(Named),
}

#[derive(Debug, Args)]
pub struct Dir {
    /// The snapshot directory (`roce suite --snapshots DIR`, or a profile's `snapshots`)
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct Named {
    /// The snapshot directory (`roce suite --snapshots DIR`, or a profile's `snapshots`)
    pub dir: PathBuf,
    /// Which changes, by the name `list` gives (`faults/write_drop_middle`); all when none
    pub names: Vec<String>,
}

/// `roce snapshots …`.
pub(super) fn run(a: SnapshotsArgs, out: &mut dyn Write, _err: &mut dyn Write) -> CommandResult {
    match a.command {
        SnapshotsCommand::List(d) => list(&pending(&d.dir)?, out),
        SnapshotsCommand::Review(d) => review(&pending(&d.dir)?, &mut std::io::stdin().lock(), out),
        SnapshotsCommand::Accept(n) => each(&named(&n)?, out, "taken", Pending::accept),
        SnapshotsCommand::Reject(n) => each(&named(&n)?, out, "thrown away", Pending::reject),
    }
}

/// The changes waiting under `dir`.
fn pending(dir: &std::path::Path) -> Result<Vec<Pending>, Failure> {
    if !dir.is_dir() {
        return Err(Failure::input(anyhow!(
            "{}: not a directory\nhint: give the directory `roce suite --snapshots` wrote",
            dir.display()
        )));
    }
    Pending::under(dir).map_err(|e| Failure::setup(anyhow!("reading {}: {e}", dir.display())))
}

/// The changes `n` names (all when it names none); a name that waits for no
/// review is refused before anything is done.
fn named(n: &Named) -> Result<Vec<Pending>, Failure> {
    let all = pending(&n.dir)?;
    if n.names.is_empty() {
        return Ok(all);
    }
    let strip = |s: &str| {
        let s = s.strip_suffix(".wire.new").or_else(|| s.strip_suffix(".wire")).unwrap_or(s);
        s.to_string()
    };
    let mut chosen = Vec::new();
    for name in n.names.iter().map(|s| strip(s)) {
        match all.iter().find(|p| p.name == name) {
            Some(p) => chosen.push(p.clone()),
            None => {
                let waiting: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
                return Err(Failure::input(anyhow!(
                    "`{name}` waits for no review in {}\nhint: {}",
                    n.dir.display(),
                    if waiting.is_empty() {
                        "none does".to_string()
                    } else {
                        format!("these do: {}", waiting.join(", "))
                    }
                )));
            }
        }
    }
    Ok(chosen)
}

/// What a change is, in one line: `faults/x: wire changed: 4 lines differ`.
fn headline(p: &Pending, change: &std::io::Result<Option<Change>>) -> String {
    match change {
        Ok(Some(c)) => format!("{}: {}", p.name, c.what()),
        Ok(None) => format!("{}: the same as the one kept", p.name),
        Err(e) => format!("{}: cannot be read: {e}", p.name),
    }
}

fn list(all: &[Pending], out: &mut dyn Write) -> CommandResult {
    for p in all {
        writeln!(out, "{}", headline(p, &p.change()))?;
    }
    writeln!(out, "{} waiting for review", all.len())?;
    Ok(if all.is_empty() { Exit::Ok } else { Exit::Failed })
}

/// Each change in turn: its diff, then the answer read from `input`.
fn review(all: &[Pending], input: &mut dyn BufRead, out: &mut dyn Write) -> CommandResult {
    let (mut taken, mut thrown, mut left) = (0, 0, 0);
    let mut answers = input.lines();
    for (i, p) in all.iter().enumerate() {
        let change = p.change();
        writeln!(out, "\n[{}/{}] {}", i + 1, all.len(), headline(p, &change))?;
        if let Ok(Some(c)) = &change {
            write!(out, "{}", c.text)?;
            if !c.text.ends_with('\n') {
                writeln!(out)?;
            }
        }
        let answer = loop {
            write!(out, "accept, reject, skip or quit? [a/r/s/q] ")?;
            out.flush()?;
            let Some(line) = answers.next() else {
                writeln!(out, "\n(stdin ended)")?;
                break "q".to_string();
            };
            let a = line.map_err(|e| Failure::input(anyhow!("reading the answer: {e}")))?;
            match a.trim() {
                a @ ("a" | "r" | "s" | "q") => break a.to_string(),
                other => writeln!(out, "`{other}`: answer a, r, s or q")?,
            }
        };
        let done = match answer.as_str() {
            "a" => p.accept().map(|()| taken += 1),
            "r" => p.reject().map(|()| thrown += 1),
            "s" => {
                left += 1;
                Ok(())
            }
            _ => {
                left += all.len() - i;
                break;
            }
        };
        done.map_err(|e| Failure::setup(anyhow!("{}: {e}", p.new.display())))?;
    }
    writeln!(out, "\n{taken} taken, {thrown} thrown away, {left} left waiting")?;
    Ok(if left == 0 { Exit::Ok } else { Exit::Failed })
}

/// `act` on each change, said one per line.
fn each(
    all: &[Pending],
    out: &mut dyn Write,
    what: &str,
    act: fn(&Pending) -> std::io::Result<()>,
) -> CommandResult {
    for p in all {
        act(p).map_err(|e| Failure::setup(anyhow!("{}: {e}", p.new.display())))?;
        writeln!(out, "{}: {what}", p.name)?;
    }
    writeln!(out, "{} {what}", all.len())?;
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two changes waiting: the first taken, the second skipped, then stdin
    /// ends; a wrong answer is asked again, not taken for one.
    #[test]
    fn review_takes_answers_one_by_one_and_says_what_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for (n, kept, new) in [("a", "h\nx\n", "h\ny\n"), ("b", "h\n1\n", "h\n2\n")] {
            std::fs::write(d.join(format!("{n}.wire")), kept).unwrap();
            std::fs::write(d.join(format!("{n}.wire.new")), new).unwrap();
        }
        let all = pending(d).unwrap();
        let mut out = Vec::new();
        let mut input: &[u8] = b"yes\na\ns\n";
        let e = review(&all, &mut input, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(e, Exit::Failed, "{text}");
        assert!(text.contains("[1/2] a: wire changed: 2 lines differ"), "{text}");
        assert!(text.contains("-x\n+y\n"), "{text}");
        assert!(text.contains("`yes`: answer a, r, s or q"), "{text}");
        assert!(text.contains("1 taken, 0 thrown away, 1 left waiting"), "{text}");
        assert_eq!(std::fs::read_to_string(d.join("a.wire")).unwrap(), "h\ny\n");
        assert!(!d.join("a.wire.new").exists());
        assert!(d.join("b.wire.new").exists());
        // Ended stdin leaves the rest waiting; reject by name takes it away.
        let mut none: &[u8] = b"";
        let mut out = Vec::new();
        assert_eq!(review(&pending(d).unwrap(), &mut none, &mut out).unwrap(), Exit::Failed);
        let n = Named { dir: d.to_path_buf(), names: vec!["c".into()] };
        let e = named(&n).unwrap_err();
        assert!(e.error.to_string().contains("these do: b"), "{}", e.error);
        let n = Named { dir: d.to_path_buf(), names: vec!["b.wire.new".into()] };
        each(&named(&n).unwrap(), &mut Vec::new(), "thrown away", Pending::reject).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("b.wire")).unwrap(), "h\n1\n");
        let mut out = Vec::new();
        assert_eq!(list(&pending(d).unwrap(), &mut out).unwrap(), Exit::Ok);
        assert_eq!(String::from_utf8(out).unwrap(), "0 waiting for review\n");
    }
}
