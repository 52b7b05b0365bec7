//! Per-task and per-set summaries of a run, with the metrics of rm-vs-edf-multicore-linux.txt
//! (Table 2): task migration rate, task context-switch rate, normalised laxity and measured
//! utilisation ("Exp. U"), plus deadline misses, tardiness and response-time percentiles. The
//! simulator and the real-kernel executor summarise their job records with this one
//! implementation, so `pacer sim` and `pacer run` print the same figures computed the same way.
//!
//! [`Summary`] folds each finished job into per-thread accumulators as it arrives. Response times
//! go into an HDR histogram (3 significant digits, values in ns) whose size depends only on the
//! largest response time seen (logarithmically), never on the number of jobs, so a run of any
//! length summarises in constant memory. The counters an executor keeps itself
//! ([`TaskCounters`]: switches, migrations, CPU time…) are joined in by [`Summary::report`].

use hdrhistogram::Histogram;
use serde::Serialize;

use super::{thread_name, JobRecord};

/// Significant decimal digits kept by the response-time histograms.
const SIGFIG: u8 = 3;

/// A distribution of ns values kept in memory that grows only with the logarithm of the largest
/// value, never with the number of values: an HDR histogram of 3 significant digits plus the exact
/// maximum (the histogram's own is rounded up to its bucket). Quantiles are nearest rank, each the
/// top of its bucket and never above the exact maximum.
#[derive(Debug, Clone)]
pub struct Distribution {
    hist: Histogram<u64>,
    max: u64,
}

impl Default for Distribution {
    fn default() -> Self {
        Distribution {
            // Auto-resizing: it starts tiny and grows to the largest value recorded.
            hist: Histogram::new(SIGFIG).expect("3 significant digits is a valid histogram"),
            max: 0,
        }
    }
}

impl Distribution {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one value. `saturating_record` alone would clamp to the histogram's current top
    /// (2 for a fresh auto-resizing one) instead of growing it, so it is only the fallback beyond
    /// what auto-resizing covers (i64::MAX / 2 ns, ~73 years).
    pub fn add(&mut self, v: u64) {
        if self.hist.record(v).is_err() {
            self.hist.saturating_record(v);
        }
        self.max = self.max.max(v);
    }

    /// Number of values recorded.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// Nearest-rank quantile `q` in [0, 1]; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.is_empty() {
            return 0;
        }
        self.hist.value_at_quantile(q).min(self.max)
    }

    /// Exact largest value (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Distinct buckets in use (for memory accounting).
    pub fn distinct_values(&self) -> usize {
        self.hist.distinct_values()
    }
}

/// Running statistics of one thread's finished jobs.
#[derive(Debug, Clone)]
struct ThreadAcc {
    jobs: u64,
    misses: u64,
    /// Response times in ns.
    response: Distribution,
    laxity_sum: f64,
    laxity_min: f64,
    /// Σ exec / period over the jobs.
    util_sum: f64,
    max_tardiness: u64,
}

impl ThreadAcc {
    fn new() -> Self {
        ThreadAcc {
            jobs: 0,
            misses: 0,
            response: Distribution::new(),
            laxity_sum: 0.0,
            laxity_min: f64::INFINITY,
            util_sum: 0.0,
            max_tardiness: 0,
        }
    }

    fn add(&mut self, r: &JobRecord) {
        let response = r.response_time();
        self.jobs += 1;
        if r.missed() {
            self.misses += 1;
            self.max_tardiness = self.max_tardiness.max(r.finish - r.deadline);
        }
        self.response.add(response);
        let laxity = r.normalised_laxity();
        self.laxity_sum += laxity;
        self.laxity_min = self.laxity_min.min(laxity);
        self.util_sum += r.exec as f64 / r.period as f64;
    }
}

/// Per-thread job statistics accumulated in memory independent of the number of jobs. Feed it
/// with [`Summary::add`]; turn it into a [`SummaryReport`] with [`Summary::report`].
#[derive(Debug, Clone, Default)]
pub struct Summary {
    threads: Vec<ThreadAcc>,
}

impl Summary {
    /// A summary expecting `threads` threads (more are added if jobs of higher-numbered threads
    /// arrive).
    pub fn new(threads: usize) -> Self {
        Summary {
            threads: (0..threads).map(|_| ThreadAcc::new()).collect(),
        }
    }

    /// Folds in one finished job.
    pub fn add(&mut self, r: &JobRecord) {
        let i = r.thread as usize;
        if i >= self.threads.len() {
            self.threads.resize_with(i + 1, ThreadAcc::new);
        }
        self.threads[i].add(r);
    }

