//! A bench of veth pairs for the switch's interface ports, where there are no
//! NICs: a network namespace of its own with two pairs, `a0`–`a1` and `b0`–`b1`,
//! up, without addresses and without IPv6 (whose own chatter would cross the
//! switch). The `1` ends are the switch's ports; the `0` ends stand in for the
//! hosts. Used by the switch's tests and the bridge bench; needs root.
//!
//! Owns: [`Netns`]. Imports: the switch's [`LinkPort`].
use std::io;
use std::process::Command;

use super::port::{LinkPort, PortError};

/// The namespace, removed with its interfaces when dropped.
pub struct Netns {
    name: String,
}

fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip").args(args).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

impl Netns {
    /// `roce-<tag>-<pid>`, made afresh.
    pub fn new(tag: &str) -> io::Result<Netns> {
        let name = format!("roce-{tag}-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        let n = ns.name.as_str();
        for key in ["all", "default"] {
            ip(&[
                "netns",
                "exec",
                n,
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{key}.disable_ipv6=1"),
            ])?;
        }
        for (x, y) in [("a0", "a1"), ("b0", "b1")] {
            ip(&["-n", n, "link", "add", x, "type", "veth", "peer", "name", y])?;
        }
        for i in ["a0", "a1", "b0", "b1"] {
            ip(&["-n", n, "link", "set", i, "up"])?;
        }
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Each interface named, opened as a port inside the namespace (a socket
    /// stays in the namespace it was made in, whichever thread uses it).
    pub fn open(&self, names: &[&'static str]) -> io::Result<Vec<Result<LinkPort, PortError>>> {
        let path = format!("/run/netns/{}", self.name);
        let names = names.to_vec();
        std::thread::spawn(move || -> io::Result<Vec<Result<LinkPort, PortError>>> {
            let f = std::fs::File::open(&path)?;
            nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
            Ok(names.iter().map(|n| LinkPort::open(n)).collect())
        })
        .join()
        .map_err(|_| io::Error::other("the thread that opens the ports panicked"))?
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}
