//! A port of the switch: where frames come in and go out. Either one end of the
//! lab's UDP wire (a VM's NIC backend is on the other end), or a real Ethernet
//! interface, read and written whole frames at a time through an `AF_PACKET`
//! socket: a NIC port cabled to a host under test, a VM's tap, one end of a veth
//! pair. On an interface the switch is a bump in the wire: it takes in every
//! frame the interface receives (promiscuous, whatever the destination MAC) and
//! puts every frame it forwards out of the other port as it came.
//!
//! A frame whose TCP or UDP checksum its sender left to the hardware (a local
//! sender on a veth or tap: the kernel says so) has it completed on the way,
//! as a NIC would have: forwarded unfinished, the receiver would drop it.
//!
//! Opening an interface checks what would otherwise fail silently later: that it
//! exists, is up, may be opened (`CAP_NET_RAW`), and can carry a RoCE packet of
//! the smallest path MTU.
//!
//! An interface's frames are read out of its receive ring ([`ring`](super::ring)).
//!
//! Owns: [`Port`], [`LinkPort`], [`Burst`], [`PortError`], [`LinkWatch`] and [`LinkState`]. Imports: `ring`
//! (the receive ring), `sockopt` (the `SOL_PACKET` option call); dissector's checksum completion.
//! The `AF_PACKET` calls nix does not wrap (binding to an interface, joining
//! promiscuous mode, ignoring our own sends, the drop statistics) are `libc`
//! calls here, each with its safety argument.
use std::cell::Cell;
use std::fmt;
use std::io;
use std::mem;
use std::net::UdpSocket;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use nix::sys::socket::{setsockopt, sockopt};

use super::ring::RxRing;

/// An interface's send buffer: a burst must fit while the driver is busy
/// (what it receives goes to its ring instead).
const BUFFER: usize = 8 << 20;

/// The smallest Ethernet MTU that carries a RoCEv2 packet of IB MTU 1024, the
/// smallest path MTU in common use: IPv4 (20) + UDP (8) + BTH (12) + RETH (16) +
/// 1024 bytes + ICRC (4).
pub const MIN_MTU: u32 = 1084;

/// The most frames [`Port::send_batch`] hands the kernel in one call.
pub const SEND_BATCH: usize = 64;

/// One side of the switch.
#[derive(Debug)]
pub enum Port {
    /// The switch's end of a connected UDP socket pair: one datagram, one frame.
    Udp(UdpSocket),
    /// A network interface.
    Link(LinkPort),
}

impl Port {
    /// The frames waiting, up to a burst's worth: from a UDP port in one system
    /// call (`recvmmsg`), from an interface out of its receive ring. How many
    /// `burst` now holds, or `WouldBlock` when none was (an interface's
    /// pending error, such as `ENETDOWN`, instead when it has one).
    pub fn recv_burst(&self, burst: &mut Burst) -> io::Result<usize> {
        match self {
            Port::Udp(s) => burst.fill(s.as_fd()),
            Port::Link(l) => match burst.fill_with(|slot| l.take(slot)) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(l.pending_error()),
                r => r,
            },
        }
    }

    /// Sends the first of `frames` and as many after it as the socket takes,
    /// up to [`SEND_BATCH`], in one system call (`sendmmsg`): how many went, at
    /// least one, or why the first could not. Nothing is allocated.
    pub fn send_batch(&self, frames: &[&[u8]]) -> io::Result<usize> {
        let frames = &frames[..frames.len().min(SEND_BATCH)];
        let none = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
        let mut iovs = [none; SEND_BATCH];
        for (iov, f) in iovs.iter_mut().zip(frames) {
            *iov = libc::iovec { iov_base: f.as_ptr().cast_mut().cast(), iov_len: f.len() };
        }
        // SAFETY: mmsghdr is plain data; zero is valid for every field.
        let mut msgs: [libc::mmsghdr; SEND_BATCH] = unsafe { mem::zeroed() };
        for (m, iov) in msgs.iter_mut().zip(iovs.iter_mut()).take(frames.len()) {
            m.msg_hdr.msg_iov = iov;
            m.msg_hdr.msg_iovlen = 1;
        }
        // At most SEND_BATCH (64): the conversion cannot fail.
        let count = libc::c_uint::try_from(frames.len()).unwrap_or(0);
        // SAFETY: each of the first `count` headers points to one iovec over a
        // frame valid for reads of its length (the kernel only reads through
        // it), all alive for the duration of the call; no address: the socket is
        // connected or bound.
        let n = unsafe { libc::sendmmsg(self.as_fd().as_raw_fd(), msgs.as_mut_ptr(), count, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// Frames the kernel dropped on this port because the switch did not read
    /// them in time, since it was opened (UDP ports: counted for the whole wire
    /// by [`socket_drops`](super::socket_drops) instead, so 0 here).
    pub(super) fn drops(&self) -> u64 {
        match self {
            Port::Udp(_) => 0,
            Port::Link(l) => l.drops(),
        }
    }
}

impl AsFd for Port {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Port::Udp(s) => s.as_fd(),
            Port::Link(l) => l.fd.as_fd(),
        }
    }
}

