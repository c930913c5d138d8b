//! Loading a scenario file: TOML into [`Scenario`], then every semantic problem found,
//! each located at `file:line:col` with the source line, a caret and a hint.
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml_edit::{ImDocument, Item};

use super::model::{Content, Op, ProbeSpec, QpSpec, QpType, Scenario, Step};

/// One problem in a scenario file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: PathBuf,
    pub line: usize,
    pub col: usize,
    pub message: String,
    /// The offending source line and a caret under the span.
    pub excerpt: Option<String>,
    pub hint: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: error: {}", self.file.display(), self.line, self.col, self.message)?;
        if let Some(x) = &self.excerpt {
            write!(f, "\n{x}")?;
        }
        if let Some(h) = &self.hint {
            write!(f, "\n  hint: {h}")?;
        }
        Ok(())
    }
}

/// Where a value sits in the document: keys and array indices from the root.
#[derive(Debug, Clone, Copy)]
pub enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

struct Source<'a> {
    file: &'a Path,
    text: &'a str,
    doc: Option<ImDocument<&'a str>>,
}

impl Source<'_> {
    /// Line and column (1-based, in characters) of a byte offset.
    fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        (line, self.text[start..offset].chars().count() + 1)
    }

    fn diag(&self, span: Option<Range<usize>>, message: String, hint: Option<String>) -> Diagnostic {
        let span = span.unwrap_or(0..0);
        let (line, col) = self.position(span.start);
        let excerpt = self.text.lines().nth(line - 1).map(|l| {
            let width = self.text[span.clone()].lines().next().map(|s| s.chars().count()).unwrap_or(1).max(1);
            format!("  {l}\n  {}{}", " ".repeat(col - 1), "^".repeat(width.min(l.chars().count().saturating_sub(col - 1).max(1))))
        });
        Diagnostic { file: self.file.to_path_buf(), line, col, message, excerpt, hint }
    }

    /// The span of the value at `path` (or of its nearest ancestor that exists).
    fn span(&self, path: &[Seg<'_>]) -> Option<Range<usize>> {
        use toml_edit::Value as V;
        let doc = self.doc.as_ref()?;
        let mut node = Node::Table(doc.as_table());
        let mut best = None;
        for seg in path {
            let next = match (seg, node) {
                (Seg::Key(k), Node::Table(t)) | (Seg::Key(k), Node::Item(Item::Table(t))) => t.get(k).map(Node::Item),
                (Seg::Key(k), Node::Item(Item::Value(V::InlineTable(t)))) | (Seg::Key(k), Node::Value(V::InlineTable(t))) => {
                    t.get(k).map(Node::Value)
                }
                (Seg::Index(i), Node::Item(Item::ArrayOfTables(a))) => a.get(*i).map(Node::Table),
                (Seg::Index(i), Node::Item(Item::Value(V::Array(a)))) | (Seg::Index(i), Node::Value(V::Array(a))) => {
                    a.get(*i).map(Node::Value)
                }
                _ => None,
            };
            let Some(n) = next else { break };
            best = n.span().or(best);
            node = n;
        }
        best
    }
}

