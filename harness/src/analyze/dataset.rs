//! Several captures, or a directory of them, written as one Hive-partitioned
//! Parquet dataset: `DIR/capture=NAME/part-0.parquet`, one partition per capture,
//! the captures read side by side (one thread and one writer each).
//!
//! The dataset is all or nothing: it is built in a temporary directory beside
//! `DIR` (`.DIR.XXXXXX.tmp`) and renamed to `DIR` only once every capture was
//! read to its end and every partition written. A damaged capture, or one that
//! cannot be read, leaves no `DIR` (an existing one is left as it was); each
//! capture that failed is named with its error. A `DIR` that exists and is not
//! empty is replaced only when asked (`--force`).
//!
//! Owns: which captures make a dataset and their partition names
//! ([`captures`], [`hive_escape`]), the temporary directory and its commit
//! ([`Dataset`]), and running work per capture on a bounded number of threads
//! ([`each`], [`Results`]). Imports: `super::Error`; dissector's capture error. What is written
//! into a partition is the caller's (`decode`, `flows`).
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::anyhow;

use super::Error;

/// The column a dataset is partitioned by: `capture=NAME`.
pub(super) const PARTITION: &str = "capture";

/// One capture of a dataset: where it is, and its partition's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Capture {
    pub path: PathBuf,
    /// A file given by itself: its name without `.pcap`/`.pcapng`; a capture found
    /// in a directory: its path below that directory, without the extension
    /// (`lab/rc_pingpong`).
    pub name: String,
}

/// Whether `inputs` make a dataset rather than one capture: several of them, or a
/// directory.
pub(super) fn is_dataset(inputs: &[&Path]) -> bool {
    inputs.len() > 1 || inputs.iter().any(|p| p.is_dir())
}

/// The captures of `inputs`, in order: each file as itself, each directory's
/// `.pcap` and `.pcapng` files (subdirectories too), sorted by name. Two captures
/// with the same partition name, or a directory with no capture, are bad input.
pub(super) fn captures(inputs: &[&Path]) -> Result<Vec<Capture>, Error> {
    let mut out: Vec<Capture> = Vec::new();
    for &input in inputs {
        if input.is_dir() {
            let mut found = Vec::new();
            walk(input, &mut found).map_err(Error::bad_input)?;
            if found.is_empty() {
                return Err(Error::bad_input(anyhow!(
                    "{}: no .pcap or .pcapng file in this directory (or below it)",
                    input.display()
                )));
            }
            found.sort();
            for path in found {
                let rel = path.strip_prefix(input).unwrap_or(&path);
                let name = stem(rel).to_string_lossy().replace(std::path::MAIN_SEPARATOR, "/");
                out.push(Capture { path, name });
            }
        } else {
            let name = stem(input).file_name().unwrap_or_default().to_string_lossy().into_owned();
            out.push(Capture { path: input.to_path_buf(), name });
        }
    }
    for (i, c) in out.iter().enumerate() {
        if c.name.is_empty() {
            return Err(Error::bad_input(anyhow!(
                "{}: a capture needs a file name to name its partition",
                c.path.display()
            )));
        }
        if let Some(d) = out[..i].iter().find(|d| d.name == c.name) {
            return Err(Error::bad_input(anyhow!(
                "{} and {} would both be the partition {PARTITION}={}; hint: rename one, or give them in two runs",
                d.path.display(),
                c.path.display(),
                hive_escape(&c.name)
            )));
        }
    }
    Ok(out)
}

/// The capture files below `dir`.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let rd = std::fs::read_dir(dir).map_err(|e| anyhow!("{}: {e}", dir.display()))?;
    for e in rd {
        let p = e.map_err(|e| anyhow!("{}: {e}", dir.display()))?.path();
        if p.is_dir() {
            walk(&p, out)?;
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("pcap" | "pcapng")) {
            out.push(p);
        }
    }
    Ok(())
}

/// The error that ended the reading of capture `c`, naming the capture (the
/// reader's errors name it already, with the frame and byte; others get it added).
pub(super) fn capture_error(c: &Capture, e: &dissector::capture::CaptureError) -> anyhow::Error {
    let text = e.to_string();
    let path = c.path.display().to_string();
    if text.contains(&path) {
        anyhow!("{text}")
    } else {
        anyhow!("{path}: {text}")
    }
}

/// `path` without a `.pcap` or `.pcapng` extension.
fn stem(path: &Path) -> PathBuf {
    match path.extension().and_then(|e| e.to_str()) {
        Some("pcap" | "pcapng") => path.with_extension(""),
        _ => path.to_path_buf(),
    }
}

