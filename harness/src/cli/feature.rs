//! Commands and options a build left out. `roce` built without a default
//! feature (`cargo build -p roce --no-default-features`, where there is no
//! rdma-core, libclang or libpcap) still lists every command, so a script or a
//! user meets a clear "not in this build" rather than an unknown command.
//!
//! Only in such a build (a full one has nothing missing).
//!
//! Owns: [`Feature`], [`Missing`] and the one message that names a missing
//! feature. Imports: `super::exit`.
use std::ffi::OsString;

use super::exit::{CommandResult, Failure};

/// A Cargo feature of the `roce` package, and what it brings.
#[derive(Debug, Clone, Copy)]
// Which of them a build names depends on which it lacks.
#[allow(dead_code)]
pub(super) enum Feature {
    Verbs,
    Live,
    Lab,
}

impl Feature {
    fn name(self) -> &'static str {
        match self {
            Feature::Verbs => "verbs",
            Feature::Live => "live",
            Feature::Lab => "lab",
        }
    }
    fn brings(self) -> &'static str {
        match self {
            Feature::Verbs => "real verbs through libibverbs and librdmacm",
            Feature::Live => "live capture through libpcap",
            Feature::Lab => "the lab's VMs and switch, and runs against endpoints",
        }
    }
}

/// The arguments of a command this build left out, taken whole (so any
/// spelling of them reaches the message that says why, not a usage error).
#[derive(Debug, clap::Args)]
pub struct Missing {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    _args: Vec<OsString>,
}

/// `what` (a command, or an option such as `decode -i`) needs `feature`, which
/// this build lacks: the environment stopped it (exit 3), with how to get it.
pub(super) fn missing(what: &str, feature: Feature) -> Failure {
    Failure::setup(anyhow::anyhow!(
        "{what} is not in this build of roce: it needs the `{}` feature ({}), \
         which `--no-default-features` left out\n\
         hint: build roce with its default features on a machine with rdma-core, libclang and libpcap \
         (`bash scripts/setup.sh`, or `cargo install --path harness`)",
        feature.name(),
        feature.brings()
    ))
}

/// A command left out of this build: says so (exit 3).
pub(super) fn run(command: &str, feature: Feature) -> CommandResult {
    Err(missing(&format!("`roce {command}`"), feature))
}
