//! One captured frame in its capture: its number, times, length, interface, comment
//! and decoded [`Frame`], which every output (summary, `-V`, JSON, fields) and
//! display filters read; and what was displayed before it ([`Shown`]).
//!
//! Owns: the per-frame context. Imports: the capture record and the frame.

use crate::frame::Frame;

/// Per-frame context the fields are read from.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    pub number: u64,
    pub ts_ns: u64,
    /// Timestamp of the first frame (for `frame.time_relative`).
    pub first_ts_ns: u64,
    /// Timestamp of the previous frame (for `frame.time_delta`).
    pub prev_ts_ns: u64,
    pub orig_len: u32,
    pub interface: u32,
    pub data: &'a [u8],
    pub frame: &'a Frame,
    /// The pcapng packet comment (the lab switch notes what a fault rule did).
    pub comment: Option<&'a str>,
}

impl<'a> Ctx<'a> {
    /// The context of a captured record decoded as `frame`, times relative to
    /// `first_ts_ns` (and `prev_ts_ns` for the delta).
    #[inline]
    pub fn of(
        rec: &crate::capture::Record<'a>,
        frame: &'a Frame,
        first_ts_ns: u64,
        prev_ts_ns: u64,
    ) -> Ctx<'a> {
        Ctx {
            number: rec.number,
            ts_ns: rec.ts_ns,
            first_ts_ns,
            prev_ts_ns,
            orig_len: rec.orig_len,
            interface: rec.interface,
            data: rec.data,
            frame,
            comment: rec.comment,
        }
    }
}

/// What the caller displayed before this frame: `frame.time_delta_displayed` counts
/// from it. A caller that shows every frame passes [`Shown::every`]; one that applies
/// a display filter keeps the timestamp of the last frame it printed (`None` before
/// the first, which then shows a delta of 0, as tshark does).
///
/// This sits beside [`Ctx`] rather than in it so that code building a `Ctx` by its
/// fields keeps compiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shown {
    pub prev_ts_ns: Option<u64>,
}

impl Shown {
    /// Every frame is displayed: the previous displayed frame is the previous frame.
    pub fn every(c: &Ctx<'_>) -> Shown {
        Shown { prev_ts_ns: Some(c.prev_ts_ns) }
    }
}
