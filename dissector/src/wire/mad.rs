//! Management Datagrams (IBA Vol 1, 13.4) as RoCE carries them: a UD SEND to QP1
//! whose 256-byte payload is a MAD. Decoded: the common MAD header, and the
//! Communication Manager messages (class 0x07; IBA 12.6) that set up RC/UC
//! connections — enough to tie both sides' QPNs and starting PSNs to one connection.
//!
//! Owns: the MAD header, the CM messages and the rdma_cm private-data header. Imports:
//! the shared helpers and errors, and [`Psn`] (its parent).

use std::net::Ipv6Addr;

use super::{be, check_len, Error, Malformed, Psn};

pub const HEADER_LEN: usize = 24;
pub const MAD_LEN: usize = 256;
/// The QP that receives General Services MADs.
pub const GSI_QP: u32 = 1;
pub const CLASS_CM: u8 = 0x07;

/// The common MAD header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MadRepr {
    pub base_version: u8,
    pub mgmt_class: u8,
    pub class_version: u8,
    /// Method, with the response bit (R, bit 7) included as tshark shows it.
    pub method: u8,
    pub status: u16,
    pub class_specific: u16,
    pub transaction_id: u64,
    pub attribute_id: u16,
    pub attribute_modifier: u32,
}

impl MadRepr {
    pub fn parse(b: &[u8]) -> Result<MadRepr, Error> {
        check_len(b, HEADER_LEN)?;
        let r = MadRepr {
            base_version: b[0],
            mgmt_class: b[1],
            class_version: b[2],
            method: b[3],
            status: be::u16(b, 4..6),
            class_specific: be::u16(b, 6..8),
            transaction_id: be::u64(b, 8..16),
            attribute_id: be::u16(b, 16..18),
            attribute_modifier: be::u32(b, 20..24),
        };
        if r.base_version != 1 {
            return Err(Error::Malformed(Malformed::MadBaseVersion { version: r.base_version }));
        }
        Ok(r)
    }

    pub fn emit(&self, b: &mut [u8]) {
        b[0] = self.base_version;
        b[1] = self.mgmt_class;
        b[2] = self.class_version;
        b[3] = self.method;
        be::set_u16(b, 4..6, self.status);
        be::set_u16(b, 6..8, self.class_specific);
        be::set_u64(b, 8..16, self.transaction_id);
        be::set_u16(b, 16..18, self.attribute_id);
        be::set_u16(b, 18..20, 0);
        be::set_u32(b, 20..24, self.attribute_modifier);
    }

    pub const fn class_name(&self) -> &'static str {
        match self.mgmt_class {
            0x01 => "SubnMgt (LID routed)",
            0x81 => "SubnMgt (directed route)",
            0x03 => "SubnAdm",
            0x04 => "Perf",
            0x05 => "BM",
            0x06 => "DevMgt",
            CLASS_CM => "CM",
            0x08 => "SNMP",
            _ => "MAD",
        }
    }
}

/// CM attribute IDs.
pub mod attr {
    pub const REQ: u16 = 0x0010;
    pub const MRA: u16 = 0x0011;
    pub const REJ: u16 = 0x0012;
    pub const REP: u16 = 0x0013;
    pub const RTU: u16 = 0x0014;
    pub const DREQ: u16 = 0x0015;
    pub const DREP: u16 = 0x0016;
}

/// ConnectRequest: what the active side proposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmReq {
    pub local_comm_id: u32,
    pub service_id: u64,
    pub local_qkey: u32,
    pub local_qpn: u32,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    /// 0 RC, 1 UC, 3 XRC-ish (Transport Service Type field).
    pub transport_type: u8,
    pub starting_psn: Psn,
    pub retry_count: u8,
    pub p_key: u16,
    /// Path MTU code (1=256 … 5=4096).
    pub path_mtu: u8,
    pub rnr_retry_count: u8,
    pub srq: bool,
    pub primary_local_gid: Ipv6Addr,
    pub primary_remote_gid: Ipv6Addr,
}

