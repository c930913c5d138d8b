//! Which run a frame belongs to when several runs share the switch (`roce run -j
//! N`): each run claims its own traffic, and each frame is counted and recorded
//! for the run that claims it, so every capture holds its scenario's frames and no
//! other's.
//!
//! A run claims, on each VM, the QPNs its QPs have there (a RoCE frame belongs to
//! the run that owns its destination QP on the receiving VM: requests name the
//! responder's QPN, responses the requester's), and the ports of its connection
//! exchanges: TCP segments to or from those ports, and the rdma_cm handshake whose
//! ConnectRequest names one of them in its Service ID. The rest of that handshake
//! (REP, RTU, REJ, MRA, DREQ, DREP) carries no port; it is the run's by the
//! communication IDs its REQ started, as IBA 12.6 pairs them.
//!
//! What no run claims (ARP, neighbour discovery, a QP's straggling resend after
//! its run ended) is counted in the switch's lifetime totals and recorded nowhere.
//!
//! Owns: [`Claim`] (what a run asks for) and `Owner` (deciding frame by frame,
//! with the CM communication IDs it learns). Imports: [`fault`](super::fault)'s
//! `Dir`, and the decoded frame and CM messages from `dissector`.
use dissector::frame::Frame;
use dissector::wire::mad::CmMessage;
use serde::{Deserialize, Serialize};

use super::fault::Dir;

/// QP1, where the CM's MADs go.
const GSI_QP: u32 = 1;

/// What a run that shares the switch calls its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// QPNs on VM a: frames from b addressed to them are the run's.
    pub qps_a: Vec<u32>,
    /// QPNs on VM b: frames from a addressed to them.
    pub qps_b: Vec<u32>,
    /// The ports of its connection exchanges (TCP, and rdma_cm Service IDs).
    pub ports: Vec<u16>,
}

impl Claim {
    /// Whether two claims could both own a frame (the same QPN on the same VM, or
    /// a shared port): such runs cannot share the switch.
    pub fn overlaps(&self, other: &Claim) -> Option<String> {
        let common = |x: &[u32], y: &[u32]| x.iter().find(|q| y.contains(q)).copied();
        if let Some(q) = common(&self.qps_a, &other.qps_a) {
            return Some(format!("QPN {q:#x} on VM a"));
        }
        if let Some(q) = common(&self.qps_b, &other.qps_b) {
            return Some(format!("QPN {q:#x} on VM b"));
        }
        self.ports.iter().find(|p| other.ports.contains(p)).map(|p| format!("port {p}"))
    }
}

/// A claim while its run goes: it learns the rdma_cm communication IDs of the
/// handshakes it owns.
#[derive(Debug, Clone)]
pub(crate) struct Owner {
    claim: Claim,
    comm_ids: Vec<u32>,
}

impl Owner {
    pub(crate) fn new(claim: Claim) -> Owner {
        Owner { claim, comm_ids: Vec::new() }
    }

    pub(crate) fn claim(&self) -> &Claim {
        &self.claim
    }

    /// Whether the frame, sent in `dir` and decoded as `f`, is this run's.
    pub(crate) fn owns(&mut self, dir: Dir, f: &Frame) -> bool {
        if let Some(t) = &f.tcp {
            return self.claim.ports.contains(&t.src_port)
                || self.claim.ports.contains(&t.dst_port);
        }
        let Some(ib) = &f.ib else {
            // Plain UDP (not RoCE) by its ports, like TCP.
            return f.udp.as_ref().is_some_and(|u| {
                self.claim.ports.contains(&u.src_port) || self.claim.ports.contains(&u.dst_port)
            });
        };
        if ib.bth.dest_qp == GSI_QP {
            return match f.mad.as_ref().and_then(|m| m.cm) {
                Some(cm) => self.owns_cm(cm),
                None => false,
            };
        }
        let on_receiver = match dir {
            Dir::AtoB => &self.claim.qps_b,
            Dir::BtoA => &self.claim.qps_a,
        };
        on_receiver.contains(&ib.bth.dest_qp)
    }

