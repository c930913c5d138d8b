//! A checked scenario, resolved into what each agent is told: its own setup, its
//! steps as actions, and the fault rules the lab's switch applies. Names of QPs and
//! MRs stay names (each agent knows its own); everything else becomes concrete.
//!
//! Owns: the translation from [`Scenario`] to the protocol's `Setup` and `Action`s, and
//! to the lab's fault [`Rule`]s. Imports: the scenario model, the agent protocol
//! (`crate::protocol`), the results' endpoint facts, the verbs' QP kinds and caps, the
//! lab's fault rules and VMs.
use std::collections::BTreeMap;

use lab::fault::{self, Dir, Rule};
use lab::state::Vm;

use crate::protocol::{
    self, Action, AgentVerb, BthBits, ConnectBy, Fill, Hex, MrSetup, MwSetup, ProbeOrder, ProbePsn,
    QpSetup, RemoteRef, SgeRef, SrqSetup,
};
use crate::protocol::{ReceiveOrder, StreamOrder};
use crate::results::EndpointFacts;
use crate::scenario::model::{self, ConnectMethod, Content, PsnAt, QpType, Scenario, Step};
use crate::verbs::{Caps, QpKind};

/// The lab VM an endpoint runs in: `vm`, else its name.
pub(super) fn endpoint_vm(sc: &Scenario, endpoint: &str) -> Result<Vm, String> {
    let vm = sc
        .endpoints
        .get(endpoint)
        .and_then(|e| e.vm.clone())
        .unwrap_or_else(|| endpoint.to_string());
    Vm::parse(&vm).ok_or_else(|| format!("endpoint `{endpoint}` runs on `{vm}`, which is not a lab VM (a or b)\nhint: set `vm = \"a\"` or `vm = \"b\"` in [endpoints.{endpoint}]"))
}

fn qp_kind(t: QpType) -> QpKind {
    match t {
        QpType::Rc => QpKind::Rc,
        QpType::Uc => QpKind::Uc,
        QpType::Ud => QpKind::Ud,
    }
}

/// What an MR holds when registered: a pattern's unit repeated over it, other
/// content at its start (checked: it fits).
fn fill(c: &Option<Content>) -> Fill {
    match c {
        None => Fill::Zero,
        Some(Content::Pattern(p)) => {
            Fill::Repeat(Hex(dissector::text::hex_bytes(p).unwrap_or_default()))
        }
        Some(other) => Fill::Bytes(Hex(other.bytes(0))),
    }
}

/// The rkeys of the endpoints' memory windows as the run has learned them (from
/// setup, then each bind): by endpoint and window.
pub(super) type MwKeys = BTreeMap<(String, String), u32>;

/// Whether `endpoint` posts a verb that `pick` selects on QP `qp`.
fn posts(sc: &Scenario, endpoint: &str, qp: &str, pick: impl Fn(&model::Verb) -> bool) -> bool {
    sc.steps.iter().any(|s| matches!(s, Step::Post { on, qp: q, verb, .. } if on == endpoint && q == qp && pick(verb)))
}

