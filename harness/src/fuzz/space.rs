//! What batches are made of and measured by: the QPs they aim at, the classes
//! of change, the coverage cells, and the liveness block every batch ends with.
//! Both kinds of batch ([`super::gen`], [`super::requester`]) read it.
//!
//! Owns: [`Target`], [`Class`], [`Cell`], the liveness block (its fixtures,
//! `fixtures/liveness-objects.toml` and `fixtures/liveness.toml`), [`pick`].
//! Imports: the dissector's opcode table, the lab's seeded RNG.
use dissector::wire::opcode::{Headers, OpInfo};
use dissector::wire::{Opcode, Transport};
use lab::fault::Rng;

/// A value of `xs`, drawn: how both kinds of batch choose.
pub(super) fn pick<T: Copy>(rng: &mut Rng, xs: &[T]) -> T {
    xs[(rng.next_u64() % xs.len() as u64) as usize]
}

/// The QPs of VM b a batch aims probes at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Target {
    Rc,
    Uc,
    Ud,
    /// An RC QP that b moved to the error state before the probes.
    RcErr,
    /// a's RC requester, whose responses the switch changes (requester batches).
    Requester,
}

impl Target {
    /// The QPs probes aim at.
    pub(crate) const ALL: [Target; 4] = [Target::Rc, Target::Uc, Target::Ud, Target::RcErr];

    /// The QP's name in the batch's scenario.
    pub(crate) fn qp(self) -> &'static str {
        match self {
            Target::Rc => "rc",
            Target::Uc => "uc",
            Target::Ud => "ud",
            Target::RcErr => "rc_err",
            Target::Requester => "rc",
        }
    }

    pub(crate) fn transport(self) -> Transport {
        match self {
            Target::Rc | Target::RcErr | Target::Requester => Transport::Rc,
            Target::Uc => Transport::Uc,
            Target::Ud => Transport::Ud,
        }
    }

    /// `RC in RTS`, `RC in ERR`: a coverage cell's QP.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Target::Rc => "RC in RTS",
            Target::Uc => "UC in RTS",
            Target::Ud => "UD in RTS",
            Target::RcErr => "RC in ERR",
            Target::Requester => "RC requester",
        }
    }
}

/// What a probe's change is about: one class per field with a meaning (or
/// `Plain`: nothing changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Class {
    Plain,
    /// The PSN against the one the QP expects: a duplicate, ahead, far away.
    Psn,
    /// An R_Key that is no MR's.
    Rkey,
    /// A remote address at or past an MR's end.
    Bounds,
    /// The RETH's DMA length against the payload (0, more, 2^31).
    DmaLen,
    /// A payload larger than the path MTU (within the link's).
    Length,
    PadCnt,
    TVer,
    PKey,
    /// A destination QP no QP has.
    DestQp,
    Icrc,
    /// The BTH's AckReq and SE bits.
    Bits,
    /// A UD Q_Key other than the QP's (high bit included).
    QKey,
    /// An opcode of another transport.
    Foreign,
    /// An atomic's address (misaligned) and operands.
    Atomic,
    // What requester batches do to responses:
    /// A response dropped.
    Drop,
    /// A response delivered more than once.
    Dup,
    /// A response held back (delayed, or behind the next frame).
    Delay,
    /// A response's header changed (its ICRC fixed).
    Corrupt,
    /// A response the switch builds in the responder's place.
    Synth,
    /// The R_Key a's real SEND with Invalidate names (its IETH): a key b may
    /// invalidate or one it may not.
    Ieth,
}

impl Class {
    /// What a probe can carry.
    pub(crate) const ALL: [Class; 15] = [
        Class::Plain,
        Class::Psn,
        Class::Rkey,
        Class::Bounds,
        Class::DmaLen,
        Class::Length,
        Class::PadCnt,
        Class::TVer,
        Class::PKey,
        Class::DestQp,
        Class::Icrc,
        Class::Bits,
        Class::QKey,
        Class::Foreign,
        Class::Atomic,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Class::Plain => "plain",
            Class::Psn => "psn",
            Class::Rkey => "rkey",
            Class::Bounds => "bounds",
            Class::DmaLen => "dma_len",
            Class::Length => "length",
            Class::PadCnt => "padcnt",
            Class::TVer => "tver",
            Class::PKey => "pkey",
            Class::DestQp => "dest_qp",
            Class::Icrc => "icrc",
            Class::Bits => "bits",
            Class::QKey => "qkey",
            Class::Foreign => "foreign_opcode",
            Class::Atomic => "atomic",
            Class::Drop => "drop",
            Class::Dup => "dup",
            Class::Delay => "delay",
            Class::Corrupt => "corrupt",
            Class::Synth => "synthesized",
            Class::Ieth => "ieth_rkey",
        }
    }

    /// The class applies to a request with these headers, on this target.
    pub(super) fn applies(self, info: &OpInfo, target: Target) -> bool {
        let h = info.headers;
        match self {
            Class::Rkey | Class::Bounds => {
                h.contains(Headers::RETH) || h.contains(Headers::ATOMICETH)
            }
            Class::DmaLen => h.contains(Headers::RETH),
            Class::Length | Class::PadCnt => h.contains(Headers::PAYLOAD),
            Class::Atomic => h.contains(Headers::ATOMICETH),
            Class::QKey => target == Target::Ud,
            Class::Psn => target != Target::Ud,
            Class::Drop
            | Class::Dup
            | Class::Delay
            | Class::Corrupt
            | Class::Synth
            | Class::Ieth => false,
            _ => true,
        }
    }
}

/// A coverage cell: an opcode, the class of change it carried, the QP it hit.
pub(crate) type Cell = (Opcode, Class, Target);

/// The fresh QP and the MRs of the liveness WRITE every batch ends with.
pub(crate) const LIVENESS_OBJECTS: &str = include_str!("fixtures/liveness-objects.toml");

/// Liveness: after the batch, a WRITE on the fresh QP lands and completes.
pub(crate) const LIVENESS: &str = include_str!("fixtures/liveness.toml");
