//! A checked scenario, resolved into what each agent is told: its own setup, its
//! steps (the checked actions themselves, each window's rkey filled in as the run
//! learns it), and the fault rules the lab's switch applies. Names of QPs and MRs
//! stay names (each agent knows its own).
//!
//! Owns: the translation from [`Scenario`] to the protocol's `Setup`, the windows'
//! rkeys in the actions sent, and the lab's fault [`Rule`]s. Imports: the scenario model, the agent protocol
//! (`crate::protocol`), the results' endpoint facts, the verbs' QP kinds and caps, the
//! lab's fault rules and VMs.
use std::collections::BTreeMap;

use lab::fault::{self, Dir, Rule};
use lab::state::Vm;

use crate::protocol::{
    self, Action, ConnectBy, Fill, Hex, Invalidate, MrSetup, MwSetup, QpSetup, RemoteRef, SrqSetup,
    Verb,
};
use crate::results::EndpointFacts;
use crate::scenario::model::{ConnectMethod, Content, QpType, Scenario, Step};
use crate::vocab::{Caps, QpKind};

/// The lab VM an endpoint runs in: `vm`, else its name.
fn endpoint_vm(sc: &Scenario, endpoint: &str) -> Result<Vm, String> {
    let vm = sc
        .endpoints
        .get(endpoint)
        .and_then(|e| e.vm.clone())
        .unwrap_or_else(|| endpoint.to_string());
    Vm::parse(&vm).ok_or_else(|| format!("endpoint `{endpoint}` runs on `{vm}`, which is not a lab VM (a or b)\nhint: set `vm = \"a\"` or `vm = \"b\"` in [endpoints.{endpoint}]"))
}

/// A scenario resolved once, before anything runs: each endpoint's lab VM (in the
/// lab) and everything it sets up. What only the run learns (QPNs, windows'
/// rkeys) completes the fault rules ([`fault_rules`]) and the actions
/// ([`sent`]) as it comes.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) endpoints: BTreeMap<String, Planned>,
}

/// One endpoint of a [`Plan`].
#[derive(Debug, Clone)]
pub(super) struct Planned {
    /// Its lab VM, or on real hosts through a bridge the side of the bridge its
    /// host is cabled to; none on real hosts without one.
    pub(super) vm: Option<Vm>,
    pub(super) setup: protocol::Setup,
}

impl Plan {
    /// `sc`'s plan; `in_lab`: each endpoint must name a side of the switch (a
    /// lab VM, or a bridge's port).
    pub(super) fn new(sc: &Scenario, in_lab: bool) -> Result<Plan, String> {
        let mut endpoints = BTreeMap::new();
        for name in sc.endpoints.keys() {
            let vm = if in_lab { Some(endpoint_vm(sc, name)?) } else { None };
            endpoints.insert(name.clone(), Planned { vm, setup: setup(sc, name) });
        }
        Ok(Plan { endpoints })
    }

    /// The lab VM endpoint `name` runs in.
    pub(super) fn vm(&self, name: &str) -> Result<Vm, String> {
        self.endpoints.get(name).and_then(|p| p.vm).ok_or_else(|| {
            format!("endpoint `{name}` runs in no lab VM: the scenario runs on real hosts")
        })
    }
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
fn posts(sc: &Scenario, endpoint: &str, qp: &str, pick: impl Fn(&Verb) -> bool) -> bool {
    sc.steps.iter().any(|s| matches!(s, Step::Act { on, action: Action::Post { qp: q, verb, .. } } if on == endpoint && q == qp && pick(verb)))
}

/// What endpoint `name` sets up: its QPs (those it is an end of; made with the
/// extended send operations it posts on them), MRs, SRQs and memory windows.
fn setup(sc: &Scenario, name: &str) -> protocol::Setup {
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
            access: q.access.get(name).copied().unwrap_or(crate::vocab::Access::REMOTE_ALL),
            connect: match q.connect {
                ConnectMethod::Tcp => ConnectBy::Tcp,
                ConnectMethod::RdmaCm => ConnectBy::RdmaCm,
                ConnectMethod::Controller => ConnectBy::Controller,
            },
            atomic_write: posts(sc, name, &q.name, |v| matches!(v, Verb::AtomicWrite { .. })),
            flush: posts(sc, name, &q.name, |v| matches!(v, Verb::Flush { .. })),
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
        cq_depth: ep.cq_depth,
        qps,
        mrs,
        srqs,
        mws,
    }
}

