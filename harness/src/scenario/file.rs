//! A scenario file as written: the TOML's shape, with the place of every value a
//! check may need to point at ([`Spanned`], read through toml's `Spanned`). Names are still
//! strings here; [`super::check`] reads them into the typed [`super::model`],
//! reporting every problem at once.
//!
//! A step's keys depend on its `op`: [`StepOp`] is a `#[serde(tag = "op")]` enum,
//! so a key that does not belong to the op is refused by serde itself. Its
//! variants are read from the step's table after the table's spans were taken,
//! so a problem inside a step points at its key.
//!
//! Owns: [`ScenarioFile`] and every table in it, [`Spanned`]. Imports: dissector's hex text
//! (for contents); `serde`, `toml`'s `Spanned`, `schemars` for `roce schema`.
use std::collections::BTreeMap;
use std::ops::Range;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};

/// A byte range in the scenario file.
pub(crate) type Span = Range<usize>;

/// A value and where it is in the file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Spanned<T> {
    pub(crate) value: T,
    pub(crate) span: Span,
}

impl<T> std::ops::Deref for Spanned<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Spanned<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Spanned<T>, D::Error> {
        let s = toml::Spanned::<T>::deserialize(d)?;
        let span = s.span();
        Ok(Spanned { value: s.into_inner(), span })
    }
}

/// The schema of the value: the place is not part of the format.
impl<T: JsonSchema> JsonSchema for Spanned<T> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(g)
    }
}

/// A whole scenario file.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(rename = "Scenario")]
#[serde(deny_unknown_fields)]
pub(crate) struct ScenarioFile {
    /// The version of the scenario format the file is written in (default 1, the
    /// first; the current one is 3): a new file says `format = 3` at its top. A
    /// file without `format` is format 1 and is read as format 1 meant it;
    /// `roce check` says so only where that differs from the current format: a
    /// key of another op on a step is left out with a warning (refused since
    /// format 2), and `${` in a string is plain text, with a warning (a
    /// placeholder since format 3). `roce check --fix` writes a file of an older
    /// format in the current one (docs/format-changes.md lists the formats).
    #[serde(default)]
    #[allow(dead_code)] // read by `super::legacy`, before this model
    #[schemars(range(min = 1, max = super::legacy::CURRENT))]
    pub(crate) format: Option<u32>,
    pub(crate) name: Spanned<String>,
    /// Fixtures: files of setup several scenarios share, each path relative to
    /// this file (`use = ["fixtures/rc_pair.toml"]`). What a fixture says is read
    /// as if written here: arrays of tables (`[[qp]]`, `[[mr]]`, `[[step]]`, …)
    /// add up, the fixtures' first (their steps run before this file's), as do
    /// `requires` and `spec`; any other key said both in a fixture and here is
    /// refused. A fixture holds no `name` and no cases, may `use` others, and is
    /// left out of directory discovery when it sits in a directory named
    /// `fixtures`.
    #[serde(default, rename = "use")]
    #[allow(dead_code)] // read by `super::fixtures`, before this model
    pub(crate) uses: Vec<String>,
    /// The rules of the conformance catalogue (`conformance/catalogue.toml`) the
    /// scenario checks, by id: `spec = ["resp.dup.atomic-replays-saved-result"]`.
    /// `roce coverage` counts them; `roce check` warns about a scenario naming none.
    #[serde(default)]
    pub(crate) spec: Vec<Spanned<String>>,
    /// What the scenario shows, for people reading the file.
    #[serde(default)]
    #[allow(dead_code)] // the format admits it; nothing reads it but people
    pub(crate) description: Option<String>,
    /// By name (`a`, `b`, or any name with `vm` set); in the scenario or in a
    /// fixture it uses.
    #[serde(default)]
    pub(crate) endpoints: BTreeMap<String, EndpointFile>,
    #[serde(default, rename = "qp")]
    pub(crate) qps: Vec<QpFile>,
    #[serde(default, rename = "mr")]
    pub(crate) mrs: Vec<MrFile>,
    #[serde(default, rename = "step")]
    pub(crate) steps: Vec<StepFile>,
    #[serde(default)]
    pub(crate) expect: ExpectFile,
    /// Faults the lab switch applies to this scenario's wire (lab only).
    #[serde(default, rename = "fault")]
    pub(crate) faults: Vec<FaultFile>,
    /// Whole-scenario deadline in milliseconds, setup included (default 30 000).
    #[serde(default)]
    pub(crate) timeout_ms: Option<Spanned<u64>>,
    /// How long each endpoint goes on polling once the completions the
    /// expectations wait for have come, for anything after them (an error behind
    /// the expected ones), in milliseconds: 0 to 1 000 (default 50).
    #[serde(default)]
    pub(crate) completion_grace_ms: Option<Spanned<u64>>,
    /// What every endpoint's device must have (`atomic_write`, `flush`,
    /// `flush_persistent`, `mw_type1`, `mw_type2`, `srq`); on a device without
    /// it the scenario is skipped, with the reason, before anything is set up.
    #[serde(default)]
    pub(crate) requires: Vec<Spanned<String>>,
    /// Memory windows, allocated unbound; `bind_mw` steps bind them.
    #[serde(default, rename = "mw")]
    pub(crate) mws: Vec<MwFile>,
    /// Shared receive queues; a QP names one with `srq`.
    #[serde(default, rename = "srq")]
    pub(crate) srqs: Vec<SrqFile>,
    /// Parameters whose every combination is a case of its own:
    /// `op = ["write", "read"]`. A string elsewhere that is exactly `"${op}"`
    /// becomes the value (any TOML value); `${op}` in a longer string, its text.
    #[serde(default)]
    #[allow(dead_code)] // read by `super::cases`, before this model
    pub(crate) cases: Option<BTreeMap<String, Vec<serde_json::Value>>>,
    /// Cases listed one by one: a value for each parameter, an optional `name`
    /// (the case's name instead of its values) and `spec` ids of its own.
    #[serde(default)]
    #[allow(dead_code)] // read by `super::cases`, before this model
    pub(crate) case: Vec<BTreeMap<String, serde_json::Value>>,
}

/// A memory window on one endpoint.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(rename = "MwSpec")]
#[serde(deny_unknown_fields)]
pub(crate) struct MwFile {
    pub(crate) name: Spanned<String>,
    pub(crate) on: Spanned<String>,
    /// 1 (bound with `ibv_bind_mw`) or 2 (bound by a WR on a QP; invalidated by a
    /// SEND with Invalidate or a local invalidate).
    #[serde(rename = "type")]
    pub(crate) kind: Spanned<u8>,
}

/// A shared receive queue on one endpoint.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(rename = "SrqSpec")]
#[serde(deny_unknown_fields)]
pub(crate) struct SrqFile {
    pub(crate) name: Spanned<String>,
    pub(crate) on: Spanned<String>,
    /// Queue depth (default 16) and SGEs per receive (default 4).
    #[serde(default)]
    pub(crate) max_wr: Option<u32>,
    #[serde(default)]
    pub(crate) max_sge: Option<u32>,
}