/// ConnectReply: the passive side's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmRep {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub local_qkey: u32,
    pub local_qpn: u32,
    pub starting_psn: Psn,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub rnr_retry_count: u8,
    pub srq: bool,
}

/// The CM messages we decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmMessage {
    Req(CmReq),
    Rep(CmRep),
    Rtu { local_comm_id: u32, remote_comm_id: u32 },
    Rej { local_comm_id: u32, remote_comm_id: u32, msg_rejected: u8, reason: u16 },
    Mra { local_comm_id: u32, remote_comm_id: u32, msg_mraed: u8, service_timeout: u8 },
    Dreq { local_comm_id: u32, remote_comm_id: u32, remote_qpn: u32 },
    Drep { local_comm_id: u32, remote_comm_id: u32 },
}

impl CmMessage {
    /// Decodes the attribute data (the 232 bytes after the MAD header).
    pub fn parse(attribute_id: u16, d: &[u8]) -> Result<Option<CmMessage>, Error> {
        let need = match attribute_id {
            attr::REQ => 96,
            attr::REP => 36,
            attr::REJ | attr::MRA => 12,
            attr::RTU | attr::DREP => 8,
            attr::DREQ => 12,
            _ => return Ok(None),
        };
        check_len(d, need)?;
        let local = be::u32(d, 0..4);
        let remote = be::u32(d, 4..8);
        let gid = |at: usize| {
            let mut g = [0u8; 16];
            g.copy_from_slice(&d[at..at + 16]);
            Ipv6Addr::from(g)
        };
        Ok(Some(match attribute_id {
            attr::REQ => CmMessage::Req(CmReq {
                local_comm_id: local,
                service_id: be::u64(d, 8..16),
                local_qkey: be::u32(d, 28..32),
                local_qpn: be::u24(d, 32..35),
                responder_resources: d[35],
                initiator_depth: d[39],
                transport_type: (d[43] >> 1) & 3,
                starting_psn: Psn::new(be::u24(d, 44..47)),
                retry_count: d[47] & 7,
                p_key: be::u16(d, 48..50),
                path_mtu: d[50] >> 4,
                rnr_retry_count: d[50] & 7,
                srq: d[51] & 0x08 != 0,
                primary_local_gid: gid(56),
                primary_remote_gid: gid(72),
            }),
            attr::REP => CmMessage::Rep(CmRep {
                local_comm_id: local,
                remote_comm_id: remote,
                local_qkey: be::u32(d, 8..12),
                local_qpn: be::u24(d, 12..15),
                starting_psn: Psn::new(be::u24(d, 20..23)),
                responder_resources: d[24],
                initiator_depth: d[25],
                rnr_retry_count: d[27] >> 5,
                srq: d[27] & 0x10 != 0,
            }),
            attr::RTU => CmMessage::Rtu { local_comm_id: local, remote_comm_id: remote },
            attr::REJ => CmMessage::Rej {
                local_comm_id: local,
                remote_comm_id: remote,
                msg_rejected: d[8] >> 6,
                reason: be::u16(d, 10..12),
            },
            attr::MRA => CmMessage::Mra {
                local_comm_id: local,
                remote_comm_id: remote,
                msg_mraed: d[8] >> 6,
                service_timeout: d[9] >> 3,
            },
            attr::DREQ => CmMessage::Dreq {
                local_comm_id: local,
                remote_comm_id: remote,
                remote_qpn: be::u24(d, 8..11),
            },
            _ => CmMessage::Drep { local_comm_id: local, remote_comm_id: remote },
        }))
    }

