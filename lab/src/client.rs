//! Talking to a running lab's daemon over its control socket.
//!
//! Owns: connecting, the requests a client makes and reading their answers (command
//! output, run reports, the live wire). Imports: [`control`] (the
//! framing), [`claim`](super::claim), [`state`](super::state) (where the socket is)
//! [`switch`](super::switch)'s `RunReport`, and [`progress`](super::progress) to write
//! a command's output.
use std::io;
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::claim::Claim;
use super::control::{self, ExitStatus, Frame, Kind, Request, Response, WireFrame};
use super::state::{LabPaths, Vm};
use super::switch::RunReport;

/// How long a plain request may take to be answered.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);
/// How long past its own timeout a command may take to report its end.
const EXEC_GRACE: Duration = Duration::from_secs(15);

pub fn not_up(paths: &LabPaths) -> anyhow::Error {
    let flag =
        if paths.name == "default" { String::new() } else { format!(" --name {}", paths.name) };
    anyhow!("lab `{}` is not up\nhint: start it with `roce lab{flag} up`", paths.name)
}

pub fn connect(paths: &LabPaths) -> Result<UnixStream> {
    if !paths.is_running() {
        return Err(not_up(paths));
    }
    let sock = paths.control_socket();
    // The daemon binds its socket right after taking the lock: allow it a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match UnixStream::connect(&sock) {
            Ok(s) => return Ok(s),
            Err(e)
                if Instant::now() < deadline
                    && matches!(
                        e.kind(),
                        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
                    ) =>
            {
                std::thread::sleep(control::POLL)
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("connecting to the lab daemon at {}", sock.display()))
            }
        }
    }
}

fn read_response(s: &mut UnixStream, within: Duration) -> Result<serde_json::Value> {
    s.set_read_timeout(Some(within))?;
    let f = control::read_frame(s)
        .map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                anyhow!("the lab daemon did not answer within {within:?}")
            }
            _ => anyhow!(e).context("reading the lab daemon's answer"),
        })?
        .ok_or_else(|| anyhow!("the lab daemon closed the connection without answering"))?;
    if f.kind != Kind::Response {
        bail!("the lab daemon answered with an unexpected {:?} frame", f.kind);
    }
    response_data(f.parse()?)
}

fn response_data(r: Response) -> Result<serde_json::Value> {
    if !r.ok {
        bail!(
            "{}",
            r.error.unwrap_or_else(|| "the lab daemon reported an unspecified error".into())
        );
    }
    Ok(r.data)
}

fn send_request(s: &mut UnixStream, req: &Request) -> Result<()> {
    Frame::json(Kind::Request, 0, req).write_to(s).map_err(|e| match e.kind() {
        // Not the `roce … | head` kind of closed pipe, which ends a command
        // quietly: the daemon went away, and the command must say so.
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => anyhow!(
            "the lab daemon closed the connection: the lab failed or went down while this \
             command ran (`roce lab status` says why)"
        ),
        _ => anyhow!(e).context("sending a request to the lab daemon"),
    })
}

/// One request, one answer.
pub fn request(paths: &LabPaths, req: &Request) -> Result<serde_json::Value> {
    let mut s = connect(paths)?;
    send_request(&mut s, req)?;
    read_response(&mut s, ANSWER_WITHIN)
}