/// A network interface opened as a switch port.
#[derive(Debug)]
pub struct LinkPort {
    fd: OwnedFd,
    name: String,
    ifindex: u32,
    mtu: u32,
    /// Where the kernel puts what the interface receives.
    rx: RxRing,
    /// What PACKET_STATISTICS said so far (it resets when read), and the
    /// frames that came too long for a slot.
    dropped: Cell<u64>,
}

impl AsFd for LinkPort {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Why an interface cannot be a port: each says what and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortError {
    /// Not a name an interface can have.
    BadName(String),
    /// No interface of that name; the ones there are.
    NoSuchInterface { name: String, present: Vec<String> },
    /// Administratively down.
    Down(String),
    /// Its MTU cannot carry a RoCE packet of the smallest path MTU.
    MtuTooSmall { name: String, mtu: u32 },
    /// Opening a raw socket on it was refused.
    NotPermitted(String),
    /// Any other failure of the system, with what was being done.
    Io { name: String, doing: &'static str, error: String },
}

impl fmt::Display for PortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortError::BadName(n) => write!(
                f,
                "`{n}` is not an interface name (1 to 15 characters, no `/`, `:` or spaces)"
            ),
            PortError::NoSuchInterface { name, present } => write!(
                f,
                "no network interface `{name}` here\nhint: the interfaces are: {}",
                present.join(", ")
            ),
            PortError::Down(n) => {
                write!(f, "interface `{n}` is down\nhint: `ip link set {n} up`")
            }
            PortError::MtuTooSmall { name, mtu } => write!(
                f,
                "interface `{name}` has MTU {mtu}: it cannot carry a RoCE packet of path MTU 1024 (an Ethernet MTU of {MIN_MTU} at least)\nhint: `ip link set {name} mtu 1500` (and the same on the hosts' RoCE interfaces)"
            ),
            PortError::NotPermitted(n) => write!(
                f,
                "opening interface `{n}` for raw frames was refused: it needs CAP_NET_RAW\nhint: run as root, or `setcap cap_net_raw,cap_net_admin+ep` on the roce binary"
            ),
            PortError::Io { name, doing, error } => {
                write!(f, "interface `{name}`: {doing}: {error}")
            }
        }
    }
}

impl std::error::Error for PortError {}

/// Interface `name`'s flags (`SIOCGIFFLAGS`) or MTU (`SIOCGIFMTU`), asked through
/// `fd`: of the network namespace the socket was made in (sysfs shows the one
/// it was mounted in, which need not be the same).
fn ifreq_get(fd: &OwnedFd, name: &str, request: libc::Ioctl) -> io::Result<libc::c_int> {
    // SAFETY: ifreq is plain data; zero is valid for every field.
    let mut req: libc::ifreq = unsafe { mem::zeroed() };
    // The name fits with its NUL: `open` checked it is shorter than IFNAMSIZ.
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq the kernel reads the name from and writes
    // the answer into, during the call only.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), request, &mut req as *mut libc::ifreq) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both requests answer in the union's int-sized member (ifru_flags
    // is a short at the same place, read as such below).
    Ok(unsafe {
        if request == libc::SIOCGIFFLAGS {
            libc::c_int::from(req.ifr_ifru.ifru_flags)
        } else {
            req.ifr_ifru.ifru_mtu
        }
    })
}

/// What an interface's link is, as a bridge watching it sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Up, with carrier: frames cross.
    Up,
    /// Administratively up, but no carrier (a cable pulled, the peer down).
    NoCarrier,
    /// Set down (`ip link set … down`).
    Down,
    /// The interface is gone (removed), or another took its name: the port's
    /// socket is bound to the old one, which never comes back.
    Gone,
}