/// Where an endpoint runs.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Endpoint")]
#[serde(deny_unknown_fields)]
pub(crate) struct EndpointFile {
    /// Lab VM (`a` or `b`); defaults to the endpoint's name. Two endpoints on the
    /// same VM share its rxe device: their traffic never reaches the wire.
    #[serde(default)]
    pub(crate) vm: Option<String>,
    /// RDMA device (default: the first one, `rxe0` in the lab).
    #[serde(default)]
    pub(crate) device: Option<String>,
    #[serde(default)]
    pub(crate) port: Option<u8>,
    /// GID index (default: the port's IPv4-mapped RoCEv2 GID).
    #[serde(default)]
    pub(crate) gid_index: Option<u8>,
    /// How many completions the endpoint's one CQ holds (default 256; the device
    /// may give more): a small one overflows when completions come faster than
    /// the endpoint polls, which it does only while it carries out a step.
    #[serde(default)]
    pub(crate) cq_depth: Option<Spanned<u32>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum QpType {
    Rc,
    Uc,
    Ud,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ConnectMethod {
    /// QPN, PSN, GID (and the MRs' addresses and rkeys) exchanged over a TCP socket
    /// between the endpoints, as perftest and the pingpong examples do.
    #[default]
    Tcp,
    /// librdmacm: listen / resolve / connect / accept; the MR table rides in the
    /// private data.
    RdmaCm,
    /// The controller tells each endpoint the other's QPN, PSN and GID (and MRs)
    /// from what their setups reported: no connection between the endpoints, so
    /// the wire holds nothing before the scenario's own traffic, and the QPs are
    /// up sooner (what `roce fuzz` uses). An application cannot connect this way.
    Controller,
}

/// A value that may differ per endpoint: `x` or `{ a = x, b = y }`.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum PerEndpoint<T> {
    Same(T),
    Each(BTreeMap<String, T>),
}

/// A connected QP pair (RC/UC) or two UD QPs that know each other's address.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(rename = "QpSpec")]
#[serde(deny_unknown_fields)]
pub(crate) struct QpFile {
    pub(crate) name: Spanned<String>,
    /// That many QP pairs alike, named `name[0]`, `name[1]`, …: a stream on
    /// `name` goes round robin over them, and a wire expectation or fault naming
    /// `name` applies to each (1 to 256; default: one, named `name`).
    #[serde(default)]
    pub(crate) count: Option<Spanned<u32>>,
    #[serde(rename = "type")]
    pub(crate) qp_type: QpType,
    /// The two endpoints; the first is the passive side (listens).
    pub(crate) between: Spanned<[String; 2]>,
    #[serde(default)]
    pub(crate) connect: ConnectMethod,
    /// Path MTU in bytes: 256, 512, 1024, 2048, 4096 (default 1024).
    #[serde(default)]
    pub(crate) mtu: Option<Spanned<u32>>,
    /// Starting send PSN per endpoint (default random).
    #[serde(default)]
    pub(crate) psn: Option<Spanned<PerEndpoint<u32>>>,
    /// Local ACK timeout exponent (4.096 µs × 2^timeout; default 14).
    #[serde(default)]
    pub(crate) timeout: Option<Spanned<u8>>,
    /// Retries after the ACK timer fires (0–7, default 7).
    #[serde(default)]
    pub(crate) retry_cnt: Option<Spanned<u8>>,
    /// Retries after RNR NAKs (0–7, default 7 = forever).
    #[serde(default)]
    pub(crate) rnr_retry: Option<Spanned<u8>>,
    /// IBA RNR timer code 0–31 (default 12 = 0.64 ms).
    #[serde(default)]
    pub(crate) min_rnr_timer: Option<Spanned<u8>>,
    /// Outstanding READs/atomics this side may issue, and accept (default 1).
    #[serde(default)]
    pub(crate) max_rd_atomic: Option<u8>,
    #[serde(default)]
    pub(crate) max_dest_rd_atomic: Option<u8>,
    /// `qp_access_flags` (default: remote_write, remote_read, remote_atomic;
    /// given, it replaces the default), named as in an MR's `access`. FLUSH needs
    /// `flush_global` or `flush_persistent` here on the responder's end as well as
    /// on its MR.
    #[serde(default)]
    pub(crate) access: Option<Spanned<PerEndpoint<Vec<String>>>>,
    /// UD Q_Key (default 0x11111111).
    #[serde(default)]
    pub(crate) qkey: Option<Spanned<u32>>,
    /// Queue depths (default 16) and SGEs per WR (default 4).
    #[serde(default)]
    pub(crate) max_send_wr: Option<u32>,
    #[serde(default)]
    pub(crate) max_recv_wr: Option<u32>,
    #[serde(default)]
    pub(crate) max_sge: Option<u32>,
    #[serde(default)]
    pub(crate) max_inline: Option<u32>,
    /// The end that has an SRQ of this name takes its receives from it.
    #[serde(default)]
    pub(crate) srq: Option<Spanned<String>>,
}

/// A memory region on one endpoint.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(rename = "MrSpec")]
#[serde(deny_unknown_fields)]
pub(crate) struct MrFile {
    pub(crate) name: Spanned<String>,
    pub(crate) on: Spanned<String>,
    pub(crate) size: Spanned<u64>,
    /// `ibv_access_flags` (default: local_write only), from `local_write`,
    /// `remote_write`, `remote_read`, `remote_atomic`, `mw_bind`, `zero_based`,
    /// `on_demand`, `flush_global`, `flush_persistent`, `relaxed_ordering` (case
    /// ignored, `IBV_ACCESS_REMOTE_WRITE` reads too): the names every `access` of a
    /// scenario takes (a QP's, `bind_mw`'s, `rereg_mr`'s, `modify_qp`'s). A peer's
    /// WRITE and ATOMIC WRITE need remote_write, READ remote_read, CmpSwap and
    /// FetchAdd remote_atomic, FLUSH flush_global or flush_persistent; binding a
    /// memory window to the MR needs mw_bind.
    #[serde(default)]
    pub(crate) access: Option<Spanned<Vec<String>>>,
    /// Initial content (the rest is zero); default all zero.
    #[serde(default)]
    pub(crate) init: Option<Spanned<Content>>,
}

/// Bytes given as text, hex bytes, or a repeated pattern.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(crate) enum Content {
    /// UTF-8 text.
    Text(String),
    /// Hex bytes, whitespace allowed: "de ad be ef".
    Bytes(String),
    /// Hex bytes repeated, "ab" or "00 01 02 03": over the whole MR in an MR's
    /// `init`; in a memory `equals`, from its `offset` to the end of the MR (the
    /// MR's `size` minus `offset`); in a probe's `payload`, to its `len`; in an
    /// ATOMIC WRITE's `value`, to 8 bytes.
    Pattern(String),
    /// A little-endian u64 (atomics).
    U64(u64),
}

impl Content {
    /// The bytes, `Pattern` repeated to `len`; an error names what is not hex.
    pub(crate) fn try_bytes(&self, len: usize) -> Result<Vec<u8>, String> {
        let hex = |s: &str| dissector::text::hex_bytes(s).map_err(|e| e.to_string());
        Ok(match self {
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

    /// The bytes of content the check accepted (which never fails to read).
    pub(crate) fn bytes(&self, len: usize) -> Vec<u8> {
        self.try_bytes(len).unwrap_or_default()
    }
}

/// A scatter/gather element: a slice of an MR (default: from 0, the whole MR).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Sge {
    pub(crate) mr: String,
    #[serde(default)]
    pub(crate) offset: u64,
    #[serde(default)]
    pub(crate) len: Option<u32>,
    /// The SGE may reach past the end of its MR, by at most 4096 bytes (the
    /// guard region the agent keeps after every MR): to see the device refuse
    /// it (`mr.bounds.local-sge`: the work request completes with a local
    /// protection error and sends nothing). Without it, `roce check` refuses an
    /// SGE outside its MR.
    #[serde(default)]
    pub(crate) outside_mr: bool,
}

/// The remote end of an RDMA or atomic operation: an MR of the peer endpoint, by
/// name (its address and rkey were exchanged at connect time), or a memory
/// window of the peer (`mw`: its rkey as last bound, addresses of the MR it is
/// bound to, `offset` from the start of the window); optionally with a raw rkey
/// to provoke errors.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Remote {
    #[serde(default)]
    pub(crate) mr: Option<String>,
    #[serde(default)]
    pub(crate) mw: Option<String>,
    /// Bytes from the start of the MR (or window); negative: that many bytes
    /// before its first byte, which a responder must refuse
    /// (mr.bounds.before-start).
    #[serde(default)]
    pub(crate) offset: i64,
    /// Override the exchanged rkey (an unknown rkey → NAK Remote Access Error).
    #[serde(default)]
    pub(crate) rkey: Option<u32>,
}

/// How long a stream's messages are: always `n` bytes, or drawn from the
/// stream's seed in `min..=max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum StreamSize {
    Fixed(u32),
    Range { min: u32, max: u32 },
}

