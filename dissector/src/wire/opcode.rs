//! The opcode table: for every BTH opcode, its name, which extension headers follow
//! the BTH (in wire order) and what the operation means to flow analysis.
//!
//! One table, indexed by opcode, built at compile time from the 32 operations of IBA
//! Vol 1 table 38 and the rules of each transport (RD adds RDETH and DETH, XRC adds
//! XRCETH on requests, UD allows only SEND Only [with Immediate] plus DETH). No code
//! elsewhere decides per opcode which headers to expect: it walks [`Headers::ORDER`].
//!
//! Owns: the opcode table, transports, header sets and operation kinds. Imports: nothing
//! of the project.

use core::fmt;

/// A BTH opcode: transport in bits 7–5, operation in bits 4–0.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Opcode(pub u8);

/// The transport service named by the top three opcode bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    Rc,
    Uc,
    Rd,
    Ud,
    /// RoCEv2 Congestion Notification Packet (opcode 0x81).
    Cnp,
    Xrc,
    /// mlx5's Dynamically Connected transport: RD-range opcodes (0x40–0x5F) with
    /// the DC header layout ([`Opcode::dc_info`]). Never named by the top opcode
    /// bits alone ([`Opcode::transport`] says RD): the frame decoder decides.
    Dc,
    /// 0xC0–0xFF: manufacturer specific (e.g. DC transport on mlx5).
    Vendor,
}

impl Transport {
    pub const fn abbrev(self) -> &'static str {
        match self {
            Transport::Rc => "RC",
            Transport::Uc => "UC",
            Transport::Rd => "RD",
            Transport::Ud => "UD",
            Transport::Cnp => "CNP",
            Transport::Xrc => "XRC",
            Transport::Dc => "DC",
            Transport::Vendor => "VENDOR",
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.abbrev())
    }
}

/// The set of headers that follow the BTH.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Headers(u16);

impl Headers {
    pub const NONE: Headers = Headers(0);
    pub const XRCETH: Headers = Headers(1 << 0);
    /// The 8 bytes mlx5's Dynamically Connected transport puts after the BTH of
    /// every packet with an RD-range opcode (see [`Opcode::dc_info`]).
    pub const DCETH: Headers = Headers(1 << 1);
    /// The 16-byte header of a DC connect packet (opcode 0x55 with SE clear).
    pub const DCCETH: Headers = Headers(1 << 2);
    pub const RDETH: Headers = Headers(1 << 3);
    pub const DETH: Headers = Headers(1 << 4);
    pub const FETH: Headers = Headers(1 << 5);
    pub const RETH: Headers = Headers(1 << 6);
    pub const ATOMICETH: Headers = Headers(1 << 7);
    pub const AETH: Headers = Headers(1 << 8);
    pub const ATOMICACKETH: Headers = Headers(1 << 9);
    pub const IMMDT: Headers = Headers(1 << 10);
    pub const IETH: Headers = Headers(1 << 11);
    /// The 16 reserved bytes of a CNP.
    pub const CNP_RESERVED: Headers = Headers(1 << 12);
    /// A payload follows the headers (it may be empty).
    pub const PAYLOAD: Headers = Headers(1 << 13);

    /// Extension headers in the order they follow the BTH, with their sizes.
    pub const ORDER: [(Headers, usize); 13] = [
        (Headers::XRCETH, 4),
        (Headers::DCETH, 8),
        (Headers::DCCETH, 16),
        (Headers::RDETH, 4),
        (Headers::DETH, 8),
        (Headers::FETH, 4),
        (Headers::RETH, 16),
        (Headers::ATOMICETH, 28),
        (Headers::AETH, 4),
        (Headers::ATOMICACKETH, 8),
        (Headers::IMMDT, 4),
        (Headers::IETH, 4),
        (Headers::CNP_RESERVED, 16),
    ];

