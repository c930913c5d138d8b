//! Fixtures: setup written once and used by many scenarios. A scenario that says
//! `use = ["fixtures/rc_pair.toml"]` is read as if what the fixture says were
//! written in it:
//!
//! - arrays of tables (`[[qp]]`, `[[mr]]`, `[[step]]`, `[[expect.wire]]`, …) add
//!   up: the fixtures' first, in `use` order, then the scenario's own, so a
//!   fixture's steps run before the scenario's;
//! - `requires` and `spec` add up too (each name once);
//! - any other key, or a table with keys, said in two of the files is a
//!   conflict, refused with both places named; an empty table (`[endpoints.a]`)
//!   said again adds nothing and is no conflict;
//! - a fixture may `use` fixtures of its own; each is read once however many
//!   paths lead to it, and a cycle is refused;
//! - a path is relative to the file that names it; a fixture holds no `name`
//!   and no cases (those are the scenario's), and is in its user's format unless
//!   it says `format` itself, which must then be the same.
//!
//! The composed text is checked as any scenario's; [`Parts`] takes each span back
//! to the file it was written in, so a problem in a fixture is shown there, with
//! the scenario that used it. Discovery leaves directories named `fixtures` out:
//! a fixture is no scenario of its own.
//!
//! Owns: composing a scenario with its fixtures. Imports: [`super::diag`] (the
//! sources and [`Parts`]), [`super::legacy`] (each fixture read in its format);
//! `toml_edit`.
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml_edit::{ImDocument, Item, Table};

use super::diag::{Diagnostic, Parts, Source};
use super::legacy;

/// The most fixtures one scenario may use, its fixtures' own included.
const MAX_FIXTURES: usize = 64;
/// The largest fixture file read.
const MAX_FIXTURE_BYTES: u64 = 1 << 20;
/// Root lists that add up across the files rather than conflict.
const LISTS: [&str; 2] = ["requires", "spec"];
/// Root keys a fixture may not hold: they are the scenario's own.
const SCENARIO_ONLY: [&str; 3] = ["name", "cases", "case"];

/// A scenario composed with its fixtures.
#[derive(Debug)]
pub(crate) struct Composed {
    /// What is checked: the files' texts in an order that TOML reads as one
    /// document (every file's top-level keys, then the fixtures' tables, then
    /// the scenario's).
    pub(crate) text: String,
    pub(crate) parts: Parts,
    /// The fixtures' `requires` and `spec` names, and where each is in `text`.
    pub(crate) lists: Vec<(&'static str, String, Range<usize>)>,
    /// What in a fixture loads but deserves a look (its older format).
    pub(crate) warnings: Vec<Diagnostic>,
}

/// One file read: its path, its text as written, and the text to compose (what
/// its format dropped, and what composing takes out of it, blanked out).
struct File {
    path: PathBuf,
    written: String,
    text: String,
}

/// The scenario (`src`, `read` being its text with what its format dropped
/// blanked out) composed with the fixtures it uses; `None` for one that uses
/// none.
pub(crate) fn compose(
    src: &Source,
    read: &str,
    format: u32,
) -> Result<Option<Composed>, Vec<Diagnostic>> {
    let doc = ImDocument::parse(read).map_err(|e| {
        vec![src.diag(e.span(), format!("TOML syntax: {}", e.message().trim()), None)]
    })?;
    let Some(uses) = uses(src, doc.as_table())? else { return Ok(None) };
    let mut c = Collect {
        user: src.file.to_path_buf(),
        format,
        files: vec![File {
            path: src.file.to_path_buf(),
            written: src.text.to_string(),
            text: read.to_string(),
        }],
        lists: Vec::new(),
        warnings: Vec::new(),
        out: Vec::new(),
        seen: Vec::new(),
        order: Vec::new(),
    };
    let mut stack = vec![canonical(src.file)];
    c.fixtures(0, &uses, &mut stack);
    if !c.out.is_empty() {
        return Err(c.out);
    }
    c.compose(src).map(Some)
}

/// The paths a `use` names, each with where it is.
type Uses = Vec<(String, Range<usize>)>;

/// The `use` list of a file: each path and where it is.
fn uses(src: &Source, root: &Table) -> Result<Option<Uses>, Vec<Diagnostic>> {
    let Some(item) = root.get("use") else { return Ok(None) };
    let hint = || {
        Some("`use` lists fixture files, each relative to this file: `use = [\"fixtures/rc_pair.toml\"]`".into())
    };
    let Some(list) = item.as_array() else {
        return Err(vec![src.diag(item.span(), "`use` is a list of fixture files", hint())]);
    };
    let mut out = Vec::new();
    for v in list.iter() {
        match v.as_str() {
            Some(p) if !p.trim().is_empty() => out.push((p.to_string(), v.span().unwrap_or(0..0))),
            _ => {
                return Err(vec![src.diag(
                    v.span(),
                    "`use` names each fixture by its path, as a string",
                    hint(),
                )])
            }
        }
    }
    Ok(Some(out))
}

/// The fixtures read so far, and what was found on the way.
struct Collect {
    user: PathBuf,
    format: u32,
    /// The scenario first, then each fixture as it was read.
    files: Vec<File>,
    /// The fixtures, each after those it uses.
    order: Vec<usize>,
    /// The fixtures' `requires` and `spec`: the file, the name and its span.
    lists: Vec<(usize, &'static str, String, Range<usize>)>,
    warnings: Vec<Diagnostic>,
    out: Vec<Diagnostic>,
    /// Every fixture read, by its canonical path.
    seen: Vec<PathBuf>,
}

impl Collect {
    /// A diagnostic in file `i`, said as one in a fixture when it is one.
    fn diag(
        &self,
        i: usize,
        span: Option<Range<usize>>,
        message: String,
        hint: Option<String>,
    ) -> Diagnostic {
        let f = &self.files[i];
        let mut d = Source::new(&f.path, &f.written).diag(span, message, hint);
        if i != 0 {
            d.message = format!("{} (in a fixture {} uses)", d.message, self.user.display());
        }
        d
    }