/// The peer's receives for a `send` stream: `depth` posted on each QP (default
/// 16), in slots of the longest message from `offset` of its MR `mr`, and
/// reposted once no more than `low_water` are left (default `depth - 1`: at once).
/// A low water mark well under the sender's window lets the receives run out: RNR
/// NAKs on purpose.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StreamReceive {
    /// Where SENDs land (a `write_imm` stream's receives hold no bytes: none).
    #[serde(default)]
    pub(crate) mr: Option<String>,
    #[serde(default)]
    pub(crate) offset: u64,
    #[serde(default)]
    pub(crate) depth: Option<u32>,
    #[serde(default)]
    pub(crate) low_water: Option<u32>,
}

/// Where a stream starts in the poster's own MR.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StreamLocal {
    pub(crate) mr: String,
    #[serde(default)]
    pub(crate) offset: u64,
}

/// `wr_id` when a step does not set one.
fn zero() -> u64 {
    0
}

/// One step, by its `op`. The controller runs them in order and waits for each to
/// be posted before the next, which is what orders the two endpoints. A
/// work-request step names who posts it (`on`), its QP, `wr_id`, scatter/gather
/// list and `flags` (`signaled` — the default —, `unsignaled`, `inline`,
/// `solicited`, `fence`).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum StepOp {
    /// A receive WR.
    PostRecv {
        on: String,
        qp: String,
        #[serde(default = "zero")]
        wr_id: u64,
        #[serde(default)]
        sge: Vec<Sge>,
    },
    Send {
        on: String,
        qp: String,
        #[serde(default = "zero")]
        wr_id: u64,
        #[serde(default)]
        sge: Vec<Sge>,
        #[serde(default)]
        flags: Vec<String>,
        /// UD: the peer endpoint whose QP receives (default: the other end of `qp`).
        #[serde(default)]
        to: Option<String>,
        /// UD: the WR's remote Q_Key (default: the receiving QP's). One with the
        /// high bit set makes the sender put its own QP's Q_Key in the DETH.
        #[serde(default)]
        qkey: Option<u32>,
    },
    SendImm {
        on: String,
        qp: String,
        #[serde(default = "zero")]
        wr_id: u64,
        #[serde(default)]
        sge: Vec<Sge>,
        #[serde(default)]
        flags: Vec<String>,
        /// The immediate data, a 32-bit number whose bytes go on the wire (the
        /// ImmDt) most significant first: `0x12345678` is `12 34 56 78`. The
        /// receiver's completion gives back the same number.
        imm_data: u32,
        #[serde(default)]
        to: Option<String>,
        #[serde(default)]
        qkey: Option<u32>,
    },
    /// A stream of `count` work requests of one `verb` (`write`, `read`,
    /// `fetch_add`, `atomics`, `send` with the peer's `receive`, `write_imm`),
    /// posted by `on` on `qp`, or round robin over `qps`. Message
    /// `i` lies at `local.offset` plus the lengths of the messages before it in a
    /// local MR, and at the same place from `remote` in the peer's; a `fetch_add`
    /// adds `add` (default 1) to the one word at `remote`, each old value landing
    /// in the next 8 bytes of `local`; `atomics` does the same, but every
    /// `cmp_swap_every`-th (default 2) is a CmpSwap from the value the word must
    /// hold by then to one `add` more (one QP only: that value is known only
    /// when the atomics run in order). `size` is fixed or `{ min = …, max = … }`, drawn from
    /// `seed` (default 1), as are the bytes of each message (a WRITE's local
    /// region is filled with them before the first post). At most `window`
    /// messages are outstanding (default 16), every `signal_every`-th on a QP is
    /// signalled (default 1; the last always), and all complete within
    /// `within_ms` (default 60 000; the scenario's `timeout_ms` comes first).
    Stream {
        id: String,
        on: String,
        #[serde(default)]
        qp: Option<String>,
        #[serde(default)]
        qps: Vec<String>,
        verb: String,
        count: u64,
        #[serde(default)]
        size: Option<StreamSize>,
        #[serde(default)]
        seed: Option<u64>,
        #[serde(default)]
        window: Option<u32>,
        #[serde(default)]
        signal_every: Option<u32>,
        local: StreamLocal,
        #[serde(default)]
        remote: Option<Remote>,
        /// A `send` stream: where the peer keeps its receives posted.
        #[serde(default)]
        receive: Option<StreamReceive>,
        #[serde(default)]
        add: Option<u64>,
        /// An `atomics` stream: every this-many-th atomic is a CmpSwap (default 2).
        #[serde(default)]
        cmp_swap_every: Option<u32>,
        #[serde(default)]
        within_ms: Option<u64>,
        /// The messages go round a ring of this many bytes (from `local.offset`,
        /// and from the peer's `remote.offset` for a `write`): one that would run
        /// past its end starts again at its start. It must hold `window` + 2 of
        /// the longest message, so that no message in flight is written over.
        #[serde(default)]
        ring: Option<u64>,
        /// How messages are dealt to `qps`: `round_robin` (default; message `i`
        /// on QP `i mod n`) or `random` (each drawn from `seed`).
        #[serde(default)]
        spread: Option<String>,
    },
    Write {
        on: String,
        qp: String,
        #[serde(default = "zero")]
        wr_id: u64,
        #[serde(default)]
        sge: Vec<Sge>,
        #[serde(default)]
        flags: Vec<String>,
        remote: Remote,
    },
    WriteImm {
        on: String,
        qp: String,
        #[serde(default = "zero")]
        wr_id: u64,
        #[serde(default)]
        sge: Vec<Sge>,
        #[serde(default)]
        flags: Vec<String>,
        remote: Remote,
        /// The immediate data, a 32-bit number whose bytes go on the wire (the
        /// ImmDt) most significant first: `0x12345678` is `12 34 56 78`. The
        /// receiver's completion gives back the same number.
        imm_data: u32,
    },
    Read {
        on: String,
        qp: String,
        #[serde(default = "zero")]
        wr_id: u64,
        #[serde(default)]
        sge: Vec<Sge>,
        #[serde(default)]
        flags: Vec<String>,
        remote: Remote,
    },
    CmpSwap {
        on: String,
        qp: String,
        #[serde(default = "zero")]
        wr_id: u64,
        #[serde(default)]
        sge: Vec<Sge>,
        #[serde(default)]
        flags: Vec<String>,
        remote: Remote,
        compare: u64,
        swap: u64,
    },
    FetchAdd {
        on: String,
        qp: String,
        #[serde(default = "zero")]
        wr_id: u64,
        #[serde(default)]
        sge: Vec<Sge>,
        #[serde(default)]
        flags: Vec<String>,
        remote: Remote,
        add: u64,
    },
    /// An ATOMIC WRITE (0x1D) of 8 bytes (`value = { u64 = 7 }` or `{ bytes = "…" }`).
    AtomicWrite {
        on: String,
        qp: String,
        #[serde(default = "zero")]
        wr_id: u64,
        #[serde(default)]
        flags: Vec<String>,
        remote: Remote,
        value: Content,
    },
    /// An RDMA FLUSH (0x1C): `len` bytes from `remote` (default: to the end of the
    /// MR), `placement` `global` (default) or `persistent`, `level` `range`
    /// (default) or `mr` (the whole MR).
    Flush {
        on: String,
        qp: String,
        #[serde(default = "zero")]
        wr_id: u64,
        #[serde(default)]
        flags: Vec<String>,
        remote: Remote,
        #[serde(default)]
        len: Option<u64>,
        #[serde(default)]
        placement: Option<String>,
        #[serde(default)]
        level: Option<String>,
    },
    /// Bind memory window `mw` of `on` to `len` bytes (default: the rest) of its MR
    /// `mr` from `offset`, with `access` (default `remote_write`): a type 1 window
    /// with `ibv_bind_mw`, a type 2 one by an `IBV_WR_BIND_MW` on `qp`.
    BindMw {
        on: String,
        qp: String,
        #[serde(default = "zero")]
        wr_id: u64,
        #[serde(default)]
        flags: Vec<String>,
        mw: String,
        mr: String,
        #[serde(default)]
        offset: u64,
        #[serde(default)]
        len: Option<u64>,
        /// Named as in an MR's `access`.
        #[serde(default)]
        access: Option<Vec<String>>,
        /// Let the range run past the MR's end, at most 4096 bytes (into the
        /// guard region the agent keeps there), to see the device refuse a bind
        /// outside its region (mw.bind.within-region).
        #[serde(default)]
        outside_mr: bool,
    },
    /// SEND with Invalidate: a SEND whose IETH names an rkey of the peer to
    /// invalidate: `invalidate = { mw = "w" }` (its rkey as last bound) or
    /// `{ rkey = 0x… }`.
    SendInv {
        on: String,
        qp: String,
        #[serde(default = "zero")]
        wr_id: u64,
        #[serde(default)]
        sge: Vec<Sge>,
        #[serde(default)]
        flags: Vec<String>,
        invalidate: Invalidate,
    },
    /// Local invalidate of `on`'s own memory window `mw` (`IBV_WR_LOCAL_INV`).
    LocalInv {
        on: String,
        qp: String,
        #[serde(default = "zero")]
        wr_id: u64,
        #[serde(default)]
        flags: Vec<String>,
        mw: String,
    },
    /// A receive WR on a shared receive queue.
    PostSrqRecv {
        on: String,
        srq: String,
        #[serde(default = "zero")]
        wr_id: u64,
        #[serde(default)]
        sge: Vec<Sge>,
    },
    /// Arm an SRQ's limit event: `IBV_EVENT_SRQ_LIMIT_REACHED` comes once fewer
    /// than `limit` receives are left on it.
    ArmSrq {
        on: String,
        srq: String,
        limit: u32,
    },
    /// Wait until both endpoints reach this point (the controller orders steps).
    Sync {},
    Sleep {
        ms: u64,
    },
    /// Wait for `count` more completions on `on`'s CQ (up to `within_ms`, default 2 s).
    WaitCompletions {
        on: String,
        count: u32,
        #[serde(default)]
        within_ms: Option<u64>,
    },
    /// Send a crafted packet: `on` builds it itself and sends it on its interface,
    /// in the name of its QP `qp`, to the QP at the other end.
    Probe {
        on: String,
        qp: String,
        probe: ProbeFile,
    },
    /// Move QP `qp` of `on` to `state` (`reset`, `init`, `rtr`, `rts`, `sqd`,
    /// `sqe`, `err`) with `ibv_modify_qp`, giving what the transition from its
    /// current state requires (from the QP's own setup and its connection), or
    /// with `state_only = true` the state alone; `access` changes its remote
    /// access flags (an optional attribute from INIT on: RTS → RTS applies them to
    /// what arrives next). The PSNs are always the ones the connection started
    /// with: INIT → RTR gives the peer's starting send PSN as the PSN to expect,
    /// RTR → RTS the QP's own starting send PSN (its `psn`, or the random or
    /// rdma_cm one the report shows), also when the QP is brought up again after
    /// RESET; where the pair had traffic before, the peer has moved on from
    /// them. From this step on, every verb on the QP is the device's to take or
    /// refuse: say what it should do with `expect`.
    ModifyQp {
        on: String,
        qp: String,
        /// `reset`, `init`, `rtr`, `rts`, `sqd`, `sqe`, `err` (or `error`); case
        /// and an `IBV_QPS_` prefix are ignored.
        state: String,
        #[serde(default)]
        state_only: bool,
        /// The QP's new `qp_access_flags`, named as in an MR's `access`.
        #[serde(default)]
        access: Option<Vec<String>>,
    },
    /// Ask the device which state QP `qp` of `on` is in (`ibv_query_qp`): it must
    /// be `state` (`err` after an error took it there, say).
    QueryQp {
        on: String,
        qp: String,
        /// `reset`, `init`, `rtr`, `rts`, `sqd`, `sqe`, `err` (or `error`); case
        /// and an `IBV_QPS_` prefix are ignored.
        state: String,
    },
    /// Deregister MR `mr` of `on` (`ibv_dereg_mr`): its keys stop working; its
    /// buffer stays, so `[[expect.memory]]` still reads what it holds.
    DeregMr {
        on: String,
        mr: String,
    },
    /// Re-register MR `mr` of `on` with other `access` flags
    /// (`ibv_rereg_mr`, `IBV_REREG_MR_CHANGE_ACCESS`).
    ReregMr {
        on: String,
        mr: String,
        /// Named as in an MR's `access`.
        access: Vec<String>,
    },
    /// Deallocate memory window `mw` of `on` (`ibv_dealloc_mw`): its R_Key dies.
    DeallocMw {
        on: String,
        mw: String,
    },
    /// Arm `on`'s CQ (`ibv_req_notify_cq`): its next completion notifies, or with
    /// `solicited_only = true` its next receive completion of a message with the
    /// SE bit (or one in error). Once: it is armed again for the next. An
    /// endpoint has one CQ, the send and the receive CQ of every QP it has
    /// (streams' and SRQs' too): armed without `solicited_only`, a send's
    /// completion notifies as well as a receive's, on any of its QPs.
    ArmCq {
        on: String,
        #[serde(default)]
        solicited_only: bool,
    },
    /// Resize `on`'s CQ to hold at least `cqe` completions (`ibv_resize_cq`). The
    /// endpoint polls its CQ only while it carries out a step, after it: what
    /// completed while it was idle (the peer's SENDs into its receives) is still
    /// held when this step resizes, so a `cqe` below that count must be refused
    /// (`expect = "refused"`).
    ResizeCq {
        on: String,
        cqe: u32,
    },
    /// Wait up to `within_ms` (default 500) for `on`'s CQ to notify: `notified`
    /// says whether it must (`false` waits the whole time).
    AwaitNotify {
        on: String,
        notified: bool,
        #[serde(default)]
        within_ms: Option<u64>,
    },
}

