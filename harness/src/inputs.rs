//! The parsers of outside input, one door each: the bytes or text a stranger
//! can hand `roce` (a capture file, one frame, a display filter, a scenario or
//! fixture file, a fault rule, a device profile, the agent's pre-authentication
//! handshake and its framed messages) through the same functions the commands
//! call on them, their errors rendered as the commands print them. A door never
//! panics on any input: an `Err` is the input refused, as the program would
//! refuse it. The libFuzzer targets (`fuzz/`, `scripts/fuzz.sh`) and the
//! regression test over the inputs they found (`tests/tests/fuzz_inputs.rs`)
//! reach the parsers through here and nowhere else; so do the seeds they start
//! from that only the crate can make (a handshake with the fixed key, agent
//! messages).
//!
//! Owns: the doors and their fixed key. Imports: `crate::scenario` (loading and
//! checking, `--fix`'s plan), `crate::results::profile`, `crate::agent::auth`
//! (the agent's handshake steps and the authenticated stream),
//! `crate::protocol` (the framing and the agent's messages), dissector's
//! capture, frame, ctx, print, fields, filter and flow; lab's fault-rule parser.
use std::io::{self, Read, Write};
use std::path::Path;

use dissector::capture::Reader;
use dissector::ctx::{Ctx, Shown};
use dissector::fields::{self, Field};
use dissector::filter::Filter;
use dissector::flow::{Analyzer, Facts};
use dissector::frame::{self, Options, TransportHint};
use dissector::{print, LinkType};

use crate::agent::auth::{self, Key, Session};
use crate::protocol::{self, FromAgent, ReadError, ToAgent};
use crate::results::profile::Profile;
use crate::scenario::{check, fix};

/// The key the handshake door answers with, and the seeds' handshakes are made
/// with.
pub const KEY: [u8; 32] = [0x5a; 32];
/// The agent's clock in the handshake door (Unix seconds): a challenge marked at
/// this time is fresh.
pub const NOW: u64 = 1_750_000_000;

/// Every link type the dissector decodes.
pub const LINK_TYPES: [LinkType; 7] = [
    LinkType::NULL,
    LinkType::ETHERNET,
    LinkType::RAW,
    LinkType::LINUX_SLL,
    LinkType::IPV4,
    LinkType::IPV6,
    LinkType::LINUX_SLL2,
];

/// A capture file's bytes as `roce decode` and `roce flows` read them: every
/// record decoded and printed as a summary line, a `-V` tree, JSON and every
/// field, and fed to the flow analyzer, whose report is printed as text and
/// JSON. The frames read, or the error that ended the capture (the frames
/// before it were decoded).
pub fn capture(bytes: &[u8]) -> Result<u64, String> {
    let mut r = Reader::new(bytes).map_err(|e| e.to_string())?;
    let _ = (r.format(), r.interfaces().len());
    let opts = Options::default();
    let mut fr = frame::decode(LinkType::ETHERNET, &[], &opts);
    let mut scratch = frame::decode(LinkType::ETHERNET, &[], &opts);
    let mut an = Analyzer::new();
    let (mut first, mut prev) = (None, None);
    let (mut text, mut out) = (String::new(), Vec::new());
    let mut frames = 0;
    let end = loop {
        let rec = match r.next_packet() {
            Ok(Some(rec)) => rec,
            Ok(None) => break None,
            Err(e) => break Some(e.to_string()),
        };
        frames += 1;
        frame::decode_into(&mut fr, rec.link, rec.data, &opts);
        let first = *first.get_or_insert(rec.ts_ns);
        let ctx = Ctx::of(&rec, &fr, first, prev.unwrap_or(rec.ts_ns));
        prev = Some(rec.ts_ns);
        print_every_way(&ctx, &mut text, &mut out);
        an.add_captured(
            rec.number,
            rec.ts_ns,
            rec.orig_len,
            rec.link,
            rec.data,
            &opts,
            &mut scratch,
        );
    };
    let report = an.report();
    let _ = report.to_string();
    serde_json::to_string(&report).map_err(|e| e.to_string())?;
    match end {
        Some(e) => Err(e),
        None => Ok(frames),
    }
}

