//! Coverage from the target: which functions of `rdma_rxe` each batch reached
//! in the VMs, and through which calls, as the kernel's own function tracer saw
//! them. The lab's Debian kernels have dynamic ftrace (not KCOV): the function
//! tracer, filtered to the module (`set_ftrace_filter` `:mod:rdma_rxe`), records
//! each call of an rxe function with its caller. After a run, each VM reduces
//! its trace to the distinct `function caller` pairs (in the VM: the trace
//! itself never crosses the control channel) and clears it.
//!
//! A batch that reaches an rxe function, or a caller → callee pair, no run
//! reached before is new coverage: the fuzzer keeps it and draws later batches
//! from it (guidance, as syzkaller's kernel coverage steers it).
//!
//! Owns: [`Coverage`], the tracer's setup and read-out scripts. Imports: the
//! lab's command channel.
use std::collections::BTreeSet;
use std::time::Duration;

use lab::state::{LabPaths, Vm};

/// Mounts tracefs where the guest's init did not, and turns the function tracer
/// on for rdma_rxe's functions; prints how many it traces.
const SETUP: &str = r#"set -e
t=/sys/kernel/tracing
[ -e $t/trace ] || mount -t tracefs tracefs $t
echo 0 > $t/tracing_on
echo nop > $t/current_tracer
echo ':mod:rdma_rxe' > $t/set_ftrace_filter
echo 4096 > $t/buffer_size_kb
echo function > $t/current_tracer
echo > $t/trace
echo 1 > $t/tracing_on
grep -c . $t/set_ftrace_filter"#;

/// The distinct `function caller` pairs traced since the last read, and the
/// events lost to a full ring (the `overrun` of each CPU's buffer); then an
/// empty trace, the tracer on again.
const READ: &str = r#"t=/sys/kernel/tracing
echo 0 > $t/tracing_on
awk '{ for (i = 2; i <= NF; i++) if (substr($i, 1, 2) == "<-") print $(i-1), substr($i, 3) }' $t/trace | sort -u
cat $t/per_cpu/cpu*/stats | awk '/^overrun/ { n += $2 } END { print "overrun", n + 0 }'
echo > $t/trace
echo 1 > $t/tracing_on"#;

/// Turns the tracer off and forgets the filter: the lab's later runs are not
/// slowed by it.
const STOP: &str = r#"t=/sys/kernel/tracing
echo 0 > $t/tracing_on
echo nop > $t/current_tracer
echo > $t/set_ftrace_filter"#;

/// How long a VM may take over a script (TCG is slow, a trace is long).
const WITHIN: Duration = Duration::from_secs(30);

/// Where, in the output of a command run with [`Coverage::read_with`], the
/// trace's read-out begins (with the other command's exit code after it).
const SPLIT: &str = "roce-trace-follows";

/// What the tracer saw over a fuzzing run.
#[derive(Debug, Default)]
pub(crate) struct Coverage {
    paths: Option<LabPaths>,
    /// Why there is no coverage: not a lab, or the tracer could not be set up.
    pub(crate) off: Option<String>,
    /// The rxe functions the tracer follows (the filter's length, VM b's).
    pub(crate) traceable: usize,
    /// The rxe functions reached, on either VM.
    pub(crate) functions: BTreeSet<String>,
    /// The caller → callee pairs reached.
    pub(crate) edges: BTreeSet<(String, String)>,
    /// Trace events lost to a full ring, over the run.
    pub(crate) overrun: u64,
}

/// What one run reached that no run before it had.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Gain {
    pub(crate) functions: usize,
    pub(crate) edges: usize,
}

impl Gain {
    pub(crate) fn any(self) -> bool {
        self.functions + self.edges > 0
    }
}

impl Coverage {
    /// Turns the tracer on in both VMs of the lab at `paths` (none: hosts
    /// that are not the lab's, whose kernels are not ours to trace).
    pub(crate) fn start(paths: Option<&LabPaths>) -> Coverage {
        let mut c = Coverage::default();
        c.paths = paths.cloned();
        if c.paths.is_none() {
            c.off = Some("not a lab: the hosts' kernels are not traced".into());
        }
        c.restart();
        c
    }

    /// Sets the tracer up again: the VMs were brought back, and a new kernel
    /// traces nothing until told to.
    pub(crate) fn restart(&mut self) {
        let Some(p) = &self.paths else { return };
        for vm in Vm::BOTH {
            match lab::client::exec_capture(p, vm, SETUP, WITHIN) {
                Ok((st, out, _)) if st.code == Some(0) => {
                    if vm == Vm::B {
                        self.traceable = out.trim().parse().unwrap_or(0);
                    }
                }
                Ok((st, out, err)) => {
                    self.off = Some(format!(
                        "the function tracer could not be set up in VM {} ({}): {}",
                        vm.name(),
                        st.describe(),
                        format!("{err}{out}").trim()
                    ));
                }
                Err(e) => {
                    self.off =
                        Some(format!("VM {} did not run the tracer's setup: {e:#}", vm.name()))
                }
            }
        }
        if self.off.is_some() {
            // No coverage, then, and no tracer left on in the VM that took it.
            self.stop();
            self.paths = None;
        }
    }

