//! The lab's other wire: each VM's test NIC is a host tap interface instead of a
//! UDP socket, and the switch stands between the two taps as it would between
//! two NIC ports cabled to real hosts (an `AF_PACKET` port each, see
//! [`LinkPort`](crate::switch::LinkPort)). What the lab proves in this topology
//! it proves for `roce bridge` on real wires.
//!
//! A tap is made by opening `/dev/net/tun` (needs `CAP_NET_ADMIN`); its
//! descriptor goes to qemu as the VM's NIC backend, and the interface goes away
//! when the last holder closes it: nothing is left behind by a lab that died.
//! The host side carries lab frames only: no address, IPv6 off (the host would
//! otherwise send its own router solicitations and MLD reports into the lab's
//! wire), never bridged or routed anywhere.
//!
//! Owns: [`WireKind`], [`Tap`]. Imports: nothing from the crate.
use std::fs::OpenOptions;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, OwnedFd};

use serde::{Deserialize, Serialize};

/// What joins the two VMs' test NICs to the switch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WireKind {
    /// Two UDP sockets on 127.0.0.1 (qemu `-netdev dgram`): no privileges needed.
    #[default]
    Udp,
    /// Two host tap interfaces, the switch on each through `AF_PACKET` (root).
    Tap,
    /// Two host tap interfaces with nothing between them: a bench of two real
    /// hosts, for `roce bridge` to stand between (root). Each VM's agent
    /// listens on a management link of its own, reached from 127.0.0.1.
    Bench,
}

impl WireKind {
    pub fn name(self) -> &'static str {
        match self {
            WireKind::Udp => "udp",
            WireKind::Tap => "tap",
            WireKind::Bench => "bench",
        }
    }

    pub fn parse(s: &str) -> Option<WireKind> {
        match s {
            "udp" => Some(WireKind::Udp),
            "tap" => Some(WireKind::Tap),
            "bench" => Some(WireKind::Bench),
            _ => None,
        }
    }
}

/// A tap interface, made for one VM: the descriptor qemu takes, and its name.
#[derive(Debug)]
pub struct Tap {
    pub fd: OwnedFd,
    pub name: String,
}

const TUNSETIFF: libc::Ioctl = 0x4004_54ca;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;

impl Tap {
    /// A new tap named from `pattern` (the kernel fills a `%d` in, so labs side
    /// by side never collide), up, without IPv6 or addresses.
    pub fn create(pattern: &str) -> io::Result<Tap> {
        let file = OpenOptions::new().read(true).write(true).open("/dev/net/tun").map_err(|e| {
            io::Error::new(e.kind(), format!("opening /dev/net/tun (taps need root): {e}"))
        })?;
        let fd: OwnedFd = file.into();
        // SAFETY: ifreq is plain data; zero is valid for every field.
        let mut req: libc::ifreq = unsafe { mem::zeroed() };
        for (d, s) in req.ifr_name.iter_mut().zip(pattern.bytes().take(libc::IFNAMSIZ - 1)) {
            *d = s as libc::c_char;
        }
        req.ifr_ifru.ifru_flags = IFF_TAP | IFF_NO_PI;
        // SAFETY: `req` is a valid ifreq the kernel reads and writes the name of,
        // during the call only.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req as *mut libc::ifreq) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let name: String =
            req.ifr_name.iter().take_while(|c| **c != 0).map(|c| *c as u8 as char).collect();
        // Before it is up, so that it never sends anything of the host's own.
        std::fs::write(format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6"), "1")?;
        set_up(&name)?;
        Ok(Tap { fd, name })
    }
}

/// Frames a tap's queue toward its reader holds (`txqueuelen`): as many as a
/// NIC's transmit ring, where the kernel's default for a tap (1000) drops
/// frames the switch forwards whenever the reader (qemu under TCG) is a few
/// milliseconds late.
const QUEUE: libc::c_int = 4096;

/// Sets interface `name`'s queue to [`QUEUE`] frames and the interface up
/// (`SIOCSIFTXQLEN`, `SIOCSIFFLAGS`, through a socket of this network
/// namespace).
fn set_up(name: &str) -> io::Result<()> {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0")?;
    // SAFETY: ifreq is plain data; zero is valid for every field.
    let mut req: libc::ifreq = unsafe { mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes().take(libc::IFNAMSIZ - 1)) {
        *d = s as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq for every call; the kernel reads the name
    // and reads or writes the queue length or the flags, during each call only.
    // The queue length is the union's int (`ifr_qlen`), where `ifru_mtu` is.
    unsafe {
        req.ifr_ifru.ifru_mtu = QUEUE;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFTXQLEN, &mut req as *mut libc::ifreq) < 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req as *mut libc::ifreq) < 0 {
            return Err(io::Error::last_os_error());
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &mut req as *mut libc::ifreq) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
