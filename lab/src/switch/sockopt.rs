//! Packet socket options: the one `setsockopt(2)` at `SOL_PACKET` that the ring
//! (its version and size) and the interface ports (membership, what to ignore,
//! the qdisc bypass) both set.
//!
//! Owns: [`set`]. Imports: nothing of the switch.
use std::os::fd::{AsRawFd, OwnedFd};
use std::{io, mem};

/// setsockopt(2) at SOL_PACKET with a plain-data value.
pub(super) fn set<T>(fd: &OwnedFd, opt: libc::c_int, value: &T) -> io::Result<()> {
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
