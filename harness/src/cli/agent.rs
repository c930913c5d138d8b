//! `roce agent`: the endpoint agent `roce run` drives.
use super::exit::{Exit, Failure, Outcome};
use crate::agent;

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("mode").required(true).args(["stdio", "listen"])))]
pub struct AgentArgs {
    /// Speak the controller protocol on stdin/stdout (how the lab starts it)
    #[arg(long)]
    pub stdio: bool,
    /// Listen for one controller at a time on this address (a real host)
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
}

pub(super) fn run(a: AgentArgs) -> Outcome {
    match a.listen {
        Some(addr) => agent::serve_listen(&addr).map_err(Failure::setup)?,
        None => agent::serve_stdio()?,
    }
    Ok(Exit::Ok)
}
