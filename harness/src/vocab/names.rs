//! The verbs vocabulary by name: completion statuses and opcodes, memory and QP
//! access flags, send flags. Scenarios write these names, agents send them back,
//! reports show them; this is their one home, and a test holds the values to
//! libibverbs' own.
//!
//! Names are read the way people write them: `IBV_WC_REM_ACCESS_ERR`,
//! `rem_access_err`, `WC_REM_ACCESS_ERR`; `IBV_ACCESS_REMOTE_WRITE`,
//! `remote_write`.
//!
//! Owns: `WcStatus`, `WcOpcode`, [`WcFlags`], `EventType`, [`Access`], [`SendFlag`] and
//! `by_name`.
//! Imports: dissector's `UnknownName` (re-exported); `serde`.
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub(crate) use dissector::text::UnknownName;

/// `IBV_WC_SUCCESS`, `success`, `wc_success` → `IBV_WC_SUCCESS`.
fn wc_name(s: &str) -> String {
    let u = s.trim().to_ascii_uppercase();
    if u.starts_with("IBV_WC_") {
        u
    } else if let Some(r) = u.strip_prefix("WC_") {
        format!("IBV_WC_{r}")
    } else {
        format!("IBV_WC_{u}")
    }
}

macro_rules! named_values {
    ($(#[$m:meta])* $ty:ident, $what:literal, $norm:path, [$(($v:literal, $n:literal)),* $(,)?]) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub(crate) struct $ty(pub u32);

        impl $ty {
            /// Every value libibverbs names, with its name.
            pub(crate) const ALL: &'static [(u32, &'static str)] = &[$(($v, $n)),*];

            /// The name, or `None` for a value this table does not know.
            pub(crate) fn name(self) -> Option<&'static str> {
                Self::ALL.iter().find(|(v, _)| *v == self.0).map(|(_, n)| *n)
            }
        }

        /// The libibverbs name; a value it does not know as `<NAME>_<value>`.
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{}_{}", stringify!($ty), self.0),
                }
            }
        }

        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl FromStr for $ty {
            type Err = UnknownName;
            fn from_str(s: &str) -> Result<$ty, UnknownName> {
                // What Display writes for a value the table does not know.
                if let Some(v) = s.strip_prefix(concat!(stringify!($ty), "_")).and_then(|v| v.parse().ok()) {
                    return Ok($ty(v));
                }
                let n = $norm(s);
                Self::ALL.iter().find(|(_, x)| *x == n).map(|(v, _)| $ty(*v)).ok_or_else(|| {
                    UnknownName::among($what, s, &n, Self::ALL.iter().map(|(_, x)| *x))
                })
            }
        }

        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

named_values!(
    /// `ibv_wc_status`.
    WcStatus,
    "status",
    wc_name,
    [
        (0, "IBV_WC_SUCCESS"),
        (1, "IBV_WC_LOC_LEN_ERR"),
        (2, "IBV_WC_LOC_QP_OP_ERR"),
        (3, "IBV_WC_LOC_EEC_OP_ERR"),
        (4, "IBV_WC_LOC_PROT_ERR"),
        (5, "IBV_WC_WR_FLUSH_ERR"),
        (6, "IBV_WC_MW_BIND_ERR"),
        (7, "IBV_WC_BAD_RESP_ERR"),
        (8, "IBV_WC_LOC_ACCESS_ERR"),
        (9, "IBV_WC_REM_INV_REQ_ERR"),
        (10, "IBV_WC_REM_ACCESS_ERR"),
        (11, "IBV_WC_REM_OP_ERR"),
        (12, "IBV_WC_RETRY_EXC_ERR"),
        (13, "IBV_WC_RNR_RETRY_EXC_ERR"),
        (14, "IBV_WC_LOC_RDD_VIOL_ERR"),
        (15, "IBV_WC_REM_INV_RD_REQ_ERR"),
        (16, "IBV_WC_REM_ABORT_ERR"),
        (17, "IBV_WC_INV_EECN_ERR"),
        (18, "IBV_WC_INV_EEC_STATE_ERR"),
        (19, "IBV_WC_FATAL_ERR"),
        (20, "IBV_WC_RESP_TIMEOUT_ERR"),
        (21, "IBV_WC_GENERAL_ERR"),
        (22, "IBV_WC_TM_ERR"),
        (23, "IBV_WC_TM_RNDV_INCOMPLETE"),
    ]
);