impl fmt::Display for LinkState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LinkState::Up => "link up",
            LinkState::NoCarrier => "no carrier (link down)",
            LinkState::Down => "set down",
            LinkState::Gone => "gone (the interface was removed)",
        })
    }
}

/// Watches the links of interfaces that are ports, by name and index, through
/// a socket of its own (the ports' sockets belong to the switch thread).
#[derive(Debug)]
pub struct LinkWatch {
    fd: OwnedFd,
    links: Vec<(String, u32)>,
}

impl LinkWatch {
    /// Watches `ports`' links (in this network namespace).
    pub fn new(ports: &[&LinkPort]) -> io::Result<LinkWatch> {
        // SAFETY: socket(2) takes no pointers; a descriptor it returns is ours.
        let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor socket(2) just returned, owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(LinkWatch { fd, links: ports.iter().map(|p| (p.name.clone(), p.ifindex)).collect() })
    }

    /// Each watched link's state now, in the order given.
    pub fn states(&self) -> Vec<LinkState> {
        self.links
            .iter()
            .map(|(name, index)| {
                if nix::net::if_::if_nametoindex(name.as_str()).ok() != Some(*index) {
                    return LinkState::Gone;
                }
                match ifreq_get(&self.fd, name, libc::SIOCGIFFLAGS) {
                    Err(_) => LinkState::Gone,
                    Ok(f) if f & libc::IFF_UP == 0 => LinkState::Down,
                    Ok(f) if f & libc::IFF_RUNNING == 0 => LinkState::NoCarrier,
                    Ok(_) => LinkState::Up,
                }
            })
            .collect()
    }
}

