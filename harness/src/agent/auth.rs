//! Authentication of a controller ↔ agent connection over the network (`roce agent
//! --listen … --key-file F`, `roce run --endpoints … --key-file F`): a shared key,
//! a challenge–response handshake that proves each side to the other without the
//! key ever crossing the wire, then a MAC and a sequence number on every message,
//! so a message injected, altered or replayed on the TCP stream is refused. The
//! lab's stdio agents (a trusted channel) do not use it.
//!
//! The handshake, each step one framed message of the agent protocol's framing
//! (4-byte big-endian length, then JSON), with `N_c`, `N_a` 32 random bytes each:
//!
//! 1. controller → agent: `{"auth": "roce-hmac-sha256-v1", "nonce": N_c}`
//! 2. agent → controller: `{"nonce": N_a, "proof": HMAC(K, "agent" ‖ N_c ‖ N_a)}`
//!    (or `{"refused": why}`: busy, or no key on one side)
//! 3. controller → agent: `{"proof": HMAC(K, "controller" ‖ N_a ‖ N_c)}`
//! 4. agent → controller: `{"ok": true}` (or `{"refused": why}`)
//!
//! Both then derive the session key `S = HMAC(K, "session" ‖ N_c ‖ N_a)`: fresh
//! nonces make a recorded session useless on a new connection. After it, a frame
//! is `len ‖ seq ‖ tag ‖ body` with `seq` a 64-bit big-endian counter per
//! direction starting at 0 and `tag = HMAC(S, dir ‖ seq ‖ body)` (`dir` 0 for
//! controller → agent, 1 back), checked in constant time. [`AuthReader`] and
//! [`AuthWriter`] wrap a stream so that the protocol code above them reads and
//! writes its ordinary frames.
//!
//! Owns: the key file, the handshake, the per-message MAC. Imports: the protocol's
//! framing. The primitives are RustCrypto's `hmac` and `sha2`.
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use anyhow::{bail, Context, Result};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::protocol::{self, FromAgent, Hex, ReadError, MAX_MESSAGE};

type HmacSha256 = Hmac<Sha256>;

/// The scheme both sides name in the first message.
const SCHEME: &str = "roce-hmac-sha256-v1";
/// Key, nonce and tag length.
const LEN: usize = 32;
/// `seq ‖ tag` before each authenticated body.
const OVERHEAD: usize = 8 + LEN;