    /// Reads the fixtures file `from` uses (`stack`: the canonical paths of the
    /// files that led here, to refuse a cycle).
    fn fixtures(&mut self, from: usize, uses: &[(String, Range<usize>)], stack: &mut Vec<PathBuf>) {
        let base = self.files[from].path.parent().map(Path::to_path_buf).unwrap_or_default();
        for (name, span) in uses {
            let path = tidy(&base.join(name));
            let here = canonical(&path);
            if let Some(at) = stack.iter().position(|p| *p == here) {
                let mut chain: Vec<String> =
                    stack[at..].iter().map(|p| p.display().to_string()).collect();
                chain.push(here.display().to_string());
                let d = self.diag(
                    from,
                    Some(span.clone()),
                    format!("fixtures use each other in a cycle: {}", chain.join(" → ")),
                    Some("a fixture may use others, but none may lead back to itself".into()),
                );
                self.out.push(d);
                continue;
            }
            if self.seen.contains(&here) {
                continue;
            }
            if self.seen.len() == MAX_FIXTURES {
                let d = self.diag(
                    from,
                    Some(span.clone()),
                    format!("more than {MAX_FIXTURES} fixtures in one scenario"),
                    Some("a fixture may gather others: use fewer, larger ones".into()),
                );
                self.out.push(d);
                return;
            }
            self.seen.push(here.clone());
            let Some(text) = self.read(from, span, &path) else { continue };
            let i = self.files.len();
            self.files.push(File { path, written: text.clone(), text });
            let Some(own) = self.check(i) else { continue };
            stack.push(here);
            self.fixtures(i, &own, stack);
            stack.pop();
            // After the fixtures it uses: its tables come after theirs.
            self.order.push(i);
        }
    }

    /// A fixture's text, or why it cannot be read (said at the `use` entry).
    fn read(&mut self, from: usize, span: &Range<usize>, path: &Path) -> Option<String> {
        let hint = Some("a fixture's path is relative to the file that names it in `use`".into());
        let r = std::fs::metadata(path).and_then(|m| {
            if !m.is_file() {
                // A device, a FIFO or a directory: /dev/zero would never end,
                // /dev/stdin would wait for input.
                Err(std::io::Error::other("not a file"))
            } else if m.len() > MAX_FIXTURE_BYTES {
                Err(std::io::Error::other(format!(
                    "{} bytes, more than a fixture may be ({MAX_FIXTURE_BYTES})",
                    m.len()
                )))
            } else {
                // At most the limit, whatever the file grew to since.
                let mut text = String::new();
                std::io::Read::read_to_string(
                    &mut std::io::Read::take(std::fs::File::open(path)?, MAX_FIXTURE_BYTES),
                    &mut text,
                )?;
                Ok(text)
            }
        });
        match r {
            Ok(t) => Some(t),
            Err(e) => {
                let d = self.diag(
                    from,
                    Some(span.clone()),
                    format!("cannot read the fixture {}: {e}", path.display()),
                    hint,
                );
                self.out.push(d);
                None
            }
        }
    }