    pub const fn union(self, other: Headers) -> Headers {
        Headers(self.0 | other.0)
    }
    /// The extension headers in the set, in wire order (the bits are laid out in
    /// [`Headers::ORDER`] order, so this walks only the bits that are set).
    pub fn iter(self) -> impl Iterator<Item = (Headers, usize)> {
        let mut bits = self.0 & ((1 << Headers::ORDER.len()) - 1);
        core::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            Some(Headers::ORDER[i])
        })
    }
    pub const fn contains(self, other: Headers) -> bool {
        self.0 & other.0 == other.0
    }
    /// Total length of the extension headers in the set (payload excluded).
    pub const fn len(self) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < Self::ORDER.len() {
            if self.contains(Self::ORDER[i].0) {
                n += Self::ORDER[i].1;
            }
            i += 1;
        }
        n
    }
    pub const fn is_empty(self) -> bool {
        self.0 & !Headers::PAYLOAD.0 == 0
    }
    /// The header's short name, as the spec writes it.
    pub const fn name(self) -> &'static str {
        match self.0 {
            x if x == Headers::XRCETH.0 => "XRCETH",
            x if x == Headers::DCETH.0 => "DCETH",
            x if x == Headers::DCCETH.0 => "DCCETH",
            x if x == Headers::RDETH.0 => "RDETH",
            x if x == Headers::DETH.0 => "DETH",
            x if x == Headers::FETH.0 => "FETH",
            x if x == Headers::RETH.0 => "RETH",
            x if x == Headers::ATOMICETH.0 => "AtomicETH",
            x if x == Headers::AETH.0 => "AETH",
            x if x == Headers::ATOMICACKETH.0 => "AtomicAckETH",
            x if x == Headers::IMMDT.0 => "ImmDt",
            x if x == Headers::IETH.0 => "IETH",
            x if x == Headers::CNP_RESERVED.0 => "CNP reserved",
            x if x == Headers::PAYLOAD.0 => "payload",
            _ => "headers",
        }
    }
}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut l = f.debug_set();
        for (h, _) in Headers::ORDER {
            if self.contains(h) {
                l.entry(&format_args!("{}", h.name()));
            }
        }
        if self.contains(Headers::PAYLOAD) {
            l.entry(&format_args!("payload"));
        }
        l.finish()
    }
}

/// What an operation means, for flow analysis.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Kind(u16);

impl Kind {
    pub const REQUEST: Kind = Kind(1 << 0);
    pub const RESPONSE: Kind = Kind(1 << 1);
    pub const SEND: Kind = Kind(1 << 2);
    pub const WRITE: Kind = Kind(1 << 3);
    pub const READ: Kind = Kind(1 << 4);
    pub const ATOMIC: Kind = Kind(1 << 5);
    pub const ACK: Kind = Kind(1 << 6);
    pub const FIRST: Kind = Kind(1 << 7);
    pub const MIDDLE: Kind = Kind(1 << 8);
    pub const LAST: Kind = Kind(1 << 9);
    pub const ONLY: Kind = Kind(Kind::FIRST.0 | Kind::LAST.0);
    /// Consumes a receive WQE at the responder (SENDs, and WRITE with immediate).
    pub const RECV: Kind = Kind(1 << 10);
    pub const IMMEDIATE: Kind = Kind(1 << 11);
    pub const INVALIDATE: Kind = Kind(1 << 12);
    pub const FLUSH: Kind = Kind(1 << 13);
    pub const ATOMIC_WRITE: Kind = Kind(1 << 14);
    pub const RESYNC: Kind = Kind(1 << 15);

    pub const fn union(self, other: Kind) -> Kind {
        Kind(self.0 | other.0)
    }
    pub const fn contains(self, other: Kind) -> bool {
        self.0 & other.0 == other.0
    }
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Kind({:#06x})", self.0)
    }
}

/// One row of the opcode table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpInfo {
    pub opcode: Opcode,
    pub transport: Transport,
    /// The operation's name without the transport, e.g. `RDMA WRITE Only`.
    pub name: &'static str,
    /// The extension headers after the BTH, and whether a payload follows.
    pub headers: Headers,
    pub kind: Kind,
}

impl OpInfo {
    pub const fn is_request(&self) -> bool {
        self.kind.contains(Kind::REQUEST)
    }
    pub const fn is_response(&self) -> bool {
        self.kind.contains(Kind::RESPONSE)
    }
    pub const fn is(&self, k: Kind) -> bool {
        self.kind.contains(k)
    }
}

// Transports an operation is defined for.
const RC: u8 = 1;
const UC: u8 = 2;
const RD: u8 = 4;
const UD: u8 = 8;
const XRC: u8 = 16;

struct Op {
    name: &'static str,
    headers: Headers,
    kind: Kind,
    on: u8,
}

