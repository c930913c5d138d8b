//! Memory as scenarios and reports see it: the guard regions around every MR
//! (their size, canary, and what a device changed in them) and the kinds of
//! memory window. The verbs layer fills and reads the regions; the judge and
//! the reports read [`Guards`]. Nothing here calls libibverbs.
//!
//! Owns: [`GUARD`], the canary, [`GuardDamage`], [`Guards`], [`MwKind`]. Imports:
//! `serde`.

/// Bytes of unregistered memory on each side of every MR: a page, so the MR
/// itself stays page-aligned.
pub(crate) const GUARD: usize = 4096;

/// The canary a guard region holds: a byte that depends on its position (and on
/// the side), so a device writing zeros, a fill byte or a shifted copy of it is
/// seen.
pub(crate) fn canary(after: bool, i: usize) -> u8 {
    let seed = if after { 0x5b } else { 0xc3 };
    (i as u8).wrapping_mul(0x9d).wrapping_add(seed) ^ ((i >> 8) as u8)
}

/// What changed in a guard region, `now` read from the MR's edge outwards.
pub(crate) fn damage(after: bool, now: &[u8]) -> Option<GuardDamage> {
    let changed: Vec<usize> =
        now.iter().enumerate().filter(|&(i, &b)| b != canary(after, i)).map(|(i, _)| i).collect();
    let &first = changed.first()?;
    let end = (first + 16).min(now.len());
    Some(GuardDamage {
        changed: changed.len() as u32,
        first: first as u32,
        want: (first..end).map(|i| canary(after, i)).collect(),
        got: now[first..end].to_vec(),
    })
}

/// What changed in one guard region: how many bytes, and the first of them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct GuardDamage {
    /// Bytes of the region that no longer hold the canary.
    pub(crate) changed: u32,
    /// The first of them, counted from the MR's edge: 0 is the byte just before
    /// the MR's first (the region before it) or just past its last (after).
    pub(crate) first: u32,
    /// Up to 16 bytes from `first` outwards: the canary, and what is there now.
    pub(crate) want: Vec<u8>,
    pub(crate) got: Vec<u8>,
}

/// The guard regions of one MR, as they are now.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Guards {
    /// The region before the MR's first byte; `None`: intact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) before: Option<GuardDamage>,
    /// The region from just past its last byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) after: Option<GuardDamage>,
}

impl Guards {
    pub(crate) fn intact(&self) -> bool {
        self.before.is_none() && self.after.is_none()
    }
}

/// The type of a memory window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MwKind {
    Type1,
    Type2,
}
