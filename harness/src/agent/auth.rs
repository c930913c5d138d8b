//! Authentication of a controller ↔ agent connection over the network (`roce agent
//! --listen … --key-file F`, `roce run --endpoints … --key-file F`): a shared key,
//! a challenge–response handshake that proves each side to the other without the
//! key ever crossing the wire, then a MAC and a sequence number on every message,
//! so a message injected, altered or replayed on the TCP stream is refused. The
//! lab's stdio agents (a trusted channel) do not use it.
//!
//! The handshake, each step one framed message of the agent protocol's framing
//! (4-byte big-endian length, then JSON, at most [`HANDSHAKE_MESSAGE_MAX`] bytes),
//! with `N_c`, `N_a` 32 random bytes each:
//!
//! 1. controller → agent: `{"auth": "roce-hmac-sha256-v1", "nonce": N_c, "at": T,
//!    "mark": HMAC(K, "challenge" ‖ N_c ‖ T)}` (`T` the controller's clock in Unix
//!    seconds, 8 bytes big-endian in the MAC; a controller of before the mark sends
//!    neither `at` nor `mark`)
//! 2. agent → controller: `{"nonce": N_a, "proof": HMAC(K, "agent" ‖ N_c ‖ N_a)}`
//!    (or `{"refused": why, "retry": true}`: busy; `retry` absent when trying again
//!    will not help)
//! 3. controller → agent: `{"proof": HMAC(K, "controller" ‖ N_a ‖ N_c)}` (or
//!    `{"refused": why}` when the agent's proof is wrong: then both sides know)
//! 4. agent → controller: `{"ok": true}` (or `{"refused": why}`)
//!
//! The mark lets the agent tell a controller that has the key from a stranger at
//! the first message, before any proof: a fresh mark (its `T` within
//! [`MARK_FRESH_SECS`] of the agent's clock, its nonce not seen before) gives the
//! connection a handshake place no stranger can take (see `super::listen`). A
//! stale or missing mark only loses that priority; a wrong one means the keys
//! differ. The mark proves nothing on its own: steps 2–4 still do.
//!
//! Both then derive the session key `S = HMAC(K, "session" ‖ N_c ‖ N_a)`: fresh
//! nonces make a recorded session useless on a new connection. After it, a frame
//! is `len ‖ seq ‖ tag ‖ body` with `seq` a 64-bit big-endian counter per
//! direction starting at 0 and `tag = HMAC(S, dir ‖ seq ‖ body)` (`dir` 0 for
//! controller → agent, 1 back), checked in constant time. [`AuthReader`] and
//! [`AuthWriter`] wrap a stream so that the protocol code above them reads and
//! writes its ordinary frames.
//!
//! The agent's side is a state machine over whole messages ([`accept_challenge`],
//! [`ServerHandshake::finish`]) that does no I/O, so the listening agent can run
//! many handshakes from one poll loop without a thread each. Keys are zeroed when
//! dropped.
//!
//! Owns: the key file ([`Key`]), the handshake (both sides, the agent's as I/O-free
//! steps) and [`HandshakeError`] (what went wrong, as the side that saw it says it),
//! the per-message MAC and sequence ([`AuthReader`], [`AuthWriter`]). Imports: the
//! agent protocol's framing and messages (`crate::protocol`), dissector's hex text and
//! Unix clock; RustCrypto's `hmac` and `sha2`, and `zeroize`, for the cryptography.
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use zeroize::Zeroize;

use crate::protocol::{self, FromAgent, Hex, ToAgent, MAX_MESSAGE};

type HmacSha256 = Hmac<Sha256>;

/// The scheme both sides name in the first message.
const SCHEME: &str = "roce-hmac-sha256-v1";
/// Key, nonce and tag length.
const LEN: usize = 32;
/// `seq ‖ tag` before each authenticated body.
const OVERHEAD: usize = 8 + LEN;
/// The largest handshake message the agent reads (a marked challenge is about
/// 250 bytes): a length prefix above it ends the handshake at once.
pub(crate) const HANDSHAKE_MESSAGE_MAX: usize = 1024;
/// A mark whose time is further than this from the agent's clock gives no
/// priority (the handshake goes on without it).
pub(crate) const MARK_FRESH_SECS: u64 = 300;
/// What a controller that sent something else than a challenge is told.
const REQUIRED: &str =
    "this agent requires authentication: give the controller the agent's key (--key-file FILE)";

/// The shared secret. Zeroed when dropped.
#[derive(Clone)]
pub(crate) struct Key([u8; LEN]);

impl Drop for Key {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(…)")
    }
}

fn random<const N: usize>() -> io::Result<[u8; N]> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b)
        .map_err(|e| io::Error::other(format!("no randomness from the OS: {e}")))?;
    Ok(b)
}

