//! The metrics of one run, as rm-vs-edf-multicore-linux.txt §5.5 and Table 2 define them:
//! normalised laxity ((D − response time)/T per job, averaged per task, then over the tasks of the
//! set), measured utilisation ("Exp. U": exec/T per job averaged per task, summed over the set and
//! divided by m as Table 4 prints it), task context-switch and migration rates (per task, here per
//! second of the run so runs of different lengths compare), deadline misses, and L1D/L2 miss
//! rates, which only a backend with hardware counters has: they are `None` otherwise, never 0.
//!
//! Per-job laxities are kept as a fixed-width histogram ([`LaxityHist`]) for all tasks and for
//! the minimum- and maximum-period tasks (the paper's Figs. 3 and 4): exact counts per
//! 1/1000-wide bin, so histograms of shards and sets add up exactly and a run's record stays a
//! few kilobytes where the raw values would be megabytes.

use std::collections::BTreeMap;

use pacer_model::TaskSet;
use pacer_sim::record::{JobRecord, Observer};
use pacer_workload::jobs::{Summary, TaskCounters};
use serde::{Deserialize, Serialize};

/// Bins per unit of normalised laxity.
pub const LAXITY_BINS_PER_UNIT: f64 = 1000.0;
/// Laxities below this are counted in the lowest bin (their exact minimum is kept).
pub const LAXITY_FLOOR: f64 = -1000.0;

/// Counts of per-job normalised laxities in bins [k/1000, (k+1)/1000).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LaxityHist {
    /// Jobs counted.
    pub jobs: u64,
    /// Jobs with laxity < 0 (missed deadlines).
    pub negative: u64,
    /// Smallest and largest laxity seen (`None` without jobs).
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// (bin index k, count), ascending k; only non-empty bins.
    pub bins: Vec<(i64, u64)>,
}

impl LaxityHist {
    fn bin(l: f64) -> i64 {
        (l.max(LAXITY_FLOOR) * LAXITY_BINS_PER_UNIT).floor() as i64
    }

    /// Adds every count of `other`.
    pub fn merge(&mut self, other: &LaxityHist) {
        let mut m: BTreeMap<i64, u64> = self.bins.iter().copied().collect();
        for &(k, c) in &other.bins {
            *m.entry(k).or_default() += c;
        }
        self.bins = m.into_iter().collect();
        self.jobs += other.jobs;
        self.negative += other.negative;
        self.min = opt_fold(self.min, other.min, f64::min);
        self.max = opt_fold(self.max, other.max, f64::max);
    }

    /// The empirical CDF at the upper edge of each non-empty bin: (laxity, fraction ≤ it).
    pub fn cdf(&self) -> Vec<(f64, f64)> {
        let mut acc = 0u64;
        self.bins
            .iter()
            .map(|&(k, c)| {
                acc += c;
                (
                    (k + 1) as f64 / LAXITY_BINS_PER_UNIT,
                    acc as f64 / self.jobs.max(1) as f64,
                )
            })
            .collect()
    }

    /// The q-quantile (0 ≤ q ≤ 1) to bin resolution: the upper edge of the bin holding it.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.jobs == 0 {
            return None;
        }
        let target = (q.clamp(0.0, 1.0) * self.jobs as f64).ceil().max(1.0) as u64;
        let mut acc = 0;
        for &(k, c) in &self.bins {
            acc += c;
            if acc >= target {
                return Some((k + 1) as f64 / LAXITY_BINS_PER_UNIT);
            }
        }
        self.max
    }
}

