//! Cost and accuracy of the LFS++ period analyser (lfspp-legacy-multimedia.txt §5.2, eq. 3 and
//! 5; experiments of §7.4). Timed: a whole analysis of a 1 s window for 25–1140 wake-ups and of
//! 5, 10 and 30 s windows (where the analyser samples the spectrum more finely), the spectrum
//! alone by the fast recurrence and by one sin/cos per (event, frequency) pair, and the
//! sliding-window accumulator (one event in and out, and an analysis). Printed first (not
//! timed): the period error versus observation window (0.2–30 s) and jitter, and versus the
//! impairments of real traces, over 20 seeded traces per cell.
//!
//! `cargo bench -p pacer-adapt --bench period`

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pacer_adapt::period::{self, PeriodConfig, SpectrumAccumulator};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

const MS: f64 = 1e6;

/// Wake-ups of a task with period `period_ms`, `phases` (fractions of the period) per job,
/// Gaussian jitter `jitter_ms`, `spurious` random extra wake-ups per periodic one, over
/// `window_s` seconds.
fn train(
    period_ms: f64,
    phases: &[f64],
    jitter_ms: f64,
    spurious: f64,
    window_s: f64,
    seed: u64,
) -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let p = period_ms * MS;
    let w = window_s * 1e9;
    let jitter = Normal::new(0.0, (jitter_ms * MS).max(1e-9)).unwrap();
    let mut out = Vec::new();
    let mut t = rng.random::<f64>() * p;
    while t < w {
        let a = t + jitter.sample(&mut rng);
        out.extend(
            phases
                .iter()
                .map(|ph| a + ph * p)
                .filter(|e| (0.0..w).contains(e))
                .map(|e| 1_000_000_000_000 + e as u64),
        );
        t += p;
    }
    let extra = (spurious * out.len() as f64).round() as usize;
    for _ in 0..extra {
        out.push(1_000_000_000_000 + (rng.random::<f64>() * w) as u64);
    }
    out.sort_unstable();
    out
}

/// Mean and max relative period error (%) over the traces found within 1 %, and the misses.
fn errors(period_ms: f64, traces: impl Iterator<Item = Vec<u64>>) -> (f64, f64, usize) {
    let cfg = PeriodConfig::default();
    let (mut errs, mut misses) = (Vec::new(), 0);
    for ts in traces {
        match period::analyse(&ts, &cfg).period_ns() {
            Some(p) if (p as f64 - period_ms * MS).abs() < 0.01 * period_ms * MS => {
                errs.push(100.0 * (p as f64 - period_ms * MS).abs() / (period_ms * MS))
            }
            _ => misses += 1,
        }
    }
    let mean = errs.iter().sum::<f64>() / errs.len().max(1) as f64;
    (mean, errs.iter().copied().fold(0.0, f64::max), misses)
}

fn accuracy(_: &mut Criterion) {
    // Criterion runs every group function whatever the filter; skip the tables (a minute of
    // work) when a filter that does not name them is given.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"accuracy".contains(a.as_str()))
    {
        return;
    }
    const SEEDS: u64 = 20;
    let p = 33.3;
    println!("\nperiod error (%) vs observation window and jitter: P = {p} ms, 2 wake-ups/job (0, 0.2 P)");
    println!("cells: mean / max over the traces found within 1 %, (misses of {SEEDS})");
    let jitters = [0.0, 0.2, 0.5, 1.0, 2.0];
    print!("{:>7}", "window");
    for j in jitters {
        print!(" {:>21}", format!("σ = {j} ms"));
    }
    println!();
    for w in [0.2, 0.4, 0.6, 0.8, 1.0, 1.5, 2.0, 5.0, 10.0, 30.0] {
        print!("{:>6}s", w);
        for j in jitters {
            let (mean, max, miss) = errors(p, (0..SEEDS).map(|s| train(p, &[0.0, 0.2], j, 0.0, w, s)));
            print!(" {:>21}", format!("{mean:.3} / {max:.3} ({miss})"));
        }
        println!();
    }
    println!("\nperiod error (%) on 1 s windows vs impairment (jitter 0.2 ms unless stated)");
    let cases: [(&str, &[f64], f64, f64); 5] = [
        ("1 wake-up/job", &[0.0], 0.2, 0.0),
        ("3 wake-ups/job", &[0.0, 0.1, 0.25], 0.2, 0.0),
        ("20 % spurious", &[0.0], 0.2, 0.2),
        ("jitter 2 % of P", &[0.0], f64::NAN, 0.0),
        ("3/job + 20 % spur.", &[0.0, 0.1, 0.25], 0.3, 0.2),
    ];
    let periods = [3.505, 8.22, 33.3, 40.0, 100.0];
    print!("{:>19}", "");
    for p in periods {
        print!(" {:>19}", format!("P = {p} ms"));
    }
    println!();
    for (name, phases, jitter, spurious) in cases {
        print!("{name:>19}");
        for p in periods {
            let j = if jitter.is_nan() { 0.02 * p } else { jitter };
            let (mean, max, miss) = errors(p, (0..SEEDS).map(|s| train(p, phases, j, spurious, 1.0, s)));
            print!(" {:>19}", format!("{mean:.3} / {max:.3} ({miss})"));
        }
        println!();
    }
    println!();
}

