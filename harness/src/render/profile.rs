//! A device profile as TOML (`roce run --record-profile`): a comment saying what
//! it is, then stable order, one observation per line, so two profiles diff line
//! by line; [`crate::results::profile::Profile::load`] reads it back.
//!
//! Owns: [`render`] for a profile. Imports: the results' [`Profile`]; `toml_edit`,
//! which lays the document out and quotes its keys and strings.
use toml_edit::{DocumentMut, Item, Key, Table, Value};

use crate::results::profile::Profile;

const HEADER: &str = "\
# A roce device profile: what this setup does where the spec leaves room or where
# it deviates, per scenario. Written by `roce run --record-profile`; compared by
# `roce run --profile` (every difference fails the scenario).
";

const CRASHES: &str =
    "\n# Scenarios that crash this setup: skipped under this profile (written by people).\n";

/// The profile as TOML.
pub(crate) fn render(p: &Profile) -> String {
    let mut doc = DocumentMut::new();
    doc.decor_mut().set_prefix(HEADER);
    doc.insert("name", Item::Value(string(&p.name)));

    // `[recorded]`'s keys go bare where TOML allows (`kernel = …`); everything
    // else in a profile is a name and is quoted even then (`"naks" = …`).
    let mut recorded = table(1, None);
    for (k, v) in &p.recorded {
        recorded.insert_formatted(&Key::new(k.as_str()), Item::Value(string(v)));
    }
    if let Some(dir) = &p.snapshots {
        let mut v = string(&dir.to_string_lossy());
        v.decor_mut()
            .set_suffix(" # the wire snapshots runs under it are held to (written by people)");
        doc.insert("snapshots", Item::Value(v));
    }
    doc.insert("recorded", Item::Table(recorded));
    if !p.crashes.is_empty() {
        let crashes = pairs(table(2, Some(CRASHES)), &p.crashes);
        doc.insert("crashes", Item::Table(crashes));
    }

    // Each scenario's notes come right after its observations (no blank line), so
    // the tables are placed by position: the order they would be read in.
    let (mut scenarios, mut notes) = (implicit(), implicit());
    let mut position = 3;
    for (name, obs) in &p.scenario {
        scenarios
            .insert_formatted(&quoted_key(name), Item::Table(pairs(table(position, None), obs)));
        position += 1;
        if let Some(n) = p.note.get(name).filter(|n| !n.is_empty()) {
            notes.insert_formatted(
                &quoted_key(name),
                Item::Table(pairs(table(position, Some("")), n)),
            );
            position += 1;
        }
    }
    if !scenarios.is_empty() {
        doc.insert("scenario", Item::Table(scenarios));
    }
    if !notes.is_empty() {
        doc.insert("note", Item::Table(notes));
    }
    doc.to_string()
}

/// A table at `position` in the document; `prefix`: what comes before its header
/// (a blank line unless said otherwise).
fn table(position: usize, prefix: Option<&str>) -> Table {
    let mut t = Table::new();
    t.set_position(position);
    if let Some(prefix) = prefix {
        t.decor_mut().set_prefix(prefix);
    }
    t
}

/// `scenario` and `note`: no header of their own, only their dotted children's.
fn implicit() -> Table {
    let mut t = Table::new();
    t.set_implicit(true);
    t
}

/// `t` with `pairs` as quoted keys and strings, in order.
fn pairs(mut t: Table, pairs: &std::collections::BTreeMap<String, String>) -> Table {
    for (k, v) in pairs {
        t.insert_formatted(&quoted_key(k), Item::Value(string(v)));
    }
    t
}

/// `s` as a quoted TOML string on one line, in toml_edit's quoting: the one it
/// gives a key, which never spans lines (a string value with a newline would
/// become a multi-line string; a profile keeps one observation a line), and for
/// a key TOML takes bare, the one it gives that string value (`"naks"`).
fn quoted(s: &str) -> String {
    let key = Key::new(s).display_repr().into_owned();
    if key.starts_with(['"', '\'']) {
        key
    } else {
        Value::from(s).to_string()
    }
}

/// `k` as a key, always quoted ([`quoted`]).
fn quoted_key(k: &str) -> Key {
    quoted(k)
        .parse::<Key>()
        .ok()
        .filter(|key| key.get() == k)
        .map(|mut key| {
            key.leaf_decor_mut().clear();
            key
        })
        .unwrap_or_else(|| Key::new(k))
}