impl Key {
    /// `roce agent --gen-key F`: a new random key in a new file of mode 0600. An
    /// existing file is never overwritten (it may be the key the other side has).
    pub(crate) fn generate(path: &Path) -> Result<()> {
        let mut key = random::<LEN>()?;
        let mut f = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).with_context(|| {
            format!("creating the key file {} (an existing key file is never overwritten; remove it first to replace it)", path.display())
        })?;
        let mut text = dissector::text::hex_string(&key);
        key.zeroize();
        let written = writeln!(f, "{text}").and_then(|()| f.sync_all());
        text.zeroize();
        written.with_context(|| format!("writing {}", path.display()))?;
        Ok(())
    }

    /// Reads a key file: 64 hex digits. Refused when group or others may read it.
    pub(crate) fn load(path: &Path) -> Result<Key> {
        let meta =
            fs::metadata(path).with_context(|| format!("the key file {}", path.display()))?;
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            bail!(
                "the key file {} is readable by {} (mode {:o}): anyone who reads it can drive the agent\nhint: chmod 600 {}",
                path.display(),
                if mode & 0o007 != 0 { "others" } else { "its group" },
                mode & 0o777,
                path.display()
            );
        }
        let mut text = fs::read_to_string(path)
            .with_context(|| format!("reading the key file {}", path.display()))?;
        let key = Key::parse(text.trim());
        text.zeroize();
        // The cause first, then the hint (a hint printed before the reason it is
        // for reads as the error itself).
        key.map_err(|e| {
            anyhow!(
                "the key file {} is not a roce key: {e}\nhint: make one with `roce agent --gen-key FILE`",
                path.display()
            )
        })
    }

    /// A key of these bytes: the fixed key the fuzz targets' door
    /// (`crate::inputs`) speaks the handshake with.
    pub(crate) fn from_bytes(bytes: [u8; LEN]) -> Key {
        Key(bytes)
    }

    fn parse(text: &str) -> Result<Key> {
        if text.len() != 2 * LEN || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!("expected {} hex digits, found {} characters", 2 * LEN, text.chars().count());
        }
        let mut k = Key([0u8; LEN]);
        for (i, b) in k.0.iter_mut().enumerate() {
            *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16)?;
        }
        Ok(k)
    }

    fn mac(&self, parts: &[&[u8]]) -> [u8; LEN] {
        mac(&self.0, parts)
    }
}

fn mac(key: &[u8; LEN], parts: &[&[u8]]) -> [u8; LEN] {
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

/// `expected == got` in constant time.
fn verify(key: &[u8; LEN], parts: &[&[u8]], got: &[u8]) -> bool {
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
    for p in parts {
        m.update(p);
    }
    m.verify_slice(got).is_ok()
}

/// The handshake's messages.
///
/// A challenge without the mark: what a controller of before the mark sends (the
/// agent still takes it, without priority; the tests send it).
#[cfg(test)]
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Challenge {
    auth: String,
    nonce: Hex,
}

/// The challenge as this controller sends it and the agent reads it (`at` and
/// `mark` absent from an older controller's).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MarkedChallenge {
    auth: String,
    nonce: Hex,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mark: Option<Hex>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum Reply {
    Refused {
        refused: String,
        /// Busy for now: trying again shortly may succeed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        retry: bool,
    },
    Proof {
        nonce: Hex,
        proof: Hex,
    },
}

/// What a controller may read first: the agent's reply, or (an agent that does
/// not authenticate) an answer of the agent protocol itself.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum FirstAnswer {
    Reply(Reply),
    Unauthenticated(FromAgent),
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Response {
    proof: Hex,
}

/// Step 3 as the agent reads it: the controller's proof, or its word that our
/// proof was wrong.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ProofOrRefusal {
    Proof(Response),
    Refused {
        #[allow(dead_code)] // said in the log as what it is: the controller's word
        refused: String,
    },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum Verdict {
    Refused { refused: String },
    Ok { ok: bool },
}

/// Which message a handshake was waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    ControllerChallenge,
    AgentProof,
    ControllerProof,
    AgentVerdict,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::ControllerChallenge => "controller's challenge",
            Step::AgentProof => "agent's proof",
            Step::ControllerProof => "controller's proof",
            Step::AgentVerdict => "agent's verdict",
        })
    }
}