const fn op(name: &'static str, headers: Headers, kind: Kind, on: u8) -> Option<Op> {
    Some(Op { name, headers, kind, on })
}

const H: Headers = Headers::NONE;
const P: Headers = Headers::PAYLOAD;
const RETH: Headers = Headers::RETH;
const IMM: Headers = Headers::IMMDT;
const AETH: Headers = Headers::AETH;
const REQ: Kind = Kind::REQUEST;
const RESP: Kind = Kind::RESPONSE;
const ALL: u8 = RC | UC | RD | XRC;
const RELIABLE: u8 = RC | RD | XRC;

const fn k(a: Kind, b: Kind, c: Kind) -> Kind {
    a.union(b).union(c)
}

/// The 32 operations (low five opcode bits), IBA Vol 1 table 38, plus FLUSH and
/// ATOMIC WRITE (IBA 1.5 / RoCEv2 memory placement extensions).
const OPS: [Option<Op>; 32] = {
    use Kind as K;
    let send = REQ.union(K::SEND).union(K::RECV);
    let write = REQ.union(K::WRITE);
    let read_resp = RESP.union(K::READ);
    [
        op("SEND First", P, k(send, K::FIRST, K(0)), ALL),
        op("SEND Middle", P, k(send, K::MIDDLE, K(0)), ALL),
        op("SEND Last", P, k(send, K::LAST, K(0)), ALL),
        op("SEND Last with Immediate", IMM.union(P), k(send, K::LAST, K::IMMEDIATE), ALL),
        op("SEND Only", P, k(send, K::ONLY, K(0)), ALL | UD),
        op("SEND Only with Immediate", IMM.union(P), k(send, K::ONLY, K::IMMEDIATE), ALL | UD),
        op("RDMA WRITE First", RETH.union(P), k(write, K::FIRST, K(0)), ALL),
        op("RDMA WRITE Middle", P, k(write, K::MIDDLE, K(0)), ALL),
        op("RDMA WRITE Last", P, k(write, K::LAST, K(0)), ALL),
        op(
            "RDMA WRITE Last with Immediate",
            IMM.union(P),
            k(write, K::LAST, K::IMMEDIATE.union(K::RECV)),
            ALL,
        ),
        op("RDMA WRITE Only", RETH.union(P), k(write, K::ONLY, K(0)), ALL),
        op(
            "RDMA WRITE Only with Immediate",
            RETH.union(IMM).union(P),
            k(write, K::ONLY, K::IMMEDIATE.union(K::RECV)),
            ALL,
        ),
        op("RDMA READ Request", RETH, k(REQ, K::READ, K::ONLY), RELIABLE),
        op("RDMA READ Response First", AETH.union(P), k(read_resp, K::FIRST, K(0)), RELIABLE),
        op("RDMA READ Response Middle", P, k(read_resp, K::MIDDLE, K(0)), RELIABLE),
        op("RDMA READ Response Last", AETH.union(P), k(read_resp, K::LAST, K(0)), RELIABLE),
        op("RDMA READ Response Only", AETH.union(P), k(read_resp, K::ONLY, K(0)), RELIABLE),
        op("Acknowledge", AETH, k(RESP, K::ACK, K(0)), RELIABLE),
        op(
            "ATOMIC Acknowledge",
            AETH.union(Headers::ATOMICACKETH),
            k(RESP, K::ATOMIC, K::ACK),
            RELIABLE,
        ),
        op("CmpSwap", Headers::ATOMICETH, k(REQ, K::ATOMIC, K::ONLY), RELIABLE),
        op("FetchAdd", Headers::ATOMICETH, k(REQ, K::ATOMIC, K::ONLY), RELIABLE),
        op("RESYNC", H, k(REQ, K::RESYNC, K::ONLY), RD),
        op(
            "SEND Last with Invalidate",
            Headers::IETH.union(P),
            k(send, K::LAST, K::INVALIDATE),
            RC | XRC,
        ),
        op(
            "SEND Only with Invalidate",
            Headers::IETH.union(P),
            k(send, K::ONLY, K::INVALIDATE),
            RC | XRC,
        ),
        None,
        None,
        None,
        None,
        op("FLUSH", Headers::FETH.union(RETH), k(REQ, K::FLUSH, K::ONLY), RC | RD),
        op("ATOMIC WRITE", RETH.union(P), k(REQ, K::ATOMIC_WRITE, K::ONLY), RC | RD),
        None,
        None,
    ]
};

