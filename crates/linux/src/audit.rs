//! Audit of the kernel's SCHED_DEADLINE admission accounting, and its repair: the logic behind
//! `pacer doctor`.
//!
//! Each root domain keeps `dl_bw->total_bw`, the bandwidth it has admitted (sched-deadline.rst
//! §5.1, printed in `/sys/kernel/debug/sched/debug`). It must equal the fair servers' bandwidth
//! (one 50 ms / 1 s server per CPU on Linux ≥ 6.12) plus `runtime/period` of every thread that
//! is SCHED_DEADLINE now, in 20-bit fixed point. Two kernel behaviours break that equality
//! (docs/linux.md, "Kernel findings"):
//! - *below*: a root-domain rebuild (cpuset change, or on Linux 6.18 any read of
//!   `sched_rt_{runtime,period}_us`) while a SCHED_DEADLINE thread that just exited still has its
//!   inactive timer pending: the rebuild forgets the thread and the timer subtracts it again.
//!   Below zero, every later reservation is refused with EBUSY;
//! - *above*: a sleeping thread moved out of SCHED_DEADLINE by another thread after its 0-lag
//!   time keeps its bandwidth counted for ever.
//!
//! A rebuild recomputes `total_bw` from the threads that are SCHED_DEADLINE at that moment, so it
//! is also the repair: by toggling the v1 root cpuset's `sched_load_balance` 1 → 0 → 1, or, where
//! that knob does not exist or is 0 (partitions), by reading `sched_rt_period_us`, which rebuilds
//! on the kernels that show the first behaviour. A rebuild is itself unsafe while a reservation
//! is being torn down, so the audit only reports a mismatch that stays the same over a settle
//! time, and the repair checks its result the same way.
//!
//! Root domains: each cpuset partition pacer made (`pacer-PID-*`) is one; the other CPUs are
//! told apart by their figures (CPUs that report the same `(bw, total_bw)` are taken as one
//! domain: the usual single domain). Two foreign partitions that happen to report equal figures
//! are merged, and then reported as a mismatch; the CPU list in the report shows it.

use std::collections::BTreeMap;
use std::fs;

use pacer_model::reservation::{to_ratio, DEFAULT_FAIR_SERVER};
use serde::Serialize;

use crate::cgroup::CpusetHierarchy;
use crate::procfs;
use crate::sched::{self, Tid, SCHED_DEADLINE};
use crate::sched_debug::{self, DlBandwidth};

/// Why the audit could not run.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("cannot read the scheduler's accounting: {0} (pacer doctor needs root and debugfs)")]
    SchedDebug(String),
    #[error("rebuilding the root domains failed: {0}")]
    Rebuild(String),
}

/// One SCHED_DEADLINE thread as the accounting should count it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DlThread {
    pub pid: Tid,
    pub tid: Tid,
    pub name: String,
    pub runtime_ns: u64,
    pub period_ns: u64,
    /// `to_ratio(period, runtime)`: what the kernel adds to `total_bw` for it.
    pub bw: i64,
    /// The CPU it last ran on (its root domain is that CPU's).
    pub cpu: usize,
}

/// One root domain's accounting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Domain {
    pub cpus: Vec<usize>,
    /// `dl_bw->total_bw` as the kernel reports it.
    pub reported: i64,
    /// Fair servers plus the threads' reservations.
    pub expected: i64,
    pub fair_servers: i64,
    pub reservations: i64,
    /// `dl_bw->bw` × CPUs: what admission allows in total (`None`: admission control is off).
    pub cap: Option<i64>,
}

impl Domain {
    /// `reported − expected`: negative when bandwidth was subtracted twice, positive when some
    /// leaked.
    pub fn error(&self) -> i64 {
        self.reported - self.expected
    }
}

/// The accounting of every root domain at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    pub domains: Vec<Domain>,
    pub threads: Vec<DlThread>,
}

impl Snapshot {
    /// Whether every domain's figure is what its threads and servers hold.
    pub fn consistent(&self) -> bool {
        self.domains.iter().all(|d| d.error() == 0)
    }
}

/// Every SCHED_DEADLINE thread of the machine.
pub fn dl_threads() -> Vec<DlThread> {
    let mut out = Vec::new();
    let Ok(procs) = fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<Tid>().ok()) else {
            continue;
        };
        for tid in procfs::threads_of(pid).unwrap_or_default() {
            let Ok(a) = sched::get_attr(tid) else { continue };
            if a.sched_policy != SCHED_DEADLINE {
                continue;
            }
            out.push(DlThread {
                pid,
                tid,
                name: procfs::comm(pid, tid).unwrap_or_default(),
                runtime_ns: a.sched_runtime,
                period_ns: a.sched_period,
                bw: to_ratio(a.sched_period, a.sched_runtime) as i64,
                cpu: procfs::last_cpu(pid, tid).unwrap_or(0),
            });
        }
    }
    out
}