/// A decoded frame printed as `roce decode` prints it, every way: its summary
/// line and `-V` tree into `text`, its JSON and every field into `out` (both
/// emptied first).
fn print_every_way(ctx: &Ctx<'_>, text: &mut String, out: &mut Vec<u8>) {
    text.clear();
    out.clear();
    print::line(ctx, text);
    print::verbose(ctx, text);
    out.extend_from_slice(print::json(ctx).to_string().as_bytes());
    for (f, _, _) in Field::ALL {
        fields::write(*f, ctx, out);
    }
}

/// The transport hints a frame is decoded under.
const HINTS: [TransportHint; 3] = [TransportHint::Auto, TransportHint::Rd, TransportHint::Dc];

/// The frame door's input: its first byte chooses the link type and transport
/// hint (so the fuzzer steers them as it steers the bytes, rather than every
/// input paying for all 21), the rest is the frame. `None` for an empty input.
pub fn frame_choice(input: &[u8]) -> Option<(LinkType, TransportHint, &[u8])> {
    let (&choice, bytes) = input.split_first()?;
    let link = LINK_TYPES[usize::from(choice) % LINK_TYPES.len()];
    let hint = HINTS[usize::from(choice) / LINK_TYPES.len() % HINTS.len()];
    Some((link, hint, bytes))
}

/// The frame door's input for `bytes` captured under `link`, decoded with the
/// default hint: what [`frame_choice`] reads back. `None` for a link type the
/// dissector does not decode.
pub fn frame_seed(link: LinkType, bytes: &[u8]) -> Option<Vec<u8>> {
    let choice = LINK_TYPES.iter().position(|l| *l == link)?;
    let mut input = Vec::with_capacity(bytes.len() + 1);
    input.push(u8::try_from(choice).ok()?);
    input.extend_from_slice(bytes);
    Some(input)
}

/// One frame (see [`frame_choice`]) decoded, printed every way, every field
/// written, its derived values read, and fed to the flow analyzer; and, where the
/// flow analyzer's fast path answers for it, that answer held to the decoder's.
///
/// # Panics
///
/// When the fast path and the decoder disagree: a bug in one of them.
pub fn frame(input: &[u8]) {
    let Some((link, hint, bytes)) = frame_choice(input) else { return };
    let (mut text, mut out) = (String::new(), Vec::new());
    let opts = Options { transport_hint: hint, ..Options::default() };
    let fr = frame::decode(link, bytes, &opts);
    let ctx = Ctx {
        number: 1,
        ts_ns: 5,
        first_ts_ns: 1,
        prev_ts_ns: 2,
        orig_len: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
        interface: 0,
        data: bytes,
        frame: &fr,
        comment: None,
    };
    print_every_way(&ctx, &mut text, &mut out);
    let _ = (fr.is_roce(), fr.addrs(), fr.dscp(), fr.ecn(), fr.payload_len_on_wire());
    let _ = (fr.icrc_check(bytes).map(|c| c.ok()), fr.cm_private_data(bytes));
    let _ = fr.rdma_cm_header(bytes);
    let mut an = Analyzer::new();
    an.add(1, 5, ctx.orig_len, &fr, bytes);
    let _ = an.report().to_string();
    if let Some(fast) = Facts::parse(link, bytes, &opts) {
        assert_eq!(Some(fast), Facts::of(&fr, bytes), "fast path and decoder disagree");
    }
}