const fn build() -> [Option<OpInfo>; 256] {
    let mut t: [Option<OpInfo>; 256] = [None; 256];
    let transports = [
        (0x00u8, Transport::Rc, RC),
        (0x20, Transport::Uc, UC),
        (0x40, Transport::Rd, RD),
        (0x60, Transport::Ud, UD),
        (0xA0, Transport::Xrc, XRC),
    ];
    let mut ti = 0;
    while ti < transports.len() {
        let (base, transport, bit) = transports[ti];
        let mut i = 0;
        while i < 32 {
            if let Some(o) = &OPS[i] {
                if o.on & bit != 0 {
                    let mut headers = o.headers;
                    match transport {
                        // RD: RDETH on every packet, DETH on requests (IBA 9.2.2).
                        Transport::Rd => {
                            headers = headers.union(Headers::RDETH);
                            if o.kind.contains(REQ) {
                                headers = headers.union(Headers::DETH);
                            }
                        }
                        Transport::Ud => headers = headers.union(Headers::DETH),
                        // XRC: XRCETH right after the BTH on requests (IBA A14).
                        Transport::Xrc if o.kind.contains(REQ) => {
                            headers = headers.union(Headers::XRCETH)
                        }
                        _ => {}
                    }
                    let opcode = base | i as u8;
                    t[opcode as usize] = Some(OpInfo {
                        opcode: Opcode(opcode),
                        transport,
                        name: o.name,
                        headers,
                        kind: o.kind,
                    });
                }
            }
            i += 1;
        }
        ti += 1;
    }
    t[0x81] = Some(OpInfo {
        opcode: Opcode(0x81),
        transport: Transport::Cnp,
        name: "CNP",
        headers: Headers::CNP_RESERVED,
        kind: Kind(0),
    });
    t
}

static TABLE: [Option<OpInfo>; 256] = build();

/// The layout tshark 4.0 gives every RD-range opcode (packet-infiniband.c treats
/// them all as mlx5 DC): 8 bytes (DCETH) right after the BTH, then the headers the
/// RD opcode names, except that the Acknowledge (0x51) carries no RDETH; 0x55
/// (RESYNC in RD) is a DC connect with a 16-byte DCCETH when SE is clear.
const fn build_dc() -> [Option<OpInfo>; 32] {
    let mut t: [Option<OpInfo>; 32] = [None; 32];
    let mut i = 0;
    while i < 32 {
        if let Some(o) = &OPS[i] {
            // FLUSH and ATOMIC WRITE came after DC and tshark 4.0 knows neither.
            if o.on & RD != 0 && i < 0x1C {
                let mut headers = Headers::DCETH.union(o.headers);
                if o.kind.contains(REQ) {
                    headers = headers.union(Headers::RDETH).union(Headers::DETH);
                } else if i != 0x11 {
                    headers = headers.union(Headers::RDETH);
                }
                let (name, kind) = if i == 0x15 { ("CONNECT", Kind(0)) } else { (o.name, o.kind) };
                if i == 0x15 {
                    headers = Headers::DCETH.union(Headers::DCCETH).union(Headers::PAYLOAD);
                }
                t[i] = Some(OpInfo {
                    opcode: Opcode(0x40 | i as u8),
                    transport: Transport::Dc,
                    name,
                    headers,
                    kind,
                });
            }
        }
        i += 1;
    }
    t
}

static DC_TABLE: [Option<OpInfo>; 32] = build_dc();

/// 0x55 with SE set: tshark shows the bytes after the DCETH as payload.
static DC_0X55_SE: OpInfo = OpInfo {
    opcode: Opcode(0x55),
    transport: Transport::Dc,
    name: "Unknown",
    headers: Headers::DCETH.union(Headers::PAYLOAD),
    kind: Kind(0),
};

impl Opcode {
    pub const RC_SEND_ONLY: Opcode = Opcode(0x04);
    pub const RC_RDMA_WRITE_ONLY: Opcode = Opcode(0x0A);
    pub const RC_ACKNOWLEDGE: Opcode = Opcode(0x11);
    pub const UD_SEND_ONLY: Opcode = Opcode(0x64);
    pub const CNP: Opcode = Opcode(0x81);