named_values!(
    /// `ibv_wc_opcode`.
    WcOpcode,
    "completion opcode",
    wc_name,
    [
        (0, "IBV_WC_SEND"),
        (1, "IBV_WC_RDMA_WRITE"),
        (2, "IBV_WC_RDMA_READ"),
        (3, "IBV_WC_COMP_SWAP"),
        (4, "IBV_WC_FETCH_ADD"),
        (5, "IBV_WC_BIND_MW"),
        (6, "IBV_WC_LOCAL_INV"),
        (7, "IBV_WC_TSO"),
        (8, "IBV_WC_FLUSH"),
        (9, "IBV_WC_ATOMIC_WRITE"),
        (128, "IBV_WC_RECV"),
        (129, "IBV_WC_RECV_RDMA_WITH_IMM"),
        (130, "IBV_WC_TM_ADD"),
        (131, "IBV_WC_TM_DEL"),
        (132, "IBV_WC_TM_SYNC"),
        (133, "IBV_WC_TM_RECV"),
        (134, "IBV_WC_TM_NO_TAG"),
        (135, "IBV_WC_DRIVER1"),
        (136, "IBV_WC_DRIVER2"),
        (137, "IBV_WC_DRIVER3"),
    ]
);

impl WcStatus {
    pub(crate) const SUCCESS: WcStatus = WcStatus(0);
}

impl WcOpcode {
    pub(crate) const RECV: WcOpcode = WcOpcode(128);
}

impl EventType {
    pub(crate) const CQ_ERR: EventType = EventType(0);
    pub(crate) const DEVICE_FATAL: EventType = EventType(8);
    pub(crate) const PORT_ERR: EventType = EventType(10);
    /// The events about the device (or a port, or a CQ overrun) rather than
    /// one QP's errors.
    pub(crate) const OF_THE_DEVICE: [EventType; 3] =
        [EventType::CQ_ERR, EventType::DEVICE_FATAL, EventType::PORT_ERR];
}

/// `enum ibv_wc_flags` (verbs.h): the bits of a work completion's `wc_flags` the
/// harness reads; providers set others too (`IBV_WC_IP_CSUM_OK`, …), which
/// completions keep as they come. The kernel's own `IB_WC_*` agree on the first two
/// bits only: rxe passes its `IB_WC_WITH_INVALIDATE` (bit 2) through, which
/// libibverbs reads as `IBV_WC_IP_CSUM_OK` (docs/src/guide/lab.md).
pub(crate) struct WcFlags;

impl WcFlags {
    /// The receive buffer starts with a 40-byte GRH area holding the packet's GRH
    /// (on RoCEv2 its IP header): every UD receive on RoCE has one.
    pub(crate) const GRH: u32 = 1 << 0;
    /// `imm_data` holds the immediate data.
    pub(crate) const WITH_IMM: u32 = 1 << 1;
    /// `invalidated_rkey` holds the rkey a SEND with Invalidate invalidated.
    pub(crate) const WITH_INV: u32 = 1 << 3;
}

/// `IBV_EVENT_SRQ_LIMIT_REACHED`, `srq_limit_reached` → `IBV_EVENT_SRQ_LIMIT_REACHED`.
fn event_name(s: &str) -> String {
    let u = s.trim().to_ascii_uppercase();
    if u.starts_with("IBV_EVENT_") {
        u
    } else if let Some(r) = u.strip_prefix("EVENT_") {
        format!("IBV_EVENT_{r}")
    } else {
        format!("IBV_EVENT_{u}")
    }
}

named_values!(
    /// `ibv_event_type`: what an asynchronous event is about.
    EventType,
    "event",
    event_name,
    [
        (0, "IBV_EVENT_CQ_ERR"),
        (1, "IBV_EVENT_QP_FATAL"),
        (2, "IBV_EVENT_QP_REQ_ERR"),
        (3, "IBV_EVENT_QP_ACCESS_ERR"),
        (4, "IBV_EVENT_COMM_EST"),
        (5, "IBV_EVENT_SQ_DRAINED"),
        (6, "IBV_EVENT_PATH_MIG"),
        (7, "IBV_EVENT_PATH_MIG_ERR"),
        (8, "IBV_EVENT_DEVICE_FATAL"),
        (9, "IBV_EVENT_PORT_ACTIVE"),
        (10, "IBV_EVENT_PORT_ERR"),
        (11, "IBV_EVENT_LID_CHANGE"),
        (12, "IBV_EVENT_PKEY_CHANGE"),
        (13, "IBV_EVENT_SM_CHANGE"),
        (14, "IBV_EVENT_SRQ_ERR"),
        (15, "IBV_EVENT_SRQ_LIMIT_REACHED"),
        (16, "IBV_EVENT_QP_LAST_WQE_REACHED"),
        (17, "IBV_EVENT_CLIENT_REREGISTER"),
        (18, "IBV_EVENT_GID_CHANGE"),
        (19, "IBV_EVENT_WQ_FATAL"),
    ]
);