/// Why a handshake ended without a session, as the side that saw it says it (the
/// controller's variants first, then the agent's). A caller matches on it: the
/// controller tries again on [`HandshakeError::is_retryable`] ones.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandshakeError {
    /// The agent refused before its proof: busy, or another controller served.
    #[error("the agent refused the connection: {why}")]
    Refused { why: String, retry: bool },
    #[error("the agent does not authenticate (it answered: {answered})\nhint: it runs with --insecure, or is an older roce; start it with --key-file")]
    NotAuthenticating { answered: String },
    #[error("the agent could not prove it has our key: its --key-file is not the one given here (or something between us is not the agent)")]
    AgentKeyWrong,
    #[error("the agent did not accept the handshake")]
    NotAccepted,
    /// The agent refused our proof.
    #[error("the agent refused us: {why}")]
    RefusedProof { why: String },
    /// The agent's side: the first message was no challenge (most likely a
    /// controller without `--key-file`, speaking the agent protocol at once).
    #[error("sent {got} where an authentication challenge was expected; told it: {}", REQUIRED)]
    NotAChallenge { got: String },
    #[error("asked for the authentication scheme `{scheme}`; this agent speaks {}", SCHEME)]
    UnknownScheme { scheme: String },
    #[error("sent a challenge whose nonce is {len} bytes; {} nonces are {} bytes", SCHEME, LEN)]
    NonceLength { len: usize },
    /// The agent's side: the keys differ, and how it knows.
    #[error("the controller's key is not this agent's: {how} (check both --key-file)")]
    KeyMismatch { how: &'static str },
    #[error(
        "announced a handshake message of {len} bytes; handshake messages are at most {}",
        HANDSHAKE_MESSAGE_MAX
    )]
    TooLarge { len: usize },
    #[error("the handshake's {what} is not valid: {error}")]
    Malformed { what: Step, error: String },
    #[error("the connection closed during the handshake (waiting for {what})")]
    Closed { what: Step },
    #[error("no {what} within the handshake's deadline")]
    Deadline { what: Step },
    #[error("the handshake's connection failed: {0}")]
    Io(#[from] io::Error),
}

impl HandshakeError {
    /// Whether a controller should try again shortly: the agent said it is busy
    /// with handshakes, or dropped the connection before its first answer (a
    /// place taken from a stranger's flood, or the agent out of descriptors).
    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            HandshakeError::Refused { retry, .. } => *retry,
            HandshakeError::Closed { what: Step::AgentProof } => true,
            HandshakeError::Io(e) => matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::BrokenPipe
            ),
            _ => false,
        }
    }
}

/// An authenticated session: its key and which end we are. The key is zeroed when
/// dropped (here and in the reader and writer it becomes).
pub(crate) struct Session {
    key: [u8; LEN],
    side: Side,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.key.zeroize();
    }
}

/// Which end of the connection: the direction byte of each MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Controller,
    Agent,
}

impl Side {
    fn dir(self) -> u8 {
        match self {
            Side::Controller => 0,
            Side::Agent => 1,
        }
    }
    fn peer(self) -> Side {
        match self {
            Side::Controller => Side::Agent,
            Side::Agent => Side::Controller,
        }
    }
}

impl Session {
    /// A session whose key is given rather than derived by a handshake: `agent`
    /// says which end. What the fuzz targets' door (`crate::inputs`) reads and
    /// seals authenticated frames with.
    pub(crate) fn known(key: [u8; LEN], agent: bool) -> Session {
        Session { key, side: if agent { Side::Agent } else { Side::Controller } }
    }

    /// Our end's writer and reader over `w` and `r`.
    pub(crate) fn wrap<R: Read, W: Write>(self, r: R, w: W) -> (AuthReader<R>, AuthWriter<W>) {
        (
            AuthReader {
                inner: r,
                key: self.key,
                dir: self.side.peer().dir(),
                seq: 0,
                buf: Vec::new(),
                at: 0,
            },
            AuthWriter {
                inner: w,
                key: self.key,
                dir: self.side.dir(),
                seq: 0,
                pending: Vec::new(),
            },
        )
    }
}

/// One message as a frame of the protocol's framing.
fn frame<T: Serialize>(msg: &T) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a Vec fails only for a message over MAX_MESSAGE: none of ours.
    let _ = protocol::write_msg(&mut out, msg);
    out
}

/// Reads one whole handshake message of at most `max` bytes (blocking).
fn read_frame(r: &mut dyn Read, what: Step, max: usize) -> Result<Vec<u8>, HandshakeError> {
    let io = |e: io::Error| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => HandshakeError::Deadline { what },
        io::ErrorKind::UnexpectedEof => HandshakeError::Closed { what },
        _ => HandshakeError::Io(e),
    };
    let mut len = [0u8; 4];
    loop {
        match r.read(&mut len[..1]) {
            Ok(0) => return Err(HandshakeError::Closed { what }),
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
    r.read_exact(&mut len[1..]).map_err(io)?;
    let n = u32::from_be_bytes(len) as usize;
    if n > max {
        return Err(HandshakeError::TooLarge { len: n });
    }
    let mut body = vec![0u8; n];
    r.read_exact(&mut body).map_err(io)?;
    Ok(body)
}

/// Takes one whole handshake message off the front of `buf`, if it holds one
/// (the poll loop's reading): `Ok(None)` while it is incomplete.
pub(crate) fn take_frame(buf: &mut Vec<u8>) -> Result<Option<Vec<u8>>, HandshakeError> {
    let Some(len) = buf.get(..4) else { return Ok(None) };
    let n = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
    if n > HANDSHAKE_MESSAGE_MAX {
        return Err(HandshakeError::TooLarge { len: n });
    }
    if buf.len() < 4 + n {
        return Ok(None);
    }
    let body = buf[4..4 + n].to_vec();
    buf.drain(..4 + n);
    Ok(Some(body))
}

fn unix_now() -> u64 {
    dissector::capture::unix_now().as_secs()
}

/// The controller's side of the handshake. Errors are [`HandshakeError`]s: whether
/// the agent refused us (and why, and whether to retry) or failed to prove it has
/// the key (then the agent is told so before we close).
#[cfg(test)]
pub(crate) fn client(key: &Key, r: &mut dyn Read, w: &mut dyn Write) -> Result<Session> {
    Ok(client_steps(key, r, w)?)
}

/// How long a controller keeps trying to get through a keyed server's handshake
/// while it says it is busy with others' handshakes.
pub(crate) const CONNECT_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);
/// The first wait before trying again, doubled each time up to [`RETRY_MOST`].
const RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(50);
const RETRY_MOST: std::time::Duration = std::time::Duration::from_secs(1);

