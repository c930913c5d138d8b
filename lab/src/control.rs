//! The control channel's framing, shared by the three parties that talk over it:
//! `roce` clients ↔ the lab daemon (a Unix socket on the host) and the daemon ↔ the
//! command runner in each VM, [`guest`](super::guest) (a virtio-serial port, so
//! control traffic never touches the RoCE wire).
//!
//! A frame is a 10-byte header and a payload:
//!
//! ```text
//! +-------+------+-----------+-----------+-------------+
//! | 0xA7  | kind | id (u32)  | len (u32) | payload     |
//! +-------+------+-----------+-----------+-------------+
//! ```
//!
//! `id` ties stdout, stderr and exit frames to the command that produced them; the
//! payload is raw bytes for output and JSON for everything else. A wrong magic byte,
//! an unknown kind or a length above [`MAX_PAYLOAD`] is an error that names the
//! offending value: the stream cannot be trusted past it.
//!
//! A virtio-serial port outlives the guest process reading it, so a guest that
//! restarts may find the tail of an old frame in its input. It therefore discards
//! bytes until it sees a [`Kind::Sync`] frame (whose encoding is unique, see
//! [`Frame::sync`]), which the daemon sends in answer to every [`Kind::Hello`].
//!
//! Owns: the frame format, the [`Kind`]s and the JSON messages they carry, the
//! heartbeat and poll intervals. Imports: [`fault`](super::fault)'s `Dir` only.

use std::io::{self, Read, Write};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::fault::Dir;

pub const MAGIC: u8 = 0xA7;
pub const HEADER_LEN: usize = 10;
/// No single frame carries more than this (output is sent in chunks far smaller).
pub const MAX_PAYLOAD: usize = 4 << 20;
const SYNC_PAYLOAD: &[u8; 8] = b"ROCESYNC";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// guest → daemon: a guest (re)started. JSON [`Hello`].
    Hello = 1,
    /// daemon → guest: start of a trustworthy stream. Payload `ROCESYNC`.
    Sync = 2,
    /// → guest / → daemon: run a command. JSON [`ExecRequest`] or [`Request`].
    Request = 3,
    Stdout = 4,
    Stderr = 5,
    /// The command ended. JSON [`ExitStatus`].
    Exit = 6,
    /// Kill the command `id` (its whole process group).
    Kill = 7,
    /// daemon → client: the answer to a [`Request`]. JSON [`Response`].
    Response = 8,
    /// daemon → client: one frame the switch carried during a run begun with
    /// `live: true`. Binary [`WireFrame`].
    Wire = 9,
    /// client → daemon → guest: bytes for the stdin of command `id` (started with
    /// `stdin: true`); an empty payload closes it.
    Stdin = 10,
    /// guest → daemon: still alive, every [`HEARTBEAT`]; a VM that stops sending
    /// them is hung (a frozen or panicked guest keeps its qemu, and its socket, up).
    Heartbeat = 11,
}

/// How often the guest in a VM says it is alive.
pub const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(2);
/// How long the daemon waits without a word from a VM before calling it hung.
/// Generous: two TCG guests on a busy two-core host can stall for seconds.
pub const HUNG_AFTER: std::time::Duration = std::time::Duration::from_secs(12);

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Hello,
            2 => Kind::Sync,
            3 => Kind::Request,
            4 => Kind::Stdout,
            5 => Kind::Stderr,
            6 => Kind::Exit,
            7 => Kind::Kill,
            8 => Kind::Response,
            9 => Kind::Wire,
            10 => Kind::Stdin,
            11 => Kind::Heartbeat,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: Kind,
    pub id: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    pub fn new(kind: Kind, id: u32, payload: Vec<u8>) -> Frame {
        Frame { kind, id, payload }
    }

    pub fn json<T: Serialize>(kind: Kind, id: u32, value: &T) -> Frame {
        // Serializing our own plain structs cannot fail.
        let payload = serde_json::to_vec(value).unwrap_or_default();
        Frame { kind, id, payload }
    }

    pub fn sync() -> Frame {
        Frame::new(Kind::Sync, 0, SYNC_PAYLOAD.to_vec())
    }

    /// Decodes the JSON payload, saying which frame kind was malformed.
    pub fn parse<T: for<'de> Deserialize<'de>>(&self) -> io::Result<T> {
        serde_json::from_slice(&self.payload).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("malformed {:?} frame (id {}): {e}", self.kind, self.id),
            )
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(HEADER_LEN + self.payload.len());
        v.push(MAGIC);
        v.push(self.kind as u8);
        v.extend_from_slice(&self.id.to_be_bytes());
        v.extend_from_slice(&(self.payload.len() as u32).to_be_bytes());
        v.extend_from_slice(&self.payload);
        v
    }

    /// Writes the frame in one `write_all` so frames from several threads sharing a
    /// locked writer never interleave.
    pub fn write_to<W: Write>(&self, w: &mut W) -> io::Result<()> {
        w.write_all(&self.encode())?;
        w.flush()
    }
}