    fn owns_cm(&mut self, cm: CmMessage) -> bool {
        let (local, remote) = match cm {
            CmMessage::Req(r) => {
                // rdma_cm's IP port spaces: Service ID 0x0000_0000_01PP_pppp.
                let ours =
                    r.service_id >> 24 == 0x01 && self.claim.ports.contains(&(r.service_id as u16));
                if ours && !self.comm_ids.contains(&r.local_comm_id) {
                    self.comm_ids.push(r.local_comm_id);
                }
                return ours;
            }
            CmMessage::Rep(r) => (r.local_comm_id, r.remote_comm_id),
            CmMessage::Rtu { local_comm_id, remote_comm_id }
            | CmMessage::Rej { local_comm_id, remote_comm_id, .. }
            | CmMessage::Mra { local_comm_id, remote_comm_id, .. }
            | CmMessage::Dreq { local_comm_id, remote_comm_id, .. }
            | CmMessage::Drep { local_comm_id, remote_comm_id } => (local_comm_id, remote_comm_id),
        };
        let ours = self.comm_ids.iter().any(|&c| c != 0 && (c == local || c == remote));
        if ours {
            // The answering side's ID, for the messages it starts (its DREQ).
            for id in [local, remote] {
                if id != 0 && !self.comm_ids.contains(&id) {
                    self.comm_ids.push(id);
                }
            }
        }
        ours
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dissector::craft::{self, Conversation};
    use dissector::wire::mad::{CmRep, CmReq};
    use dissector::wire::{Psn, Syndrome};

    fn decode(b: &[u8]) -> Frame {
        dissector::frame::decode(
            dissector::LinkType::ETHERNET,
            b,
            &dissector::frame::Options::default(),
        )
    }

    fn last(c: &Conversation) -> Frame {
        decode(&c.frames.last().expect("a frame").data)
    }

    #[test]
    fn a_frame_is_the_run_s_that_owns_its_destination_qp_on_the_receiving_vm() {
        // Ours: QP 0x11 on a and 0x12 on b. Another run's: 0x12 on a, 0x11 on b.
        let mut o = Owner::new(Claim { qps_a: vec![0x11], qps_b: vec![0x12], ports: vec![18_600] });
        let mut ours = Conversation::new();
        let psn = ours.send(craft::Dir::AtoB, 16, None);
        assert!(o.owns(Dir::AtoB, &last(&ours)), "a request to its QP on b");
        ours.ack(craft::Dir::BtoA, psn, Syndrome::ACK, 1);
        assert!(o.owns(Dir::BtoA, &last(&ours)), "the answer to its QP on a");
        let mut theirs = Conversation::between(ours.a.host, 0x12, ours.b.host, 0x11);
        theirs.send(craft::Dir::AtoB, 16, None);
        assert!(!o.owns(Dir::AtoB, &last(&theirs)), "QPN 0x11 on b is another run's");
        theirs.ack(craft::Dir::BtoA, Psn::new(100), Syndrome::ACK, 1);
        assert!(!o.owns(Dir::BtoA, &last(&theirs)), "QPN 0x12 on a is another run's");
    }

    fn req(comm: u32, port: u16) -> CmMessage {
        CmMessage::Req(CmReq {
            local_comm_id: comm,
            service_id: 0x0000_0000_0106_0000 | u64::from(port),
            local_qkey: 0,
            local_qpn: 0x11,
            responder_resources: 1,
            initiator_depth: 1,
            transport_type: 0,
            starting_psn: Psn::new(1),
            retry_count: 7,
            p_key: 0xffff,
            path_mtu: 3,
            rnr_retry_count: 7,
            srq: false,
            primary_local_gid: std::net::Ipv6Addr::UNSPECIFIED,
            primary_remote_gid: std::net::Ipv6Addr::UNSPECIFIED,
        })
    }

    #[test]
    fn an_rdma_cm_handshake_is_the_run_s_whose_port_its_request_names() {
        let mut o = Owner::new(Claim { qps_a: vec![0x11], qps_b: vec![0x12], ports: vec![18_600] });
        let mut c = Conversation::new();
        let mut sees = |c: &Conversation, dir| o.owns(dir, &last(c));
        c.cm(craft::Dir::AtoB, req(0xaaaa, 18_700), 1);
        assert!(!sees(&c, Dir::AtoB), "another run's port");
        c.cm(craft::Dir::BtoA, CmMessage::Rep(rep(0xbbbb, 0xaaaa)), 1);
        assert!(!sees(&c, Dir::BtoA), "the answer to another run's request");
        c.cm(craft::Dir::AtoB, req(0x1000, 18_600), 2);
        assert!(sees(&c, Dir::AtoB), "REQ for its port");
        c.cm(craft::Dir::BtoA, CmMessage::Rep(rep(0x2000, 0x1000)), 2);
        assert!(sees(&c, Dir::BtoA), "REP to its REQ");
        c.cm(craft::Dir::AtoB, CmMessage::Rtu { local_comm_id: 0x1000, remote_comm_id: 0x2000 }, 2);
        assert!(sees(&c, Dir::AtoB), "RTU");
        // The passive side disconnects: its DREQ names only IDs learned on the way.
        c.cm(
            craft::Dir::BtoA,
            CmMessage::Dreq { local_comm_id: 0x2000, remote_comm_id: 0x1000, remote_qpn: 0x11 },
            3,
        );
        assert!(sees(&c, Dir::BtoA), "DREQ from the passive side");
        c.cm(
            craft::Dir::AtoB,
            CmMessage::Drep { local_comm_id: 0xaaaa, remote_comm_id: 0xbbbb },
            4,
        );
        assert!(!sees(&c, Dir::AtoB), "another run's DREP");
    }

    fn rep(local: u32, remote: u32) -> CmRep {
        CmRep {
            local_comm_id: local,
            remote_comm_id: remote,
            local_qkey: 0,
            local_qpn: 0x12,
            starting_psn: Psn::new(1),
            responder_resources: 1,
            initiator_depth: 1,
            rnr_retry_count: 7,
            srq: false,
        }
    }

    #[test]
    fn claims_that_share_a_qpn_or_port_overlap() {
        let a = Claim { qps_a: vec![0x11], qps_b: vec![0x12], ports: vec![18_600] };
        assert_eq!(
            a.overlaps(&Claim { qps_a: vec![0x13], qps_b: vec![0x11], ports: vec![18_700] }),
            None,
            "0x11 on a and on b are different QPs"
        );
        assert_eq!(
            a.overlaps(&Claim { qps_a: vec![0x11], ..Default::default() }).as_deref(),
            Some("QPN 0x11 on VM a")
        );
        assert_eq!(
            a.overlaps(&Claim { ports: vec![18_600], ..Default::default() }).as_deref(),
            Some("port 18600")
        );
    }
}