/// Runs `cmd` in `vm`, handing output to `on_output` as it arrives. The command is
/// killed in the VM when `timeout` passes, or when this process goes away.
pub fn exec(
    paths: &LabPaths,
    vm: Vm,
    cmd: &str,
    timeout: Duration,
    on_output: &mut dyn FnMut(Kind, &[u8]),
) -> Result<ExitStatus> {
    let mut s = connect(paths)?;
    let req = Request::Exec {
        vm: vm.name().into(),
        cmd: cmd.into(),
        timeout_ms: Some(timeout.as_millis() as u64),
        stdin: false,
    };
    Frame::json(Kind::Request, 1, &req)
        .write_to(&mut s)
        .context("sending the command to the lab daemon")?;
    let deadline = Instant::now() + timeout + EXEC_GRACE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let _ = Frame::new(Kind::Kill, 1, vec![]).write_to(&mut s);
            return Ok(ExitStatus {
                timed_out: true,
                elapsed_ms: (timeout + EXEC_GRACE).as_millis() as u64,
                error: Some(format!("VM {} did not report the end of the command", vm.name())),
                ..Default::default()
            });
        }
        s.set_read_timeout(Some(left))?;
        let f = match control::read_frame(&mut s) {
            Ok(Some(f)) => f,
            Ok(None) => bail!(
                "the lab daemon closed the connection while `{cmd}` ran in VM {} (lab going down?)",
                vm.name()
            ),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                continue
            }
            Err(e) => return Err(e).context("reading the command's output"),
        };
        match f.kind {
            Kind::Stdout | Kind::Stderr => on_output(f.kind, &f.payload),
            Kind::Exit => return Ok(f.parse()?),
            Kind::Response => {
                // The daemon refused the request.
                let r: Response = f.parse()?;
                bail!("{}", r.error.unwrap_or_else(|| "the lab daemon refused the command".into()));
            }
            other => bail!("unexpected {other:?} frame from the lab daemon"),
        }
    }
}

/// Runs `cmd` and returns its exit status and stdout (stderr is appended to the
/// error message when it fails).
pub fn exec_capture(
    paths: &LabPaths,
    vm: Vm,
    cmd: &str,
    timeout: Duration,
) -> Result<(ExitStatus, String, String)> {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let st = exec(paths, vm, cmd, timeout, &mut |k, d| match k {
        Kind::Stdout => out.extend_from_slice(d),
        _ => err.extend_from_slice(d),
    })?;
    Ok((st, String::from_utf8_lossy(&out).into_owned(), String::from_utf8_lossy(&err).into_owned()))
}

/// Called with the command's stderr as it comes.
pub type OnStderr = Box<dyn FnMut(&[u8]) + Send>;

/// A command in a VM with its stdin and stdout connected to this process: a byte
/// stream to a program in the VM (the scenario controller speaks to `roce agent
/// --stdio` this way). Stderr lines go to `on_stderr`. Dropping it kills the command.
pub struct ExecStdio {
    stream: UnixStream,
    stdout: mpsc::Receiver<Vec<u8>>,
    pending: Vec<u8>,
    pos: usize,
    status: std::sync::Arc<std::sync::Mutex<Option<ExitStatus>>>,
    reader: Option<thread::JoinHandle<()>>,
    vm: Vm,
}

const STDIO_ID: u32 = 1;