    /// The table row, or `None` for reserved and manufacturer-specific opcodes.
    #[inline]
    pub fn info(self) -> Option<&'static OpInfo> {
        TABLE[self.0 as usize].as_ref()
    }

    pub const fn transport(self) -> Transport {
        match self.0 >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            2 => Transport::Rd,
            3 => Transport::Ud,
            4 => Transport::Cnp,
            5 => Transport::Xrc,
            _ => Transport::Vendor,
        }
    }

    /// Every opcode the table knows, in numeric order.
    pub fn all() -> impl Iterator<Item = &'static OpInfo> {
        TABLE.iter().flatten()
    }

    /// The row of an RD-range opcode (0x40–0x5F) read as mlx5 Dynamically Connected
    /// transport, the way tshark 4.0 reads every such opcode; `se` is the BTH's
    /// solicited-event bit, which tells a DC connect (0x55, SE clear) from other
    /// 0x55 packets. `None` outside the RD range and for opcodes RD does not define.
    pub fn dc_info(self, se: bool) -> Option<&'static OpInfo> {
        if self.transport() != Transport::Rd {
            return None;
        }
        if self.0 == 0x55 && se {
            return Some(&DC_0X55_SE);
        }
        DC_TABLE[(self.0 & 0x1F) as usize].as_ref()
    }

    /// Every DC row, in numeric order (0x55 once, as the connect).
    pub fn all_dc() -> impl Iterator<Item = &'static OpInfo> {
        DC_TABLE.iter().flatten()
    }

    /// The opcode `name` names, the way `roce decode` prints it. A name with its
    /// transport (`UD SEND Only`, `CNP`) is taken as written; one without
    /// (`RDMA WRITE Only`) is taken in `transport`. Case and runs of white space do
    /// not matter. `None` when no opcode has that name (in that transport).
    pub fn from_name(name: &str, transport: Transport) -> Option<Opcode> {
        let want: Vec<String> = name.split_whitespace().map(str::to_ascii_lowercase).collect();
        let same = |text: &str| {
            text.split_whitespace().map(str::to_ascii_lowercase).eq(want.iter().cloned())
        };
        Opcode::all()
            .find(|i| same(&i.opcode.to_string()) || (i.transport == transport && same(i.name)))
            .map(|i| i.opcode)
    }

    /// The operation names (without transport) of `transport`'s opcodes, in
    /// numeric order: what a `from_name` typo is compared with.
    pub fn names(transport: Transport) -> impl Iterator<Item = &'static str> {
        Opcode::all().filter(move |i| i.transport == transport).map(|i| i.name)
    }

    /// Some transport has an operation of this name (`SEND Only`, `Acknowledge`).
    pub fn is_operation_name(name: &str) -> bool {
        Opcode::all().any(|i| i.name == name)
    }
}

impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Opcode({:#04x})", self.0)
    }
}

/// `RC RDMA WRITE Only`, `DC Acknowledge`, `CNP`.
impl fmt::Display for OpInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.transport {
            Transport::Cnp => f.write_str("CNP"),
            t => write!(f, "{t} {}", self.name),
        }
    }
}

