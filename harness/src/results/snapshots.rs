//! Wire snapshots kept with a suite: one file per scenario in a directory the
//! user keeps (`roce suite --snapshots DIR`), compared with each run's wire in its
//! normal form, as `cargo insta` compares its snapshots.
//!
//! A scenario without a snapshot gets one (said as new); one whose wire is the
//! same passes; one whose wire changed fails with a verdict of its own kind
//! ([`VerdictKind::Snapshot`]) whose detail is the unified diff, and the new wire
//! is written beside the old as `NAME.wire.new` for review. `--accept` takes the
//! new wire instead. A snapshot that cannot be read or written is said in the
//! verdict, never passed over.
//!
//! Owns: [`Store`]. Imports: the verdict shape.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Verdict, VerdictKind};

/// The fields of a frame a snapshot shows only when asked
/// (`--snapshot-fields`): what a setup may vary on purpose, or what only some
/// users keep an eye on. Named as display filters name them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Fields {
    /// `ip.dsfield`: the DSCP and ECN bits (`dscp 26 ecn 2`).
    pub dsfield: bool,
    /// `udp.srcport`: the UDP source port by class, `p1`, `p2`, … in the order
    /// first seen (4791 as itself): whether it varies per QP, not its value.
    pub udp_srcport: bool,
}

impl Fields {
    pub(crate) const NAMES: [&'static str; 2] = ["ip.dsfield", "udp.srcport"];

    /// The fields named in `names` (each may be a comma-separated list).
    pub(crate) fn parse(names: &[String]) -> Result<Fields, String> {
        let mut f = Fields::default();
        for n in names.iter().flat_map(|n| n.split(',')).map(str::trim).filter(|n| !n.is_empty()) {
            match n {
                "ip.dsfield" => f.dsfield = true,
                "udp.srcport" => f.udp_srcport = true,
                _ => {
                    return Err(format!(
                        "`{n}` is not a field a snapshot can show; it shows {}",
                        Fields::NAMES.join(" and ")
                    ))
                }
            }
        }
        Ok(f)
    }

    /// What the snapshot's header adds: `; with ip.dsfield` (a snapshot kept
    /// with other fields is another form).
    pub(crate) fn header(&self) -> String {
        let on: Vec<&str> = [self.dsfield, self.udp_srcport]
            .iter()
            .zip(Fields::NAMES)
            .filter_map(|(on, n)| on.then_some(n))
            .collect();
        if on.is_empty() {
            String::new()
        } else {
            format!("; with {}", on.join(", "))
        }
    }
}

/// Where each scenario's snapshot is kept, and whether a changed wire is taken.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    pub dir: PathBuf,
    pub accept: bool,
    /// The opt-in fields the snapshots show.
    pub fields: Fields,
    /// Scenario (file, name) → its snapshot's path under `dir`.
    keys: BTreeMap<(PathBuf, String), PathBuf>,
}

const WHAT: &str = "wire snapshot";

