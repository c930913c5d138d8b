//! The one exit-code type of `roce`, and the error a command returns: what went
//! wrong, and which of the documented codes says so. Every command maps each of its
//! errors to one of these; nothing else decides an exit status.
//!
//! Owns: [`Exit`], [`Failure`], `CommandResult` and the exit-code help text. Imports: nothing
//! of the crate (`anyhow` and `serde_json` errors convert into a [`Failure`]); the
//! error types of bad input text from dissector and lab, which print themselves.
use std::fmt;

/// How `roce` ends. The same meaning, and the same number, for every command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// 0 — it worked: every expectation held, every file is valid, nothing changed.
    Ok,
    /// 1 — the answer is "no": an expectation failed or a scenario could not be
    /// carried out (`run`, `suite`), something changed (`diff`, `suite
    /// --baseline`), the lab's switch lost frames (`lab bench`).
    Failed,
    /// 2 — bad input, nothing was done: a usage error, a bad option value, a file
    /// that is not what it should be (scenario, capture, profile, report, fault
    /// rules), an unknown field name.
    BadInput,
    /// 3 — the environment stopped it: no lab image or lab, a VM that cannot boot,
    /// an output that cannot be written, a capture device, an interface or agent
    /// that cannot be opened or reached before anything ran.
    Setup,
    /// 4 — a scenario was skipped because the device lacks what it needs, and
    /// `--fail-on-skip` asked for that to count.
    Skipped,
    /// The status of a command run in a lab VM, passed through (`lab exec`, `lab
    /// run`: 1 when it failed, 124 when it timed out, 128+N when killed by signal N).
    Command(u8),
    /// 130 — interrupted by a second Ctrl-C during a live capture.
    Interrupted,
}

impl Exit {
    pub(crate) fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Failed => 1,
            Exit::BadInput => 2,
            Exit::Setup => 3,
            Exit::Skipped => 4,
            Exit::Command(c) => c,
            Exit::Interrupted => 130,
        }
    }
}

/// The EXIT STATUS section of `roce COMMAND --help`: the codes a command can end
/// with, and what each means for it.
pub(crate) fn help(lines: &[(Exit, &str)]) -> String {
    let mut s = String::from("EXIT STATUS\n");
    for (e, what) in lines {
        s.push_str(&format!("  {:<3} {what}\n", e.code()));
    }
    s
}

/// A command's error: the message, and the exit code that classifies it.
#[derive(Debug)]
pub(crate) struct Failure {
    pub exit: Exit,
    pub error: anyhow::Error,
}

impl Failure {
    /// Bad input (exit 2).
    pub(crate) fn input(e: impl Into<anyhow::Error>) -> Failure {
        Failure { exit: Exit::BadInput, error: e.into() }
    }
    /// The environment (exit 3).
    pub(crate) fn setup(e: impl Into<anyhow::Error>) -> Failure {
        Failure { exit: Exit::Setup, error: e.into() }
    }
    /// The error is a report of bad input text (a display filter, a fault rule)
    /// drawn by `dissector::diag`, whose first line already says `error: …`.
    pub(crate) fn is_report(&self) -> bool {
        self.error.downcast_ref::<dissector::filter::FilterError>().is_some()
            || self.error.downcast_ref::<lab::fault::RuleError>().is_some()
    }
    /// `roce … | head` closed the pipe: not an error.
    pub(crate) fn is_broken_pipe(&self) -> bool {
        self.error.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        })
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

/// An error a command did not classify is the environment's: the lab, a device, a
/// file it could not write. Bad input is always classified where it is found.
impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Failure {
        Failure { exit: Exit::Setup, error }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure { exit: Exit::Setup, error: e.into() }
    }
}

impl From<serde_json::Error> for Failure {
    fn from(e: serde_json::Error) -> Failure {
        Failure { exit: Exit::Setup, error: e.into() }
    }
}

/// What a command returns.
pub(crate) type CommandResult = Result<Exit, Failure>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_documented() {
        let all =
            [Exit::Ok, Exit::Failed, Exit::BadInput, Exit::Setup, Exit::Skipped, Exit::Interrupted];
        let codes: std::collections::BTreeSet<u8> = all.iter().map(|e| e.code()).collect();
        assert_eq!(codes.len(), all.len(), "one number per meaning");
        assert_eq!(Exit::Command(124).code(), 124);
        let h = help(&[(Exit::Ok, "fine"), (Exit::BadInput, "bad")]);
        assert_eq!(h, "EXIT STATUS\n  0   fine\n  2   bad\n");
        let broken = Failure::from(anyhow::Error::from(std::io::Error::from(
            std::io::ErrorKind::BrokenPipe,
        )));
        assert!(broken.is_broken_pipe());
        assert_eq!(Failure::input(anyhow::anyhow!("x")).exit, Exit::BadInput);
    }
}
