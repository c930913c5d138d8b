//! What the lab says while it works: timestamped progress lines on stderr (a live
//! status line on a terminal), or handed to a caller that draws its own line
//! there; and [`write_fd`], the one way the lab's threads write to stdout/stderr.
//!
//! Owns: [`Progress`], the progress sink, [`write_fd`]. Imports: nothing from the crate.
use std::io::{IsTerminal, Write};
use std::os::fd::BorrowedFd;
use std::time::Instant;

/// Where the lab's progress lines go instead of stderr while a caller draws its
/// own live line there (`roce fuzz`'s bar): that caller prints them above it.
type Sink = Box<dyn Fn(&str) + Send + Sync>;
static SINK: std::sync::RwLock<Option<Sink>> = std::sync::RwLock::new(None);

/// Sends the lab's progress lines to `sink` (and draws no live line) until
/// [`progress_to_stderr`].
pub fn progress_to(sink: impl Fn(&str) + Send + Sync + 'static) {
    *SINK.write().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(sink));
}

/// The lab's progress goes to stderr again.
pub fn progress_to_stderr() {
    *SINK.write().unwrap_or_else(|e| e.into_inner()) = None;
}

/// Progress on stderr: timestamped lines, and on a terminal a live status line.
pub struct Progress {
    start: Instant,
    tty: bool,
    quiet: bool,
}

impl Progress {
    pub fn new(quiet: bool) -> Progress {
        Progress { start: Instant::now(), tty: std::io::stderr().is_terminal(), quiet }
    }
    pub fn say(&self, msg: &str) {
        if self.quiet {
            return;
        }
        if let Some(sink) = SINK.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
            sink(&format!("[{:6.1}s] {msg}", self.start.elapsed().as_secs_f64()));
            return;
        }
        let mut e = std::io::stderr().lock();
        if self.tty {
            let _ = write!(e, "\r\x1b[K");
        }
        let _ = writeln!(e, "[{:6.1}s] {msg}", self.start.elapsed().as_secs_f64());
    }
    /// A transient line (terminal only).
    pub fn live(&self, msg: &str) {
        if self.tty && !self.quiet && SINK.read().map_or(true, |s| s.is_none()) {
            let msg: String = msg.chars().take(100).collect();
            let _ = write!(
                std::io::stderr().lock(),
                "\r\x1b[K[{:6.1}s] {msg}",
                self.start.elapsed().as_secs_f64()
            );
        }
    }
}

/// Writes `data` to `fd` whole, under a lock of our own so that lines written by
/// several threads never interleave. `roce`'s main thread holds stdout's std lock for
/// the whole command (see `cli::main`), so lab threads (the echo of `lab run`, the
/// agent's log) must not go through `std::io::stdout()`: they would wait forever.
/// Stderr is not held, but its lines go through here too, to stay whole.
pub fn write_fd(fd: BorrowedFd<'_>, data: &[u8]) {
    use std::os::fd::{AsRawFd, FromRawFd};
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: `fd` is borrowed, so it stays open for this call; ManuallyDrop keeps
    // the File from closing a descriptor it does not own.
    let mut f = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd.as_raw_fd()) });
    let _ = f.write_all(data);
}

/// [`write_fd`] to standard output.
pub fn to_stdout(data: &[u8]) {
    use std::os::fd::AsFd;
    write_fd(std::io::stdout().as_fd(), data)
}

/// [`write_fd`] to standard error.
pub fn to_stderr(data: &[u8]) {
    use std::os::fd::AsFd;
    write_fd(std::io::stderr().as_fd(), data)
}
