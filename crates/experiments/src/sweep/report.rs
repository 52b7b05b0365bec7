//! The HTML report of an experiment (crates/report): Table 4 of rm-vs-edf-multicore-linux.txt as
//! tables, one error-bar plot per metric and utilisation (mean ± sd over sets per configuration,
//! against the number of tasks), the per-job laxity CDFs of Fig. 3 (all tasks, one plot per row
//! of the table) and Fig. 4 (minimum- and maximum-period tasks, at the heaviest row), and notes
//! on what was not measured. Every figure is drawn from the aggregated run records.

use pacer_report::{Plot, Report, ReportError, Series};

use super::aggregate::{cache_status, tables, Aggregate, Row, Stat};
use super::metrics::LaxityHist;
use super::spec::Backend;

/// Builds the report; `command` is recorded in its header.
pub fn build(a: &Aggregate, command: &str) -> Result<Report, ReportError> {
    let e = &a.experiment;
    let mut rep = Report::new(&format!("pacer experiment: {}", e.name));
    rep.meta("command", command)
        .meta("seed", &e.seed.to_string())
        .meta("CPUs", &e.cpus.to_string())
        .meta(
            "duration per run",
            &pacer_model::Duration(e.duration_ns).to_string(),
        )
        .meta("sets per point", &e.sets.to_string())
        .meta(
            "backends",
            &e.backends.iter().map(|b| b.name()).collect::<Vec<_>>().join(", "),
        )
        .meta("runs", &format!("{} of {}", a.runs_found, a.runs_expected));

    rep.section("Table 4: metrics per configuration").paragraph(
        "Each cell is the mean ± sample standard deviation over the task sets of a row; each \
             set contributes its tasks' mean (normalised laxity), its summed utilisation per CPU \
             (Exp. U), and its context switches and migrations per task per second.",
    );
    for (title, header, rows) in tables(a) {
        rep.paragraph(&title);
        let h: Vec<&str> = header.iter().map(String::as_str).collect();
        rep.table(&h, &rows);
    }

    rep.section("Per-configuration means with ± sd");
    type Get = fn(&Row) -> Option<Stat>;
    let metrics: [(&str, &str, Get); 5] = [
        ("normalised laxity", "", |r| r.normalised_laxity),
        ("measured utilisation per CPU", "", |r| r.utilisation),
        ("context switches per task", "1/s", |r| r.context_switch_rate),
        ("migrations per task", "1/s", |r| r.migration_rate),
        ("deadline-miss ratio", "", |r| r.miss_ratio),
    ];
    let mut rs: Vec<f64> = e.points().iter().map(|p| p.r).collect();
    rs.dedup();
    let configs: Vec<String> = e.configurations.iter().map(|c| c.label()).collect();
    for &backend in &e.backends {
        for &r in &rs {
            for (name, unit, get) in metrics {
                let mut plot = Plot::new(&format!("{name}, U = {r} ({})", backend.name()))
                    .x_axis("tasks", "")
                    .y_axis(name, unit);
                // Configurations side by side around each task count so whiskers do not overlap.
                let ns: Vec<usize> = e.points().iter().filter(|p| p.r == r).map(|p| p.n).collect();
                let step = ns
                    .windows(2)
                    .map(|w| w[1].abs_diff(w[0]))
                    .min()
                    .unwrap_or(e.cpus.max(1)) as f64;
                let width = step * 0.5 / configs.len().max(1) as f64;
                for (ci, c) in configs.iter().enumerate() {
                    let offset = (ci as f64 - (configs.len() as f64 - 1.0) / 2.0) * width;
                    let bars: Vec<(f64, f64, f64)> = a
                        .table4
                        .iter()
                        .filter(|x| x.backend == backend && &x.configuration == c && x.r == r)
                        .filter_map(|x| get(x).map(|s| (x.n as f64 + offset, s.mean, s.sd)))
                        .collect();
                    plot.add_series(Series::error_bars(c, bars));
                }
                rep.plot(&plot)?;
            }
        }
    }

    rep.section("Laxity distributions (Fig. 3: all tasks)").paragraph(
        "Empirical CDF of the per-job normalised laxity, all jobs of all sets of a row, to 0.001.",
    );
    for &backend in &e.backends {
        for p in e.points() {
            let series = cdfs(a, backend, p.r, p.n, |d| &d.all);
            rep.plot(&cdf_plot(
                &format!("all tasks, U = {}, {} tasks ({})", p.r, p.n, backend.name()),
                series,
            ))?;
        }
    }
    if let Some(p) = e
        .points()
        .into_iter()
        .max_by(|a, b| a.r.total_cmp(&b.r).then(b.n.cmp(&a.n)))
    {
        rep.section("Laxity distributions (Fig. 4: extreme periods)")
            .paragraph(&format!(
                "At U = {} and {} tasks (the paper's Fig. 4 row): jobs of the tasks with the smallest \
             and with the largest period of each set.",
                p.r, p.n
            ));
        for &backend in &e.backends {
            let lo = cdfs(a, backend, p.r, p.n, |d| &d.min_period);
            rep.plot(&cdf_plot(
                &format!("minimum-period tasks ({})", backend.name()),
                lo,
            ))?;
            let hi = cdfs(a, backend, p.r, p.n, |d| &d.max_period);
            rep.plot(&cdf_plot(
                &format!("maximum-period tasks ({})", backend.name()),
                hi,
            ))?;
        }
    }

    rep.section("What was not measured");
    rep.paragraph(&format!(
        "Cache misses (L1D, L2; Tables 3 and 5): {}.",
        cache_status(a)
    ));
    for n in &a.notes {
        rep.paragraph(n);
    }
    if !a.missing.is_empty() {
        rep.paragraph(&format!(
            "Incomplete: {} of {} runs have no result (not run yet, another shard's, or failed); \
             their cells are computed from the sets that ran.",
            a.missing.len(),
            a.runs_expected
        ));
    }
    Ok(rep)
}

fn cdfs(
    a: &Aggregate,
    backend: Backend,
    r: f64,
    n: usize,
    pick: fn(&super::metrics::LaxityDist) -> &LaxityHist,
) -> Vec<Series> {
    a.distributions
        .iter()
        .filter(|(b, _, pr, pn, _)| *b == backend && *pr == r && *pn == n)
        .map(|(_, c, _, _, d)| Series::step(c, pick(d).cdf()))
        .collect()
}

fn cdf_plot(title: &str, series: Vec<Series>) -> Plot {
    let mut p = Plot::new(title)
        .x_axis("normalised laxity", "")
        .y_axis("fraction of jobs", "")
        .y_range(0.0, 1.0);
    for s in series {
        p.add_series(s);
    }
    p
}
