//! The MAD and CM fields: tshark 4.0's `infiniband.mad.*` and `infiniband.cm.*`
//! names for what the decoder reads of a MAD (its common header) and of a CM message
//! (the fields of [`CmMessage`], its private data and, under an IP CM service ID, the
//! rdma_cm header at the start of a REQ's private data).
//!
//! As in tshark, a field is there only for a whole MAD (256 bytes: shorter ones are no
//! MAD to the decoder either), and, where tshark adds an item only in some cases, only
//! then: a REQ's private data is `infiniband.cm.req.ip_cm` under an IP CM service ID
//! (`0x0000_0000_01PP_pppp`) and `infiniband.cm.req.private` under any other; the
//! primary GIDs are `…_ipv4` (their last four bytes) over IPv4, IPv6 addresses
//! otherwise; the IP CM addresses are `sip4`/`dip4` when the header says IP version
//! 4, `sip6`/`dip6` for any other value.
//!
//! Owns: the values of those fields. Imports: the field names and values (its
//! parent), the decoded frame and the MAD wire vocabulary.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::{Field, Value};
use crate::frame::{Frame, Net};
use crate::wire::mad::{self, CmMessage};

/// tshark's test for an IP CM service ID (IBA Annex A11.2): the prefix
/// `0x0000_0000_01`.
const fn ip_cm(service_id: u64) -> bool {
    service_id & 0xFFFF_FFFF_FF00_0000 == 0x0000_0000_0100_0000
}

/// The attribute data of the frame's MAD: the 232 bytes after its common header.
fn attribute_data<'a>(fr: &Frame, data: &'a [u8]) -> Option<&'a [u8]> {
    fr.mad.as_ref()?;
    let start = fr.ib.as_ref()?.payload.start + mad::HEADER_LEN;
    data.get(start..start + (mad::MAD_LEN - mad::HEADER_LEN))
}

fn ipv4_at(b: &[u8], at: usize) -> Option<Ipv4Addr> {
    let a: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(a.into())
}

fn ipv6_at(b: &[u8], at: usize) -> Option<Ipv6Addr> {
    let a: [u8; 16] = b.get(at..at + 16)?.try_into().ok()?;
    Some(a.into())
}

