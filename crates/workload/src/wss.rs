//! The working-set phase of rm-vs-edf-multicore-linux.txt §5.2: "in each periodic instance, the
//! task accesses an array of 64 Bytes elements — i.e., equal to the size of a cache line … the
//! read-to-write ratio has been set equal to 4 … accessed both sequentially and randomly". The
//! size of the array is the task's working set size (WSS; §5.3 uses 16 KB and 256 KB).
//!
//! One definition of the access sequence serves both executors: [`WorkingSet::line_order`] gives
//! the order of the lines in a pass, and [`drive`] walks it, access `k` of an event being a write
//! when `k mod 5 = 4` (four reads to one write). `pacer run` drives it over a real buffer
//! (crates/linux), the tests over a counter; the simulator charges its cost from the calibration
//! profile measured by `pacer calibrate` (`crate::calibration`), never from a guess.
//!
//! The amount of work per execution is a number of passes, a number of line accesses, or a
//! duration: the paper's program was given an "expected execution time" and accessed its array
//! for that long, its access time "benchmarked" beforehand; [`WssAmount::Work`] is that, the
//! number of accesses following from the calibrated cost of a warm line.

use serde::{Deserialize, Serialize};

use crate::model::Work;

/// Bytes of one element of the array: a cache line at every level (§5.2).
pub const LINE_BYTES: u64 = 64;

/// Access `k` of an execution is a write when `k % WRITE_EVERY == WRITE_EVERY - 1`: four reads
/// to one write, the ratio of §5.2 (taken from its reference 22).
pub const WRITE_EVERY: u64 = 5;

/// Largest working set a phase may name (1 GiB): line indices fit in `u32`, and a typo cannot
/// ask `pacer run` for more memory than a test machine has.
pub const MAX_WSS_BYTES: u64 = 1 << 30;

/// In what order a pass visits the lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WssOrder {
    /// Line 0, 1, 2, …: what the paper reports (§5.2, "we show results only for the sequential
    /// access case").
    Sequential,
    /// A permutation of the lines drawn from the phase's seed (the same in every pass), so that
    /// hardware prefetchers cannot follow.
    Random,
}

impl WssOrder {
    /// The name used in files (`"order"`).
    pub fn name(self) -> &'static str {
        match self {
            WssOrder::Sequential => "sequential",
            WssOrder::Random => "random",
        }
    }
}

/// How much one execution of the phase does.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "unit", rename_all = "snake_case")]
pub enum WssAmount {
    /// Whole passes over the working set.
    Passes { passes: u64 },
    /// Line accesses, continuing through the passes (a pass is `size / 64` accesses).
    Lines { lines: u64 },
    /// As many accesses as this much work takes on a warm cache (ns at capacity 1024), the
    /// per-line cost coming from a calibration profile: the paper's "expected execution time".
    Work { work: Work },
}

/// A working-set phase: `size` bytes in 64-byte lines, four reads to one write, in `order`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkingSet {
    /// Bytes of the working set: a positive multiple of [`LINE_BYTES`], at most
    /// [`MAX_WSS_BYTES`]. On Linux one buffer of this size per thread.
    pub size: u64,
    pub order: WssOrder,
    /// Seed of the random order (recorded in the workload; unused for sequential).
    pub seed: u64,
    pub amount: WssAmount,
}

/// Why a working set cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WssError {
    #[error("expected a working-set size that is a positive multiple of {LINE_BYTES} bytes, found {0}")]
    BadSize(u64),
    #[error("expected a working-set size of at most {MAX_WSS_BYTES} bytes (1 GiB), found {0}")]
    TooLarge(u64),
}

impl WorkingSet {
    /// Checks the size (the amount needs no check: 0 passes is a phase that does nothing).
    pub fn validate(&self) -> Result<(), WssError> {
        if self.size == 0 || !self.size.is_multiple_of(LINE_BYTES) {
            return Err(WssError::BadSize(self.size));
        }
        if self.size > MAX_WSS_BYTES {
            return Err(WssError::TooLarge(self.size));
        }
        Ok(())
    }

    /// Lines of the working set, one access each per pass.
    pub fn lines(&self) -> u64 {
        self.size / LINE_BYTES
    }

    /// Line accesses of `passes` or `lines`; `None` for a [`WssAmount::Work`], whose count
    /// depends on the calibrated cost (see [`WorkingSet::accesses_for_work`]).
    pub fn fixed_accesses(&self) -> Option<u64> {
        match &self.amount {
            WssAmount::Passes { passes } => Some(passes.saturating_mul(self.lines())),
            WssAmount::Lines { lines } => Some(*lines),
            WssAmount::Work { .. } => None,
        }
    }

    /// Accesses that take `work_ns` at `warm_line_ns` a line: at least one when any work is
    /// asked, so a phase of a few ns still touches its working set.
    pub fn accesses_for_work(work_ns: u64, warm_line_ns: f64) -> u64 {
        if work_ns == 0 {
            return 0;
        }
        if !(warm_line_ns.is_finite() && warm_line_ns > 0.0) {
            return 1;
        }
        ((work_ns as f64 / warm_line_ns).round() as u64).max(1)
    }