    pub const fn name(&self) -> &'static str {
        match self {
            CmMessage::Req(_) => "ConnectRequest (REQ)",
            CmMessage::Rep(_) => "ConnectReply (REP)",
            CmMessage::Rtu { .. } => "ReadyToUse (RTU)",
            CmMessage::Rej { .. } => "ConnectReject (REJ)",
            CmMessage::Mra { .. } => "MsgRcptAck (MRA)",
            CmMessage::Dreq { .. } => "DisconnectRequest (DREQ)",
            CmMessage::Drep { .. } => "DisconnectReply (DREP)",
        }
    }

    pub const fn local_comm_id(&self) -> u32 {
        match *self {
            CmMessage::Req(r) => r.local_comm_id,
            CmMessage::Rep(r) => r.local_comm_id,
            CmMessage::Rtu { local_comm_id, .. }
            | CmMessage::Rej { local_comm_id, .. }
            | CmMessage::Mra { local_comm_id, .. }
            | CmMessage::Dreq { local_comm_id, .. }
            | CmMessage::Drep { local_comm_id, .. } => local_comm_id,
        }
    }

    /// Writes a REQ or REP into attribute data `d` (232 bytes), for crafted captures.
    pub fn emit(&self, d: &mut [u8]) {
        match *self {
            CmMessage::Req(r) => {
                be::set_u32(d, 0..4, r.local_comm_id);
                be::set_u64(d, 8..16, r.service_id);
                be::set_u32(d, 28..32, r.local_qkey);
                be::set_u24(d, 32..35, r.local_qpn);
                d[35] = r.responder_resources;
                d[39] = r.initiator_depth;
                d[43] = (r.transport_type & 3) << 1;
                be::set_u24(d, 44..47, r.starting_psn.value());
                d[47] = r.retry_count & 7;
                be::set_u16(d, 48..50, r.p_key);
                d[50] = r.path_mtu << 4 | (r.rnr_retry_count & 7);
                d[51] = (r.srq as u8) << 3;
                d[56..72].copy_from_slice(&r.primary_local_gid.octets());
                d[72..88].copy_from_slice(&r.primary_remote_gid.octets());
            }
            CmMessage::Rep(r) => {
                be::set_u32(d, 0..4, r.local_comm_id);
                be::set_u32(d, 4..8, r.remote_comm_id);
                be::set_u32(d, 8..12, r.local_qkey);
                be::set_u24(d, 12..15, r.local_qpn);
                be::set_u24(d, 20..23, r.starting_psn.value());
                d[24] = r.responder_resources;
                d[25] = r.initiator_depth;
                d[27] = r.rnr_retry_count << 5 | (r.srq as u8) << 4;
            }
            CmMessage::Rtu { local_comm_id, remote_comm_id }
            | CmMessage::Drep { local_comm_id, remote_comm_id } => {
                be::set_u32(d, 0..4, local_comm_id);
                be::set_u32(d, 4..8, remote_comm_id);
            }
            CmMessage::Dreq { local_comm_id, remote_comm_id, remote_qpn } => {
                be::set_u32(d, 0..4, local_comm_id);
                be::set_u32(d, 4..8, remote_comm_id);
                be::set_u24(d, 8..11, remote_qpn);
            }
            CmMessage::Rej { local_comm_id, remote_comm_id, msg_rejected, reason } => {
                be::set_u32(d, 0..4, local_comm_id);
                be::set_u32(d, 4..8, remote_comm_id);
                d[8] = msg_rejected << 6;
                be::set_u16(d, 10..12, reason);
            }
            CmMessage::Mra { local_comm_id, remote_comm_id, msg_mraed, service_timeout } => {
                be::set_u32(d, 0..4, local_comm_id);
                be::set_u32(d, 4..8, remote_comm_id);
                d[8] = msg_mraed << 6;
                d[9] = service_timeout << 3;
            }
        }
    }

    pub const fn attribute_id(&self) -> u16 {
        match self {
            CmMessage::Req(_) => attr::REQ,
            CmMessage::Rep(_) => attr::REP,
            CmMessage::Rtu { .. } => attr::RTU,
            CmMessage::Rej { .. } => attr::REJ,
            CmMessage::Mra { .. } => attr::MRA,
            CmMessage::Dreq { .. } => attr::DREQ,
            CmMessage::Drep { .. } => attr::DREP,
        }
    }
}

