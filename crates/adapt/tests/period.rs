//! The LFS++ period analyser (lfspp-legacy-multimedia.txt §5.1–5.2, experiments of §7.4) on
//! synthetic wake-up traces — known periods with Gaussian jitter, bursts of wake-ups per job,
//! spurious and missing events, aperiodic (Poisson) arrivals, degenerate inputs — and the trace
//! readers of `traceio` on recorded-format fixtures (`tests/fixtures/`).
//!
//! Run with `-- --nocapture` to see the accuracy tables (period error versus scenario, and
//! versus observation window and jitter, as in Fig. 8 of the paper).

mod support;

use std::path::PathBuf;

use pacer_adapt::period::{self, AnalysisOptions, PeriodConfig, PeriodEstimate, SpectrumAccumulator};
use pacer_adapt::traceio::{self, TraceError, TraceFilter, TraceFormat, WakeupEvent};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Normal};

const MS: f64 = 1e6;
const S: u64 = 1_000_000_000;

/// A synthetic wake-up trace: jobs every `period_ns` from a random initial phase, each producing
/// one wake-up per `burst` phase (ns after the job's activation); Gaussian jitter `jitter_ns` on
/// each activation (and half of it on each later wake-up of the burst); a fraction `drop` of the
/// activations missing; `spurious` extra wake-ups per periodic one at uniformly random times.
#[derive(Clone, Debug)]
struct Train {
    period_ns: f64,
    window_ns: u64,
    jitter_ns: f64,
    burst: Vec<f64>,
    drop: f64,
    spurious: f64,
}

impl Train {
    fn new(period_ms: f64) -> Self {
        Train {
            period_ns: period_ms * MS,
            window_ns: S,
            jitter_ns: 0.0,
            burst: vec![0.0],
            drop: 0.0,
            spurious: 0.0,
        }
    }

    fn jitter_ms(mut self, j: f64) -> Self {
        self.jitter_ns = j * MS;
        self
    }

    fn window_s(mut self, w: f64) -> Self {
        self.window_ns = (w * S as f64) as u64;
        self
    }

    /// Burst phases as fractions of the period (the first is the activation, 0).
    fn burst(mut self, phases: &[f64]) -> Self {
        self.burst = phases.iter().map(|p| p * self.period_ns).collect();
        self
    }

    fn drop(mut self, d: f64) -> Self {
        self.drop = d;
        self
    }

    fn spurious(mut self, s: f64) -> Self {
        self.spurious = s;
        self
    }

    fn generate(&self, rng: &mut ChaCha8Rng) -> Vec<u64> {
        // Timestamps far from 0, as CLOCK_MONOTONIC values are.
        let start = 5_678 * S;
        let jitter = Normal::new(0.0, self.jitter_ns.max(1e-9)).unwrap();
        let small = Normal::new(0.0, 0.5 * self.jitter_ns.max(1e-9)).unwrap();
        let w = self.window_ns as f64;
        let mut out = Vec::new();
        let mut t = rng.random::<f64>() * self.period_ns;
        let mut periodic = 0usize;
        while t < w {
            if rng.random::<f64>() >= self.drop {
                let a = t + jitter.sample(rng);
                for &phi in &self.burst {
                    let e = a + phi + if phi > 0.0 { small.sample(rng) } else { 0.0 };
                    if (0.0..w).contains(&e) {
                        out.push(start + e as u64);
                        periodic += 1;
                    }
                }
            }
            t += self.period_ns;
        }
        let extra = (self.spurious * periodic as f64).round() as usize;
        for _ in 0..extra {
            out.push(start + (rng.random::<f64>() * w) as u64);
        }
        out.sort_unstable();
        out
    }
}

/// Poisson arrivals at `rate_hz` over `window_s`, each a burst of wake-ups at `offsets_ns`.
fn poisson(rate_hz: f64, window_s: f64, offsets_ns: &[u64], rng: &mut ChaCha8Rng) -> Vec<u64> {
    let exp = Exp::new(rate_hz).unwrap();
    let mut out = Vec::new();
    let mut t = exp.sample(rng);
    while t < window_s {
        let base = 1_000 * S + (t * 1e9) as u64;
        out.extend(offsets_ns.iter().map(|o| base + o));
        t += exp.sample(rng);
    }
    out.sort_unstable();
    out
}

fn rel_err(e: &PeriodEstimate, period_ns: f64) -> Option<f64> {
    e.period_ns().map(|p| (p as f64 - period_ns).abs() / period_ns)
}

const PERIODS_MS: [f64; 5] = [3.505, 8.22, 33.3, 40.0, 100.0];