impl Store {
    /// The store in `dir` for the `scenarios` (file, name), each file found under
    /// one of `roots` (the files and directories the run was given): a
    /// scenario's snapshot is its file's path below the directory it was found
    /// in, `.toml` made `.wire` (`conformance/mw/dealloc_and_dereg.wire`); a file
    /// given by itself is kept by its name. The cases of one file are told apart
    /// by what their name has in brackets (`ack_req.ack_req=true.wire`).
    pub(crate) fn new(
        dir: PathBuf,
        accept: bool,
        roots: &[PathBuf],
        scenarios: &[(PathBuf, String)],
    ) -> Store {
        let mut per_file: BTreeMap<&Path, usize> = BTreeMap::new();
        for (f, _) in scenarios {
            *per_file.entry(f).or_default() += 1;
        }
        let keys = scenarios
            .iter()
            .map(|(f, name)| {
                let below = roots
                    .iter()
                    .filter(|r| r.is_dir())
                    .find_map(|r| f.strip_prefix(r).ok())
                    .filter(|p| !p.as_os_str().is_empty())
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| f.file_name().map(PathBuf::from).unwrap_or_default());
                let key = if per_file.get(f.as_path()).copied().unwrap_or(0) > 1 {
                    below.with_extension(format!("{}.wire", case_of(name)))
                } else {
                    below.with_extension("wire")
                };
                ((f.clone(), name.clone()), key)
            })
            .collect();
        Store { dir, accept, fields: Fields::default(), keys }
    }

    /// Where scenario `name` of `file` keeps its snapshot.
    pub(crate) fn path_of(&self, file: &Path, name: &str) -> PathBuf {
        let key = self.keys.get(&(file.to_path_buf(), name.to_string())).cloned();
        self.dir.join(key.unwrap_or_else(|| {
            file.file_name().map(PathBuf::from).unwrap_or_default().with_extension("wire")
        }))
    }

    /// Scenario `name` of `file`, its wire `now` against its snapshot: the
    /// verdict, after writing what the verdict says was written, and the kept
    /// wire when this one differs from it (what a report draws as "before").
    pub(crate) fn check(&self, file: &Path, name: &str, now: &str) -> (Verdict, Option<String>) {
        let path = self.path_of(file, name);
        let new = path.with_extension("wire.new");
        let shown = path.display().to_string();
        let verdict = |pass: bool, actual: String| {
            Verdict::new(
                VerdictKind::Snapshot,
                WHAT.into(),
                pass,
                format!("the wire kept in {shown}"),
                actual,
            )
        };
        let old = match std::fs::read_to_string(&path) {
            Ok(old) => old,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return match write(&path, now) {
                    Ok(()) => (verdict(true, "none kept before: written".into()), None),
                    Err(e) => {
                        (verdict(false, format!("none kept, and it cannot be written: {e}")), None)
                    }
                }
            }
            Err(e) => return (verdict(false, format!("cannot read it: {e}")), None),
        };
        let change = match compare(&old, now, &shown, "this run") {
            None => {
                let _ = std::fs::remove_file(&new);
                return (verdict(true, "unchanged".into()), None);
            }
            Some(c) => c,
        };
        let mut v = if self.accept {
            match write(&path, now) {
                Ok(()) => {
                    let _ = std::fs::remove_file(&new);
                    let taken = match change.form {
                        Some(_) => "kept in another form: rewritten in this one".into(),
                        None => format!("changed ({} lines), accepted", change.lines),
                    };
                    verdict(true, taken)
                }
                Err(e) => verdict(false, format!("{}, and cannot be taken: {e}", change.what())),
            }
        } else {
            let kept = match write(&new, now) {
                Ok(()) => format!("this run's is in {}", new.display()),
                Err(e) => format!("this run's could not be written: {e}"),
            };
            verdict(
                false,
                format!("{} ({kept}; `roce snapshots review` or --accept takes it)", change.what()),
            )
        };
        let before = change.form.is_none().then_some(old);
        v.detail = Some(change.text);
        (v, before)
    }
}

/// How a wire differs from the one kept: in form (the first line, which names
/// the form and its fields: every line would differ for a reason of the
/// tool's, so it is not compared line by line), or in `lines` lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    /// The kept form's first line and this one's, when they differ.
    pub form: Option<(String, String)>,
    /// How many lines were taken out or put in.
    pub lines: usize,
    /// The unified diff, or the two forms' first lines.
    pub text: String,
}

impl Change {
    /// What the verdict says: `wire changed: 4 lines differ`.
    pub(crate) fn what(&self) -> String {
        match self.form {
            Some(_) => "kept in another form, not compared".into(),
            None => format!("wire changed: {} lines differ", self.lines),
        }
    }
}

/// Wire `now` against the wire `old` kept (named `old_name` and `new_name` in
/// the diff; none kept is empty): None when they are the same.
pub(crate) fn compare(old: &str, now: &str, old_name: &str, new_name: &str) -> Option<Change> {
    if old == now {
        return None;
    }
    let (kept, this) = (old.lines().next().unwrap_or(""), now.lines().next().unwrap_or(""));
    if !old.is_empty() && kept != this {
        return Some(Change {
            form: Some((kept.into(), this.into())),
            lines: 0,
            text: format!("kept:      {kept}\nthis run:  {this}"),
        });
    }
    let diff = similar::TextDiff::from_lines(old, now);
    let lines = diff.iter_all_changes().filter(|c| c.tag() != similar::ChangeTag::Equal).count();
    let text = diff.unified_diff().header(old_name, new_name).to_string();
    Some(Change { form: None, lines, text })
}