/// Groups the per-CPU figures into root domains and sets what each should hold. `known` lists
/// CPU sets known to be root domains (cpuset partitions); the other CPUs are grouped by equal
/// figures.
pub fn domains(per_cpu: &[DlBandwidth], threads: &[DlThread], known: &[Vec<usize>]) -> Vec<Domain> {
    let mut groups: Vec<(u64, i64, Vec<usize>)> = Vec::new();
    for k in known {
        let members: Vec<&DlBandwidth> = per_cpu.iter().filter(|s| k.contains(&s.cpu)).collect();
        if let Some(first) = members.first() {
            groups.push((first.bw, first.total_bw, members.iter().map(|s| s.cpu).collect()));
        }
    }
    let mut by_value: BTreeMap<(u64, i64), Vec<usize>> = BTreeMap::new();
    for s in per_cpu
        .iter()
        .filter(|s| !known.iter().any(|k| k.contains(&s.cpu)))
    {
        by_value.entry((s.bw, s.total_bw)).or_default().push(s.cpu);
    }
    groups.extend(by_value.into_iter().map(|((bw, total), cpus)| (bw, total, cpus)));
    let server = to_ratio(DEFAULT_FAIR_SERVER.1, DEFAULT_FAIR_SERVER.0) as i64;
    let mut out: Vec<Domain> = groups
        .into_iter()
        .map(|(bw, reported, cpus)| {
            let fair_servers = server * cpus.len() as i64;
            let reservations = threads
                .iter()
                .filter(|t| cpus.contains(&t.cpu))
                .map(|t| t.bw)
                .sum();
            Domain {
                reported,
                expected: fair_servers + reservations,
                fair_servers,
                reservations,
                cap: (bw != u64::MAX).then(|| (bw as i64).saturating_mul(cpus.len() as i64)),
                cpus,
            }
        })
        .collect();
    out.sort_by(|a, b| a.cpus.cmp(&b.cpus));
    out
}

/// The CPU sets of the cpuset partitions pacer made (each its own root domain), if any.
fn known_partitions() -> Vec<Vec<usize>> {
    CpusetHierarchy::detect()
        .ok()
        .and_then(|h| h.partition_cpus().ok())
        .unwrap_or_default()
}

/// The accounting now.
pub fn snapshot() -> Result<Snapshot, AuditError> {
    // Threads first: one that appears between the two reads is counted by the kernel but not
    // here, and the settle loop of [`settled`] sees it on the next read.
    let threads = dl_threads();
    let per_cpu = read_per_cpu()?;
    Ok(Snapshot {
        domains: domains(&per_cpu, &threads, &known_partitions()),
        threads,
    })
}

fn read_per_cpu() -> Result<Vec<DlBandwidth>, AuditError> {
    let text = fs::read_to_string(sched_debug::SCHED_DEBUG)
        .map_err(|e| AuditError::SchedDebug(format!("{}: {e}", sched_debug::SCHED_DEBUG)))?;
    let v = sched_debug::parse_sched_debug(&text);
    if v.is_empty() {
        return Err(AuditError::SchedDebug(format!(
            "{}: no dl_rq sections with .dl_bw figures",
            sched_debug::SCHED_DEBUG
        )));
    }
    Ok(v)
}

/// Snapshots until two taken `settle_ns` apart agree (at most `tries` of them): a reservation
/// being torn down is out of step for up to one of its periods, a real corruption stays.
pub fn settled(settle_ns: u64, tries: usize) -> Result<(Snapshot, bool), AuditError> {
    let mut last = snapshot()?;
    if last.consistent() {
        return Ok((last, true));
    }
    for _ in 1..tries.max(2) {
        std::thread::sleep(std::time::Duration::from_nanos(settle_ns));
        let now = snapshot()?;
        if now.consistent() {
            return Ok((now, true));
        }
        let same = now.domains.iter().map(Domain::error).collect::<Vec<_>>()
            == last.domains.iter().map(Domain::error).collect::<Vec<_>>();
        if same {
            return Ok((now, true));
        }
        last = now;
    }
    Ok((last, false))
}