type Scenario = (&'static str, fn(f64) -> Train);

/// The impairments of real wake-up traces (§5.1: bursts of events per job, spurious events;
/// §7.4: jitter from the load), one at a time and all together. Burst phases are irrational-ish
/// fractions of the period: a phase such as 2/5 makes the train a comb of period P/5 with teeth
/// missing, whose rate really is ambiguous.
fn scenarios() -> Vec<Scenario> {
    vec![
        ("jitter 0.2 ms", |p| Train::new(p).jitter_ms(0.2)),
        ("jitter 2 % of P", |p| Train::new(p).jitter_ms(0.02 * p)),
        ("K=2 burst", |p| Train::new(p).jitter_ms(0.1).burst(&[0.0, 0.137])),
        ("K=3 burst", |p| {
            Train::new(p).jitter_ms(0.1).burst(&[0.0, 0.1, 0.25])
        }),
        ("K=4 burst", |p| {
            Train::new(p).jitter_ms(0.1).burst(&[0.0, 0.07, 0.19, 0.33])
        }),
        ("20 % spurious", |p| Train::new(p).jitter_ms(0.2).spurious(0.2)),
        ("10 % missing", |p| Train::new(p).jitter_ms(0.2).drop(0.1)),
        ("all at once", |p| {
            Train::new(p)
                .jitter_ms(0.3)
                .burst(&[0.0, 0.15, 0.3])
                .spurious(0.2)
                .drop(0.1)
        }),
    ]
}

#[test]
fn known_periods_within_one_percent_from_a_one_second_window() {
    let cfg = PeriodConfig::default();
    let seeds = 0..4u64;
    let mut all = Vec::new();
    println!(
        "{:<16} {:>8} {:>12} {:>12} {:>10}",
        "scenario", "P (ms)", "mean err %", "max err %", "confidence"
    );
    for (name, make) in scenarios() {
        for p in PERIODS_MS {
            let (mut errs, mut conf) = (Vec::new(), 0.0);
            for seed in seeds.clone() {
                let ts = make(p).generate(&mut ChaCha8Rng::seed_from_u64(seed));
                let e = period::analyse(&ts, &cfg);
                let err =
                    rel_err(&e, p * MS).unwrap_or_else(|| panic!("{name}, P = {p} ms, seed {seed}: {e:?}"));
                // Within 1 %: in particular not P/2, 2P or any other multiple.
                assert!(
                    err < 0.01,
                    "{name}, P = {p} ms, seed {seed}: error {:.3} %, {e:?}",
                    100.0 * err
                );
                if let PeriodEstimate::Periodic {
                    confidence,
                    candidates,
                    ..
                } = &e
                {
                    assert!((0.0..=1.0).contains(confidence));
                    assert!(!candidates.is_empty() && candidates.len() <= period::MAX_CANDIDATES);
                    conf += confidence;
                }
                errs.push(err);
            }
            let mean = errs.iter().sum::<f64>() / errs.len() as f64;
            let max = errs.iter().copied().fold(0.0, f64::max);
            println!(
                "{name:<16} {p:>8.3} {:>12.4} {:>12.4} {:>10.2}",
                100.0 * mean,
                100.0 * max,
                conf / errs.len() as f64
            );
            all.extend(errs);
        }
    }
    // The aim is 0.1 %: on average the refinement gets well below it.
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    assert!(mean < 0.001, "mean error {:.4} %", 100.0 * mean);
}

#[test]
fn harmonics_of_the_rate_are_not_chosen() {
    // Spurious events (30 %) make the harmonic sums of 2·f0 beat f0's in step 6 of the paper's
    // heuristic for several of these traces; the octave check must bring every one back to f0.
    let cfg = PeriodConfig::default();
    let p = 40.0;
    let f0 = 1000.0 / p;
    let mut paper_harmonic = 0;
    let mut step6_harmonic = 0;
    for seed in 0..30 {
        let ts = Train::new(p)
            .jitter_ms(0.3)
            .spurious(0.3)
            .generate(&mut ChaCha8Rng::seed_from_u64(seed));
        let d = period::analyse_detailed(&ts, &cfg, &AnalysisOptions::default()).unwrap();
        let err = rel_err(&d.estimate, p * MS).unwrap_or(1.0);
        assert!(err < 0.01, "seed {seed}: {d:?}");
        if d.heuristic_freq_hz.is_some_and(|f| (f / f0 - 2.0).abs() < 0.05) {
            step6_harmonic += 1;
        }
        let paper = period::analyse_detailed(&ts, &cfg, &AnalysisOptions::paper()).unwrap();
        if paper
            .estimate
            .freq_hz()
            .is_some_and(|f| (f / f0 - 1.0).abs() > 0.5)
        {
            paper_harmonic += 1;
        }
    }
    assert!(
        step6_harmonic >= 3,
        "the traces should trap step 6 ({step6_harmonic} did)"
    );
    assert!(
        paper_harmonic >= 3,
        "the paper's heuristic alone erred {paper_harmonic} times"
    );

    // Two wake-ups per job 0.37 P apart: the 2nd and 3rd harmonics are higher than the
    // fundamental (|1 + e^{−j2πh·0.37}| = 0.79, 1.37, 1.88 for h = 1, 2, 3).
    for p in [20.0, 40.0] {
        let ts = Train::new(p)
            .jitter_ms(0.05)
            .burst(&[0.0, 0.37])
            .generate(&mut ChaCha8Rng::seed_from_u64(7));
        let e = period::analyse(&ts, &cfg);
        let PeriodEstimate::Periodic { candidates, .. } = &e else {
            panic!("{e:?}")
        };
        let f0 = 1000.0 / p;
        let chosen = &candidates[0];
        let higher_harmonic = candidates
            .iter()
            .any(|c| (c.freq_hz / f0 - 2.0).abs() < 0.02 && c.amplitude > chosen.amplitude);
        assert!(
            higher_harmonic,
            "P = {p}: the 2nd harmonic should be the higher peak: {e:?}"
        );
        assert!(rel_err(&e, p * MS).unwrap() < 0.01, "P = {p}: {e:?}");
    }
}

#[test]
fn sub_harmonics_of_the_rate_are_not_chosen() {
    // A few extra wake-ups at mid-period of every other job put a real but weak line at f0/2;
    // summing its multiples (which include every harmonic of f0) must not make 2P the answer.
    let cfg = PeriodConfig::default();
    for p in [8.22, 10.0] {
        for seed in 0..3 {
            let mut ts = Train::new(p)
                .jitter_ms(0.05)
                .generate(&mut ChaCha8Rng::seed_from_u64(seed));
            let t0 = ts[0];
            ts.extend((0..16).map(|j| t0 + ((2 * j + 1) as f64 * p * MS + 0.5 * p * MS) as u64));
            ts.sort_unstable();
            let e = period::analyse(&ts, &cfg);
            let PeriodEstimate::Periodic { candidates, .. } = &e else {
                panic!("{e:?}")
            };
            let f0 = 1000.0 / p;
            assert!(
                candidates.iter().any(|c| (c.freq_hz / f0 - 0.5).abs() < 0.01),
                "P = {p}, seed {seed}: f0/2 should be a candidate: {e:?}"
            );
            assert!(rel_err(&e, p * MS).unwrap() < 0.01, "P = {p}, seed {seed}: {e:?}");
        }
    }
}

#[test]
fn many_spurious_events_do_not_hide_a_strong_rate() {
    // Twice as many random wake-ups as periodic ones: step 6 is won by low-frequency noise,
    // whose ten harmonic windows sum ten times the noise floor against one for 285 Hz; the
    // significance test passes over it.
    let cfg = PeriodConfig::default();
    for seed in [0u64, 2, 5] {
        let ts = Train::new(3.505)
            .jitter_ms(0.05)
            .spurious(2.0)
            .generate(&mut ChaCha8Rng::seed_from_u64(seed));
        let d = period::analyse_detailed(&ts, &cfg, &AnalysisOptions::default()).unwrap();
        assert!(
            d.heuristic_freq_hz.unwrap() < 100.0,
            "seed {seed}: step 6 should be trapped: {d:?}"
        );
        assert!(
            rel_err(&d.estimate, 3.505 * MS).unwrap_or(1.0) < 0.01,
            "seed {seed}: {d:?}"
        );
    }
}

#[test]
fn aperiodic_arrivals_are_not_periodic() {
    let cfg = PeriodConfig::default();
    let mut checked = 0;
    for rate in [20.0, 100.0, 300.0, 1000.0, 3000.0] {
        for window in [0.5, 1.0, 2.0] {
            for seed in 0..3 {
                let ts = poisson(rate, window, &[0], &mut ChaCha8Rng::seed_from_u64(seed));
                let e = period::analyse(&ts, &cfg);
                assert!(
                    !e.is_periodic(),
                    "Poisson {rate}/s over {window} s, seed {seed}: {e:?}"
                );
                checked += 1;
            }
        }
    }
    // Random jobs of three wake-ups each (bursts at 0, 1 and 2.5 ms): not periodic either.
    for rate in [10.0, 30.0, 100.0] {
        for seed in 0..5 {
            let ts = poisson(
                rate,
                1.0,
                &[0, 1_000_000, 2_500_000],
                &mut ChaCha8Rng::seed_from_u64(seed),
            );
            let e = period::analyse(&ts, &cfg);
            assert!(!e.is_periodic(), "bursty Poisson {rate}/s, seed {seed}: {e:?}");
            checked += 1;
        }
    }
    assert_eq!(checked, 60);
}

#[test]
fn too_few_events_and_degenerate_inputs_are_not_periodic() {
    let cfg = PeriodConfig::default();
    let cases: Vec<(&str, Vec<u64>)> = vec![
        ("empty", vec![]),
        ("one event", vec![123]),
        ("two events", vec![0, 40_000_000]),
        ("five events", (0..5).map(|i| i * 40_000_000).collect()),
        ("all at one instant", vec![777; 50]),
        ("within 1 µs", (0..50).map(|i| 1_000 + i * 20).collect()),
        (
            "near u64::MAX",
            (0..50).map(|i| u64::MAX - i * 7_000_000).collect(),
        ),
    ];
    for (name, ts) in cases {
        match period::analyse(&ts, &cfg) {
            PeriodEstimate::NotPeriodic { reason } => assert!(!reason.is_empty(), "{name}"),
            e @ PeriodEstimate::Periodic { .. } if name == "near u64::MAX" => {
                // A 7 ms comb, whatever its position on the time axis.
                assert!(rel_err(&e, 7.0 * MS).unwrap() < 0.01, "{name}: {e:?}");
            }
            e => panic!("{name}: {e:?}"),
        }
    }
    let reason = |ts: &[u64]| match period::analyse(ts, &cfg) {
        PeriodEstimate::NotPeriodic { reason } => reason,
        e => panic!("{e:?}"),
    };
    assert!(reason(&[]).contains("no events"));
    assert!(reason(&[1, 2, 3]).contains("too few events: 3"));
    assert!(reason(&[5; 10]).contains("window too short"));
}

#[test]
fn input_order_does_not_matter() {
    let cfg = PeriodConfig::default();
    let ts = Train::new(8.22)
        .jitter_ms(0.1)
        .burst(&[0.0, 0.2])
        .generate(&mut ChaCha8Rng::seed_from_u64(11));
    let mut shuffled = ts.clone();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, rng.random_range(0..=i));
    }
    assert_eq!(period::analyse(&ts, &cfg), period::analyse(&shuffled, &cfg));
}