/// `IBV_QPS_RTS`, `rts`, `QPS_RTS` → `IBV_QPS_RTS`; `error` is `IBV_QPS_ERR`.
fn qps_name(s: &str) -> String {
    let u = s.trim().to_ascii_uppercase();
    let short = u.strip_prefix("IBV_").unwrap_or(&u);
    let short = short.strip_prefix("QPS_").unwrap_or(short);
    match short {
        "ERROR" => "IBV_QPS_ERR".into(),
        s => format!("IBV_QPS_{s}"),
    }
}

named_values!(
    /// `ibv_qp_state`: where a QP is in its state machine (IBA 10.3).
    QpStateName,
    "QP state",
    qps_name,
    [
        (0, "IBV_QPS_RESET"),
        (1, "IBV_QPS_INIT"),
        (2, "IBV_QPS_RTR"),
        (3, "IBV_QPS_RTS"),
        (4, "IBV_QPS_SQD"),
        (5, "IBV_QPS_SQE"),
        (6, "IBV_QPS_ERR"),
        (7, "IBV_QPS_UNKNOWN"),
    ]
);

impl QpStateName {
    pub(crate) const RESET: QpStateName = QpStateName(0);
    pub(crate) const INIT: QpStateName = QpStateName(1);
    pub(crate) const RTR: QpStateName = QpStateName(2);
    pub(crate) const RTS: QpStateName = QpStateName(3);
    pub(crate) const SQD: QpStateName = QpStateName(4);
}

/// `EINVAL`, `einval` → `EINVAL`.
fn errno_name(s: &str) -> String {
    s.trim().to_ascii_uppercase()
}

named_values!(
    /// The errno values a verb refuses with (Linux numbering), by name: what a
    /// step's `errno` names and a refusal reports.
    Errno,
    "errno",
    errno_name,
    [
        (1, "EPERM"),
        (2, "ENOENT"),
        (5, "EIO"),
        (11, "EAGAIN"),
        (12, "ENOMEM"),
        (13, "EACCES"),
        (14, "EFAULT"),
        (16, "EBUSY"),
        (17, "EEXIST"),
        (19, "ENODEV"),
        (22, "EINVAL"),
        (28, "ENOSPC"),
        (34, "ERANGE"),
        (38, "ENOSYS"),
        (95, "EOPNOTSUPP"),
        (110, "ETIMEDOUT"),
    ]
);

/// `IBV_ACCESS_REMOTE_WRITE` / `remote_write` → `remote_write`.
fn access_name(s: &str) -> String {
    let l = s.trim().to_ascii_lowercase();
    l.strip_prefix("ibv_access_").unwrap_or(&l).to_string()
}

/// `ibv_access_flags`: a set, named flag by flag.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct Access(pub u32);

impl Access {
    /// Each flag's bit and name.
    pub(crate) const FLAGS: &'static [(u32, &'static str)] = &[
        (1 << 0, "local_write"),
        (1 << 1, "remote_write"),
        (1 << 2, "remote_read"),
        (1 << 3, "remote_atomic"),
        (1 << 4, "mw_bind"),
        (1 << 5, "zero_based"),
        (1 << 6, "on_demand"),
        // IBV_ACCESS_FLUSH_GLOBAL / _PERSISTENT: rdma-core 56's libibverbs/verbs.h
        // (enum ibv_access_flags); the bookworm headers rdma-sys binds (rdma-core
        // 44) predate them. A Linux 6.1 kernel refuses them in ibv_reg_mr.
        (1 << 8, "flush_global"),
        (1 << 9, "flush_persistent"),
        (1 << 20, "relaxed_ordering"),
    ];
    pub(crate) const LOCAL_WRITE: Access = Access(1);
    pub(crate) const ZERO_BASED: Access = Access(1 << 5);
    pub(crate) const FLUSH_GLOBAL: Access = Access(1 << 8);
    pub(crate) const FLUSH_PERSISTENT: Access = Access(1 << 9);
    /// A QP's access when the scenario does not say: every remote operation.
    pub(crate) const REMOTE_ALL: Access = Access(0b1110);

    pub(crate) fn names() -> impl Iterator<Item = &'static str> {
        Self::FLAGS.iter().map(|(_, n)| *n)
    }

    /// One flag by name.
    pub(crate) fn flag(s: &str) -> Result<Access, UnknownName> {
        let n = access_name(s);
        Self::FLAGS
            .iter()
            .find(|(_, x)| *x == n)
            .map(|(b, _)| Access(*b))
            .ok_or_else(|| UnknownName::among("access flag", s, &n, Self::names()))
    }
}