/// Connects to a keyed server at `addr` (a listening agent, a bridge) and proves
/// the key: the connection (blocking, no read timeout) and its session. A server
/// busy with others' handshakes, or one that drops the connection before its
/// first answer, is tried again with back-off ([`RETRY_FIRST`] doubling to
/// [`RETRY_MOST`]) until `within`; a wrong key is an error at once. Errors name
/// `what` was reached (`endpoint a's agent at HOST:PORT`), and a connection that
/// fails says `hint`.
pub(crate) fn dial(
    addr: &str,
    key: &Key,
    (within, handshake_within): (std::time::Duration, std::time::Duration),
    what: &str,
    hint: &str,
) -> Result<(std::net::TcpStream, Session)> {
    let until = std::time::Instant::now() + within;
    let mut wait = RETRY_FIRST;
    let mut tries = 1u32;
    loop {
        let s = std::net::TcpStream::connect(addr)
            .with_context(|| format!("connecting to {what}\nhint: {hint}"))?;
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(handshake_within));
        let (mut r, mut w) = (s.try_clone()?, s.try_clone()?);
        match client_steps(key, &mut r, &mut w) {
            Ok(session) => {
                let _ = s.set_read_timeout(None);
                return Ok((s, session));
            }
            Err(e) => {
                let _ = s.shutdown(std::net::Shutdown::Both);
                if e.is_retryable() && std::time::Instant::now() + wait < until {
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(RETRY_MOST);
                    tries += 1;
                    continue;
                }
                let after = if tries > 1 {
                    format!(" (after {tries} tries in {within:?})")
                } else {
                    String::new()
                };
                return Err(
                    anyhow::Error::new(e).context(format!("authenticating with {what}{after}"))
                );
            }
        }
    }
}

/// Step 1, the controller's challenge with nonce `n_c`, marked at `at` (Unix
/// seconds), as one frame.
pub(crate) fn challenge(key: &Key, n_c: &[u8; LEN], at: u64) -> Vec<u8> {
    let mark = key.mac(&[b"challenge", n_c, &at.to_be_bytes()]);
    frame(&MarkedChallenge {
        auth: SCHEME.into(),
        nonce: Hex(n_c.to_vec()),
        at: Some(at),
        mark: Some(Hex(mark.to_vec())),
    })
}

/// Step 3, the controller's proof over the agent's nonce `n_a` and its own
/// `n_c`, as one frame.
pub(crate) fn response(key: &Key, n_a: &[u8], n_c: &[u8; LEN]) -> Vec<u8> {
    frame(&Response { proof: Hex(key.mac(&[b"controller", n_a, n_c]).to_vec()) })
}

