//! Comparison of two runs of the same workload from their job records (`pacer compare`): for each
//! task present in both, the job counts, response-time percentiles, the difference of the medians
//! and the two-sample Kolmogorov–Smirnov distance between the response-time distributions.
//!
//! The typical pair is a simulated and a measured run (`pacer sim --jobs` and `pacer run
//! --jobs`), which is how the simulator is checked against the real kernel (DESIGN.md, "The one
//! idea"). Percentiles here are exact order statistics (nearest rank: the smallest value with at
//! least q·n values at or below it), not the 3-digit histogram values of the summaries, because a
//! comparison keeps every response time anyway for the KS distance.
//!
//! Each side also reports the median start latency (first run − release) and the median CPU time
//! of its jobs, from which [`CompareReport::overheads`] estimates what B's machine adds to A's
//! model: a factor on execution and a wake-up latency, the two knobs of `pacer sim
//! --work-scale/--wakeup-latency`. Simulating with them separates the scheduling model, which the
//! comparison is meant to check, from the speed and timer latency of one particular machine.
//!
//! KS: D = sup_x |F_A(x) − F_B(x)| over the empirical distribution functions (Smirnov 1939).
//! `ks_critical_5pct` is the asymptotic critical value c(0.05)·√((n+m)/(n·m)) with c = 1.358: a D
//! above it rejects "same distribution" at the 5 % level. Real and simulated response times differ
//! by the kernel's wake-up latency and overheads even when they agree in every way that matters,
//! so D is a measure of how far apart the distributions are, not a verdict.

use std::collections::HashMap;

use serde::Serialize;

use super::{JobRow, ReadError};

/// The per-job quantity a comparison is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// finish − release.
    #[default]
    Response,
    /// start − release: the wake-up-to-start delay (scheduling latency).
    StartDelay,
}

/// c(α) of the two-sample KS test at α = 0.05.
const KS_C_5PCT: f64 = 1.358;

/// Statistics of one task in one run: percentiles of the compared metric (response time unless
/// the comparison says otherwise).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideStats {
    /// Finished jobs.
    pub jobs: u64,
    /// Jobs that missed their deadline.
    pub misses: u64,
    /// `misses / jobs`.
    pub miss_ratio: f64,
    /// Percentiles of the compared metric (exact order statistics), ns.
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Median of start − release (nearest rank), ns.
    pub start_latency_p50_ns: u64,
    /// Median CPU time of a job (the `exec_ns` column), ns.
    pub exec_p50_ns: u64,
}

/// One task of a [`CompareReport`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskComparison {
    pub task: String,
    /// The first run (`A.csv`).
    pub a: SideStats,
    /// The second run (`B.csv`).
    pub b: SideStats,
    /// Median of B − median of A, ns.
    pub median_diff_ns: i64,
    /// (median of B − median of A) / median of A; `None` when A's median is 0.
    pub median_rel_diff: Option<f64>,
    /// Two-sample Kolmogorov–Smirnov distance of the response-time distributions, in [0, 1].
    pub ks_distance: f64,
    /// The 5 % critical value of the KS distance for these sample sizes.
    pub ks_critical_5pct: f64,
}

impl TaskComparison {
    /// Whether the medians differ by more than `tolerance_pct` percent of A's median and by more
    /// than `floor_ns` (differences at or below the floor never count, so that tiny medians do not
    /// fail on noise). A zero median in A fails on any difference above the floor.
    pub fn median_beyond(&self, tolerance_pct: f64, floor_ns: u64) -> bool {
        let diff = self.median_diff_ns.unsigned_abs();
        if diff <= floor_ns {
            return false;
        }
        match self.median_rel_diff {
            Some(rel) => rel.abs() * 100.0 > tolerance_pct,
            None => true,
        }
    }
}

/// The comparison of two job CSVs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareReport {
    /// What the percentiles, medians and KS distances are of.
    pub metric: Metric,
    /// Tasks present in both runs, in order of first appearance in A.
    pub tasks: Vec<TaskComparison>,
    /// Tasks with jobs in A only.
    pub only_in_a: Vec<String>,
    /// Tasks with jobs in B only.
    pub only_in_b: Vec<String>,
}