impl Access {
    /// Whether every flag of `flags` is in this set.
    pub(crate) fn contains(self, flags: Access) -> bool {
        self.0 & flags.0 == flags.0
    }
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, o: Access) -> Access {
        Access(self.0 | o.0)
    }
}

/// `local_write | remote_write`.
impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> =
            Self::FLAGS.iter().filter(|(b, _)| self.0 & b != 0).map(|(_, n)| *n).collect();
        write!(f, "{}", if names.is_empty() { "none".to_string() } else { names.join(" | ") })
    }
}

/// The flags of a send-queue work request, as scenarios name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SendFlag {
    /// Ask for a completion (the default).
    Signaled,
    /// No completion unless it fails.
    Unsignaled,
    /// The data goes in the WR itself (up to the QP's `max_inline`).
    Inline,
    Solicited,
    Fence,
}

impl SendFlag {
    pub(crate) const ALL: [SendFlag; 5] = [
        SendFlag::Signaled,
        SendFlag::Unsignaled,
        SendFlag::Inline,
        SendFlag::Solicited,
        SendFlag::Fence,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            SendFlag::Signaled => "signaled",
            SendFlag::Unsignaled => "unsignaled",
            SendFlag::Inline => "inline",
            SendFlag::Solicited => "solicited",
            SendFlag::Fence => "fence",
        }
    }
}

/// One of `all` by its lower-case name (case and surrounding space ignored), or
/// an [`UnknownName`] of kind `what` with the closest name.
pub(crate) fn by_name<T: Copy>(
    s: &str,
    all: &[T],
    name: fn(T) -> &'static str,
    what: &'static str,
) -> Result<T, UnknownName> {
    let l = s.trim().to_ascii_lowercase();
    all.iter()
        .copied()
        .find(|t| name(*t) == l)
        .ok_or_else(|| UnknownName::among(what, s, &l, all.iter().map(|t| name(*t))))
}

