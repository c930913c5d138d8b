//! What our agents put in rdma_cm's private data: each side's MR table (address,
//! rkey, length), the way RDMA applications hand their buffers to the peer at
//! connect time. The active side has 56 bytes in the REQ (librdmacm takes 36 of the
//! 92 for its own header), the passive side 196 in the REP.
//!
//! ```text
//! 0..4   "roce"
//! 4      version (1)
//! 5      entries carried here
//! 6      MRs the endpoint has (more than carried when they do not fit)
//! 7      reserved
//! 8..    entries, 16 bytes each, in the endpoint's MR order:
//!        address u64, rkey u32, length u32 (big-endian)
//! ```
//! Received private data is zero-padded to its field; a peer that is not a `roce`
//! agent sends no magic, and then nothing is taken from it.
//!
//! Owns: the private-data layout above and its encoding and decoding. Imports: the
//! protocol's [`MrInfo`] (`crate::protocol`); nothing else.

use crate::protocol::MrInfo;

pub(crate) const MAGIC: &[u8; 4] = b"roce";
pub(crate) const VERSION: u8 = 1;
const HEADER: usize = 8;
const ENTRY: usize = 16;
/// Room for the application in a REQ and in a REP.
pub(crate) const REQ_ROOM: usize = 56;
pub(crate) const REP_ROOM: usize = 196;

/// One entry: where the peer's MR is and how to reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub addr: u64,
    pub rkey: u32,
    pub len: u32,
}

/// The private data for `mrs`, as many entries as fit in `room` bytes.
pub(crate) fn encode(mrs: &[MrInfo], room: usize) -> Vec<u8> {
    let fit = room.saturating_sub(HEADER) / ENTRY;
    let carried = mrs.len().min(fit).min(u8::MAX as usize);
    let mut b = Vec::with_capacity(HEADER + carried * ENTRY);
    b.extend_from_slice(MAGIC);
    b.push(VERSION);
    b.push(carried as u8);
    b.push(mrs.len().min(u8::MAX as usize) as u8);
    b.push(0);
    for m in &mrs[..carried] {
        b.extend_from_slice(&m.addr.to_be_bytes());
        b.extend_from_slice(&m.rkey.to_be_bytes());
        b.extend_from_slice(&(m.len.min(u32::MAX as u64) as u32).to_be_bytes());
    }
    b
}

/// The entries in received private data; `None` when it is not ours (no magic),
/// an error when it claims to be ours but is malformed.
pub(crate) fn decode(b: &[u8]) -> Result<Option<Vec<Entry>>, String> {
    if b.len() < HEADER || &b[..4] != MAGIC {
        return Ok(None);
    }
    if b[4] != VERSION {
        return Err(format!(
            "the peer's rdma_cm private data is version {}, this agent speaks {VERSION}",
            b[4]
        ));
    }
    let n = b[5] as usize;
    let need = HEADER + n * ENTRY;
    if b.len() < need {
        return Err(format!(
            "the peer's rdma_cm private data claims {n} MR entries in {} bytes",
            b.len()
        ));
    }
    let be = |at: usize, len: usize| b[at..at + len].iter().fold(0u64, |v, &x| v << 8 | x as u64);
    Ok(Some(
        (0..n)
            .map(|i| {
                let at = HEADER + i * ENTRY;
                Entry { addr: be(at, 8), rkey: be(at + 8, 4) as u32, len: be(at + 12, 4) as u32 }
            })
            .collect(),
    ))
}

/// Takes the peer's MR addresses and rkeys from what it sent over rdma_cm. The
/// controller's table gives the names (entry i is the peer's i-th MR); where the two
/// disagree the wire wins and the disagreement is reported. Returns how many MRs
/// the private data carried.
pub(crate) fn apply(peer_mrs: &mut [MrInfo], entries: &[Entry]) -> Result<usize, String> {
    if entries.len() > peer_mrs.len() {
        return Err(format!(
            "the peer sent {} MR entries over rdma_cm but the scenario gives it {}",
            entries.len(),
            peer_mrs.len()
        ));
    }
    for (m, e) in peer_mrs.iter_mut().zip(entries) {
        if e.len as u64 != m.len.min(u32::MAX as u64) {
            return Err(format!(
                "MR `{}`: the peer says over rdma_cm it is {} bytes, the scenario {}",
                m.name, e.len, m.len
            ));
        }
        m.addr = e.addr;
        m.rkey = e.rkey;
    }
    Ok(entries.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mr(i: u64) -> MrInfo {
        MrInfo {
            name: format!("m{i}"),
            addr: 0x5555_0000_1000 + i * 0x100,
            len: 32 + i,
            rkey: 0x100 + i as u32,
            lkey: 0,
        }
    }

    #[test]
    fn round_trip_through_zero_padded_fields() {
        let mrs: Vec<_> = (0..2).map(mr).collect();
        let b = encode(&mrs, REQ_ROOM);
        assert_eq!(b.len(), 8 + 2 * 16);
        let mut field = [0u8; REQ_ROOM];
        field[..b.len()].copy_from_slice(&b);
        let got = decode(&field).unwrap().unwrap();
        assert_eq!(
            got,
            vec![
                Entry { addr: 0x5555_0000_1000, rkey: 0x100, len: 32 },
                Entry { addr: 0x5555_0000_1100, rkey: 0x101, len: 33 }
            ]
        );
        let mut peer: Vec<_> =
            mrs.iter().map(|m| MrInfo { addr: 0, rkey: 0, ..m.clone() }).collect();
        assert_eq!(apply(&mut peer, &got), Ok(2));
        assert_eq!(peer, mrs);
    }

    #[test]
    fn only_what_fits_is_carried() {
        let mrs: Vec<_> = (0..20).map(mr).collect();
        let req = encode(&mrs, REQ_ROOM);
        assert!(req.len() <= REQ_ROOM);
        assert_eq!((req[5], req[6]), (3, 20), "3 of 20 fit in a REQ");
        let rep = encode(&mrs, REP_ROOM);
        assert!(rep.len() <= REP_ROOM);
        assert_eq!(rep[5], 11, "11 fit in a REP");
        // The rest keep what the controller relayed.
        let mut peer = mrs.clone();
        peer[5].rkey = 0xdead;
        apply(&mut peer, &decode(&req).unwrap().unwrap()).unwrap();
        assert_eq!(peer[5].rkey, 0xdead);
    }

    #[test]
    fn foreign_or_broken_private_data() {
        assert_eq!(decode(&[0; 56]), Ok(None), "no magic: not ours, nothing taken");
        assert_eq!(decode(b"roce"), Ok(None), "shorter than the header");
        let mut b = encode(&[mr(0)], REQ_ROOM);
        b[4] = 9;
        assert!(decode(&b).unwrap_err().contains("version 9"));
        b[4] = VERSION;
        b[5] = 3;
        assert!(decode(&b).unwrap_err().contains("claims 3 MR entries"));
        let e = decode(&encode(&[mr(0), mr(1)], REQ_ROOM)).unwrap().unwrap();
        assert!(apply(&mut [mr(0)], &e).unwrap_err().contains("2 MR entries"));
        assert!(apply(&mut [mr(1), mr(1)], &e).unwrap_err().contains("33"));
    }
}