/// What any step may add: what the device must answer the verb it calls.
/// `expect = "refused"` (the verb returns an error, `errno` naming it if given:
/// `EINVAL`, `ENOMEM`, …) or `"accepted"`; without `expect` a refusal ends the
/// run as an error. `record_deviation = true` records a device that answers
/// otherwise in the profile instead of failing.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepOutcomeFile {
    pub(crate) expect: Option<String>,
    pub(crate) errno: Option<String>,
    pub(crate) record_deviation: Option<bool>,
}

impl StepOutcomeFile {
    /// The keys it takes out of a `[[step]]` table before the op reads the rest.
    pub(crate) const KEYS: [&'static str; 3] = ["expect", "errno", "record_deviation"];
}

/// What a SEND with Invalidate invalidates: a memory window of the peer, or a
/// raw rkey.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Invalidate {
    #[serde(default)]
    pub(crate) mw: Option<String>,
    #[serde(default)]
    pub(crate) rkey: Option<u32>,
}

/// One `[[step]]` table: its op and fields, or why they do not read; and where
/// the table and each of its keys are.
#[derive(Debug, Clone)]
pub(crate) struct StepFile {
    pub(crate) span: Span,
    /// Each key of the table and the span of its value.
    pub(crate) keys: BTreeMap<String, Span>,
    /// The step, or serde's message about it (reported by the check, at the key
    /// it names when it names one).
    pub(crate) op: Result<StepOp, String>,
    /// `expect`, `errno`, `record_deviation`, or what about them does not read.
    pub(crate) outcome: Result<StepOutcomeFile, String>,
}