/// Where each CM message's private data sits in its attribute data (IBA 12.6):
/// REQ 92 bytes, REP 196, REJ 148, MRA/DREQ 220, RTU/DREP 224. What a shorter
/// (truncated) capture holds of it.
pub fn private_data(attribute_id: u16, d: &[u8]) -> Option<&[u8]> {
    let (at, len) = match attribute_id {
        attr::REQ => (140, 92),
        attr::REP => (36, 196),
        attr::REJ => (84, 148),
        attr::MRA | attr::DREQ => (12, 220),
        attr::RTU | attr::DREP => (8, 224),
        _ => return None,
    };
    d.get(at..d.len().min(at + len))
}

/// The header librdmacm puts at the start of a REQ's private data (the kernel's
/// `struct cma_hdr`), when the Service ID is in rdma_cm's IP range
/// (`0x0000_0000_01PP_pppp`: port space PP, port pppp). It takes 36 of the 92
/// bytes, so an rdma_cm application has 56 left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdmaCmHeader {
    /// rdma_cm port space (0x06 TCP, 0x11 UDP, 0x02 IPoIB, 0x13 IB).
    pub port_space: u8,
    /// The destination (listening) port, from the Service ID.
    pub dst_port: u16,
    /// The active side's source port.
    pub src_port: u16,
    pub src: std::net::IpAddr,
    pub dst: std::net::IpAddr,
}

impl RdmaCmHeader {
    pub const LEN: usize = 36;

    pub fn parse(service_id: u64, private: &[u8]) -> Option<RdmaCmHeader> {
        if service_id >> 24 != 0x01 || private.len() < Self::LEN {
            return None;
        }
        let addr = |at: usize| -> Option<std::net::IpAddr> {
            let mut a = [0u8; 16];
            a.copy_from_slice(&private[at..at + 16]);
            match private[1] >> 4 {
                4 => Some(std::net::Ipv4Addr::new(a[12], a[13], a[14], a[15]).into()),
                6 => Some(Ipv6Addr::from(a).into()),
                _ => None,
            }
        };
        Some(RdmaCmHeader {
            port_space: (service_id >> 16) as u8,
            dst_port: service_id as u16,
            src_port: be::u16(private, 2..4),
            src: addr(4)?,
            dst: addr(20)?,
        })
    }

    /// Writes the header into the first 36 bytes of `b`.
    pub fn emit(&self, b: &mut [u8]) {
        b[0] = 0;
        let put = |b: &mut [u8], at: usize, a: std::net::IpAddr| match a {
            std::net::IpAddr::V4(v4) => {
                b[at..at + 12].fill(0);
                b[at + 12..at + 16].copy_from_slice(&v4.octets());
            }
            std::net::IpAddr::V6(v6) => b[at..at + 16].copy_from_slice(&v6.octets()),
        };
        b[1] = if self.src.is_ipv4() { 4 << 4 } else { 6 << 4 };
        be::set_u16(b, 2..4, self.src_port);
        put(b, 4, self.src);
        put(b, 20, self.dst);
    }

    /// The Service ID rdma_cm uses for this port space and port.
    pub const fn service_id(port_space: u8, port: u16) -> u64 {
        0x0100_0000 | (port_space as u64) << 16 | port as u64
    }
}