/// A display filter as `-Y` compiles it (a bad one's error rendered with its
/// caret, as `roce decode` prints it) and, when it compiles, run over every
/// frame of `capture` as `roce decode` runs it: the frames it keeps.
pub fn filter(text: &str, capture: &[u8]) -> Result<u64, String> {
    let f = Filter::compile(text)
        .map_err(|e| dissector::filter::FilterError { origin: Some("-Y"), ..e }.to_string())?;
    let _ = (f.text(), f.uses(Field::FrameTimeDeltaDisplayed));
    let mut r = Reader::new(capture).map_err(|e| e.to_string())?;
    let opts = Options::default();
    let mut fr = frame::decode(LinkType::ETHERNET, &[], &opts);
    let (mut first, mut prev, mut shown) = (None, None, None);
    let mut kept = 0;
    while let Ok(Some(rec)) = r.next_packet() {
        frame::decode_into(&mut fr, rec.link, rec.data, &opts);
        let first = *first.get_or_insert(rec.ts_ns);
        let ctx = Ctx::of(&rec, &fr, first, prev.unwrap_or(rec.ts_ns));
        prev = Some(rec.ts_ns);
        let _ = f.matches(&ctx);
        if f.matches_shown(&ctx, Shown { prev_ts_ns: shown }) {
            shown = Some(rec.ts_ns);
            kept += 1;
        }
    }
    Ok(kept)
}

/// A scenario file's text as `roce check` loads and checks it from `path` (the
/// fixtures it `use`s are read relative to it; an older format is read as it
/// meant it), every problem or warning rendered as printed; then, as `roce check
/// --fix` plans it, the text in the current format. The scenarios it holds (one
/// per case).
pub fn scenario(path: &Path, text: &str) -> Result<usize, String> {
    let loaded = check::parse_cases(path, text).map(|all| {
        let mut shown = String::new();
        for sc in &all {
            for w in &sc.warnings {
                shown.push_str(&w.to_string());
            }
            shown.push_str(&sc.name);
            shown.push_str(&sc.shape());
        }
        all.len()
    });
    // `--fix` reads the same text again and rewrites it (or says why not).
    match fix::plan(path, text) {
        Ok(fix::Plan::Current) => {}
        Ok(fix::Plan::Fixed { text, was, changes }) => {
            let _ = (text.len(), was, changes.len());
        }
        Err(problems) => {
            let _ = render(&problems);
        }
    }
    loaded.map_err(|problems| render(&problems))
}

fn render(problems: &[crate::scenario::Diagnostic]) -> String {
    problems.iter().map(|p| format!("{p}\n")).collect()
}

/// A `--fault` rule's text, as `roce lab run --fault` and a scenario's `[[fault]]
/// rule` parse it; the error rendered as printed.
pub fn fault_rule(text: &str) -> Result<lab::fault::Rule, String> {
    lab::fault::parse_rule(text).map_err(|e| e.to_string())
}

/// A `--faults FILE.toml` rule file's text: the rules it holds.
pub fn fault_rule_file(text: &str) -> Result<usize, String> {
    lab::fault::parse_rules_toml(text, Path::new("faults.toml"))
        .map(|(rules, _seed)| rules.len())
        .map_err(|e| e.to_string())
}

/// A device profile's text, as `roce run --profile FILE` loads it from `path`.
pub fn profile(path: &Path, text: &str) -> Result<usize, String> {
    let p = Profile::parse(text, path).map_err(|e| format!("{e:#}"))?;
    let _ = p.snapshots_dir();
    Ok(p.scenario.len())
}

/// What a stranger sends a listening agent before it has proved the key: the
/// bytes taken as the agent's poll loop takes them, whole frames off the front,
/// the first answered as the controller's challenge and the second as its
/// proof, with the key [`KEY`] and the clock at [`NOW`]. `Ok` only for a
/// handshake that ends in a session, which without the agent's nonce no input
/// can reach; the refusal, as the agent logs it, else.
pub fn handshake(bytes: &[u8]) -> Result<(), String> {
    let key = Key::from_bytes(KEY);
    let mut buf = bytes.to_vec();
    let refused = |r: auth::Refusal| {
        let _ = r.tell.len();
        r.error.to_string()
    };
    let next = |buf: &mut Vec<u8>| {
        auth::take_frame(buf).map_err(|e| {
            let _ = auth::refusal(&e.to_string(), false);
            e.to_string()
        })
    };
    let Some(body) = next(&mut buf)? else {
        return Err("closed before the controller's challenge".into());
    };
    let (hs, _reply) = auth::accept_challenge(&key, &body, NOW).map_err(refused)?;
    let _ = (hs.mark(), hs.nonce());
    let Some(body) = next(&mut buf)? else {
        return Err(hs.closed().to_string());
    };
    let (_session, _ok) = hs.finish(&key, &body).map_err(refused)?;
    Ok(())
}