#[test]
fn paper_options_report_the_grid_frequency() {
    // Without refinement the answer is a grid sample, within δf/2 of a clean train's rate.
    let cfg = PeriodConfig::default();
    let ts = Train::new(8.22).generate(&mut ChaCha8Rng::seed_from_u64(3));
    let a = period::analyse_detailed(&ts, &cfg, &AnalysisOptions::paper()).unwrap();
    let f = a.estimate.freq_hz().unwrap();
    assert!(((f - cfg.f_min_hz) / cfg.df_hz - ((f - cfg.f_min_hz) / cfg.df_hz).round()).abs() < 1e-6);
    assert!((f - 1000.0 / 8.22).abs() <= cfg.df_hz / 2.0 + 1e-9, "{f}");
}

#[test]
fn sliding_accumulator_follows_a_period_change() {
    // 2 s at 40 ms, then 2 s at 25 ms, seen through a 1 s sliding window: the accumulator's
    // answer matches the batch analysis of the same window, and switches to 25 ms.
    let cfg = PeriodConfig::default();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let first = Train::new(40.0).jitter_ms(0.2).window_s(2.0).generate(&mut rng);
    let second: Vec<u64> = Train::new(25.0)
        .jitter_ms(0.2)
        .window_s(2.0)
        .generate(&mut rng)
        .into_iter()
        .map(|t| t + 2 * S)
        .collect();
    let all: Vec<u64> = first.into_iter().chain(second).collect();
    let mut acc = SpectrumAccumulator::new(&cfg).unwrap();
    let mut checked = 0;
    let mut next_check = all[0] + S;
    for &t in &all {
        acc.push(t);
        acc.expire_before(t.saturating_sub(S));
        if t >= next_check {
            next_check += S / 4;
            let window: Vec<u64> = acc.events().collect();
            let inc = acc.analyse();
            let batch = period::analyse(&window, &cfg);
            match (&inc, &batch) {
                (
                    PeriodEstimate::Periodic { freq_hz: a, .. },
                    PeriodEstimate::Periodic { freq_hz: b, .. },
                ) => assert!((a - b).abs() < 1e-6 * b, "{a} vs {b}"),
                _ => assert_eq!(inc.is_periodic(), batch.is_periodic(), "{inc:?} vs {batch:?}"),
            }
            checked += 1;
        }
    }
    assert!(checked >= 10);
    // At the end the window holds only the 25 ms train.
    assert!(rel_err(&acc.analyse(), 25.0 * MS).unwrap() < 0.01);
}