/// What endpoint `name` sets up: its QPs (those it is an end of; made with the
/// extended send operations it posts on them), MRs, SRQs and memory windows.
pub(super) fn setup(sc: &Scenario, name: &str) -> protocol::Setup {
    let ep = sc.endpoints.get(name).cloned().unwrap_or_default();
    let qps = sc
        .qps
        .iter()
        .filter(|q| q.between.iter().any(|e| e == name))
        .map(|q| QpSetup {
            name: q.name.clone(),
            kind: qp_kind(q.kind),
            caps: Caps {
                max_send_wr: q.max_send_wr,
                max_recv_wr: q.max_recv_wr,
                max_sge: q.max_sge,
                max_inline: q.max_inline,
            },
            psn: q.psn.get(name).map(|p| p.value()),
            params: q.params,
            access: q.access.get(name).copied().unwrap_or(crate::verbs::Access::REMOTE_ALL),
            connect: match q.connect {
                ConnectMethod::Tcp => ConnectBy::Tcp,
                ConnectMethod::RdmaCm => ConnectBy::RdmaCm,
            },
            atomic_write: posts(sc, name, &q.name, |v| {
                matches!(v, model::Verb::AtomicWrite { .. })
            }),
            flush: posts(sc, name, &q.name, |v| matches!(v, model::Verb::Flush { .. })),
            srq: q.srq.clone().filter(|n| sc.srqs.iter().any(|x| &x.name == n && x.on == name)),
        })
        .collect();
    let mrs = sc
        .mrs
        .iter()
        .filter(|m| m.on == name)
        .map(|m| MrSetup {
            name: m.name.clone(),
            size: m.size,
            access: m.access,
            fill: fill(&m.init),
        })
        .collect();
    let srqs = sc
        .srqs
        .iter()
        .filter(|q| q.on == name)
        .map(|q| SrqSetup { name: q.name.clone(), max_wr: q.max_wr, max_sge: q.max_sge })
        .collect();
    let mws = sc
        .mws
        .iter()
        .filter(|w| w.on == name)
        .map(|w| MwSetup { name: w.name.clone(), kind: w.kind })
        .collect();
    protocol::Setup {
        device: ep.device,
        port: ep.port.unwrap_or(1),
        gid_index: ep.gid_index,
        qps,
        mrs,
        srqs,
        mws,
    }
}

fn sges(v: &[model::Sge]) -> Vec<SgeRef> {
    v.iter().map(|g| SgeRef { mr: g.mr.clone(), offset: g.offset, len: g.len }).collect()
}

/// The rkey of `peer`'s window `mw` as last learned.
fn mw_rkey(keys: &MwKeys, peer: &str, mw: &str) -> Result<u32, String> {
    keys.get(&(peer.to_string(), mw.to_string())).copied().ok_or_else(|| format!("the rkey of memory window `{mw}` on {peer} is not known (its endpoint did not report it)"))
}

/// A remote end on `peer`: through a window, the window's current rkey (unless
/// the scenario overrides it).
fn remote(r: &model::Remote, peer: &str, keys: &MwKeys) -> Result<RemoteRef, String> {
    let rkey = match (&r.mw, r.rkey) {
        (Some(w), None) => Some(mw_rkey(keys, peer, w)?),
        (_, k) => k,
    };
    Ok(RemoteRef { mr: r.mr.clone(), offset: r.offset, rkey })
}