/// The encoded sync frame: what a (re)starting guest scans its input for.
pub fn sync_frame_bytes() -> Vec<u8> {
    Frame::sync().encode()
}

/// Reads one frame. `Ok(None)` on a clean end of stream (at a frame boundary).
pub fn read_frame<R: Read>(r: &mut R) -> io::Result<Option<Frame>> {
    let mut hdr = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        match r.read(&mut hdr[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "control stream ended inside a frame header ({got} of {HEADER_LEN} bytes)"
                    ),
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if hdr[0] != MAGIC {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "control stream out of sync: frame starts with byte {:#04x}, expected {MAGIC:#04x}",
                hdr[0]
            ),
        ));
    }
    let kind = Kind::from_u8(hdr[1]).ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidData, format!("unknown control frame kind {}", hdr[1]))
    })?;
    let id = u32::from_be_bytes([hdr[2], hdr[3], hdr[4], hdr[5]]);
    let len = u32::from_be_bytes([hdr[6], hdr[7], hdr[8], hdr[9]]) as usize;
    if len > MAX_PAYLOAD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("control frame {kind:?} announces {len} bytes, more than the limit of {MAX_PAYLOAD}"),
        ));
    }
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("control stream ended inside a {kind:?} frame of {len} bytes: {e}"),
        )
    })?;
    Ok(Some(Frame { kind, id, payload }))
}

/// Discards input until the sync frame has gone past. Returns `Ok(false)` at end of
/// stream.
pub fn skip_to_sync<R: Read>(r: &mut R) -> io::Result<bool> {
    skip_past(r, &sync_frame_bytes())
}

/// After garbage on a guest's stream (a guest died mid-frame): discards input up
/// to the next Hello frame and returns it. `Ok(None)` at end of stream.
pub fn resync_hello<R: Read>(r: &mut R) -> io::Result<Option<Frame>> {
    if !skip_past(r, &[MAGIC, Kind::Hello as u8, 0, 0, 0, 0])? {
        return Ok(None);
    }
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > 64 * 1024 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a Hello frame of {len} bytes is not believable"),
        ));
    }
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload)?;
    Ok(Some(Frame { kind: Kind::Hello, id: 0, payload }))
}

/// Reads until `pat` has gone past. `pat[0]` must occur nowhere else in `pat`, so
/// a mismatch can only restart the match at the current byte.
fn skip_past<R: Read>(r: &mut R, pat: &[u8]) -> io::Result<bool> {
    let mut matched = 0;
    let mut b = [0u8; 1];
    loop {
        match r.read(&mut b) {
            Ok(0) => return Ok(false),
            Ok(_) => {
                if b[0] == pat[matched] {
                    matched += 1;
                    if matched == pat.len() {
                        return Ok(true);
                    }
                } else {
                    matched = usize::from(b[0] == pat[0]);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// guest → daemon, on start.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Hello {
    /// Changes every time a guest starts.
    pub instance: u64,
    pub vm: String,
    pub kernel: String,
}

/// daemon → guest: run `sh -c cmd`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExecRequest {
    pub cmd: String,
    /// Kill the command's process group after this long.
    pub timeout_ms: Option<u64>,
    /// Feed the command's stdin from [`Kind::Stdin`] frames (else /dev/null).
    #[serde(default)]
    pub stdin: bool,
}

/// How a command ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ExitStatus {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    #[serde(default)]
    pub timed_out: bool,
    /// The command could not be run at all, or the lab lost it (guest restarted).
    pub error: Option<String>,
    /// Wall time inside the VM.
    #[serde(default)]
    pub elapsed_ms: u64,
}

impl ExitStatus {
    pub fn failed(msg: impl Into<String>) -> ExitStatus {
        ExitStatus { error: Some(msg.into()), ..ExitStatus::default() }
    }
    pub fn success(&self) -> bool {
        self.code == Some(0) && !self.timed_out && self.error.is_none()
    }
    /// A shell-style exit code: the command's own, 124 on timeout, 128+N for a
    /// signal, 125 when the lab could not run it.
    pub fn shell_code(&self) -> u8 {
        if self.timed_out {
            124
        } else if self.error.is_some() {
            125
        } else if let Some(c) = self.code {
            (c & 0xff) as u8
        } else if let Some(s) = self.signal {
            (128 + (s & 0x7f)) as u8
        } else {
            125
        }
    }
    pub fn describe(&self) -> String {
        let mut s = if self.timed_out {
            format!("timed out after {:.1} s (killed)", self.elapsed_ms as f64 / 1000.0)
        } else if let Some(e) = &self.error {
            format!("not run: {e}")
        } else if let Some(c) = self.code {
            format!("exit {c}")
        } else if let Some(sig) = self.signal {
            format!("killed by signal {sig}")
        } else {
            "unknown status".to_string()
        };
        if !self.timed_out && self.error.is_none() {
            s.push_str(&format!(" in {:.1} s", self.elapsed_ms as f64 / 1000.0));
        }
        s
    }
}

/// client → daemon.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Run a command in a VM; the answer is a stream of Stdout/Stderr frames and one
    /// Exit frame with the request's id.
    Exec {
        vm: String,
        cmd: String,
        timeout_ms: Option<u64>,
        #[serde(default)]
        stdin: bool,
    },
    /// Lab status and switch counters.
    Status,
    /// Start a recorded run: the switch records to `pcap` (absolute path) and applies
    /// `rules` (parsed by the client, carried as data) until `RunEnd` or until this
    /// connection closes.
    /// With `live`, every frame the switch carries is also sent back on this
    /// connection as a [`Kind::Wire`] frame while the run lasts.
    RunBegin {
        pcap: Option<String>,
        rules: Vec<super::fault::Rule>,
        seed: u64,
        #[serde(default)]
        live: bool,
        /// Share the switch with other runs, owning only what this claims (no
        /// rules then); without it the run has the switch to itself.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        claim: Option<super::claim::Claim>,
    },
    RunEnd,
    /// Stop the VMs and the daemon.
    Shutdown,
}

/// daemon → client.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Response {
    pub ok: bool,
    pub error: Option<String>,
    #[serde(default)]
    pub data: serde_json::Value,
}