impl ExecStdio {
    pub fn start(
        paths: &LabPaths,
        vm: Vm,
        cmd: &str,
        timeout: Duration,
        mut on_stderr: OnStderr,
    ) -> Result<ExecStdio> {
        super::daemon::refresh_share(paths)?;
        let mut stream = connect(paths)?;
        let req = Request::Exec {
            vm: vm.name().into(),
            cmd: cmd.into(),
            timeout_ms: Some(timeout.as_millis() as u64),
            stdin: true,
        };
        Frame::json(Kind::Request, STDIO_ID, &req)
            .write_to(&mut stream)
            .context("sending the command to the lab daemon")?;
        let mut reader = stream.try_clone().context("cloning the control connection")?;
        let (tx, rx) = mpsc::channel();
        let status = std::sync::Arc::new(std::sync::Mutex::new(None));
        let st = status.clone();
        let name = vm.name();
        let thread = thread::Builder::new()
            .name(format!("lab-stdio-{name}"))
            .spawn(move || {
                let end = loop {
                    match control::read_frame(&mut reader) {
                        Ok(Some(f)) if f.kind == Kind::Stdout => {
                            if tx.send(f.payload).is_err() {
                                break None;
                            }
                        }
                        Ok(Some(f)) if f.kind == Kind::Stderr => on_stderr(&f.payload),
                        Ok(Some(f)) if f.kind == Kind::Exit => break f.parse::<ExitStatus>().ok(),
                        Ok(Some(f)) if f.kind == Kind::Response => {
                            let msg = f
                                .parse::<Response>()
                                .ok()
                                .and_then(|r| r.error)
                                .unwrap_or_default();
                            break Some(ExitStatus::failed(format!(
                                "the lab daemon refused the command: {msg}"
                            )));
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => {
                            break Some(ExitStatus::failed(
                                "the lab daemon closed the connection (lab going down?)",
                            ))
                        }
                        Err(e) => {
                            break Some(ExitStatus::failed(format!(
                                "reading VM {name}'s command: {e}"
                            )))
                        }
                    }
                };
                *st.lock().unwrap_or_else(|e| e.into_inner()) = end;
            })
            .context("starting the stdio reader")?;
        Ok(ExecStdio {
            stream,
            stdout: rx,
            pending: Vec::new(),
            pos: 0,
            status,
            reader: Some(thread),
            vm,
        })
    }

    /// How the command ended, once it has (its stdout then reads end of file).
    pub fn status(&self) -> Option<ExitStatus> {
        self.status.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn vm(&self) -> Vm {
        self.vm
    }

    /// Closes the command's stdin.
    pub fn close_stdin(&mut self) -> io::Result<()> {
        Frame::new(Kind::Stdin, STDIO_ID, vec![]).write_to(&mut self.stream)
    }

    /// A second handle on the command's stdin, for a thread of its own.
    pub fn stdin(&self) -> io::Result<StdinWriter> {
        Ok(StdinWriter { stream: self.stream.try_clone()? })
    }

    /// Reads with a deadline: `Ok(0)` at the command's end; `TimedOut` if nothing
    /// came within `within`.
    pub fn read_within(&mut self, buf: &mut [u8], within: Duration) -> io::Result<usize> {
        self.fill(Some(within))?;
        Ok(self.take(buf))
    }

    /// Waits for more output unless some is pending; false at the command's end.
    fn fill(&mut self, within: Option<Duration>) -> io::Result<bool> {
        if self.pos < self.pending.len() {
            return Ok(true);
        }
        let next = match within {
            Some(d) => self.stdout.recv_timeout(d).map_err(|e| match e {
                mpsc::RecvTimeoutError::Timeout => Some(d),
                mpsc::RecvTimeoutError::Disconnected => None,
            }),
            None => self.stdout.recv().map_err(|_| None),
        };
        match next {
            Ok(data) => {
                self.pending = data;
                self.pos = 0;
                Ok(true)
            }
            Err(Some(d)) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("VM {}'s command said nothing within {d:?}", self.vm.name()),
            )),
            // The end. A command the lab lost (its VM died or hung) is an error
            // that says so, not a quiet end of file.
            Err(None) => match self.status().and_then(|s| s.error) {
                Some(why) => Err(io::Error::other(format!("VM {}: {why}", self.vm.name()))),
                None => Ok(false),
            },
        }
    }

    fn take(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.pending.len() - self.pos);
        buf[..n].copy_from_slice(&self.pending[self.pos..self.pos + n]);
        self.pos += n;
        n
    }
}

impl io::Read for ExecStdio {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.fill(None)?;
        Ok(self.take(buf))
    }
}

/// Sends bytes to the command's stdin (an empty frame would close it, so empty
/// writes send nothing).
fn write_stdin(stream: &mut UnixStream, buf: &[u8]) -> io::Result<usize> {
    if buf.is_empty() {
        return Ok(0);
    }
    let n = buf.len().min(64 * 1024);
    Frame::new(Kind::Stdin, STDIO_ID, buf[..n].to_vec()).write_to(stream)?;
    Ok(n)
}