/// What [`messages`] read of one stream, three ways.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Messages {
    /// As the plain stream of the lab's stdio agent: the messages read, or what
    /// ended the stream.
    pub plain: Result<usize, String>,
    /// As a stranger's bytes injected into an authenticated stream: nothing of
    /// them may be read as a message.
    pub injected: Result<usize, String>,
    /// Sealed by a controller holding the session key [`KEY`], whole frames
    /// only, and read through the MAC: where the plain stream ended cleanly,
    /// the same messages.
    pub sealed: Result<usize, String>,
}

/// A controller's messages to the agent after the handshake, read as the
/// agent's executor reads them: each frame a [`ToAgent`] (up to `Teardown`), a
/// malformed one answered with an error and the next read, a frame too large or
/// a broken stream ending it; the bytes read three ways (see [`Messages`]).
pub fn messages(bytes: &[u8]) -> Messages {
    let plain = serve(&mut &bytes[..]);
    let (mut r, _) = Session::known(KEY, true).wrap(bytes, io::sink());
    let injected = serve(&mut r);
    let mut sealed = Vec::new();
    {
        let (_, mut w) = Session::known(KEY, false).wrap(io::empty(), &mut sealed);
        // Writing into a Vec does not fail.
        let _ = w.write_all(bytes);
    }
    let (mut r, _) = Session::known(KEY, true).wrap(&sealed[..], io::sink());
    let sealed = serve(&mut r);
    Messages { plain, injected, sealed }
}

