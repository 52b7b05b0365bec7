//! The fast paths of issue 13 against the plain implementations they replaced
//! (`pacer_analysis::reference`): same response times, same verdicts, same placements, same
//! outcome values and notes, on random task sets built to sit near the schedulability boundary.

use pacer_analysis::gen::{self, DeadlineMethod, GenSpec, PeriodMethod, Recipe, UtilizationMethod};
use pacer_analysis::global::bak;
use pacer_analysis::partition::{pack, pack_with, DmBin, EdfBin, Heuristic};
use pacer_analysis::reference;
use pacer_analysis::uni::{priority, rta};
use pacer_analysis::{timings, Timing};
use pacer_model::Duration as Ns;
use proptest::prelude::*;

/// Periods that share factors (harmonic chains, equal deadlines and periods: ties in every
/// priority order), mixed with arbitrary ones.
const PERIODS: [u64; 12] = [4, 5, 6, 8, 10, 12, 15, 20, 24, 30, 40, 60];

/// One task's raw draw: (period choice, utilisation weight, deadline fraction, implicit?).
type Raw = (u64, u32, u32, bool);

fn raw_task() -> impl Strategy<Value = Raw> {
    (
        prop_oneof![
            (0..PERIODS.len()).prop_map(|i| PERIODS[i]),
            2u64..2_000,
            1_000u64..10_000_000,
        ],
        1u32..=1000,
        0u32..=1000,
        any::<bool>(),
    )
}

/// Tasks whose utilisations are the weights scaled to `total_permille` / 1000 (C ≥ 1 unless
/// `zero_c`, C ≤ D ≤ T), with D = T or D = C + frac·(T − C).
fn build(raw: &[Raw], total_permille: u32, zero_c: bool) -> Vec<Timing> {
    let weights: u64 = raw.iter().map(|r| u64::from(r.1)).sum();
    raw.iter()
        .map(|&(t, w, f, implicit)| {
            let u = f64::from(total_permille) / 1000.0 * w as f64 / weights as f64;
            let lo = u64::from(!zero_c);
            let c = ((u * t as f64).round() as u64).clamp(lo, t);
            let d = if implicit {
                t
            } else {
                c + (t - c) * u64::from(f) / 1000
            };
            Timing::new(c, d.max(1).max(c), t)
        })
        .collect()
}

fn sets(max_n: usize, permille: std::ops::RangeInclusive<u32>) -> impl Strategy<Value = Vec<Timing>> {
    (
        prop::collection::vec(raw_task(), 1..=max_n),
        permille,
        prop::bool::weighted(0.05),
    )
        .prop_map(|(raw, p, zero_c)| build(&raw, p, zero_c))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn rta_sweep_matches_plain_iteration(ts in sets(24, 300..=1100), seed in any::<u64>()) {
        let mut shuffled: Vec<usize> = (0..ts.len()).collect();
        // A deterministic shuffle from the seed: arbitrary priority orders, not only RM/DM.
        let mut x = seed | 1;
        for i in (1..shuffled.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            shuffled.swap(i, (x % (i as u64 + 1)) as usize);
        }
        for order in [priority::rate_monotonic(&ts), priority::deadline_monotonic(&ts), shuffled] {
            prop_assert_eq!(
                rta::response_times(&ts, &order),
                reference::rta_response_times(&ts, &order),
                "order {:?} of {:?}", order, ts
            );
        }
        prop_assert_eq!(rta::schedulable_dm(&ts), reference::rta_schedulable_dm(&ts), "{:?}", ts);
    }

    #[test]
    fn dm_bins_place_like_whole_bin_rta(ts in sets(30, 800..=3400), m in 1usize..=4) {
        let bins = vec![1; m];
        for h in Heuristic::ALL {
            prop_assert_eq!(
                pack_with(&ts, &bins, h, DmBin::new),
                pack(&ts, &bins, h, reference::partitioned_dm_fits),
                "{} on {} CPUs: {:?}", h, m, ts
            );
        }
    }

    #[test]
    fn edf_bins_place_like_whole_bin_qpa(ts in sets(30, 800..=3600), m in 1usize..=4) {
        let bins = vec![1; m];
        for h in Heuristic::ALL {
            prop_assert_eq!(
                pack_with(&ts, &bins, h, EdfBin::new),
                pack(&ts, &bins, h, reference::partitioned_edf_fits),
                "{} on {} CPUs: {:?}", h, m, ts
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn bak_candidate_filter_matches_full_search(ts in sets(30, 500..=4000), m in 1usize..=4) {
        prop_assert_eq!(bak::test(&ts, m), reference::bak_test(&ts, m), "m = {}: {:?}", m, ts);
    }
}

/// Generator-made sets like `pacer gen` makes them (RandFixedSum, log-uniform periods with a
/// 1 µs grid), larger than the property tests, at loads where some heuristics fail.
fn generated(seed: u64, n: usize, u: f64, constrained: bool) -> Vec<Timing> {
    let spec = GenSpec {
        seed,
        recipe: Recipe::Independent(gen::IndependentSpec {
            n: Some(n),
            utilization: u,
            utilizations: UtilizationMethod::Randfixedsum { min: 0.0, max: 1.0 },
            periods: PeriodMethod::LogUniform {
                min: Ns::from_ms(10),
                max: Ns::from_ms(100),
                granularity: Ns::from_us(1),
            },
            deadlines: if constrained {
                DeadlineMethod::Constrained { lo: 0.5, hi: 1.0 }
            } else {
                DeadlineMethod::Implicit
            },
        }),
    };
    timings(&gen::generate(&spec).expect("valid spec").tasks)
}

#[test]
fn generated_sets_agree_with_reference() {
    for (seed, n, m, per_cpu, constrained) in [
        (1, 120, 2, 0.8, false),
        (2, 120, 2, 0.9, false),
        (3, 90, 3, 0.85, true),
        (4, 150, 2, 0.95, true),
        (5, 60, 4, 0.75, true),
    ] {
        let ts = generated(seed, n, per_cpu * m as f64, constrained);
        let bins = vec![1; m];
        for h in Heuristic::ALL {
            assert_eq!(
                pack_with(&ts, &bins, h, DmBin::new),
                pack(&ts, &bins, h, reference::partitioned_dm_fits),
                "DM, seed {seed}, {h}"
            );
            assert_eq!(
                pack_with(&ts, &bins, h, EdfBin::new),
                pack(&ts, &bins, h, reference::partitioned_edf_fits),
                "EDF, seed {seed}, {h}"
            );
        }
        for order in [priority::rate_monotonic(&ts), priority::deadline_monotonic(&ts)] {
            assert_eq!(
                rta::response_times(&ts, &order),
                reference::rta_response_times(&ts, &order),
                "seed {seed}"
            );
        }
        assert_eq!(bak::test(&ts, m), reference::bak_test(&ts, m), "seed {seed}");
    }
}