fn client_steps(key: &Key, r: &mut dyn Read, w: &mut dyn Write) -> Result<Session, HandshakeError> {
    let n_c = random::<LEN>()?;
    w.write_all(&challenge(key, &n_c, unix_now()))?;
    w.flush()?;
    let first = read_frame(r, Step::AgentProof, MAX_MESSAGE)?;
    let answer = serde_json::from_slice::<FirstAnswer>(&first)
        .map_err(|e| HandshakeError::Malformed { what: Step::AgentProof, error: e.to_string() })?;
    let (n_a, proof) = match answer {
        FirstAnswer::Reply(Reply::Refused { refused, retry }) => {
            return Err(HandshakeError::Refused { why: refused, retry })
        }
        FirstAnswer::Reply(Reply::Proof { nonce, proof }) => (nonce.0, proof.0),
        FirstAnswer::Unauthenticated(FromAgent::Error { message, .. }) => {
            return Err(HandshakeError::NotAuthenticating { answered: message })
        }
        FirstAnswer::Unauthenticated(other) => {
            return Err(HandshakeError::NotAuthenticating { answered: format!("{other:?}") })
        }
    };
    if n_a.len() != LEN || !verify(&key.0, &[b"agent", &n_c, &n_a], &proof) {
        // Say it before closing, so the agent's log names the cause too.
        let _ = w.write_all(&frame(&Verdict::Refused {
            refused: "the agent's proof does not match the controller's key".into(),
        }));
        return Err(HandshakeError::AgentKeyWrong);
    }
    w.write_all(&response(key, &n_a, &n_c))?;
    w.flush()?;
    let verdict = read_frame(r, Step::AgentVerdict, MAX_MESSAGE)?;
    match serde_json::from_slice::<Verdict>(&verdict) {
        Ok(Verdict::Ok { ok: true }) => {}
        Ok(Verdict::Ok { ok: false }) => return Err(HandshakeError::NotAccepted),
        Ok(Verdict::Refused { refused }) => {
            return Err(HandshakeError::RefusedProof { why: refused })
        }
        Err(e) => {
            return Err(HandshakeError::Malformed {
                what: Step::AgentVerdict,
                error: e.to_string(),
            })
        }
    }
    Ok(Session { key: key.mac(&[b"session", &n_c, &n_a]), side: Side::Controller })
}

/// What the agent learned from a challenge's mark about the controller's key,
/// before any proof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// No mark (a controller of before the mark).
    Absent,
    /// Made with our key, `at` within [`MARK_FRESH_SECS`] of our clock: the
    /// controller has the key, unless the challenge is a replay (the caller
    /// checks its nonce against the ones it has seen).
    Fresh,
    /// Made with our key but its time is far from ours: no priority.
    Stale,
    /// Not made with our key.
    Wrong,
}

/// A handshake the agent has answered the challenge of: waiting for the
/// controller's proof.
pub(crate) struct ServerHandshake {
    n_c: [u8; LEN],
    n_a: [u8; LEN],
    mark: Mark,
}

/// The agent refuses: `tell` is the frame the controller is sent before the
/// connection closes, `error` what the agent logs.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) error: HandshakeError,
    pub(crate) tell: Vec<u8>,
}

impl Refusal {
    fn new(error: HandshakeError) -> Refusal {
        let tell = match &error {
            // A controller without --key-file reads answers as the agent
            // protocol's: say it in that protocol.
            HandshakeError::NotAChallenge { .. } => frame(&FromAgent::error(REQUIRED, None)),
            HandshakeError::KeyMismatch { .. } => frame(&Verdict::Refused {
                refused: "the controller's key is not this agent's (check both --key-file)".into(),
            }),
            e => frame(&Reply::Refused { refused: e.to_string(), retry: false }),
        };
        Refusal { error, tell }
    }
}

/// The agent's answer to a controller's first message `body`: the handshake to
/// go on with and the frame to send (our nonce and proof), or a refusal.
/// `now` is the agent's clock in Unix seconds (for the mark).
pub(crate) fn accept_challenge(
    key: &Key,
    body: &[u8],
    now: u64,
) -> Result<(ServerHandshake, Vec<u8>), Refusal> {
    let c: MarkedChallenge = match serde_json::from_slice(body) {
        Ok(c) => c,
        Err(e) => {
            let got = if serde_json::from_slice::<ToAgent>(body).is_ok() {
                "an unauthenticated message of the agent protocol".to_string()
            } else if serde_json::from_slice::<serde_json::Value>(body).is_ok() {
                format!("JSON that is not a challenge ({e})")
            } else {
                format!("{} bytes that are not JSON", body.len())
            };
            return Err(Refusal::new(HandshakeError::NotAChallenge { got }));
        }
    };
    if c.auth != SCHEME {
        return Err(Refusal::new(HandshakeError::UnknownScheme { scheme: c.auth }));
    }
    let Ok(n_c) = <[u8; LEN]>::try_from(c.nonce.0.as_slice()) else {
        return Err(Refusal::new(HandshakeError::NonceLength { len: c.nonce.0.len() }));
    };
    let mark = match (c.at, c.mark) {
        (Some(at), Some(m)) => {
            if !verify(&key.0, &[b"challenge", &n_c, &at.to_be_bytes()], &m.0) {
                Mark::Wrong
            } else if at.abs_diff(now) <= MARK_FRESH_SECS {
                Mark::Fresh
            } else {
                Mark::Stale
            }
        }
        _ => Mark::Absent,
    };
    let n_a = random::<LEN>().map_err(|e| Refusal::new(e.into()))?;
    let reply = frame(&Reply::Proof {
        nonce: Hex(n_a.to_vec()),
        proof: Hex(key.mac(&[b"agent", &n_c, &n_a]).to_vec()),
    });
    Ok((ServerHandshake { n_c, n_a, mark }, reply))
}