/// The interfaces of this network namespace, by name.
pub fn interfaces() -> Vec<String> {
    let mut names: Vec<String> = nix::net::if_::if_nameindex()
        .map(|l| l.iter().map(|i| i.name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

impl LinkPort {
    /// Opens interface `name` as a port: promiscuous, not seeing its own sends,
    /// without blocking.
    pub fn open(name: &str) -> Result<LinkPort, PortError> {
        let valid = !name.is_empty()
            && name.len() < libc::IFNAMSIZ
            && !name.contains(['/', ':'])
            && !name.chars().any(char::is_whitespace)
            && name != "."
            && name != "..";
        if !valid {
            return Err(PortError::BadName(name.to_string()));
        }
        let ifindex = nix::net::if_::if_nametoindex(name).map_err(|_| {
            PortError::NoSuchInterface { name: name.to_string(), present: interfaces() }
        })?;
        let io_err = |doing: &'static str| {
            let e = io::Error::last_os_error();
            PortError::Io { name: name.to_string(), doing, error: e.to_string() }
        };
        let all = (libc::ETH_P_ALL as u16).to_be() as libc::c_int;
        // SAFETY: socket(2) takes no pointers; a descriptor it returns is ours.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                all,
            )
        };
        if raw < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => PortError::NotPermitted(name.to_string()),
                _ => PortError::Io {
                    name: name.to_string(),
                    doing: "opening a packet socket",
                    error: e.to_string(),
                },
            });
        }
        // SAFETY: `raw` is a descriptor socket(2) just returned, owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let flags =
            ifreq_get(&fd, name, libc::SIOCGIFFLAGS).map_err(|_| io_err("reading its flags"))?;
        if flags & libc::IFF_UP == 0 {
            return Err(PortError::Down(name.to_string()));
        }
        let mtu = ifreq_get(&fd, name, libc::SIOCGIFMTU).map_err(|_| io_err("reading its MTU"))?;
        let mtu = u32::try_from(mtu).unwrap_or(0);
        if mtu < MIN_MTU {
            return Err(PortError::MtuTooSmall { name: name.to_string(), mtu });
        }
        // SAFETY: sockaddr_ll is plain data, zero is a valid value of every field.
        let mut addr: libc::sockaddr_ll = unsafe { mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        addr.sll_ifindex = ifindex as i32;
        // SAFETY: `addr` is a valid sockaddr_ll for the length given, read only
        // during the call.
        let bound = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if bound < 0 {
            return Err(io_err("binding a packet socket to it"));
        }
        // SAFETY: packet_mreq is plain data; zero is valid for every field.
        let mut mreq: libc::packet_mreq = unsafe { mem::zeroed() };
        mreq.mr_ifindex = ifindex as i32;
        mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
        // Promiscuous while the socket is open: the kernel undoes it when it closes.
        super::sockopt::set(&fd, libc::PACKET_ADD_MEMBERSHIP, &mreq)
            .map_err(|_| io_err("making it promiscuous"))?;
        // Our own sends out of this port must not come back in as received
        // (Linux 4.20 and later; before, `recv` skips them by their type).
        let _ = super::sockopt::set(&fd, libc::PACKET_IGNORE_OUTGOING, &1 as &libc::c_int);
        // What the switch forwards goes straight to the driver, as a cable
        // would carry it: no queueing discipline of this host's in between
        // (Linux 3.14 and later; without it, the interface's qdisc).
        let _ = super::sockopt::set(&fd, libc::PACKET_QDISC_BYPASS, &1 as &libc::c_int);
        setsockopt(&fd, sockopt::SndBuf, &BUFFER).map_err(|_| io_err("sizing its buffers"))?;
        let _ = setsockopt(&fd, sockopt::SndBufForce, &BUFFER);
        // Last: frames arriving before the ring is there wait in the socket's
        // queue, which is never read once it is.
        let rx = RxRing::attach(&fd, mtu).map_err(|_| io_err("mapping its receive ring"))?;
        Ok(LinkPort { fd, name: name.to_string(), ifindex, mtu, rx, dropped: Cell::new(0) })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// Is its link up (carrier: the kernel's `IFF_RUNNING`), now?
    pub fn carrier(&self) -> bool {
        ifreq_get(&self.fd, &self.name, libc::SIOCGIFFLAGS)
            .is_ok_and(|f| f & libc::IFF_RUNNING != 0)
    }

    /// One frame, if one is waiting (the socket does not block): its length.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.take(buf) {
                None => return Err(self.pending_error()),
                Some(Some(n)) => return Ok(n),
                Some(None) => {}
            }
        }
    }

    /// Why nothing was read, when the ring is empty: the error the socket holds
    /// (`ENETDOWN` when the interface went down), taken so that it is said
    /// once, as a read would have, and neither keeps `poll` waking nor fails
    /// the first send after the link is back; else `WouldBlock`.
    fn pending_error(&self) -> io::Error {
        match nix::sys::socket::getsockopt(&self.fd, sockopt::SocketError) {
            Ok(e) if e != 0 => io::Error::from_raw_os_error(e),
            _ => io::ErrorKind::WouldBlock.into(),
        }
    }

    /// The next frame from the receive ring, into `buf` as it was on the wire
    /// (its VLAN tag put back, its checksum completed where the kernel says it
    /// was left to hardware): its length; `Some(None)` for one not to forward
    /// (our own send seen on the way out, or one too long to take whole,
    /// counted as dropped); `None` when none is waiting.
    fn take(&self, buf: &mut [u8]) -> Option<Option<usize>> {
        self.rx.next(|f| {
            if f.outgoing {
                return None;
            }
            let tag = if f.vlan.is_some() { 4 } else { 0 };
            if f.data.len() < f.len || f.len < 12 || f.len + tag > buf.len() {
                self.dropped.set(self.dropped.get() + 1);
                return None;
            }
            let n = f.len + tag;
            match f.vlan {
                None => buf[..n].copy_from_slice(f.data),
                Some((tpid, tci)) => {
                    buf[..12].copy_from_slice(&f.data[..12]);
                    buf[12..14].copy_from_slice(&tpid.to_be_bytes());
                    buf[14..16].copy_from_slice(&tci.to_be_bytes());
                    buf[16..n].copy_from_slice(&f.data[12..]);
                }
            }
            if f.checksum_partial {
                dissector::wire::l4sum::complete_l4_checksum(&mut buf[..n]);
            }
            Some(n)
        })
    }

    /// Puts `frame` on the interface as it is.
    pub fn send(&self, frame: &[u8]) -> io::Result<usize> {
        // SAFETY: `frame` is valid for reads of its length during the call.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Frames the kernel dropped on this socket since it was opened.
    fn drops(&self) -> u64 {
        // SAFETY: tpacket_stats is plain data; zero is valid for every field.
        let mut st: libc::tpacket_stats = unsafe { mem::zeroed() };
        let mut len = mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `st` is valid for writes of `len` bytes during the call.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        };
        if r == 0 {
            self.dropped.set(self.dropped.get() + u64::from(st.tp_drops));
        }
        self.dropped.get()
    }
}

