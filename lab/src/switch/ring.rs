//! An interface port's receive ring (`PACKET_RX_RING`, `TPACKET_V2`): memory
//! shared with the kernel, into which it writes each frame the interface
//! receives as it arrives, in the receiving CPU's softirq. Reading a frame is a
//! look at its slot's status word, a copy and handing the slot back: no system
//! call and no socket buffer queued per frame, where `recvmmsg` took both.
//!
//! The kernel takes what it knows out of a frame before any packet socket sees
//! it, and says so in the slot: a VLAN tag the receive path stripped (every
//! interface does, offload or not), and a TCP/UDP checksum a local sender left
//! to hardware. [`RxRing::next`] gives both with the frame, so a port can put
//! the frame back as it was on the wire.
//!
//! Owns: [`RxRing`], [`RingFrame`]. Imports: `super::sockopt` (the ring's
//! version and size are packet socket options).
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use std::cell::Cell;

use super::sockopt::set;

/// What the ring holds at least, in bytes: 8192 slots for an interface of MTU
/// 1500, or 27 ms of the switch thread waiting for a core at 300,000 frames a
/// second. With half as many, the bridge bench lost frames at that rate on two
/// cores (the book's "How fast it forwards").
const RING_BYTES: usize = 16 << 20;

/// One frame the kernel handed over, as its slot describes it.
pub(super) struct RingFrame<'a> {
    /// The frame's bytes from its Ethernet header, without the VLAN tag the
    /// kernel stripped (see `vlan`); at most the slot's room.
    pub(super) data: &'a [u8],
    /// The frame's length on the wire (without the stripped tag): more than
    /// `data` when the frame did not fit its slot.
    pub(super) len: usize,
    /// The kernel saw it leave through this interface (our own send).
    pub(super) outgoing: bool,
    /// Its TCP or UDP checksum is left to hardware that is not there.
    pub(super) checksum_partial: bool,
    /// The VLAN tag taken off it: (TPID, TCI).
    pub(super) vlan: Option<(u16, u16)>,
}

/// A `TPACKET_V2` receive ring mapped from a packet socket.
pub(super) struct RxRing {
    map: NonNull<u8>,
    bytes: usize,
    frame: usize,
    frames: usize,
    /// The slot to look at next.
    next: Cell<usize>,
}

// SAFETY: the mapping belongs to this value alone (nothing else holds its
// address); moving it to another thread moves all access with it. It is not
// Sync (the `Cell`), so one thread at a time reads it.
unsafe impl Send for RxRing {}

impl std::fmt::Debug for RxRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RxRing({} slots of {} bytes)", self.frames, self.frame)
    }
}

impl RxRing {
    /// Sets up and maps a receive ring on packet socket `fd`, its slots large
    /// enough for a frame of an interface of MTU `mtu` with a VLAN tag.
    pub(super) fn attach(fd: &OwnedFd, mtu: u32) -> io::Result<RxRing> {
        let version = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
        set(fd, libc::PACKET_VERSION, &version)?;
        // Where the kernel puts a frame's Ethernet header in its slot (as
        // tpacket_rcv computes it), plus the frame and a tag.
        let head = align(libc::TPACKET2_HDRLEN + 16);
        let frame = (head + mtu as usize + 14 + 4).next_power_of_two().clamp(2048, 1 << 17);
        let block = frame.max(64 << 10);
        let blocks = (RING_BYTES / block).max(4);
        let frames = blocks * (block / frame);
        let count = |n: usize| libc::c_uint::try_from(n).map_err(|_| io::ErrorKind::InvalidInput);
        let req = libc::tpacket_req {
            tp_block_size: count(block)?,
            tp_block_nr: count(blocks)?,
            tp_frame_size: count(frame)?,
            tp_frame_nr: count(frames)?,
        };
        set(fd, libc::PACKET_RX_RING, &req)?;
        let bytes = block * blocks;
        // SAFETY: no address is asked for; the kernel maps the ring it just
        // made for this socket, `bytes` long, or fails.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = NonNull::new(map.cast::<u8>()).ok_or(io::ErrorKind::AddrNotAvailable)?;
        Ok(RxRing { map, bytes, frame, frames, next: Cell::new(0) })
    }

    /// The next frame the kernel has handed over, given to `take`, after
    /// which its slot goes back to the kernel; `None` when none is waiting.
    pub(super) fn next<R>(&self, take: impl FnOnce(RingFrame<'_>) -> R) -> Option<R> {
        let i = self.next.get();
        // SAFETY: slot `i` (< frames) lies within the mapping, which lives as
        // long as `self`; slots start at multiples of the frame size (a power
        // of two of 2048 at least), so the status word at its start is aligned
        // for a u32.
        let slot = unsafe { self.map.as_ptr().add(i * self.frame) };
        // SAFETY: as above; the kernel writes this word too, so it is only
        // accessed atomically.
        let status = unsafe { AtomicU32::from_ptr(slot.cast::<u32>()) };
        let st = status.load(Ordering::Acquire);
        if st & libc::TP_STATUS_USER == 0 {
            return None;
        }
        // SAFETY: the status said the slot is ours until we hand it back: the
        // kernel wrote its header (plain data, aligned as above) before it
        // set the status, and does not touch the slot meanwhile.
        let hdr: libc::tpacket2_hdr = unsafe { std::ptr::read(slot.cast()) };
        // SAFETY: the sender's address follows the aligned header in every slot.
        let from: libc::sockaddr_ll = unsafe {
            std::ptr::read_unaligned(slot.add(align(mem::size_of::<libc::tpacket2_hdr>())).cast())
        };
        let (mac, snap) = (usize::from(hdr.tp_mac), hdr.tp_snaplen as usize);
        // The kernel never writes past the slot; a slot that says otherwise
        // is read as empty rather than out of bounds.
        let snap = if mac + snap <= self.frame { snap } else { 0 };
        // SAFETY: `mac..mac + snap` lies within the slot (checked just above),
        // which is ours until the store below.
        let data = unsafe { std::slice::from_raw_parts(slot.add(mac), snap) };
        let vlan = (st & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
            let tpid = if st & libc::TP_STATUS_VLAN_TPID_VALID != 0 { hdr.tp_vlan_tpid } else { 0 };
            (if tpid == 0 { 0x8100 } else { tpid }, hdr.tp_vlan_tci)
        });
        let out = take(RingFrame {
            data,
            len: hdr.tp_len as usize,
            outgoing: from.sll_pkttype == libc::PACKET_OUTGOING,
            checksum_partial: st & libc::TP_STATUS_CSUMNOTREADY != 0,
            vlan,
        });
        status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.next.set((i + 1) % self.frames);
        Some(out)
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `attach` with this length, and no
        // borrow of it outlives `next`.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.bytes) };
    }
}

/// `x` rounded up to the ring's alignment (TPACKET_ALIGN).
fn align(x: usize) -> usize {
    (x + libc::TPACKET_ALIGNMENT - 1) & !(libc::TPACKET_ALIGNMENT - 1)
}