impl ServerHandshake {
    /// What the challenge's mark said.
    pub(crate) fn mark(&self) -> Mark {
        self.mark
    }

    /// The controller's nonce (to recognise a replayed challenge).
    pub(crate) fn nonce(&self) -> &[u8; LEN] {
        &self.n_c
    }

    /// Why the handshake ended when the controller closed it before its proof.
    pub(crate) fn closed(&self) -> HandshakeError {
        match self.mark {
            Mark::Wrong => HandshakeError::KeyMismatch {
                how: "its challenge's mark was not made with our key, and it closed the connection after our proof",
            },
            _ => HandshakeError::Closed { what: Step::ControllerProof },
        }
    }

    /// The controller's proof `body`: the session and the frame that says so, or
    /// a refusal.
    pub(crate) fn finish(self, key: &Key, body: &[u8]) -> Result<(Session, Vec<u8>), Refusal> {
        let proof = match serde_json::from_slice::<ProofOrRefusal>(body) {
            Ok(ProofOrRefusal::Proof(r)) => r.proof,
            Ok(ProofOrRefusal::Refused { .. }) => {
                return Err(Refusal {
                    error: HandshakeError::KeyMismatch {
                        how: "it found our proof wrong and said so",
                    },
                    tell: Vec::new(),
                })
            }
            Err(e) => {
                return Err(Refusal::new(HandshakeError::Malformed {
                    what: Step::ControllerProof,
                    error: e.to_string(),
                }))
            }
        };
        if !verify(&key.0, &[b"controller", &self.n_a, &self.n_c], &proof.0) {
            return Err(Refusal::new(HandshakeError::KeyMismatch {
                how: "its proof does not match",
            }));
        }
        Ok((
            Session { key: key.mac(&[b"session", &self.n_c, &self.n_a]), side: Side::Agent },
            frame(&Verdict::Ok { ok: true }),
        ))
    }
}

/// The agent's side of the handshake over a blocking stream: the same steps the
/// listening agent's poll loop takes, one after the other. The controller is told
/// why before an error is returned.
#[cfg(test)]
pub(crate) fn server(key: &Key, r: &mut dyn Read, w: &mut dyn Write) -> Result<Session> {
    let refused = |w: &mut dyn Write, r: Refusal| {
        let _ = w.write_all(&r.tell);
        anyhow::Error::new(r.error)
    };
    let body = match read_frame(r, Step::ControllerChallenge, HANDSHAKE_MESSAGE_MAX) {
        Ok(b) => b,
        Err(e) => return Err(refused(w, Refusal::new(e))),
    };
    let (hs, reply) = accept_challenge(key, &body, unix_now()).map_err(|e| refused(w, e))?;
    w.write_all(&reply)?;
    let body = match read_frame(r, Step::ControllerProof, HANDSHAKE_MESSAGE_MAX) {
        Ok(b) => b,
        Err(HandshakeError::Closed { .. }) => return Err(hs.closed().into()),
        Err(e) => return Err(e.into()),
    };
    let (session, ok) = hs.finish(key, &body).map_err(|e| refused(w, e))?;
    w.write_all(&ok)?;
    Ok(session)
}

/// Refuses a connection before any handshake (the agent is busy, or has no key):
/// the answer a controller reads in place of the agent's proof. `retry`: busy
/// with handshakes for now, so trying again shortly may succeed.
pub(crate) fn refusal(why: &str, retry: bool) -> Vec<u8> {
    frame(&Reply::Refused { refused: why.into(), retry })
}

/// Reads authenticated frames from `inner` and yields them as the protocol's
/// ordinary frames; a frame whose sequence number or tag is wrong is an error
/// (`InvalidData`) and nothing of it is yielded.
pub(crate) struct AuthReader<R> {
    inner: R,
    key: [u8; LEN],
    dir: u8,
    seq: u64,
    buf: Vec<u8>,
    at: usize,
}

impl<R> Drop for AuthReader<R> {
    fn drop(&mut self) {
        self.key.zeroize();
    }
}
impl<R: Read> AuthReader<R> {
    fn next_frame(&mut self) -> io::Result<bool> {
        let mut len = [0u8; 4];
        match self.inner.read(&mut len[..1])? {
            0 => return Ok(false),
            _ => self.inner.read_exact(&mut len[1..])?,
        }
        let n = u32::from_be_bytes(len) as usize;
        if !(OVERHEAD..=OVERHEAD + MAX_MESSAGE).contains(&n) {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("an authenticated frame of {n} bytes is announced: not a frame of this protocol")));
        }
        let mut frame = vec![0u8; n];
        self.inner.read_exact(&mut frame)?;
        let (seq, rest) = frame.split_at(8);
        let (tag, body) = rest.split_at(LEN);
        let want = self.seq.to_be_bytes();
        if seq != want || !verify(&self.key, &[&[self.dir], &want, body], tag) {
            let got = u64::from_be_bytes(seq.try_into().unwrap_or([0; 8]));
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("message {} failed authentication (sequence number {got}): injected, altered or replayed; the connection is closed", self.seq),
            ));
        }
        self.seq += 1;
        self.buf.clear();
        self.buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
        self.buf.extend_from_slice(body);
        self.at = 0;
        Ok(true)
    }
}

