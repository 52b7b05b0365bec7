//! WALT, Window-Assisted Load Tracking (Android's `kernel/sched/walt.c`; the EAS integration by
//! Vikram Mulukutla and Todd Kjos that the HiKey960 kernels of adaptive-deadline-audio-android.txt
//! run): time is cut into windows of `window_ns` (20 ms by default, `walt_ravg_window`) aligned on
//! multiples of the window; in each window a CPU accumulates its busy time scaled to the biggest
//! CPU at f_max (`scale_exec_time()`: δ · capacity_cur / 1024). When a window closes its sum joins
//! a history of the last `hist_size` windows (`walt_ravg_hist_size`, 5), and the CPU's utilisation
//! is a statistic of that history in capacity units (sum · 1024 / window):
//!
//! - `Recent`: the last complete window — `rq->prev_runnable_sum`, what the HiKey 4.9 kernels'
//!   `cpu_util_freq()` hands schedutil;
//! - `Max`: the largest of the history;
//! - `Avg`: the mean of the history;
//! - `MaxRecentAvg` (WALT's default `WINDOW_STATS_MAX_RECENT_AVG`): max(last window, mean).
//!
//! What this model tracks, precisely: one history per CPU of the busy time of its rt and fair
//! threads (deadline threads are accounted for by their reserved bandwidth instead), windows in
//! which the CPU stayed idle counting as 0. Kernel WALT applies the policy per task (and keeps a
//! task's history across sleeps); for the single busy thread per CPU of the audio experiments the
//! two coincide. A step in demand therefore shows in full at the end of the first window that is
//! entirely after the step (after one to two windows), and is not seen at all before the window
//! in which it happened closes. With `MaxRecentAvg` a fall in demand takes up to `hist_size`
//! windows to fade. The state is updated lazily (closed form over skipped windows), never by
//! periodic events.

use serde::{Deserialize, Serialize};

/// Largest supported history (`RAVG_HIST_SIZE_MAX` is 5 in the kernel).
pub const WALT_HIST_MAX: usize = 8;
/// `walt_ravg_window`'s default, ns.
pub const DEFAULT_WINDOW_NS: u64 = 20_000_000;
/// `walt_ravg_hist_size`'s default.
pub const DEFAULT_HIST_SIZE: usize = 5;

/// How WALT turns its window history into a utilisation (`sched_window_stats_policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaltPolicy {
    Recent,
    Max,
    MaxRecentAvg,
    Avg,
}

/// One CPU's window accounting.
#[derive(Debug, Clone, Copy)]
pub struct Walt {
    window_ns: u64,
    hist_size: usize,
    policy: WaltPolicy,
    window_start: u64,
    /// Scaled busy ns in the current window.
    curr: u64,
    /// Closed windows, most recent first.
    hist: [u64; WALT_HIST_MAX],
    last: u64,
}

impl Walt {
    /// `window_ns` > 0 and 1 ≤ `hist_size` ≤ [`WALT_HIST_MAX`] (checked by the caller).
    pub fn new(window_ns: u64, hist_size: usize, policy: WaltPolicy) -> Self {
        Walt {
            window_ns: window_ns.max(1),
            hist_size: hist_size.clamp(1, WALT_HIST_MAX),
            policy,
            window_start: 0,
            curr: 0,
            hist: [0; WALT_HIST_MAX],
            last: 0,
        }
    }

    fn push(&mut self, v: u64, times: u64) {
        let n = self.hist_size;
        let k = (times as usize).min(n);
        self.hist.copy_within(0..n - k, k);
        self.hist[..k].fill(v);
    }

    /// WALT's defaults: 20 ms windows, 5 of history, max(recent, average).
    pub fn default_android() -> Self {
        Walt::new(DEFAULT_WINDOW_NS, DEFAULT_HIST_SIZE, WaltPolicy::MaxRecentAvg)
    }

    /// Accounts [last, now) as busy at `speed` (1024 scale) or idle, closing the windows it spans.
    pub fn advance(&mut self, now: u64, busy: bool, speed: u64) {
        if now <= self.last {
            return;
        }
        let scaled = |d: u64| {
            if busy {
                ((d as u128 * speed as u128) >> 10) as u64
            } else {
                0
            }
        };
        let end = self.window_start + self.window_ns;
        if now < end {
            self.curr += scaled(now - self.last);
        } else {
            let first = self.curr + scaled(end - self.last);
            self.push(first, 1);
            let full = (now - end) / self.window_ns;
            if full > 0 {
                self.push(scaled(self.window_ns), full);
            }
            self.window_start = end + full * self.window_ns;
            self.curr = scaled(now - self.window_start);
        }
        self.last = now;
    }

    /// The utilisation from the closed windows, capacity units (1024 = the biggest CPU at f_max
    /// busy for a whole window).
    pub fn util(&self) -> u64 {
        let h = &self.hist[..self.hist_size];
        let recent = h[0];
        let v = match self.policy {
            WaltPolicy::Recent => recent,
            WaltPolicy::Max => h.iter().copied().max().unwrap_or(0),
            WaltPolicy::Avg => h.iter().sum::<u64>() / h.len() as u64,
            WaltPolicy::MaxRecentAvg => recent.max(h.iter().sum::<u64>() / h.len() as u64),
        };
        ((v as u128 * 1024) / self.window_ns as u128) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_step_shows_after_the_windows_close() {
        let mut w = Walt::new(20 * MS, 5, WaltPolicy::Recent);
        w.advance(5 * MS, false, 1024);
        w.advance(19 * MS, true, 1024);
        assert_eq!(w.util(), 0, "the current window does not count");
        w.advance(21 * MS, true, 1024);
        assert_eq!(w.util(), 768, "15 of 20 ms busy");
        w.advance(45 * MS, true, 1024);
        assert_eq!(w.util(), 1024);
        w.advance(100 * MS, false, 1024);
        assert_eq!(w.util(), 0);
    }

    #[test]
    fn max_recent_avg_fades_over_the_history() {
        let mut w = Walt::new(10 * MS, 5, WaltPolicy::MaxRecentAvg);
        w.advance(100 * MS, true, 512);
        assert_eq!(w.util(), 512);
        w.advance(110 * MS, false, 512);
        assert_eq!(w.util(), 512 * 4 / 5);
        w.advance(140 * MS, false, 512);
        assert_eq!(w.util(), 512 / 5);
        w.advance(150 * MS, false, 512);
        assert_eq!(w.util(), 0);
    }
}