/// A changed wire waiting for review: a run's `NAME.wire.new` beside the kept
/// `NAME.wire` (`roce snapshots review`, as `cargo insta review`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pending {
    /// The snapshot's name below its directory, without `.wire`
    /// (`conformance/mw/dealloc_and_dereg`).
    pub name: String,
    pub kept: PathBuf,
    pub new: PathBuf,
}

impl Pending {
    /// Every change waiting under `dir`, in name order.
    pub(crate) fn under(dir: &Path) -> std::io::Result<Vec<Pending>> {
        fn walk(root: &Path, dir: &Path, out: &mut Vec<Pending>) -> std::io::Result<()> {
            for e in std::fs::read_dir(dir)? {
                let p = e?.path();
                if p.is_dir() {
                    walk(root, &p, out)?;
                } else if let Some(stem) =
                    p.to_str().and_then(|s| s.strip_suffix(".wire.new")).map(String::from)
                {
                    let name = Path::new(&stem).strip_prefix(root).unwrap_or(Path::new(&stem));
                    out.push(Pending {
                        name: name.to_string_lossy().into_owned(),
                        kept: PathBuf::from(format!("{stem}.wire")),
                        new: p,
                    });
                }
            }
            Ok(())
        }
        let mut out = Vec::new();
        walk(dir, dir, &mut out)?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// How this run's wire differs from the kept one (None: the same after all;
    /// a missing kept one reads as empty).
    pub(crate) fn change(&self) -> std::io::Result<Option<Change>> {
        let old = match std::fs::read_to_string(&self.kept) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
        let now = std::fs::read_to_string(&self.new)?;
        Ok(compare(&old, &now, &self.kept.display().to_string(), &self.new.display().to_string()))
    }

    /// The new wire becomes the snapshot (one rename: whole or not at all).
    pub(crate) fn accept(&self) -> std::io::Result<()> {
        std::fs::rename(&self.new, &self.kept)
    }

    /// The new wire is thrown away; the snapshot stays as it is.
    pub(crate) fn reject(&self) -> std::io::Result<()> {
        std::fs::remove_file(&self.new)
    }
}

/// A case's part of a file name: what its scenario name has in its last
/// brackets (the whole name without them), each character a file name should
/// not hold made `_`.
fn case_of(name: &str) -> String {
    let inner = name.rsplit_once('[').and_then(|(_, r)| r.strip_suffix(']')).unwrap_or(name);
    inner
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "=+-,".contains(c) { c } else { '_' })
        .collect()
}

/// `text` into `path`, whole or not at all, its directory made.
fn write(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    dissector::capture::write_whole(path, |w| std::io::Write::write_all(w, text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// New, unchanged, changed (kept beside, failing), accepted: each said, and the
    /// files as the verdict says.
    #[test]
    fn a_snapshot_is_written_compared_and_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("scenarios");
        std::fs::create_dir_all(root.join("conformance")).unwrap();
        let file = root.join("conformance/x.toml");
        let one = [(file.clone(), "x".to_string())];
        let store =
            |accept| Store::new(dir.path().join("snap"), accept, std::slice::from_ref(&root), &one);
        let kept = dir.path().join("snap/conformance/x.wire");
        assert_eq!(store(false).path_of(&file, "x"), kept);
        let check = |accept, now| store(accept).check(&file, "x", now).0;
        let v = check(false, "a\nb\n");
        assert!(v.pass && v.actual.contains("written"), "{v:?}");
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "a\nb\n");
        let v = check(false, "a\nb\n");
        assert!(v.pass && v.actual == "unchanged", "{v:?}");
        let v = check(false, "a\nc\n");
        assert!(!v.pass && v.kind == VerdictKind::Snapshot, "{v:?}");
        assert!(v.actual.starts_with("wire changed: 2 lines differ"), "{}", v.actual);
        let diff = v.detail.unwrap();
        assert!(diff.contains("-b\n") && diff.contains("+c\n"), "{diff}");
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "a\nb\n", "the kept one stays");
        let new = dir.path().join("snap/conformance/x.wire.new");
        assert_eq!(std::fs::read_to_string(&new).unwrap(), "a\nc\n");
        let v = check(true, "a\nc\n");
        assert!(v.pass && v.actual.contains("accepted"), "{v:?}");
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "a\nc\n");
        assert!(!new.exists());
        // Another form (first line) is said as such, not as a wire change.
        let v = check(false, "z\nc\n");
        assert!(!v.pass && v.actual.starts_with("kept in another form"), "{v:?}");
        assert!(v.detail.unwrap().contains("kept:      a"));
        let v = check(true, "z\nc\n");
        assert!(v.pass && v.actual.contains("rewritten"), "{v:?}");
        check(true, "a\nc\n");
        // A file given by itself is kept by its name; cases by their brackets.
        let alone = Store::new(dir.path().join("snap"), false, std::slice::from_ref(&file), &one);
        assert_eq!(alone.path_of(&file, "x"), dir.path().join("snap/x.wire"));
        let cases =
            [(file.clone(), "x [op=read]".into()), (file.clone(), "x [op=write len=8]".into())];
        let two = Store::new(dir.path().join("snap"), false, std::slice::from_ref(&root), &cases);
        assert_eq!(
            two.path_of(&file, "x [op=write len=8]"),
            dir.path().join("snap/conformance/x.op=write_len=8.wire")
        );
        assert_ne!(two.path_of(&file, "x [op=read]"), two.path_of(&file, "x [op=write len=8]"));
    }
}