/// `s` as a string value on one line ([`quoted`]).
fn string(s: &str) -> Value {
    quoted(s)
        .parse::<Value>()
        .ok()
        .filter(|v| v.as_str() == Some(s))
        .unwrap_or_else(|| Value::from(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn obs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn round_trip_through_toml_with_awkward_names() {
        let mut p = Profile { name: "rxe-linux-6.1".into(), ..Default::default() };
        p.recorded.insert("kernel".into(), "6.1.0-28-amd64".into());
        p.recorded.insert("a \"quoted\" key".into(), "x\\y\nz".into());
        p.scenario.insert(
            "conformance: a \"PSN\" ahead".into(),
            obs(&[("probe ahead", "NAK PSN Sequence Error (PSN next)")]),
        );
        // Notes are written and read back as notes (never compared).
        p.note.insert(
            "conformance: a \"PSN\" ahead".into(),
            obs(&[("probe ahead", "IBA C9-92: NAK Invalid Request; deviates")]),
        );
        p.crashes.insert("Finding \"1\"".into(), "BUG: kernel NULL pointer dereference".into());
        let text = render(&p);
        let back: Profile = toml::from_str(&text).unwrap();
        assert_eq!(back, p);
    }

    /// What the renderer wrote before it built the document with `toml_edit`,
    /// byte for byte: the header, bare `[recorded]` keys (quoted where they must
    /// be), the crashes' comment, every other name quoted even where TOML takes it
    /// bare, a blank line before each scenario and none before its notes, notes
    /// of no recorded scenario and empty notes left out.
    #[test]
    fn renders_a_representative_profile_as_before() {
        let mut p = Profile { name: "rxe-linux-6.1".into(), ..Default::default() };
        p.recorded = obs(&[
            ("date", "2026-11-27"),
            ("device", "rxe0"),
            ("kernel", "6.1.0-50-amd64"),
            ("roce", "0.1.0"),
            ("odd key", "x"),
        ]);
        p.crashes =
            obs(&[("finding: a UC WRITE panics rxe", "VM b panics: BUG (roce fuzz, 2026-11-26)")]);
        p.scenario.insert(
            "Atomics: CmpSwap and FetchAdd".into(),
            obs(&[("completion a wr_id 1", "IBV_WC_SUCCESS"), ("wire q from a: NAKs", "none")]),
        );
        p.scenario.insert(
            "CE-marked SEND (CNP: per device profile)".into(),
            obs(&[
                ("wire q from a: CNP after CE", "no"),
                ("wire q from a: ICRCs", "bad on FLUSH ×2"),
            ]),
        );
        p.note.insert(
            "CE-marked SEND (CNP: per device profile)".into(),
            obs(&[("wire q from a: CNP after CE", "RoCEv2: not 'no wait'. rxe has none: no CNP.")]),
        );
        p.scenario.insert("empty".into(), obs(&[]));
        p.note.insert("empty".into(), obs(&[]));
        p.scenario.insert("smoke".into(), obs(&[("naks", "none")]));
        p.note.insert("smoke".into(), obs(&[("naks", "IBA: fine")]));
        p.note.insert("not recorded".into(), obs(&[("x", "y")]));
        let want = r#"# A roce device profile: what this setup does where the spec leaves room or where
# it deviates, per scenario. Written by `roce run --record-profile`; compared by
# `roce run --profile` (every difference fails the scenario).
name = "rxe-linux-6.1"

[recorded]
date = "2026-11-27"
device = "rxe0"
kernel = "6.1.0-50-amd64"
"odd key" = "x"
roce = "0.1.0"

# Scenarios that crash this setup: skipped under this profile (written by people).
[crashes]
"finding: a UC WRITE panics rxe" = "VM b panics: BUG (roce fuzz, 2026-11-26)"

[scenario."Atomics: CmpSwap and FetchAdd"]
"completion a wr_id 1" = "IBV_WC_SUCCESS"
"wire q from a: NAKs" = "none"

[scenario."CE-marked SEND (CNP: per device profile)"]
"wire q from a: CNP after CE" = "no"
"wire q from a: ICRCs" = "bad on FLUSH ×2"
[note."CE-marked SEND (CNP: per device profile)"]
"wire q from a: CNP after CE" = "RoCEv2: not 'no wait'. rxe has none: no CNP."

[scenario."empty"]

[scenario."smoke"]
"naks" = "none"
[note."smoke"]
"naks" = "IBA: fine"
"#;
        assert_eq!(render(&p), want);
        // No crashes, no scenarios: `[recorded]` alone, even empty.
        let bare = Profile { name: "x".into(), ..Default::default() };
        assert!(render(&bare).ends_with("\nname = \"x\"\n\n[recorded]\n"), "{}", render(&bare));
    }

    /// The committed profiles were written by this renderer: read back and
    /// rendered again, each is its file byte for byte (recording one again
    /// churns nothing but what the setup did).
    #[test]
    fn committed_profiles_render_back_unchanged() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let text = std::fs::read_to_string(&path).unwrap();
                let p = Profile::load(&path).unwrap();
                assert!(render(&p) == text, "{} renders differently", path.display());
                seen += 1;
            }
        }
        assert!(seen > 0, "no profiles in {}", dir.display());
    }

    /// Quotes, backslashes, newlines, control characters, dots and non-ASCII in
    /// every name and value come back as they went in, each observation still on
    /// a line of its own (no multi-line strings).
    #[test]
    fn names_with_any_characters_round_trip_one_line_each() {
        let awkward = [
            "a \"quoted\" name",
            "it's 'single' too",
            "both ' and \"",
            "back\\slash \\\\ and \\n",
            "two\nlines\r\n",
            "tab\there",
            "ctl \u{0} \u{1} \u{8} \u{c} \u{1b} \u{1f} \u{7f}",
            "dotted.name.with.dots",
            "[scenario.\"x\"]",
            "naïve Ünïcödé — ✓ 中文 🦀",
            "\u{85} \u{2028} \u{feff}",
            "# not a comment",
            "bare_key-1",
            "true",
            "",
            "'''\"\"\"",
        ];
        let mut p = Profile { name: awkward.join("|"), ..Default::default() };
        for (i, a) in awkward.iter().enumerate() {
            let a = a.to_string();
            p.recorded.insert(a.clone(), a.clone());
            p.crashes.insert(a.clone(), format!("{i}: {a}"));
            let o: BTreeMap<String, String> =
                awkward.iter().map(|k| (k.to_string(), format!("{a}={k}"))).collect();
            p.scenario.insert(a.clone(), o.clone());
            p.note.insert(a, o);
        }
        let text = render(&p);
        let back: Profile = toml::from_str(&text).unwrap();
        assert_eq!(back, p);
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &text).unwrap();
        let loaded = Profile::load(file.path()).unwrap();
        assert_eq!(loaded.file.as_deref(), Some(file.path()), "where it was read from");
        assert_eq!(Profile { file: None, ..loaded }, p);
        // One line per key: 3 of header comment, `name`; a blank line and a header
        // for `[recorded]`, `[crashes]` (and its comment) and each scenario, a
        // header alone for each note.
        let n = awkward.len();
        let lines = 3 + 1 + (2 + n) + (3 + n) + n * (2 + n) + n * (1 + n);
        assert_eq!(text.lines().count(), lines, "{text}");
    }

    proptest::proptest! {
        /// Any strings at all (any `char`) as names, keys and values round-trip.
        #[test]
        fn any_strings_round_trip(
            name in proptest::prelude::any::<String>(),
            scenario in proptest::prelude::any::<String>(),
            key in proptest::prelude::any::<String>(),
            value in proptest::prelude::any::<String>(),
        ) {
            let mut p = Profile { name: name.clone(), ..Default::default() };
            p.recorded.insert(key.clone(), value.clone());
            p.crashes.insert(scenario.clone(), value.clone());
            p.scenario.insert(scenario.clone(), obs(&[(&key, &value), (&name, &scenario)]));
            p.note.insert(scenario, obs(&[(&key, &name)]));
            let text = render(&p);
            let back: Profile = toml::from_str(&text)
                .map_err(|e| proptest::test_runner::TestCaseError::fail(format!("{e}\n{text}")))?;
            proptest::prop_assert_eq!(back, p);
        }
    }
}