/// A step as an action of its endpoint's agent: `None` for what the controller
/// does itself (`sync`, `sleep`). Windows' rkeys come from `keys`.
pub(super) fn action(
    sc: &Scenario,
    step: &Step,
    keys: &MwKeys,
) -> Result<Option<(String, Action)>, String> {
    let Some(on) = step.on() else { return Ok(None) };
    let on = on.to_string();
    let a = match step {
        Step::PostRecv { qp, wr_id, sge, .. } => {
            Action::PostRecv { qp: qp.clone(), wr_id: *wr_id, sges: sges(sge) }
        }
        Step::Post { qp, wr_id, sge, flags, verb, .. } => {
            let peer = sc
                .qps
                .iter()
                .find(|q| &q.name == qp)
                .map(|q| q.peer_of(&on).to_string())
                .unwrap_or_default();
            let rm = |r: &model::Remote| remote(r, &peer, keys);
            let verb = match verb {
                model::Verb::Send { qkey } => AgentVerb::Send { imm: None, qkey: *qkey },
                model::Verb::SendImm { imm, qkey } => {
                    AgentVerb::Send { imm: Some(*imm), qkey: *qkey }
                }
                model::Verb::Write { remote: r } => AgentVerb::Write { remote: rm(r)?, imm: None },
                model::Verb::WriteImm { remote: r, imm } => {
                    AgentVerb::Write { remote: rm(r)?, imm: Some(*imm) }
                }
                model::Verb::Read { remote: r } => AgentVerb::Read { remote: rm(r)? },
                model::Verb::CmpSwap { remote: r, compare, swap } => {
                    AgentVerb::CmpSwap { remote: rm(r)?, compare: *compare, swap: *swap }
                }
                model::Verb::FetchAdd { remote: r, add } => {
                    AgentVerb::FetchAdd { remote: rm(r)?, add: *add }
                }
                model::Verb::AtomicWrite { remote: r, value } => {
                    AgentVerb::AtomicWrite { remote: rm(r)?, value: Hex(value.to_vec()) }
                }
                model::Verb::Flush { remote: r, len, placement, level } => AgentVerb::Flush {
                    remote: rm(r)?,
                    len: *len,
                    placement: *placement,
                    level: *level,
                },
                model::Verb::SendInv { invalidate } => AgentVerb::SendInv {
                    rkey: match invalidate {
                        model::Invalidate::Mw(w) => mw_rkey(keys, &peer, w)?,
                        model::Invalidate::Rkey(k) => *k,
                    },
                },
                model::Verb::LocalInv { mw } => AgentVerb::LocalInv { mw: mw.clone() },
                model::Verb::BindMw { mw, mr, offset, len, access } => AgentVerb::BindMw {
                    mw: mw.clone(),
                    mr: mr.clone(),
                    offset: *offset,
                    len: *len,
                    access: *access,
                },
            };
            Action::Post {
                qp: qp.clone(),
                wr_id: *wr_id,
                verb,
                sges: sges(sge),
                flags: flags.clone(),
            }
        }
        Step::PostSrqRecv { srq, wr_id, sge, .. } => {
            Action::PostSrqRecv { srq: srq.clone(), wr_id: *wr_id, sges: sges(sge) }
        }
        Step::ArmSrq { srq, limit, .. } => Action::ArmSrq { srq: srq.clone(), limit: *limit },
        Step::ModifyQp { qp, state, state_only, access, .. } => Action::ModifyQp {
            qp: qp.clone(),
            state: *state,
            state_only: *state_only,
            access: *access,
        },
        Step::QueryQp { qp, .. } => Action::QueryQp { qp: qp.clone() },
        Step::DeregMr { mr, .. } => Action::DeregMr { mr: mr.clone() },
        Step::ReregMr { mr, access, .. } => Action::ReregMr { mr: mr.clone(), access: *access },
        Step::DeallocMw { mw, .. } => Action::DeallocMw { mw: mw.clone() },
        Step::ArmCq { solicited_only, .. } => Action::ArmCq { solicited_only: *solicited_only },
        Step::AwaitNotify { within_ms, .. } => Action::AwaitNotify { within_ms: *within_ms },
        Step::Stream(st) => Action::Stream(StreamOrder {
            id: st.id.clone(),
            qps: st.qps.clone(),
            verb: st.verb,
            content: st.content,
            window: st.window,
            signal_every: st.signal_every,
            local_mr: st.local_mr.clone(),
            local_offset: st.local_offset,
            remote: st.remote.as_ref().map(|r| remote(r, &st.peer, keys)).transpose()?,
            within_ms: st.within_ms,
        }),
        Step::WaitCompletions { count, within_ms, .. } => {
            Action::WaitCompletions { count: *count, within_ms: *within_ms }
        }
        Step::Probe { qp, probe: p, .. } => Action::Probe(ProbeOrder {
            id: p.id.clone(),
            qp: qp.clone(),
            opcode: p.opcode.0,
            psn: match p.psn {
                PsnAt::Next(o) => ProbePsn::Next(o),
                PsnAt::Absolute(x) => ProbePsn::Absolute(x.value()),
            },
            moves_next: p.moves_next,
            remote: p.remote.as_ref().map(|r| RemoteRef {
                mr: r.mr.clone(),
                offset: r.offset,
                rkey: r.rkey,
            }),
            dma_len: p.dma_len,
            payload: Hex(p.payload.clone()),
            imm_data: p.imm_data,
            compare: p.compare,
            swap_add: p.swap_add,
            ack_req: p.ack_req,
            bad_icrc: p.bad_icrc,
            bth: BthBits { tver: p.tver, solicited: p.solicited, pad: p.pad },
            udp_src_port: p.udp_src_port,
            p_key: p.p_key,
            dest_qp: p.dest_qp,
            q_key: p.q_key,
            copies: p.copies,
            settle_ms: p.settle_ms,
        }),
        Step::Sync | Step::Sleep { .. } => return Ok(None),
    };
    Ok(Some((on, a)))
}

