//! The wire's sockets: four UDP sockets on 127.0.0.1, a connected pair per VM
//! (the switch's end and the one qemu takes as the VM's NIC backend), with buffers
//! big enough for a burst.
//!
//! Owns: [`Wire`], [`Ports`] and [`socket_drops`] (the kernel's drop count on them).
//! Imports: nothing from the crate.
use std::io;
use std::net::UdpSocket;

use nix::sys::socket::{setsockopt, sockopt};
use serde::{Deserialize, Serialize};

/// Socket buffers: a burst of ib_write_bw must fit while the switch thread is busy.
const SOCKET_BUFFER: usize = 8 << 20;

/// The four sockets of the wire.
#[derive(Debug)]
pub struct Wire {
    /// The switch's socket for VM a (connected to `vm_a`), and for VM b.
    pub switch_a: UdpSocket,
    pub switch_b: UdpSocket,
    /// The sockets qemu uses as the VMs' NIC backends.
    pub vm_a: UdpSocket,
    pub vm_b: UdpSocket,
}

fn set_buffers(s: &UdpSocket) -> io::Result<()> {
    setsockopt(s, sockopt::RcvBuf, &SOCKET_BUFFER)?;
    setsockopt(s, sockopt::SndBuf, &SOCKET_BUFFER)?;
    // The *FORCE variants need CAP_NET_ADMIN; without it the plain ones (capped
    // by net.core.[rw]mem_max) are what we get.
    let _ = setsockopt(s, sockopt::RcvBufForce, &SOCKET_BUFFER);
    let _ = setsockopt(s, sockopt::SndBufForce, &SOCKET_BUFFER);
    Ok(())
}

impl Wire {
    pub fn new() -> io::Result<Wire> {
        let bind = || -> io::Result<UdpSocket> {
            let s = UdpSocket::bind("127.0.0.1:0")?;
            set_buffers(&s)?;
            Ok(s)
        };
        let (switch_a, switch_b, vm_a, vm_b) = (bind()?, bind()?, bind()?, bind()?);
        switch_a.connect(vm_a.local_addr()?)?;
        vm_a.connect(switch_a.local_addr()?)?;
        switch_b.connect(vm_b.local_addr()?)?;
        vm_b.connect(switch_b.local_addr()?)?;
        switch_a.set_nonblocking(true)?;
        switch_b.set_nonblocking(true)?;
        Ok(Wire { switch_a, switch_b, vm_a, vm_b })
    }

    pub fn ports(&self) -> Ports {
        let p = |s: &UdpSocket| s.local_addr().map(|a| a.port()).unwrap_or(0);
        Ports {
            switch_a: p(&self.switch_a),
            switch_b: p(&self.switch_b),
            vm_a: p(&self.vm_a),
            vm_b: p(&self.vm_b),
        }
    }
}

/// The UDP ports of the wire, on 127.0.0.1.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Ports {
    pub switch_a: u16,
    pub switch_b: u16,
    pub vm_a: u16,
    pub vm_b: u16,
}

impl Ports {
    fn all(&self) -> [u16; 4] {
        [self.switch_a, self.switch_b, self.vm_a, self.vm_b]
    }
}

/// Datagrams the kernel dropped on our sockets because a receive buffer was full
/// (the `drops` column of /proc/net/udp): frames lost before the switch or a VM's
/// qemu could read them.
pub fn socket_drops(ports: &Ports) -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/net/udp") else { return 0 };
    let ours = ports.all();
    let mut drops = 0;
    for line in text.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (Some(local), Some(d)) = (cols.get(1), cols.last()) else { continue };
        let Some((addr, port)) = local.split_once(':') else { continue };
        let port = u16::from_str_radix(port, 16).unwrap_or(0);
        if addr == "0100007F" && ours.contains(&port) {
            drops += d.parse::<u64>().unwrap_or(0);
        }
    }
    drops
}