    /// Checks fixture `i` as read, blanks what composing takes out of it (its
    /// `format`, `use`, `requires` and `spec`), and returns the fixtures it uses.
    fn check(&mut self, i: usize) -> Option<Uses> {
        let f = &self.files[i];
        let src = Source::new(&f.path, &f.written);
        let old = match legacy::read_in(&src, self.format) {
            Ok(old) => old,
            Err(ds) => {
                let ds: Vec<Diagnostic> = ds.into_iter().map(|d| self.in_fixture(d)).collect();
                self.out.extend(ds);
                return None;
            }
        };
        let (format, text) = (old.format, old.text.to_string());
        let (errors, warnings) = (old.errors, old.warnings);
        for d in errors {
            let d = self.in_fixture(d);
            self.out.push(d);
        }
        for d in warnings {
            let d = self.in_fixture(d);
            self.warnings.push(d);
        }
        let doc = match ImDocument::parse(text.as_str()) {
            Ok(doc) => doc,
            Err(e) => {
                let d =
                    self.diag(i, e.span(), format!("TOML syntax: {}", e.message().trim()), None);
                self.out.push(d);
                return None;
            }
        };
        let root = doc.as_table();
        let mut blank: Vec<Range<usize>> = Vec::new();
        let mut failed = false;
        if format != self.format {
            let at = root.get("format").and_then(Item::span);
            let d = self.diag(
                i,
                at,
                format!("the fixture is in format {format}, the scenario that uses it in format {}", self.format),
                Some("a fixture is read in its user's format: write both in one (`roce check --fix` writes a scenario in the current format), or leave `format` out of the fixture".into()),
            );
            self.out.push(d);
            failed = true;
        }
        for key in SCENARIO_ONLY {
            if let Some(k) = root.key(key) {
                let d = self.diag(
                    i,
                    k.span(),
                    format!("`{key}` in a fixture: a fixture holds setup several scenarios share"),
                    Some(format!("say `{key}` in the scenario that uses the fixture")),
                );
                self.out.push(d);
                failed = true;
            }
        }
        let own = {
            let fsrc = Source::new(&self.files[i].path, &text);
            match uses(&fsrc, root) {
                Ok(u) => u.unwrap_or_default(),
                Err(ds) => {
                    let ds: Vec<Diagnostic> = ds.into_iter().map(|d| self.in_fixture(d)).collect();
                    self.out.extend(ds);
                    failed = true;
                    Vec::new()
                }
            }
        };
        for key in ["format", "use"] {
            if let Some(r) = key_value(root, key) {
                blank.push(r);
            }
        }
        for key in LISTS {
            let Some(list) = root.get(key).and_then(Item::as_array) else { continue };
            // A list of anything but strings stays, for the check to refuse.
            if !list.iter().all(|v| v.as_str().is_some()) {
                continue;
            }
            for v in list.iter() {
                if let (Some(s), Some(span)) = (v.as_str(), v.span()) {
                    self.lists.push((i, key, s.to_string(), span));
                }
            }
            blank.extend(key_value(root, key));
        }
        self.files[i].text = legacy::blanked(&text, &blank);
        (!failed).then_some(own)
    }

    /// A diagnostic of a fixture's own reading, said as one in a fixture.
    fn in_fixture(&self, mut d: Diagnostic) -> Diagnostic {
        d.message = format!("{} (in a fixture {} uses)", d.message, self.user.display());
        d
    }