impl StepFile {
    /// Where `key`'s value is (the table when it has no such key).
    pub(crate) fn at(&self, key: &str) -> Span {
        self.keys.get(key).cloned().unwrap_or_else(|| self.span.clone())
    }
}

impl<'de> Deserialize<'de> for StepFile {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<StepFile, D::Error> {
        let t = toml::Spanned::<BTreeMap<String, toml::Spanned<toml::Value>>>::deserialize(d)?;
        let span = t.span();
        let entries = t.into_inner();
        let keys = entries.iter().map(|(k, v)| (k.clone(), v.span())).collect();
        let mut table: toml::Table =
            entries.into_iter().map(|(k, v)| (k, v.into_inner())).collect();
        let outcome = step_outcome(&mut table);
        let op = StepOp::deserialize(toml::Value::Table(table))
            .map_err(|e| e.message().trim().to_string());
        Ok(StepFile { span, keys, op, outcome })
    }
}

/// Takes `expect`, `errno` and `record_deviation` out of a step's table.
fn step_outcome(t: &mut toml::Table) -> Result<StepOutcomeFile, String> {
    let text = |t: &mut toml::Table, k: &str| match t.remove(k) {
        None => Ok(None),
        Some(toml::Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(format!("invalid type: {} `{k}`, expected a string", v.type_str())),
    };
    let expect = text(t, "expect")?;
    let errno = text(t, "errno")?;
    let record_deviation = match t.remove("record_deviation") {
        None => None,
        Some(toml::Value::Boolean(b)) => Some(b),
        Some(v) => {
            return Err(format!(
                "invalid type: {} `record_deviation`, expected a boolean",
                v.type_str()
            ))
        }
    };
    Ok(StepOutcomeFile { expect, errno, record_deviation })
}

impl JsonSchema for StepFile {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Step".into()
    }
    /// Each op's keys, and on every one the keys any step may add
    /// ([`StepOutcomeFile`]).
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = StepOp::json_schema(g);
        let added = serde_json::json!({
            "expect": {
                "description": "What the device must answer the verb this step calls: `refused` or `accepted` (default: a refusal ends the run as an error).",
                "type": "string",
                "enum": ["refused", "accepted"]
            },
            "errno": {
                "description": "With `expect = \"refused\"`: the errno it must refuse with (`EINVAL`, `ENOMEM`, `EBUSY`, …).",
                "type": "string"
            },
            "record_deviation": {
                "description": "A device that answers otherwise is recorded in the profile, not failed.",
                "type": "boolean"
            }
        });
        let ops = schema.get_mut("oneOf").and_then(|v| v.as_array_mut());
        for op in ops.into_iter().flatten() {
            if let (Some(props), Some(add)) =
                (op.get_mut("properties").and_then(|p| p.as_object_mut()), added.as_object())
            {
                props.extend(add.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        schema
    }
}

/// A BTH opcode: its name as `roce decode` prints it, with or without the
/// transport (`"RDMA WRITE Only"`, `"UD SEND Only"`), or its number (`0x0a` = 10).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum OpcodeRef {
    Number(u8),
    Name(String),
}

/// A PSN: `"next"` (the PSN the target expects, as far as the prober knows),
/// `"next+N"` / `"next-N"` (ahead of it, or already used: a duplicate), or an
/// absolute 24-bit PSN. `next` starts at the prober's QP's starting send PSN and
/// moves on by one after each probe that `moves_next`; work requests posted on
/// that QP do not move it. On a UD QP it is the same number, put in the BTH:
/// UD checks no PSN, so it names no expected PSN there. (In a wire
/// expectation's `psns` and `response_psns`, `"first"` takes the place of
/// `"next"`.)
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum PsnRef {
    Absolute(u32),
    Relative(String),
}

/// A crafted packet: BTH, the extension headers its opcode calls for, payload and
/// ICRC, built by the dissector's emit side and sent raw on the endpoint's
/// interface. Fields the opcode has no header for are refused by `roce check`.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[schemars(rename = "ProbeSpec")]
#[serde(deny_unknown_fields)]
pub(crate) struct ProbeFile {
    /// Names the probe for `[[expect.probe]]`, the report and the profile.
    pub(crate) id: String,
    pub(crate) opcode: OpcodeRef,
    /// Default `"next"`: the prober's QP's starting send PSN, one on for each
    /// earlier probe on that QP that moved it (see `PsnRef`; on UD too).
    #[serde(default)]
    pub(crate) psn: Option<PsnRef>,
    /// Whether `next` moves on by one after this probe (default: when it was sent
    /// at `"next"`). Say `false` for a probe the target should drop, so the next
    /// probe is sent at the PSN the target still expects.
    #[serde(default)]
    pub(crate) moves_next: Option<bool>,
    /// RETH / AtomicETH: an MR of the target (its address and rkey as exchanged),
    /// at an offset; `rkey` overrides.
    #[serde(default)]
    pub(crate) remote: Option<Remote>,
    /// RETH DMA length (default: the payload's length).
    #[serde(default)]
    pub(crate) dma_len: Option<u32>,
    /// Payload bytes (default: `len` zero bytes, or none).
    #[serde(default)]
    pub(crate) payload: Option<Content>,
    /// Payload length (a `pattern` payload is repeated to it).
    #[serde(default)]
    pub(crate) len: Option<u32>,
    /// ImmDt (default 0): the number's bytes, most significant first
    /// (`0x12345678` is `12 34 56 78` on the wire).
    #[serde(default)]
    pub(crate) imm_data: Option<u32>,
    /// Atomics: compare (CmpSwap), swap or add.
    #[serde(default)]
    pub(crate) compare: Option<u64>,
    #[serde(default)]
    pub(crate) swap: Option<u64>,
    #[serde(default)]
    pub(crate) add: Option<u64>,
    /// BTH AckReq (default: set).
    #[serde(default)]
    pub(crate) ack_req: Option<bool>,
    /// Send it with a wrong ICRC.
    #[serde(default)]
    pub(crate) bad_icrc: Option<bool>,
    /// BTH TVer, the transport header version (default 0, the only one defined).
    #[serde(default)]
    pub(crate) tver: Option<u8>,
    /// BTH SE, solicited event (default: clear).
    #[serde(default)]
    pub(crate) solicited: Option<bool>,
    /// BTH PadCnt, 0 to 3, with that many pad bytes after the payload (default:
    /// what pads the payload to a multiple of 4).
    #[serde(default)]
    pub(crate) pad: Option<u8>,
    /// The UDP source port (default 0xC000 | the prober's QPN's low 14 bits).
    #[serde(default)]
    pub(crate) udp_src_port: Option<u16>,
    /// BTH P_Key (default 0xffff, the default partition).
    #[serde(default)]
    pub(crate) p_key: Option<u16>,
    /// BTH DestQP (default: the QPN of the target's QP).
    #[serde(default)]
    pub(crate) dest_qp: Option<u32>,
    /// DETH Q_Key, for UD opcodes (default 0x11111111).
    #[serde(default)]
    pub(crate) q_key: Option<u32>,
    /// Identical copies to send back to back (default 1).
    #[serde(default)]
    pub(crate) copies: Option<u32>,
    /// How long to wait after sending, for the answer to be on the wire before the
    /// next step (default 20 ms).
    #[serde(default)]
    pub(crate) settle_ms: Option<u64>,
    /// Ends the wait early: once this long passes with no frame from the target
    /// (since the probe went out, or since its last answer), the next step goes;
    /// `settle_ms` stays the longest it waits. Unset: the whole `settle_ms`. A
    /// gap shorter than the target takes to answer moves its late answer to the
    /// next probe.
    #[serde(default)]
    pub(crate) quiet_ms: Option<u64>,
}

/// A fault on the wire, applied by the lab switch while the scenario runs.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(rename = "FaultSpec")]
#[serde(deny_unknown_fields)]
pub(crate) struct FaultFile {
    /// A rule in `roce lab run --fault` syntax, without `dir`/`qp` (use `from` and
    /// `qp`): `drop op=write-middle nth=1`, `drop psn=101 nth=2` (the 2nd
    /// transmission of PSN 101), `corrupt-icrc psn=101`, `ce op=send-only`,
    /// `dup op=write-only copies=1`, `reorder psn=101`, `delay ms=20`. PSNs are
    /// absolute: set the QP's `psn` to make them known.
    pub(crate) rule: Spanned<String>,
    /// Only frames this endpoint sends.
    #[serde(default)]
    pub(crate) from: Option<Spanned<String>>,
    /// Only frames of this QP pair (to the receiving end's QPN, learned at setup).
    #[serde(default)]
    pub(crate) qp: Option<Spanned<String>>,
}

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Expectations")]
#[serde(deny_unknown_fields)]
pub(crate) struct ExpectFile {
    #[serde(default)]
    pub(crate) completion: Vec<CompletionFile>,
    #[serde(default)]
    pub(crate) wire: Vec<WireFile>,
    #[serde(default)]
    pub(crate) memory: Vec<MemoryFile>,
    #[serde(default)]
    pub(crate) probe: Vec<ProbeExpectFile>,
    #[serde(default)]
    pub(crate) event: Vec<EventExpectFile>,
    #[serde(default)]
    pub(crate) stream: Vec<StreamExpectFile>,
    #[serde(default)]
    pub(crate) order: Vec<OrderFile>,
    #[serde(default)]
    pub(crate) counters: Vec<CounterExpectFile>,
}

/// What a counter of `on`'s device moves by over the scenario, from the end of
/// its setup to the end of its teardown: `value` exactly, or within `min` and
/// `max`. `counter` is the driver's own name (`roce run` prints each endpoint's
/// counters that moved: rxe's `sent_pkts`, `send_rnr_err`, `duplicate_request`,
/// …; mlx5's `out_of_sequence`, …), or what it counts, which each driver's
/// name is then looked up for: `packets_sent`, `packets_received`,
/// `rnr_naks_sent`, `rnr_naks_received`, `seq_naks_received`,
/// `duplicate_requests`, `out_of_sequence_requests`, `retry_exceeded`,
/// `rnr_retry_exceeded`, `ack_timeouts`, `cnps_sent`, `cnps_handled`. Read only
/// where the scenario has the device to itself (not side by side with others,
/// `-j`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(rename = "CounterExpect")]
#[serde(deny_unknown_fields)]
pub(crate) struct CounterExpectFile {
    pub(crate) on: Spanned<String>,
    pub(crate) counter: Spanned<String>,
    #[serde(default)]
    pub(crate) value: Option<Spanned<u64>>,
    #[serde(default)]
    pub(crate) min: Option<Spanned<u64>>,
    #[serde(default)]
    pub(crate) max: Option<Spanned<u64>>,
    /// As for the other expectations: a device that does otherwise is recorded.
    #[serde(default)]
    pub(crate) record_deviation: Option<bool>,
}

/// The order of frames across both directions of one QP pair: every frame
/// `then` names comes after the first frame `first` names, and both are there
/// ("the fenced WRITE leaves after the READ Response"). Frames are named as in a
/// wire `sequence` or `responses`, conditions in braces included; frames the
/// switch injected are left out, frames it dropped stay (they were sent).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(rename = "OrderExpect")]
#[serde(deny_unknown_fields)]
pub(crate) struct OrderFile {
    pub(crate) qp: Spanned<String>,
    pub(crate) first: Spanned<String>,
    pub(crate) then: Spanned<String>,
    /// As for the other expectations: a device that does otherwise is recorded.
    #[serde(default)]
    pub(crate) record_deviation: Option<bool>,
}

/// PSNs on the wire: `"consecutive"`, or a list of PSNs, each absolute
/// (`16777215`) or relative to the sending QP's starting PSN (`"first"`,
/// `"first+2"`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum PsnsFile {
    Word(String),
    List(Vec<PsnRef>),
}

