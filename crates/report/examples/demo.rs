//! Writes /tmp/pacer-report-demo.html: a latency CDF of two policies and a 60 s per-callback
//! line plot (45 000 points per series, downsampled), with metadata, a table and a note.
//!
//! `cargo run -p pacer-report --example demo`

use std::path::Path;

use pacer_report::{cdf, histogram, Plot, Report, ReportError, Series};

/// A deterministic stand-in for measured callback durations (µs): a base cost, a slow wobble,
/// pseudo-random jitter and a rare spike, so the plots have the shapes real data has.
fn callbacks(n: usize, base: f64, spike_every: usize, seed: u64) -> Vec<f64> {
    let mut state = seed;
    (0..n)
        .map(|i| {
            // xorshift64: good enough for demo jitter and no dependency.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let jitter = (state % 1000) as f64 / 1000.0;
            let wobble = 10.0 * (i as f64 / 3000.0).sin();
            let spike = if i % spike_every == spike_every / 2 {
                400.0
            } else {
                0.0
            };
            base + wobble + 30.0 * jitter * jitter + spike
        })
        .collect()
}

fn main() -> Result<(), ReportError> {
    // 48 kHz, 64-frame bursts: 750 callbacks per second, 45 000 in 60 s.
    let n = 45_000;
    let period_s = 64.0 / 48_000.0;
    let fifo = callbacks(n, 180.0, 9_000, 1);
    let mut deadline = callbacks(n, 150.0, 20_000, 2);
    deadline[7] = f64::NAN; // a lost measurement, to show the note

    let mut report = Report::new("pacer audio: callback duration, demo data");
    report
        .subtitle("Synthetic numbers shaped like a 60 s run at 48 kHz with 64-frame bursts.")
        .meta("command", "cargo run -p pacer-report --example demo")
        .meta("seed", "1, 2")
        .meta("machine", "none (generated)");

    report.section("Distribution").paragraph(
        "Fraction of callbacks that finished within x µs. Higher and further left is better; \
             the tail <1 % decides whether the buffer underruns.",
    );
    report.plot(
        &Plot::new("Callback duration CDF")
            .x_axis("callback duration", "µs")
            .y_axis("fraction of callbacks", "")
            .y_range(0.0, 1.0)
            .series(Series::step("SCHED_FIFO", cdf(&fifo)))
            .series(Series::step("SCHED_DEADLINE (pacer)", cdf(&deadline))),
    )?;
    report.plot(
        &Plot::new("Callback duration histogram")
            .x_axis("callback duration", "µs")
            .y_axis("callbacks", "")
            .log_y(true)
            .series(Series::step("SCHED_FIFO", histogram(&fifo, 60))),
    )?;

    report.section("Over time").paragraph(
        "Every callback of the run; the plot keeps each pixel column's extremes so every spike is visible.",
    );
    let timeline = |v: &[f64]| -> Vec<(f64, f64)> {
        v.iter()
            .enumerate()
            .map(|(i, &d)| (i as f64 * period_s, d))
            .collect()
    };
    report.plot(
        &Plot::new("Callback duration per callback")
            .x_axis("time", "s")
            .y_axis("callback duration", "µs")
            .size(900, 380)
            .series(Series::line("SCHED_FIFO", timeline(&fifo)))
            .series(Series::line("SCHED_DEADLINE (pacer)", timeline(&deadline))),
    )?;

    report.section("Summary").table(
        &["policy", "callbacks", "p50 (µs)", "p99 (µs)", "max (µs)"],
        &[
            summary("SCHED_FIFO", &fifo),
            summary("SCHED_DEADLINE (pacer)", &deadline),
        ],
    );

    let path = Path::new("/tmp/pacer-report-demo.html");
    report.write(path)?;
    let size = std::fs::metadata(path)
        .map_err(|source| ReportError::Io {
            path: path.to_path_buf(),
            source,
        })?
        .len();
    println!("wrote {} ({size} bytes)", path.display());
    Ok(())
}

fn summary(name: &str, values: &[f64]) -> Vec<String> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    vec![
        name.to_string(),
        v.len().to_string(),
        format!("{:.1}", q(0.5)),
        format!("{:.1}", q(0.99)),
        format!("{:.1}", q(1.0)),
    ]
}