/// Frames read from a port in a burst, each whole in a slot of its own: what a
/// switch thread reads a burst into. From a UDP port in one system call
/// (`recvmmsg`); from an interface, out of its receive ring. A frame longer
/// than its slot is never forwarded short: it is left out, as one that did not
/// fit a single read's buffer always was.
pub struct Burst {
    data: Vec<u8>,
    /// Where each kept frame is in `data`, and how long it is.
    kept: Vec<(usize, usize)>,
}

impl Burst {
    /// Frames a burst reads at most.
    pub const SLOTS: usize = 32;
    /// The largest frame a slot takes: as large as a UDP datagram of the lab's
    /// wire can be, and beyond any interface's MTU.
    const SLOT: usize = 65_536;

    pub fn new() -> Burst {
        Burst { data: vec![0; Self::SLOTS * Self::SLOT], kept: Vec::with_capacity(Self::SLOTS) }
    }

    /// The frames of the last read, in the order they came.
    pub fn frames(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.kept.iter().map(|&(at, len)| &self.data[at..at + len])
    }

    /// Reads the datagrams waiting on `fd` (which does not block): how many
    /// it kept, or the error when nothing was read.
    fn fill(&mut self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        self.kept.clear();
        let base = self.data.as_mut_ptr();
        let mut iovs: [libc::iovec; Self::SLOTS] = std::array::from_fn(|i| libc::iovec {
            // SAFETY: slot `i` lies within `data`, which holds SLOTS slots.
            iov_base: unsafe { base.add(i * Self::SLOT) }.cast(),
            iov_len: Self::SLOT,
        });
        // SAFETY: mmsghdr is plain data; zero is valid for every field.
        let mut msgs: [libc::mmsghdr; Self::SLOTS] = unsafe { mem::zeroed() };
        for (m, iov) in msgs.iter_mut().zip(iovs.iter_mut()) {
            m.msg_hdr.msg_iov = iov;
            m.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: every header points to one iovec over a slot of `data`,
        // valid for writes of its length, alive and not otherwise borrowed for
        // the duration of the call; no address or control buffer is asked for.
        let n = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                Self::SLOTS as libc::c_uint,
                libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        for (i, m) in msgs.iter().enumerate().take(n as usize) {
            // MSG_TRUNC: the frame's real length, longer than the slot when cut.
            let len = m.msg_len as usize;
            if len <= Self::SLOT {
                self.kept.push((i * Self::SLOT, len));
            }
        }
        Ok(self.kept.len())
    }

    /// Takes up to a burst's worth of frames through `take`, which copies the
    /// next one into the slot it is given and says its length (`Some(None)`
    /// for one not kept, `None` when none is waiting): how many it kept, or
    /// `WouldBlock` when none was waiting.
    fn fill_with(
        &mut self,
        mut take: impl FnMut(&mut [u8]) -> Option<Option<usize>>,
    ) -> io::Result<usize> {
        self.kept.clear();
        for i in 0..Self::SLOTS {
            let at = i * Self::SLOT;
            match take(&mut self.data[at..at + Self::SLOT]) {
                None if i == 0 => return Err(io::ErrorKind::WouldBlock.into()),
                None => break,
                Some(None) => {}
                Some(Some(len)) => self.kept.push((at, len)),
            }
        }
        Ok(self.kept.len())
    }
}

impl Default for Burst {
    fn default() -> Self {
        Burst::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each bad interface is refused before any socket is opened, with what to do.
    #[test]
    fn bad_interfaces_are_refused_with_a_hint() {
        for bad in ["", "a/b", "has space", "sixteen-chars-xx", ".."] {
            assert_eq!(LinkPort::open(bad).err(), Some(PortError::BadName(bad.into())), "{bad}");
        }
        match LinkPort::open("roce-nosuch0") {
            Err(e @ PortError::NoSuchInterface { .. }) => {
                let text = e.to_string();
                assert!(text.contains("no network interface `roce-nosuch0`"), "{text}");
                assert!(
                    text.contains("hint: the interfaces are: ") && text.contains("lo"),
                    "{text}"
                );
            }
            other => panic!("{other:?}"),
        }
        let small = PortError::MtuTooSmall { name: "eth9".into(), mtu: 576 }.to_string();
        assert!(
            small.contains("MTU 576") && small.contains("ip link set eth9 mtu 1500"),
            "{small}"
        );
    }
}