#[cfg(test)]
mod review_tests {
    use super::*;

    /// A changed wire gives the kept one back (a report's "before") and waits
    /// beside it; review finds it by name, shows its diff, and accepting or
    /// rejecting leaves exactly one wire.
    #[test]
    fn changed_wires_wait_for_review_and_are_taken_or_thrown_away() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("scenarios");
        std::fs::create_dir_all(root.join("faults")).unwrap();
        let (x, y) = (root.join("faults/x.toml"), root.join("y.toml"));
        let all = [(x.clone(), "x".to_string()), (y.clone(), "y".to_string())];
        let snap = dir.path().join("snap");
        let store = Store::new(snap.clone(), false, std::slice::from_ref(&root), &all);
        assert_eq!(store.check(&x, "x", "h\na\n").1, None, "nothing kept: no before");
        store.check(&y, "y", "h\nq\n");
        assert_eq!(store.check(&x, "x", "h\na\n").1, None, "unchanged: no before");
        let (v, before) = store.check(&x, "x", "h\nb\n");
        assert!(!v.pass && v.actual.contains("roce snapshots review"), "{}", v.actual);
        assert_eq!(before.as_deref(), Some("h\na\n"));
        let (_, before) = store.check(&y, "y", "other form\nq\n");
        assert_eq!(before, None, "another form draws no before");

        let pending = Pending::under(&snap).unwrap();
        let names: Vec<&str> = pending.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["faults/x", "y"]);
        let c = pending[0].change().unwrap().unwrap();
        assert_eq!((c.form.clone(), c.lines), (None, 2));
        assert!(c.text.contains("-a\n+b\n"), "{}", c.text);
        let c = pending[1].change().unwrap().unwrap();
        assert_eq!(c.form, Some(("h".into(), "other form".into())));
        assert_eq!(c.what(), "kept in another form, not compared");

        pending[0].accept().unwrap();
        pending[1].reject().unwrap();
        assert!(Pending::under(&snap).unwrap().is_empty());
        assert_eq!(std::fs::read_to_string(snap.join("faults/x.wire")).unwrap(), "h\nb\n");
        assert_eq!(std::fs::read_to_string(snap.join("y.wire")).unwrap(), "h\nq\n");
        // None kept: every line is new, not "another form".
        let c = compare("", "h\nb\n", "kept", "new").unwrap();
        assert_eq!((c.form, c.lines), (None, 2));
    }
}

#[cfg(test)]
mod fields_tests {
    use super::Fields;

    #[test]
    fn fields_are_named_as_display_filters_name_them() {
        let f = Fields::parse(&["udp.srcport, ip.dsfield".into()]).unwrap();
        assert!(f.dsfield && f.udp_srcport);
        assert_eq!(f.header(), "; with ip.dsfield, udp.srcport");
        assert_eq!(Fields::parse(&[]).unwrap().header(), "");
        let e = Fields::parse(&["ip.ttl".into()]).unwrap_err();
        assert!(e.contains("`ip.ttl`") && e.contains("ip.dsfield"), "{e}");
    }
}