    /// Runs `cmd` in both VMs at once, each followed by the read-out of what
    /// it traced since the last read (one command per VM, not two: under TCG a
    /// command is tens of milliseconds before it does anything). Gives `cmd`'s
    /// output on each VM (`None`: it failed or the VM did not answer), and what
    /// of the traces is new.
    pub(crate) fn read_with(
        &mut self,
        paths: Option<&LabPaths>,
        cmd: &str,
    ) -> ([Option<String>; 2], Gain) {
        let Some(p) = paths else { return ([None, None], Gain::default()) };
        let tracing = self.paths.is_some();
        let script =
            if tracing { format!("{cmd}\necho {SPLIT} $?\n{READ}") } else { cmd.to_string() };
        let outs: Vec<Option<(bool, String)>> = std::thread::scope(|s| {
            let both = Vm::BOTH.map(|vm| {
                let script = &script;
                s.spawn(move || {
                    let (st, out, _) = lab::client::exec_capture(p, vm, script, WITHIN).ok()?;
                    Some((st.code == Some(0), out))
                })
            });
            both.into_iter().map(|h| h.join().ok().flatten()).collect()
        });
        let mut gain = Gain::default();
        let mut said = [None, None];
        for (i, out) in outs.into_iter().enumerate() {
            let Some((ok, out)) = out else { continue };
            if !tracing {
                said[i] = ok.then_some(out);
                continue;
            }
            let Some((before, after)) = out.split_once(SPLIT) else { continue };
            let (code, trace) = after.split_once('\n').unwrap_or((after, ""));
            said[i] = (code.trim() == "0").then(|| before.to_string());
            let (pairs, overrun) = parse(trace);
            self.overrun += overrun;
            let g = self.add(pairs);
            gain.functions += g.functions;
            gain.edges += g.edges;
        }
        (said, gain)
    }

    /// Takes in traced `(function, caller)` pairs: what of them is new.
    fn add(&mut self, pairs: Vec<(String, String)>) -> Gain {
        let mut gain = Gain::default();
        for (f, caller) in pairs {
            gain.functions += usize::from(self.functions.insert(f.clone()));
            gain.edges += usize::from(self.edges.insert((caller, f)));
        }
        gain
    }

    /// Turns the tracer off in both VMs (best effort: a VM that does not
    /// answer has no tracer worth stopping).
    fn stop(&self) {
        if let Some(p) = &self.paths {
            for vm in Vm::BOTH {
                let _ = lab::client::exec_capture(p, vm, STOP, WITHIN);
            }
        }
    }
}

impl Drop for Coverage {
    /// Leaves the lab's kernels as it found them: not tracing.
    fn drop(&mut self) {
        self.stop();
    }
}

/// The `function caller` pairs of a read-out, and its `overrun` count.
fn parse(out: &str) -> (Vec<(String, String)>, u64) {
    let mut pairs = Vec::new();
    let mut overrun = 0;
    for line in out.lines() {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("overrun"), Some(n), None) => overrun = n.parse().unwrap_or(0),
            (Some(f), Some(caller), None) => pairs.push((f.to_string(), caller.to_string())),
            _ => {}
        }
    }
    (pairs, overrun)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The read-out script's awk, run here on a trace as the function tracer
    /// writes it, gives each function with its caller, once; then the count of
    /// lost events.
    #[test]
    fn a_trace_is_read_as_distinct_calls() {
        let trace = "\
# tracer: function
#
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |
          <idle>-0       [000] ..s1.   101.000001: rxe_udp_encap_recv <-udp_queue_rcv_one_skb
          <idle>-0       [000] ..s1.   101.000002: rxe_rcv <-rxe_udp_encap_recv
          <idle>-0       [000] ..s1.   101.000003: rxe_rcv <-rxe_udp_encap_recv
 kworker/u2:1-40         [000] .....   101.000004: rxe_responder <-do_task
";
        let awk = READ
            .lines()
            .find(|l| l.starts_with("awk"))
            .and_then(|l| l.split_once(" $t/trace"))
            .map(|(cmd, _)| format!("{cmd} | sort -u; echo overrun 3"))
            .expect("the script's awk");
        let out = std::process::Command::new("sh")
            .args(["-c", &awk])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().expect("stdin").write_all(trace.as_bytes())?;
                c.wait_with_output()
            })
            .expect("sh runs");
        let (pairs, overrun) = parse(&String::from_utf8_lossy(&out.stdout));
        let got: Vec<(&str, &str)> = pairs.iter().map(|(f, c)| (f.as_str(), c.as_str())).collect();
        assert_eq!(
            got,
            [
                ("rxe_rcv", "rxe_udp_encap_recv"),
                ("rxe_responder", "do_task"),
                ("rxe_udp_encap_recv", "udp_queue_rcv_one_skb"),
            ]
        );
        assert_eq!(overrun, 3);
    }

    /// New is what no read before had: a function, or a caller of it.
    #[test]
    fn gain_counts_only_what_is_new() {
        let mut c = Coverage::default();
        let mut add = |pairs: &[(&str, &str)]| {
            c.add(pairs.iter().map(|(f, caller)| (f.to_string(), caller.to_string())).collect())
        };
        assert_eq!(add(&[("rxe_rcv", "a"), ("rxe_rcv", "b")]), Gain { functions: 1, edges: 2 });
        assert!(!add(&[("rxe_rcv", "a")]).any());
        assert_eq!(add(&[("rxe_rcv", "c")]), Gain { functions: 0, edges: 1 });
    }
}
