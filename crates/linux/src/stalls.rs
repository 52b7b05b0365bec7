//! Stalls the guest's scheduler cannot see: time during which a thread that never stops
//! computing was not running, and was not switched out by this kernel either. On a virtual
//! machine that is the host descheduling the vCPU (its own scheduler, or a CPU quota on the VM's
//! cgroup); on bare metal, SMIs and long interrupt handlers. No guest scheduling policy can win
//! that time back, so a real-time result measured while it happens says more about the host than
//! about the policy (docs/linux.md, "Kernel findings": stalls of this VM).
//!
//! The method is the one of the kernel's `hwlat` tracer and of `hwlatdetect`, made safe to run
//! without root: one thread per CPU reads CLOCK_MONOTONIC in a loop, and each gap longer than a
//! threshold is checked against the thread's own context-switch counts (`getrusage`). A gap with
//! a switch is the guest's scheduler at work (another task ran); a gap without one is a stall.
//! The hypervisor's own steal-time account (`/proc/stat`) is read beside it, because a quota
//! throttle need not appear there.

use std::io;
use std::sync::Arc;
use std::sync::Barrier;

use serde::Serialize;

use crate::run::sys::context_switches;
use crate::sched::{self, LinuxError};
use crate::sys::monotonic_ns;

/// Gaps kept per CPU; beyond it they are only counted.
pub const MAX_GAPS: usize = 100_000;

/// What to measure.
#[derive(Debug, Clone)]
pub struct StallSpec {
    /// The CPUs that spin, one thread each, all at once (the others stay idle).
    pub cpus: Vec<usize>,
    pub duration_ns: u64,
    /// Shortest gap recorded.
    pub threshold_ns: u64,
    /// A PM QoS request (µs of CPU wake-up latency) held while measuring, if any
    /// ([`crate::sys::CpuLatencyRequest`], root): at 0 idle CPUs poll, which a host's CPU quota
    /// counts as busy.
    pub cpu_latency_us: Option<u32>,
}

/// One gap in a spinning thread's clock reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Gap {
    /// When it began, ns from the start of the measurement.
    pub at_ns: u64,
    pub len_ns: u64,
}

/// What one CPU's spinner saw.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CpuStalls {
    pub cpu: usize,
    /// Clock reads made (the loop's rate shows how fast a read is here).
    pub reads: u64,
    /// Gaps without a context switch: the host, SMIs, interrupts.
    pub stalls: Vec<Gap>,
    /// Gaps with a context switch: the guest scheduler ran something else.
    pub preemptions: Vec<Gap>,
    /// Gaps beyond [`MAX_GAPS`] not kept.
    pub dropped: u64,
    /// Steal time the hypervisor reported for this CPU during the run (`/proc/stat`), ns; None
    /// where it cannot be read.
    pub steal_ns: Option<u64>,
}

impl CpuStalls {
    pub fn stalled_ns(&self) -> u64 {
        self.stalls.iter().map(|g| g.len_ns).sum()
    }
    pub fn longest_ns(&self) -> u64 {
        self.stalls.iter().map(|g| g.len_ns).max().unwrap_or(0)
    }
}

/// The classification of one loop iteration, kept apart from the clock so it can be tested.
#[derive(Debug, Default)]
pub struct GapRecorder {
    threshold_ns: u64,
    start_ns: u64,
    prev_ns: u64,
    prev_switches: (u64, u64),
    out: CpuStalls,
}

impl GapRecorder {
    pub fn new(cpu: usize, threshold_ns: u64, start_ns: u64, switches: (u64, u64)) -> Self {
        GapRecorder {
            threshold_ns,
            start_ns,
            prev_ns: start_ns,
            prev_switches: switches,
            out: CpuStalls {
                cpu,
                ..CpuStalls::default()
            },
        }
    }

    /// One read of the clock `now` and of the thread's switch counts.
    pub fn read(&mut self, now: u64, switches: (u64, u64)) {
        self.out.reads += 1;
        let len = now.saturating_sub(self.prev_ns);
        if len > self.threshold_ns {
            let gap = Gap {
                at_ns: self.prev_ns.saturating_sub(self.start_ns),
                len_ns: len,
            };
            let kept = self.out.stalls.len() + self.out.preemptions.len();
            if kept >= MAX_GAPS {
                self.out.dropped += 1;
            } else if switches == self.prev_switches {
                self.out.stalls.push(gap);
            } else {
                self.out.preemptions.push(gap);
            }
        }
        self.prev_ns = now;
        self.prev_switches = switches;
    }

