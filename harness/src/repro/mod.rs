//! A finding as a standalone C program: what an upstream kernel developer runs
//! without `roce` (syzkaller attaches a C reproducer to every report for the same
//! reason). The program uses only libibverbs and, for crafted requests, a raw IPv4
//! socket. One source serves both ends: `./repro a` waits for the other end on TCP
//! 18515, `./repro b HOST` connects to it; they exchange QPNs, GIDs, MR addresses
//! and rkeys, connect the QPs, then carry out the scenario's steps in order, each
//! end its own, meeting after every step (and learning the other's windows' rkeys
//! there, as the controller fills them in for the agents).
//!
//! A crafted request is the finding's own bytes: the transport packet (BTH to the
//! end of the payload) is built here exactly as the agent builds it
//! ([`crate::agent::probe::transport`]) at the PSN the agent would use; the program
//! writes in what only the run knows (the target's QPN, the VA and R_Key, the
//! prober's QPN in a DETH), puts IPv4 and UDP headers before it and the ICRC after.
//!
//! Owns: the C text ([`c_program`]) and the runtime it carries (`runtime.c`).
//! Imports: the checked scenario (`crate::scenario::model`), the protocol's actions,
//! the agent's probe builder, dissector's opcode table and craft.
use std::collections::BTreeMap;
use std::fmt::Write as _;

use dissector::craft::{self, Encap, Host};
use dissector::wire::ethernet::Mac;
use dissector::wire::{Headers, Opcode, Psn};

use crate::agent::probe::{self, Aim};
use crate::protocol::{Action, Invalidate, ProbeOrder, RemoteRef, SgeRef, Verb};
use crate::scenario::model::{QpType, Scenario, Step};
use crate::vocab::{Access, MwKind, QpStateName, SendFlag};

/// The runtime every reproducer carries; `@TABLES@` is where the finding's own
/// objects go (after the types, before the code that uses them).
const RUNTIME: &str = include_str!("runtime.c");

/// The C reproducer of `sc` (read from `source`, named in its header), or what in
/// it has no C form yet.
pub(crate) fn c_program(sc: &Scenario, source: &str) -> Result<String, String> {
    let g = Gen::new(sc)?;
    let mut steps = String::new();
    let mut next: BTreeMap<(usize, usize), Psn> = BTreeMap::new();
    for (n, step) in sc.steps.iter().enumerate() {
        g.step(n + 1, step, &mut next, &mut steps)?;
    }
    let (tables_head, tables) = g.tables();
    let (types, code) = RUNTIME
        .split_once("@TABLES@\n")
        .ok_or_else(|| "the runtime has no @TABLES@ line".to_string())?;
    let mut out = String::new();
    let _ = write!(out, "{}", g.header(source));
    out.push_str(&tables_head);
    out.push_str(types);
    out.push_str(&tables);
    out.push_str(code);
    let _ = write!(
        out,
        "\n/* ---- the finding's steps ---------------------------------------------------- */\n\nstatic void run_steps(void)\n{{\n{steps}}}\n"
    );
    Ok(out)
}

/// The scenario's objects by index, as the C tables list them.
struct Gen<'a> {
    sc: &'a Scenario,
    /// The two endpoints' names: the first waits for the second.
    ends: [&'a str; 2],
}

