//! `roce lab …`: two small qemu VMs running Linux Soft-RoCE (rdma_rxe), their NICs
//! joined by a software switch inside `roce` that records the wire and injects
//! faults. For RDMA work without RDMA hardware.
//!
//! - [`image`]: `roce lab build`, the cached VM image.
//! - [`lifecycle`]: `roce lab up`/`down`: starting, finding and stopping a lab.
//! - [`daemon`]: what `roce lab up` leaves running: qemu ×2, the [`switch`], the
//!   control socket. [`state`]: its files, lock and crash recovery.
//! - [`control`]: the framing on the control channel (host ↔ daemon ↔ the
//!   command runner in each VM, [`guest`], over virtio-serial — never over the RoCE wire);
//!   [`client`]: the host's end of it.
//! - [`run`]: a recorded two-VM run (`roce lab run`); [`fault`]: the fault rules,
//!   parsed once and handed to the switch as data; [`mark`]: what the switch did to
//!   a frame, written into and read back from its pcapng comment by one pair of
//!   functions; [`record`]: the recording; [`bench`](mod@bench): the lab's own numbers.
//! - [`claim`]: which run a frame belongs to when runs share the switch;
//!   `respond`: the responder the switch plays for `respond` rules.
//! - [`progress`]: what the lab says on stderr while it works.
//!
//! This file is the module tree and its re-exports, nothing else: every module's
//! order is in `LAYERS` beside `src/`.
//!
//! Owns: everything about the VMs and the wire between them. Imports: `dissector`
//! only (no option parsing, no printing of reports: the `roce` binary does that).
pub mod bench;
pub mod claim;
pub mod client;
pub mod control;
pub mod daemon;
pub mod fault;
pub mod guest;
pub mod image;
pub mod lifecycle;
pub mod mark;
pub mod progress;
pub mod record;
mod respond;
pub mod run;
pub mod state;
pub mod switch;
pub mod tap;
pub mod vm;

pub use lifecycle::{
    all_labs, down, heal, lab_paths, status, stop, up, usable, Definition, DownReport, UpOpts,
    UpReport,
};
pub use progress::{progress_to, progress_to_stderr, write_fd, Progress};
pub use run::shell_join;
pub use state::{absolute, default_root};
pub use vm::Accel;