fn opt_fold(a: Option<f64>, b: Option<f64>, f: fn(f64, f64) -> f64) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(f(x, y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Builds a [`LaxityHist`] job by job.
#[derive(Debug, Default)]
struct HistAcc {
    bins: BTreeMap<i64, u64>,
    jobs: u64,
    negative: u64,
    min: Option<f64>,
    max: Option<f64>,
}

impl HistAcc {
    fn add(&mut self, l: f64) {
        *self.bins.entry(LaxityHist::bin(l)).or_default() += 1;
        self.jobs += 1;
        if l < 0.0 {
            self.negative += 1;
        }
        self.min = opt_fold(self.min, Some(l), f64::min);
        self.max = opt_fold(self.max, Some(l), f64::max);
    }
    fn done(self) -> LaxityHist {
        LaxityHist {
            jobs: self.jobs,
            negative: self.negative,
            min: self.min,
            max: self.max,
            bins: self.bins.into_iter().collect(),
        }
    }
}

/// The per-job laxity distributions of a run (Figs. 3–4).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LaxityDist {
    /// Every job of every task.
    pub all: LaxityHist,
    /// Jobs of the tasks with the smallest period of the set.
    pub min_period: LaxityHist,
    /// Jobs of the tasks with the largest period of the set.
    pub max_period: LaxityHist,
}

impl LaxityDist {
    pub fn merge(&mut self, o: &LaxityDist) {
        self.all.merge(&o.all);
        self.min_period.merge(&o.min_period);
        self.max_period.merge(&o.max_period);
    }
}

/// One task's figures in one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskMetrics {
    pub name: String,
    pub period_ns: u64,
    pub wcet_ns: u64,
    /// Finished jobs.
    pub jobs: u64,
    /// Finished jobs that missed their deadline.
    pub misses: u64,
    /// Mean over jobs of (D − response)/T.
    pub normalised_laxity: Option<f64>,
    /// Mean over jobs of exec/T.
    pub utilisation: Option<f64>,
    /// Times switched in.
    pub context_switches: u64,
    /// Times moved to another CPU.
    pub migrations: u64,
    /// L1D misses per second of execution; `None` where the backend cannot count them.
    pub l1d_miss_rate: Option<f64>,
    /// L2 misses per second of execution; `None` where the backend cannot count them.
    pub l2_miss_rate: Option<f64>,
}

/// Set-level figures of one run (what one task set contributes to a Table 4 cell).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunMetrics {
    /// Mean over tasks of the per-task normalised laxity.
    pub normalised_laxity: Option<f64>,
    /// Σ per-task utilisation / m.
    pub utilisation_per_cpu: Option<f64>,
    /// Context switches / tasks / second.
    pub context_switch_rate: f64,
    /// Migrations / tasks / second.
    pub migration_rate: f64,
    pub jobs: u64,
    pub misses: u64,
    /// misses / jobs.
    pub miss_ratio: Option<f64>,
    pub l1d_miss_rate: Option<f64>,
    pub l2_miss_rate: Option<f64>,
}

impl RunMetrics {
    /// The set-level figures of `tasks` over a run of `duration_ns` on `cpus` CPUs.
    pub fn of(tasks: &[TaskMetrics], duration_ns: u64, cpus: usize) -> RunMetrics {
        let n = tasks.len().max(1) as f64;
        let secs = (duration_ns as f64 / 1e9).max(f64::MIN_POSITIVE);
        let mean = |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
        let lax: Vec<f64> = tasks.iter().filter_map(|t| t.normalised_laxity).collect();
        let utils: Vec<f64> = tasks.iter().filter_map(|t| t.utilisation).collect();
        let jobs: u64 = tasks.iter().map(|t| t.jobs).sum();
        let misses: u64 = tasks.iter().map(|t| t.misses).sum();
        // A rate for the set only when every task has one: a partial mean would pass off a few
        // tasks' figures as the set's.
        let all = |f: fn(&TaskMetrics) -> Option<f64>| -> Option<f64> {
            let v: Option<Vec<f64>> = tasks.iter().map(f).collect();
            v.and_then(mean)
        };
        RunMetrics {
            normalised_laxity: mean(lax),
            utilisation_per_cpu: (!utils.is_empty()).then(|| utils.iter().sum::<f64>() / cpus as f64),
            context_switch_rate: tasks.iter().map(|t| t.context_switches).sum::<u64>() as f64 / n / secs,
            migration_rate: tasks.iter().map(|t| t.migrations).sum::<u64>() as f64 / n / secs,
            jobs,
            misses,
            miss_ratio: (jobs > 0).then(|| misses as f64 / jobs as f64),
            l1d_miss_rate: all(|t| t.l1d_miss_rate),
            l2_miss_rate: all(|t| t.l2_miss_rate),
        }
    }
}

/// What a backend returns for one run; both backends fill it through [`Collector`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOutput {
    /// Length of the run the rates are per, ns.
    pub duration_ns: u64,
    pub tasks: Vec<TaskMetrics>,
    pub laxity: LaxityDist,
    /// What the backend could not measure or did differently, for the report.
    pub notes: Vec<String>,
}

/// Folds a run's finished jobs (in any order) into per-task figures and laxity histograms. Both
/// backends produce [`JobRecord`]s whose `thread` is the task's index in the set, so a simulated
/// and a measured run are summarised by this one code path (via `pacer_workload::jobs::Summary`,
/// the code `pacer sim` and `pacer run` print with).
pub struct Collector {
    summary: Summary,
    group: Vec<(bool, bool)>,
    all: HistAcc,
    min_period: HistAcc,
    max_period: HistAcc,
    periods: Vec<u64>,
    wcets: Vec<u64>,
    names: Vec<String>,
}