/// A partition value as Hive writes it in a directory name: `%XX` (upper-case hex)
/// for control characters and `"#%'*/:=?\{[]^` and DEL, as Hive's
/// `FileUtils.escapePathName` does; Spark and DuckDB read the value back unescaped.
pub(super) fn hive_escape(value: &str) -> String {
    let mut s = String::with_capacity(value.len());
    for c in value.chars() {
        let escaped = matches!(
            c,
            '\u{1}'
                ..='\u{1f}'
                    | '"'
                    | '#'
                    | '%'
                    | '\''
                    | '*'
                    | '/'
                    | ':'
                    | '='
                    | '?'
                    | '\\'
                    | '\u{7f}'
                    | '{'
                    | '['
                    | ']'
                    | '^'
        );
        if escaped {
            s.push_str(&format!("%{:02X}", c as u32));
        } else {
            s.push(c);
        }
    }
    s
}

/// A dataset being written: a temporary directory beside its destination, renamed
/// into place by [`Dataset::commit`]; dropped uncommitted, it is removed with
/// everything in it.
#[derive(Debug)]
pub(crate) struct Dataset {
    tmp: tempfile::TempDir,
    dest: PathBuf,
}

impl Dataset {
    /// Starts the dataset `dest`. A `dest` that exists and is not an empty
    /// directory is refused (bad input) unless `force`; a `dest` whose parent
    /// cannot be written is the environment's error.
    pub(super) fn create(dest: &Path, force: bool) -> Result<Dataset, Error> {
        if let Ok(meta) = std::fs::symlink_metadata(dest) {
            if !meta.is_dir() {
                return Err(Error::bad_input(anyhow!(
                    "{}: exists and is not a directory; a dataset of several captures is a directory (give another -w)",
                    dest.display()
                )));
            }
            let empty = std::fs::read_dir(dest)
                .map_err(|e| Error::environment(anyhow!("{}: {e}", dest.display())))?
                .next()
                .is_none();
            if !empty && !force {
                return Err(Error::bad_input(anyhow!(
                    "{}: the directory exists and is not empty; hint: give --force to replace it, or name a new directory",
                    dest.display()
                )));
            }
        }
        let name = dest.file_name().ok_or_else(|| {
            Error::bad_input(anyhow!("{}: names no directory to create", dest.display()))
        })?;
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(name);
        prefix.push(".");
        let mut b = tempfile::Builder::new();
        b.prefix(&prefix).suffix(".tmp");
        // What a new directory would get (0777 less the umask), not the usual 0700.
        #[cfg(unix)]
        b.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o777));
        let tmp = b
            .tempdir_in(parent)
            .map_err(|e| Error::environment(anyhow!("cannot create {}: {e}", dest.display())))?;
        Ok(Dataset { tmp, dest: dest.to_path_buf() })
    }

    /// The directory of the table `table` (`""`: the dataset's top) inside the
    /// temporary, created.
    fn partition_dir(&self, table: &str, name: &str) -> Result<PathBuf, Error> {
        let dir = self.tmp.path().join(table).join(format!("{PARTITION}={}", hive_escape(name)));
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::environment(anyhow!("cannot create {}: {e}", dir.display())))?;
        Ok(dir)
    }

    /// Where the partition of capture `name` goes: `capture=NAME/part-0.parquet`
    /// (its directory created).
    pub(super) fn part(&self, name: &str) -> Result<PathBuf, Error> {
        Ok(self.partition_dir("", name)?.join("part-0.parquet"))
    }

    /// [`Dataset::part`] of one of several tables: `TABLE/capture=NAME/part-0.parquet`.
    pub(super) fn table_part(&self, table: &str, name: &str) -> Result<PathBuf, Error> {
        Ok(self.partition_dir(table, name)?.join("part-0.parquet"))
    }

    /// Renames the dataset into place. What was at the destination (an empty
    /// directory, or with `--force` any directory) is moved aside first and removed
    /// once the new dataset is there.
    pub(crate) fn commit(self) -> Result<(), Error> {
        let Dataset { tmp, dest } = self;
        let fail = |e: std::io::Error| {
            Error::environment(anyhow!("cannot rename the dataset into {}: {e}", dest.display()))
        };
        let aside = if dest.exists() {
            let old = PathBuf::from(format!("{}.old.tmp", tmp.path().display()));
            std::fs::rename(&dest, &old).map_err(fail)?;
            Some(old)
        } else {
            None
        };
        let built = tmp.keep();
        if let Err(e) = std::fs::rename(&built, &dest) {
            // Put the old one back; the new one goes.
            if let Some(old) = &aside {
                let _ = std::fs::rename(old, &dest);
            }
            let _ = std::fs::remove_dir_all(&built);
            return Err(fail(e));
        }
        if let Some(old) = aside {
            std::fs::remove_dir_all(&old).map_err(|e| {
                Error::environment(anyhow!(
                    "the dataset is in {}, but the one it replaced could not be removed from {}: {e}",
                    dest.display(),
                    old.display()
                ))
            })?;
        }
        Ok(())
    }
}