    /// The composed text, once no two files say the same thing.
    fn compose(mut self, src: &Source) -> Result<Composed, Vec<Diagnostic>> {
        // The scenario last: what it says conflicts with what a fixture said.
        let mut order = self.order.clone();
        order.push(0);
        let mut said: BTreeMap<Vec<String>, Said> = BTreeMap::new();
        let mut blank: Vec<Vec<Range<usize>>> = vec![Vec::new(); self.files.len()];
        for &i in &order {
            let text = self.files[i].text.clone();
            let Ok(doc) = ImDocument::parse(text.as_str()) else { continue };
            self.conflicts(i, doc.as_table(), &mut Vec::new(), &mut said, &mut blank);
        }
        if !self.out.is_empty() {
            return Err(self.out);
        }
        for (i, b) in blank.iter().enumerate() {
            if !b.is_empty() {
                self.files[i].text = legacy::blanked(&self.files[i].text, b);
            }
        }
        // Each file's top-level keys, then the tables: the fixtures', the scenario's.
        let mut splits = Vec::new();
        for f in &self.files {
            let at = ImDocument::parse(f.text.as_str())
                .ok()
                .and_then(|d| first_header(d.as_table()))
                .unwrap_or(f.text.len());
            splits.push(at);
        }
        let mut pieces: Vec<(usize, Range<usize>)> = vec![(0, 0..splits[0])];
        pieces.extend(self.order.iter().map(|&i| (i, 0..splits[i])));
        pieces.extend(order.iter().map(|&i| (i, splits[i]..self.files[i].text.len())));
        let mut text = String::new();
        let mut laid = Vec::new();
        for (i, r) in pieces {
            if r.is_empty() {
                continue;
            }
            laid.push((text.len(), i, r.clone()));
            text.push_str(&self.files[i].text[r]);
            if !text.ends_with('\n') {
                text.push('\n');
            }
        }
        let lists = self
            .lists
            .iter()
            .filter_map(|(i, key, name, span)| {
                let (at, _, r) = laid
                    .iter()
                    .find(|(_, f, r)| f == i && r.start <= span.start && span.end <= r.end)?;
                let start = at + span.start - r.start;
                Some((*key, name.clone(), start..start + span.len()))
            })
            .collect();
        let parts = Parts {
            user: self.user.clone(),
            files: self.files.into_iter().map(|f| (f.path, f.written)).collect(),
            pieces: laid,
        };
        let composed = Composed { text, parts, lists, warnings: self.warnings };
        // What the walk above cannot see (a dotted key against a table) TOML says.
        if let Err(e) = composed.text.parse::<toml::Table>() {
            let s = Source {
                file: src.file,
                text: &composed.text,
                map: None,
                parts: Some(&composed.parts),
            };
            return Err(vec![s.diag(
                e.span(),
                format!("TOML syntax, once the fixtures are in: {}", e.message().trim()),
                Some(
                    "a key said both in a fixture and in the scenario must be said in one of them"
                        .into(),
                ),
            )]);
        }
        Ok(composed)
    }