/// The shared secret.
#[derive(Clone)]
pub(crate) struct Key([u8; LEN]);

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
        let key = random::<LEN>()?;
        let mut f = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).with_context(|| {
            format!("creating the key file {} (an existing key file is never overwritten; remove it first to replace it)", path.display())
        })?;
        writeln!(f, "{}", dissector::text::hex_string(&key))
            .and_then(|()| f.sync_all())
            .with_context(|| format!("writing {}", path.display()))?;
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
        let text = fs::read_to_string(path)
            .with_context(|| format!("reading the key file {}", path.display()))?;
        Key::parse(text.trim()).with_context(|| {
            format!(
                "{}: not a roce key\nhint: make one with `roce agent --gen-key FILE`",
                path.display()
            )
        })
    }

    fn parse(text: &str) -> Result<Key> {
        if text.len() != 2 * LEN || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!("expected {} hex digits, found {} characters", 2 * LEN, text.len());
        }
        let mut k = [0u8; LEN];
        for (i, b) in k.iter_mut().enumerate() {
            *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16)?;
        }
        Ok(Key(k))
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
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Challenge {
    auth: String,
    nonce: Hex,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum Reply {
    Refused { refused: String },
    Proof { nonce: Hex, proof: Hex },
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

#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum Verdict {
    Refused { refused: String },
    Ok { ok: bool },
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

/// An authenticated session: its key and which end we are.
pub(crate) struct Session {
    key: [u8; LEN],
    side: Side,
}

impl Session {
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

fn read_step<T: for<'de> Deserialize<'de>>(r: &mut dyn Read, what: &str) -> Result<T> {
    match protocol::read_msg::<_, T>(r) {
        Ok(Some(m)) => Ok(m),
        Ok(None) => bail!("the connection closed during the handshake (waiting for {what})"),
        Err(ReadError::Io(e))
            if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) =>
        {
            bail!("no {what} within the handshake's deadline")
        }
        Err(e) => bail!("the handshake's {what} is not valid: {e}"),
    }
}

/// The controller's side of the handshake. Errors say whether the agent refused
/// us (and why) or failed to prove it has the key.
pub(crate) fn client(key: &Key, r: &mut dyn Read, w: &mut dyn Write) -> Result<Session> {
    let n_c = random::<LEN>()?;
    protocol::write_msg(w, &Challenge { auth: SCHEME.into(), nonce: Hex(n_c.to_vec()) })?;
    let (n_a, proof) = match read_step::<FirstAnswer>(r, "agent's proof")? {
        FirstAnswer::Reply(Reply::Refused { refused }) => {
            bail!("the agent refused the connection: {refused}")
        }
        FirstAnswer::Reply(Reply::Proof { nonce, proof }) => (nonce.0, proof.0),
        FirstAnswer::Unauthenticated(FromAgent::Error { message, .. }) => {
            bail!("the agent does not authenticate (it answered: {message})\nhint: it runs with --insecure, or is an older roce; start it with --key-file")
        }
        FirstAnswer::Unauthenticated(other) => {
            bail!("the agent does not authenticate (it answered {other:?})")
        }
    };
    if n_a.len() != LEN || !verify(&key.0, &[b"agent", &n_c, &n_a], &proof) {
        bail!("the agent could not prove it has our key: its --key-file is not the one given here (or something between us is not the agent)");
    }
    protocol::write_msg(
        w,
        &Response { proof: Hex(key.mac(&[b"controller", &n_a, &n_c]).to_vec()) },
    )?;
    match read_step::<Verdict>(r, "agent's verdict")? {
        Verdict::Ok { ok: true } => {}
        Verdict::Ok { ok: false } => bail!("the agent did not accept the handshake"),
        Verdict::Refused { refused } => bail!("the agent refused us: {refused}"),
    }
    Ok(Session { key: key.mac(&[b"session", &n_c, &n_a]), side: Side::Controller })
}

/// The agent's side of the handshake. On a wrong key the controller is told so
/// before the error is returned.
pub(crate) fn server(key: &Key, r: &mut dyn Read, w: &mut dyn Write) -> Result<Session> {
    let c: Challenge = match read_step::<Challenge>(r, "controller's challenge") {
        Ok(c) => c,
        Err(e) => {
            // Most likely a controller without --key-file: it reads answers as the
            // agent protocol's, so say it in that protocol.
            let why = "this agent requires authentication: give the controller the agent's key (--key-file FILE)";
            let _ = protocol::write_msg(w, &FromAgent::error(why, None));
            return Err(e.context(why));
        }
    };
    if c.auth != SCHEME || c.nonce.0.len() != LEN {
        let why =
            format!("unknown authentication scheme `{}` (this agent speaks {SCHEME})", c.auth);
        let _ = protocol::write_msg(w, &Reply::Refused { refused: why.clone() });
        bail!(why);
    }
    let n_c = c.nonce.0;
    let n_a = random::<LEN>()?;
    protocol::write_msg(
        w,
        &Reply::Proof {
            nonce: Hex(n_a.to_vec()),
            proof: Hex(key.mac(&[b"agent", &n_c, &n_a]).to_vec()),
        },
    )?;
    let resp: Response = read_step(r, "controller's proof")?;
    if !verify(&key.0, &[b"controller", &n_a, &n_c], &resp.proof.0) {
        let why = "the controller's key is not this agent's (check both --key-file)";
        let _ = protocol::write_msg(w, &Verdict::Refused { refused: why.into() });
        bail!(why);
    }
    protocol::write_msg(w, &Verdict::Ok { ok: true })?;
    Ok(Session { key: key.mac(&[b"session", &n_c, &n_a]), side: Side::Agent })
}

/// Refuses a connection before any handshake (the agent is busy, or has no key):
/// the answer a controller reads in place of the agent's proof.
pub(crate) fn refuse(w: &mut dyn Write, why: &str) -> io::Result<()> {
    protocol::write_msg(w, &Reply::Refused { refused: why.into() })
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