/// What B's machine adds to A's, estimated from the job records (see [`CompareReport::overheads`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Overheads {
    /// Median over tasks of B's median CPU time per job / A's: how much slower B executes the same
    /// work. 1 when no task has CPU time on both sides.
    pub work_scale: f64,
    /// The smallest median start latency in B among the tasks whose jobs start at their release
    /// in A, ns: the latency of a job released by a timer when nothing else competes for its CPU.
    /// When every task waits in A, the smallest increase of a task's median start latency.
    pub wakeup_latency_ns: u64,
}

impl CompareReport {
    /// Estimates B's overheads relative to A (the model): a work factor from CPU times, and a
    /// wake-up latency from the tasks that A starts at once (the highest-priority one on its CPUs).
    pub fn overheads(&self) -> Overheads {
        let mut ratios: Vec<f64> = self
            .tasks
            .iter()
            .filter(|t| t.a.exec_p50_ns > 0 && t.b.exec_p50_ns > 0)
            .map(|t| t.b.exec_p50_ns as f64 / t.a.exec_p50_ns as f64)
            .collect();
        ratios.sort_by(f64::total_cmp);
        // The median of an even count is the mean of the middle two, so that two tasks give
        // their average rather than the smaller.
        let work_scale = match ratios.len() {
            0 => 1.0,
            n if n % 2 == 1 => ratios[n / 2],
            n => (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0,
        };
        // Tasks the model starts at their release measure the latency directly; a task that
        // waits for another in A (its wait scaled by B's speed) would mix the two.
        let direct = self.tasks.iter().filter(|t| t.a.start_latency_p50_ns == 0);
        let wakeup_latency_ns = direct
            .map(|t| t.b.start_latency_p50_ns)
            .min()
            .or_else(|| {
                self.tasks
                    .iter()
                    .map(|t| t.b.start_latency_p50_ns.saturating_sub(t.a.start_latency_p50_ns))
                    .min()
            })
            .unwrap_or(0);
        Overheads {
            work_scale,
            wakeup_latency_ns,
        }
    }

    /// The tasks whose medians differ beyond the tolerance (see [`TaskComparison::median_beyond`]).
    pub fn beyond(&self, tolerance_pct: f64, floor_ns: u64) -> Vec<&TaskComparison> {
        self.tasks
            .iter()
            .filter(|t| t.median_beyond(tolerance_pct, floor_ns))
            .collect()
    }
}

/// Response times and misses of each task of one run, in order of first appearance.
#[derive(Default)]
struct Samples {
    order: Vec<String>,
    index: HashMap<String, usize>,
    responses: Vec<Vec<u64>>,
    latencies: Vec<Vec<u64>>,
    execs: Vec<Vec<u64>>,
    misses: Vec<u64>,
}

impl Samples {
    fn collect<I: IntoIterator<Item = Result<JobRow, ReadError>>>(rows: I) -> Result<Samples, ReadError> {
        let mut s = Samples::default();
        for row in rows {
            let row = row?;
            let i = match s.index.get(&row.task) {
                Some(&i) => i,
                None => {
                    let i = s.order.len();
                    s.index.insert(row.task.clone(), i);
                    s.order.push(row.task.clone());
                    s.responses.push(Vec::new());
                    s.latencies.push(Vec::new());
                    s.execs.push(Vec::new());
                    s.misses.push(0);
                    i
                }
            };
            s.responses[i].push(row.response_ns);
            s.latencies[i].push(row.start_ns.saturating_sub(row.release_ns));
            s.execs[i].push(row.exec_ns);
            s.misses[i] += u64::from(row.missed);
        }
        for r in s.responses.iter_mut().chain(&mut s.latencies).chain(&mut s.execs) {
            r.sort_unstable();
        }
        Ok(s)
    }
}

/// Compares the response times of two runs given as streams of rows (e.g. two
/// [`super::csv::JobReader`]s).
pub fn compare<A, B>(a: A, b: B) -> Result<CompareReport, ReadError>
where
    A: IntoIterator<Item = Result<JobRow, ReadError>>,
    B: IntoIterator<Item = Result<JobRow, ReadError>>,
{
    compare_by(a, b, Metric::Response)
}

/// Compares `metric` of two runs.
pub fn compare_by<A, B>(a: A, b: B, metric: Metric) -> Result<CompareReport, ReadError>
where
    A: IntoIterator<Item = Result<JobRow, ReadError>>,
    B: IntoIterator<Item = Result<JobRow, ReadError>>,
{
    compare_keeping(a, b, metric).map(|(report, _)| report)
}

/// The compared metric of one task in both runs, sorted ascending, ns: what the statistics of
/// its [`TaskComparison`] were computed from (for plotting the two distributions).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PairedSamples {
    pub a: Vec<u64>,
    pub b: Vec<u64>,
}