    /// Walks file `i`'s table at `path`: a key another file said already is a
    /// conflict, unless both are arrays of tables, tables whose keys do not meet,
    /// or one of them an empty table (whose header is then left out).
    fn conflicts(
        &mut self,
        i: usize,
        t: &Table,
        path: &mut Vec<String>,
        said: &mut BTreeMap<Vec<String>, Said>,
        blank: &mut [Vec<Range<usize>>],
    ) {
        for (k, item) in t.iter() {
            path.push(k.to_string());
            let here = Said::of(i, t, k, item);
            match said.get(path).cloned() {
                None => {
                    said.insert(path.clone(), here);
                }
                Some(before) => match (before.kind, here.kind) {
                    (Kind::Tables, Kind::Tables) | (Kind::Implicit, _) | (_, Kind::Implicit) => {}
                    (Kind::Header { empty: true }, Kind::Header { .. }) => {
                        blank[before.file].push(before.span.clone());
                        said.insert(path.clone(), here);
                    }
                    (Kind::Header { .. }, Kind::Header { empty: true }) => {
                        blank[i].push(here.span.clone());
                    }
                    _ => {
                        let other = &self.files[before.file];
                        let (line, _) =
                            dissector::diag::line_col(&other.written, before.span.start);
                        let d = self.diag(
                            i,
                            Some(here.span.clone()),
                            format!(
                                "`{}` is said both here and in {}:{line}",
                                path.join("."),
                                other.path.display()
                            ),
                            Some("say it in one of them: a fixture's arrays of tables ([[qp]], [[step]], …), `requires` and `spec` add up with the scenario's; any other key is said once".into()),
                        );
                        self.out.push(d);
                        path.pop();
                        continue;
                    }
                },
            }
            if let Some(sub) = item.as_table() {
                self.conflicts(i, sub, path, said, blank);
            }
            path.pop();
        }
    }
}

/// What a file said at a key: where, and in what form.
#[derive(Debug, Clone)]
struct Said {
    file: usize,
    span: Range<usize>,
    kind: Kind,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A value, or a dotted key's table (`a.b = 1`).
    Value,
    /// An array of tables (`[[qp]]`).
    Tables,
    /// A table made only by its sub-tables' headers (`[endpoints.a]` makes
    /// `endpoints`).
    Implicit,
    /// A table with a header of its own, and whether it holds no keys.
    Header { empty: bool },
}

impl Said {
    fn of(file: usize, parent: &Table, key: &str, item: &Item) -> Said {
        let key_span = parent.key(key).and_then(|k| k.span()).unwrap_or(0..0);
        let (kind, span) = match item {
            Item::ArrayOfTables(a) => (Kind::Tables, a.span().unwrap_or(key_span)),
            Item::Table(t) if t.is_dotted() => (Kind::Value, key_span),
            Item::Table(t) if t.is_implicit() => (Kind::Implicit, key_span),
            Item::Table(t) => {
                let empty = t.iter().all(|(_, v)| {
                    matches!(v, Item::Table(s) if !s.is_dotted())
                        || matches!(v, Item::ArrayOfTables(_))
                });
                let span = t.span().unwrap_or(key_span);
                // An empty table's span is its header.
                (Kind::Header { empty }, span)
            }
            _ => (Kind::Value, key_span),
        };
        Said { file, span, kind }
    }
}

/// Where the first table header is: what comes before it are top-level keys.
fn first_header(t: &Table) -> Option<usize> {
    t.iter()
        .filter_map(|(_, item)| match item {
            Item::Table(s) if s.is_dotted() => None,
            Item::Table(s) if s.is_implicit() => first_header(s),
            Item::Table(s) => s.span().map(|r| r.start),
            Item::ArrayOfTables(a) => a.iter().filter_map(|s| s.span()).map(|r| r.start).min(),
            _ => None,
        })
        .min()
}

/// A top-level key and its value, as a range of the text.
fn key_value(root: &Table, key: &str) -> Option<Range<usize>> {
    let k = root.key(key)?.span()?;
    let v = root.get(key)?.span()?;
    Some(k.start..v.end)
}

/// A path made absolute and its links resolved, when it exists; as given else.
/// Whether `path` (with its text) is a fixture rather than a scenario: it lies
/// under a directory named `fixtures`, and holds none of the keys only a
/// scenario holds (`name`, cases). A file that is not TOML is no fixture: it is
/// checked as a scenario, which says why it is not one.
pub(crate) fn is_fixture(path: &Path, text: &str) -> bool {
    let under = canonical(path)
        .parent()
        .is_some_and(|d| d.ancestors().any(|a| a.file_name().is_some_and(|n| n == "fixtures")));
    under
        && text
            .parse::<toml::Table>()
            .is_ok_and(|t| SCENARIO_ONLY.iter().all(|k| !t.contains_key(*k)))
}

/// Where the scenarios that may use `fixture` are: the directory holding its
/// outermost `fixtures` directory.
pub(crate) fn users_root(fixture: &Path) -> Option<PathBuf> {
    let path = canonical(fixture);
    let outermost =
        path.ancestors().filter(|a| a.file_name().is_some_and(|n| n == "fixtures")).last()?;
    outermost.parent().map(Path::to_path_buf)
}

/// The `use` lists of scenario files and the fixtures they name, each file read
/// once however many questions name it: asking which of a tree's scenarios use
/// each of its fixtures reads every file once, not once per fixture.
#[derive(Debug, Default)]
pub(crate) struct UseGraph {
    /// Each file read, canonical, with the canonical paths its `use` names.
    lists: std::collections::HashMap<PathBuf, Vec<PathBuf>>,
}

impl UseGraph {
    /// Whether scenario `file` uses `fixture`, directly or through other
    /// fixtures. A file that cannot be read or parsed uses nothing (checking it
    /// says why).
    pub(crate) fn uses(&mut self, file: &Path, fixture: &Path) -> bool {
        let fixture = canonical(fixture);
        let mut seen = vec![canonical(file)];
        let mut todo = seen.clone();
        while let Some(f) = todo.pop() {
            for c in self.list(&f).to_vec() {
                if c == fixture {
                    return true;
                }
                if seen.len() < MAX_FIXTURES && !seen.contains(&c) {
                    seen.push(c.clone());
                    todo.push(c);
                }
            }
        }
        false
    }