    pub fn finish(self) -> CpuStalls {
        self.out
    }
}

/// The whole measurement.
#[derive(Debug, Clone, Serialize)]
pub struct StallReport {
    pub duration_ns: u64,
    pub threshold_ns: u64,
    /// The PM QoS request held while measuring (µs), if any.
    pub cpu_latency_us: Option<u32>,
    pub cpus: Vec<CpuStalls>,
    /// The interval that recurs between stalls, if one does (see [`recurring_interval`]).
    pub recurring: Option<Recurrence>,
}

/// A period on which stalls recur.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Recurrence {
    /// The interval, ns (whole milliseconds).
    pub interval_ns: u64,
    /// Intervals between consecutive stalls that are a multiple (1–10×) of it, within ±0.5 ms.
    pub on_grid: usize,
    /// All intervals considered.
    pub intervals: usize,
}

/// Looks for a period in stall start times (any CPU; stalls within 1 ms of each other count once,
/// since a host stopping the whole VM stops every vCPU at once). The candidate is the most common
/// interval in whole milliseconds (≥ 2 ms); it is reported when at least 3 intervals and at least
/// half of all intervals fall on its multiples (a host CPU quota throttles on CFS bandwidth
/// control's period, 100 ms by default).
pub fn recurring_interval(starts_ns: &[u64]) -> Option<Recurrence> {
    const MS: u64 = 1_000_000;
    let mut t: Vec<u64> = starts_ns.to_vec();
    t.sort_unstable();
    t.dedup_by(|b, a| b.saturating_sub(*a) < MS);
    let intervals: Vec<u64> = t.windows(2).map(|w| w[1] - w[0]).collect();
    let mut counts = std::collections::BTreeMap::<u64, usize>::new();
    for &i in &intervals {
        let ms = (i + MS / 2) / MS;
        if ms >= 2 {
            *counts.entry(ms).or_default() += 1;
        }
    }
    // Most common; ties go to the shorter interval (its multiples cover the longer one).
    let (&ms, _) = counts.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))?;
    let p = ms * MS;
    let on_grid = intervals
        .iter()
        .filter(|&&i| {
            let k = (i + p / 2) / p;
            (1..=10).contains(&k) && i.abs_diff(k * p) <= MS / 2
        })
        .count();
    (on_grid >= 3 && on_grid * 2 >= intervals.len()).then_some(Recurrence {
        interval_ns: p,
        on_grid,
        intervals: intervals.len(),
    })
}