/// [`compare_by`], also returning the samples behind each task of the report, in the order of
/// [`CompareReport::tasks`]. A comparison reads every value anyway (the KS distance needs them),
/// so keeping them costs no second pass over inputs that may be standard input.
pub fn compare_keeping<A, B>(
    a: A,
    b: B,
    metric: Metric,
) -> Result<(CompareReport, Vec<PairedSamples>), ReadError>
where
    A: IntoIterator<Item = Result<JobRow, ReadError>>,
    B: IntoIterator<Item = Result<JobRow, ReadError>>,
{
    let mut samples = Vec::new();
    let a = Samples::collect(a)?;
    let b = Samples::collect(b)?;
    let mut tasks = Vec::new();
    let mut only_in_a = Vec::new();
    for (i, name) in a.order.iter().enumerate() {
        let Some(&j) = b.index.get(name) else {
            only_in_a.push(name.clone());
            continue;
        };
        let (ra, rb) = match metric {
            Metric::Response => (&a.responses[i], &b.responses[j]),
            Metric::StartDelay => (&a.latencies[i], &b.latencies[j]),
        };
        let sa = side(ra, &a.latencies[i], &a.execs[i], a.misses[i]);
        let sb = side(rb, &b.latencies[j], &b.execs[j], b.misses[j]);
        let diff = sb.p50_ns as i128 - sa.p50_ns as i128;
        let (n, m) = (ra.len() as f64, rb.len() as f64);
        tasks.push(TaskComparison {
            task: name.clone(),
            median_diff_ns: diff.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            median_rel_diff: (sa.p50_ns > 0).then(|| diff as f64 / sa.p50_ns as f64),
            ks_distance: ks_distance(ra, rb),
            ks_critical_5pct: KS_C_5PCT * ((n + m) / (n * m)).sqrt(),
            a: sa,
            b: sb,
        });
        samples.push(PairedSamples {
            a: ra.clone(),
            b: rb.clone(),
        });
    }
    let only_in_b = b
        .order
        .iter()
        .filter(|n| !a.index.contains_key(*n))
        .cloned()
        .collect();
    Ok((
        CompareReport {
            metric,
            tasks,
            only_in_a,
            only_in_b,
        },
        samples,
    ))
}

/// Statistics of one task from its sorted response times, start latencies and CPU times.
fn side(sorted: &[u64], latencies: &[u64], execs: &[u64], misses: u64) -> SideStats {
    let n = sorted.len() as u64;
    SideStats {
        jobs: n,
        misses,
        // A task only appears once it has a row, so n ≥ 1.
        miss_ratio: misses as f64 / n.max(1) as f64,
        p50_ns: quantile(sorted, 0.5),
        p90_ns: quantile(sorted, 0.9),
        p99_ns: quantile(sorted, 0.99),
        max_ns: sorted.last().copied().unwrap_or(0),
        start_latency_p50_ns: quantile(latencies, 0.5),
        exec_p50_ns: quantile(execs, 0.5),
    }
}