    /// Number of jobs folded in so far, over all threads.
    pub fn jobs(&self) -> u64 {
        self.threads.iter().map(|t| t.jobs).sum()
    }

    /// Builds the report. `names[i]` names thread `i` (unnamed threads get `t<i>`), `stats[i]` are
    /// the executor's counters for thread `i` (missing entries count as zero), `horizon_ns` is the
    /// length of the run (for per-second rates) and `cpus` the number of CPUs (for utilisation per
    /// CPU). The task count used for the per-task rates is the largest of `names.len()`,
    /// `stats.len()` and the number of threads seen.
    pub fn report(
        &self,
        names: &[String],
        stats: &[TaskCounters],
        horizon_ns: u64,
        cpus: u32,
    ) -> SummaryReport {
        let n = names.len().max(stats.len()).max(self.threads.len());
        let empty = ThreadAcc::new();
        let zero = TaskCounters::default();
        let per_task: Vec<TaskSummary> = (0..n)
            .map(|i| {
                let acc = self.threads.get(i).unwrap_or(&empty);
                let st = stats.get(i).unwrap_or(&zero);
                task_summary(thread_name(names, i as u32).into_owned(), acc, st)
            })
            .collect();

        let jobs: u64 = per_task.iter().map(|t| t.jobs).sum();
        let misses: u64 = per_task.iter().map(|t| t.misses).sum();
        let migrations: u64 = per_task.iter().map(|t| t.migrations).sum();
        let context_switches: u64 = per_task.iter().map(|t| t.switches).sum();
        let involuntary_switches: u64 = per_task.iter().map(|t| t.involuntary_switches).sum();
        let laxities: Vec<f64> = per_task.iter().filter_map(|t| t.normalised_laxity_mean).collect();
        let utilisation: f64 = per_task.iter().filter_map(|t| t.utilisation).sum();

        let seconds = horizon_ns as f64 / 1e9;
        let per_task_rate = |total: u64| ratio(total as f64, n as f64);
        let per_task_per_s =
            |total: u64| per_task_rate(total).and_then(|r| (horizon_ns > 0).then_some(r / seconds));

        SummaryReport {
            horizon_ns,
            cpus,
            tasks: n,
            jobs,
            misses,
            miss_ratio: ratio(misses as f64, jobs as f64),
            migrations,
            context_switches,
            involuntary_switches,
            migration_rate: per_task_rate(migrations),
            migration_rate_per_s: per_task_per_s(migrations),
            context_switch_rate: per_task_rate(context_switches),
            context_switch_rate_per_s: per_task_per_s(context_switches),
            involuntary_switch_rate: per_task_rate(involuntary_switches),
            involuntary_switch_rate_per_s: per_task_per_s(involuntary_switches),
            normalised_laxity: ratio(laxities.iter().sum(), laxities.len() as f64),
            utilisation,
            utilisation_per_cpu: ratio(utilisation, cpus as f64),
            per_task,
        }
    }

    /// Sizes of the growable structures (thread vector capacity, histogram bucket counts), to
    /// check that memory does not grow with the number of jobs.
    #[cfg(test)]
    fn footprint(&self) -> (usize, Vec<usize>) {
        (
            self.threads.capacity(),
            self.threads
                .iter()
                .map(|t| t.response.distinct_values())
                .collect(),
        )
    }
}

/// `num / den`, or `None` when `den` is zero.
fn ratio(num: f64, den: f64) -> Option<f64> {
    (den != 0.0).then(|| num / den)
}

fn task_summary(name: String, acc: &ThreadAcc, st: &TaskCounters) -> TaskSummary {
    let jobs = acc.jobs;
    let response_ns = (jobs > 0).then(|| {
        let q = |q: f64| acc.response.quantile(q);
        Percentiles {
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            max: acc.response.max(),
        }
    });
    TaskSummary {
        name,
        jobs,
        misses: acc.misses,
        miss_ratio: ratio(acc.misses as f64, jobs as f64),
        response_ns,
        normalised_laxity_mean: ratio(acc.laxity_sum, jobs as f64),
        normalised_laxity_min: (jobs > 0).then_some(acc.laxity_min),
        utilisation: ratio(acc.util_sum, jobs as f64),
        max_tardiness_ns: acc.max_tardiness,
        released: st.released,
        finished: st.finished,
        exec_ns: st.exec_ns,
        switches: st.switches,
        involuntary_switches: st.involuntary_switches,
        migrations: st.migrations,
        overruns: st.overruns,
    }
}