    /// What canonical file `f`'s `use` names, read the first time it is asked.
    fn list(&mut self, f: &Path) -> &[PathBuf] {
        self.lists.entry(f.to_path_buf()).or_insert_with(|| {
            let Ok(text) = std::fs::read_to_string(f) else { return Vec::new() };
            let Ok(t) = text.parse::<toml::Table>() else { return Vec::new() };
            let Some(list) = t.get("use").and_then(toml::Value::as_array) else {
                return Vec::new();
            };
            let dir = f.parent().unwrap_or(Path::new("."));
            list.iter().filter_map(toml::Value::as_str).map(|u| canonical(&dir.join(u))).collect()
        })
    }
}

/// `p` with each `dir/..` taken out, as a reader names the file
/// (`scenarios/x/../fixtures/a.toml` is `scenarios/fixtures/a.toml`); a `..`
/// with no directory before it to take out stays.
fn tidy(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::super::check::load;
    use super::super::model::Step;
    use super::super::{discover, Diagnostic};
    use std::path::Path;

    const PAIR: &str = "# a pair\nrequires = [\"mw_type1\"]\nspec = [\"mr.access.remote-write-denied\"]\n\n\
        [endpoints.a]\n[endpoints.b]\n\n[[qp]]\nname = \"rc\"\ntype = \"rc\"\nbetween = [\"a\", \"b\"]\n\n\
        [[mr]]\nname = \"dst\"\non = \"b\"\nsize = 64\naccess = [\"local_write\", \"remote_write\"]\n\n\
        [[step]]\nop = \"sleep\"\nms = 7\n";

    const USER: &str = "format = 3\nname = \"user\"\nuse = [\"fixtures/pair.toml\"]\nrequires = [\"srq\"]\n\n\
        [endpoints.a]\n\n[[mr]]\nname = \"src\"\non = \"a\"\nsize = 8\n\n\
        [[step]]\non = \"a\"\nop = \"write\"\nqp = \"rc\"\nwr_id = 1\nsge = [{ mr = \"src\" }]\nremote = { mr = \"dst\" }\n";

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let p = d.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        d
    }

    fn errors(d: &Path, file: &str) -> Vec<Diagnostic> {
        load(&d.join(file)).expect_err("the scenario should be refused")
    }

    #[test]
    fn a_fixture_is_read_as_if_written_in_the_scenario_its_steps_first() {
        let d = tree(&[("fixtures/pair.toml", PAIR), ("s.toml", USER)]);
        let sc = load(&d.path().join("s.toml")).unwrap().remove(0);
        assert_eq!(sc.qps.iter().map(|q| q.name.as_str()).collect::<Vec<_>>(), ["rc"]);
        assert_eq!(sc.mrs.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["dst", "src"]);
        assert_eq!(sc.endpoints.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert!(matches!(sc.steps.first(), Some(Step::Sleep { ms: 7 })), "{:?}", sc.steps);
        assert_eq!(sc.steps.len(), 2);
        // `requires` and `spec` add up.
        assert_eq!(sc.requires.len(), 2, "{:?}", sc.requires);
        assert_eq!(sc.spec, ["mr.access.remote-write-denied"]);
        // Discovery leaves the fixtures' directory out.
        let found = discover(&[d.path().to_path_buf()]).unwrap();
        assert_eq!(found, [d.path().join("s.toml")]);
    }

    #[test]
    fn a_key_said_twice_is_refused_with_both_places() {
        let user = USER.replace("format = 3\n", "format = 3\ntimeout_ms = 5000\n");
        let pair = PAIR.replace("# a pair\n", "# a pair\ntimeout_ms = 6000\n");
        let d = tree(&[("fixtures/pair.toml", &pair), ("s.toml", &user)]);
        let e = errors(d.path(), "s.toml");
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!((e[0].file.as_path(), e[0].line), (d.path().join("s.toml").as_path(), 2));
        assert!(e[0].message.contains("`timeout_ms` is said both here and in"), "{}", e[0]);
        assert!(e[0].message.ends_with("fixtures/pair.toml:2"), "{}", e[0]);
        // A table with keys in both is a conflict; an empty one said again is not.
        let user = USER.replace("[endpoints.a]\n", "[endpoints.b]\nvm = \"x\"\n");
        let pair = PAIR.replace("[endpoints.b]\n", "[endpoints.b]\nvm = \"y\"\n");
        let d = tree(&[("fixtures/pair.toml", &pair), ("s.toml", &user)]);
        let e = errors(d.path(), "s.toml");
        assert!(e[0].message.contains("`endpoints.b` is said both here"), "{}", e[0]);
    }

    #[test]
    fn a_problem_in_a_fixture_is_shown_there_and_names_its_user() {
        let pair = PAIR.replace("size = 64", "sise = 64");
        let d = tree(&[("fixtures/pair.toml", &pair), ("s.toml", USER)]);
        let e = errors(d.path(), "s.toml");
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].file, d.path().join("s.toml").parent().unwrap().join("fixtures/pair.toml"));
        assert_eq!((e[0].line, e[0].col), (16, 1));
        assert!(e[0].message.contains("unknown field `sise`"), "{}", e[0]);
        assert!(e[0]
            .message
            .ends_with(&format!("(in a fixture {} uses)", d.path().join("s.toml").display())));
        // Its excerpt is the fixture's line.
        assert_eq!(e[0].excerpt.as_ref().map(|(l, _)| l.as_str()), Some("sise = 64"));
    }

