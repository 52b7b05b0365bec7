//! Task-set generators: statistical checks of RandFixedSum and UUniFast against the uniform-over-
//! the-simplex law, the RM-vs-EDF recipe's promises, and `generate`'s guarantees (C ≤ D ≤ T,
//! reproducibility from the recorded provenance, typed errors on bad parameters).

use pacer_analysis::gen::rm_vs_edf::literal_total_utilization;
use pacer_analysis::gen::{
    derive_seed, generate, generate_many, randfixedsum, uunifast, DeadlineMethod, GenError, GenSpec,
    IndependentSpec, PeriodMethod, Recipe, RmVsEdfParams, RmVsEdfVariant, UncPeriods, UncUtilization,
    UtilizationMethod,
};
use pacer_model::{Duration, TaskSet};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SAMPLES: usize = 5000;

/// Kolmogorov–Smirnov statistic D = sup |F_n(x) − F(x)| of `xs` against `cdf`.
fn ks_statistic(mut xs: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = xs.len() as f64;
    xs.iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = cdf(x);
            (f - i as f64 / n).max((i + 1) as f64 / n - f)
        })
        .fold(0.0, f64::max)
}

/// Asymptotic KS critical value at significance 0.01: 1.628/√n.
fn ks_critical_001(n: usize) -> f64 {
    1.628 / (n as f64).sqrt()
}

fn first_coordinates(seed: u64, n: usize, s: f64, a: f64, b: f64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..SAMPLES)
        .map(|_| randfixedsum(&mut rng, n, s, a, b).unwrap()[0])
        .collect()
}

#[test]
fn randfixedsum_marginal_is_beta_1_n_minus_1() {
    // For a = 0, b = 1, s ≤ 1 the slice is the simplex s·Δ_{n−1}, whose uniform law makes x_1/s
    // Beta(1, n − 1): P(x_1 ≤ x) = 1 − (1 − x/s)^{n−1}.
    let crit = ks_critical_001(SAMPLES);
    for &(n, s) in &[(5usize, 1.0f64), (8, 0.7), (2, 1.0)] {
        let d = ks_statistic(first_coordinates(2024, n, s, 0.0, 1.0), |x| {
            1.0 - (1.0 - (x / s).min(1.0)).powi(n as i32 - 1)
        });
        println!("randfixedsum n={n} s={s}: KS D = {d:.5}, critical (α = 0.01) = {crit:.5}");
        assert!(d < crit, "n={n} s={s}: D = {d} ≥ {crit}");
    }
}

#[test]
fn ks_test_has_power_against_naive_normalisation() {
    // Control: uniform draws divided by their sum are NOT uniform on the simplex; the same test
    // must reject them, or it could not catch a broken RandFixedSum either.
    let mut rng = ChaCha8Rng::seed_from_u64(2024);
    let n = 5usize;
    let xs: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            let v: Vec<f64> = (0..n).map(|_| rng.random::<f64>()).collect();
            v[0] / v.iter().sum::<f64>()
        })
        .collect();
    let d = ks_statistic(xs, |x| 1.0 - (1.0 - x).powi(n as i32 - 1));
    let crit = ks_critical_001(SAMPLES);
    println!("naive normalisation n={n}: KS D = {d:.5}, critical = {crit:.5}");
    assert!(d > crit, "D = {d}");
}

#[test]
fn randfixedsum_marginal_above_one_matches_exact_law() {
    // n = 3 in [0, 1]^3: given x_1, (x_2, x_3) lies on the segment x_2 + x_3 = s − x_1 inside the
    // unit square, of length L(t) = t on [0, 1], 2 − t on [1, 2] (t = s − x_1). The marginal
    // density of x_1 is proportional to L(s − x_1); with G the antiderivative of L,
    // P(x_1 ≤ x) = (G(s) − G(s − x)) / (G(s) − G(s − 1)). s = 1.2 exercises level k = 1, s = 1.5
    // the middle, s = 1.8 the y ↦ 1 − y symmetry used above n/2.
    let g = |t: f64| {
        if t <= 0.0 {
            0.0
        } else if t <= 1.0 {
            t * t / 2.0
        } else if t <= 2.0 {
            2.0 * t - t * t / 2.0 - 1.0
        } else {
            1.0
        }
    };
    let crit = ks_critical_001(SAMPLES);
    for s in [1.2, 1.5, 1.8] {
        let cdf = |x: f64| {
            let x = x.clamp(0.0, 1.0);
            (g(s) - g(s - x)) / (g(s) - g(s - 1.0))
        };
        let d = ks_statistic(first_coordinates(77, 3, s, 0.0, 1.0), cdf);
        println!("randfixedsum n=3 s={s}: KS D = {d:.5}, critical = {crit:.5}");
        assert!(d < crit, "s={s}: D = {d}");
    }
}