/// The executor's reading loop (`agent::exec::serve`) without the verbs: each
/// message read and answered.
fn serve(r: &mut dyn Read) -> Result<usize, String> {
    let mut answers = Vec::new();
    let mut n = 0;
    loop {
        match protocol::read_msg::<_, ToAgent>(r) {
            Ok(Some(m)) => {
                n += 1;
                answers.clear();
                let _ = format!("{m:?}");
                if matches!(m, ToAgent::Teardown) {
                    return Ok(n);
                }
            }
            Ok(None) => return Ok(n),
            Err(ReadError::Invalid(e)) => {
                answers.clear();
                protocol::write_msg(
                    &mut answers,
                    &FromAgent::error(format!("malformed message: {e}"), None),
                )
                .map_err(|e| e.to_string())?;
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Seeds for the handshake target: a controller's challenge marked with [`KEY`]
/// at [`NOW`] (fresh) and far from it (stale), each followed by its proof over an
/// agent nonce the door cannot have drawn, and one marked with another key.
pub fn handshake_seeds() -> Vec<Vec<u8>> {
    let key = Key::from_bytes(KEY);
    let other = Key::from_bytes([0x33; 32]);
    let n_c = [0x11; 32];
    let n_a = [0x22; 32];
    let mut seeds = Vec::new();
    for (k, at) in [(&key, NOW), (&key, NOW - 86_400), (&other, NOW)] {
        let mut t = auth::challenge(k, &n_c, at);
        seeds.push(t.clone());
        t.extend(auth::response(k, &n_a, &n_c));
        seeds.push(t);
    }
    seeds
}

/// Seeds for the message target: every kind of request a controller sends, each
/// framed, and a whole session's worth in one stream.
pub fn message_seeds() -> Vec<Vec<u8>> {
    use crate::protocol::*;
    use crate::vocab::{Access, QpStateName, SendFlag};
    let setup = Setup::example();
    let post = |wr_id, verb| ToAgent::Do {
        index: 1,
        action: Action::Post {
            qp: "q".into(),
            wr_id,
            verb,
            sges: vec![SgeRef { mr: "m".into(), offset: 0, len: 8, outside_mr: false }],
            flags: vec![SendFlag::Fence],
        },
        judged: false,
    };
    let remote = RemoteRef { mr: "t".into(), offset: 8, rkey: Some(0xbad), mw: None };
    let msgs = vec![
        ToAgent::Hello { version: VERSION },
        ToAgent::Heartbeat,
        ToAgent::Capabilities { device: Some("rxe0".into()) },
        ToAgent::Setup(setup),
        ToAgent::Baseline,
        ToAgent::Listen { qp: "q".into(), port: 18515 },
        ToAgent::Connect(Connect {
            qp: "q".into(),
            passive: false,
            peer_ip: "10.0.0.2".into(),
            port: 18515,
            peer_mrs: Vec::new(),
            peer: None,
        }),
        ToAgent::Connect(Connect {
            qp: "q".into(),
            passive: true,
            peer_ip: "10.0.0.2".into(),
            port: 18515,
            peer_mrs: Vec::new(),
            peer: Some(QpInfo {
                name: "q".into(),
                qpn: 0x11,
                psn: 500,
                gid: "::ffff:10.0.0.2".into(),
                qkey: None,
            }),
        }),
        post(7, Verb::CmpSwap { remote: remote.clone(), compare: 1, swap: 2 }),
        post(
            8,
            Verb::BindMw { mw: "w".into(), mr: "m".into(), offset: 8, len: 16, access: Access(2) },
        ),
        ToAgent::Do {
            index: 2,
            action: Action::ArmSrq { srq: "s".into(), limit: 2 },
            judged: false,
        },
        ToAgent::Do {
            index: 3,
            action: Action::ModifyQp {
                qp: "q".into(),
                state: QpStateName::SQD,
                state_only: true,
                access: Some(Access(4)),
            },
            judged: true,
        },
        ToAgent::Do { index: 4, action: Action::QueryQp { qp: "q".into() }, judged: true },
        ToAgent::Do { index: 5, action: Action::AwaitNotify { within_ms: 300 }, judged: true },
        ToAgent::Completions { min: 2, wait_ms: 100, grace_ms: None },
        ToAgent::Completions { min: 1, wait_ms: 100, grace_ms: Some(5) },
        ToAgent::ReadMemory { mr: "m".into() },
        ToAgent::Guards,
        ToAgent::Teardown,
    ];
    let mut seeds = Vec::new();
    let mut all = Vec::new();
    for m in &msgs {
        let mut one = Vec::new();
        // Writing into a Vec fails only for a message over MAX_MESSAGE: none of these.
        let _ = protocol::write_msg(&mut one, m);
        all.extend_from_slice(&one);
        seeds.push(one);
    }
    seeds.push(all);
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_seed_reads_back_as_its_link_type_under_the_default_hint() {
        let bytes = [1u8, 2, 3];
        for link in LINK_TYPES {
            let seed = frame_seed(link, &bytes).expect("a link type the dissector decodes");
            let (l, hint, rest) = frame_choice(&seed).expect("a non-empty input");
            assert_eq!((l, hint, rest), (link, TransportHint::Auto, &bytes[..]));
        }
        assert_eq!(frame_seed(LinkType(147), &bytes), None, "a user link type is not decoded");
        assert_eq!(frame_choice(&[]), None);
    }

    #[test]
    fn the_choice_byte_reaches_every_link_type_under_every_hint() {
        let mut seen = std::collections::BTreeSet::new();
        for choice in 0..=u8::MAX {
            let (link, hint, _) = frame_choice(&[choice]).expect("one byte");
            seen.insert((link.0, hint as u8));
        }
        assert_eq!(seen.len(), LINK_TYPES.len() * HINTS.len());
    }
}