impl Response {
    pub fn ok(data: serde_json::Value) -> Response {
        Response { ok: true, error: None, data }
    }
    pub fn err(msg: impl Into<String>) -> Response {
        Response { ok: false, error: Some(msg.into()), data: serde_json::Value::Null }
    }
}

/// One frame of the wire as the switch recorded it, streamed to a live run's client.
/// Payload layout: sender (0 = a, 1 = b), timestamp (u64 ns, big-endian), comment
/// length (u16) and UTF-8 comment, then the Ethernet frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireFrame {
    pub sender: Dir,
    pub ts_ns: u64,
    pub comment: Option<String>,
    pub data: Vec<u8>,
}

const WIRE_FIXED: usize = 1 + 8 + 2;

impl WireFrame {
    pub fn to_frame(&self) -> Frame {
        let comment = self.comment.as_deref().unwrap_or("").as_bytes();
        let comment = &comment[..comment.len().min(u16::MAX as usize)];
        let mut p = Vec::with_capacity(WIRE_FIXED + comment.len() + self.data.len());
        p.push(self.sender.index() as u8);
        p.extend_from_slice(&self.ts_ns.to_be_bytes());
        p.extend_from_slice(&(comment.len() as u16).to_be_bytes());
        p.extend_from_slice(comment);
        p.extend_from_slice(&self.data);
        Frame::new(Kind::Wire, 0, p)
    }

    pub fn parse(f: &Frame) -> io::Result<WireFrame> {
        let bad = |what: &str| {
            io::Error::new(io::ErrorKind::InvalidData, format!("malformed Wire frame: {what}"))
        };
        let p = &f.payload;
        if p.len() < WIRE_FIXED {
            return Err(bad(&format!(
                "{} bytes, shorter than its {WIRE_FIXED}-byte header",
                p.len()
            )));
        }
        let sender = match p[0] {
            0 => Dir::AtoB,
            1 => Dir::BtoA,
            n => return Err(bad(&format!("sender {n} (0 = a, 1 = b)"))),
        };
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&p[1..9]);
        let clen = u16::from_be_bytes([p[9], p[10]]) as usize;
        let body = &p[WIRE_FIXED..];
        if body.len() < clen {
            return Err(bad(&format!("comment of {clen} bytes, {} left", body.len())));
        }
        let comment = (clen > 0).then(|| String::from_utf8_lossy(&body[..clen]).into_owned());
        Ok(WireFrame {
            sender,
            ts_ns: u64::from_be_bytes(ts),
            comment,
            data: body[clen..].to_vec(),
        })
    }
}