impl<R: Read> Read for AuthReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.at == self.buf.len() && !self.next_frame()? {
            return Ok(0);
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Takes the protocol's ordinary frames and writes them authenticated.
pub(crate) struct AuthWriter<W> {
    inner: W,
    key: [u8; LEN],
    dir: u8,
    seq: u64,
    pending: Vec<u8>,
}

impl<W> Drop for AuthWriter<W> {
    fn drop(&mut self) {
        self.key.zeroize();
    }
}

impl<W: Write> Write for AuthWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(data);
        while self.pending.len() >= 4 {
            let n = u32::from_be_bytes([
                self.pending[0],
                self.pending[1],
                self.pending[2],
                self.pending[3],
            ]) as usize;
            if self.pending.len() < 4 + n {
                break;
            }
            let seq = self.seq.to_be_bytes();
            let body = &self.pending[4..4 + n];
            let tag = mac(&self.key, &[&[self.dir], &seq, body]);
            let mut frame = Vec::with_capacity(4 + OVERHEAD + n);
            frame.extend_from_slice(&((OVERHEAD + n) as u32).to_be_bytes());
            frame.extend_from_slice(&seq);
            frame.extend_from_slice(&tag);
            frame.extend_from_slice(body);
            self.inner.write_all(&frame)?;
            self.seq += 1;
            self.pending.drain(..4 + n);
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};

    use super::*;
    use crate::protocol::{ToAgent, VERSION};

    fn key(b: u8) -> Key {
        Key([b; LEN])
    }

