//! What the fuzz targets share: the capture a display filter runs over, and the
//! directory a fuzzed scenario is loaded from, its fixtures beside it.
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The frames every compiled filter is run over: `captures/malformed.pcap`,
/// which holds the most kinds of frame (and damaged ones).
pub static FILTER_CAPTURE: &[u8] = include_bytes!("../../captures/malformed.pcap");

/// A scenario that uses the fuzzed fixture (see [`Tree::fixture`]).
pub const FIXTURE_USER: &str =
    "name = \"user\"\nuse = [\"../../fixtures/fuzzed.toml\"]\n\n[endpoints.a]\n";

/// A directory laid out so that every `use` path the repository's scenarios
/// write resolves: `fixtures/` (a copy of `scenarios/fixtures/`), and a
/// scenario two levels below the root, with `fixtures` links one and two levels
/// up (`use = ["fixtures/…"]`, `["../fixtures/…"]`, `["../../fixtures/…"]`).
#[derive(Debug)]
pub struct Tree {
    /// Where the fuzzed scenario is loaded from.
    pub scenario: PathBuf,
    /// Where the fuzzed fixture is written.
    pub fixture: PathBuf,
    /// The scenario that uses it ([`FIXTURE_USER`]).
    pub user: PathBuf,
}

/// The process's [`Tree`], made once under `$TMPDIR`.
pub fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("roce-fuzz-scenario-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let fixtures = root.join("fixtures");
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/fixtures");
        copy_dir(&from, &fixtures).expect("copying scenarios/fixtures");
        let deep = root.join("a/b");
        std::fs::create_dir_all(&deep).expect("making the scenario's directory");
        for link in [root.join("a/fixtures"), deep.join("fixtures")] {
            std::os::unix::fs::symlink(&fixtures, link).expect("linking fixtures");
        }
        Tree {
            scenario: deep.join("fuzzed.toml"),
            fixture: fixtures.join("fuzzed.toml"),
            user: deep.join("user.toml"),
        }
    })
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()))?;
        } else {
            std::fs::copy(&p, to.join(e.file_name()))?;
        }
    }
    Ok(())
}
