//! The analyzer's pipelines: a capture file, a live interface or a dataset of
//! several captures, decoded frame by frame ([`decode`]: text, header trees, JSON,
//! fields, Parquet, a pcapng copy) or analysed per QP flow ([`flows`]), on one thread
//! or several ([`parallel`]); two hosts' captures merged into one ([`merge`]). The binary hands them a plain plan ([`decode::Decode`],
//! [`flows::Flows`], their [`input::Input`]) and prints what they return; how a
//! pipeline failed is an [`Error`] of one [`ErrorKind`], which the binary turns into
//! its exit codes.
//!
//! Owns: the decode and flow-analysis loops, the input [`input::Source`] (a file or a
//! live interface), the `-j` chunk pipeline, datasets of several captures
//! ([`dataset`]) and [`Error`]. Imports: dissector (captures, frames, fields,
//! display filters, print, flows); the Parquet writer (`crate::parquet_writer`);
//! live capture (`crate::net::live`, feature `live`).
use std::fmt;

pub(crate) mod dataset;
pub(crate) mod decode;
pub(crate) mod flows;
pub(crate) mod input;
pub(crate) mod merge;
mod parallel;

/// How a pipeline failed: its [`ErrorKind`], and the message (an `anyhow` chain
/// that keeps the errors it was made of, a display filter's report or the I/O
/// error of a closed pipe among them). Like the binary's own failure it is not a
/// `std::error::Error`, so that it is never folded into another error unclassified.
#[derive(Debug)]
pub(crate) struct Error {
    kind: ErrorKind,
    error: anyhow::Error,
}

/// What stopped a pipeline. (A second Ctrl-C during live capture stops no
/// pipeline: `crate::net::live` ends the process then, with status 130.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// What was given is not what it should be: a capture that is damaged or cannot
    /// be read, an unknown field, a bad display filter or field option, inputs that
    /// do not go together, a dataset directory that exists and is not empty.
    BadInput,
    /// The environment stopped it: an interface that cannot be opened, an output
    /// that cannot be written, a worker thread that failed.
    Environment,
    /// The reader of the output went away (`roce decode … | head`).
    BrokenPipe,
    /// Live capture was asked of a build without the `live` feature.
    #[cfg(not(feature = "live"))]
    NoLiveCapture,
}

impl Error {
    /// Bad input.
    pub(crate) fn bad_input(e: impl Into<anyhow::Error>) -> Error {
        Error { kind: ErrorKind::BadInput, error: e.into() }
    }
    /// The environment's error.
    pub(crate) fn environment(e: impl Into<anyhow::Error>) -> Error {
        Error { kind: ErrorKind::Environment, error: e.into() }
    }
    pub(crate) fn kind(&self) -> ErrorKind {
        self.kind
    }
    /// The message, with the errors it was made of.
    pub(crate) fn into_inner(self) -> anyhow::Error {
        self.error
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

/// Writing an output failed: a closed pipe, or the environment's error.
impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        let kind = match e.kind() {
            std::io::ErrorKind::BrokenPipe => ErrorKind::BrokenPipe,
            _ => ErrorKind::Environment,
        };
        Error { kind, error: e.into() }
    }
}

/// Writing JSON failed.
impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Error {
        Error::environment(e)
    }
}
