//! A device profile as TOML (`roce run --record-profile`): a comment saying what
//! it is, then stable order, one observation per line, so two profiles diff line
//! by line; [`crate::results::profile::Profile::load`] reads it back.
//!
//! Owns: [`render`] for a profile. Imports: the results' [`Profile`]; nothing else.
use crate::results::profile::Profile;

/// The profile as TOML.
pub(crate) fn render(p: &Profile) -> String {
    let mut s = String::from(
        "# A roce device profile: what this setup does where the spec leaves room or where\n\
         # it deviates, per scenario. Written by `roce run --record-profile`; compared by\n\
         # `roce run --profile` (every difference fails the scenario).\n",
    );
    s += &format!("name = {}\n\n[recorded]\n", quote(&p.name));
    for (k, v) in &p.recorded {
        s += &format!("{} = {}\n", key(k), quote(v));
    }
    if !p.crashes.is_empty() {
        s += "\n# Scenarios that crash this setup: skipped under this profile (written by people).\n[crashes]\n";
        for (name, why) in &p.crashes {
            s += &format!("{} = {}\n", quote(name), quote(why));
        }
    }
    for (name, obs) in &p.scenario {
        s += &format!("\n[scenario.{}]\n", quote(name));
        for (k, v) in obs {
            s += &format!("{} = {}\n", quote(k), quote(v));
        }
        if let Some(notes) = p.note.get(name).filter(|n| !n.is_empty()) {
            s += &format!("[note.{}]\n", quote(name));
            for (k, v) in notes {
                s += &format!("{} = {}\n", quote(k), quote(v));
            }
        }
    }
    s
}

fn key(k: &str) -> String {
    if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        k.to_string()
    } else {
        quote(k)
    }
}

/// A TOML basic string.
fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\t' => q.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => q.push_str(&format!("\\u{:04x}", c as u32)),
            c => q.push(c),
        }
    }
    q.push('"');
    q
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
}
