//! Helpers shared by the end-to-end tests in `tests/tests/`.
use std::path::{Path, PathBuf};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// Every capture under `captures/` (pcap and pcapng), sorted.
pub fn captures() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if matches!(p.extension().and_then(|e| e.to_str()), Some("pcap" | "pcapng")) {
                out.push(p);
            }
        }
    }
    let mut v = Vec::new();
    walk(&root().join("captures"), &mut v);
    v.sort();
    v
}

/// `from` copied into `to`, directories and all (a test's own copy of part of
/// the tree, such as `scenarios/fixtures`).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy's directory");
    for e in std::fs::read_dir(from).expect("read the tree to copy").flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_tree(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).expect("copy a file of the tree");
        }
    }
}

/// A directory of one test's own, removed with everything in it when the value is
/// dropped: when the test ends, passed or failed (a panic unwinds through it).
/// Tests in one binary run side by side, so each takes its own.
#[derive(Debug)]
pub struct Scratch(tempfile::TempDir);

impl Scratch {
    /// `NAME` inside the directory (nothing is created).
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.0.path().join(name)
    }
}

/// A new [`Scratch`] directory under the system's temporary directory.
pub fn scratch() -> Scratch {
    Scratch(tempfile::Builder::new().prefix("roce-test-").tempdir().expect("temp dir"))
}

/// Output of one in-process `roce` run.
#[derive(Debug)]
pub struct Run {
    pub code: u8,
    pub out: String,
    pub err: String,
}

/// Runs the real CLI in-process: `roce ARGS…`.
pub fn roce<S: AsRef<str>>(args: &[S]) -> Run {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let argv =
        std::iter::once("roce".to_string()).chain(args.iter().map(|s| s.as_ref().to_string()));
    let code = roce::cli::run(argv, &mut out, &mut err);
    Run {
        code,
        out: String::from_utf8_lossy(&out).into_owned(),
        err: String::from_utf8_lossy(&err).into_owned(),
    }
}

/// The temporaries an atomic write left in `dir` (`.NAME.XXXXXX.tmp`, see
/// `dissector::capture::AtomicFile`): none, once every write has committed or failed.
pub fn temporaries(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    rd.flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') && n.ends_with(".tmp"))
        .collect()
}