impl<'a> Gen<'a> {
    fn new(sc: &'a Scenario) -> Result<Gen<'a>, String> {
        let names: Vec<&str> = sc.endpoints.keys().map(String::as_str).collect();
        let [a, b] = names[..] else {
            return Err(format!(
                "it has {} endpoints: a reproducer is two processes, one per endpoint",
                names.len()
            ));
        };
        if let Some(q) = sc.qps.iter().find(|q| q.between[0] == q.between[1]) {
            return Err(format!("QP `{}` has both ends on `{}`", q.name, q.between[0]));
        }
        // Two names that are one C identifier (`w-1`, `w_1`) would be defined twice.
        let mut seen = std::collections::BTreeSet::new();
        let names = sc.qps.iter().map(|q| format!("QP_{}", ident(&q.name)));
        let names = names.chain(sc.mrs.iter().map(|m| c_name("MR", &m.on, &m.name)));
        let names = names.chain(sc.mws.iter().map(|w| c_name("MW", &w.on, &w.name)));
        let names = names.chain(sc.srqs.iter().map(|q| c_name("SRQ", &q.on, &q.name)));
        for n in names {
            if !seen.insert(n.clone()) {
                return Err(format!("two of its names are both `{n}` in C: rename one"));
            }
        }
        Ok(Gen { sc, ends: [a, b] })
    }

    fn end(&self, name: &str) -> usize {
        usize::from(self.ends[1] == name)
    }

    fn qp(&self, name: &str) -> Result<usize, String> {
        self.sc.qps.iter().position(|q| q.name == name).ok_or_else(|| format!("no QP `{name}`"))
    }

    /// End `end`'s MR `name`: its index and its C name (`MR_b_target`: names are
    /// an endpoint's own, and both ends may have an MR of one name).
    fn mr(&self, end: usize, name: &str) -> Result<(usize, String), String> {
        let on = self.ends[end];
        let i = self
            .sc
            .mrs
            .iter()
            .position(|m| m.name == name && m.on == on)
            .ok_or_else(|| format!("no MR `{name}` on `{on}`"))?;
        Ok((i, c_name("MR", on, name)))
    }

    /// End `end`'s shared receive queue `name`, as [`Gen::mr`].
    fn srq(&self, end: usize, name: &str) -> Result<(usize, String), String> {
        let on = self.ends[end];
        let i = self
            .sc
            .srqs
            .iter()
            .position(|q| q.name == name && q.on == on)
            .ok_or_else(|| format!("no SRQ `{name}` on `{on}`"))?;
        Ok((i, c_name("SRQ", on, name)))
    }

    /// End `end`'s memory window `name`, as [`Gen::mr`].
    fn mw(&self, end: usize, name: &str) -> Result<(usize, String), String> {
        let on = self.ends[end];
        let i = self
            .sc
            .mws
            .iter()
            .position(|m| m.name == name && m.on == on)
            .ok_or_else(|| format!("no memory window `{name}` on `{on}`"))?;
        Ok((i, c_name("MW", on, name)))
    }

    /// The first send PSN of `qp`'s end `end`: the scenario's, or a fixed one (the
    /// agent draws one at random; a reproducer is the same on every run).
    fn first_psn(&self, qp: usize, end: usize) -> Psn {
        let q = &self.sc.qps[qp];
        q.psn
            .get(self.ends[end])
            .copied()
            .unwrap_or(Psn::new(0x10_0000 * (end as u32 + 1) + qp as u32 * 0x100))
    }

    fn header(&self, source: &str) -> String {
        let mut h = String::new();
        let _ = writeln!(h, "/*");
        let _ = writeln!(h, " * Reproducer of: {}", comment(&self.sc.name));
        let _ = writeln!(
            h,
            " * Written by `roce repro {}`: edit the scenario, not this file.",
            comment(source)
        );
        let _ = writeln!(h, " *");
        let _ = writeln!(h, " * Build:  cc -O2 -o repro repro.c -libverbs");
        let _ = writeln!(
            h,
            " * Run:    ./repro {} on one host (as root: crafted packets need a raw socket),",
            self.ends[0]
        );
        let _ = writeln!(
            h,
            " *         then ./repro {} HOST on the other, HOST being the first's address.",
            self.ends[1]
        );
        let _ = writeln!(h, " * Each host needs an RDMA device with a RoCE v2 GID (rxe: `rdma link add rxe0 type rxe netdev IF`).");
        let what = self.expected();
        if !what.is_empty() {
            let _ =
                writeln!(h, " *\n * What IBA says should happen (the scenario's expectations):");
            for w in what {
                let _ = writeln!(h, " *   {}", comment(&w));
            }
        }
        let _ = writeln!(h, " */\n");
        h
    }

    /// The completions and async events the scenario expects, as lines for the
    /// header (a deviation the device is known for says so).
    fn expected(&self) -> Vec<String> {
        let e = &self.sc.expect;
        let completions = e.completion.iter().filter_map(|c| {
            let status = c.status?;
            let wr = c.wr_id.map_or_else(|| "a completion".to_string(), |w| format!("wr_id {w}"));
            Some(format!("{}: {wr} completes with {status}", c.on))
        });
        let events = e.event.iter().map(|v| {
            let of = match (&v.qp, &v.srq) {
                (Some(q), _) => format!(" of QP {q}"),
                (None, Some(q)) => format!(" of SRQ {q}"),
                (None, None) => String::new(),
            };
            let known =
                if v.record_deviation { " (a deviation devices are known for)" } else { "" };
            format!("{}: the async event {}{of}{known}", v.on, v.kind)
        });
        completions.chain(events).collect()
    }

    /// The defines (before the runtime's types) and the tables (after them).
    fn tables(&self) -> (String, String) {
        let sc = self.sc;
        let mut head = String::new();
        let _ = writeln!(
            head,
            "#define NQP {}\n#define NMR {}\n#define NMW {}\n#define NSRQ {}",
            sc.qps.len(),
            sc.mrs.len(),
            sc.mws.len(),
            sc.srqs.len()
        );
        // How long one end waits for the other at a step's end: the longest a
        // step waits, and ten seconds more. An end that takes longer is gone.
        let longest_ms = sc
            .steps
            .iter()
            .map(|s| match s {
                Step::Sleep { ms } => *ms,
                Step::Act { action: Action::WaitCompletions { within_ms: ms, .. }, .. }
                | Step::Act { action: Action::Sleep { ms }, .. } => *ms,
                Step::Act { action: Action::Probe(p), .. } => p.settle_ms,
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        let _ = writeln!(head, "#define BARRIER_S {}", longest_ms.div_ceil(1000) + 10);
        let _ = writeln!(
            head,
            "static const char *const END[2] = {{ \"{}\", \"{}\" }};",
            c_str(self.ends[0]),
            c_str(self.ends[1])
        );
        // Each end's device, port and GID index as the scenario gives them
        // (ROCE_DEVICE and ROCE_GID_INDEX override).
        let ep = |e: usize| sc.endpoints.get(self.ends[e]);
        let device = |e: usize| {
            ep(e)
                .and_then(|p| p.device.as_deref())
                .map_or("0".into(), |d| format!("\"{}\"", c_str(d)))
        };
        let port = |e: usize| ep(e).and_then(|p| p.port).unwrap_or(1);
        let gid = |e: usize| ep(e).and_then(|p| p.gid_index).map_or(-1, i32::from);
        let _ = writeln!(
            head,
            "static const char *const DEVICE[2] = {{ {}, {} }};",
            device(0),
            device(1)
        );
        let _ =
            writeln!(head, "static const unsigned char PORT[2] = {{ {}, {} }};", port(0), port(1));
        let _ = writeln!(head, "static const int GID_INDEX[2] = {{ {}, {} }};\n", gid(0), gid(1));
        let mut t = String::new();
        let _ = writeln!(t, "\n/* ---- the finding's objects --------------------------------------------------- */\n");
        for (i, q) in sc.qps.iter().enumerate() {
            let _ = writeln!(t, "#define QP_{} {i}", ident(&q.name));
        }
        for (i, m) in sc.mrs.iter().enumerate() {
            let _ = writeln!(t, "#define {} {i}", c_name("MR", &m.on, &m.name));
        }
        for (i, w) in sc.mws.iter().enumerate() {
            let _ = writeln!(t, "#define {} {i}", c_name("MW", &w.on, &w.name));
        }
        for (i, q) in sc.srqs.iter().enumerate() {
            let _ = writeln!(t, "#define {} {i}", c_name("SRQ", &q.on, &q.name));
        }
        for m in &sc.mrs {
            if let Some((bytes, _)) = init_of(&m.initial_bytes()) {
                let _ = writeln!(
                    t,
                    "static const uint8_t {}[{}] = {{{}}};",
                    c_name("INIT", &m.on, &m.name),
                    bytes.len(),
                    c_bytes(bytes)
                );
            }
        }
        let _ = writeln!(t, "static const struct qp_spec QPS[] = {{");
        for (i, q) in sc.qps.iter().enumerate() {
            let kind = match q.kind {
                QpType::Rc => "IBV_QPT_RC",
                QpType::Uc => "IBV_QPT_UC",
                QpType::Ud => "IBV_QPT_UD",
            };
            let access =
                |e: usize| q.access.get(self.ends[e]).map_or("0".to_string(), |a| access_c(*a));
            let p = &q.params;
            // The SRQ of one end, where the QP takes its receives from it.
            let srq_of = |e: usize| {
                q.srq
                    .as_deref()
                    .and_then(|n| self.srq(e, n).ok())
                    .map_or("-1".to_string(), |(_, c)| c)
            };
            let _ = writeln!(
                t,
                "\t{{ .name = \"{}\", .type = {kind}, .psn = {{ {}, {} }}, .access = {{ {}, {} }},\n\t  .mtu = {}, .timeout = {}, .retry_cnt = {}, .rnr_retry = {}, .min_rnr_timer = {},\n\t  .max_rd_atomic = {}, .max_dest_rd_atomic = {}, .qkey = {:#x}, .max_send_wr = {}, .max_recv_wr = {},\n\t  .max_sge = {}, .max_inline = {}, .srq = {{ {}, {} }} }},",
                c_str(&q.name),
                self.first_psn(i, 0).value(),
                self.first_psn(i, 1).value(),
                access(0),
                access(1),
                mtu_c(p.mtu),
                p.timeout,
                p.retry_cnt,
                p.rnr_retry,
                p.min_rnr_timer,
                p.max_rd_atomic,
                p.max_dest_rd_atomic,
                p.qkey,
                q.max_send_wr,
                q.max_recv_wr,
                q.max_sge,
                q.max_inline,
                srq_of(0),
                srq_of(1)
            );
        }
        let _ = writeln!(t, "}};\nstatic const struct mr_spec MRS[] = {{");
        for m in &sc.mrs {
            let init = match init_of(&m.initial_bytes()) {
                Some((b, repeat)) => {
                    format!("{}, {}, {}", c_name("INIT", &m.on, &m.name), b.len(), u8::from(repeat))
                }
                None => "NULL, 0, 0".into(),
            };
            let _ = writeln!(
                t,
                "\t{{ \"{}\", {}, {}, {}, {init} }},",
                c_str(&m.name),
                self.end(&m.on),
                m.size,
                access_c(m.access)
            );
        }
        let _ = writeln!(t, "}};\nstatic const struct srq_spec SRQS[] = {{");
        for q in &sc.srqs {
            let _ = writeln!(
                t,
                "\t{{ \"{}\", {}, {}, {} }},",
                c_str(&q.name),
                self.end(&q.on),
                q.max_wr,
                q.max_sge
            );
        }
        if sc.srqs.is_empty() {
            let _ = writeln!(t, "\t{{ 0 }},");
        }
        let _ = writeln!(t, "}};\nstatic const struct mw_spec MWS[] = {{");
        for w in &sc.mws {
            let kind = match w.kind {
                MwKind::Type1 => "IBV_MW_TYPE_1",
                MwKind::Type2 => "IBV_MW_TYPE_2",
            };
            let _ = writeln!(t, "\t{{ \"{}\", {}, {kind} }},", c_str(&w.name), self.end(&w.on));
        }
        if sc.mws.is_empty() {
            let _ = writeln!(t, "\t{{ 0 }},");
        }
        let _ = writeln!(t, "}};\n");
        (head, t)
    }

    /// One step's C, appended to `out`; `next` is each (end, QP)'s probe PSN.
    fn step(
        &self,
        n: usize,
        step: &Step,
        next: &mut BTreeMap<(usize, usize), Psn>,
        out: &mut String,
    ) -> Result<(), String> {
        let at = |e: String| format!("step {n}: {e}");
        match step {
            Step::Sync => {}
            Step::Sleep { ms } => {
                let _ = writeln!(out, "\t/* step {n}: both ends wait */\n\tusleep({ms} * 1000);");
            }
            Step::Stream(_) => return Err(at("a stream has no C form yet".into())),
            Step::Act { on, action } => {
                let end = self.end(on);
                let body = self.action(action, end, next).map_err(at)?;
                let _ = writeln!(out, "\t/* step {n}: {}: {} */", comment(on), action.op());
                let _ = writeln!(out, "\tif (me == {end}) {{");
                for l in body.lines() {
                    let _ = writeln!(out, "\t\t{l}");
                }
                let _ = writeln!(out, "\t}}");
            }
        }
        let _ = writeln!(out, "\tbarrier({n});\n");
        Ok(())
    }

    fn action(
        &self,
        action: &Action,
        end: usize,
        next: &mut BTreeMap<(usize, usize), Psn>,
    ) -> Result<String, String> {
        let mut c = String::new();
        match action {
            Action::PostRecv { qp, wr_id, sges } => {
                let q = self.qp(qp)?;
                let _ = writeln!(c, "struct ibv_sge sge[] = {{ {} }};", self.sges(end, sges)?);
                let _ = writeln!(
                    c,
                    "post_recv(QP_{}, {wr_id}, sge, {});",
                    ident(&self.sc.qps[q].name),
                    sges.len()
                );
            }
            Action::Post { qp, wr_id, verb, sges, flags } => {
                self.qp(qp)?;
                c.push_str(&self.post(end, qp, *wr_id, verb, sges, flags)?);
            }
            Action::WaitCompletions { count, within_ms } => {
                let _ = writeln!(c, "wait_completions({count}, {within_ms});");
            }
            Action::Sleep { ms } => {
                let _ = writeln!(c, "usleep({ms} * 1000);");
            }
            Action::Probe(order) => c.push_str(&self.probe(order, end, next)?),
            Action::ModifyQp { qp, state, state_only, access } => {
                self.qp(qp)?;
                // A state whose transition needs no attribute but the state.
                let bare = [QpStateName::RESET, QpStateName::SQD, QpStateName(5), QpStateName(6)];
                if !state_only && !bare.contains(state) {
                    if access.is_some() {
                        return Err(format!(
                            "`modify_qp` to {state} with new access flags has no C form yet"
                        ));
                    }
                    let _ = writeln!(c, "modify_to(QP_{}, {state});", ident(qp));
                } else {
                    let access = access.map_or("-1".to_string(), access_c);
                    let _ = writeln!(c, "modify_state(QP_{}, {state}, {access});", ident(qp));
                }
            }
            Action::PostSrqRecv { srq, wr_id, sges } => {
                let (_, q) = self.srq(end, srq)?;
                let _ = writeln!(c, "struct ibv_sge sge[] = {{ {} }};", self.sges(end, sges)?);
                let _ = writeln!(c, "post_srq_recv({q}, {wr_id}, sge, {});", sges.len());
            }
            Action::ArmSrq { srq, limit } => {
                let (_, q) = self.srq(end, srq)?;
                let _ = writeln!(c, "arm_srq({q}, {limit});");
            }
            Action::QueryQp { qp } => {
                self.qp(qp)?;
                let _ = writeln!(c, "query_state(QP_{});", ident(qp));
            }
            Action::ResizeCq { cqe } => {
                let _ = writeln!(
                    c,
                    "if (ibv_resize_cq(cq, {cqe}))\n\tsay(\"ibv_resize_cq to {cqe} refused\");"
                );
            }
            Action::ReregMr { mr, access } => {
                let (_, m) = self.mr(end, mr)?;
                let _ = writeln!(
                    c,
                    "if (ibv_rereg_mr(mr[{m}], IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, {}))\n\tsay(\"ibv_rereg_mr of {mr} refused\");",
                    access_c(*access)
                );
            }
            Action::DeregMr { mr } => {
                let (_, m) = self.mr(end, mr)?;
                let _ = writeln!(
                    c,
                    "if (ibv_dereg_mr(mr[{m}]))\n\tsay(\"ibv_dereg_mr of {mr} refused\");"
                );
            }
            Action::DeallocMw { mw } => {
                let (_, w) = self.mw(end, mw)?;
                let _ = writeln!(
                    c,
                    "if (ibv_dealloc_mw(mw[{w}]))\n\tsay(\"ibv_dealloc_mw of {mw} refused\");"
                );
            }
            other => return Err(format!("`{}` has no C form yet", other.op())),
        }
        Ok(c)
    }

    /// End `end`'s SGEs as C expressions.
    fn sges(&self, end: usize, sges: &[SgeRef]) -> Result<String, String> {
        let mut v = Vec::new();
        for s in sges {
            let (_, m) = self.mr(end, &s.mr)?;
            v.push(format!("sge_of({m}, {}, {})", s.offset, s.len));
        }
        Ok(v.join(", "))
    }

    /// The VA and rkey of a remote reference of end `end` (to its peer's MR or
    /// window), as C expressions.
    fn remote(&self, end: usize, r: &RemoteRef) -> Result<(String, String), String> {
        let (_, m) = self.mr(1 - end, &r.mr)?;
        let va = format!("remote_va({m}, {})", r.offset);
        let rkey = match (&r.rkey, &r.mw) {
            (Some(k), _) => format!("{k:#x}"),
            (None, Some(w)) => format!("mw_rkey[{}]", self.mw(1 - end, w)?.1),
            (None, None) => format!("theirs.mr_rkey[{m}]"),
        };
        Ok((va, rkey))
    }

    fn post(
        &self,
        end: usize,
        qp: &str,
        wr_id: u64,
        verb: &Verb,
        sges: &[SgeRef],
        flags: &[SendFlag],
    ) -> Result<String, String> {
        let mut c = String::new();
        if let Verb::BindMw { mw, mr, offset, len, access } = verb {
            let (w, wname) = self.mw(end, mw)?;
            let (_, m) = self.mr(end, mr)?;
            let f = if self.sc.mws[w].kind == MwKind::Type1 { "bind_type1" } else { "bind_type2" };
            let _ = writeln!(
                c,
                "{f}(QP_{}, {wname}, {m}, {offset}, {len}, {}, {wr_id});",
                ident(qp),
                access_c(*access)
            );
            return Ok(c);
        }
        let mut fields = vec![format!(".wr_id = {wr_id}")];
        if !sges.is_empty() {
            let _ = writeln!(c, "struct ibv_sge sge[] = {{ {} }};", self.sges(end, sges)?);
            fields.push(format!(".sg_list = sge, .num_sge = {}", sges.len()));
        }
        let mut send_flags: Vec<&str> = Vec::new();
        if !flags.contains(&SendFlag::Unsignaled) {
            send_flags.push("IBV_SEND_SIGNALED");
        }
        for f in flags {
            match f {
                SendFlag::Inline => send_flags.push("IBV_SEND_INLINE"),
                SendFlag::Solicited => send_flags.push("IBV_SEND_SOLICITED"),
                SendFlag::Fence => send_flags.push("IBV_SEND_FENCE"),
                SendFlag::Signaled | SendFlag::Unsignaled => {}
            }
        }
        if !send_flags.is_empty() {
            fields.push(format!(".send_flags = {}", send_flags.join(" | ")));
        }
        let q = &self.sc.qps[self.qp(qp)?];
        let opcode = match verb {
            Verb::Send { imm, qkey } => {
                if q.kind == QpType::Ud {
                    let qkey =
                        qkey.map_or(format!("QPS[QP_{}].qkey", ident(qp)), |k| format!("{k:#x}"));
                    fields.push(format!(
                        ".wr.ud = {{ .ah = ud_ah(QP_{0}), .remote_qpn = theirs.qpn[QP_{0}], .remote_qkey = {qkey} }}",
                        ident(qp)
                    ));
                }
                if let Some(i) = imm {
                    fields.push(format!(".imm_data = htonl({i:#x})"));
                    "IBV_WR_SEND_WITH_IMM"
                } else {
                    "IBV_WR_SEND"
                }
            }
            Verb::Write { remote, imm } => {
                let (va, rkey) = self.remote(end, remote)?;
                fields.push(format!(".wr.rdma = {{ .remote_addr = {va}, .rkey = {rkey} }}"));
                if let Some(i) = imm {
                    fields.push(format!(".imm_data = htonl({i:#x})"));
                    "IBV_WR_RDMA_WRITE_WITH_IMM"
                } else {
                    "IBV_WR_RDMA_WRITE"
                }
            }
            Verb::Read { remote } => {
                let (va, rkey) = self.remote(end, remote)?;
                fields.push(format!(".wr.rdma = {{ .remote_addr = {va}, .rkey = {rkey} }}"));
                "IBV_WR_RDMA_READ"
            }
            Verb::CmpSwap { remote, compare, swap } => {
                let (va, rkey) = self.remote(end, remote)?;
                fields.push(format!(".wr.atomic = {{ .remote_addr = {va}, .rkey = {rkey}, .compare_add = {compare:#x}, .swap = {swap:#x} }}"));
                "IBV_WR_ATOMIC_CMP_AND_SWP"
            }
            Verb::FetchAdd { remote, add } => {
                let (va, rkey) = self.remote(end, remote)?;
                fields.push(format!(".wr.atomic = {{ .remote_addr = {va}, .rkey = {rkey}, .compare_add = {add:#x} }}"));
                "IBV_WR_ATOMIC_FETCH_AND_ADD"
            }
            Verb::SendInv { invalidate } => {
                let rkey = match invalidate {
                    Invalidate::Rkey(k) => format!("{k:#x}"),
                    Invalidate::Mw { mw, .. } => format!("mw_rkey[{}]", self.mw(1 - end, mw)?.1),
                };
                fields.push(format!(".invalidate_rkey = {rkey}"));
                "IBV_WR_SEND_WITH_INV"
            }
            Verb::LocalInv { mw } => {
                fields.push(format!(".invalidate_rkey = mw_rkey[{}]", self.mw(end, mw)?.1));
                "IBV_WR_LOCAL_INV"
            }
            Verb::AtomicWrite { .. } | Verb::Flush { .. } => {
                return Err(
                    "ATOMIC WRITE and FLUSH have no C form yet (rdma-core 44 has neither)".into()
                )
            }
            Verb::BindMw { .. } => unreachable!("handled above"),
        };
        fields.insert(1, format!(".opcode = {opcode}"));
        let _ = writeln!(c, "struct ibv_send_wr wr = {{ {} }};", fields.join(",\n\t"));
        let _ = writeln!(c, "post_send(QP_{}, &wr);", ident(qp));
        Ok(c)
    }

    /// A crafted request: the agent's own bytes, with what only the run knows
    /// written in by the program.
    fn probe(
        &self,
        order: &ProbeOrder,
        end: usize,
        next: &mut BTreeMap<(usize, usize), Psn>,
    ) -> Result<String, String> {
        let q = self.qp(&order.qp)?;
        let at = *next.entry((end, q)).or_insert_with(|| self.first_psn(q, end));
        let aim =
            Aim { dest_qp: 0, src_qp: 0, next: at, remote: order.remote.as_ref().map(|_| (0, 0)) };
        let (t, _) = probe::transport(order, &aim)?;
        next.insert((end, q), probe::advance(order, at));
        // The transport packet as the agent sends it: the frame less Ethernet,
        // IPv4 and UDP before it and the ICRC after.
        let host = |last| Host {
            mac: Mac([2, 0, 0, 0, 0, last]),
            ip: std::net::Ipv4Addr::new(10, 0, 0, last).into(),
        };
        let frame = craft::build(&Encap::default(), &host(1), &host(2), &t);
        const BEFORE: usize = 14 + 20 + 8;
        let ib = frame
            .get(BEFORE..frame.len().saturating_sub(4))
            .ok_or("the probe's frame is too short")?;
        let op = Opcode(order.opcode);
        let headers = op.info().map_or(Headers::PAYLOAD, |i| i.headers);
        let mut off = 12usize;
        let mut place = BTreeMap::new();
        for (h, size) in Headers::ORDER {
            if headers.contains(h) {
                place.insert(h.name(), off);
                off += size;
            }
        }
        let at_of = |h: Headers| place.get(h.name()).map_or(-1, |&o| o as i64);
        let (va_at, rkey_at) = match (at_of(Headers::RETH), at_of(Headers::ATOMICETH)) {
            (r, _) if r >= 0 => (r, r + 8),
            (_, a) if a >= 0 => (a, a + 8),
            _ => (-1, -1),
        };
        let (remote_mr, remote_mw, remote_offset, rkey) = match &order.remote {
            Some(r) => {
                let (_, m) = self.mr(1 - end, &r.mr)?;
                let w = r.mw.as_deref().map(|w| self.mw(1 - end, w)).transpose()?;
                (m, w.map_or("-1".to_string(), |w| w.1), r.offset, r.rkey.map_or(-1, i64::from))
            }
            None => ("-1".to_string(), "-1".to_string(), 0, -1),
        };
        let mut c = String::new();
        let _ = writeln!(
            c,
            "/* probe {}: {op}, PSN {} ({} from {}) */",
            comment(&order.id),
            t.bth.psn.value(),
            order.psn,
            at.value()
        );
        let _ = writeln!(c, "static const uint8_t pkt[{}] = {{{}}};", ib.len(), c_bytes(ib));
        let _ = writeln!(
            c,
            "const struct probe p = {{ .qp = QP_{}, .bytes = pkt, .len = sizeof pkt, .patch_dest_qp = {},\n\t.deth_at = {}, .va_at = {va_at}, .rkey_at = {rkey_at}, .ieth_at = {},\n\t.remote_mr = {remote_mr}, .remote_mw = {remote_mw}, .remote_offset = {remote_offset}, .rkey = {rkey},\n\t.udp_src_port = {}, .copies = {}, .bad_icrc = {}, .settle_ms = {} }};",
            ident(&order.qp),
            u8::from(order.dest_qp.is_none()),
            at_of(Headers::DETH),
            at_of(Headers::IETH),
            order.udp_src_port.map_or(-1, i32::from),
            order.copies.max(1),
            u8::from(order.bad_icrc),
            order.settle_ms
        );
        let _ = writeln!(c, "send_probe(&p);");
        Ok(c)
    }
}

/// An MR's first content as the program writes it: the bytes to copy, and
/// whether they repeat over the whole MR (a pattern: its period, at most 64
/// bytes) or stand once at its start (the zeros after them left to calloc).
/// `None`: all zeros.
fn init_of(bytes: &[u8]) -> Option<(&[u8], bool)> {
    let end = bytes.iter().rposition(|&b| b != 0)? + 1;
    let period = (1..=64.min(bytes.len()))
        .find(|&p| bytes.iter().enumerate().all(|(i, &b)| b == bytes[i % p]));
    Some(match period {
        Some(p) if p < end => (&bytes[..p], true),
        _ => (&bytes[..end], false),
    })
}

/// The C name of endpoint `on`'s object `name` of a kind (`MR_b_target`):
/// names are an endpoint's own, and both ends may have one of a name.
fn c_name(kind: &str, on: &str, name: &str) -> String {
    format!("{kind}_{}_{}", ident(on), ident(name))
}

/// A scenario name as a C identifier part (names are `[A-Za-z0-9_-]`).
fn ident(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

/// Text of the scenario inside a C comment: nothing in it ends the comment or
/// opens another (which `-Wcomment` warns of).
fn comment(s: &str) -> String {
    s.replace("*/", "* /").replace("/*", "/ *")
}

/// A name inside a C string literal.
fn c_str(s: &str) -> String {
    s.chars().filter(|c| c.is_ascii_graphic() && *c != '"' && *c != '\\' || *c == ' ').collect()
}

/// Bytes as a C initialiser, 12 to a line.
fn c_bytes(b: &[u8]) -> String {
    let mut s = String::new();
    for (i, x) in b.iter().enumerate() {
        if i % 12 == 0 {
            s.push_str("\n\t");
        } else {
            s.push(' ');
        }
        let _ = write!(s, "{x:#04x},");
    }
    s.push('\n');
    s
}

/// Access flags as libibverbs' names (a flag its headers may lack, by value).
fn access_c(a: Access) -> String {
    let mut v = Vec::new();
    for &(bit, name) in Access::FLAGS {
        if a.0 & bit != 0 {
            if bit < 1 << 8 {
                v.push(format!("IBV_ACCESS_{}", name.to_ascii_uppercase()));
            } else {
                v.push(format!("{bit:#x} /* {name} */"));
            }
        }
    }
    if v.is_empty() {
        "0".into()
    } else {
        v.join(" | ")
    }
}

/// A path MTU in bytes as `enum ibv_mtu`.
fn mtu_c(bytes: u32) -> &'static str {
    match bytes {
        256 => "IBV_MTU_256",
        512 => "IBV_MTU_512",
        2048 => "IBV_MTU_2048",
        4096 => "IBV_MTU_4096",
        _ => "IBV_MTU_1024",
    }
}

#[cfg(test)]
mod tests;