#[test]
fn randfixedsum_mean_is_s_over_n_above_one() {
    for &(n, s, a, b) in &[
        (10usize, 3.7f64, 0.0f64, 1.0f64),
        (6, 3.0, 0.1, 0.9),
        (20, 15.0, 0.0, 1.0),
    ] {
        let mut rng = ChaCha8Rng::seed_from_u64(99);
        let mut sums = vec![0.0; n];
        for _ in 0..SAMPLES {
            for (acc, v) in sums.iter_mut().zip(randfixedsum(&mut rng, n, s, a, b).unwrap()) {
                *acc += v;
            }
        }
        // Every coordinate's mean is s/n; the standard error is ≤ (b − a)/(2√SAMPLES) ≈ 0.007.
        for (i, acc) in sums.iter().enumerate() {
            let mean = acc / SAMPLES as f64;
            println!(
                "randfixedsum n={n} s={s}: mean x_{i} = {mean:.4} (expected {:.4})",
                s / n as f64
            );
            assert!((mean - s / n as f64).abs() < 0.03, "x_{i}: {mean}");
        }
    }
}

#[test]
fn uunifast_marginal_is_scaled_beta() {
    let (n, total) = (6usize, 0.8f64);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let xs: Vec<f64> = (0..SAMPLES)
        .map(|_| uunifast(&mut rng, n, total).unwrap()[0])
        .collect();
    let d = ks_statistic(xs, |x| 1.0 - (1.0 - (x / total).min(1.0)).powi(n as i32 - 1));
    let crit = ks_critical_001(SAMPLES);
    println!("uunifast n={n} U={total}: KS D = {d:.5}, critical = {crit:.5}");
    assert!(d < crit, "D = {d}");
}

/// Every task set `generate` returns: names t0.., 1 ns ≤ C ≤ D ≤ T, provenance = spec.
fn check_set(spec: &GenSpec, set: &TaskSet) {
    for (i, t) in set.tasks.iter().enumerate() {
        assert_eq!(t.name, format!("t{i}"));
        assert!(t.wcet.0 >= 1, "{t:?}");
        assert!(t.wcet <= t.deadline && t.deadline <= t.period, "{t:?}");
    }
    let prov = set.generator.as_ref().expect("provenance");
    assert_eq!(prov.seed, Some(spec.seed));
    let recorded = serde_json::Value::Object(prov.parameters.clone());
    assert_eq!(
        recorded,
        serde_json::to_value(spec).unwrap(),
        "parameters are the spec as JSON"
    );
    // The recorded parameters alone regenerate the set.
    let again: GenSpec = serde_json::from_value(recorded).unwrap();
    assert_eq!(&again, spec);
    assert_eq!(&generate(&again).unwrap(), set);
}

/// Rounding C to whole ns moves the total by at most Σ 0.5 ns / T_i.
fn rounding_bound(set: &TaskSet) -> f64 {
    set.tasks.iter().map(|t| 0.5 / t.period.0 as f64).sum::<f64>() + 1e-9
}

