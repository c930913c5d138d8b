//! What a verb that failed says: which verb, why, and what probably caused it; and
//! whether the device simply lacks it, so a scenario can be skipped there rather
//! than failed.
//!
//! Owns: [`VerbError`] and `Result`. Imports: nothing of the crate; libc's errnos.
use std::fmt;
use std::io;

/// A verb that failed.
#[derive(Debug)]
pub(crate) enum VerbError {
    /// The device or its kernel driver does not have this verb or feature
    /// (`EOPNOTSUPP`, `ENOTSUP`, `EPROTONOSUPPORT`): not a defect of the setup.
    Unsupported { verb: String, hint: Option<String> },
    /// The verb ran and failed, with its errno.
    Failed { verb: String, source: io::Error, hint: Option<String> },
    /// This layer did not call the verb: its arguments were wrong here (a QP not
    /// made for the operation, an MR deregistered already), or calling it would
    /// let the provider read what it must not (a UD send WR without an address
    /// handle). Not the device's answer: no errno.
    NotCalled { verb: String, why: String },
}

pub(crate) type Result<T> = std::result::Result<T, VerbError>;

impl VerbError {
    /// The verb's error from an errno: `Unsupported` where the errno says the device
    /// lacks it.
    pub(crate) fn from_errno(
        verb: impl Into<String>,
        errno: i32,
        hint: Option<String>,
    ) -> VerbError {
        let verb = verb.into();
        if matches!(errno, libc::EOPNOTSUPP | libc::EPROTONOSUPPORT) || errno == libc::ENOTSUP {
            VerbError::Unsupported { verb, hint }
        } else {
            VerbError::Failed { verb, source: io::Error::from_raw_os_error(errno), hint }
        }
    }

    /// The last OS error, for verbs that return NULL or -1 and set errno.
    pub(crate) fn last(verb: impl Into<String>, hint: Option<String>) -> VerbError {
        let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
        VerbError::from_errno(verb, errno, hint)
    }

    /// For verbs that return an errno (or its negative) instead of setting it.
    pub(crate) fn check(verb: impl Into<String>, rc: i32, hint: Option<String>) -> Result<()> {
        if rc == 0 {
            Ok(())
        } else {
            Err(VerbError::from_errno(verb, rc.saturating_abs(), hint))
        }
    }

    /// The verb `verb` refused here, before the device saw it, because `why`.
    pub(crate) fn not_called(verb: impl Into<String>, why: impl Into<String>) -> VerbError {
        VerbError::NotCalled { verb: verb.into(), why: why.into() }
    }

    pub(crate) fn verb(&self) -> &str {
        match self {
            VerbError::Unsupported { verb, .. }
            | VerbError::Failed { verb, .. }
            | VerbError::NotCalled { verb, .. } => verb,
        }
    }

    pub(crate) fn errno(&self) -> i32 {
        match self {
            VerbError::Unsupported { .. } => libc::EOPNOTSUPP,
            VerbError::Failed { source, .. } => source.raw_os_error().unwrap_or(0),
            VerbError::NotCalled { .. } => 0,
        }
    }

    pub(crate) fn hint(&self) -> Option<&str> {
        match self {
            VerbError::Unsupported { hint, .. } | VerbError::Failed { hint, .. } => hint.as_deref(),
            VerbError::NotCalled { .. } => None,
        }
    }

    pub(crate) fn is_unsupported(&self) -> bool {
        matches!(self, VerbError::Unsupported { .. })
    }

    /// What failed and why, without the hint.
    pub(crate) fn what(&self) -> String {
        match self {
            VerbError::Unsupported { verb, .. } => {
                format!("{verb}: not supported by this device or kernel")
            }
            VerbError::Failed { verb, source, .. } => format!("{verb} failed: {source}"),
            VerbError::NotCalled { verb, why } => format!("{verb} not called: {why}"),
        }
    }
}

impl fmt::Display for VerbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what())?;
        if let Some(h) = self.hint() {
            write!(f, " — hint: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for VerbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            VerbError::Failed { source, .. } => Some(source),
            VerbError::Unsupported { .. } | VerbError::NotCalled { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_that_mean_the_device_lacks_the_verb() {
        for e in [libc::EOPNOTSUPP, libc::ENOTSUP, libc::EPROTONOSUPPORT] {
            let v = VerbError::from_errno("ibv_wr_flush", e, None);
            assert!(v.is_unsupported(), "{e}");
            assert_eq!(v.to_string(), "ibv_wr_flush: not supported by this device or kernel");
        }
        let v = VerbError::from_errno("ibv_reg_mr", libc::ENOMEM, Some("lock less memory".into()));
        assert!(!v.is_unsupported());
        assert_eq!(v.errno(), libc::ENOMEM);
        assert!(
            v.to_string().starts_with("ibv_reg_mr failed: ")
                && v.to_string().ends_with(" — hint: lock less memory"),
            "{v}"
        );
        assert!(VerbError::check("ibv_modify_qp", 0, None).is_ok());
        assert_eq!(
            VerbError::check("ibv_modify_qp", -libc::EINVAL, None).unwrap_err().errno(),
            libc::EINVAL
        );
        assert_eq!(
            VerbError::check("ibv_modify_qp", libc::EINVAL, None).unwrap_err().errno(),
            libc::EINVAL
        );
    }
}