    /// A handshake over a real socket pair; returns each side's result.
    fn handshake(kc: Key, ka: Key) -> (Result<Session>, Result<Session>, TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let agent = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
            let mut r = s.try_clone().unwrap();
            let mut w = s.try_clone().unwrap();
            (server(&ka, &mut r, &mut w), s)
        });
        let c = TcpStream::connect(addr).unwrap();
        let mut r = c.try_clone().unwrap();
        let mut w = c.try_clone().unwrap();
        let cs = client(&kc, &mut r, &mut w);
        if cs.is_err() {
            // As the controller's link does: a failed handshake closes the connection.
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        let (as_, a) = agent.join().unwrap();
        (cs, as_, c, a)
    }

    #[test]
    fn the_same_key_authenticates_both_ways_and_messages_pass() {
        let (cs, as_, c, a) = handshake(key(7), key(7));
        let (cs, as_) = (cs.unwrap(), as_.unwrap());
        assert_eq!(cs.key, as_.key, "both derive the same session key");
        assert_ne!(cs.key, key(7).0, "the session key is not the shared key");
        let (_, mut cw) = cs.wrap(c.try_clone().unwrap(), c);
        let (mut ar, _) = as_.wrap(a.try_clone().unwrap(), a);
        protocol::write_msg(&mut cw, &ToAgent::Hello { version: VERSION }).unwrap();
        protocol::write_msg(&mut cw, &ToAgent::Teardown).unwrap();
        assert_eq!(
            protocol::read_msg::<_, ToAgent>(&mut ar).unwrap(),
            Some(ToAgent::Hello { version: VERSION })
        );
        assert_eq!(protocol::read_msg::<_, ToAgent>(&mut ar).unwrap(), Some(ToAgent::Teardown));
    }

    #[test]
    fn a_wrong_key_is_refused_on_both_sides_with_a_clear_message() {
        let (cs, as_, _c, _a) = handshake(key(1), key(2));
        let c = format!("{:#}", cs.err().expect("the controller refuses"));
        let a = format!("{:#}", as_.err().expect("the agent refuses"));
        assert!(c.contains("could not prove it has our key"), "{c}");
        // The agent never saw a valid proof: it did not get to say more (the
        // controller stopped first), or it said the key is not its own.
        assert!(a.contains("closed during the handshake") || a.contains("not this agent's"), "{a}");
    }

    /// Frames as the wire carries them, for tampering.
    fn sealed(msgs: &[ToAgent]) -> (Vec<u8>, [u8; LEN]) {
        let s = Session { key: [9; LEN], side: Side::Controller };
        let k = s.key;
        let mut out = Vec::new();
        {
            let (_, mut w) = s.wrap(io::empty(), &mut out);
            for m in msgs {
                protocol::write_msg(&mut w, m).unwrap();
            }
        }
        (out, k)
    }

    fn open(bytes: &[u8], key: [u8; LEN]) -> Vec<Result<Option<ToAgent>, String>> {
        let (mut r, _) = Session { key, side: Side::Agent }.wrap(bytes, io::sink());
        let mut v = Vec::new();
        loop {
            match protocol::read_msg::<_, ToAgent>(&mut r) {
                Ok(None) => break,
                Ok(m) => v.push(Ok(m)),
                Err(e) => {
                    v.push(Err(e.to_string()));
                    break;
                }
            }
        }
        v
    }

    #[test]
    fn replayed_altered_and_injected_messages_are_refused() {
        let hello = ToAgent::Hello { version: VERSION };
        let (good, k) = sealed(&[hello.clone(), ToAgent::Teardown]);
        assert_eq!(open(&good, k), vec![Ok(Some(hello.clone())), Ok(Some(ToAgent::Teardown))]);
        let first = 4 + u32::from_be_bytes(good[..4].try_into().unwrap()) as usize;

        // Replayed: the first frame again after itself.
        let mut replay = good[..first].to_vec();
        replay.extend_from_slice(&good[..first]);
        let r = open(&replay, k);
        assert_eq!(r[0], Ok(Some(hello.clone())));
        assert!(
            r[1].as_ref()
                .is_err_and(|e| e.contains("message 1 failed authentication (sequence number 0)")),
            "{r:?}"
        );

        // Altered: one byte of the JSON body changed.
        let mut altered = good.clone();
        altered[first - 3] ^= 0x01;
        assert!(open(&altered, k)[0]
            .as_ref()
            .is_err_and(|e| e.contains("message 0 failed authentication")));

        // Injected: a frame sealed with another key, or a plain unauthenticated one.
        let (other, _) = sealed(&[ToAgent::Teardown]);
        assert!(open(&other, [8; LEN])[0].is_err());
        let mut plain = Vec::new();
        protocol::write_msg(&mut plain, &ToAgent::Teardown).unwrap();
        assert!(
            open(&plain, k)[0].as_ref().is_err_and(|e| e.contains("not a frame of this protocol")),
            "a bare frame is shorter than seq + tag"
        );

        // A message sealed by the agent is not taken as the controller's.
        let s = Session { key: k, side: Side::Agent };
        let mut out = Vec::new();
        {
            let (_, mut w) = s.wrap(io::empty(), &mut out);
            protocol::write_msg(&mut w, &FromAgent::error("x", None)).unwrap();
        }
        assert!(open(&out, k)[0].is_err(), "directions have their own MACs");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]

        /// Whatever arrives instead of a controller's handshake, the agent's side
        /// ends it with an error: never a panic, never a session.
        #[test]
        fn any_bytes_as_a_handshake_are_refused(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600)) {
            let mut out = Vec::new();
            proptest::prop_assert!(server(&key(3), &mut &bytes[..], &mut out).is_err());
        }

        /// A well-framed but made-up challenge also gets no session.
        #[test]
        fn made_up_challenges_are_refused(nonce in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64), proof in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            let mut input = Vec::new();
            protocol::write_msg(&mut input, &Challenge { auth: SCHEME.into(), nonce: Hex(nonce) }).unwrap();
            protocol::write_msg(&mut input, &Response { proof: Hex(proof) }).unwrap();
            let mut out = Vec::new();
            proptest::prop_assert!(server(&key(3), &mut &input[..], &mut out).is_err());
        }

        /// Whatever arrives after the handshake, the reader yields nothing that was
        /// not sealed with the session key, and never panics.
        #[test]
        fn any_bytes_after_the_handshake_yield_no_message(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2000)) {
            let v = open(&bytes, [9; LEN]);
            proptest::prop_assert!(v.iter().all(|m| !matches!(m, Ok(Some(_)))), "{v:?}");
        }
    }

    #[test]
    fn key_files_are_made_private_and_refused_when_not() {
        let dir = std::env::temp_dir().join(format!("roce-key-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("agent.key");
        Key::generate(&f).unwrap();
        assert_eq!(fs::metadata(&f).unwrap().permissions().mode() & 0o777, 0o600);
        let k = Key::load(&f).unwrap();
        let e = format!("{:#}", Key::generate(&f).unwrap_err());
        assert!(e.contains("never overwritten"), "{e}");
        assert_eq!(Key::load(&f).unwrap().0, k.0, "the key survives a refused --gen-key");
        fs::set_permissions(&f, fs::Permissions::from_mode(0o640)).unwrap();
        let e = format!("{:#}", Key::load(&f).unwrap_err());
        assert!(e.contains("readable by its group") && e.contains("chmod 600"), "{e}");
        fs::set_permissions(&f, fs::Permissions::from_mode(0o604)).unwrap();
        assert!(format!("{:#}", Key::load(&f).unwrap_err()).contains("readable by others"));
        let g = dir.join("bad.key");
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&g)
            .unwrap()
            .write_all(b"not hex\n")
            .unwrap();
        assert!(format!("{:#}", Key::load(&g).unwrap_err()).contains("not a roce key"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
