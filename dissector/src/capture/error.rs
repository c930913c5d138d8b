//! [`CaptureError`]: what went wrong reading a capture, where, and what to do about it.
//!
//! Owns: the capture error, its kinds and hints. Imports: nothing of the project.

use core::fmt;
use std::io;

/// What went wrong. Where it went wrong is in [`CaptureError`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Reading (or opening) failed.
    Io(io::Error),
    /// The file has no bytes at all.
    Empty,
    /// The first bytes are neither pcap nor pcapng magic. `magic` holds the first (up
    /// to 4) bytes, `len` how many there were.
    NotCapture { magic: [u8; 4], len: usize },
    /// A capture format or version this reader does not handle.
    Unsupported { what: String, hint: &'static str },
    /// The file ends in the middle of a header or record. The `frames` records before
    /// it were read completely; a caller may keep them.
    Truncated { frames: u64, what: &'static str, needed: u64, available: u64 },
    /// A header field that cannot be right (garbage or corruption).
    Corrupt { what: String },
    /// A pcapng packet block names an interface no IDB of its section declared.
    UndeclaredInterface { id: u32, declared: u32 },
    /// Anything else (used by live capture): a message and an optional hint.
    Other { message: String, hint: Option<String> },
}

/// An error reading a capture: the [`ErrorKind`], plus where — the file (or
/// interface), byte offset and frame number when known. `Display` gives one line with
/// all of that and a hint, e.g.
/// `captures/x.pcap: byte 1040 (frame 12): record claims 4294967295 captured bytes,
/// more than the 262144 allowed; the file is probably corrupt or truncated`.
///
/// The error is one pointer wide, so `Result<Option<Record>, CaptureError>` stays
/// small on the per-packet path.
#[derive(Debug)]
pub struct CaptureError(Box<Inner>);

#[derive(Debug)]
struct Inner {
    kind: ErrorKind,
    origin: Option<String>,
    offset: Option<u64>,
    frame: Option<u64>,
}

impl CaptureError {
    #[cold]
    pub fn new(kind: ErrorKind) -> Self {
        CaptureError(Box::new(Inner { kind, origin: None, offset: None, frame: None }))
    }

    /// An [`ErrorKind::Other`] error.
    pub fn other(message: impl Into<String>, hint: Option<String>) -> Self {
        Self::new(ErrorKind::Other { message: message.into(), hint })
    }

    /// Names the source (a path, or e.g. `interface eth0`) in the message.
    pub fn with_origin(mut self, origin: impl Into<String>) -> Self {
        self.0.origin = Some(origin.into());
        self
    }

    /// Sets the byte offset in the file.
    pub fn at(mut self, offset: u64) -> Self {
        self.0.offset = Some(offset);
        self
    }

    /// Sets the (1-based) frame number.
    pub fn in_frame(mut self, frame: u64) -> Self {
        self.0.frame = Some(frame);
        self
    }

    pub fn kind(&self) -> &ErrorKind {
        &self.0.kind
    }

    pub fn origin(&self) -> Option<&str> {
        self.0.origin.as_deref()
    }

    pub fn offset(&self) -> Option<u64> {
        self.0.offset
    }

    pub fn frame(&self) -> Option<u64> {
        self.0.frame
    }

    /// Whether the file simply ends early (the frames before are good).
    pub fn is_truncated(&self) -> bool {
        matches!(self.0.kind, ErrorKind::Truncated { .. })
    }

    /// For a truncated file, how many complete frames were read before the cut.
    pub fn complete_frames(&self) -> Option<u64> {
        match self.0.kind {
            ErrorKind::Truncated { frames, .. } => Some(frames),
            _ => None,
        }
    }
}

impl From<io::Error> for CaptureError {
    fn from(e: io::Error) -> Self {
        CaptureError::new(ErrorKind::Io(e))
    }
}

impl std::error::Error for CaptureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0.kind {
            ErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

fn not_capture_hint(magic: &[u8]) -> &'static str {
    match magic {
        [0x1f, 0x8b, ..] => "the file is gzip-compressed; gunzip it first",
        [0x28, 0xb5, 0x2f, 0xfd] => "the file is zstd-compressed; unzstd it first",
        [0xfd, b'7', b'z', b'X'] => "the file is xz-compressed; unxz it first",
        [b's', b'n', b'o', b'o'] => "this is a snoop capture; convert it with `editcap -F pcapng IN OUT`",
        m if !m.is_empty() && m.iter().all(|&b| b.is_ascii_graphic() || b.is_ascii_whitespace()) => {
            "the file starts with text; was it saved with `tcpdump` (text output) instead of `tcpdump -w`, or is it a hex dump?"
        }
        _ => "expected a capture written by `tcpdump -w`, `tshark -w`, dumpcap or ibdump (pcap magic a1b2c3d4 or a1b23c4d, pcapng 0a0d0d0a); other formats can be converted with `editcap -F pcapng IN OUT`",
    }
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        let me = &*self.0;
        if let Some(o) = &me.origin {
            write!(f, "{o}")?;
            sep = ": ";
        }
        if let Some(off) = me.offset {
            write!(f, "{sep}byte {off}")?;
            sep = ": ";
            if let Some(n) = me.frame {
                write!(f, " (frame {n})")?;
            }
        } else if let Some(n) = me.frame {
            write!(f, "{sep}frame {n}")?;
            sep = ": ";
        }
        f.write_str(sep)?;
        match &me.kind {
            ErrorKind::Io(e) => match e.kind() {
                io::ErrorKind::NotFound => write!(f, "{e}; hint: check the path"),
                io::ErrorKind::PermissionDenied => write!(
                    f,
                    "{e}; hint: captures written by tcpdump as root are often unreadable by others; chmod or chown the file"
                ),
                _ => write!(f, "{e}"),
            },
            ErrorKind::Empty => f.write_str(
                "the file is empty; hint: the capture was probably stopped before anything was written",
            ),
            ErrorKind::NotCapture { magic, len } => {
                let m = &magic[..(*len).min(4)];
                f.write_str("not a pcap or pcapng file (magic 0x")?;
                for b in m {
                    write!(f, "{b:02x}")?;
                }
                if *len < 4 {
                    write!(f, ", only {len} bytes long")?;
                }
                write!(f, "); hint: {}", not_capture_hint(m))
            }
            ErrorKind::Unsupported { what, hint } => write!(f, "{what}; hint: {hint}"),
            ErrorKind::Truncated { frames, what, needed, available } => write!(
                f,
                "the file ends in the middle of {what} ({needed} bytes needed, {available} present) after {frames} complete frames; \
                 the capture was cut short (disk full, or copied while still being written?) — the {frames} frames before it are intact"
            ),
            ErrorKind::Corrupt { what } => {
                write!(f, "{what}; the file is probably corrupt or truncated")
            }
            ErrorKind::UndeclaredInterface { id, declared } => write!(
                f,
                "packet names interface {id}, but its section declares only {declared} interface{}; \
                 the file is probably corrupt or was spliced from several captures",
                if *declared == 1 { "" } else { "s" }
            ),
            ErrorKind::Other { message, hint } => {
                f.write_str(message)?;
                if let Some(h) = hint {
                    write!(f, "; hint: {h}")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_has_origin_offset_frame_and_hint() {
        let e = CaptureError::new(ErrorKind::Corrupt {
            what: "record claims 4294967295 captured bytes, more than the 262144 allowed".into(),
        })
        .with_origin("captures/x.pcap")
        .at(1040)
        .in_frame(12);
        assert_eq!(
            e.to_string(),
            "captures/x.pcap: byte 1040 (frame 12): record claims 4294967295 captured bytes, \
             more than the 262144 allowed; the file is probably corrupt or truncated"
        );
        let e = CaptureError::new(ErrorKind::NotCapture { magic: *b"<htm", len: 4 });
        let s = e.to_string();
        assert!(s.starts_with("not a pcap or pcapng file (magic 0x3c68746d); hint: "), "{s}");
        let e = CaptureError::new(ErrorKind::NotCapture { magic: [0x1f, 0x8b, 8, 0], len: 4 });
        assert!(e.to_string().contains("gunzip"));
    }
}