/// 1 s windows: (label, period ms, wake-up phases per job).
const WINDOWS: [(&str, f64, &[f64]); 4] = [
    ("40ms-k1", 40.0, &[0.0]),
    ("40ms-k3", 40.0, &[0.0, 0.1, 0.25]),
    ("10ms-k3", 10.0, &[0.0, 0.1, 0.25]),
    ("3.5ms-k4", 3.505, &[0.0, 0.07, 0.19, 0.33]),
];

fn analyse(c: &mut Criterion) {
    let cfg = PeriodConfig::default();
    let mut g = c.benchmark_group("period/analyse-1s");
    g.sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for (label, p, phases) in WINDOWS {
        let ts = train(p, phases, 0.1, 0.0, 1.0, 1);
        g.throughput(Throughput::Elements(ts.len() as u64));
        g.bench_with_input(BenchmarkId::new(label, ts.len()), &ts, |b, ts| {
            b.iter(|| black_box(period::analyse(ts, &cfg)))
        });
    }
    g.finish();
}

fn spectrum(c: &mut Criterion) {
    let cfg = PeriodConfig::default();
    let mut g = c.benchmark_group("period/spectrum-1s");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for (label, p, phases) in WINDOWS {
        let ts = train(p, phases, 0.1, 0.0, 1.0, 1);
        g.throughput(Throughput::Elements(ts.len() as u64));
        g.bench_with_input(
            BenchmarkId::new(format!("recurrence/{label}"), ts.len()),
            &ts,
            |b, ts| b.iter(|| black_box(period::spectrum(ts, &cfg).unwrap())),
        );
    }
    // The baseline eq. 3 describes: one complex exponential per (event, frequency) pair.
    let (label, p, phases) = WINDOWS[1];
    let ts = train(p, phases, 0.1, 0.0, 1.0, 1);
    g.sample_size(10);
    g.bench_with_input(
        BenchmarkId::new(format!("sincos/{label}"), ts.len()),
        &ts,
        |b, ts| b.iter(|| black_box(period::spectrum_direct(ts, &cfg).unwrap())),
    );
    g.finish();
}

fn accumulator(c: &mut Criterion) {
    let cfg = PeriodConfig::default();
    let mut g = c.benchmark_group("period/accumulator");
    g.sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    // Steady state of a 1 s sliding window over a 10 ms, 3-wake-up task (300 events held):
    // each iteration adds the next wake-up and expires the one that left the window.
    let ts = train(10.0, &[0.0, 0.1, 0.25], 0.1, 0.0, 30.0, 2);
    let mut acc = SpectrumAccumulator::new(&cfg).unwrap();
    let mut i = 0;
    while ts[i] < ts[0] + 1_000_000_000 {
        acc.push(ts[i]);
        i += 1;
    }
    g.throughput(Throughput::Elements(1));
    g.bench_function("push+expire/300-held", |b| {
        b.iter(|| {
            let t = ts[i % ts.len()] + (i / ts.len()) as u64 * 30_000_000_000;
            acc.push(t);
            acc.expire_before(t.saturating_sub(1_000_000_000));
            i += 1;
        })
    });
    let mut acc = SpectrumAccumulator::new(&cfg).unwrap();
    acc.extend(train(10.0, &[0.0, 0.1, 0.25], 0.1, 0.0, 1.0, 1));
    g.bench_function(BenchmarkId::new("analyse", acc.len()), |b| {
        b.iter(|| black_box(acc.analyse()))
    });
    g.finish();
}

/// Long windows of the 10 ms, 3-wake-up task: the spectrum is sampled `⌈2Hδf⌉` times more finely
/// from 5 s on (`AnalysisOptions::window_aware`), so the cost grows with H², not H.
fn analyse_long(c: &mut Criterion) {
    let cfg = PeriodConfig::default();
    let mut g = c.benchmark_group("period/analyse-long");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    for w in [5.0, 10.0, 30.0] {
        let ts = train(10.0, &[0.0, 0.1, 0.25], 0.1, 0.0, w, 1);
        g.throughput(Throughput::Elements(ts.len() as u64));
        g.bench_with_input(
            BenchmarkId::new(format!("10ms-k3-{w}s"), ts.len()),
            &ts,
            |b, ts| b.iter(|| black_box(period::analyse(ts, &cfg))),
        );
    }
    g.finish();
}

criterion_group!(benches, accuracy, analyse, analyse_long, spectrum, accumulator);
criterion_main!(benches);
