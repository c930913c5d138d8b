//! The controller ↔ endpoint agent protocol (`roce run` ↔ `roce agent`).
//!
//! Transport: a byte stream (the agent's stdin/stdout when the lab starts it in a VM,
//! or a TCP connection to `roce agent --listen ADDR:PORT` on a real host). Each message
//! is a 4-byte big-endian length, then that many bytes of JSON (one [`ToAgent`] or
//! [`FromAgent`]). A length above [`MAX_MESSAGE`], bytes that are not JSON, or JSON
//! that is not a known message is refused with [`FromAgent::Error`] (and the stream
//! closed when it cannot be resynchronised): never a crash.
//!
//! Order of a run, per agent: `Hello` → `Setup` → `Connect` (one per QP) → `Step`… →
//! `Completions` / `ReadMemory` (any number) → `Teardown`. Every request gets exactly
//! one answer, in order.
use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

use crate::scenario::model::{Endpoint, MrSpec, QpSpec, Step};

/// Bumped on any incompatible change; both sides say theirs in `Hello`.
pub const VERSION: u32 = 1;
/// No message is larger (a memory dump of a 512 KiB MR in hex fits).
pub const MAX_MESSAGE: usize = 2 << 20;

/// controller → agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToAgent {
    Hello {
        version: u32,
    },
    /// Open the device and create this endpoint's PD, CQ, MRs and QPs (QPs stay in
    /// RESET/INIT until `Connect`). `qps` are the scenario's QPs that have this
    /// endpoint in `between`; `mrs` those `on` this endpoint.
    Setup {
        endpoint: String,
        spec: Endpoint,
        qps: Vec<QpSpec>,
        mrs: Vec<MrSpec>,
    },
    /// Bring QP `qp` to RTS with its peer. The passive side (first of `between`)
    /// listens on `port` (TCP exchange or rdma_cm) on its test address; the active
    /// side connects to `peer_ip:port`. `peer_mrs` is the peer endpoint's MR table
    /// (for `remote = { mr = … }` in steps).
    Connect {
        qp: String,
        passive: bool,
        peer_ip: String,
        port: u16,
        peer_mrs: Vec<MrInfo>,
    },
    /// Execute one step (post a WR, wait for completions, sleep). Posting returns at
    /// once; completions are polled in the background from `Setup` on.
    Step {
        index: usize,
        step: Step,
    },
    /// All completions polled so far, waiting up to `wait_ms` until there are at
    /// least `min`.
    Completions {
        min: usize,
        wait_ms: u64,
    },
    /// An MR's current content.
    ReadMemory {
        mr: String,
    },
    /// Destroy everything (QPs, MRs, CQ, PD, context) and exit.
    Teardown,
}

/// The frames a probe step sent, to find them (and the answers) on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeSent {
    pub id: String,
    pub qp: String,
    /// The prober's and the target's addresses.
    pub src: String,
    pub dst: String,
    /// The prober's QPN (where the target's answers go).
    pub src_qp: u32,
    /// The PSN the target expected (as far as the prober knew) when it went out.
    pub next: u32,
    pub frames: Vec<crate::probe::SentFrame>,
}