/// A place in the parsed document.
#[derive(Clone, Copy)]
enum Node<'d> {
    Item(&'d Item),
    Table(&'d toml_edit::Table),
    Value(&'d toml_edit::Value),
}

impl Node<'_> {
    fn span(self) -> Option<Range<usize>> {
        match self {
            Node::Item(i) => i.span(),
            Node::Table(t) => t.span(),
            Node::Value(v) => v.span(),
        }
    }
}

/// Closest candidate by edit distance, if close enough to be a typo.
fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    fn dist(a: &str, b: &str) -> usize {
        let b: Vec<char> = b.chars().collect();
        let mut prev: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut cur = vec![i + 1];
            for (j, cb) in b.iter().enumerate() {
                cur.push((prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1));
            }
            prev = cur;
        }
        prev[b.len()]
    }
    candidates
        .into_iter()
        .map(|c| (dist(word, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The hint for a serde error such as "unknown field `acess`, expected one of `a`, `b`".
fn serde_hint(message: &str) -> Option<String> {
    let unknown = message.split('`').nth(1)?;
    let (_, expected) = message.split_once("expected")?;
    let names: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    if message.starts_with("unknown field") || message.starts_with("unknown variant") {
        return Some(match did_you_mean(unknown, names.iter().copied()) {
            Some(m) => format!("did you mean `{m}`?"),
            None => format!("expected one of: {}", names.join(", ")),
        });
    }
    None
}

/// Access flag names (the `IBV_ACCESS_` prefix and case are optional).
/// The `timeout_ms` a scenario may set.
const TIMEOUT_MS: std::ops::RangeInclusive<u64> = 1_000..=3_600_000;

pub const ACCESS_FLAGS: &[&str] = &["local_write", "remote_write", "remote_read", "remote_atomic", "mw_bind", "zero_based", "on_demand", "relaxed_ordering"];
pub const WR_FLAGS: &[&str] = &["signaled", "unsignaled", "inline", "solicited", "fence"];
pub const NAK_NAMES: &[&str] = &["psn_sequence_error", "invalid_request", "remote_access_error", "remote_operational_error", "invalid_rd_request", "rnr"];

/// `IBV_WC_SUCCESS`, `success`, `wc_success` → `IBV_WC_SUCCESS`.
pub fn wc_name(s: &str) -> String {
    let u = s.trim().to_ascii_uppercase();
    if u.starts_with("IBV_WC_") {
        u
    } else if let Some(r) = u.strip_prefix("WC_") {
        format!("IBV_WC_{r}")
    } else {
        format!("IBV_WC_{u}")
    }
}

/// `IBV_ACCESS_REMOTE_WRITE` / `remote_write` → `remote_write`.
pub fn access_name(s: &str) -> String {
    let l = s.trim().to_ascii_lowercase();
    l.strip_prefix("ibv_access_").unwrap_or(&l).to_string()
}

/// A wire opcode pattern: a table name (`SEND Only`, `Acknowledge`, …), a NAK/ACK
/// response word, and an optional `*`/`+` repetition suffix.
/// `|` separates alternatives: `"NAK Invalid Request | NAK Remote Access Error"`
/// (where the spec lets the device choose; a profile pins down which).
pub fn wire_name_ok(s: &str) -> bool {
    s.trim().trim_end_matches(['*', '+']).split('|').all(one_wire_name_ok)
}

fn one_wire_name_ok(s: &str) -> bool {
    let base = s.trim();
    dissector::wire::Opcode::all().any(|i| i.name == base)
        || matches!(base, "ACK" | "RNR NAK" | "NAK")
        || base.strip_prefix("NAK ").is_some_and(|n| {
            ["PSN Sequence Error", "Invalid Request", "Remote Access Error", "Remote Operational Error", "Invalid RD Request"].contains(&n)
        })
}

/// Bytes of a [`Content`] at a given length (`Pattern` repeats to it).
pub fn content_bytes(c: &Content, len: usize) -> Result<Vec<u8>, String> {
    fn hex(s: &str) -> Result<Vec<u8>, String> {
        let digits: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        let digits = digits.strip_prefix("0x").unwrap_or(&digits);
        if digits.len() % 2 != 0 {
            return Err(format!("`{s}` has an odd number of hex digits"));
        }
        (0..digits.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).map_err(|_| format!("`{}` is not a hex byte", &digits[i..i + 2])))
            .collect()
    }
    Ok(match c {
        Content::Text(t) => t.as_bytes().to_vec(),
        Content::Bytes(b) => hex(b)?,
        Content::U64(v) => v.to_le_bytes().to_vec(),
        Content::Pattern(p) => {
            let unit = hex(p)?;
            if unit.is_empty() {
                return Err("an empty pattern".into());
            }
            unit.iter().copied().cycle().take(len).collect()
        }
    })
}

/// Reads and checks a scenario file.
pub fn load(path: &Path) -> Result<Scenario, Vec<Diagnostic>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![Diagnostic {
            file: path.to_path_buf(),
            line: 1,
            col: 1,
            message: format!("cannot read the scenario: {e}"),
            excerpt: None,
            hint: None,
        }]
    })?;
    parse_str(path, &text)
}

/// Parses and checks scenario text; `path` names it in the diagnostics.
pub fn parse_str(path: &Path, text: &str) -> Result<Scenario, Vec<Diagnostic>> {
    let mut src = Source { file: path, text, doc: None };
    match ImDocument::parse(text) {
        Ok(d) => src.doc = Some(d),
        Err(e) => {
            let msg = e.message().trim().to_string();
            return Err(vec![src.diag(e.span(), format!("TOML syntax: {msg}"), Some("see the TOML syntax at toml.io; strings need quotes".into()))]);
        }
    }
    let sc: Scenario = toml::from_str(text).map_err(|e| {
        let msg = e.message().trim().to_string();
        let hint = serde_hint(&msg).or_else(|| Some("`roce schema` prints every key and its type".into()));
        vec![src.diag(e.span(), msg, hint)]
    })?;
    let mut v = Checker { src: &src, out: Vec::new() };
    v.check(&sc);
    if v.out.is_empty() {
        Ok(sc)
    } else {
        Err(v.out)
    }
}

struct Checker<'a> {
    src: &'a Source<'a>,
    out: Vec<Diagnostic>,
}

