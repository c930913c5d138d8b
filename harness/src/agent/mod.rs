//! The endpoint agent (`roce agent`): executes its part of a scenario with real
//! verbs. `roce run` starts one per endpoint (in a lab VM over `lab exec` stdio) or
//! reaches one on a real host (`roce agent --listen HOST:PORT`).
//!
//! Owns: the agent protocol ([`proto`]) and its executor ([`exec`]).
//! Imports: verbs, net, dissector. Never the scenario model: the controller
//! resolves a scenario into this protocol's own messages.
pub(crate) mod cm_private;
pub(crate) mod exec;
pub(crate) mod probe;
pub(crate) mod proto;

use std::net::TcpListener;

use anyhow::{Context, Result};

/// Serves one controller on stdin/stdout (how the lab starts the agent).
pub(crate) fn serve_stdio() -> Result<()> {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    exec::serve(&mut stdin.lock(), &mut stdout.lock()).context("the controller connection")
}

/// Serves controllers on `addr`, one at a time.
pub(crate) fn serve_listen(addr: &str) -> Result<()> {
    let l = TcpListener::bind(addr).with_context(|| format!("listening on {addr}"))?;
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
    Ok(())
}