/// agent → controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case", deny_unknown_fields)]
pub enum FromAgent {
    Hello {
        version: u32,
        /// `roce` version and host name, for reports.
        agent: String,
        host: String,
        /// The kernel release (`uname -r`): what a device profile was recorded on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kernel: Option<String>,
    },
    SetupDone {
        device: String,
        port: u8,
        gid_index: u8,
        gid: String,
        /// The IPv4 (or IPv6) address of the GID: where peers connect.
        ip: String,
        qps: Vec<QpInfo>,
        mrs: Vec<MrInfo>,
    },
    Connected {
        qp: String,
        local: QpInfo,
        remote: QpInfo,
        /// rdma_cm: how many of the peer's MRs came in its REQ/REP private data
        /// (the rest as the controller relayed them).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        peer_mrs_from_cm: Option<usize>,
    },
    StepDone {
        index: usize,
        /// A probe step: what went out.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        probe: Option<ProbeSent>,
    },
    Completions {
        wcs: Vec<Wc>,
    },
    Memory {
        mr: String,
        /// Lower-case hex.
        hex: String,
    },
    TornDown,
    /// A request failed: which verb, errno, and the likely cause.
    Error {
        message: String,
        #[serde(default)]
        verb: Option<String>,
        #[serde(default)]
        errno: Option<i32>,
        #[serde(default)]
        hint: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpInfo {
    pub name: String,
    pub qpn: u32,
    /// Starting send PSN.
    pub psn: u32,
    pub gid: String,
    #[serde(default)]
    pub qkey: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MrInfo {
    pub name: String,
    pub addr: u64,
    pub len: u64,
    pub rkey: u32,
    pub lkey: u32,
}

/// One work completion as the agent polled it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wc {
    pub wr_id: u64,
    /// `IBV_WC_SUCCESS`, `IBV_WC_REM_ACCESS_ERR`, …
    pub status: String,
    /// `IBV_WC_SEND`, `IBV_WC_RECV`, … (meaningful on success and for receives).
    pub opcode: String,
    pub byte_len: u32,
    #[serde(default)]
    pub imm_data: Option<u32>,
    /// The QP (by scenario name) the completion is for.
    pub qp: String,
    pub qp_num: u32,
    #[serde(default)]
    pub src_qp: Option<u32>,
    pub vendor_err: u32,
    /// Milliseconds since `Setup`.
    pub t_ms: f64,
}

/// Writes one message.
pub fn write_msg<W: Write + ?Sized, T: Serialize>(w: &mut W, msg: &T) -> io::Result<()> {
    let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
    if body.len() > MAX_MESSAGE {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("message of {} bytes exceeds {MAX_MESSAGE}", body.len())));
    }
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(&body);
    w.write_all(&buf)?;
    w.flush()
}

/// Why a message could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The stream failed or ended inside a message.
    Io(io::Error),
    /// The length prefix is over the limit: the stream cannot be trusted further.
    TooLarge(usize),
    /// A complete message that is not valid: the stream is still in sync.
    Invalid(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::TooLarge(n) => write!(f, "message of {n} bytes announced, more than the limit of {MAX_MESSAGE}"),
            ReadError::Invalid(e) => write!(f, "malformed message: {e}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads one message; `Ok(None)` on a clean end of stream (between messages).
pub fn read_msg<R: Read + ?Sized, T: for<'de> Deserialize<'de>>(r: &mut R) -> Result<Option<T>, ReadError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(ReadError::Io(io::Error::new(io::ErrorKind::UnexpectedEof, "stream ended inside a length prefix"))),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
    let n = u32::from_be_bytes(len) as usize;
    if n > MAX_MESSAGE {
        return Err(ReadError::TooLarge(n));
    }
    let mut body = vec![0u8; n];
    r.read_exact(&mut body).map_err(ReadError::Io)?;
    serde_json::from_slice(&body).map(Some).map_err(|e| ReadError::Invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let mut buf = Vec::new();
        write_msg(&mut buf, &ToAgent::Hello { version: VERSION }).unwrap();
        write_msg(&mut buf, &ToAgent::Completions { min: 2, wait_ms: 100 }).unwrap();
        let mut r = &buf[..];
        assert_eq!(read_msg::<_, ToAgent>(&mut r).unwrap(), Some(ToAgent::Hello { version: VERSION }));
        assert_eq!(read_msg::<_, ToAgent>(&mut r).unwrap(), Some(ToAgent::Completions { min: 2, wait_ms: 100 }));
        assert!(read_msg::<_, ToAgent>(&mut r).unwrap().is_none());

        let huge = ((MAX_MESSAGE + 1) as u32).to_be_bytes();
        assert!(matches!(read_msg::<_, ToAgent>(&mut &huge[..]), Err(ReadError::TooLarge(_))));
        let mut bad = Vec::new();
        bad.extend_from_slice(&5u32.to_be_bytes());
        bad.extend_from_slice(b"{\"x\":");
        let e = read_msg::<_, ToAgent>(&mut &bad[..]).unwrap_err();
        assert!(matches!(e, ReadError::Invalid(_)), "{e}");
        let mut unknown = Vec::new();
        write_msg(&mut unknown, &serde_json::json!({"msg": "format_disk"})).unwrap();
        assert!(matches!(read_msg::<_, ToAgent>(&mut &unknown[..]), Err(ReadError::Invalid(_))));
        assert!(matches!(read_msg::<_, ToAgent>(&mut &[0u8, 0][..]), Err(ReadError::Io(_))));
    }
}
