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
//! Owns: [`Port`], [`LinkPort`], [`Burst`], [`PortError`], [`LinkWatch`] and [`LinkState`]. Imports: nothing from the crate;
//! dissector's checksum completion.
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

/// Receive and send buffers: a burst must fit while the switch thread is busy.
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
    /// The frames waiting, up to a burst's worth, in one system call
    /// (`recvmmsg`): how many `burst` now holds, or `WouldBlock` when none was.
    pub fn recv_burst(&self, burst: &mut Burst) -> io::Result<usize> {
        match self {
            Port::Udp(s) => burst.fill(s.as_fd(), |_, _| Some(())),
            Port::Link(l) => burst.fill(l.fd.as_fd(), LinkPort::accept),
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
    /// What PACKET_STATISTICS said so far (it resets when read).
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
        setsockopt_raw(&fd, libc::PACKET_ADD_MEMBERSHIP, &mreq)
            .map_err(|_| io_err("making it promiscuous"))?;
        // The kernel says which frames carry a checksum left to the hardware.
        setsockopt_raw(&fd, libc::PACKET_AUXDATA, &1 as &libc::c_int)
            .map_err(|_| io_err("asking for its frames' checksum state"))?;
        // Our own sends out of this port must not come back in as received
        // (Linux 4.20 and later; before, `recv` skips them by their type).
        let _ = setsockopt_raw(&fd, libc::PACKET_IGNORE_OUTGOING, &1 as &libc::c_int);
        // What the switch forwards goes straight to the driver, as a cable
        // would carry it: no queueing discipline of this host's in between
        // (Linux 3.14 and later; without it, the interface's qdisc).
        let _ = setsockopt_raw(&fd, libc::PACKET_QDISC_BYPASS, &1 as &libc::c_int);
        setsockopt(&fd, sockopt::RcvBuf, &BUFFER).map_err(|_| io_err("sizing its buffers"))?;
        setsockopt(&fd, sockopt::SndBuf, &BUFFER).map_err(|_| io_err("sizing its buffers"))?;
        let _ = setsockopt(&fd, sockopt::RcvBufForce, &BUFFER);
        let _ = setsockopt(&fd, sockopt::SndBufForce, &BUFFER);
        Ok(LinkPort { fd, name: name.to_string(), ifindex, mtu, dropped: Cell::new(0) })
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
            // SAFETY: sockaddr_ll is plain data; zero is valid for every field.
            let mut from: libc::sockaddr_ll = unsafe { mem::zeroed() };
            // Room for one PACKET_AUXDATA message, aligned as cmsghdr wants.
            let mut control = [0u64; CONTROL_WORDS];
            let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
            let mut msg = header(&mut from, &mut iov, &mut control);
            // SAFETY: every pointer in `msg` is to memory valid for writes of the
            // lengths given, for the duration of the call.
            let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_TRUNC) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let n = n as usize;
            if n > buf.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "frame longer than the buffer",
                ));
            }
            if LinkPort::accept(&msg, &mut buf[..n]).is_some() {
                return Ok(n);
            }
        }
    }

    /// Whether a frame read whole into `frame` is one to forward (not our own
    /// send, seen on the way out), its checksum completed where the kernel
    /// says it was left to hardware.
    fn accept(msg: &libc::msghdr, frame: &mut [u8]) -> Option<()> {
        // SAFETY: `msg_name` points to the sockaddr_ll the call filled (every
        // header built by [`header`] names one).
        let from: &libc::sockaddr_ll = unsafe { &*msg.msg_name.cast::<libc::sockaddr_ll>() };
        if from.sll_pkttype == libc::PACKET_OUTGOING {
            return None;
        }
        if partial_checksum(msg) {
            dissector::wire::l4sum::complete_l4_checksum(frame);
        }
        Some(())
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

/// Room for one PACKET_AUXDATA control message, in u64s (aligned as cmsghdr
/// wants).
const CONTROL_WORDS: usize = 8;

/// A `recvmsg` header reading into `iov`, the sender's address into `from` and
/// control messages into `control`.
fn header(
    from: &mut libc::sockaddr_ll,
    iov: &mut libc::iovec,
    control: &mut [u64; CONTROL_WORDS],
) -> libc::msghdr {
    // SAFETY: msghdr is plain data; zero is valid for every field.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_name = (from as *mut libc::sockaddr_ll).cast();
    msg.msg_namelen = mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = mem::size_of_val(control);
    msg
}

/// Frames read from a port in one system call (`recvmmsg`), each whole in a
/// slot of its own: what a switch thread reads a burst into. A frame longer
/// than its slot is never forwarded short: it is left out, as one that did not
/// fit a single read's buffer always was.
pub struct Burst {
    data: Vec<u8>,
    /// Each slot's sender and control messages, filled by the kernel.
    from: Vec<libc::sockaddr_ll>,
    control: Vec<[u64; CONTROL_WORDS]>,
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
        Burst {
            data: vec![0; Self::SLOTS * Self::SLOT],
            // SAFETY: sockaddr_ll is plain data; zero is valid for every field.
            from: vec![unsafe { mem::zeroed() }; Self::SLOTS],
            control: vec![[0; CONTROL_WORDS]; Self::SLOTS],
            kept: Vec::with_capacity(Self::SLOTS),
        }
    }

    /// The frames of the last read, in the order they came.
    pub fn frames(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.kept.iter().map(|&(at, len)| &self.data[at..at + len])
    }

    /// Reads what is waiting on `fd` (which does not block), keeping each
    /// whole frame `keep` accepts (it may complete the frame in place): how
    /// many it kept, or the error when nothing was read.
    fn fill(
        &mut self,
        fd: BorrowedFd<'_>,
        keep: impl Fn(&libc::msghdr, &mut [u8]) -> Option<()>,
    ) -> io::Result<usize> {
        self.kept.clear();
        let base = self.data.as_mut_ptr();
        let mut iovs: [libc::iovec; Self::SLOTS] = std::array::from_fn(|i| libc::iovec {
            // SAFETY: slot `i` lies within `data`, which holds SLOTS slots.
            iov_base: unsafe { base.add(i * Self::SLOT) }.cast(),
            iov_len: Self::SLOT,
        });
        let mut msgs: [libc::mmsghdr; Self::SLOTS] = std::array::from_fn(|_| libc::mmsghdr {
            // SAFETY: msghdr is plain data; zero is valid for every field.
            msg_hdr: unsafe { mem::zeroed() },
            msg_len: 0,
        });
        let slots = iovs.iter_mut().zip(self.from.iter_mut().zip(self.control.iter_mut()));
        for (m, (iov, (from, control))) in msgs.iter_mut().zip(slots) {
            m.msg_hdr = header(from, iov, control);
        }
        // SAFETY: every header points to memory valid for writes of the lengths
        // given (a slot of `data`, a sockaddr_ll, a control buffer), all alive
        // and not otherwise borrowed for the duration of the call.
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
            if len > Self::SLOT {
                continue;
            }
            let at = i * Self::SLOT;
            if keep(&m.msg_hdr, &mut self.data[at..at + len]).is_some() {
                self.kept.push((at, len));
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

/// Did the kernel say (PACKET_AUXDATA) that the frame's TCP or UDP checksum is
/// not done yet: a local sender on a virtual interface left it to hardware
/// that is not there. A NIC would have completed it; so does the switch.
fn partial_checksum(msg: &libc::msghdr) -> bool {
    // SAFETY: `msg` was filled by recvmsg(2): its control buffer holds
    // `msg_controllen` bytes of well-formed cmsghdrs, which the CMSG_* functions
    // walk without reading past it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == libc::PACKET_AUXDATA {
                let aux: libc::tpacket_auxdata =
                    std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                return aux.tp_status & libc::TP_STATUS_CSUMNOTREADY != 0;
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    false
}

/// setsockopt(2) at SOL_PACKET with a plain-data value.
fn setsockopt_raw<T>(fd: &OwnedFd, opt: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is valid for reads of size_of::<T>() bytes during the call,
    // and the kernel reads only that many.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            opt,
            (value as *const T).cast(),
            mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
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