    #[test]
    fn fixtures_of_fixtures_are_read_once_and_a_cycle_is_refused() {
        // A diamond: both fixtures use the pair, which is read once (else `rc`
        // would be a QP said twice).
        let one = "use = [\"pair.toml\"]\n[[mr]]\nname = \"m1\"\non = \"a\"\nsize = 8\n";
        let two = "use = [\"pair.toml\"]\n[[mr]]\nname = \"m2\"\non = \"a\"\nsize = 8\n";
        let user = USER
            .replace("[\"fixtures/pair.toml\"]", "[\"fixtures/one.toml\", \"fixtures/two.toml\"]");
        let d = tree(&[
            ("fixtures/pair.toml", PAIR),
            ("fixtures/one.toml", one),
            ("fixtures/two.toml", two),
            ("s.toml", &user),
        ]);
        let sc = load(&d.path().join("s.toml")).unwrap().remove(0);
        assert_eq!(
            sc.mrs.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            ["dst", "m1", "m2", "src"]
        );
        let looped = PAIR.replace("# a pair\n", "use = [\"one.toml\"]\n");
        let d =
            tree(&[("fixtures/pair.toml", &looped), ("fixtures/one.toml", one), ("s.toml", USER)]);
        let e = errors(d.path(), "s.toml");
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].message.starts_with("fixtures use each other in a cycle:"), "{}", e[0]);
        assert!(e[0].file.ends_with("fixtures/one.toml"), "{}", e[0]);
    }

    #[test]
    fn what_a_fixture_may_not_hold_and_a_missing_one() {
        let d = tree(&[("fixtures/pair.toml", &format!("name = \"x\"\n{PAIR}")), ("s.toml", USER)]);
        let e = errors(d.path(), "s.toml");
        assert!(e.iter().any(|e| e.message.starts_with("`name` in a fixture")), "{e:?}");
        let d = tree(&[("fixtures/pair.toml", &format!("format = 2\n{PAIR}")), ("s.toml", USER)]);
        let e = errors(d.path(), "s.toml");
        assert!(e[0].message.starts_with("the fixture is in format 2, the scenario"), "{e:?}");
        let d = tree(&[("s.toml", USER)]);
        let e = errors(d.path(), "s.toml");
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!((e[0].line, e[0].col), (3, 8));
        assert!(e[0].message.starts_with("cannot read the fixture"), "{}", e[0]);
        let d = tree(&[("s.toml", &USER.replace("[\"fixtures/pair.toml\"]", "\"x.toml\""))]);
        let e = errors(d.path(), "s.toml");
        assert!(e[0].message.starts_with("`use` is a list of fixture files"), "{}", e[0]);
    }

    #[test]
    fn a_scenarios_cases_fill_a_fixtures_placeholders() {
        let pair = PAIR.replace("size = 64", "size = \"${size}\"");
        let user = format!("{USER}\n[cases]\nsize = [64, 128]\n");
        let d = tree(&[("fixtures/pair.toml", &pair), ("s.toml", &user)]);
        let all = load(&d.path().join("s.toml")).unwrap();
        let sizes: Vec<u64> = all.iter().map(|s| s.mrs[0].size).collect();
        assert_eq!(sizes, [64, 128]);
    }
}