impl Collector {
    pub fn new(set: &TaskSet) -> Collector {
        let periods: Vec<u64> = set.tasks.iter().map(|t| t.period.ns()).collect();
        let lo = periods.iter().copied().min().unwrap_or(0);
        let hi = periods.iter().copied().max().unwrap_or(0);
        Collector {
            summary: Summary::new(set.tasks.len()),
            group: periods.iter().map(|&p| (p == lo, p == hi)).collect(),
            all: HistAcc::default(),
            min_period: HistAcc::default(),
            max_period: HistAcc::default(),
            wcets: set.tasks.iter().map(|t| t.wcet.ns()).collect(),
            periods,
            names: set.tasks.iter().map(|t| t.name.clone()).collect(),
        }
    }

    /// One finished job; jobs of threads outside the set are ignored.
    pub fn job(&mut self, r: &JobRecord) {
        let Some(&(lo, hi)) = self.group.get(r.thread as usize) else {
            return;
        };
        self.summary.add(r);
        let l = r.normalised_laxity();
        self.all.add(l);
        if lo {
            self.min_period.add(l);
        }
        if hi {
            self.max_period.add(l);
        }
    }

    /// The run's output. `counters[i]` are the backend's switch and migration counts of task `i`;
    /// `cache[i]` its (L1D, L2) miss rates where measured.
    pub fn finish(
        self,
        counters: &[TaskCounters],
        cache: &[(Option<f64>, Option<f64>)],
        duration_ns: u64,
        cpus: usize,
        notes: Vec<String>,
    ) -> RunOutput {
        let report = self
            .summary
            .report(&self.names, counters, duration_ns, cpus as u32);
        let tasks = report
            .per_task
            .iter()
            .take(self.periods.len())
            .enumerate()
            .map(|(i, t)| TaskMetrics {
                name: t.name.clone(),
                period_ns: self.periods[i],
                wcet_ns: self.wcets[i],
                jobs: t.jobs,
                misses: t.misses,
                normalised_laxity: t.normalised_laxity_mean,
                utilisation: t.utilisation,
                context_switches: t.switches,
                migrations: t.migrations,
                l1d_miss_rate: cache.get(i).and_then(|c| c.0),
                l2_miss_rate: cache.get(i).and_then(|c| c.1),
            })
            .collect();
        RunOutput {
            duration_ns,
            tasks,
            laxity: LaxityDist {
                all: self.all.done(),
                min_period: self.min_period.done(),
                max_period: self.max_period.done(),
            },
            notes,
        }
    }
}

impl Observer for Collector {
    fn job(&mut self, r: &JobRecord) {
        Collector::job(self, r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_counts_cdf_and_merge() {
        let mut a = HistAcc::default();
        for l in [0.5, 0.5004, -0.25, 0.9] {
            a.add(l);
        }
        let h = a.done();
        assert_eq!(h.jobs, 4);
        assert_eq!(h.negative, 1);
        assert_eq!(h.bins, vec![(-250, 1), (500, 2), (900, 1)]);
        assert_eq!(h.cdf().last().unwrap().1, 1.0);
        assert_eq!(h.quantile(0.5), Some(0.501));
        let mut m = h.clone();
        m.merge(&h);
        assert_eq!(m.jobs, 8);
        assert_eq!(m.bins[1], (500, 4));
        assert_eq!(m.min, Some(-0.25));
    }

    #[test]
    fn set_rates_are_per_task_per_second_and_cache_stays_unknown() {
        let t = |cs, mg| TaskMetrics {
            name: "t".into(),
            period_ns: 10,
            wcet_ns: 1,
            jobs: 10,
            misses: 1,
            normalised_laxity: Some(0.5),
            utilisation: Some(0.25),
            context_switches: cs,
            migrations: mg,
            l1d_miss_rate: None,
            l2_miss_rate: None,
        };
        let m = RunMetrics::of(&[t(20, 2), t(40, 6)], 2_000_000_000, 2);
        assert_eq!(m.context_switch_rate, 15.0);
        assert_eq!(m.migration_rate, 2.0);
        assert_eq!(m.utilisation_per_cpu, Some(0.25));
        assert_eq!(m.miss_ratio, Some(0.1));
        assert_eq!(m.l1d_miss_rate, None);
    }
}