/// How a stream step ended: `completed` of its messages completed successfully
/// (default: all of them), the rest failed or never went out.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(rename = "StreamExpect")]
#[serde(deny_unknown_fields)]
pub(crate) struct StreamExpectFile {
    /// The stream step's `id`.
    pub(crate) id: Spanned<String>,
    #[serde(default)]
    pub(crate) completed: Option<u64>,
    /// No message on any of the stream's QPs waited longer than this on the wire,
    /// from its first packet to the response that acknowledged it (a QP starved
    /// by the others fails it). Needs a capture.
    #[serde(default)]
    pub(crate) max_ack_latency_ms: Option<u64>,
}

/// Asynchronous events an endpoint saw (`ibv_get_async_event`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(rename = "EventExpect")]
#[serde(deny_unknown_fields)]
pub(crate) struct EventExpectFile {
    pub(crate) on: Spanned<String>,
    /// One of `IBV_EVENT_CQ_ERR`, `IBV_EVENT_QP_FATAL`, `IBV_EVENT_QP_REQ_ERR`,
    /// `IBV_EVENT_QP_ACCESS_ERR`, `IBV_EVENT_COMM_EST`, `IBV_EVENT_SQ_DRAINED`,
    /// `IBV_EVENT_PATH_MIG`, `IBV_EVENT_PATH_MIG_ERR`, `IBV_EVENT_DEVICE_FATAL`,
    /// `IBV_EVENT_PORT_ACTIVE`, `IBV_EVENT_PORT_ERR`, `IBV_EVENT_LID_CHANGE`,
    /// `IBV_EVENT_PKEY_CHANGE`, `IBV_EVENT_SM_CHANGE`, `IBV_EVENT_SRQ_ERR`,
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`, `IBV_EVENT_QP_LAST_WQE_REACHED`,
    /// `IBV_EVENT_CLIENT_REREGISTER`, `IBV_EVENT_GID_CHANGE`,
    /// `IBV_EVENT_WQ_FATAL` (case ignored; the `IBV_EVENT_` prefix optional:
    /// `srq_limit_reached`).
    pub(crate) event: Spanned<String>,
    /// The SRQ it is about.
    #[serde(default)]
    pub(crate) srq: Option<Spanned<String>>,
    /// The QP it is about (one of `on`'s).
    #[serde(default)]
    pub(crate) qp: Option<Spanned<String>>,
    /// Exactly this many (default: at least one).
    #[serde(default)]
    pub(crate) count: Option<usize>,
    /// What the spec requires where a device is known to do otherwise: recorded
    /// as a deviation (in the profile), not failed.
    #[serde(default)]
    pub(crate) record_deviation: Option<bool>,
}

/// A work completion on `on`: the one for `wr_id`, or the `index`-th (from 0) in
/// the order they were polled; or how many there are (`count`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(rename = "CompletionExpect")]
#[serde(deny_unknown_fields)]
pub(crate) struct CompletionFile {
    pub(crate) on: Spanned<String>,
    /// The first completion polled on `on` with this `wr_id` (a step that sets
    /// none posts `wr_id` 0). Beside `wr_id`, `index` is not read.
    #[serde(default)]
    pub(crate) wr_id: Option<u64>,
    /// The `index`-th completion polled on `on`, from 0, whatever its `wr_id`:
    /// the one CQ of the endpoint, every QP's sends and receives in one order.
    #[serde(default)]
    pub(crate) index: Option<usize>,
    /// `IBV_WC_SUCCESS`, `IBV_WC_REM_ACCESS_ERR`, … (prefix optional).
    #[serde(default)]
    pub(crate) status: Option<Spanned<String>>,
    /// `IBV_WC_SEND`, `IBV_WC_RECV`, `IBV_WC_RDMA_WRITE`, `IBV_WC_RECV_RDMA_WITH_IMM`, …
    #[serde(default)]
    pub(crate) opcode: Option<Spanned<String>>,
    /// `ibv_wc.byte_len`: on a receive, the bytes placed; a UD receive counts
    /// the 40-byte GRH area before the payload too (a SEND of 8 bytes: 48).
    #[serde(default)]
    pub(crate) byte_len: Option<u32>,
    /// The immediate data (`IBV_WC_WITH_IMM` set), as the number the sender's
    /// `imm_data` was: `0x12345678` is the bytes `12 34 56 78` of the ImmDt on
    /// the wire, in that order (`roce decode` shows `Imm=0x12345678`, the filter
    /// field `infiniband.immdt == 12:34:56:78`). The verbs carry it in network
    /// byte order (ibv_post_send(3)); the agent converts it both ways.
    #[serde(default)]
    pub(crate) imm_data: Option<u32>,
    /// A SEND with Invalidate's receive: the memory window of `on` whose rkey it
    /// invalidated (`IBV_WC_WITH_INV`).
    #[serde(default)]
    pub(crate) invalidated: Option<Spanned<String>>,
    /// A UD receive's source QP (`ibv_wc.src_qp`, the DETH's SrcQP), by the name
    /// of a UD QP of `on`'s: the QPN of its other end, the sender's, as the run
    /// set it up (QPNs are known only then).
    #[serde(default)]
    pub(crate) src_qp: Option<Spanned<String>>,
    /// `IBV_WC_GRH` set (`true`) or not in the completion's `wc_flags`: the
    /// receive buffer's first 40 bytes hold a GRH (on RoCEv2, the packet's IP
    /// header). Every UD receive on RoCE has one.
    #[serde(default)]
    pub(crate) grh: Option<bool>,
    /// `ibv_wc.pkey_index`: the index of the P_Key in the port's table. The
    /// verbs define it for GSI QPs only (ibv_poll_cq(3)); elsewhere it is what the
    /// device says.
    #[serde(default)]
    pub(crate) pkey_index: Option<u16>,
    /// Without `wr_id` and `index`: exactly this many completions polled on `on`
    /// in the whole run. A stream's own successful completions are not kept, so
    /// are not counted; its first failed one is (`count = 0` on an endpoint
    /// that only runs a stream: no stream completion failed). Beside `wr_id` or
    /// `index`, the total must be this too.
    #[serde(default)]
    pub(crate) count: Option<usize>,
    /// The completion was polled at most this many ms after the endpoint's setup
    /// ended. When every completion an endpoint waits for (by `wr_id` or `index`,
    /// without `count`) has one, the run waits for them only as long as the
    /// longest, not the usual 3 s after the steps.
    #[serde(default)]
    pub(crate) within_ms: Option<u64>,
    /// What IBA requires, where a device may deviate: judged as usual, but a
    /// device that does otherwise is recorded, not failed — the verdict shows as a
    /// deviation and the observation `deviation: <what>` (`holds` / `deviates`)
    /// goes to the device profile, which `--profile` then holds the device to. It
    /// covers the whole table, every key in it: one key that fails makes the
    /// whole expectation the recorded deviation. To record one part alone, give it
    /// an expectation of its own.
    #[serde(default)]
    pub(crate) record_deviation: Option<bool>,
}

/// What the wire shows for one QP pair, in one direction of requests: the
/// requests `from`'s QP sent to the peer's QP, and the responses the peer's QP
/// sent back. Every key is judged on the same frames, in capture order: every
/// transmission (a resend is a frame of its own), the frames the lab switch
/// dropped (they were sent), the real answer a `respond` rule withheld and the
/// response it built in the responder's place; not the copies a `dup` rule made,
/// nor frames the lab injected. Probes `from` sent in the QP's name are among
/// the requests. Set aside, and said in the verdict: an early ACK-timer resend
/// and the answers only it drew. That is a request resent sooner than its local
/// ACK timeout allows (less 5 % and 8 ms), when everything sent before it had
/// been acknowledged and nothing had answered it: the end of a timer an earlier,
/// finished exchange started (rxe keeps one timer per QP, arms it only when none
/// is pending and lets it run on once everything is acknowledged), or a timer
/// counted from when a starved VM posted the request rather than from when it
/// reached the wire (the QP's first requests resent microseconds after they
/// went out). Whether a run has one depends on how long the steps between its
/// exchanges took, and on the host's load, so only `ack_timeout` judges it. A
/// key left out is not judged.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(rename = "WireExpect")]
#[serde(deny_unknown_fields)]
pub(crate) struct WireFile {
    pub(crate) qp: Spanned<String>,
    /// The endpoint whose QP sends the requests.
    pub(crate) from: Spanned<String>,
    /// Request opcodes in order, by name without the transport ("SEND Only",
    /// "RDMA WRITE First"), every transmission (resends and dropped frames
    /// included); `[]`: no request at all. An item is a name, or names separated
    /// by `|` (alternatives); then, if wanted, a condition on the frame in braces
    /// (a display filter); then, last of all, a `*` (any number, 0+) or `+` (one or
    /// more) for the whole item: "RDMA WRITE Middle*", "SEND Only
    /// {infiniband.bth.se == 1}+" (not "SEND Only+ {…}").
    #[serde(default)]
    pub(crate) sequence: Option<Vec<Spanned<String>>>,
    /// The responses (from the other side) in order: "ACK", "NAK Remote Access
    /// Error", "RNR NAK", "NAK" (any NAK, RNR included), "RDMA READ Response Only",
    /// "ATOMIC Acknowledge", … with the same `|`, `{…}` and `*`/`+` ("ACK
    /// {infiniband.aeth.msn == 2}*"). Every response frame: the answers to
    /// resends, the ones the switch dropped and a `respond` rule's included; CNPs
    /// are not responses (`cnp`). `[]`: no response at all.
    #[serde(default)]
    pub(crate) responses: Option<Vec<Spanned<String>>>,
    /// The PSNs of the requests, each once, in the order first sent (resends left
    /// out, a transmission the switch dropped counted as sent): `"consecutive"` (on from the QP's starting send PSN, one by one,
    /// across the 2^24 wrap), or the list, each absolute (`16777215`) or relative
    /// to the QP's starting send PSN (`"first"`, `"first+3"`).
    #[serde(default)]
    pub(crate) psns: Option<Spanned<PsnsFile>>,
    /// The PSNs of the responses in the same way (they are in the requester's PSN
    /// space: an ACK or a READ response carries the PSN of what it answers).
    #[serde(default)]
    pub(crate) response_psns: Option<Spanned<PsnsFile>>,
    /// NAK codes that must appear among the responses, dropped ones included
    /// (`remote_access_error`, `invalid_request`, `psn_sequence_error`,
    /// `remote_operational_error`, `invalid_rd_request`, `rnr`).
    #[serde(default)]
    pub(crate) naks: Option<Vec<Spanned<String>>>,
    /// At least this many RNR NAKs among the responses.
    #[serde(default)]
    pub(crate) min_rnr_naks: Option<u64>,
    /// RNR NAKs within a range, both ends included: `"0..10"`, `"5.."`, `"..3"`,
    /// `"2"` (counted among the responses, dropped ones included).
    #[serde(default)]
    pub(crate) rnr_naks: Option<Spanned<String>>,
    /// Exactly this many requests sent again: request frames whose PSN an earlier
    /// request frame carried (a transmission the switch dropped counts, a copy a
    /// `dup` rule made does not).
    #[serde(default)]
    pub(crate) retransmissions: Option<u64>,
    /// At most this many requests sent again, counted as for `retransmissions`
    /// (loss at scale: a bound, not a count).
    #[serde(default)]
    pub(crate) max_retransmissions: Option<u64>,
    /// Every ICRC on this QP pair valid (`true`, the default), a bad one there
    /// (`false`), or not judged: `"any"`, where the device profile records which
    /// frames carried a bad one (a device known to compute some ICRCs its own way).
    #[serde(default)]
    pub(crate) icrc_valid: Option<IcrcValid>,
    /// Nothing on the wire in this expectation's direction: no request from
    /// `from`'s QP to the peer's and no response back (loopback, or a refused
    /// post). The requests the peer sent on the pair, and their responses, are
    /// the other direction's: for nothing at all on the pair, say it from both
    /// ends. With `empty = true` the expectation's other keys are not judged.
    #[serde(default)]
    pub(crate) empty: Option<bool>,
    /// Go-back-N recovery done right (IBA 9.7.5): what the responder acknowledges
    /// never moves back (a NAK acknowledges the PSN before the one it names);
    /// after a NAK PSN Sequence Error the requester resends from the NAK'd PSN,
    /// without a gap; and every request PSN was delivered in the end. A resend of
    /// a PSN the wire had already acknowledged is counted as redundant, not failed.
    #[serde(default)]
    pub(crate) go_back_n: Option<bool>,
    /// A CNP (opcode 0x81) from the responder after a CE-marked request (true), or
    /// none (false).
    #[serde(default)]
    pub(crate) cnp: Option<bool>,
    /// Each resend starts within this many ms of what triggered it (the NAK, or
    /// the original transmission when the ACK timer fired).
    #[serde(default)]
    pub(crate) retransmit_within_ms: Option<u64>,
    /// After every RNR NAK the requester waited at least the time its timer code
    /// asks (IBA table 45) before it sent that PSN again; each wait is reported.
    #[serde(default)]
    pub(crate) rnr_timer_honoured: Option<bool>,
    /// Every resend the requester's ACK timer set off came no sooner than the QP's
    /// local ACK timeout (4.096 µs × 2^timeout) after the last transmission of its
    /// PSN, and no later than four times that. Times are taken at the lab switch,
    /// after each VM's transmit path, and kernel timers run in ticks: both bounds
    /// allow 5 % and 8 ms. A transmission held longer than that on its way
    /// (host load) makes the next resend look early: the first resends are then
    /// held to the moment the controller asked the requester's endpoint for its
    /// first step instead, which no timer can start before (the n-th at least n
    /// times the timeout, less 5 % and one tick, after it). An early ACK-timer
    /// resend (set aside from the other keys) fails it.
    #[serde(default)]
    pub(crate) ack_timeout: Option<bool>,
    /// What IBA requires, where a device may deviate: judged as usual, but a
    /// device that does otherwise is recorded, not failed — the verdict shows as a
    /// deviation and the observation `deviation: <what>` (`holds` / `deviates`)
    /// goes to the device profile, which `--profile` then holds the device to. It
    /// covers the whole table, every key in it: one key that fails makes the
    /// whole expectation the recorded deviation. To record one part alone, give it
    /// an expectation of its own.
    #[serde(default)]
    pub(crate) record_deviation: Option<bool>,
}

/// An MR's content at the end of the run.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(rename = "MemoryExpect")]
#[serde(deny_unknown_fields)]
pub(crate) struct MemoryFile {
    pub(crate) on: Spanned<String>,
    pub(crate) mr: Spanned<String>,
    #[serde(default)]
    pub(crate) offset: u64,
    #[serde(default)]
    pub(crate) equals: Option<Spanned<Content>>,
    /// Equal to its initial content.
    #[serde(default)]
    pub(crate) unchanged: Option<bool>,
    /// Holds, from `offset`, every message of the stream step with this `id`, as
    /// seeded: checked on the endpoint, message by message (the first wrong one
    /// is named, with its offset and bytes), for MRs of any size.
    #[serde(default)]
    pub(crate) stream: Option<Spanned<String>>,
    /// `"landed"`: every crafted RDMA WRITE (`op = "probe"`) into this MR that
    /// the target acknowledged placed exactly the payload sent, where its RETH
    /// aimed it. Only bytes the wire settles are judged: those of an RC WRITE
    /// Only sent in sequence to the MR's own rkey and answered by an ACK of its
    /// PSN (a NAKed WRITE leaves them as they were; an unanswered one, or
    /// anything else that may write there, leaves them unknown). What `roce
    /// fuzz` holds every batch to: a device or path that corrupts data it
    /// acknowledges (a payload byte changed with the ICRC fixed) fails it.
    #[serde(default)]
    pub(crate) probe_writes: Option<Spanned<String>>,
    /// `"unchanged"`: nothing outside the MR changed — the guard regions of
    /// unregistered memory the agent keeps on both sides of every MR (a page each,
    /// the one after starting right past its last byte) still hold their canary.
    /// Alone, or beside one of the others. (A damaged guard region fails the run
    /// even when no expectation names it; this one makes the check a verdict.)
    #[serde(default)]
    pub(crate) outside: Option<Spanned<String>>,
    /// What IBA requires, where a device may deviate: judged as usual, but a
    /// device that does otherwise is recorded, not failed — the verdict shows as a
    /// deviation and the observation `deviation: <what>` (`holds` / `deviates`)
    /// goes to the device profile, which `--profile` then holds the device to. It
    /// covers the whole table, every key in it: one key that fails makes the
    /// whole expectation the recorded deviation. To record one part alone, give it
    /// an expectation of its own.
    #[serde(default)]
    pub(crate) record_deviation: Option<bool>,
}