/// Spins one thread on each of `spec.cpus` for `spec.duration_ns` and reports their gaps.
pub fn measure(spec: &StallSpec) -> Result<StallReport, LinuxError> {
    let online = crate::sys::online_cpus();
    if let Some(c) = spec.cpus.iter().find(|c| !online.contains(c)) {
        return Err(LinuxError::InvalidInput(format!(
            "CPU {c} is not online (online: {})",
            crate::sys::format_cpu_list(&online)
        )));
    }
    if spec.cpus.is_empty() {
        return Err(LinuxError::InvalidInput("no CPU to measure".into()));
    }
    // Held until the measurement ends; the kernel drops it when the file closes.
    let _latency = spec
        .cpu_latency_us
        .map(|us| {
            crate::sys::CpuLatencyRequest::new(us).map_err(|source| LinuxError::Io {
                path: "/dev/cpu_dma_latency".into(),
                source,
            })
        })
        .transpose()?;
    let before = crate::sys::steal_by_cpu_ns();
    let start = Arc::new(Barrier::new(spec.cpus.len() + 1));
    let mut handles = Vec::new();
    for &cpu in &spec.cpus {
        let start = start.clone();
        let (dur, threshold) = (spec.duration_ns, spec.threshold_ns);
        let h = std::thread::Builder::new()
            .name(format!("pacer-stall{cpu}"))
            .spawn(move || -> Result<CpuStalls, LinuxError> {
                let pinned = sched::set_affinity(0, &[cpu]);
                start.wait();
                pinned?;
                let t0 = monotonic_ns();
                let end = t0 + dur;
                let mut rec = GapRecorder::new(cpu, threshold, t0, context_switches());
                loop {
                    let now = monotonic_ns();
                    rec.read(now, context_switches());
                    if now >= end {
                        break;
                    }
                }
                Ok(rec.finish())
            })
            .map_err(|source| LinuxError::Syscall {
                op: "pthread_create",
                target: 0,
                source,
            })?;
        handles.push(h);
    }
    start.wait();
    let mut cpus = Vec::new();
    for h in handles {
        cpus.push(h.join().map_err(|_| LinuxError::Syscall {
            op: "a spinner thread",
            target: 0,
            source: io::Error::other("panicked"),
        })??);
    }
    if let (Some(b), Some(a)) = (before, crate::sys::steal_by_cpu_ns()) {
        for c in &mut cpus {
            let at = |v: &[(Option<usize>, u64)]| v.iter().find(|(n, _)| *n == Some(c.cpu)).map(|(_, s)| *s);
            c.steal_ns = at(&a).zip(at(&b)).map(|(a, b)| a.saturating_sub(b));
        }
    }
    let starts: Vec<u64> = cpus
        .iter()
        .flat_map(|c| c.stalls.iter().filter(|g| g.len_ns >= 1_000_000).map(|g| g.at_ns))
        .collect();
    Ok(StallReport {
        duration_ns: spec.duration_ns,
        threshold_ns: spec.threshold_ns,
        cpu_latency_us: spec.cpu_latency_us,
        recurring: recurring_interval(&starts),
        cpus,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn gaps_are_stalls_unless_the_thread_was_switched_out() {
        let mut r = GapRecorder::new(1, 100_000, 1_000, (5, 7));
        r.read(1_100, (5, 7)); // 100 ns: no gap
        r.read(301_100, (5, 7)); // 300 µs, no switch: a stall
        r.read(301_200, (5, 7));
        r.read(2_301_200, (5, 8)); // 2 ms with an involuntary switch: the guest's scheduler
        r.read(2_301_300, (5, 8));
        r.read(2_401_300, (5, 8)); // exactly the threshold: not recorded
        let s = r.finish();
        assert_eq!(s.reads, 6);
        assert_eq!(
            s.stalls,
            vec![Gap {
                at_ns: 100,
                len_ns: 300_000
            }]
        );
        assert_eq!(
            s.preemptions,
            vec![Gap {
                at_ns: 300_200,
                len_ns: 2_000_000
            }]
        );
        assert_eq!((s.stalled_ns(), s.longest_ns()), (300_000, 300_000));
    }

    #[test]
    fn a_100ms_grid_is_found_and_scattered_stalls_are_not() {
        // Four on a 100 ms grid (one 200 ms apart), seen on two CPUs at once, plus one off it.
        let mut t = vec![277 * MS, 377 * MS, 477 * MS + 300_000, 677 * MS, 4_000 * MS + 123];
        t.extend(t.clone().iter().map(|x| x + 20_000));
        let r = recurring_interval(&t).expect("a period");
        assert_eq!(r.interval_ns, 100 * MS);
        assert_eq!((r.on_grid, r.intervals), (3, 4));
        assert_eq!(
            recurring_interval(&[10 * MS, 47 * MS, 130 * MS, 900 * MS, 1_333 * MS]),
            None
        );
        assert_eq!(recurring_interval(&[]), None);
    }

    #[test]
    fn a_short_measurement_spins_every_cpu_asked() {
        let r = measure(&StallSpec {
            cpus: vec![0],
            duration_ns: 50 * MS,
            threshold_ns: 100_000,
            cpu_latency_us: None,
        })
        .expect("measure");
        assert_eq!(r.cpus.len(), 1);
        // A clock read and getrusage take well under a microsecond: 50 ms hold thousands.
        assert!(r.cpus[0].reads > 1_000, "{:?}", r.cpus[0].reads);
        assert!(measure(&StallSpec {
            cpus: vec![100_000],
            duration_ns: MS,
            threshold_ns: 100_000,
            cpu_latency_us: None,
        })
        .is_err());
    }

    #[test]
    #[cfg_attr(
        not(pacer_privileged),
        ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
    )]
    fn a_cpu_latency_request_is_held_and_reported() {
        pacer_testkit::require(pacer_testkit::Need::Root);
        let r = measure(&StallSpec {
            cpus: vec![0],
            duration_ns: 20 * MS,
            threshold_ns: 100_000,
            cpu_latency_us: Some(0),
        })
        .expect("measure as root");
        assert_eq!(r.cpu_latency_us, Some(0));
    }
}
