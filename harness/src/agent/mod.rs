//! The endpoint agent (`roce agent`): executes its part of a scenario with real verbs.
//! `roce run` starts one per endpoint (in a lab VM over `lab exec` stdio) or reaches
//! one on a real host (`roce agent --listen HOST:PORT`).
pub mod cm_private;
pub mod exec;
pub mod proto;

use std::net::TcpListener;

use anyhow::{Context, Result};
use clap::Args;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("mode").required(true).args(["stdio", "listen"])))]
pub struct AgentArgs {
    /// Speak the controller protocol on stdin/stdout (how the lab starts it)
    #[arg(long)]
    pub stdio: bool,
    /// Listen for one controller at a time on this address (a real host)
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
}

pub fn run(a: AgentArgs) -> Result<u8> {
    if a.stdio {
        let stdin = std::io::stdin();
        let stdout = std::io::stdout();
        exec::serve(&mut stdin.lock(), &mut stdout.lock()).context("the controller connection")?;
        return Ok(0);
    }
    let addr = a.listen.unwrap_or_default();
    let l = TcpListener::bind(&addr).with_context(|| format!("listening on {addr}"))?;
    eprintln!("roce agent: listening on {addr} (one controller at a time)");
    for conn in l.incoming() {
        let s = match conn {
            Ok(s) => s,
            Err(e) => {
                eprintln!("roce agent: accept: {e}");
                continue;
            }
        };
        let peer = s.peer_addr().map(|p| p.to_string()).unwrap_or_default();
        eprintln!("roce agent: controller {peer} connected");
        let mut r = s.try_clone()?;
        let mut w = s;
        if let Err(e) = exec::serve(&mut r, &mut w) {
            eprintln!("roce agent: controller {peer}: {e}");
        }
    }
    Ok(0)
}