/// `b` without its trailing zero bytes (private data is zero-padded to its field).
pub fn trim_zeros(b: &[u8]) -> &[u8] {
    let end = b.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
    &b[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> CmMessage {
        CmMessage::Req(CmReq {
            local_comm_id: 0x1234_5678,
            service_id: 0x0000_0106_0000_4e20,
            local_qkey: 0,
            local_qpn: 0x11,
            responder_resources: 4,
            initiator_depth: 4,
            transport_type: 0,
            starting_psn: Psn::new(0xabcdef),
            retry_count: 7,
            p_key: 0xffff,
            path_mtu: 3,
            rnr_retry_count: 7,
            srq: false,
            primary_local_gid: "::ffff:10.0.0.1".parse().unwrap(),
            primary_remote_gid: "::ffff:10.0.0.2".parse().unwrap(),
        })
    }

    #[test]
    fn cm_round_trips() {
        let msgs = [
            req(),
            CmMessage::Rep(CmRep {
                local_comm_id: 9,
                remote_comm_id: 0x1234_5678,
                local_qkey: 0,
                local_qpn: 0x12,
                starting_psn: Psn::new(77),
                responder_resources: 1,
                initiator_depth: 2,
                rnr_retry_count: 7,
                srq: true,
            }),
            CmMessage::Rtu { local_comm_id: 1, remote_comm_id: 2 },
            CmMessage::Rej { local_comm_id: 1, remote_comm_id: 2, msg_rejected: 0, reason: 28 },
            CmMessage::Mra {
                local_comm_id: 1,
                remote_comm_id: 2,
                msg_mraed: 1,
                service_timeout: 20,
            },
            CmMessage::Dreq { local_comm_id: 1, remote_comm_id: 2, remote_qpn: 0x12 },
            CmMessage::Drep { local_comm_id: 1, remote_comm_id: 2 },
        ];
        for m in msgs {
            let mut d = [0u8; 232];
            m.emit(&mut d);
            assert_eq!(CmMessage::parse(m.attribute_id(), &d).unwrap(), Some(m));
        }
        assert_eq!(CmMessage::parse(0x0001, &[0; 232]).unwrap(), None);
        assert!(CmMessage::parse(attr::REQ, &[0; 95]).is_err());
    }

    #[test]
    fn mad_header() {
        let h = MadRepr {
            base_version: 1,
            mgmt_class: CLASS_CM,
            class_version: 2,
            method: 0x03,
            status: 0,
            class_specific: 0,
            transaction_id: 0x0102_0304_0506_0708,
            attribute_id: attr::REQ,
            attribute_modifier: 0,
        };
        let mut b = [0xa5u8; 24];
        h.emit(&mut b);
        assert_eq!(MadRepr::parse(&b).unwrap(), h);
        b[0] = 2;
        assert!(MadRepr::parse(&b).is_err());
        assert!(MadRepr::parse(&b[..23]).is_err());
    }

    #[test]
    fn private_data_and_rdma_cm_header() {
        let mut d = [0u8; 232];
        req().emit(&mut d);
        let h = RdmaCmHeader {
            port_space: 0x06,
            dst_port: 18601,
            src_port: 40000,
            src: "10.0.0.2".parse().unwrap(),
            dst: "10.0.0.1".parse().unwrap(),
        };
        h.emit(&mut d[140..]);
        d[176..180].copy_from_slice(b"app!");
        let p = private_data(attr::REQ, &d).unwrap();
        assert_eq!(p.len(), 92);
        assert_eq!(RdmaCmHeader::parse(RdmaCmHeader::service_id(0x06, 18601), p), Some(h));
        // Not an rdma_cm Service ID: no header.
        assert_eq!(RdmaCmHeader::parse(0x1000_0000_0000_0001, p), None);
        assert_eq!(trim_zeros(&p[RdmaCmHeader::LEN..]), b"app!");
        assert_eq!(private_data(attr::REP, &d).map(<[u8]>::len), Some(196));
        assert_eq!(
            private_data(attr::RTU, &d[..100]).map(<[u8]>::len),
            Some(92),
            "truncated: what was captured"
        );
        assert_eq!(private_data(attr::REQ, &d[..100]), None);
        assert_eq!(private_data(0x0001, &d), None);
    }
}
