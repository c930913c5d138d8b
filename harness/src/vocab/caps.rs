//! What a device can do, in the words scenarios use (`requires = ["flush"]`):
//! each [`Feature`] is read from `ibv_query_device_ex`, and says, when it is
//! missing, which kernel brought it to rxe. A scenario that needs a feature the
//! device lacks is skipped with that reason, never failed.
//!
//! The bits are the kernel's uapi (`include/uapi/rdma/ib_user_verbs.h`, `enum
//! ib_uverbs_device_cap_flags`, the same values in rdma-core 56's
//! `kernel-headers/rdma/ib_user_verbs.h`): libibverbs hands `device_cap_flags_ex`
//! through as the kernel filled it, so a bit an old libibverbs has no name for
//! still arrives.
//!
//! Owns: [`Feature`], [`DeviceCaps`] and the capability bits. Imports:
//! `super::names::UnknownName`; `serde`.
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::names::UnknownName;

/// `IB_UVERBS_DEVICE_MEM_WINDOW`.
const MEM_WINDOW: u64 = 1 << 17;
/// `IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2A` and `_2B`.
const MEM_WINDOW_TYPE_2A: u64 = 1 << 23;
const MEM_WINDOW_TYPE_2B: u64 = 1 << 24;
/// `IB_UVERBS_DEVICE_FLUSH_GLOBAL`, `_FLUSH_PERSISTENT`, `_ATOMIC_WRITE` (Linux 6.2).
const FLUSH_GLOBAL: u64 = 1 << 38;
const FLUSH_PERSISTENT: u64 = 1 << 39;
const ATOMIC_WRITE: u64 = 1 << 40;

/// Something a scenario may need of each endpoint's device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Feature {
    /// ATOMIC WRITE (opcode 0x1D), `ibv_wr_atomic_write`.
    AtomicWrite,
    /// RDMA FLUSH (opcode 0x1C) with placement type global visibility.
    Flush,
    /// RDMA FLUSH with placement type persistence (an MR of persistent memory).
    FlushPersistent,
    /// Type 1 memory windows (`ibv_alloc_mw`, `ibv_bind_mw`).
    MwType1,
    /// Type 2 memory windows (bound by an `IBV_WR_BIND_MW` on a QP; type 2A or 2B).
    MwType2,
    /// Shared receive queues.
    Srq,
}

impl Feature {
    pub(crate) const ALL: [Feature; 6] = [
        Feature::AtomicWrite,
        Feature::Flush,
        Feature::FlushPersistent,
        Feature::MwType1,
        Feature::MwType2,
        Feature::Srq,
    ];

    /// As scenarios write it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Feature::AtomicWrite => "atomic_write",
            Feature::Flush => "flush",
            Feature::FlushPersistent => "flush_persistent",
            Feature::MwType1 => "mw_type1",
            Feature::MwType2 => "mw_type2",
            Feature::Srq => "srq",
        }
    }

    /// What it is, for people.
    pub(crate) fn what(self) -> &'static str {
        match self {
            Feature::AtomicWrite => "ATOMIC WRITE",
            Feature::Flush => "RDMA FLUSH",
            Feature::FlushPersistent => "RDMA FLUSH to persistent memory",
            Feature::MwType1 => "type 1 memory windows",
            Feature::MwType2 => "type 2 memory windows",
            Feature::Srq => "shared receive queues",
        }
    }

    /// Where it comes from, said when it is missing.
    pub(crate) fn since(self) -> &'static str {
        match self {
            Feature::AtomicWrite | Feature::Flush => "rxe gained it in Linux 6.2",
            Feature::FlushPersistent => {
                "rxe gained it in Linux 6.2, for MRs of persistent memory (pmem) only"
            }
            Feature::MwType1 | Feature::MwType2 => "rxe gained memory windows in Linux 5.12",
            Feature::Srq => "the device reports max_srq 0",
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Feature {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Feature, UnknownName> {
        super::names::by_name(s, &Feature::ALL, Feature::name, "feature")
    }
}

impl Serialize for Feature {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Feature {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Feature, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// What `ibv_query_device_ex` says, as far as features go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct DeviceCaps {
    pub(crate) cap_flags_ex: u64,
    pub(crate) max_mw: u32,
    pub(crate) max_srq: u32,
}

impl DeviceCaps {
    pub(crate) fn has(&self, f: Feature) -> bool {
        let bit = |b: u64| self.cap_flags_ex & b != 0;
        match f {
            Feature::AtomicWrite => bit(ATOMIC_WRITE),
            Feature::Flush => bit(FLUSH_GLOBAL),
            Feature::FlushPersistent => bit(FLUSH_PERSISTENT),
            Feature::MwType1 => bit(MEM_WINDOW) && self.max_mw > 0,
            Feature::MwType2 => {
                (bit(MEM_WINDOW_TYPE_2A) || bit(MEM_WINDOW_TYPE_2B)) && self.max_mw > 0
            }
            Feature::Srq => self.max_srq > 0,
        }
    }

    /// Every feature the device has.
    pub(crate) fn features(&self) -> Vec<Feature> {
        Feature::ALL.into_iter().filter(|f| self.has(*f)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rxe's `RXE_DEVICE_CAP_FLAGS` on a 64-bit 6.12 kernel has the memory
    /// placement bits; 6.1's stops at the memory windows.
    #[test]
    fn features_from_the_device_flags() {
        let rxe_6_1 = DeviceCaps {
            cap_flags_ex: MEM_WINDOW | MEM_WINDOW_TYPE_2B | (1 << 12),
            max_mw: 1024,
            max_srq: 1024,
        };
        assert_eq!(rxe_6_1.features(), [Feature::MwType1, Feature::MwType2, Feature::Srq]);
        let rxe_6_12 = DeviceCaps {
            cap_flags_ex: rxe_6_1.cap_flags_ex | FLUSH_GLOBAL | FLUSH_PERSISTENT | ATOMIC_WRITE,
            ..rxe_6_1
        };
        assert_eq!(rxe_6_12.features(), Feature::ALL);
        let no_windows = DeviceCaps { max_mw: 0, ..rxe_6_12 };
        assert!(
            !no_windows.has(Feature::MwType1)
                && !no_windows.has(Feature::MwType2)
                && no_windows.has(Feature::Flush)
        );
        assert_eq!(DeviceCaps::default().features(), []);
    }

    #[test]
    fn names_read_back_and_typos_get_a_suggestion() {
        for f in Feature::ALL {
            assert_eq!(f.name().parse::<Feature>(), Ok(f));
            assert_eq!(
                serde_json::from_str::<Feature>(&serde_json::to_string(&f).unwrap()).unwrap(),
                f
            );
        }
        let e = "atomic_wirte".parse::<Feature>().unwrap_err();
        assert_eq!(e.to_string(), "unknown feature `atomic_wirte` (did you mean `atomic_write`?)");
        assert_eq!(Feature::Flush.since(), "rxe gained it in Linux 6.2");
    }
}