#[test]
fn rm_vs_edf_recipe_keeps_its_promises() {
    let (c_min, t_min, t_max) = (
        Duration::from_us(50),
        Duration::from_ms(10),
        Duration::from_ms(100),
    );
    for m in [4usize, 48] {
        for x in [2usize, 3, 4] {
            for r in [0.6, 0.7, 0.8] {
                for seed in 0..3 {
                    let u = r * m as f64;
                    let n = x * m;
                    for variant in [RmVsEdfVariant::ExactTotal, RmVsEdfVariant::Literal] {
                        let spec = GenSpec::rm_vs_edf(seed, m, x, r, variant);
                        let set = generate(&spec).unwrap();
                        check_set(&spec, &set);
                        assert_eq!(set.len(), n);
                        for t in &set.tasks {
                            assert!(t.wcet >= c_min, "{t:?}");
                            assert!(t_min <= t.period && t.period <= t_max, "{t:?}");
                            assert!(t.utilization() < 1.0, "{t:?}");
                            assert!(t.utilization() < r + 0.005 + 1e-9, "{t:?}");
                            assert!(t.has_implicit_deadline());
                        }
                        let total = set.utilization();
                        let periods: Vec<Duration> = set.tasks.iter().map(|t| t.period).collect();
                        let tol = n as f64 * 0.5 / t_min.0 as f64 + 1e-9;
                        match variant {
                            RmVsEdfVariant::ExactTotal => {
                                assert!((total - u).abs() <= tol, "m={m} x={x} R={r}: {total} vs {u}");
                            }
                            RmVsEdfVariant::Literal => {
                                let expected = literal_total_utilization(
                                    &RmVsEdfParams {
                                        m,
                                        x,
                                        r,
                                        variant,
                                        ..RmVsEdfParams::default()
                                    },
                                    &periods,
                                );
                                assert!((total - expected).abs() <= tol, "{total} vs {expected}");
                                let base = u - 0.005;
                                let (lo, hi) = (base + n as f64 * 0.0005, base + n as f64 * 0.005);
                                assert!(lo - tol <= total && total <= hi + tol, "{total} ∉ [{lo}, {hi}]");
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn rm_vs_edf_literal_overshoots_for_the_papers_largest_sets() {
    // The documented discrepancy, on the paper's platform: N = 192 tasks overshoot U = 38.4 by
    // about 0.37 on average; ExactTotal does not.
    let mut excess = 0.0;
    for seed in 0..10 {
        let lit = generate(&GenSpec::rm_vs_edf(seed, 48, 4, 0.8, RmVsEdfVariant::Literal)).unwrap();
        let exact = generate(&GenSpec::rm_vs_edf(seed, 48, 4, 0.8, RmVsEdfVariant::ExactTotal)).unwrap();
        excess += lit.utilization() - 38.4;
        assert!((exact.utilization() - 38.4).abs() < 1e-5);
    }
    let mean_excess = excess / 10.0;
    println!("literal recipe, m=48 x=4 R=0.8: mean excess utilisation {mean_excess:.4}");
    assert!((0.3..0.45).contains(&mean_excess), "{mean_excess}");
}

fn independent(seed: u64, n: Option<usize>, u: f64, um: UtilizationMethod, pm: PeriodMethod) -> GenSpec {
    GenSpec::independent(seed, n, u, um, pm)
}

fn log_uniform_ms(min: u64, max: u64, g_ms: u64) -> PeriodMethod {
    PeriodMethod::LogUniform {
        min: Duration::from_ms(min),
        max: Duration::from_ms(max),
        granularity: Duration::from_ms(g_ms),
    }
}

#[test]
fn independent_methods_hit_the_target_and_record_provenance() {
    let methods = [
        UtilizationMethod::Uunifast,
        UtilizationMethod::UunifastDiscard {
            max: 1.0,
            max_tries: 10_000,
        },
        UtilizationMethod::Randfixedsum { min: 0.0, max: 1.0 },
        UtilizationMethod::Randfixedsum { min: 0.05, max: 0.5 },
    ];
    for (k, um) in methods.into_iter().enumerate() {
        let u = if k == 0 { 0.9 } else { 2.5 };
        let periods = [
            log_uniform_ms(10, 1000, 1),
            PeriodMethod::Uniform {
                min: Duration::from_ms(5),
                max: Duration::from_ms(50),
                granularity: Duration(1),
            },
            PeriodMethod::Unc {
                distribution: UncPeriods::LogUniModerate,
            },
        ];
        for pm in periods {
            for seed in 0..5 {
                let spec = independent(seed, Some(10), u, um.clone(), pm.clone());
                let set = generate(&spec).unwrap();
                check_set(&spec, &set);
                assert_eq!(set.len(), 10);
                assert!(
                    (set.utilization() - u).abs() <= rounding_bound(&set),
                    "{um:?}: {}",
                    set.utilization()
                );
                assert!(set.has_implicit_deadlines());
                if let UtilizationMethod::Randfixedsum { min, max } = um {
                    // C/T can leave [min, max] only by the ns rounding of C.
                    for t in &set.tasks {
                        let slack = 0.5 / t.period.0 as f64 + 1e-12;
                        assert!(min - slack <= t.utilization() && t.utilization() <= max + slack);
                    }
                }
            }
        }
    }
}

#[test]
fn constrained_deadlines_stay_between_c_and_t() {
    let mut spec = independent(
        3,
        Some(50),
        0.95,
        UtilizationMethod::Uunifast,
        log_uniform_ms(1, 100, 1),
    );
    if let Recipe::Independent(s) = &mut spec.recipe {
        s.deadlines = DeadlineMethod::Constrained { lo: 0.2, hi: 0.8 };
    }
    let set = generate(&spec).unwrap();
    check_set(&spec, &set);
    for t in &set.tasks {
        let r = (t.deadline.0 - t.wcet.0) as f64 / (t.period.0 - t.wcet.0) as f64;
        assert!((0.2 - 1e-6..=0.8 + 1e-6).contains(&r), "{t:?}: r = {r}");
    }
    assert!(!set.has_implicit_deadlines());
}

#[test]
fn unc_sets_stop_below_the_cap() {
    for d in UncUtilization::ALL {
        for p in UncPeriods::ALL {
            let spec = independent(
                8,
                None,
                3.0,
                UtilizationMethod::Unc { distribution: d },
                PeriodMethod::Unc { distribution: p },
            );
            let set = generate(&spec).unwrap();
            check_set(&spec, &set);
            let (lo, hi) = d.support();
            let (pmin, pmax) = p.range_ms();
            assert!(
                set.utilization() <= 3.0 && set.utilization() > 3.0 - hi - 1e-9,
                "{d} {p}"
            );
            for t in &set.tasks {
                assert!((pmin..=pmax).contains(&(t.period.0 / 1_000_000)) && t.period.0 % 1_000_000 == 0);
                let slack = 0.5 / t.period.0 as f64 + 1e-12;
                assert!(
                    lo - slack <= t.utilization() && t.utilization() <= hi + slack,
                    "{d}: {t:?}"
                );
            }
        }
    }
    // n bounds the count when given (SchedCAT's max_tasks).
    let spec = independent(
        8,
        Some(4),
        10.0,
        "unc:uni-light".parse().unwrap(),
        PeriodMethod::Unc {
            distribution: "uni-short".parse().unwrap(),
        },
    );
    assert_eq!(generate(&spec).unwrap().len(), 4);
}

#[test]
fn seeds_reproduce_and_differ() {
    let spec = independent(
        42,
        Some(8),
        0.7,
        UtilizationMethod::Uunifast,
        log_uniform_ms(10, 100, 1),
    );
    assert_eq!(generate(&spec).unwrap(), generate(&spec).unwrap());
    let mut other = spec.clone();
    other.seed = 43;
    assert_ne!(generate(&spec).unwrap().tasks, generate(&other).unwrap().tasks);
}

#[test]
fn generate_many_derives_and_records_seeds() {
    let spec = GenSpec::rm_vs_edf(7, 4, 2, 0.7, RmVsEdfVariant::ExactTotal);
    let sets = generate_many(&spec, 5).unwrap();
    assert_eq!(sets.len(), 5);
    let seeds: Vec<u64> = sets
        .iter()
        .map(|s| s.generator.as_ref().unwrap().seed.unwrap())
        .collect();
    for (k, set) in sets.iter().enumerate() {
        assert_eq!(seeds[k], derive_seed(7, k as u64));
        let mut one = spec.clone();
        one.seed = seeds[k];
        check_set(&one, set);
    }
    let mut distinct = seeds.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 5);
    assert_ne!(sets[0].tasks, sets[1].tasks);
    // The same batch again is identical.
    assert_eq!(generate_many(&spec, 5).unwrap(), sets);
}

#[test]
fn hand_written_json_spec_uses_defaults() {
    let spec: GenSpec = serde_json::from_str(
        r#"{"seed": 1, "recipe": "independent", "n": 10, "utilization": 0.8,
            "utilizations": {"method": "randfixedsum"},
            "periods": {"method": "log-uniform", "min": "10ms", "max": "100ms"}}"#,
    )
    .unwrap();
    let Recipe::Independent(IndependentSpec {
        utilizations,
        periods,
        deadlines,
        ..
    }) = &spec.recipe
    else {
        panic!("{spec:?}")
    };
    assert_eq!(
        utilizations,
        &UtilizationMethod::Randfixedsum { min: 0.0, max: 1.0 }
    );
    assert_eq!(
        periods,
        &PeriodMethod::LogUniform {
            min: Duration::from_ms(10),
            max: Duration::from_ms(100),
            granularity: Duration(1)
        }
    );
    assert_eq!(deadlines, &DeadlineMethod::Implicit);
    check_set(&spec, &generate(&spec).unwrap());

    let rm: GenSpec =
        serde_json::from_str(r#"{"seed": 3, "recipe": "rm-vs-edf", "m": 4, "x": 3, "r": 0.7}"#).unwrap();
    assert_eq!(rm, GenSpec::rm_vs_edf(3, 4, 3, 0.7, RmVsEdfVariant::ExactTotal));
}

#[test]
fn bad_parameters_are_errors_not_panics() {
    let lu = log_uniform_ms(10, 100, 1);
    let rfs = UtilizationMethod::Randfixedsum { min: 0.0, max: 1.0 };
    let err = |spec: GenSpec| generate(&spec).unwrap_err();

    let e = err(independent(1, None, 0.5, UtilizationMethod::Uunifast, lu.clone()));
    assert!(e.to_string().contains("invalid n"), "{e}");
    assert!(matches!(
        err(independent(1, Some(0), 0.5, rfs.clone(), lu.clone())),
        GenError::InvalidParameter { .. }
    ));
    for u in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        err(independent(1, Some(4), u, rfs.clone(), lu.clone()));
    }
    let e = err(independent(
        1,
        Some(4),
        1.5,
        UtilizationMethod::Uunifast,
        lu.clone(),
    ));
    assert!(e.to_string().contains("uunifast-discard"), "{e}");
    assert!(matches!(
        err(independent(1, Some(4), 4.5, rfs.clone(), lu.clone())),
        GenError::SumOutOfRange { .. }
    ));
    err(independent(
        1,
        Some(4),
        1.0,
        UtilizationMethod::Randfixedsum { min: 0.0, max: 1.5 },
        lu.clone(),
    ));
    err(independent(
        1,
        Some(4),
        1.0,
        UtilizationMethod::Randfixedsum { min: 0.6, max: 0.5 },
        lu.clone(),
    ));
    err(independent(
        1,
        Some(4),
        1.0,
        UtilizationMethod::UunifastDiscard {
            max: 1.5,
            max_tries: 10,
        },
        lu.clone(),
    ));
    assert!(matches!(
        err(independent(
            1,
            Some(4),
            3.99,
            UtilizationMethod::UunifastDiscard {
                max: 1.0,
                max_tries: 5
            },
            lu.clone()
        )),
        GenError::DiscardLimit { .. }
    ));
    assert!(matches!(
        err(independent(
            1,
            Some(4),
            1.0,
            rfs.clone(),
            log_uniform_ms(100, 10, 1)
        )),
        GenError::PeriodMinAboveMax { .. }
    ));
    assert!(matches!(
        err(independent(
            1,
            Some(4),
            1.0,
            rfs.clone(),
            log_uniform_ms(10, 100, 0)
        )),
        GenError::ZeroGranularity
    ));
    assert!(matches!(
        err(independent(
            1,
            Some(4),
            1.0,
            rfs.clone(),
            log_uniform_ms(10, 100, 200)
        )),
        GenError::GranularityAboveMax { .. }
    ));
    let mut bad_deadlines = independent(1, Some(4), 1.0, rfs.clone(), lu.clone());
    if let Recipe::Independent(s) = &mut bad_deadlines.recipe {
        s.deadlines = DeadlineMethod::Constrained { lo: 0.8, hi: 0.2 };
    }
    assert!(err(bad_deadlines).to_string().contains("deadlines"));
    err(GenSpec::rm_vs_edf(1, 0, 2, 0.6, RmVsEdfVariant::ExactTotal));
    err(GenSpec::rm_vs_edf(1, 4, 2, 1.2, RmVsEdfVariant::Literal));

    // Names: clear errors listing what is valid.
    let e = "unc:uni-lite"
        .parse::<UtilizationMethod>()
        .unwrap_err()
        .to_string();
    assert!(e.contains("uni-lite") && e.contains("bimo-medium"), "{e}");
    let e = "uunifast-discrad"
        .parse::<UtilizationMethod>()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("uunifast-discard") && e.contains("randfixedsum"),
        "{e}"
    );
    assert_eq!(
        "randfixedsum".parse::<UtilizationMethod>().unwrap(),
        UtilizationMethod::Randfixedsum { min: 0.0, max: 1.0 }
    );
    assert!(serde_json::from_str::<GenSpec>(r#"{"seed": 1, "recipe": "nope"}"#).is_err());
}
