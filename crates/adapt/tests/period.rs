//! Period analyser (LFS++ §5.1–5.2, experiments of §7.4) on synthetic wake-up traces: known
//! periods with jitter, bursts of wake-ups per job, spurious and missing events; aperiodic
//! (Poisson) traces; degenerate inputs; accuracy versus observation window.

use pacer_adapt::period::{self, AnalysisOptions, PeriodConfig, PeriodEstimate, SpectrumAccumulator};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Normal};

const MS: f64 = 1e6;
const S: u64 = 1_000_000_000;

/// A synthetic wake-up trace: jobs every `period_ns` (random initial phase), each producing
/// one wake-up per `burst` phase (ns after the job's activation), with Gaussian jitter `jitter_ns`
/// on each activation (and half of it on each burst event), a fraction `drop` of activations
/// missing, and `spurious` extra events per periodic event at uniformly random times.
#[derive(Clone, Debug)]
struct Train {
    period_ns: f64,
    window_ns: u64,
    jitter_ns: f64,
    burst: Vec<f64>,
    drop: f64,
    spurious: f64,
    start_ns: u64,
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
            start_ns: 5_678 * S,
        }
    }
    fn jitter_ms(mut self, j: f64) -> Self {
        self.jitter_ns = j * MS;
        self
    }
    fn window(mut self, w: f64) -> Self {
        self.window_ns = (w * S as f64) as u64;
        self
    }
    /// Burst phases as fractions of the period.
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
                        out.push(self.start_ns + e as u64);
                        periodic += 1;
                    }
                }
            }
            t += self.period_ns;
        }
        let extra = (self.spurious * periodic as f64).round() as usize;
        for _ in 0..extra {
            out.push(self.start_ns + (rng.random::<f64>() * w) as u64);
        }
        out.sort_unstable();
        out
    }
}

fn poisson(rate_hz: f64, window_s: f64, rng: &mut ChaCha8Rng) -> Vec<u64> {
    let exp = Exp::new(rate_hz).unwrap();
    let mut out = Vec::new();
    let mut t = 0.0;
    loop {
        t += exp.sample(rng);
        if t >= window_s {
            return out;
        }
        out.push(1_000 * S + (t * 1e9) as u64);
    }
}

fn rel_err(e: &PeriodEstimate, period_ns: f64) -> Option<f64> {
    e.period_ns().map(|p| (p as f64 - period_ns).abs() / period_ns)
}

#[test]
#[ignore]
fn explore() {
    let cfg = PeriodConfig::default();
    let periods = [3.505, 8.22, 33.3, 40.0, 100.0];
    type Mk = fn(f64) -> Train;
    let scenarios: Vec<(&str, Mk)> = vec![
        ("clean", |p| Train::new(p)),
        ("jit0.2", |p| Train::new(p).jitter_ms(0.2)),
        ("jit1", |p| Train::new(p).jitter_ms(1.0)),
        ("burst3", |p| Train::new(p).jitter_ms(0.2).burst(&[0.0, 0.1, 0.25])),
        ("burst4", |p| Train::new(p).jitter_ms(0.2).burst(&[0.0, 0.1, 0.25, 0.4])),
        ("spur20", |p| Train::new(p).jitter_ms(0.2).spurious(0.2)),
        ("drop10", |p| Train::new(p).jitter_ms(0.2).drop(0.1)),
        ("all", |p| Train::new(p).jitter_ms(0.3).burst(&[0.0, 0.15, 0.3]).spurious(0.2).drop(0.1)),
    ];
    for (name, mk) in &scenarios {
        for &p in &periods {
            let mut worst: f64 = 0.0;
            let mut sum = 0.0;
            let mut fails = 0;
            let mut conf = 0.0;
            let seeds = 40;
            for seed in 0..seeds {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let ts = mk(p).generate(&mut rng);
                let e = period::analyse(&ts, &cfg);
                match rel_err(&e, p * MS) {
                    Some(r) if r < 0.01 => {
                        worst = worst.max(r);
                        sum += r;
                        if let PeriodEstimate::Periodic { confidence, .. } = e {
                            conf += confidence
                        }
                    }
                    _ => {
                        fails += 1;
                        if fails <= 2 {
                            println!("   FAIL {name} P={p} seed={seed}: {:?}", e);
                        }
                    }
                }
            }
            let ok = (seeds - fails) as f64;
            println!(
                "{name:8} P={p:7.3}  fails {fails:2}/{seeds}  mean err {:.4}%  worst {:.4}%  conf {:.2}",
                100.0 * sum / ok,
                100.0 * worst,
                conf / ok
            );
        }
    }
    for rate in [20.0, 50.0, 100.0, 300.0, 1000.0, 3000.0] {
        for w in [0.2, 0.5, 1.0, 2.0] {
            let mut periodic = 0;
            for seed in 0..100 {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let ts = poisson(rate, w, &mut rng);
                if period::analyse(&ts, &cfg).is_periodic() {
                    periodic += 1;
                }
            }
            println!("poisson rate {rate} window {w}: periodic {periodic}/100");
        }
    }
}