    /// The order of the lines in every pass: `0..lines` for sequential, a Fisher–Yates
    /// permutation drawn from `seed` with SplitMix64 for random (a fixed, documented generator,
    /// so that the simulator, `pacer run` and the tests agree on it whatever `rand` does).
    pub fn line_order(&self) -> Vec<u32> {
        let n = self.lines().min(MAX_WSS_BYTES / LINE_BYTES) as u32;
        let mut order: Vec<u32> = (0..n).collect();
        if self.order == WssOrder::Random {
            let mut state = self.seed;
            for i in (1..order.len()).rev() {
                let j = (splitmix64(&mut state) % (i as u64 + 1)) as usize;
                order.swap(i, j);
            }
        }
        order
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): one 64-bit state, good enough to shuffle lines.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What a working-set pass does to one line.
pub trait LineAccess {
    /// Reads line `line` (its first word).
    fn read(&mut self, line: u32);
    /// Writes line `line` (its first word); `k` is the access's number, a value that changes.
    fn write(&mut self, line: u32, k: u64);
}

/// Accesses `first .. first + count` of an execution over `order`: access `k` touches line
/// `order[k mod lines]` and is a write when `k mod 5 = 4`. An empty order does nothing.
#[inline]
pub fn drive<A: LineAccess>(order: &[u32], first: u64, count: u64, a: &mut A) {
    let n = order.len() as u64;
    if n == 0 {
        return;
    }
    let mut pos = (first % n) as usize;
    let mut phase = first % WRITE_EVERY;
    for k in first..first.saturating_add(count) {
        let line = order[pos];
        if phase == WRITE_EVERY - 1 {
            a.write(line, k);
            phase = 0;
        } else {
            a.read(line);
            phase += 1;
        }
        pos += 1;
        if pos == order.len() {
            pos = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Count {
        reads: u64,
        writes: u64,
        seq: Vec<(u32, bool)>,
    }

    impl LineAccess for Count {
        fn read(&mut self, line: u32) {
            self.reads += 1;
            self.seq.push((line, false));
        }
        fn write(&mut self, line: u32, _k: u64) {
            self.writes += 1;
            self.seq.push((line, true));
        }
    }

    fn ws(size: u64, order: WssOrder, seed: u64) -> WorkingSet {
        WorkingSet {
            size,
            order,
            seed,
            amount: WssAmount::Passes { passes: 1 },
        }
    }

    #[test]
    fn four_reads_to_one_write_in_line_order() {
        let w = ws(16384, WssOrder::Sequential, 0);
        let order = w.line_order();
        assert_eq!(order.len(), 256);
        let mut c = Count::default();
        drive(&order, 0, 3 * 256, &mut c);
        assert_eq!((c.reads, c.writes), (3 * 256 * 4 / 5 + 1, 3 * 256 / 5));
        // Sequential: access k is line k mod 256; writes exactly at k = 4, 9, 14, …
        for (k, &(line, write)) in c.seq.iter().enumerate() {
            assert_eq!(line as usize, k % 256);
            assert_eq!(write, k % 5 == 4, "access {k}");
        }
    }

    #[test]
    fn random_order_is_a_seeded_permutation() {
        let a = ws(262144, WssOrder::Random, 7).line_order();
        let b = ws(262144, WssOrder::Random, 7).line_order();
        let c = ws(262144, WssOrder::Random, 8).line_order();
        assert_eq!(a, b, "same seed, same order");
        assert_ne!(a, c, "another seed, another order");
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            (0..4096).collect::<Vec<u32>>(),
            "every line once per pass"
        );
        // Not the sequential order, nor mostly ascending neighbours.
        let ascending = a.windows(2).filter(|w| w[1] == w[0] + 1).count();
        assert!(ascending < 40, "{ascending} of 4095 steps go to the next line");
    }

    #[test]
    fn continuing_an_execution_keeps_the_pattern() {
        let order = ws(640, WssOrder::Random, 3).line_order();
        let (mut whole, mut parts) = (Count::default(), Count::default());
        drive(&order, 0, 97, &mut whole);
        drive(&order, 0, 40, &mut parts);
        drive(&order, 40, 57, &mut parts);
        assert_eq!(whole.seq, parts.seq);
    }

    #[test]
    fn sizes_are_checked_and_work_converts_to_accesses() {
        assert_eq!(
            ws(100, WssOrder::Sequential, 0).validate(),
            Err(WssError::BadSize(100))
        );
        assert_eq!(
            ws(0, WssOrder::Sequential, 0).validate(),
            Err(WssError::BadSize(0))
        );
        assert_eq!(
            ws(2 << 30, WssOrder::Sequential, 0).validate(),
            Err(WssError::TooLarge(2 << 30))
        );
        assert!(ws(64, WssOrder::Random, 0).validate().is_ok());
        assert_eq!(WorkingSet::accesses_for_work(1_000_000, 2.5), 400_000);
        assert_eq!(WorkingSet::accesses_for_work(1, 2.5), 1);
        assert_eq!(WorkingSet::accesses_for_work(0, 2.5), 0);
        assert_eq!(WorkingSet::accesses_for_work(10, f64::NAN), 1);
        let mut w = ws(16384, WssOrder::Sequential, 0);
        assert_eq!(w.fixed_accesses(), Some(256));
        w.amount = WssAmount::Lines { lines: 5 };
        assert_eq!(w.fixed_accesses(), Some(5));
    }
}