impl FromStr for SendFlag {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<SendFlag, UnknownName> {
        by_name(s, &SendFlag::ALL, SendFlag::name, "flag")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Our tables hold libibverbs' own values, checked against its header (in a
    /// build with rdma-core: the `verbs` feature).
    #[test]
    #[cfg(feature = "verbs")]
    fn values_match_the_verbs_header() {
        use rdma_sys::{ibv_access_flags as A, ibv_wc_opcode as O, ibv_wc_status as S};
        assert_eq!(
            "IBV_WC_REM_ACCESS_ERR".parse::<WcStatus>().unwrap().0,
            S::IBV_WC_REM_ACCESS_ERR
        );
        assert_eq!("rnr_retry_exc_err".parse::<WcStatus>().unwrap().0, S::IBV_WC_RNR_RETRY_EXC_ERR);
        assert_eq!(
            "wc_tm_rndv_incomplete".parse::<WcStatus>().unwrap().0,
            S::IBV_WC_TM_RNDV_INCOMPLETE
        );
        assert_eq!(
            "recv_rdma_with_imm".parse::<WcOpcode>().unwrap().0,
            O::IBV_WC_RECV_RDMA_WITH_IMM
        );
        assert_eq!("IBV_WC_FETCH_ADD".parse::<WcOpcode>().unwrap().0, O::IBV_WC_FETCH_ADD);
        assert_eq!("IBV_WC_ATOMIC_WRITE".parse::<WcOpcode>().unwrap().0, O::IBV_WC_ATOMIC_WRITE);
        use rdma_sys::ibv_event_type as E;
        assert_eq!(
            "srq_limit_reached".parse::<EventType>().unwrap().0,
            E::IBV_EVENT_SRQ_LIMIT_REACHED as u32
        );
        assert_eq!(
            "IBV_EVENT_WQ_FATAL".parse::<EventType>().unwrap().0,
            E::IBV_EVENT_WQ_FATAL as u32
        );
        assert_eq!(
            "EVENT_QP_LAST_WQE_REACHED".parse::<EventType>().unwrap().0,
            E::IBV_EVENT_QP_LAST_WQE_REACHED as u32
        );
        use rdma_sys::ibv_qp_state as Q;
        for (v, name) in QpStateName::ALL {
            let want = match *name {
                "IBV_QPS_RESET" => Q::IBV_QPS_RESET,
                "IBV_QPS_INIT" => Q::IBV_QPS_INIT,
                "IBV_QPS_RTR" => Q::IBV_QPS_RTR,
                "IBV_QPS_RTS" => Q::IBV_QPS_RTS,
                "IBV_QPS_SQD" => Q::IBV_QPS_SQD,
                "IBV_QPS_SQE" => Q::IBV_QPS_SQE,
                "IBV_QPS_ERR" => Q::IBV_QPS_ERR,
                "IBV_QPS_UNKNOWN" => Q::IBV_QPS_UNKNOWN,
                _ => unreachable!("a state without a header value"),
            };
            assert_eq!(*v, want, "{name}");
        }
        assert_eq!("error".parse::<QpStateName>(), Ok(QpStateName(6)));
        assert_eq!("rts".parse::<QpStateName>(), Ok(QpStateName::RTS));
        for (v, name) in Errno::ALL {
            let want = match *name {
                "EPERM" => libc::EPERM,
                "ENOENT" => libc::ENOENT,
                "EIO" => libc::EIO,
                "EAGAIN" => libc::EAGAIN,
                "ENOMEM" => libc::ENOMEM,
                "EACCES" => libc::EACCES,
                "EFAULT" => libc::EFAULT,
                "EBUSY" => libc::EBUSY,
                "EEXIST" => libc::EEXIST,
                "ENODEV" => libc::ENODEV,
                "EINVAL" => libc::EINVAL,
                "ENOSPC" => libc::ENOSPC,
                "ERANGE" => libc::ERANGE,
                "ENOSYS" => libc::ENOSYS,
                "EOPNOTSUPP" => libc::EOPNOTSUPP,
                "ETIMEDOUT" => libc::ETIMEDOUT,
                _ => unreachable!("an errno without a libc value"),
            };
            assert_eq!(*v as i32, want, "{name}");
        }
        use rdma_sys::ibv_wc_flags as F;
        assert_eq!(WcFlags::GRH, F::IBV_WC_GRH.0);
        assert_eq!(WcFlags::WITH_IMM, F::IBV_WC_WITH_IMM.0);
        assert_eq!(WcFlags::WITH_INV, F::IBV_WC_WITH_INV.0);
        for (bit, name) in Access::FLAGS {
            let want = match *name {
                "local_write" => A::IBV_ACCESS_LOCAL_WRITE.0,
                "remote_write" => A::IBV_ACCESS_REMOTE_WRITE.0,
                "remote_read" => A::IBV_ACCESS_REMOTE_READ.0,
                "remote_atomic" => A::IBV_ACCESS_REMOTE_ATOMIC.0,
                "mw_bind" => A::IBV_ACCESS_MW_BIND.0,
                "zero_based" => A::IBV_ACCESS_ZERO_BASED.0,
                "on_demand" => A::IBV_ACCESS_ON_DEMAND.0,
                "relaxed_ordering" => A::IBV_ACCESS_RELAXED_ORDERING.0,
                // Not in the rdma-core 44 headers: rdma-core 56's values (verbs.h).
                "flush_global" => 1 << 8,
                "flush_persistent" => 1 << 9,
                _ => unreachable!("a flag without a header value"),
            };
            assert_eq!(*bit, want, "{name}");
        }
    }

    #[test]
    fn names_read_as_people_write_them_and_typos_get_a_suggestion() {
        assert_eq!(WcStatus(10).to_string(), "IBV_WC_REM_ACCESS_ERR");
        assert_eq!(WcStatus(99).to_string(), "WcStatus_99");
        assert_eq!(
            "WcStatus_99".parse::<WcStatus>(),
            Ok(WcStatus(99)),
            "an unknown value reads back"
        );
        let e = "IBV_WC_SUCESS".parse::<WcStatus>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown status `IBV_WC_SUCESS` (did you mean `IBV_WC_SUCCESS`?)"
        );
        assert_eq!(Access::flag("IBV_ACCESS_REMOTE_WRITE").unwrap(), Access(2));
        assert_eq!(
            Access::flag("local_wirte").unwrap_err().suggestion.as_deref(),
            Some("local_write")
        );
        assert_eq!(format!("{:?}", Access(3)), "local_write | remote_write");
        assert_eq!("Inline".parse::<SendFlag>(), Ok(SendFlag::Inline));
        assert!("inlin"
            .parse::<SendFlag>()
            .unwrap_err()
            .to_string()
            .contains("did you mean `inline`?"));
        let j = serde_json::to_string(&WcStatus(5)).unwrap();
        assert_eq!(j, "\"IBV_WC_WR_FLUSH_ERR\"");
        assert_eq!(serde_json::from_str::<WcStatus>(&j).unwrap(), WcStatus(5));
        assert!(serde_json::from_str::<WcStatus>("\"IBV_WC_NOPE\"").is_err());
    }
}