/// The rkey of `peer`'s window `mw` as last learned.
fn mw_rkey(keys: &MwKeys, peer: &str, mw: &str) -> Result<u32, String> {
    keys.get(&(peer.to_string(), mw.to_string())).copied().ok_or_else(|| format!("the rkey of memory window `{mw}` on {peer} is not known (its endpoint did not report it)"))
}

/// A remote end through `peer`'s window: the window's rkey as last learned
/// (unless the scenario overrides it).
fn learn_remote(r: &mut RemoteRef, peer: &str, keys: &MwKeys) -> Result<(), String> {
    if let (Some(w), None) = (&r.mw, r.rkey) {
        r.rkey = Some(mw_rkey(keys, peer, w)?);
    }
    Ok(())
}

/// A step as its endpoint's agent receives it: the checked action itself, with
/// the one thing only the run knows filled in, the rkey of each window of the
/// peer it names (from `keys`). `None` for what the controller does itself
/// (`sync`, `sleep`).
pub(super) fn sent(
    sc: &Scenario,
    step: &Step,
    keys: &MwKeys,
) -> Result<Option<(String, Action)>, String> {
    match step {
        Step::Sync | Step::Sleep { .. } => Ok(None),
        Step::Stream(st) => {
            let mut order = st.order.clone();
            if let Some(r) = &mut order.remote {
                learn_remote(r, &st.peer, keys)?;
            }
            Ok(Some((st.on.clone(), Action::Stream(order))))
        }
        Step::Act { on, action } => {
            let mut action = action.clone();
            if let Action::Post { qp, verb, .. } = &mut action {
                let peer = sc.qps.iter().find(|q| &q.name == qp).map_or("", |q| q.peer_of(on));
                if let Some(r) = verb.remote_mut() {
                    learn_remote(r, peer, keys)?;
                }
                if let Verb::SendInv { invalidate: Invalidate::Mw { mw, rkey: rkey @ None } } = verb
                {
                    *rkey = Some(mw_rkey(keys, peer, mw)?);
                }
            }
            Ok(Some((on.clone(), action)))
        }
    }
}