/// What the target sent back to a probe: its responses on the wire from the probe
/// to the next request the prober sends.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(rename = "ProbeExpect")]
#[serde(deny_unknown_fields)]
pub(crate) struct ProbeExpectFile {
    /// The probe's `id`.
    pub(crate) probe: Spanned<String>,
    /// The responses in order, named as in `[[expect.wire]]` (`"ACK"`, `"NAK PSN
    /// Sequence Error"`, `"RDMA READ Response Only"`, …, `*`/`+` suffixes); `[]`:
    /// none at all (dropped).
    #[serde(default)]
    pub(crate) responses: Option<Vec<Spanned<String>>>,
    /// The PSN the first response carries, relative to `next` when the probe went
    /// out (a NAK PSN Sequence Error names the PSN the target expected: `"next"`).
    #[serde(default)]
    pub(crate) psn: Option<Spanned<PsnRef>>,
    /// The first response within this many ms of the probe.
    #[serde(default)]
    pub(crate) within_ms: Option<u64>,
    /// As for the other expectations: a device that answers otherwise is
    /// recorded (the probe's answer goes into the profile either way).
    #[serde(default)]
    pub(crate) record_deviation: Option<bool>,
}

/// `icrc_valid = true | false | "any"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum IcrcValid {
    Judged(bool),
    Any(AnyWord),
}

/// The word `"any"`, and nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[schemars(with = "String")]
pub(crate) struct AnyWord;

impl<'de> Deserialize<'de> for AnyWord {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<AnyWord, D::Error> {
        match String::deserialize(d)?.as_str() {
            "any" => Ok(AnyWord),
            other => Err(serde::de::Error::custom(format!(
                "`{other}`: icrc_valid is true, false or \"any\""
            ))),
        }
    }
}