/// Per-thread counters an executor keeps itself rather than deriving them from job records (the
/// simulator's engine counters; on Linux the kernel's per-thread scheduler statistics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TaskCounters {
    /// Jobs released.
    pub released: u64,
    /// Jobs finished.
    pub finished: u64,
    /// Total CPU time consumed, ns.
    pub exec_ns: u64,
    /// Times the thread was switched in.
    pub switches: u64,
    /// Times it was switched out while still runnable (preemption or throttling).
    pub involuntary_switches: u64,
    /// Times it moved to another CPU.
    pub migrations: u64,
    /// SCHED_DEADLINE budget overruns; `None` when the executor cannot observe them (Linux does
    /// not report them to the thread).
    pub overruns: Option<u64>,
}

/// Response-time percentiles of one task, in ns (3 significant digits, except `max`, which is
/// exact).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest response time (exact).
    pub max: u64,
}

/// One task's row of a [`SummaryReport`]. Fields that are undefined for a task without finished
/// jobs are `None` (`null` in JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskSummary {
    /// The task's name (`t<index>` if unnamed).
    pub name: String,
    /// Finished jobs.
    pub jobs: u64,
    /// Finished jobs that missed their deadline.
    pub misses: u64,
    /// `misses / jobs`.
    pub miss_ratio: Option<f64>,
    /// Response-time percentiles (finish − release).
    pub response_ns: Option<Percentiles>,
    /// Mean over jobs of (relative deadline − response time) / period (Table 2 "Norm. Laxity").
    pub normalised_laxity_mean: Option<f64>,
    /// Smallest per-job normalised laxity (negative when a job missed its deadline).
    pub normalised_laxity_min: Option<f64>,
    /// Mean over jobs of exec / period (Table 2 "Exp. U").
    pub utilisation: Option<f64>,
    /// Largest finish − deadline over missed jobs (0 if none missed).
    pub max_tardiness_ns: u64,
    /// Jobs released (executor counter).
    pub released: u64,
    /// Jobs finished (executor counter).
    pub finished: u64,
    /// CPU time consumed (executor counter).
    pub exec_ns: u64,
    /// Times switched in (executor counter).
    pub switches: u64,
    /// Times switched out while runnable: preemptions and throttling (executor counter).
    pub involuntary_switches: u64,
    /// Times moved to another CPU (executor counter).
    pub migrations: u64,
    /// SCHED_DEADLINE budget overruns (executor counter; `null` where not observable).
    pub overruns: Option<u64>,
}

/// The summary of a run: per-task rows and the set-level figures of
/// rm-vs-edf-multicore-linux.txt, Table 2. Rates and ratios whose denominator is zero are `None`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryReport {
    /// Length of the run (simulated or measured time), ns.
    pub horizon_ns: u64,
    /// Number of CPUs (for `utilisation_per_cpu`).
    pub cpus: u32,
    /// Number of tasks (the denominator of the per-task rates).
    pub tasks: usize,
    /// Finished jobs, all tasks.
    pub jobs: u64,
    /// Missed deadlines, all tasks.
    pub misses: u64,
    /// Total miss ratio: `misses / jobs`.
    pub miss_ratio: Option<f64>,
    /// Total migrations.
    pub migrations: u64,
    /// Total context switches (times a task was switched in).
    pub context_switches: u64,
    /// Total involuntary switches (preemptions and throttling).
    pub involuntary_switches: u64,
    /// Task migration rate: migrations / tasks (Table 2 "Migr. Rate").
    pub migration_rate: Option<f64>,
    /// Migrations / tasks / second of the run.
    pub migration_rate_per_s: Option<f64>,
    /// Task context-switch rate: context switches / tasks (Table 2 "Cont. Switch Rate").
    pub context_switch_rate: Option<f64>,
    /// Context switches / tasks / second of the run.
    pub context_switch_rate_per_s: Option<f64>,
    /// Involuntary switches / tasks.
    pub involuntary_switch_rate: Option<f64>,
    /// Involuntary switches / tasks / second of the run.
    pub involuntary_switch_rate_per_s: Option<f64>,
    /// Normalised laxity of the set: mean of the per-task means (tasks with jobs only).
    pub normalised_laxity: Option<f64>,
    /// Measured utilisation of the set: sum of the per-task means (Table 2 "Exp. U").
    pub utilisation: f64,
    /// `utilisation / cpus`.
    pub utilisation_per_cpu: Option<f64>,
    /// One row per task, in thread order.
    pub per_task: Vec<TaskSummary>,
}