/// Waits, up to `timeout_ns`, until the accounting of the root domains holding `cpus` matches
/// their threads and servers; true if it does. Called before anything that rebuilds root domains
/// (tearing down a cpuset partition): a SCHED_DEADLINE thread that exited moments ago is still
/// counted until its 0-lag time, and a rebuild before that subtracts it twice. Returns at once
/// when the scheduler's debugfs file cannot be read (nothing to wait on).
pub fn wait_consistent(cpus: &[usize], timeout_ns: u64) -> bool {
    let start = std::time::Instant::now();
    loop {
        let Ok(per_cpu) = read_per_cpu() else { return true };
        let threads = dl_threads();
        let ok = domains(&per_cpu, &threads, &[cpus.to_vec()])
            .iter()
            .filter(|d| d.cpus.iter().any(|c| cpus.contains(c)))
            .all(|d| d.error() == 0);
        if ok {
            return true;
        }
        if start.elapsed().as_nanos() as u64 >= timeout_ns {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// How the repair rebuilt the root domains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RebuildMethod {
    /// v1 root cpuset `sched_load_balance` 1 → 0 → 1.
    LoadBalanceToggle,
    /// A read of `/proc/sys/kernel/sched_rt_period_us`.
    RtSysctlRead,
}

/// Makes the kernel recompute every root domain's `total_bw` from the threads that are
/// SCHED_DEADLINE now.
pub fn rebuild() -> Result<RebuildMethod, AuditError> {
    if let Ok(h) = CpusetHierarchy::detect() {
        if let Ok(true) = h.rebuild_root_domains() {
            return Ok(RebuildMethod::LoadBalanceToggle);
        }
    }
    fs::read_to_string("/proc/sys/kernel/sched_rt_period_us")
        .map_err(|e| AuditError::Rebuild(format!("/proc/sys/kernel/sched_rt_period_us: {e}")))?;
    Ok(RebuildMethod::RtSysctlRead)
}

/// Rebuilds the root domains until the accounting matches what the threads hold, at most
/// `attempts` times (a thread exiting during a rebuild can spoil it); each snapshot must have
/// settled over `settle_ns`. Returns the rebuilds made (none when it already matched).
pub fn repair(settle_ns: u64, attempts: usize) -> Result<Vec<RebuildMethod>, AuditError> {
    let mut done = Vec::new();
    for _ in 0..attempts {
        if settled(settle_ns, 5)?.0.consistent() {
            break;
        }
        done.push(rebuild()?);
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(cpu: usize, total_bw: i64) -> DlBandwidth {
        DlBandwidth {
            cpu,
            bw: 996_147,
            total_bw,
        }
    }

    fn thread(cpu: usize, runtime_ns: u64, period_ns: u64) -> DlThread {
        DlThread {
            pid: 1,
            tid: 1,
            name: "t".into(),
            runtime_ns,
            period_ns,
            bw: to_ratio(period_ns, runtime_ns) as i64,
            cpu,
        }
    }

    #[test]
    fn one_domain_holds_servers_and_threads() {
        let t = thread(1, 1_000_000, 10_000_000);
        let d = domains(&[cpu(0, 104_856 + t.bw), cpu(1, 104_856 + t.bw)], &[t], &[]);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].cpus, vec![0, 1]);
        assert_eq!(d[0].error(), 0);
        assert_eq!(d[0].cap, Some(2 * 996_147));
    }

    #[test]
    fn a_double_subtraction_shows_as_a_negative_error() {
        let d = domains(&[cpu(0, -148_543), cpu(1, -148_543)], &[], &[]);
        assert_eq!(d[0].error(), -148_543 - 104_856);
    }

    #[test]
    fn partitions_are_separate_domains() {
        let t = thread(1, 1_000_000, 10_000_000);
        let d = domains(
            &[cpu(0, 52_428), cpu(1, 52_428 + t.bw)],
            std::slice::from_ref(&t),
            &[],
        );
        assert_eq!(d.len(), 2);
        assert!(d.iter().all(|d| d.error() == 0), "{d:?}");
        // Two idle one-CPU partitions report the same figures: only knowing them keeps them apart.
        let idle = [cpu(0, 52_428), cpu(1, 52_428)];
        assert_eq!(domains(&idle, &[], &[])[0].error(), -52_428);
        let d = domains(&idle, &[], &[vec![1]]);
        assert_eq!(d.len(), 2);
        assert!(d.iter().all(|d| d.error() == 0), "{d:?}");
    }
}
