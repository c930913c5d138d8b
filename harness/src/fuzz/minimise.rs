//! Delta debugging (Zeller's ddmin) over a batch's probes: the smallest subset
//! found, within a budget of tests, for which the finding still shows.
//!
//! Owns: [`ddmin`]. Imports nothing.

/// The fewest of `items` for which `shows` holds, as ddmin finds them with at
/// most `budget` calls of `shows` (`items` itself is taken to show). The empty
/// set is tried first: a finding no probe causes is the setup's.
pub(crate) fn ddmin(
    mut items: Vec<usize>,
    budget: usize,
    mut shows: impl FnMut(&[usize]) -> bool,
) -> Vec<usize> {
    let calls = std::cell::Cell::new(0usize);
    let mut test = |k: &[usize]| {
        calls.set(calls.get() + 1);
        calls.get() <= budget && shows(k)
    };
    if test(&[]) {
        return Vec::new();
    }
    let mut n = 2;
    while items.len() >= 2 {
        let size = items.len().div_ceil(n);
        let chunks: Vec<Vec<usize>> = items.chunks(size).map(<[usize]>::to_vec).collect();
        let mut reduced = false;
        for c in &chunks {
            if test(c) {
                items = c.clone();
                n = 2;
                reduced = true;
                break;
            }
        }
        if !reduced && chunks.len() > 2 {
            for i in 0..chunks.len() {
                let rest: Vec<usize> = chunks
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .flat_map(|(_, c)| c.iter().copied())
                    .collect();
                if test(&rest) {
                    items = rest;
                    n = (n - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if n >= items.len() {
                break;
            }
            n = (2 * n).min(items.len());
        }
        if calls.get() >= budget {
            break;
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_one_probe_that_matters() {
        let all: Vec<usize> = (0..16).collect();
        let mut calls = 0;
        let got = ddmin(all, 100, |k| {
            calls += 1;
            k.contains(&11)
        });
        assert_eq!(got, [11]);
        assert!(calls <= 12, "{calls} calls");
    }

    #[test]
    fn finds_a_pair_that_only_shows_together() {
        let all: Vec<usize> = (0..16).collect();
        let got = ddmin(all, 100, |k| k.contains(&3) && k.contains(&12));
        assert_eq!(got, [3, 12]);
    }

    #[test]
    fn a_finding_without_probes_is_the_setups() {
        assert_eq!(ddmin((0..8).collect(), 10, |_| true), Vec::<usize>::new());
    }

    #[test]
    fn stops_at_its_budget_with_what_it_has() {
        let all: Vec<usize> = (0..64).collect();
        let mut calls = 0;
        let got = ddmin(all, 3, |k| {
            calls += 1;
            k.contains(&40)
        });
        assert!(calls <= 3);
        assert!(got.contains(&40));
        // A flaky test (showing at random) never loses the item set: it only
        // shrinks to sets that showed.
        let got =
            ddmin((0..16).collect(), 50, |k| k.len() % 3 == 1 && k.contains(&5) || k.len() == 16);
        assert!(got.contains(&5), "{got:?}");
    }
}