#[allow(dead_code)]
fn unused(_: AnalysisOptions, _: SpectrumAccumulator) {}

#[test]
#[ignore]
fn explore2() {
    let cfg = PeriodConfig::default();
    let opts = AnalysisOptions { max_false_alarm: 1.0, ..AnalysisOptions::default() };
    for rate in [50.0, 100.0, 300.0] {
        let mut ps = Vec::new();
        for seed in 0..400 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let ts = poisson(rate, 1.0, &mut rng);
            let a = period::analyse_detailed(&ts, &cfg, &opts).unwrap();
            ps.push(a.p_value.unwrap_or(1.0));
            if a.p_value.unwrap_or(1.0) < 1e-3 {
                println!("rate {rate} seed {seed}: {:?} heur {:?} grid {:?}", a.p_value, a.heuristic_freq_hz, a.grid_freq_hz);
            }
        }
        ps.sort_by(f64::total_cmp);
        let q = |x: f64| ps.iter().filter(|&&p| p < x).count() as f64 / ps.len() as f64;
        println!("rate {rate}: P(p<0.5)={:.3} P(p<0.1)={:.3} P(p<0.01)={:.3} P(p<1e-3)={:.4} min {:.2e}", q(0.5), q(0.1), q(0.01), q(1e-3), ps[0]);
    }
    let mk = |p: f64| Train::new(p).jitter_ms(0.3).burst(&[0.0, 0.15, 0.3]).spurious(0.2).drop(0.1);
    for (p, seeds) in [(100.0, 0..4u64), (33.3, 0..40)] {
        for seed in seeds {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let ts = mk(p).generate(&mut rng);
            let a = period::analyse_detailed(&ts, &cfg, &AnalysisOptions::default()).unwrap();
            if rel_err(&a.estimate, p * MS).is_none_or(|r| r > 0.01) {
                println!("P={p} seed {seed} n={} {:?}\n   heur {:?} grid {:?} p {:?}", ts.len(), a.estimate, a.heuristic_freq_hz, a.grid_freq_hz, a.p_value);
            }
        }
    }
}

#[test]
#[ignore]
fn explore_time() {
    let cfg = PeriodConfig::default();
    for (p, k) in [(40.0, 3usize), (10.0, 3), (3.505, 4)] {
        let phases: Vec<f64> = (0..k).map(|i| i as f64 * 0.1).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let ts = Train::new(p).jitter_ms(0.1).burst(&phases).generate(&mut rng);
        let reps = 50;
        let t = std::time::Instant::now();
        for _ in 0..reps { std::hint::black_box(period::analyse(&ts, &cfg)); }
        let full = t.elapsed() / reps;
        let t = std::time::Instant::now();
        for _ in 0..reps { std::hint::black_box(period::spectrum(&ts, &cfg).unwrap()); }
        let spec = t.elapsed() / reps;
        let mut acc = SpectrumAccumulator::new(&cfg).unwrap();
        let t = std::time::Instant::now();
        acc.extend(ts.iter().copied());
        let push = t.elapsed() / ts.len() as u32;
        let t = std::time::Instant::now();
        for _ in 0..reps { std::hint::black_box(acc.analyse()); }
        let acc_an = t.elapsed() / reps;
        println!("P={p} K={k} N={}: analyse {full:?} spectrum {spec:?} push {push:?} acc.analyse {acc_an:?}", ts.len());
    }
}
#[test]
#[ignore]
fn explore_iters() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let ts = Train::new(10.0).jitter_ms(0.1).burst(&[0.0, 0.1, 0.2]).generate(&mut rng);
    println!("{:?}", period::analyse(&ts, &PeriodConfig::default()).freq_hz());
}