/// Default interval at which waits re-check their deadline.
pub const POLL: Duration = Duration::from_millis(50);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_clean_eof() {
        let frames = [
            Frame::new(Kind::Stdout, 7, b"hello\n".to_vec()),
            Frame::json(Kind::Exit, 7, &ExitStatus { code: Some(3), ..Default::default() }),
            Frame::sync(),
        ];
        let mut buf = Vec::new();
        for f in &frames {
            f.write_to(&mut buf).unwrap();
        }
        let mut r = &buf[..];
        for f in &frames {
            assert_eq!(read_frame(&mut r).unwrap().as_ref(), Some(f));
        }
        assert_eq!(read_frame(&mut r).unwrap(), None);
        let exit: ExitStatus = frames[1].parse().unwrap();
        assert_eq!(exit.shell_code(), 3);
    }

    #[test]
    fn bad_input_is_named() {
        let e = read_frame(&mut &[0x00u8, 1, 0, 0, 0, 0, 0, 0, 0, 0][..]).unwrap_err();
        assert!(e.to_string().contains("out of sync"), "{e}");
        let e = read_frame(&mut &[MAGIC, 99, 0, 0, 0, 0, 0, 0, 0, 0][..]).unwrap_err();
        assert!(e.to_string().contains("unknown control frame kind 99"), "{e}");
        let e = read_frame(&mut &[MAGIC, 4, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff][..]).unwrap_err();
        assert!(e.to_string().contains("more than the limit"), "{e}");
        let e = read_frame(&mut &[MAGIC, 4, 0, 0][..]).unwrap_err();
        assert!(e.to_string().contains("inside a frame header"), "{e}");
        let e = read_frame(&mut &[MAGIC, 4, 0, 0, 0, 1, 0, 0, 0, 5, b'x'][..]).unwrap_err();
        assert!(e.to_string().contains("inside a Stdout frame"), "{e}");
    }

    #[test]
    fn sync_skips_junk_including_a_partial_sync() {
        let mut input = vec![1, 2, MAGIC, MAGIC, 2, 0, 0];
        let sync = sync_frame_bytes();
        input.extend_from_slice(&sync[..9]); // an interrupted sync frame
        input.extend_from_slice(&sync);
        Frame::new(Kind::Kill, 5, vec![]).write_to(&mut input).unwrap();
        let mut r = &input[..];
        assert!(skip_to_sync(&mut r).unwrap());
        assert_eq!(read_frame(&mut r).unwrap(), Some(Frame::new(Kind::Kill, 5, vec![])));
        assert!(!skip_to_sync(&mut &[1u8, 2, 3][..]).unwrap());
    }

    #[test]
    fn resync_finds_the_next_hello() {
        let hello = Hello { instance: 5, vm: "a".into(), kernel: "k".into() };
        let mut input = Frame::new(Kind::Stdout, 3, b"half a fr".to_vec()).encode();
        input.truncate(12);
        Frame::json(Kind::Hello, 0, &hello).write_to(&mut input).unwrap();
        let f = resync_hello(&mut &input[..]).unwrap().unwrap();
        assert_eq!(f.parse::<Hello>().unwrap(), hello);
        assert_eq!(resync_hello(&mut &[0u8; 4][..]).unwrap(), None);
    }

    #[test]
    fn wire_frames_round_trip_and_reject_garbage() {
        let w = WireFrame {
            sender: Dir::BtoA,
            ts_ns: 1_700_000_000_123_456_789,
            comment: Some("dropped by rule 1".into()),
            data: vec![7; 60],
        };
        let mut buf = Vec::new();
        w.to_frame().write_to(&mut buf).unwrap();
        let f = read_frame(&mut &buf[..]).unwrap().unwrap();
        assert_eq!(WireFrame::parse(&f).unwrap(), w);
        let plain = WireFrame { sender: Dir::AtoB, ts_ns: 5, comment: None, data: vec![] };
        assert_eq!(WireFrame::parse(&plain.to_frame()).unwrap(), plain);
        let e = WireFrame::parse(&Frame::new(Kind::Wire, 0, vec![0; 5])).unwrap_err();
        assert!(e.to_string().contains("shorter than its 11-byte header"), "{e}");
        let e = WireFrame::parse(&Frame::new(Kind::Wire, 0, vec![2; 11])).unwrap_err();
        assert!(e.to_string().contains("sender 2"), "{e}");
        let mut long_comment = vec![0u8; 11];
        long_comment[10] = 9;
        let e = WireFrame::parse(&Frame::new(Kind::Wire, 0, long_comment)).unwrap_err();
        assert!(e.to_string().contains("comment of 9 bytes, 0 left"), "{e}");
    }

    #[test]
    fn exit_codes() {
        let to = ExitStatus { timed_out: true, signal: Some(9), ..Default::default() };
        assert_eq!(to.shell_code(), 124);
        assert_eq!(ExitStatus { signal: Some(9), ..Default::default() }.shell_code(), 137);
        assert_eq!(ExitStatus::failed("x").shell_code(), 125);
        assert!(ExitStatus { code: Some(0), ..Default::default() }.success());
    }
}