impl Checker<'_> {
    fn err(&mut self, path: &[Seg<'_>], message: impl Into<String>, hint: Option<String>) {
        let span = self.src.span(path);
        self.out.push(self.src.diag(span, message.into(), hint));
    }

    fn name_hint<'b>(word: &str, names: impl IntoIterator<Item = &'b str> + Clone) -> Option<String> {
        match did_you_mean(word, names.clone()) {
            Some(m) => Some(format!("did you mean `{m}`?")),
            None => {
                let all: Vec<&str> = names.into_iter().collect();
                (!all.is_empty() && all.len() <= 12).then(|| format!("known: {}", all.join(", ")))
            }
        }
    }

    fn check(&mut self, sc: &Scenario) {
        use Seg::{Index as I, Key as K};
        let eps: Vec<&str> = sc.endpoints.keys().map(String::as_str).collect();
        if eps.is_empty() {
            self.err(&[], "no endpoints", Some("add `[endpoints.a]` and `[endpoints.b]`".into()));
        }
        if let Some(t) = sc.timeout_ms.filter(|t| !TIMEOUT_MS.contains(t)) {
            let hint = "the deadline of the whole scenario, setup included: lab VMs under TCG take seconds to set up";
            self.err(&[K("timeout_ms")], format!("a timeout of {t} ms: give {} to {} (1 s to 1 hour)", TIMEOUT_MS.start(), TIMEOUT_MS.end()), Some(hint.into()));
        }
        let ep_ok = |c: &mut Self, path: &[Seg<'_>], name: &str| -> bool {
            if sc.endpoints.contains_key(name) {
                return true;
            }
            c.err(path, format!("no endpoint `{name}`"), Self::name_hint(name, eps.iter().copied()));
            false
        };
        // QPs.
        let mut seen = std::collections::BTreeSet::new();
        for (i, q) in sc.qps.iter().enumerate() {
            if !seen.insert(q.name.as_str()) {
                self.err(&[K("qp"), I(i), K("name")], format!("a second QP named `{}`", q.name), None);
            }
            for e in &q.between {
                ep_ok(self, &[K("qp"), I(i), K("between")], e);
            }
            if q.between[0] == q.between[1] {
                self.err(&[K("qp"), I(i), K("between")], "a QP pair needs two endpoints", Some("for two QPs on one host use two endpoints with the same `vm`".into()));
            }
            if let Some(m) = q.mtu {
                if ![256, 512, 1024, 2048, 4096].contains(&m) {
                    self.err(&[K("qp"), I(i), K("mtu")], format!("MTU {m} is not an IB MTU"), Some("256, 512, 1024, 2048 or 4096".into()));
                }
            }
            if q.min_rnr_timer.is_some_and(|t| t > 31) {
                self.err(&[K("qp"), I(i), K("min_rnr_timer")], "the RNR timer is a 5-bit code", Some("0–31; 12 is 0.64 ms, 0 is 655 ms".into()));
            }
            for (what, v) in [("retry_cnt", q.retry_cnt), ("rnr_retry", q.rnr_retry)] {
                if v.is_some_and(|v| v > 7) {
                    self.err(&[K("qp"), I(i), K(what)], format!("{what} is a 3-bit count"), Some("0–7 (rnr_retry 7 means retry forever)".into()));
                }
            }
            if q.timeout.is_some_and(|t| t > 31) {
                self.err(&[K("qp"), I(i), K("timeout")], "the ACK timeout is a 5-bit exponent", Some("0–31: 4.096 µs × 2^timeout; 14 ≈ 67 ms".into()));
            }
            if let Some(acc) = &q.access {
                let lists: Vec<Vec<String>> = match acc {
                    super::model::PerEndpoint::Same(l) => vec![l.clone()],
                    super::model::PerEndpoint::Each(m) => m.values().cloned().collect(),
                };
                for f in lists.iter().flatten() {
                    self.access_ok(&[K("qp"), I(i), K("access")], f);
                }
            }
            if q.qp_type != QpType::Ud && q.qkey.is_some() {
                self.err(&[K("qp"), I(i), K("qkey")], "a Q_Key is for UD QPs", None);
            }
        }
        // MRs.
        let mut seen = std::collections::BTreeSet::new();
        for (i, m) in sc.mrs.iter().enumerate() {
            if !seen.insert((m.on.as_str(), m.name.as_str())) {
                self.err(&[K("mr"), I(i), K("name")], format!("a second MR named `{}` on `{}`", m.name, m.on), None);
            }
            ep_ok(self, &[K("mr"), I(i), K("on")], &m.on);
            if m.size == 0 || m.size > 64 << 20 {
                self.err(&[K("mr"), I(i), K("size")], format!("MR size {} out of range", m.size), Some("1 byte to 64 MiB".into()));
            }
            for f in m.access.iter().flatten() {
                self.access_ok(&[K("mr"), I(i), K("access")], f);
            }
            if let Some(c) = &m.init {
                match content_bytes(c, m.size as usize) {
                    Ok(b) if b.len() as u64 > m.size => {
                        self.err(&[K("mr"), I(i), K("init")], format!("initial content of {} bytes in an MR of {}", b.len(), m.size), None)
                    }
                    Ok(_) => {}
                    Err(e) => self.err(&[K("mr"), I(i), K("init")], e, Some("bytes = \"de ad be ef\", pattern = \"ab\", text = \"…\" or u64 = 5".into())),
                }
            }
        }
        let mr = |on: &str, name: &str| sc.mrs.iter().find(|m| m.on == on && m.name == name);
        let qp = |name: &str| sc.qps.iter().find(|q| q.name == name);
        // Steps.
        for (i, s) in sc.steps.iter().enumerate() {
            let at = |k: &'static str| [K("step"), I(i), K(k)];
            match s.op {
                Op::Sync => continue,
                Op::Sleep => {
                    if s.ms.is_none() {
                        self.err(&at("op"), "`sleep` needs `ms`", None);
                    }
                    continue;
                }
                _ => {}
            }
            let Some(on) = s.on.as_deref() else {
                self.err(&at("op"), format!("step {} ({:?}) needs `on`, the endpoint that posts it", i + 1, s.op), None);
                continue;
            };
            if !ep_ok(self, &at("on"), on) {
                continue;
            }
            if s.op == Op::WaitCompletions {
                if s.count.is_none() {
                    self.err(&at("op"), "`wait_completions` needs `count`", None);
                }
                continue;
            }
            let Some(qname) = s.qp.as_deref() else {
                self.err(&at("op"), format!("step {} ({:?}) needs `qp`", i + 1, s.op), None);
                continue;
            };
            let Some(q) = qp(qname) else {
                self.err(&at("qp"), format!("no QP `{qname}`"), Self::name_hint(qname, sc.qps.iter().map(|q| q.name.as_str())));
                continue;
            };
            if !q.between.iter().any(|e| e == on) {
                self.err(&at("on"), format!("QP `{qname}` is between {} and {}, not on `{on}`", q.between[0], q.between[1]), None);
                continue;
            }
            let peer = if q.between[0] == on { &q.between[1] } else { &q.between[0] };
            if s.op == Op::Probe {
                self.check_probe(sc, i, s, q, peer);
                continue;
            }
            if s.probe.is_some() {
                self.err(&at("probe"), format!("`probe` goes with `op = \"probe\"`, not {:?}", s.op), None);
            }
            let rdma = matches!(s.op, Op::Write | Op::WriteImm | Op::Read | Op::CmpSwap | Op::FetchAdd);
            let atomic = matches!(s.op, Op::CmpSwap | Op::FetchAdd);
            if q.qp_type == QpType::Ud && rdma {
                self.err(&at("op"), format!("{:?} on UD QP `{qname}`: UD carries SENDs only", s.op), None);
            }
            if q.qp_type == QpType::Uc && (s.op == Op::Read || atomic) {
                self.err(&at("op"), format!("{:?} on UC QP `{qname}`: UC has no READ or atomics", s.op), Some("use an RC QP".into()));
            }
            for (j, g) in s.sge.iter().enumerate() {
                match mr(on, &g.mr) {
                    None => self.err(
                        &[K("step"), I(i), K("sge")],
                        format!("SGE {}: no MR `{}` on `{on}`", j + 1, g.mr),
                        Self::name_hint(&g.mr, sc.mrs.iter().filter(|m| m.on == on).map(|m| m.name.as_str())),
                    ),
                    Some(m) => {
                        let len = g.len.map(u64::from).unwrap_or(m.size.saturating_sub(g.offset));
                        if g.offset + len > m.size {
                            self.err(&[K("step"), I(i), K("sge")], format!("SGE {}: {}+{len} runs past the end of MR `{}` ({} bytes)", j + 1, g.offset, m.name, m.size), None);
                        }
                        if atomic && len != 8 {
                            self.err(&[K("step"), I(i), K("sge")], "an atomic's local buffer is 8 bytes (the old value lands there)", Some("len = 8".into()));
                        }
                    }
                }
            }
            match (&s.remote, rdma) {
                (None, true) => self.err(&at("op"), format!("{:?} needs `remote = {{ mr = … }}`, an MR on `{peer}`", s.op), None),
                (Some(_), false) => self.err(&at("remote"), format!("{:?} has no remote address", s.op), None),
                (Some(r), true) => {
                    match mr(peer, &r.mr) {
                        None => self.err(&at("remote"), format!("no MR `{}` on `{peer}`, the other end of `{qname}`", r.mr), Self::name_hint(&r.mr, sc.mrs.iter().filter(|m| &m.on == peer).map(|m| m.name.as_str()))),
                        Some(m) => {
                            if r.offset >= m.size && r.rkey.is_none() {
                                self.err(&at("remote"), format!("offset {} is past the end of MR `{}` ({} bytes)", r.offset, m.name, m.size), Some("to provoke a NAK on purpose, set `rkey` too".into()));
                            }
                        }
                    }
                    if atomic && r.offset % 8 != 0 {
                        self.err(&at("remote"), "atomics need an 8-byte aligned remote address", None);
                    }
                }
                (None, false) => {}
            }
            if s.op == Op::CmpSwap && (s.compare.is_none() || s.swap.is_none()) {
                self.err(&at("op"), "`cmp_swap` needs `compare` and `swap`", None);
            }
            if s.op == Op::FetchAdd && s.add.is_none() {
                self.err(&at("op"), "`fetch_add` needs `add`", None);
            }
            if matches!(s.op, Op::SendImm | Op::WriteImm) && s.imm_data.is_none() {
                self.err(&at("op"), format!("{:?} needs `imm_data`", s.op), None);
            }
            for f in &s.flags {
                if !WR_FLAGS.contains(&f.to_ascii_lowercase().as_str()) {
                    self.err(&at("flags"), format!("unknown flag `{f}`"), Self::name_hint(f, WR_FLAGS.iter().copied()));
                }
            }
        }
        // Faults.
        for (i, f) in sc.faults.iter().enumerate() {
            let at = |k: &'static str| [K("fault"), I(i), K(k)];
            if let Some(e) = &f.from {
                ep_ok(self, &at("from"), e);
            }
            let q = f.qp.as_deref().and_then(|n| {
                let found = qp(n);
                if found.is_none() {
                    self.err(&at("qp"), format!("no QP `{n}`"), Self::name_hint(n, sc.qps.iter().map(|q| q.name.as_str())));
                }
                found
            });
            if let (Some(q), Some(from)) = (q, &f.from) {
                if !q.between.contains(from) {
                    self.err(&at("from"), format!("QP `{}` is between {} and {}, not on `{from}`", q.name, q.between[0], q.between[1]), None);
                }
            }
            match lab::fault::parse_rule(&f.rule) {
                Err(e) => {
                    let tok = e.input.get(e.span.clone()).unwrap_or("");
                    self.err(&at("rule"), format!("fault rule: {} (at `{tok}`)", e.message), e.hint.clone())
                }
                Ok(r) => {
                    if r.dir.is_some() {
                        self.err(&at("rule"), "`dir=` in a scenario's fault rule", Some("say `from = \"a\"`: the endpoint whose frames it touches".into()));
                    }
                    if r.qp.is_some() {
                        self.err(&at("rule"), "`qp=` in a scenario's fault rule", Some("say `qp = \"q\"`: its QPN is learned at setup".into()));
                    }
                    if let (Some(_), Some(q)) = (&r.psn, q) {
                        if q.connect == super::model::ConnectMethod::RdmaCm {
                            self.err(&at("rule"), format!("`psn=` on QP `{}`, whose starting PSNs rdma_cm chooses", q.name), Some("match by `op=` and `nth=`, or connect it with `tcp`".into()));
                        } else if q.psn.is_none() {
                            self.err(&at("rule"), format!("`psn=` on QP `{}`, whose starting PSNs are random", q.name), Some("set them: `psn = { a = 100, b = 500 }` on the QP".into()));
                        }
                    }
                }
            }
        }
        // Expectations.
        for (i, e) in sc.expect.completion.iter().enumerate() {
            let at = |k: &'static str| [K("expect"), K("completion"), I(i), K(k)];
            ep_ok(self, &at("on"), &e.on);
            if e.wr_id.is_none() && e.index.is_none() && e.count.is_none() {
                self.err(&at("on"), "say which completion: `wr_id`, `index`, or a `count`", None);
            }
            if let Some(st) = &e.status {
                let n = wc_name(st);
                if !crate::verbs::names::WC_STATUS.contains(&n.as_str()) {
                    self.err(&at("status"), format!("unknown status `{st}`"), Self::name_hint(&n, crate::verbs::names::WC_STATUS.iter().copied()));
                }
            }
            if let Some(op) = &e.opcode {
                let n = wc_name(op);
                if !crate::verbs::names::WC_OPCODES.iter().any(|(_, o)| *o == n) {
                    self.err(&at("opcode"), format!("unknown completion opcode `{op}`"), Self::name_hint(&n, crate::verbs::names::WC_OPCODES.iter().map(|(_, o)| *o)));
                }
            }
        }
        for (i, w) in sc.expect.wire.iter().enumerate() {
            let at = |k: &'static str| [K("expect"), K("wire"), I(i), K(k)];
            match qp(&w.qp) {
                None => self.err(&at("qp"), format!("no QP `{}`", w.qp), Self::name_hint(&w.qp, sc.qps.iter().map(|q| q.name.as_str()))),
                Some(q) if !q.between.contains(&w.from) => {
                    self.err(&at("from"), format!("`{}` is not an end of QP `{}` ({} and {})", w.from, w.qp, q.between[0], q.between[1]), None)
                }
                _ => {}
            }
            for (key, list) in [("sequence", &w.sequence), ("responses", &w.responses)] {
                for (j, name) in list.iter().flatten().enumerate() {
                    if !wire_name_ok(name) {
                        let at = [K("expect"), K("wire"), I(i), K(key), I(j)];
                        let base = name.trim_end_matches(['*', '+']);
                        let names: Vec<&str> = dissector::wire::Opcode::all().map(|i| i.name).chain(["ACK", "RNR NAK"]).collect();
                        self.err(&at, format!("unknown opcode `{name}`"), Self::name_hint(base, names.iter().copied()));
                    }
                }
            }
            for n in w.naks.iter().flatten() {
                if !NAK_NAMES.contains(&n.as_str()) {
                    self.err(&at("naks"), format!("unknown NAK `{n}`"), Self::name_hint(n, NAK_NAMES.iter().copied()));
                }
            }
        }
        for (i, e) in sc.expect.probe.iter().enumerate() {
            let at = |k: &'static str| [K("expect"), K("probe"), I(i), K(k)];
            let ids: Vec<&str> = sc.steps.iter().filter_map(|s| s.probe.as_ref()).map(|p| p.id.as_str()).collect();
            if !ids.contains(&e.probe.as_str()) {
                self.err(&at("probe"), format!("no probe `{}`", e.probe), Self::name_hint(&e.probe, ids.iter().copied()));
            }
            for (j, name) in e.responses.iter().flatten().enumerate() {
                if !wire_name_ok(name) {
                    let names: Vec<&str> = dissector::wire::Opcode::all().map(|i| i.name).chain(["ACK", "RNR NAK"]).collect();
                    self.err(&[K("expect"), K("probe"), I(i), K("responses"), I(j)], format!("unknown response `{name}`"), Self::name_hint(name.trim_end_matches(['*', '+']), names.iter().copied()));
                }
            }
            if let Some(Err(m)) = e.psn.as_ref().map(|x| x.offset()) {
                self.err(&at("psn"), m, None);
            }
            if e.responses.is_none() && e.psn.is_none() && e.within_ms.is_none() {
                self.err(&at("probe"), "say what the answer must be: `responses`, `psn` or `within_ms`", None);
            }
        }
        for (i, m) in sc.expect.memory.iter().enumerate() {
            let at = |k: &'static str| [K("expect"), K("memory"), I(i), K(k)];
            if !ep_ok(self, &at("on"), &m.on) {
                continue;
            }
            match mr(&m.on, &m.mr) {
                None => self.err(&at("mr"), format!("no MR `{}` on `{}`", m.mr, m.on), Self::name_hint(&m.mr, sc.mrs.iter().filter(|x| x.on == m.on).map(|x| x.name.as_str()))),
                Some(r) => {
                    if let Some(c) = &m.equals {
                        match content_bytes(c, r.size.saturating_sub(m.offset) as usize) {
                            Ok(b) if m.offset + b.len() as u64 > r.size => {
                                self.err(&at("equals"), format!("{} bytes at offset {} run past the end of MR `{}` ({} bytes)", b.len(), m.offset, r.name, r.size), None)
                            }
                            Ok(_) => {}
                            Err(e) => self.err(&at("equals"), e, None),
                        }
                    }
                }
            }
            if m.equals.is_some() == m.unchanged.unwrap_or(false) {
                self.err(&at("mr"), "say what the memory holds: `equals = …` or `unchanged = true` (one of them)", None);
            }
        }
    }

    /// A probe step: the packet must be one we can build, aimed at what exists.
    fn check_probe(&mut self, sc: &Scenario, i: usize, s: &Step, q: &QpSpec, peer: &str) {
        use Seg::{Index as I, Key as K};
        let at = |k: &'static str| [K("step"), I(i), K("probe"), K(k)];
        let Some(p) = &s.probe else {
            self.err(&[K("step"), I(i), K("op")], "a probe step needs `probe = { id = …, opcode = … }`", Some("e.g. probe = { id = \"ahead\", opcode = \"RDMA WRITE Only\", psn = \"next+3\", remote = { mr = \"target\" }, len = 8 }".into()));
            return;
        };
        for (k, used) in [("sge", !s.sge.is_empty()), ("remote", s.remote.is_some()), ("imm_data", s.imm_data.is_some())] {
            if used {
                self.err(&[K("step"), I(i), K(k)], format!("`{k}` of a probe goes inside `probe = {{ … }}`"), None);
            }
        }
        if sc.steps.iter().take(i).filter_map(|x| x.probe.as_ref()).any(|x| x.id == p.id) {
            self.err(&at("id"), format!("a second probe named `{}`", p.id), None);
        }
        let transport = q.qp_type.transport();
        let op = match crate::probe::opcode(&p.opcode, transport) {
            Ok(op) => op,
            Err(e) => {
                self.err(&at("opcode"), e, Some("a name as `roce decode` prints it (\"RDMA WRITE Only\", \"UD SEND Only\") or a number".into()));
                return;
            }
        };
        if let Some(Err(e)) = p.psn.as_ref().map(|x| x.offset()) {
            self.err(&at("psn"), e, None);
        }
        let headers = op.info().map_or(dissector::wire::Headers::PAYLOAD, |i| i.headers);
        let addressed = headers.contains(dissector::wire::Headers::RETH) || headers.contains(dissector::wire::Headers::ATOMICETH);
        match &p.remote {
            None if addressed => self.err(&at("opcode"), format!("{op} carries a remote address: give `remote = {{ mr = … }}`, an MR on `{peer}`"), Some("set `rkey` in it to send a wrong one".into())),
            Some(_) if !addressed => self.err(&at("remote"), format!("{op} has no RETH or AtomicETH to put a remote address in"), None),
            Some(r) if !sc.mrs.iter().any(|m| m.on == peer && m.name == r.mr) => self.err(
                &at("remote"),
                format!("no MR `{}` on `{peer}`, the target of the probe", r.mr),
                Self::name_hint(&r.mr, sc.mrs.iter().filter(|m| m.on == peer).map(|m| m.name.as_str())),
            ),
            _ => {}
        }
        match crate::probe::payload(p) {
            Err(e) => self.err(&at("payload"), e, None),
            Ok(b) if !b.is_empty() && !headers.contains(dissector::wire::Headers::PAYLOAD) => self.err(&at("len"), format!("{op} carries no payload"), None),
            Ok(b) if b.len() > 4096 => self.err(&at("len"), format!("a payload of {} bytes: more than the largest MTU", b.len()), Some("one packet carries at most the path MTU (4096)".into())),
            Ok(_) => {}
        }
        if p.copies.is_some_and(|c| c == 0 || c > 64) {
            self.err(&at("copies"), "1 to 64 copies", None);
        }
        self.check_settle(sc, i, p);
    }

    /// A probe's wait must be sane on its own, and the probes' waits together must
    /// leave the scenario time to finish (reported at the probe that overruns).
    fn check_settle(&mut self, sc: &Scenario, i: usize, p: &ProbeSpec) {
        use super::model::{DEFAULT_SETTLE_MS, DEFAULT_TIMEOUT_MS, MAX_SETTLE_MS};
        use Seg::{Index as I, Key as K};
        let at = [K("step"), I(i), K("probe"), K("settle_ms")];
        let ms = p.settle_ms.unwrap_or(DEFAULT_SETTLE_MS);
        if ms > MAX_SETTLE_MS {
            let hint = "it is how long the step waits after sending for the target's answer to reach the wire";
            self.err(&at, format!("a probe waits at most {MAX_SETTLE_MS} ms, not {ms}"), Some(hint.into()));
            return;
        }
        let timeout = sc.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
        let settle = |x: &Step| x.probe.as_ref().map_or(0, |p| p.settle_ms.unwrap_or(DEFAULT_SETTLE_MS).min(MAX_SETTLE_MS));
        let before: u64 = sc.steps.iter().take(i).map(settle).sum();
        if before < timeout && before + ms >= timeout {
            self.err(
                &at,
                format!("the probes up to this one wait {} ms in all, not less than the scenario's {timeout} ms timeout", before + ms),
                Some("wait less, or raise `timeout_ms` at the top of the file".into()),
            );
        }
    }

    fn access_ok(&mut self, path: &[Seg<'_>], flag: &str) {
        let n = access_name(flag);
        if !ACCESS_FLAGS.contains(&n.as_str()) {
            self.err(path, format!("unknown access flag `{flag}`"), Self::name_hint(&n, ACCESS_FLAGS.iter().copied()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "RC SEND"
[endpoints.a]
[endpoints.b]

[[qp]]
name = "q"
type = "rc"
between = ["a", "b"]

[[mr]]
name = "rbuf"
on = "b"
size = 64
access = ["local_write"]

[[mr]]
name = "msg"
on = "a"
size = 64
init = { text = "hello" }

[[step]]
on = "b"
op = "post_recv"
qp = "q"
wr_id = 1
sge = [{ mr = "rbuf" }]

[[step]]
on = "a"
op = "send"
qp = "q"
wr_id = 2
sge = [{ mr = "msg", len = 5 }]

[[expect.completion]]
on = "b"
wr_id = 1
status = "IBV_WC_SUCCESS"
opcode = "recv"

[[expect.wire]]
qp = "q"
from = "a"
sequence = ["SEND Only"]
responses = ["Acknowledge+"]

[[expect.memory]]
on = "b"
mr = "rbuf"
equals = { text = "hello" }
"#;

    const PROBE: &str = r#"
name = "probe"
[endpoints.a]
[endpoints.b]

[[qp]]
name = "q"
type = "rc"
between = ["b", "a"]

[[mr]]
name = "target"
on = "b"
size = 16
access = ["local_write", "remote_write"]

[[step]]
on = "a"
op = "probe"
qp = "q"
probe = { id = "one", opcode = "RDMA WRITE Only", remote = { mr = "target" }, len = 8, settle_ms = 600 }

[[step]]
on = "a"
op = "probe"
qp = "q"
probe = { id = "two", opcode = "RDMA WRITE Only", remote = { mr = "target" }, len = 8, settle_ms = 600 }
"#;

    #[test]
    fn probe_waits_are_bounded_and_fit_the_timeout() {
        parse_str(Path::new("t.toml"), PROBE).unwrap_or_else(|e| panic!("{}", e[0]));
        // One wait far too long: located at its `settle_ms`.
        let e = errors(&PROBE.replacen("settle_ms = 600", "settle_ms = 600000", 1));
        assert_eq!(e.len(), 1, "{e:#?}");
        let m = e[0].to_string();
        assert!(m.contains("t.toml:21:") && m.contains("at most 10000 ms, not 600000"), "{m}");
        // Each wait sane, together longer than the scenario: reported at the second.
        let e = errors(&format!("timeout_ms = 1100\n{PROBE}"));
        assert_eq!(e.len(), 1, "{e:#?}");
        let m = e[0].to_string();
        assert!(m.contains("t.toml:28:") && m.contains("wait 1200 ms in all") && m.contains("1100 ms timeout"), "{m}");
        parse_str(Path::new("t.toml"), &format!("timeout_ms = 1201\n{PROBE}")).unwrap_or_else(|e| panic!("{}", e[0]));
    }

    #[test]
    fn scenario_timeout_is_bounded() {
        for bad in ["0", "999", "3600001", "9223372036854775807"] {
            let e = errors(&format!("timeout_ms = {bad}\n{GOOD}"));
            assert_eq!(e.len(), 1, "{e:#?}");
            let m = e[0].to_string();
            assert!(m.starts_with("t.toml:1:14: ") && m.contains(&format!("a timeout of {bad} ms")), "{m}");
        }
        parse_str(Path::new("t.toml"), &format!("timeout_ms = 3600000\n{GOOD}")).unwrap_or_else(|e| panic!("{}", e[0]));
    }

    fn errors(text: &str) -> Vec<Diagnostic> {
        parse_str(Path::new("t.toml"), text).expect_err("should not parse")
    }

    #[test]
    fn a_good_scenario_loads() {
        let sc = parse_str(Path::new("t.toml"), GOOD).unwrap_or_else(|e| panic!("{}", e[0]));
        assert_eq!(sc.steps.len(), 2);
        assert_eq!(sc.expect.wire[0].sequence.as_deref(), Some(&["SEND Only".to_string()][..]));
    }

    #[test]
    fn unknown_key_is_located_with_a_suggestion() {
        let text = GOOD.replace("access = [\"local_write\"]", "acess = [\"local_write\"]");
        let e = errors(&text);
        assert_eq!(e.len(), 1);
        let line = text.lines().position(|l| l.starts_with("acess")).unwrap() + 1;
        assert_eq!((e[0].line, e[0].col), (line, 1), "{}", e[0]);
        assert!(e[0].message.contains("acess"), "{}", e[0]);
        assert_eq!(e[0].hint.as_deref(), Some("did you mean `access`?"));
        assert!(e[0].to_string().starts_with(&format!("t.toml:{line}:1: error:")), "{}", e[0]);
        assert!(e[0].excerpt.as_deref().is_some_and(|x| x.contains("^^^^^")), "{}", e[0]);
    }

    #[test]
    fn syntax_errors_say_where() {
        let e = errors("name = \"x\"\n[endpoints.a\n");
        assert_eq!(e[0].line, 2, "{}", e[0]);
        assert!(e[0].message.starts_with("TOML syntax"), "{}", e[0]);
    }

    #[test]
    fn every_semantic_problem_is_reported_where_it_is() {
        let text = GOOD
            .replace("between = [\"a\", \"b\"]", "between = [\"a\", \"c\"]")
            .replace("sge = [{ mr = \"msg\", len = 5 }]", "sge = [{ mr = \"msgg\", len = 5 }]")
            .replace("status = \"IBV_WC_SUCCESS\"", "status = \"IBV_WC_SUCESS\"")
            .replace("sequence = [\"SEND Only\"]", "sequence = [\"SEND Onyl\"]");
        let e = errors(&text);
        let msgs: Vec<String> = e.iter().map(|d| d.to_string()).collect();
        let find = |needle: &str| msgs.iter().find(|m| m.contains(needle)).unwrap_or_else(|| panic!("no `{needle}` in {msgs:#?}"));
        assert!(find("no endpoint `c`").contains("t.toml:9:"), "{msgs:#?}");
        assert!(find("no MR `msgg` on `a`").contains("did you mean `msg`?"));
        assert!(find("unknown status `IBV_WC_SUCESS`").contains("did you mean `IBV_WC_SUCCESS`?"));
        assert!(find("unknown opcode `SEND Onyl`").contains("did you mean `SEND Only`?"));
    }

    #[test]
    fn verbs_that_the_qp_type_cannot_carry_are_refused() {
        let text = GOOD.replace("type = \"rc\"", "type = \"uc\"").replace(
            "[[expect.completion]]",
            "[[step]]\non = \"a\"\nop = \"read\"\nqp = \"q\"\nsge = [{ mr = \"msg\" }]\nremote = { mr = \"rbuf\", offset = 3 }\n\n[[expect.completion]]",
        );
        let e = errors(&text);
        assert!(e.iter().any(|d| d.message.contains("UC has no READ")), "{e:#?}");
        let text = GOOD.replace("op = \"send\"", "op = \"fetch_add\"");
        let e = errors(&text);
        let all: String = e.iter().map(|d| d.to_string() + "\n").collect();
        assert!(all.contains("needs `remote"), "{all}");
        assert!(all.contains("needs `add`"), "{all}");
        assert!(all.contains("8 bytes"), "{all}");
    }

    #[test]
    fn content_and_names() {
        assert_eq!(content_bytes(&Content::Bytes("de ad".into()), 0).unwrap(), [0xde, 0xad]);
        assert_eq!(content_bytes(&Content::Pattern("ab 01".into()), 5).unwrap(), [0xab, 1, 0xab, 1, 0xab]);
        assert_eq!(content_bytes(&Content::U64(1), 0).unwrap(), [1, 0, 0, 0, 0, 0, 0, 0]);
        assert!(content_bytes(&Content::Bytes("abc".into()), 0).unwrap_err().contains("odd"));
        assert!(content_bytes(&Content::Bytes("zz".into()), 0).unwrap_err().contains("not a hex byte"));
        assert_eq!(wc_name("rem_access_err"), "IBV_WC_REM_ACCESS_ERR");
        assert_eq!(access_name("IBV_ACCESS_REMOTE_WRITE"), "remote_write");
        assert!(wire_name_ok("RDMA WRITE Middle*") && wire_name_ok("NAK Remote Access Error") && !wire_name_ok("WRITE"));
        assert_eq!(did_you_mean("acess", ["access", "name"]), Some("access"));
        assert_eq!(did_you_mean("zzzzzz", ["access", "name"]), None);
    }
}