/// Formats ns as µs with exactly three decimals (no rounding): for exact values.
fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// Formats a percentile taken from the response-time histogram as µs with only the decimals
/// the histogram resolves at that value: its buckets are 2^(⌊log2 v⌋ − 10) ns wide above
/// 2048 ns (3 significant digits, `SIGFIG`), so a median of 2.16 ms is good to about 2 µs and is
/// printed "2165", not "2164.735". The quantile itself is the nearest rank, as `pacer compare`'s
/// ([`super::compare::quantile`]), which has every value and prints all three decimals.
pub fn us_resolved(ns: u64) -> String {
    let width = if ns < 2048 {
        1
    } else {
        1u64 << (63 - ns.leading_zeros() - 10)
    };
    // The finest printed step, 10^(3 − decimals) ns, may not be finer than the bucket:
    // decimals = 3 − ⌈log10 width⌉, within 0..=3 (1 ns → 3, 2–10 ns → 2, 11–100 ns → 1).
    let ceil_log10 = if width <= 1 {
        0
    } else {
        (width - 1).ilog10() as usize + 1
    };
    let decimals = 3usize.saturating_sub(ceil_log10);
    format!("{:.decimals$}", ns as f64 / 1000.0)
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.decimals$}"))
}

/// Lays out `rows` as columns separated by two spaces, padded by character count; the first
/// column is left-aligned, the others right-aligned. Shared by every plain-text table of job
/// statistics (`pacer sim`, `pacer run`, `pacer experiment`).
pub fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            if c > 0 {
                line.push_str("  ");
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Renders a simulation's report as a plain-text table (times in µs) followed by the set-level
/// figures.
pub fn render_text(report: &SummaryReport) -> String {
    render_text_labelled(report, "simulated time (s)")
}

/// Column headings of the per-task table of [`render_text`] (times in µs).
pub const TASK_COLUMNS: [&str; 16] = [
    "task",
    "jobs",
    "misses",
    "miss%",
    "p50_us",
    "p90_us",
    "p99_us",
    "p99.9_us",
    "max_us",
    "laxity",
    "laxity_min",
    "util",
    "tardy_us",
    "migr",
    "switches",
    "invol",
];

/// The per-task rows of [`render_text`], one per task, in [`TASK_COLUMNS`] order; shared with the
/// HTML reports so both show the same figures formatted the same way.
pub fn task_rows(report: &SummaryReport) -> Vec<Vec<String>> {
    report
        .per_task
        .iter()
        .map(|t| {
            let p =
                |f: fn(&Percentiles) -> u64| t.response_ns.as_ref().map_or("-".into(), |r| us_resolved(f(r)));
            vec![
                // Names come from input files: no escape sequence reaches the terminal.
                pacer_model::text::escape_control(&t.name),
                t.jobs.to_string(),
                t.misses.to_string(),
                opt(t.miss_ratio.map(|r| r * 100.0), 2),
                p(|r| r.p50),
                p(|r| r.p90),
                p(|r| r.p99),
                p(|r| r.p999),
                t.response_ns.as_ref().map_or("-".into(), |r| us(r.max)),
                opt(t.normalised_laxity_mean, 4),
                opt(t.normalised_laxity_min, 4),
                opt(t.utilisation, 4),
                us(t.max_tardiness_ns),
                t.migrations.to_string(),
                t.switches.to_string(),
                t.involuntary_switches.to_string(),
            ]
        })
        .collect()
}

/// The set-level lines of [`render_text`]: (label, value), `time_label` naming the length of
/// the run.
pub fn set_rows(report: &SummaryReport, time_label: &str) -> Vec<[String; 2]> {
    let r = report;
    vec![
        [
            time_label.to_string(),
            format!("{:.6}", r.horizon_ns as f64 / 1e9),
        ],
        ["cpus / tasks".into(), format!("{} / {}", r.cpus, r.tasks)],
        ["jobs / misses".into(), format!("{} / {}", r.jobs, r.misses)],
        ["miss ratio".into(), opt(r.miss_ratio, 6)],
        [
            "migration rate (/task, /task/s)".into(),
            format!("{} {}", opt(r.migration_rate, 3), opt(r.migration_rate_per_s, 3)),
        ],
        [
            "context-switch rate (/task, /task/s)".into(),
            format!(
                "{} {}",
                opt(r.context_switch_rate, 3),
                opt(r.context_switch_rate_per_s, 3)
            ),
        ],
        [
            "involuntary-switch rate (/task, /task/s)".into(),
            format!(
                "{} {}",
                opt(r.involuntary_switch_rate, 3),
                opt(r.involuntary_switch_rate_per_s, 3)
            ),
        ],
        ["normalised laxity".into(), opt(r.normalised_laxity, 4)],
        [
            "measured utilisation (set, /cpu)".into(),
            format!("{:.4} {}", r.utilisation, opt(r.utilisation_per_cpu, 4)),
        ],
    ]
}

/// [`render_text`] with `time_label` naming the length of the run (e.g. "run time (s)" for a
/// measured run).
pub fn render_text_labelled(report: &SummaryReport, time_label: &str) -> String {
    let mut rows = vec![TASK_COLUMNS.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
    rows.extend(task_rows(report));
    let mut out = table(&rows);
    out.push('\n');
    let set: Vec<[String; 2]> = set_rows(report, time_label)
        .into_iter()
        .map(|mut row| {
            row[0].push(':');
            row
        })
        .collect();
    // Set-level lines: labels left-aligned, values as written.
    let width = set.iter().map(|r| r[0].chars().count()).max().unwrap_or(0);
    for row in &set {
        let pad = width - row[0].chars().count();
        out.push_str(&row[0]);
        out.extend(std::iter::repeat_n(' ', pad + 1));
        out.push_str(&row[1]);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod resolution_tests {
    use super::us_resolved;

    #[test]
    fn percentiles_print_only_the_digits_the_histogram_holds() {
        assert_eq!(us_resolved(1_500), "1.500"); // below 2048 ns: exact
        assert_eq!(us_resolved(5_000), "5.00"); // 4 ns buckets
        assert_eq!(us_resolved(50_000), "50.0"); // 32 ns buckets
        assert_eq!(us_resolved(2_164_735), "2165"); // 2048 ns buckets
        assert_eq!(us_resolved(900_000), "900"); // 512 ns buckets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_distribution_grows_to_its_values() {
        let mut d = Distribution::new();
        assert_eq!((d.quantile(0.5), d.max(), d.len()), (0, 0, 0));
        for v in 1..=1000u64 {
            d.add(v * 1_000);
        }
        assert_eq!(d.len(), 1000);
        // Nearest rank at 3 significant digits: within 0.1 % of the exact values.
        assert!(
            (500_000..=500_500).contains(&d.quantile(0.5)),
            "{}",
            d.quantile(0.5)
        );
        assert!(
            (990_000..=991_000).contains(&d.quantile(0.99)),
            "{}",
            d.quantile(0.99)
        );
        assert_eq!(d.quantile(1.0), 1_000_000);
        assert_eq!(d.max(), 1_000_000);
        d.add(u64::MAX);
        assert_eq!(d.max(), u64::MAX);
    }

    fn rec(thread: u32, job: u64, response: u64, period: u64, exec: u64) -> JobRecord {
        let release = job * period;
        JobRecord {
            thread,
            job,
            release,
            start: release,
            finish: release + response,
            deadline: release + period,
            period,
            exec,
            preemptions: 0,
            migrations: 0,
            cpu: 0,
        }
    }

    #[test]
    fn memory_does_not_grow_with_jobs() {
        let mut s = Summary::new(2);
        // Warm up with the extreme values so the histograms reach their final size.
        for t in 0..2 {
            s.add(&rec(t, 0, 1, 10 * MS, 1));
            s.add(&rec(t, 1, 20 * MS, 10 * MS, 1));
        }
        let before = s.footprint();
        let size_before = std::mem::size_of_val(&s);
        for j in 0..10_000_000u64 {
            let response = 1 + (j * 7919) % (20 * MS);
            s.add(&rec((j % 2) as u32, j + 2, response, 10 * MS, MS));
        }
        assert_eq!(s.jobs(), 10_000_004);
        assert_eq!(s.footprint(), before);
        assert_eq!(std::mem::size_of_val(&s), size_before);
        // The histogram is bounded by the value range, not the job count: a few thousand buckets.
        assert!(before.1.iter().all(|&n| n < 40_000), "{before:?}");
    }

    #[test]
    fn tardiness_and_min_laxity() {
        let mut s = Summary::new(1);
        s.add(&rec(0, 0, 4 * MS, 10 * MS, MS)); // laxity 0.6
        s.add(&rec(0, 1, 13 * MS, 10 * MS, MS)); // missed by 3 ms, laxity -0.3
        s.add(&rec(0, 2, 12 * MS, 10 * MS, MS)); // missed by 2 ms, laxity -0.2
        let r = s.report(&["a".into()], &[], 30 * MS, 1);
        let t = &r.per_task[0];
        assert_eq!(t.misses, 2);
        assert_eq!(t.max_tardiness_ns, 3 * MS);
        assert!((t.normalised_laxity_min.unwrap() + 0.3).abs() < 1e-12);
        assert!((t.normalised_laxity_mean.unwrap() - 0.1 / 3.0).abs() < 1e-12);
        assert_eq!(t.response_ns.unwrap().max, 13 * MS);
    }
}