/// Nearest-rank quantile of sorted values: the smallest value with at least ⌈q·n⌉ values at or
/// below it (0 for no values).
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Two-sample Kolmogorov–Smirnov distance of two sorted samples: the largest vertical distance
/// between their empirical distribution functions. Ties across the samples are stepped over
/// together, so equal samples give 0. Empty samples give 0 against anything (no information).
pub fn ks_distance(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let (n, m) = (a.len(), b.len());
    let (mut i, mut j) = (0usize, 0usize);
    let mut d: f64 = 0.0;
    while i < n && j < m {
        let x = a[i].min(b[j]);
        while i < n && a[i] == x {
            i += 1;
        }
        while j < m && b[j] == x {
            j += 1;
        }
        d = d.max((i as f64 / n as f64 - j as f64 / m as f64).abs());
    }
    // Past the end of one sample its CDF is 1; the other only rises towards 1 from here, so the
    // distance is largest right now and the loop has seen it.
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(task: &str, response: u64, missed: bool) -> Result<JobRow, ReadError> {
        Ok(JobRow {
            task: task.into(),
            job: 0,
            release_ns: 0,
            start_ns: 0,
            finish_ns: response,
            deadline_ns: Some(if missed { response - 1 } else { response }),
            response_ns: response,
            normalised_laxity: Some(0.0),
            missed,
            exec_ns: 0,
            preemptions: 0,
            migrations: 0,
            cpu: 0,
            line: 2,
        })
    }

    #[test]
    fn ks_on_known_samples() {
        // Identical samples: 0.
        assert_eq!(ks_distance(&[1, 2, 3], &[1, 2, 3]), 0.0);
        // Disjoint samples: 1.
        assert_eq!(ks_distance(&[1, 2, 3], &[4, 5, 6]), 1.0);
        // Interleaved: A = {1, 3, 5, 7}, B = {2, 4, 6, 8}: F_A − F_B peaks at 1/4 after each A value.
        assert_eq!(ks_distance(&[1, 3, 5, 7], &[2, 4, 6, 8]), 0.25);
        // Shifted by half: A = {1..=10}, B = {6..=15}: at x = 5, F_A = 0.5, F_B = 0.
        let a: Vec<u64> = (1..=10).collect();
        let b: Vec<u64> = (6..=15).collect();
        assert_eq!(ks_distance(&a, &b), 0.5);
        assert_eq!(ks_distance(&b, &a), 0.5, "symmetric");
        // Ties across samples are stepped over together: A = {1, 1, 2}, B = {1, 2, 2}: after 1,
        // F_A = 2/3 and F_B = 1/3.
        assert!((ks_distance(&[1, 1, 2], &[1, 2, 2]) - 1.0 / 3.0).abs() < 1e-15);
        // Different sizes: A = {1, 2}, B = {1, 2, 3, 4}: after 2, F_A = 1, F_B = 1/2.
        assert_eq!(ks_distance(&[1, 2], &[1, 2, 3, 4]), 0.5);
        assert_eq!(ks_distance(&[], &[1]), 0.0);
    }

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), 50);
        assert_eq!(quantile(&v, 0.9), 90);
        assert_eq!(quantile(&v, 0.99), 99);
        assert_eq!(quantile(&v, 1.0), 100);
        assert_eq!(quantile(&[7], 0.5), 7);
        assert_eq!(quantile(&[1, 2, 3], 0.5), 2);
        assert_eq!(quantile(&[1, 2, 3, 4], 0.5), 2);
        assert_eq!(quantile(&[], 0.5), 0);
    }

    #[test]
    fn compare_matches_tasks_and_computes_differences() {
        let a = vec![
            row("x", 100, false),
            row("x", 200, false),
            row("x", 300, true),
            row("only_a", 5, false),
            row("y", 1000, false),
        ];
        let b = vec![
            row("y", 1100, false),
            row("x", 150, false),
            row("x", 250, false),
            row("x", 350, false),
            row("x", 450, false),
            row("only_b", 5, false),
        ];
        let r = compare(a, b).unwrap();
        assert_eq!(r.only_in_a, ["only_a"]);
        assert_eq!(r.only_in_b, ["only_b"]);
        assert_eq!(r.tasks.len(), 2);
        let x = &r.tasks[0];
        assert_eq!(x.task, "x");
        assert_eq!((x.a.jobs, x.a.misses, x.b.jobs, x.b.misses), (3, 1, 4, 0));
        assert!((x.a.miss_ratio - 1.0 / 3.0).abs() < 1e-15);
        assert_eq!(
            (x.a.p50_ns, x.a.max_ns, x.b.p50_ns, x.b.max_ns),
            (200, 300, 250, 450)
        );
        assert_eq!(x.median_diff_ns, 50);
        assert_eq!(x.median_rel_diff, Some(0.25));
        // A = {100, 200, 300}, B = {150, 250, 350, 450}: largest gap after 100 (1/3 − 0) … after
        // 300: F_A = 1, F_B = 1/2.
        assert_eq!(x.ks_distance, 0.5);
        assert!((x.ks_critical_5pct - 1.358 * (7.0f64 / 12.0).sqrt()).abs() < 1e-12);
        let y = &r.tasks[1];
        assert_eq!((y.median_diff_ns, y.median_rel_diff), (100, Some(0.1)));
        assert_eq!(y.ks_distance, 1.0);

        // Tolerances: x differs by 25 %, y by 10 %.
        let names = |v: Vec<&TaskComparison>| v.iter().map(|t| t.task.clone()).collect::<Vec<_>>();
        assert_eq!(names(r.beyond(20.0, 0)), ["x"]);
        assert_eq!(names(r.beyond(5.0, 0)), ["x", "y"]);
        assert!(r.beyond(30.0, 0).is_empty());
        // The floor forgives differences up to it: x's 50 ns and y's 100 ns.
        assert_eq!(names(r.beyond(5.0, 50)), ["y"]);
        assert!(r.beyond(5.0, 100).is_empty());
    }

    fn timed(task: &str, release: u64, start: u64, finish: u64, exec: u64) -> Result<JobRow, ReadError> {
        let mut r = row(task, finish - release, false)?;
        (r.release_ns, r.start_ns, r.finish_ns, r.exec_ns) = (release, start, finish, exec);
        Ok(r)
    }

    #[test]
    fn overheads_from_start_latencies_and_cpu_times() {
        // A: the model (no latency for `hi`, `lo` waits 100 for `hi`). B: every job starts 30
        // later, `hi` runs 1.1× and `lo` 1.3× longer.
        let a = vec![
            timed("hi", 0, 0, 100, 100),
            timed("lo", 0, 100, 300, 200),
            timed("hi", 1000, 1000, 1100, 100),
            timed("lo", 1000, 1100, 1300, 200),
        ];
        let b = vec![
            timed("hi", 0, 30, 140, 110),
            timed("lo", 0, 140, 400, 260),
            timed("hi", 1000, 1030, 1140, 110),
            timed("lo", 1000, 1140, 1400, 260),
        ];
        let r = compare(a, b).unwrap();
        assert_eq!(
            (
                r.tasks[0].b.start_latency_p50_ns,
                r.tasks[1].b.start_latency_p50_ns
            ),
            (30, 140)
        );
        assert_eq!((r.tasks[0].b.exec_p50_ns, r.tasks[1].a.exec_p50_ns), (110, 200));
        let o = r.overheads();
        assert_eq!(
            o.wakeup_latency_ns, 30,
            "from `hi`, which A starts at its release"
        );
        assert!(
            (o.work_scale - 1.2).abs() < 1e-12,
            "mean of the middle two ratios: {o:?}"
        );
        // A faster B: `lo` waits less than in A (its wait for `hi` shrank), `hi` still 30.
        let a = vec![timed("hi", 0, 0, 100, 100), timed("lo", 0, 100, 300, 200)];
        let b = vec![timed("hi", 0, 30, 110, 80), timed("lo", 0, 110, 270, 160)];
        let o = compare(a, b).unwrap().overheads();
        assert_eq!(o.wakeup_latency_ns, 30);
        assert!((o.work_scale - 0.8).abs() < 1e-12);
        // Every task waits in A: the smallest increase.
        let a = vec![timed("x", 0, 50, 150, 100), timed("y", 0, 20, 220, 200)];
        let b = vec![timed("x", 0, 90, 190, 100), timed("y", 0, 45, 245, 200)];
        assert_eq!(compare(a, b).unwrap().overheads().wakeup_latency_ns, 25);
        // No CPU times (e.g. hand-written CSVs): no scaling.
        let r = compare(vec![row("x", 5, false)], vec![row("x", 7, false)]).unwrap();
        assert_eq!(
            r.overheads(),
            Overheads {
                work_scale: 1.0,
                wakeup_latency_ns: 0
            }
        );
    }

    #[test]
    fn zero_median_and_errors() {
        let r = compare(vec![row("z", 0, false)], vec![row("z", 10, false)]).unwrap();
        assert_eq!(r.tasks[0].median_rel_diff, None);
        assert!(r.tasks[0].median_beyond(1000.0, 9));
        assert!(!r.tasks[0].median_beyond(1000.0, 10));
        let bad: Vec<Result<JobRow, ReadError>> = vec![Err(ReadError::Csv {
            file: "a.csv".into(),
            line: 3,
            message: "boom".into(),
        })];
        let e = compare(bad, vec![row("z", 1, false)]).unwrap_err();
        assert_eq!(e.to_string(), "a.csv: line 3: boom");
    }
}
