//! `roce agent`: the endpoint agent `roce run` drives.
//!
//! Owns: `roce agent`'s options and their translation into the agent's limits and
//! listen options. Imports: `crate::agent` (limits, key, serving), `super::exit`.
use std::path::PathBuf;
use std::time::Duration;

use anyhow::anyhow;

use super::exit::{help, CommandResult, Exit, Failure};
use crate::agent::limits::{Allow, Cidr, Limits};
use crate::agent::{self, auth::Key, ListenOpts};

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("mode").required(true).args(["stdio", "listen", "gen_key"])))]
#[command(after_help = format!(
    "On a real host (root, the RDMA device configured):\n  roce agent --gen-key /etc/roce/agent.key     # once; copy the file to the controller\n  roce agent --listen 0.0.0.0:7000 --key-file /etc/roce/agent.key\nand on the controller: roce run … --endpoints a=HOST:7000,… --key-file agent.key\n\n{}",
    help(&[(Exit::Ok, "served until stopped, or the key was written"), (Exit::BadInput, "a bad option or key file"), (Exit::Setup, "cannot listen there")])
))]
pub struct AgentArgs {
    /// Speak the controller protocol on stdin/stdout (how the lab starts it; a trusted channel)
    #[arg(long)]
    pub stdio: bool,
    /// Listen for one controller at a time on this address (a real host)
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
    /// The shared key (mode 0600; `--gen-key` makes one): a controller must prove
    /// it has it, and every message is authenticated with it
    #[arg(long, value_name = "FILE", requires = "listen")]
    pub key_file: Option<PathBuf>,
    /// Listen without authentication (a lab network you trust; warned at every start)
    #[arg(long, requires = "listen", conflicts_with = "key_file")]
    pub insecure: bool,
    /// Write a new random key to FILE (mode 0600; never overwrites) and exit
    #[arg(long, value_name = "FILE", conflicts_with_all = ["listen", "stdio"])]
    pub gen_key: Option<PathBuf>,
    /// Refused: a key on the command line shows in `ps`. Use --key-file
    #[arg(long, value_name = "KEY", hide = true)]
    pub key: Option<String>,
    /// Drop a controller that sends nothing (not even its heartbeat, every 5 s)
    /// for this long; everything it set up is freed
    #[arg(long, default_value_t = 30, value_name = "S", requires = "listen")]
    pub heartbeat_deadline: u64,
    /// QPs may connect (and probes go) only to addresses in this network, and
    /// controllers connect only from it (refused before any handshake work);
    /// repeat for several [default: the subnet of the interface with the RoCE
    /// address, for QPs; controllers from anywhere]
    #[arg(long, value_name = "CIDR", requires = "listen")]
    pub(crate) allow: Vec<Cidr>,
    /// Most bytes a controller may register, all MRs together
    #[arg(long, default_value_t = Limits::default().mr_bytes, value_name = "BYTES", requires = "listen")]
    pub max_mr_bytes: u64,
    /// Most MRs a controller may register
    #[arg(long, default_value_t = Limits::default().mrs, value_name = "N", requires = "listen")]
    pub max_mrs: usize,
    /// Most QPs a controller may create
    #[arg(long, default_value_t = Limits::default().qps, value_name = "N", requires = "listen")]
    pub max_qps: usize,
    /// Most crafted frames (probes) per second
    #[arg(long, default_value_t = Limits::default().probe_rate, value_name = "N", requires = "listen")]
    pub max_probe_rate: u32,
    /// Capture this host's wire (`roce run --capture-at-agents`) with this command
    /// instead of libpcap: its words, run without a shell, `{iface}` replaced by
    /// the interface of the device's GID and `{file}` (required) by the file to
    /// write (pcap or pcapng); stopped with SIGINT. E.g. 'tcpdump -i {iface} -w
    /// {file} udp port 4791', or 'ibdump -d mlx5_0 -w {file}' for a device
    /// without an interface
    #[arg(long, value_name = "COMMAND", conflicts_with = "gen_key")]
    pub capture_command: Option<String>,
}

pub(super) fn run(a: AgentArgs) -> CommandResult {
    if a.key.is_some() {
        return Err(Failure::input(anyhow!(
            "roce agent: a key given on the command line shows in `ps` to every user of this host; refused\nhint: put it in a file of mode 0600 (`roce agent --gen-key FILE`) and pass --key-file FILE"
        )));
    }
    if let Some(path) = a.gen_key {
        Key::generate(&path).map_err(Failure::input)?;
        eprintln!("roce agent: wrote a new key to {} (mode 0600); give the same file to the controller (--key-file)", path.display());
        return Ok(Exit::Ok);
    }
    let capture_command = a
        .capture_command
        .as_deref()
        .map(agent::capture::parse_command)
        .transpose()
        .map_err(|e| Failure::input(anyhow!("roce agent --capture-command: {e}")))?;
    match a.listen {
        Some(addr) => {
            let key = a.key_file.as_deref().map(Key::load).transpose().map_err(Failure::input)?;
            agent::serve_listen(ListenOpts {
                addr,
                key,
                insecure: a.insecure,
                heartbeat_deadline: Duration::from_secs(a.heartbeat_deadline.max(1)),
                handshake_within: agent::HANDSHAKE_WITHIN,
                limits: Limits {
                    mr_bytes: a.max_mr_bytes,
                    mrs: a.max_mrs,
                    qps: a.max_qps,
                    probe_rate: a.max_probe_rate,
                    allow: if a.allow.is_empty() {
                        Allow::LocalSubnet
                    } else {
                        Allow::Cidrs(a.allow)
                    },
                    capture_command,
                },
            })
            .map_err(|e| {
                if e.is::<agent::NoKey>() {
                    Failure::input(e)
                } else {
                    Failure::setup(e)
                }
            })?
        }
        None => agent::serve_stdio(&Limits { capture_command, ..Limits::default() })?,
    }
    Ok(Exit::Ok)
}