#[test]
fn accuracy_versus_observation_window_and_jitter() {
    // Fig. 8 of the paper: detected rate versus observation interval (30 fps player, one
    // wake-up per frame plus one 20 % later). From 1 s the rate must be found within 1 %.
    let cfg = PeriodConfig::default();
    let p = 33.3;
    let windows = [0.2, 0.4, 0.6, 0.8, 1.0, 1.5, 2.0];
    let jitters = [0.0, 0.2, 0.5, 1.0];
    let seeds = 6u64;
    println!("P = {p} ms, K = 2: mean / max period error (%), not-periodic or wrong count of {seeds}");
    print!("{:>8}", "window");
    for j in jitters {
        print!("  {:>22}", format!("σ = {j} ms"));
    }
    println!();
    for w in windows {
        print!("{:>7}s", w);
        for j in jitters {
            let (mut errs, mut misses) = (Vec::new(), 0);
            for seed in 0..seeds {
                let ts = Train::new(p)
                    .jitter_ms(j)
                    .burst(&[0.0, 0.2])
                    .window_s(w)
                    .generate(&mut ChaCha8Rng::seed_from_u64(seed));
                match rel_err(&period::analyse(&ts, &cfg), p * MS) {
                    Some(e) if e < 0.01 => errs.push(e),
                    _ => misses += 1,
                }
            }
            let cell = if errs.is_empty() {
                format!("-  ({misses})")
            } else {
                let mean = errs.iter().sum::<f64>() / errs.len() as f64;
                let max = errs.iter().copied().fold(0.0, f64::max);
                format!("{:.3} / {:.3}  ({misses})", 100.0 * mean, 100.0 * max)
            };
            print!("  {cell:>22}");
            if w >= 1.0 {
                assert_eq!(misses, 0, "window {w} s, jitter {j} ms");
            }
        }
        println!();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_timestamps_never_panic(ts in proptest::collection::vec(any::<u64>(), 0..120)) {
        let e = period::analyse(&ts, &PeriodConfig::default());
        if let PeriodEstimate::Periodic { freq_hz, confidence, candidates, period_ns } = e {
            prop_assert!(freq_hz.is_finite() && freq_hz > 0.0);
            prop_assert!((0.0..=1.0).contains(&confidence));
            prop_assert!(!candidates.is_empty() && candidates.len() <= period::MAX_CANDIDATES);
            prop_assert!(period_ns > 0);
        }
    }

    #[test]
    fn clustered_timestamps_never_panic(
        base in any::<u64>(),
        offsets in proptest::collection::vec(0u64..3_000_000_000, 0..150),
    ) {
        let ts: Vec<u64> = offsets.iter().map(|o| base.saturating_add(*o)).collect();
        let e = period::analyse(&ts, &PeriodConfig::default());
        if let Some(f) = e.freq_hz() {
            prop_assert!(f.is_finite() && f > 0.0);
        }
    }

    #[test]
    fn accumulator_operations_never_panic(
        ops in proptest::collection::vec((any::<bool>(), 0u64..2_000_000_000), 0..60),
    ) {
        let mut acc = SpectrumAccumulator::new(&PeriodConfig::default()).unwrap();
        for (push, t) in ops {
            if push {
                acc.push(t);
            } else {
                acc.expire_before(t);
            }
        }
        let _ = acc.analyse();
        prop_assert!(acc.spectrum().amplitude.iter().all(|a| a.is_finite() && *a >= 0.0));
    }
}

// ---------------------------------------------------------------------------------------------
// Trace files
// ---------------------------------------------------------------------------------------------

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn mplayer() -> TraceFilter {
    TraceFilter {
        comm: Some("mplayer".into()),
        ..TraceFilter::default()
    }
}

/// The fixtures record a 30 fps player (tid 4242, two wake-ups per frame) among other threads.
fn assert_mplayer_period(ts: &[u64]) {
    assert_eq!(ts.len(), 72);
    assert!(ts.windows(2).all(|w| w[0] <= w[1]));
    let e = period::analyse(ts, &PeriodConfig::default());
    assert!(rel_err(&e, 1e9 / 30.0).unwrap_or(1.0) < 0.01, "{e:?}");
}

#[test]
fn every_format_is_detected_and_yields_the_players_period() {
    let cases = [
        (
            "timestamps-mplayer.txt",
            TraceFormat::Timestamps,
            TraceFilter::default(),
        ),
        ("perf-sched-wakeup.txt", TraceFormat::Perf, mplayer()),
        ("trace-cmd-report.txt", TraceFormat::TraceCmd, mplayer()),
        ("ftrace-trace.txt", TraceFormat::TraceCmd, mplayer()),
    ];
    let mut reference: Option<Vec<u64>> = None;
    for (file, format, filter) in cases {
        let auto = traceio::read_file(&fixture(file), TraceFormat::Auto, &filter).unwrap();
        assert_eq!(auto.format, format, "{file}");
        let explicit = traceio::read_file(&fixture(file), format, &filter).unwrap();
        assert_eq!(auto, explicit, "{file}");
        assert_mplayer_period(&auto.timestamps_ns);
        // The same wake-ups in every format (µs resolution in all but the ftrace file).
        let us: Vec<u64> = auto.timestamps_ns.iter().map(|t| (t + 500) / 1000).collect();
        match &reference {
            None => reference = Some(us),
            Some(r) => {
                let diff = r.iter().zip(&us).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
                assert!(diff <= 1, "{file}: differs by {diff} µs from the timestamp list");
            }
        }
    }
}

#[test]
fn filters_select_the_woken_thread_not_the_waker() {
    let perf = fixture("perf-sched-wakeup.txt");
    let read = |filter: TraceFilter| traceio::read_file(&perf, TraceFormat::Auto, &filter).unwrap();
    // By tid, by name, by both.
    let by_tid = read(TraceFilter {
        tid: Some(4242),
        ..TraceFilter::default()
    });
    assert_eq!(by_tid.timestamps_ns, read(mplayer()).timestamps_ns);
    let both = read(TraceFilter {
        comm: Some("mplayer".into()),
        tid: Some(4242),
        ..TraceFilter::default()
    });
    assert_eq!(both.timestamps_ns.len(), 72);
    let contradicting = read(TraceFilter {
        comm: Some("mplayer".into()),
        tid: Some(1133),
        ..TraceFilter::default()
    });
    assert!(contradicting.timestamps_ns.is_empty());
    // Wakers are not wake-ups: Xorg and mplayer's main thread 4240 only wake others.
    for filter in [
        TraceFilter {
            comm: Some("Xorg".into()),
            ..TraceFilter::default()
        },
        TraceFilter {
            tid: Some(4240),
            ..TraceFilter::default()
        },
    ] {
        assert!(read(filter).timestamps_ns.is_empty());
    }
    // A name with a space, and a long name that the kernel truncated to 15 bytes.
    let web = read(TraceFilter {
        comm: Some("Web Content".into()),
        ..TraceFilter::default()
    });
    assert!(!web.timestamps_ns.is_empty());
    let decoder = read(TraceFilter {
        comm: Some("VideoDecoderThread".into()),
        ..TraceFilter::default()
    });
    assert_eq!(decoder.timestamps_ns.len(), 36);
    let e = period::analyse(&decoder.timestamps_ns, &PeriodConfig::default());
    assert!(rel_err(&e, 1e9 / 30.0).unwrap() < 0.01, "{e:?}");
    // Without a filter: every woken thread, summarised most active first.
    let everyone = read(TraceFilter::default());
    assert_eq!(everyone.event, Some("sched_wakeup"));
    let names: Vec<(&str, u32, usize)> = everyone
        .threads
        .iter()
        .map(|t| (t.comm.as_str(), t.tid, t.wakeups))
        .collect();
    assert_eq!(names[0], ("mplayer", 4242, 72));
    assert!(names.contains(&("pulseaudio", 1133, 60)));
    assert_eq!(
        everyone.timestamps_ns.len(),
        names.iter().map(|n| n.2).sum::<usize>()
    );
}

#[test]
fn waking_and_wakeup_are_not_counted_twice() {
    let perf = fixture("perf-sched-wakeup.txt");
    let read =
        |event| traceio::read_file(&perf, TraceFormat::Perf, &TraceFilter { event, ..mplayer() }).unwrap();
    let (auto, wakeup, waking) = (
        read(WakeupEvent::Auto),
        read(WakeupEvent::Wakeup),
        read(WakeupEvent::Waking),
    );
    assert_eq!(auto.timestamps_ns, wakeup.timestamps_ns);
    assert_eq!(waking.event, Some("sched_waking"));
    assert_eq!(waking.timestamps_ns.len(), 72);
    // sched_waking precedes its sched_wakeup by a few µs.
    for (a, b) in waking.timestamps_ns.iter().zip(&wakeup.timestamps_ns) {
        assert!(b > a && b - a < 10_000, "{a} {b}");
    }
    // A trace with only sched_waking uses it.
    let text: String = std::fs::read_to_string(&perf)
        .unwrap()
        .lines()
        .filter(|l| !l.contains("sched_wakeup"))
        .map(|l| format!("{l}\n"))
        .collect();
    let only_waking = traceio::parse_str(&text, "waking.txt", TraceFormat::Auto, &mplayer()).unwrap();
    assert_eq!(only_waking.event, Some("sched_waking"));
    assert_eq!(only_waking.timestamps_ns, waking.timestamps_ns);
}

fn parse_error(file: &str, format: TraceFormat, filter: &TraceFilter) -> (String, TraceError) {
    let err = traceio::read_file(&fixture(file), format, filter).unwrap_err();
    (err.to_string(), err)
}

#[test]
fn malformed_traces_name_the_file_and_line() {
    let (msg, err) = parse_error("perf-malformed.txt", TraceFormat::Auto, &TraceFilter::default());
    assert!(matches!(err, TraceError::Parse { line: 5, .. }), "{msg}");
    assert!(
        msg.contains("perf-malformed.txt:5:") && msg.contains("comm=NAME pid=TID") && msg.contains("42x2"),
        "{msg}"
    );

    let (msg, err) = parse_error(
        "trace-cmd-malformed.txt",
        TraceFormat::Auto,
        &TraceFilter::default(),
    );
    assert!(matches!(err, TraceError::Parse { line: 3, .. }), "{msg}");
    assert!(msg.contains("trace-cmd-malformed.txt:3:"), "{msg}");

    let (msg, err) = parse_error(
        "timestamps-malformed.txt",
        TraceFormat::Auto,
        &TraceFilter::default(),
    );
    assert!(matches!(err, TraceError::Parse { line: 5, .. }), "{msg}");
    assert!(
        msg.contains("timestamps-malformed.txt:5:") && msg.contains("seconds") && msg.contains("0.1667g3"),
        "{msg}"
    );

    let (msg, err) = parse_error("not-a-trace.txt", TraceFormat::Auto, &TraceFilter::default());
    assert!(matches!(err, TraceError::UnknownFormat { .. }), "{msg}");
    assert!(
        msg.contains("not-a-trace.txt") && msg.contains("--format"),
        "{msg}"
    );

    // An explicit format that does not fit says which one would.
    let (msg, _) = parse_error("trace-cmd-report.txt", TraceFormat::Perf, &TraceFilter::default());
    assert!(
        msg.contains("trace-cmd-report.txt:4:") && msg.contains("--format trace-cmd"),
        "{msg}"
    );
    let (msg, _) = parse_error(
        "perf-sched-wakeup.txt",
        TraceFormat::TraceCmd,
        &TraceFilter::default(),
    );
    assert!(msg.contains("--format perf"), "{msg}");
    let (msg, err) = parse_error("not-a-trace.txt", TraceFormat::Perf, &TraceFilter::default());
    assert!(
        matches!(err, TraceError::NoEvents { .. }) && msg.contains("perf record"),
        "{msg}"
    );
    // (the first 16 lines of the perf file are `#` header comments)
    let (msg, err) = parse_error(
        "perf-sched-wakeup.txt",
        TraceFormat::Timestamps,
        &TraceFilter::default(),
    );
    assert!(matches!(err, TraceError::Parse { line: 17, .. }), "{msg}");

    // Thread filters on a timestamp list cannot be honoured.
    let (msg, err) = parse_error("timestamps-mplayer.txt", TraceFormat::Auto, &mplayer());
    assert!(matches!(err, TraceError::FilterOnTimestamps { .. }), "{msg}");

    // A missing file names the path.
    let (msg, err) = parse_error("no-such-file.txt", TraceFormat::Auto, &TraceFilter::default());
    assert!(
        matches!(err, TraceError::Io { .. }) && msg.contains("no-such-file.txt"),
        "{msg}"
    );
}

#[test]
fn format_names_round_trip() {
    for f in [
        TraceFormat::Auto,
        TraceFormat::Timestamps,
        TraceFormat::Perf,
        TraceFormat::TraceCmd,
    ] {
        assert_eq!(f.name().parse::<TraceFormat>(), Ok(f));
    }
    assert!("ftrace".parse::<TraceFormat>().is_err());
    assert_eq!("waking".parse::<WakeupEvent>(), Ok(WakeupEvent::Waking));
}

// ---------------------------------------------------------------------------------------------
// Long windows and degraded traces (issue 12)
// ---------------------------------------------------------------------------------------------

/// `n` wake-ups exactly `period_ns` apart (rounded to the ns), far from 0.
fn exact_train(period_ns: f64, n: usize) -> Vec<u64> {
    (0..n)
        .map(|i| 5_678 * S + (i as f64 * period_ns).round() as u64)
        .collect()
}

/// (error, confidence) of the default analysis, and the error of `--paper`; "not periodic" is an
/// error of 1 and a confidence of −1.
fn default_and_paper(ts: &[u64], period_ns: f64) -> (f64, f64, f64) {
    let cfg = PeriodConfig::default();
    let d = period::analyse_detailed(ts, &cfg, &AnalysisOptions::default()).unwrap();
    let p = period::analyse_detailed(ts, &cfg, &AnalysisOptions::paper()).unwrap();
    let conf = match d.estimate {
        PeriodEstimate::Periodic { confidence, .. } => confidence,
        PeriodEstimate::NotPeriodic { .. } => -1.0,
    };
    (
        rel_err(&d.estimate, period_ns).unwrap_or(1.0),
        conf,
        rel_err(&p.estimate, period_ns).unwrap_or(1.0),
    )
}

#[test]
fn long_clean_traces_are_exact_and_confident() {
    // The measurements: the default analyser answered 12.526 ms with confidence 0.00
    // (it picked a side lobe, |S| ≈ 62 against ≈ 297), 20.23, 16.80 and 40.75 ms; --paper was
    // exact every time.
    let jittered = Train::new(40.0)
        .jitter_ms(0.1)
        .window_s(5.0)
        .generate(&mut ChaCha8Rng::seed_from_u64(12));
    let cases: [(&str, f64, Vec<u64>); 4] = [
        ("12.5 ms × 300", 12.5 * MS, exact_train(12.5 * MS, 300)),
        ("20 ms × 300", 20.0 * MS, exact_train(20.0 * MS, 300)),
        ("16.667 ms × 300", 1e9 / 60.0, exact_train(1e9 / 60.0, 300)),
        ("40 ms, 0.1 ms jitter, 5 s", 40.0 * MS, jittered),
    ];
    for (name, p, ts) in cases {
        let (err, conf, paper) = default_and_paper(&ts, p);
        println!(
            "{name}: error {:.5} %, confidence {conf:.2} (--paper: {:.5} %)",
            100.0 * err,
            100.0 * paper
        );
        assert!(err < 0.001, "{name}: error {:.4} %", 100.0 * err);
        assert!(
            conf >= period::DEFAULT_MIN_CONFIDENCE,
            "{name}: confidence {conf:.3}"
        );
        assert!(err <= paper.max(0.001), "{name}: worse than --paper");
    }
}

/// 0.2–30 s windows × 5–500 Hz (band edges included, on- and off-grid rates), 25–1500 periods
/// per window: clean, 1 % jitter, 15 % dropped and 15 % spurious wake-ups.
#[test]
fn any_window_length_and_rate_within_a_tenth_of_a_percent() {
    let windows = [0.2, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0];
    let rates = [
        5.0, 7.31, 12.5, 24.0, 33.3, 50.0, 60.0, 80.0, 123.45, 200.0, 333.3, 499.0, 500.0,
    ];
    let variants: [Scenario; 4] = [
        ("clean", Train::new),
        ("jitter 1 % of P", |p| Train::new(p).jitter_ms(0.01 * p)),
        ("15 % dropped", |p| Train::new(p).jitter_ms(0.005 * p).drop(0.15)),
        ("15 % spurious", |p| {
            Train::new(p).jitter_ms(0.005 * p).spurious(0.15)
        }),
    ];
    let (mut cases, mut paper_off, mut worst, mut lowest) = (0, 0, 0.0f64, 1.0f64);
    for (name, make) in variants {
        for (i, w) in windows.into_iter().enumerate() {
            for (j, f) in rates.into_iter().enumerate() {
                // At least 25 periods; at most 1500 (the debug build's time budget: the
                // heaviest trace, 30 s at 500 Hz, is in `the_heaviest_long_window`).
                if !(25.0..=1500.0).contains(&(w * f)) {
                    continue;
                }
                let p = 1000.0 / f;
                let seed = (i * rates.len() + j) as u64;
                let ts = make(p).window_s(w).generate(&mut ChaCha8Rng::seed_from_u64(seed));
                let (err, conf, paper) = default_and_paper(&ts, p * MS);
                assert!(
                    err < 0.001 && conf >= period::DEFAULT_MIN_CONFIDENCE,
                    "{name}, {w} s, {f} Hz (seed {seed}): error {:.4} %, confidence {conf:.2} \
                     (--paper {:.4} %)",
                    100.0 * err,
                    100.0 * paper
                );
                cases += 1;
                paper_off += usize::from(paper >= 0.001);
                worst = worst.max(err);
                lowest = lowest.min(conf);
            }
        }
    }
    println!(
        "{cases} traces: worst error {:.4} %, lowest confidence {lowest:.2}; --paper off by \
         ≥ 0.1 % on {paper_off}",
        100.0 * worst
    );
    assert_eq!(cases, 4 * 75);
}

/// Windows with thousands of events, where the lines are narrower than the grid step: 123.45 Hz
/// sits between two samples of the 0.1 Hz grid, whose main lobe is only ±0.05 Hz wide at 20 s;
/// on 5 s windows the side lobes of a 500 Hz line at the band's end are candidates of their own.
#[test]
fn long_windows_with_many_events() {
    let cases = [
        ("123.45 Hz, 20 s", 123.45, 20.0, 0.0),
        ("500 Hz, 5 s", 500.0, 5.0, 0.0),
        // The heaviest: 17 000 events, the fine grid at its widest.
        ("499 Hz, 30 s, 15 % spurious", 499.0, 30.0, 0.15),
    ];
    let plain = AnalysisOptions {
        window_aware: false,
        ..AnalysisOptions::default()
    };
    for (name, f, w, spurious) in cases {
        let p = 1e9 / f;
        let ts = Train::new(p / MS)
            .jitter_ms(0.005 * p / MS)
            .spurious(spurious)
            .window_s(w)
            .generate(&mut ChaCha8Rng::seed_from_u64(30));
        let (err, conf, paper) = default_and_paper(&ts, p);
        let without = period::analyse_detailed(&ts, &PeriodConfig::default(), &plain).unwrap();
        let err_without = rel_err(&without.estimate, p).unwrap_or(1.0);
        println!(
            "{name}, {} events: error {:.5} %, confidence {conf:.2}; without window_aware {:.4} %; \
             --paper {:.4} %",
            ts.len(),
            100.0 * err,
            100.0 * err_without,
            100.0 * paper
        );
        assert!(err < 0.001 && conf >= period::DEFAULT_MIN_CONFIDENCE, "{name}");
        if name.starts_with("123.45") {
            assert!(
                err_without > 0.01,
                "{name}: the plain grid should step over the line"
            );
        }
    }
}

#[test]
fn confidence_is_low_for_a_harmonic() {
    // A comb at 2·f₀ is perfectly coherent, but so is f₀: the events sit on every other tooth,
    // so the chosen rate may be a harmonic. Forced here by a band that starts above f₀.
    let ts = exact_train(40.0 * MS, 50);
    let above = PeriodConfig {
        f_min_hz: 30.0,
        ..PeriodConfig::default()
    };
    match period::analyse(&ts, &above) {
        PeriodEstimate::Periodic {
            freq_hz, confidence, ..
        } => {
            assert!((freq_hz - 50.0).abs() < 0.01, "{freq_hz}");
            assert!(confidence < 0.1, "{confidence}");
        }
        e => panic!("{e:?}"),
    }
    // The same comb in the default band: sure.
    match period::analyse(&ts, &PeriodConfig::default()) {
        PeriodEstimate::Periodic { confidence, .. } => assert!(confidence > 0.9, "{confidence}"),
        e => panic!("{e:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Wake-up origin: detection on a timer's wake-ups
// ---------------------------------------------------------------------------------------------

#[test]
fn the_controller_detects_on_timer_wakeups_when_it_has_them() {
    use pacer_adapt::controller::{LegacyConfig, LegacyController, ThreadOptions, WakeupSource};
    // A 25 ms thread whose timer activations are buried among 6 wake-ups per period at random
    // times (other threads' signals, I/O).
    let run = |marks: bool| {
        let mut k = support::FakeKernel::new(1, 0.95);
        let mut t = support::FakeThread::periodic(25 * support::MS, Box::new(|_| 2 * support::MS));
        t.random_wakeups = 6;
        t.timer_marks = marks;
        k.threads.insert(1, t);
        let mut c = LegacyController::new(LegacyConfig::default()).unwrap();
        c.add_thread(1, ThreadOptions::default()).unwrap();
        support::run_until(&mut k, &mut c, 1_500 * support::MS);
        c.thread_status(1).unwrap()
    };
    let marked = run(true);
    let unmarked = run(false);
    println!(
        "marked: {:?} ns ({:?}, confidence {:?}); unmarked: {:?} ns ({:?}, confidence {:?}, {:?})",
        marked.period_ns,
        marked.detection_source,
        marked.confidence,
        unmarked.period_ns,
        unmarked.detection_source,
        unmarked.confidence,
        unmarked.detection_note
    );
    assert_eq!(marked.detection_source, Some(WakeupSource::Timer));
    let p = marked.period_ns.expect("period found on the timer's wake-ups");
    assert!((p as f64 - 25e6).abs() < 25e3, "{p} ns");
    assert!(marked.confidence.unwrap() > 0.9);
    // Without marks the same trace is analysed whole.
    assert_eq!(unmarked.detection_source, Some(WakeupSource::All));
}

#[test]
fn detect_marked_falls_back_to_all_wakeups() {
    use pacer_adapt::controller::{detect_marked, WakeupSource, MIN_TIMER_WAKEUPS};
    use pacer_adapt::kernel::Wakeup;
    let cfg = PeriodConfig::default();
    let detector = |ts: &[u64]| period::analyse(ts, &cfg);
    let mark = |ts: &[u64], timer: &dyn Fn(usize) -> bool| -> Vec<Wakeup> {
        ts.iter()
            .enumerate()
            .map(|(i, &t_ns)| Wakeup::woken(t_ns, timer(i)))
            .collect()
    };
    let ts = exact_train(20.0 * MS, 50);
    // Every wake-up a timer's: the timer ones are used.
    let (e, src) = detect_marked(&detector, &mark(&ts, &|_| true));
    assert_eq!(src, WakeupSource::Timer);
    assert!(rel_err(&e, 20.0 * MS).unwrap() < 1e-4);
    // Too few marked: all of them.
    let few = mark(&ts, &|i| i < MIN_TIMER_WAKEUPS - 1);
    assert_eq!(detect_marked(&detector, &few).1, WakeupSource::All);
    // Enough marked but not periodic (timeouts at random): all of them, which are.
    let random: Vec<usize> = {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        (0..12).map(|_| rng.random_range(0..ts.len())).collect()
    };
    let mut noisy = mark(&ts, &|_| false);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for &i in &random {
        noisy.push(Wakeup::woken(ts[i] + rng.random_range(1..19) * 1_000_000, true));
    }
    noisy.sort_by_key(|w| w.t_ns);
    let (e, src) = detect_marked(&detector, &noisy);
    assert_eq!(src, WakeupSource::All, "{e:?}");
    assert!(rel_err(&e, 20.0 * MS).unwrap() < 1e-3, "{e:?}");
}

#[test]
fn detect_marked_prefers_the_expiries_a_thread_sets() {
    use pacer_adapt::controller::{detect_marked, WakeupSource};
    use pacer_adapt::kernel::{Origin, Wakeup};
    let cfg = PeriodConfig::default();
    let detector = |ts: &[u64]| period::analyse(ts, &cfg);
    // A 20 ms thread running ever later: each job ends 3 ms after the previous one's end plus a
    // period, so it never sleeps and its wake-ups (none here but random others) say nothing.
    // The expiries it sets are the grid, set at drifting times; a restarted sleep sets one twice.
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut records: Vec<Wakeup> = (0..50u64)
        .map(|k| Wakeup {
            t_ns: 1_000_000_000 + k * 23_000_000,
            origin: Origin::TimerSet {
                expiry_ns: 1_000_000_000 + k * 20_000_000,
            },
        })
        .collect();
    records.push(records[10]);
    for _ in 0..40 {
        records.push(Wakeup::other(rng.random_range(1_000_000_000..2_150_000_000)));
    }
    records.sort_by_key(|w| w.t_ns);
    let (e, src) = detect_marked(&detector, &records);
    assert_eq!(src, WakeupSource::TimerExpiry, "{e:?}");
    assert!(rel_err(&e, 20.0 * MS).unwrap() < 1e-6, "{e:?}");
    // The expiries are never taken for wake-ups: without them, the random wake-ups alone.
    let wakeups: Vec<Wakeup> = records.iter().copied().filter(Wakeup::is_wakeup).collect();
    assert_eq!(wakeups.len(), 40);
    assert_eq!(detect_marked(&detector, &wakeups).1, WakeupSource::All);
    // Timeouts that are not activations (random expiries) fall through to the timer wake-ups.
    let ts = exact_train(25.0 * MS, 40);
    let mut mixed: Vec<Wakeup> = ts.iter().map(|&t| Wakeup::woken(t, true)).collect();
    for &t in &ts {
        mixed.push(Wakeup {
            t_ns: t,
            origin: Origin::TimerSet {
                expiry_ns: t + rng.random_range(1..400) * 1_000_000,
            },
        });
    }
    let (e, src) = detect_marked(&detector, &mixed);
    assert_eq!(src, WakeupSource::Timer, "{e:?}");
    assert!(rel_err(&e, 25.0 * MS).unwrap() < 1e-4, "{e:?}");
}