/// The scenario's faults as lab switch rules: `from` becomes the direction
/// between the VMs, `qp` the QPN of the QP's receiving end (one rule per end when
/// the fault has no `from`).
pub(super) fn fault_rules(
    sc: &Scenario,
    plan: &Plan,
    endpoints: &BTreeMap<String, EndpointFacts>,
) -> Result<Vec<Rule>, String> {
    let mut rules = Vec::new();
    for (i, f) in sc.faults.iter().enumerate() {
        let mut r = f.rule.clone();
        if let Some(from) = &f.from {
            r.dir = Some(match plan.vm(from)? {
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
    use crate::protocol::SgeRef;
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
        assert_eq!((a.qps[0].psn, a.qps[0].access), (Some(100), crate::vocab::Access(2)));
        assert_eq!(
            a.mrs,
            vec![MrSetup {
                name: "m".into(),
                size: 16,
                access: crate::vocab::Access::LOCAL_WRITE,
                fill: Fill::Repeat(Hex(vec![0xab, 1]))
            }]
        );
        let s = setup(&sc, "server");
        assert_eq!(
            s.qps[0].access,
            crate::vocab::Access::REMOTE_ALL,
            "the default where the scenario names no access for this end"
        );
        assert_eq!(s.mrs[0].fill, Fill::Bytes(Hex(b"hi".to_vec())));
        let (on, act) = sent(&sc, &sc.steps[0], &MwKeys::new()).unwrap().unwrap();
        assert_eq!(on, "a");
        assert_eq!(
            act,
            Action::Post {
                qp: "q".into(),
                wr_id: 3,
                verb: Verb::Write {
                    remote: RemoteRef { mr: "t".into(), offset: 0, rkey: Some(5), mw: None },
                    imm: Some(7)
                },
                sges: vec![SgeRef { mr: "m".into(), offset: 0, len: 8, outside_mr: false }],
                flags: vec![],
            }
        );
        assert_eq!(Step::Act { on, action: act }, sc.steps[0], "the checked step is what is sent");
        assert!(
            sent(&sc, &sc.steps[1], &MwKeys::new()).unwrap().is_none(),
            "the controller sleeps itself"
        );
    }

    #[test]
    fn a_window_named_by_a_step_goes_out_with_its_rkey_as_last_learned() {
        let sc = sc();
        let through_w = |verb| Step::Act {
            on: "a".into(),
            action: Action::Post { qp: "q".into(), wr_id: 1, verb, sges: vec![], flags: vec![] },
        };
        let w = RemoteRef { mr: "t".into(), offset: 4, rkey: None, mw: Some("w".into()) };
        let write = through_w(Verb::Write { remote: w.clone(), imm: None });
        let inv =
            through_w(Verb::SendInv { invalidate: Invalidate::Mw { mw: "w".into(), rkey: None } });
        let e = sent(&sc, &write, &MwKeys::new()).unwrap_err();
        assert!(e.contains("memory window `w` on server is not known"), "{e}");
        // The window is the peer's (server's): a's own window of that name is not it.
        let keys: MwKeys =
            [(("server".into(), "w".into()), 0x77), (("a".into(), "w".into()), 0x11)].into();
        let Some((_, Action::Post { verb: Verb::Write { remote, .. }, .. })) =
            sent(&sc, &write, &keys).unwrap()
        else {
            panic!("a write")
        };
        assert_eq!(remote, RemoteRef { rkey: Some(0x77), ..w.clone() });
        let Some((_, Action::Post { verb: Verb::SendInv { invalidate }, .. })) =
            sent(&sc, &inv, &keys).unwrap()
        else {
            panic!("a send with invalidate")
        };
        assert_eq!(invalidate.rkey(), Ok(0x77));
        // An rkey the scenario gives overrides the window's.
        let forced = through_w(Verb::Read { remote: RemoteRef { rkey: Some(5), ..w } });
        let Some((_, Action::Post { verb, .. })) = sent(&sc, &forced, &keys).unwrap() else {
            panic!("a read")
        };
        assert_eq!(verb.remote().and_then(|r| r.rkey), Some(5));
    }

    #[test]
    fn faults_become_typed_rules_with_direction_and_qpn() {
        let sc = sc();
        let facts = |qpn| EndpointFacts::rxe0("", Some((qpn, 0)));
        let eps: BTreeMap<String, EndpointFacts> =
            [("a".to_string(), facts(0x11)), ("server".to_string(), facts(0x12))].into();
        let plan = Plan::new(&sc, true).unwrap();
        let r = fault_rules(&sc, &plan, &eps).unwrap();
        assert_eq!(r.len(), 3, "one rule from server to a; `ce` to either end");
        assert_eq!((r[0].dir, r[0].qp), (Some(Dir::BtoA), Some(0x11)));
        assert_eq!(r[0].to_string(), "drop dir=b>a qp=0x11 psn=201 nth=1");
        assert_eq!((r[1].dir, r[1].qp, r[2].qp), (None, Some(0x12), Some(0x11)));
        let e = fault_rules(&sc, &plan, &BTreeMap::new()).unwrap_err();
        assert!(e.contains("was not set up on a"), "{e}");
        // A crafted answer goes back to the QP of the requester (`from`).
        let mut sc = sc;
        sc.faults.truncate(1);
        sc.faults[0].rule = lab::fault::parse_rule("respond op=write-only with=ack").unwrap();
        sc.faults[0].from = Some("a".into());
        let r = fault_rules(&sc, &plan, &eps).unwrap();
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
        let plan = Plan::new(&sc, true).unwrap();
        assert_eq!((plan.vm("a"), plan.vm("server")), (Ok(Vm::A), Ok(Vm::B)));
        assert_eq!(plan.endpoints["server"].setup.mrs[0].name, "t", "its own setup");
        let remote = Plan::new(&sc, false).unwrap();
        let e = remote.vm("a").unwrap_err();
        assert!(e.contains("real hosts"), "{e}");
        // In the lab, an endpoint that names no lab VM is refused before anything runs.
        let mut odd = sc.clone();
        odd.endpoints.get_mut("server").unwrap().vm = Some("c".into());
        let e = Plan::new(&odd, true).unwrap_err();
        assert!(e.contains("`server` runs on `c`"), "{e}");
        assert!(Plan::new(&odd, false).is_ok(), "real hosts name no VM");
    }
}