impl io::Write for ExecStdio {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        write_stdin(&mut self.stream, buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The stdin of an [`ExecStdio`] command, usable from another thread.
pub struct StdinWriter {
    stream: UnixStream,
}

impl StdinWriter {
    pub fn close(mut self) -> io::Result<()> {
        Frame::new(Kind::Stdin, STDIO_ID, vec![]).write_to(&mut self.stream)
    }
}

impl io::Write for StdinWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        write_stdin(&mut self.stream, buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for ExecStdio {
    fn drop(&mut self) {
        if self.status().is_none() {
            let _ = Frame::new(Kind::Kill, STDIO_ID, vec![]).write_to(&mut self.stream);
        }
        // The daemon kills whatever this connection started when it closes.
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        if let Some(t) = self.reader.take() {
            let _ = t.join();
        }
    }
}

/// Called with each frame of a live run's wire, in the order the switch saw them.
pub type OnWire = Box<dyn FnMut(WireFrame) + Send>;

/// A live run's reader: it hands Wire frames to the callback and answers here.
struct LiveReader {
    answers: mpsc::Receiver<Result<Response>>,
    thread: Option<thread::JoinHandle<()>>,
}

fn read_live(mut reader: UnixStream, mut on_wire: OnWire, answers: mpsc::Sender<Result<Response>>) {
    loop {
        let next = match control::read_frame(&mut reader) {
            Ok(Some(f)) if f.kind == Kind::Wire => match WireFrame::parse(&f) {
                Ok(w) => {
                    on_wire(w);
                    continue;
                }
                Err(e) => Err(anyhow!(e)),
            },
            Ok(Some(f)) if f.kind == Kind::Response => {
                f.parse::<Response>().map_err(anyhow::Error::from)
            }
            Ok(Some(f)) => {
                Err(anyhow!("the lab daemon sent an unexpected {:?} frame during the run", f.kind))
            }
            Ok(None) => Err(anyhow!(
                "the lab daemon closed the connection during the run (lab going down?)"
            )),
            Err(e) => Err(anyhow!(e).context("reading the run's wire from the lab daemon")),
        };
        let fatal = next.is_err();
        if answers.send(next).is_err() || fatal {
            return;
        }
    }
}

/// A recorded run. Dropping it without [`RunSession::end`] ends the run too (the
/// daemon sees the connection close).
pub struct RunSession {
    stream: UnixStream,
    live: Option<LiveReader>,
}

impl RunSession {
    /// Starts a run; with `on_wire`, every frame the switch carries is handed to it
    /// while the run lasts (all of them before [`RunSession::end`] returns).
    /// With a `claim`, the run shares the switch with other claimed runs and owns
    /// (counts, records) only the frames it claims; it can have no `rules` then.
    pub fn begin(
        paths: &LabPaths,
        pcap: Option<String>,
        rules: Vec<super::fault::Rule>,
        seed: u64,
        on_wire: Option<OnWire>,
        claim: Option<Claim>,
    ) -> Result<RunSession> {
        let stream = connect(paths)?;
        let live = match on_wire {
            Some(cb) => {
                let reader = stream.try_clone().context("cloning the control connection")?;
                let (tx, rx) = mpsc::channel();
                let thread = thread::Builder::new()
                    .name("lab-live-reader".into())
                    .spawn(move || read_live(reader, cb, tx))
                    .context("starting the live wire reader")?;
                Some(LiveReader { answers: rx, thread: Some(thread) })
            }
            None => None,
        };
        let mut s = RunSession { stream, live };
        let live = s.live.is_some();
        send_request(&mut s.stream, &Request::RunBegin { pcap, rules, seed, live, claim })?;
        s.answer()?;
        Ok(s)
    }

    fn answer(&mut self) -> Result<serde_json::Value> {
        match &self.live {
            None => read_response(&mut self.stream, ANSWER_WITHIN),
            Some(l) => response_data(l.answers.recv_timeout(ANSWER_WITHIN).map_err(|_| {
                anyhow!("the lab daemon did not answer within {ANSWER_WITHIN:?}")
            })??),
        }
    }

    pub fn end(mut self) -> Result<RunReport> {
        send_request(&mut self.stream, &Request::RunEnd)?;
        let v = self.answer()?;
        serde_json::from_value(v).context("the lab daemon's run report")
    }
}

impl Drop for RunSession {
    fn drop(&mut self) {
        if let Some(mut l) = self.live.take() {
            // Wakes the reader with an end of stream; it has delivered every frame.
            let _ = self.stream.shutdown(std::net::Shutdown::Both);
            if let Some(t) = l.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// Writes output to our stdout/stderr as it comes; a closed pipe is not an error.
pub fn print_output(kind: Kind, data: &[u8]) {
    if kind == Kind::Stdout {
        crate::progress::to_stdout(data)
    } else {
        crate::progress::to_stderr(data)
    }
}