/// Hands the value of `field`, a MAD or CM field, of frame `fr` (captured bytes
/// `data`) to `f`; nothing for any other field.
#[inline(always)]
pub(super) fn visit(field: Field, fr: &Frame, data: &[u8], f: &mut impl FnMut(Value<'_>)) {
    use Field as F;
    use Value::{Bytes, Hex, Ipv4, Ipv6};
    let Some(m) = fr.mad.as_ref() else { return };
    let h = &m.header;
    let private = || fr.cm_private_data(data);
    match (field, m.cm) {
        (F::MadBaseversion, _) => f(Hex(h.base_version.into(), 2)),
        (F::MadMgmtclass, _) => f(Hex(h.mgmt_class.into(), 2)),
        (F::MadClassversion, _) => f(Hex(h.class_version.into(), 2)),
        (F::MadMethod, _) => f(Hex(h.method.into(), 2)),
        (F::MadStatus, _) => f(Hex(h.status.into(), 4)),
        (F::MadClassspecific, _) => f(Hex(h.class_specific.into(), 4)),
        (F::MadTransactionid, _) => f(Hex(h.transaction_id, 16)),
        (F::MadAttributeid, _) => f(Hex(h.attribute_id.into(), 4)),
        (F::MadAttributemodifier, _) => f(Hex(h.attribute_modifier.into(), 8)),
        (F::MadData, _) => attribute_data(fr, data).into_iter().for_each(|b| f(Bytes(b))),
        (_, Some(CmMessage::Req(r))) => {
            let sid = ip_cm(r.service_id);
            let over_ipv4 = matches!(fr.net, Net::Ipv4(_));
            let gid_v4 = |g: Ipv6Addr| {
                let o = g.octets();
                Ipv4Addr::new(o[12], o[13], o[14], o[15])
            };
            // The rdma_cm header: present (as tshark reads it) under an IP CM service ID.
            let ipcm = || private().filter(|_| sid);
            match field {
                F::CmReqLocalCommId => f(Hex(r.local_comm_id.into(), 8)),
                F::CmReqServiceid => f(Hex(r.service_id, 16)),
                F::CmReqServiceidPrefix if sid => {
                    if let Some(b) = attribute_data(fr, data).and_then(|d| d.get(8..13)) {
                        f(Bytes(b))
                    }
                }
                F::CmReqServiceidProtocol if sid => f(Hex(r.service_id >> 16 & 0xFF, 2)),
                F::CmReqServiceidDport if sid => f(Hex(r.service_id & 0xFFFF, 4)),
                F::CmReqLocalqkey => f(Hex(r.local_qkey.into(), 8)),
                F::CmReqLocalqpn => f(Hex(r.local_qpn.into(), 6)),
                F::CmReqResponderres => f(Hex(r.responder_resources.into(), 2)),
                F::CmReqInitdepth => f(Hex(r.initiator_depth.into(), 2)),
                F::CmReqTranspsvctype => f(Hex(r.transport_type.into(), 2)),
                F::CmReqStartpsn => f(Hex(r.starting_psn.value().into(), 6)),
                F::CmReqRetrcount => f(Hex(r.retry_count.into(), 2)),
                F::CmReqPkey => f(Hex(r.p_key.into(), 4)),
                F::CmReqPppmtu => f(Hex(r.path_mtu.into(), 2)),
                F::CmReqRnrretrcount => f(Hex(r.rnr_retry_count.into(), 2)),
                F::CmReqSrq => f(Hex(r.srq.into(), 2)),
                F::CmReqPrimLocalgid if !over_ipv4 => f(Ipv6(r.primary_local_gid)),
                F::CmReqPrimRemotegid if !over_ipv4 => f(Ipv6(r.primary_remote_gid)),
                F::CmReqPrimLocalgidIpv4 if over_ipv4 => f(Ipv4(gid_v4(r.primary_local_gid))),
                F::CmReqPrimRemotegidIpv4 if over_ipv4 => f(Ipv4(gid_v4(r.primary_remote_gid))),
                F::CmReqPrivate if !sid => private().into_iter().for_each(|b| f(Bytes(b))),
                F::CmReqIpCm => ipcm().into_iter().for_each(|b| f(Bytes(b))),
                F::CmReqIpCmMajv
                | F::CmReqIpCmMinv
                | F::CmReqIpCmIpv
                | F::CmReqIpCmSport
                | F::CmReqIpCmSip4
                | F::CmReqIpCmDip4
                | F::CmReqIpCmSip6
                | F::CmReqIpCmDip6
                | F::CmReqIpCmPrivate => {
                    if let Some(p) = ipcm().and_then(|p| p.get(..92)) {
                        ip_cm_header(field, p, f)
                    }
                }
                _ => {}
            }
        }
        (_, Some(CmMessage::Rep(r))) => match field {
            F::CmRepLocalCommId => f(Hex(r.local_comm_id.into(), 8)),
            F::CmRepRemotecommid => f(Hex(r.remote_comm_id.into(), 8)),
            F::CmRepLocalqkey => f(Hex(r.local_qkey.into(), 8)),
            F::CmRepLocalqpn => f(Hex(r.local_qpn.into(), 6)),
            F::CmRepStartpsn => f(Hex(r.starting_psn.value().into(), 6)),
            F::CmRepRespres => f(Hex(r.responder_resources.into(), 2)),
            F::CmRepInitdepth => f(Hex(r.initiator_depth.into(), 2)),
            F::CmRepRnrretrcount => f(Hex(r.rnr_retry_count.into(), 2)),
            F::CmRepSrq => f(Hex(r.srq.into(), 2)),
            F::CmRepPrivate => private().into_iter().for_each(|b| f(Bytes(b))),
            _ => {}
        },
        (_, Some(CmMessage::Rtu { local_comm_id, remote_comm_id })) => match field {
            F::CmRtuLocalcommid => f(Hex(local_comm_id.into(), 8)),
            F::CmRtuRemotecommid => f(Hex(remote_comm_id.into(), 8)),
            F::CmRtuPrivate => private().into_iter().for_each(|b| f(Bytes(b))),
            _ => {}
        },
        (_, Some(CmMessage::Rej { local_comm_id, remote_comm_id, msg_rejected, reason })) => {
            match field {
                F::CmRejLocalcommid => f(Hex(local_comm_id.into(), 8)),
                F::CmRejRemotecommid => f(Hex(remote_comm_id.into(), 8)),
                F::CmRejMsgrej => f(Hex(msg_rejected.into(), 2)),
                F::CmRejReason => f(Hex(reason.into(), 4)),
                F::CmRejAri => {
                    if let Some(b) = attribute_data(fr, data).and_then(|d| d.get(12..84)) {
                        f(Bytes(b))
                    }
                }
                F::CmRejPrivate => private().into_iter().for_each(|b| f(Bytes(b))),
                _ => {}
            }
        }
        (_, Some(CmMessage::Dreq { local_comm_id, remote_comm_id, remote_qpn })) => match field {
            F::CmDreqLocalcommid => f(Hex(local_comm_id.into(), 8)),
            F::CmDreqRemotecommid => f(Hex(remote_comm_id.into(), 8)),
            F::CmDreqRemoteqpn => f(Hex(remote_qpn.into(), 6)),
            F::CmDreqPrivate => private().into_iter().for_each(|b| f(Bytes(b))),
            _ => {}
        },
        (_, Some(CmMessage::Drep { local_comm_id, remote_comm_id })) => match field {
            F::CmDrepLocalcommid => f(Hex(local_comm_id.into(), 8)),
            F::CmDrepRemotecommid => f(Hex(remote_comm_id.into(), 8)),
            F::CmDrepPrivate => private().into_iter().for_each(|b| f(Bytes(b))),
            _ => {}
        },
        // MRA: tshark 4.0 names none of its fields.
        _ => {}
    }
}

/// The fields of the rdma_cm header `p` (the 92 bytes of a REQ's private data),
/// laid out as tshark 4.0 reads it: versions, IP version, source port, the two
/// addresses (IPv4 in the last four bytes of each 16 when the IP version is 4), and
/// the consumer's 56 bytes.
fn ip_cm_header(field: Field, p: &[u8], f: &mut impl FnMut(Value<'_>)) {
    use Field as F;
    use Value::{Bytes, Hex, Ipv4, Ipv6};
    let v4 = p[1] >> 4 == 4;
    match field {
        F::CmReqIpCmMajv => f(Hex((p[0] >> 4).into(), 2)),
        F::CmReqIpCmMinv => f(Hex((p[0] & 0xF).into(), 2)),
        F::CmReqIpCmIpv => f(Hex((p[1] >> 4).into(), 2)),
        F::CmReqIpCmSport => f(Hex(u16::from_be_bytes([p[2], p[3]]).into(), 4)),
        F::CmReqIpCmSip4 if v4 => ipv4_at(p, 16).into_iter().for_each(|a| f(Ipv4(a))),
        F::CmReqIpCmDip4 if v4 => ipv4_at(p, 32).into_iter().for_each(|a| f(Ipv4(a))),
        F::CmReqIpCmSip6 if !v4 => ipv6_at(p, 4).into_iter().for_each(|a| f(Ipv6(a))),
        F::CmReqIpCmDip6 if !v4 => ipv6_at(p, 20).into_iter().for_each(|a| f(Ipv6(a))),
        F::CmReqIpCmPrivate => f(Bytes(&p[36..92])),
        _ => {}
    }
}