/// `RC RDMA WRITE Only`; unknown opcodes print as `RC Unknown (0x18)` or
/// `Vendor-specific (0xc5)`. RD-range opcodes print as RD: a frame read as DC
/// prints its [`OpInfo`] instead.
impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.info() {
            Some(i) => i.fmt(f),
            None if self.transport() == Transport::Vendor => {
                write!(f, "Vendor-specific ({:#04x})", self.0)
            }
            None => write!(f, "{} Unknown ({:#04x})", self.transport(), self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcodes_by_name() {
        assert_eq!(Opcode::from_name("RDMA WRITE Only", Transport::Rc), Some(Opcode(0x0a)));
        assert_eq!(Opcode::from_name("rdma  write only", Transport::Uc), Some(Opcode(0x2a)));
        assert_eq!(Opcode::from_name("UD SEND Only", Transport::Rc), Some(Opcode(0x64)));
        assert_eq!(Opcode::from_name("CNP", Transport::Rc), Some(Opcode(0x81)));
        assert_eq!(Opcode::from_name("RDMA READ Request", Transport::Uc), None, "UC has no READ");
        assert_eq!(Opcode::from_name("RDMA WRIT Only", Transport::Rc), None);
        for i in Opcode::all() {
            assert_eq!(
                Opcode::from_name(&i.opcode.to_string(), Transport::Rc),
                Some(i.opcode),
                "{}",
                i.opcode
            );
            if i.transport != Transport::Cnp {
                assert_eq!(Opcode::from_name(i.name, i.transport), Some(i.opcode));
            }
        }
        assert!(Opcode::names(Transport::Uc).all(|n| n != "RDMA READ Request"));
        assert!(Opcode::is_operation_name("Acknowledge") && !Opcode::is_operation_name("ACK"));
    }

    fn ops_with(h: Headers) -> Vec<u8> {
        Opcode::all().filter(|i| i.headers.contains(h)).map(|i| i.opcode.0).collect()
    }

    // Wireshark's packet-infiniband.c keeps its own per-header opcode lists
    // (`opCode_RETH`, `opCode_IMMDT`, …). These are those groups, written out from
    // that file independently of our table; the two sources must agree (FLUSH,
    // ATOMIC WRITE, XRC and CNP are not in Wireshark 4.0 and are checked separately).
    const WIRESHARK_RETH: &[u8] =
        &[0x06, 0x0A, 0x0B, 0x0C, 0x26, 0x2A, 0x2B, 0x46, 0x4A, 0x4B, 0x4C];
    const WIRESHARK_IMMDT: &[u8] =
        &[0x03, 0x05, 0x09, 0x0B, 0x23, 0x25, 0x29, 0x2B, 0x43, 0x45, 0x49, 0x4B, 0x65];
    const WIRESHARK_AETH: &[u8] = &[0x0D, 0x0F, 0x10, 0x11, 0x12, 0x4D, 0x4F, 0x50, 0x51, 0x52];
    const WIRESHARK_ATOMICETH: &[u8] = &[0x13, 0x14, 0x53, 0x54];
    const WIRESHARK_DETH: &[u8] = &[
        0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4A, 0x4B, 0x4C, 0x53, 0x54,
        0x55, 0x64, 0x65,
    ];
    const WIRESHARK_IETH: &[u8] = &[0x16, 0x17];

    fn without_new(mut v: Vec<u8>) -> Vec<u8> {
        v.retain(|&o| {
            !matches!(Opcode(o).transport(), Transport::Xrc | Transport::Cnp)
                && !matches!(o & 0x1F, 0x1C | 0x1D)
        });
        v
    }

    #[test]
    fn header_groups_agree_with_wireshark() {
        assert_eq!(without_new(ops_with(Headers::RETH)), WIRESHARK_RETH);
        assert_eq!(without_new(ops_with(Headers::IMMDT)), WIRESHARK_IMMDT);
        assert_eq!(without_new(ops_with(Headers::AETH)), WIRESHARK_AETH);
        assert_eq!(without_new(ops_with(Headers::ATOMICETH)), WIRESHARK_ATOMICETH);
        assert_eq!(without_new(ops_with(Headers::DETH)), WIRESHARK_DETH);
        assert_eq!(without_new(ops_with(Headers::IETH)), WIRESHARK_IETH);
    }

    #[test]
    fn extensions_beyond_wireshark() {
        let flush = Opcode(0x1C).info().unwrap();
        assert_eq!(flush.headers, Headers::FETH.union(Headers::RETH));
        assert_eq!(flush.headers.len(), 20);
        let aw = Opcode(0x1D).info().unwrap();
        assert!(aw.headers.contains(Headers::RETH.union(Headers::PAYLOAD)));
        assert_eq!(ops_with(Headers::XRCETH).len(), 17, "XRC requests carry XRCETH");
        assert!(!Opcode(0xB1).info().unwrap().headers.contains(Headers::XRCETH));
        let cnp = Opcode::CNP.info().unwrap();
        assert_eq!(cnp.headers.len(), 16);
        assert!(Opcode(0x80).info().is_none());
    }

    /// The DC layouts, written out from packet-infiniband.c's header sequences
    /// (bthSize 20 for every RD-range opcode, then its RD case), independently of
    /// `build_dc`.
    #[test]
    fn dc_rows_follow_tshark() {
        let h = |op: u8| Opcode(op).dc_info(false).unwrap().headers;
        let (dc, rd, de) = (Headers::DCETH, Headers::RDETH, Headers::DETH);
        let req = dc.union(rd).union(de);
        assert_eq!(h(0x44), req.union(Headers::PAYLOAD), "SEND Only");
        assert_eq!(h(0x4A), req.union(Headers::RETH).union(Headers::PAYLOAD), "RDMA WRITE Only");
        assert_eq!(h(0x4B), req.union(Headers::RETH).union(Headers::IMMDT).union(Headers::PAYLOAD));
        assert_eq!(h(0x4C), req.union(Headers::RETH), "READ Request");
        assert_eq!(
            h(0x50),
            dc.union(rd).union(Headers::AETH).union(Headers::PAYLOAD),
            "READ Response Only"
        );
        assert_eq!(h(0x4E), dc.union(rd).union(Headers::PAYLOAD), "READ Response Middle");
        assert_eq!(h(0x51), dc.union(Headers::AETH), "tshark reads no RDETH on an Acknowledge");
        assert_eq!(h(0x52), dc.union(rd).union(Headers::AETH).union(Headers::ATOMICACKETH));
        assert_eq!(h(0x53), req.union(Headers::ATOMICETH));
        assert_eq!(h(0x55), dc.union(Headers::DCCETH).union(Headers::PAYLOAD), "connect");
        assert_eq!(Opcode(0x55).dc_info(true).unwrap().headers, dc.union(Headers::PAYLOAD));
        assert_eq!(Opcode(0x4A).dc_info(false).unwrap().to_string(), "DC RDMA WRITE Only");
        assert_eq!(Opcode(0x4A).to_string(), "RD RDMA WRITE Only");
        assert!(Opcode(0x0A).dc_info(false).is_none() && Opcode(0x56).dc_info(false).is_none());
        assert_eq!(Opcode::all_dc().count(), 22);
        for i in Opcode::all_dc() {
            assert_eq!(i.transport, Transport::Dc);
            assert_eq!(i.opcode.transport(), Transport::Rd, "{i}");
            assert!(i.headers.iter().next() == Some((Headers::DCETH, 8)), "{i}: DCETH first");
        }
    }

    #[test]
    fn order_matches_bits() {
        for (i, (h, _)) in Headers::ORDER.iter().enumerate() {
            assert_eq!(h.0, 1 << i, "{}", h.name());
        }
        let f = Opcode(0x1C).info().unwrap().headers;
        assert_eq!(f.iter().map(|(h, _)| h.name()).collect::<Vec<_>>(), ["FETH", "RETH"]);
    }

    #[test]
    fn names_and_unknowns() {
        assert_eq!(Opcode(0x0A).to_string(), "RC RDMA WRITE Only");
        assert_eq!(Opcode(0x64).to_string(), "UD SEND Only");
        assert_eq!(Opcode(0x81).to_string(), "CNP");
        assert_eq!(Opcode(0x18).to_string(), "RC Unknown (0x18)");
        assert_eq!(Opcode(0x2C).to_string(), "UC Unknown (0x2c)");
        assert_eq!(Opcode(0xC5).to_string(), "Vendor-specific (0xc5)");
        assert_eq!(Opcode(0x66).info(), None, "UD has only SEND Only [with Immediate]");
    }

    #[test]
    fn table_kinds_are_consistent() {
        for i in Opcode::all() {
            if i.transport == Transport::Cnp {
                continue;
            }
            assert!(i.is_request() ^ i.is_response(), "{}", i.opcode);
            assert!(i.opcode.info().is_some());
            if i.is(Kind::IMMEDIATE) {
                assert!(i.headers.contains(Headers::IMMDT), "{}", i.opcode);
            }
            if i.is(Kind::FIRST) && i.is(Kind::WRITE) {
                assert!(i.headers.contains(Headers::RETH), "{}", i.opcode);
            }
        }
        assert_eq!(Opcode::all().count(), 25 + 12 + 24 + 2 + 23 + 1);
    }

    /// The table names each row's transport itself; the top three bits must agree.
    #[test]
    fn top_bits_name_each_rows_transport() {
        for i in Opcode::all() {
            assert_eq!(i.opcode.transport(), i.transport, "{}", i.opcode);
        }
        for o in 0xC0..=0xFF {
            assert_eq!(Opcode(o).transport(), Transport::Vendor);
        }
        assert_eq!(Opcode(0x9F).transport(), Transport::Cnp);
    }
}