/// The peer's side of a SEND stream: its receives, for its agent.
pub(super) fn receives(st: &model::StreamStep) -> Option<(String, Action)> {
    let r = st.receive.as_ref()?;
    Some((
        st.peer.clone(),
        Action::Receive(ReceiveOrder {
            id: st.id.clone(),
            qps: st.qps.clone(),
            content: st.content,
            depth: r.depth,
            low_water: r.low_water,
            mr: r.mr.clone(),
            offset: r.offset,
            within_ms: st.within_ms,
        }),
    ))
}

/// The scenario's faults as lab switch rules: `from` becomes the direction
/// between the VMs, `qp` the QPN of the QP's receiving end (one rule per end when
/// the fault has no `from`).
pub(super) fn fault_rules(
    sc: &Scenario,
    endpoints: &BTreeMap<String, EndpointFacts>,
) -> Result<Vec<Rule>, String> {
    let mut rules = Vec::new();
    for (i, f) in sc.faults.iter().enumerate() {
        let mut r = f.rule.clone();
        if let Some(from) = &f.from {
            r.dir = Some(match endpoint_vm(sc, from)? {
                Vm::A => Dir::AtoB,
                Vm::B => Dir::BtoA,
            });
        }
        let Some(qname) = &f.qp else {
            rules.push(r);
            continue;
        };
        let q = sc
            .qps
            .iter()
            .find(|q| &q.name == qname)
            .ok_or_else(|| format!("fault {}: no QP `{qname}`", i + 1))?;
        let qpn_on = |e: &String| {
            endpoints
                .get(e)
                .and_then(|x| x.qps.iter().find(|x| &x.name == qname))
                .map(|x| x.qpn)
                .ok_or_else(|| format!("fault {}: QP `{qname}` was not set up on {e}", i + 1))
        };
        // A crafted response goes back to the requester: the QP of `from`.
        if let (fault::Action::Respond(resp), Some(from)) = (&mut r.action, &f.from) {
            resp.reply_qp = Some(qpn_on(from)?);
        }
        // Frames from `from` go to the other end; without `from`, either end's.
        for e in q.between.iter().filter(|e| f.from.as_ref() != Some(*e)) {
            rules.push(Rule { qp: Some(qpn_on(e)?), ..r.clone() });
        }
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::QpInfo;
    use std::path::Path;

    const SC: &str = r#"
name = "x"
[endpoints.a]
[endpoints.server]
vm = "b"
[[qp]]
name = "q"
type = "rc"
between = ["server", "a"]
psn = { a = 100, server = 200 }
access = { a = ["remote_write"] }
[[mr]]
name = "m"
on = "a"
size = 16
init = { pattern = "ab 01" }
[[mr]]
name = "t"
on = "server"
size = 8
access = ["local_write", "remote_write"]
init = { text = "hi" }
[[step]]
on = "a"
op = "write_imm"
qp = "q"
wr_id = 3
sge = [{ mr = "m", len = 8 }]
remote = { mr = "t", rkey = 5 }
imm_data = 7
[[step]]
op = "sleep"
ms = 5
[[fault]]
rule = "drop psn=201 nth=1"
from = "server"
qp = "q"
[[fault]]
rule = "ce"
qp = "q"
"#;

    fn sc() -> Scenario {
        crate::scenario::check::parse_str(Path::new("t.toml"), SC)
            .unwrap_or_else(|e| panic!("{}", e[0]))
    }

    #[test]
    fn each_endpoint_is_told_its_own_part() {
        let sc = sc();
        let a = setup(&sc, "a");
        assert_eq!(a.qps.len(), 1);
        assert_eq!((a.qps[0].psn, a.qps[0].access), (Some(100), crate::verbs::Access(2)));
        assert_eq!(
            a.mrs,
            vec![MrSetup {
                name: "m".into(),
                size: 16,
                access: crate::verbs::Access::LOCAL_WRITE,
                fill: Fill::Repeat(Hex(vec![0xab, 1]))
            }]
        );
        let s = setup(&sc, "server");
        assert_eq!(
            s.qps[0].access,
            crate::verbs::Access::REMOTE_ALL,
            "the default where the scenario names no access for this end"
        );
        assert_eq!(s.mrs[0].fill, Fill::Bytes(Hex(b"hi".to_vec())));
        let (on, act) = action(&sc, &sc.steps[0], &MwKeys::new()).unwrap().unwrap();
        assert_eq!(on, "a");
        assert_eq!(
            act,
            Action::Post {
                qp: "q".into(),
                wr_id: 3,
                verb: AgentVerb::Write {
                    remote: RemoteRef { mr: "t".into(), offset: 0, rkey: Some(5) },
                    imm: Some(7)
                },
                sges: vec![SgeRef { mr: "m".into(), offset: 0, len: 8 }],
                flags: vec![],
            }
        );
        assert!(
            action(&sc, &sc.steps[1], &MwKeys::new()).unwrap().is_none(),
            "the controller sleeps itself"
        );
    }

    #[test]
    fn faults_become_typed_rules_with_direction_and_qpn() {
        let sc = sc();
        let facts = |qpn| EndpointFacts {
            vm: None,
            device: "rxe0".into(),
            port: 1,
            gid_index: 1,
            gid: String::new(),
            ip: String::new(),
            qps: vec![QpInfo { name: "q".into(), qpn, psn: 0, gid: String::new(), qkey: None }],
            mrs: vec![],
            kernel: None,
        };
        let eps: BTreeMap<String, EndpointFacts> =
            [("a".to_string(), facts(0x11)), ("server".to_string(), facts(0x12))].into();
        let r = fault_rules(&sc, &eps).unwrap();
        assert_eq!(r.len(), 3, "one rule from server to a; `ce` to either end");
        assert_eq!((r[0].dir, r[0].qp), (Some(Dir::BtoA), Some(0x11)));
        assert_eq!(r[0].to_string(), "drop dir=b>a qp=0x11 psn=201 nth=1");
        assert_eq!((r[1].dir, r[1].qp, r[2].qp), (None, Some(0x12), Some(0x11)));
        let e = fault_rules(&sc, &BTreeMap::new()).unwrap_err();
        assert!(e.contains("was not set up on a"), "{e}");
        // A crafted answer goes back to the QP of the requester (`from`).
        let mut sc = sc;
        sc.faults.truncate(1);
        sc.faults[0].rule = lab::fault::parse_rule("respond op=write-only with=ack").unwrap();
        sc.faults[0].from = Some("a".into());
        let r = fault_rules(&sc, &eps).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(
            r[0].to_string(),
            "respond dir=a>b qp=0x12 op=rdma-write-only with=ack reply-qp=0x11"
        );
    }

    #[test]
    fn endpoints_map_to_vms() {
        let sc = sc();
        assert_eq!(endpoint_vm(&sc, "a").unwrap(), Vm::A);
        assert_eq!(endpoint_vm(&sc, "server").unwrap(), Vm::B);
        let e = endpoint_vm(&sc, "c").unwrap_err();
        assert!(e.contains("`c`") && e.contains("not a lab VM"), "{e}");
    }
}
