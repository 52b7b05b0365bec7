//! Analysis and generator throughput (issue: "task sets per second for 10/50/200-task sets on
//! 4/16/48 CPUs"). Each iteration analyses the next set of a pre-generated pool, so the figure is
//! an average over different sets, not one cached case. Results: docs/BENCHMARKS.md.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pacer_analysis::gen::{self, DeadlineMethod, GenSpec, PeriodMethod, Recipe, UtilizationMethod};
use pacer_analysis::suite::{self, SuiteConfig};
use pacer_analysis::{timings, Timing};
use pacer_model::Duration as Ns;

const POOL: usize = 32;

/// n tasks, U = 0.6·min(n, m) (so every (n, m) pair is feasible), RandFixedSum, log-uniform periods
/// in [10, 100] ms, constrained deadlines D = C + r(T − C), r ∈ [0.5, 1] so that QPA and the
/// global tests do real work.
fn pool(n: usize, m: usize) -> Vec<Vec<Timing>> {
    let spec = GenSpec {
        seed: 2026,
        recipe: Recipe::Independent(gen::IndependentSpec {
            n: Some(n),
            utilization: 0.6 * n.min(m) as f64,
            utilizations: UtilizationMethod::Randfixedsum { min: 0.0, max: 1.0 },
            periods: PeriodMethod::LogUniform {
                min: Ns::from_ms(10),
                max: Ns::from_ms(100),
                granularity: Ns::from_us(1),
            },
            deadlines: DeadlineMethod::Constrained { lo: 0.5, hi: 1.0 },
        }),
    };
    gen::generate_many(&spec, POOL)
        .expect("benchmark spec is valid")
        .iter()
        .map(|s| timings(&s.tasks))
        .collect()
}

fn analysis(c: &mut Criterion) {
    let mut g = c.benchmark_group("analyze");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(1));
    for &m in &[4usize, 16, 48] {
        for &n in &[10usize, 50, 200] {
            let sets = pool(n, m);
            // Everything `pacer analyze` runs except the ILP, whose cost is its time limit.
            let mut cfg = SuiteConfig::new(m);
            cfg.milp = false;
            cfg.cluster_size = Some(if m == 4 { 2 } else { 4 });
            let mut k = 0;
            g.bench_with_input(BenchmarkId::new(format!("suite/m{m}"), n), &sets, |b, sets| {
                b.iter(|| {
                    k = (k + 1) % sets.len();
                    black_box(suite::run(&sets[k], &cfg))
                })
            });
        }
    }
    g.finish();
}

fn global_tests(c: &mut Criterion) {
    let mut g = c.benchmark_group("global");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    g.throughput(Throughput::Elements(1));
    let m = 16;
    for &n in &[10usize, 50, 200] {
        let sets = pool(n, m);
        let mut k = 0;
        g.bench_with_input(BenchmarkId::new("global-edf-any/m16", n), &sets, |b, sets| {
            b.iter(|| {
                k = (k + 1) % sets.len();
                black_box(pacer_analysis::global::edf_schedulable(&sets[k], m))
            })
        });
    }
    g.finish();
}

fn generators(c: &mut Criterion) {
    let mut g = c.benchmark_group("generate");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    g.throughput(Throughput::Elements(1));
    // UUniFast-discard is run at n ≤ 50 only: at n = 200, U = 80 its acceptance rate is so low
    // that it gives up after 10 000 redraws (measured), which is why RandFixedSum exists.
    for &n in &[10usize, 50, 200] {
        for (name, method) in [
            (
                "uunifast-discard",
                UtilizationMethod::UunifastDiscard {
                    max: 1.0,
                    max_tries: 10_000,
                },
            ),
            (
                "randfixedsum",
                UtilizationMethod::Randfixedsum { min: 0.0, max: 1.0 },
            ),
        ] {
            if n > 50 && name == "uunifast-discard" {
                continue;
            }
            let mut seed = 0u64;
            g.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter(|| {
                    seed += 1;
                    let spec = GenSpec::independent(
                        seed,
                        Some(n),
                        0.4 * n as f64,
                        method.clone(),
                        PeriodMethod::LogUniform {
                            min: Ns::from_ms(10),
                            max: Ns::from_ms(100),
                            granularity: Ns::from_us(1),
                        },
                    );
                    black_box(gen::generate(&spec).expect("valid spec"))
                })
            });
        }
    }
    for &m in &[4usize, 16, 48] {
        let mut seed = 0u64;
        g.bench_function(BenchmarkId::new("rm-vs-edf/x4", m), |b| {
            b.iter(|| {
                seed += 1;
                let spec = GenSpec::rm_vs_edf(seed, m, 4, 0.8, Default::default());
                black_box(gen::generate(&spec).expect("valid spec"))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, analysis, global_tests, generators);
criterion_main!(benches);