/// What work on each capture of a dataset came to, in the captures' order: `None`
/// for a capture not started (after another failed).
pub(crate) type Results<T> = Vec<Option<Result<T, Error>>>;

/// `work` on every capture, `jobs` at a time, each on a thread of its own. Once a
/// capture has failed no other is started (those already started run to their end):
/// `None` for a capture not started.
pub(super) fn each<T: Send>(
    captures: &[Capture],
    jobs: usize,
    work: impl Fn(&Capture) -> Result<T, Error> + Sync,
) -> Results<T> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Results<T>> = Mutex::new(captures.iter().map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, captures.len().max(1)) {
            s.spawn(|| loop {
                if failed.load(Ordering::Relaxed) {
                    return;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(c) = captures.get(i) else { return };
                let r = work(c);
                if r.is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                if let Ok(mut all) = results.lock() {
                    all[i] = Some(r);
                }
            });
        }
    });
    results.into_inner().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_values_are_escaped_as_hive_does() {
        assert_eq!(hive_escape("rc_pingpong"), "rc_pingpong");
        assert_eq!(hive_escape("lab/rc=1"), "lab%2Frc%3D1");
        assert_eq!(hive_escape("a%b:c#d?e*f"), "a%25b%3Ac%23d%3Fe%2Af");
        assert_eq!(hive_escape("tab\there"), "tab%09here");
        assert_eq!(hive_escape("ümlaut space-ok.1"), "ümlaut space-ok.1");
    }

    #[test]
    fn captures_are_named_by_stem_or_path_below_the_directory() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("lab")).unwrap();
        for f in ["b.pcap", "a.pcapng", "notes.txt", "lab/c.pcapng"] {
            std::fs::write(d.path().join(f), b"").unwrap();
        }
        let got = captures(&[d.path()]).unwrap();
        let names: Vec<&str> = got.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "lab/c"]);
        let other = tempfile::tempdir().unwrap();
        let b2 = other.path().join("b.pcapng");
        std::fs::write(&b2, b"").unwrap();
        let e = captures(&[d.path(), b2.as_path()]).unwrap_err().to_string();
        assert!(e.contains("capture=b") && e.contains("b.pcapng"), "{e}");
        let empty = tempfile::tempdir().unwrap();
        let e = captures(&[empty.path()]).unwrap_err().to_string();
        assert!(e.contains("no .pcap or .pcapng"), "{e}");
    }

    #[test]
    fn a_dataset_is_all_or_nothing_and_refuses_a_full_directory() {
        let d = tempfile::tempdir().unwrap();
        let dest = d.path().join("out");
        let ds = Dataset::create(&dest, false).unwrap();
        std::fs::write(ds.part("x").unwrap(), b"1").unwrap();
        drop(ds);
        assert!(!dest.exists(), "dropped uncommitted: nothing");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "no temporary left");
        let ds = Dataset::create(&dest, false).unwrap();
        std::fs::write(ds.part("lab/x").unwrap(), b"1").unwrap();
        ds.commit().unwrap();
        assert!(dest.join("capture=lab%2Fx/part-0.parquet").is_file());
        let e = Dataset::create(&dest, false).unwrap_err();
        assert_eq!(e.kind(), super::super::ErrorKind::BadInput);
        assert!(e.to_string().contains("--force"), "{e}");
        let ds = Dataset::create(&dest, true).unwrap();
        std::fs::write(ds.table_part("flows", "y").unwrap(), b"2").unwrap();
        ds.commit().unwrap();
        assert!(!dest.join("capture=lab%2Fx").exists(), "replaced, not merged");
        assert!(dest.join("flows/capture=y/part-0.parquet").is_file());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1, "only the dataset");
    }

    #[test]
    fn after_a_failure_no_capture_is_started() {
        let caps: Vec<Capture> = (0..6)
            .map(|i| Capture { path: PathBuf::from(format!("{i}")), name: format!("{i}") })
            .collect();
        let got = each(&caps, 1, |c| {
            if c.name == "2" {
                Err(Error::bad_input(anyhow!("bad")))
            } else {
                Ok(c.name.clone())
            }
        });
        assert!(matches!(&got[1], Some(Ok(n)) if n == "1"));
        assert!(matches!(got[2], Some(Err(_))));
        assert!(got[3..].iter().all(|r| r.is_none()), "none started after the failure");
        let all = each(&caps, 4, |c| Ok::<_, Error>(c.name.len()));
        assert!(all.iter().all(|r| matches!(r, Some(Ok(1)))));
    }
}
