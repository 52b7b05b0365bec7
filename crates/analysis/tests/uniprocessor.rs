//! Property tests of the exact uniprocessor tests against brute force on small integer task sets.

use pacer_analysis::uni::{priority, qpa, rta};
use pacer_analysis::Timing;
use proptest::prelude::*;

fn lcm(a: u64, b: u64) -> u64 {
    pacer_model::time::lcm(a, b).expect("small periods")
}

/// Exact EDF feasibility by brute force: U ≤ 1 and dbf(t) ≤ t at every integer t up to H + D_max
/// (Baruah, Rosier & Howell 1990 — beyond that point the demand pattern repeats).
fn brute_force_edf(ts: &[Timing]) -> bool {
    let (num, den) = ts.iter().fold((0u64, 1u64), |(n, d), x| {
        let l = lcm(d, x.t);
        (n * (l / d) + x.c * (l / x.t), l)
    });
    if num > den {
        return false;
    }
    let h = ts.iter().fold(1, |a, x| lcm(a, x.t));
    let dmax = ts.iter().map(|x| x.d).max().unwrap();
    (1..=h + dmax).all(|t| {
        let dbf: u64 = ts
            .iter()
            .filter(|x| x.d <= t)
            .map(|x| ((t - x.d) / x.t + 1) * x.c)
            .sum();
        dbf <= t
    })
}

/// Unit-step simulation of synchronous preemptive fixed priority over one hyperperiod: true iff
/// no job misses its deadline (the synchronous pattern is the worst case for constrained D).
fn simulate_fp(ts: &[Timing], order: &[usize]) -> bool {
    let h = ts.iter().fold(1, |a, x| lcm(a, x.t));
    let mut remaining = vec![0u64; ts.len()];
    for now in 0..h {
        for (i, x) in ts.iter().enumerate() {
            if now % x.t == 0 {
                if remaining[i] > 0 {
                    return false;
                }
                remaining[i] = x.c;
            }
            // Work still pending at the deadline instant is a miss.
            if now % x.t == x.d % x.t && now % x.t != 0 && remaining[i] > 0 {
                return false;
            }
        }
        if let Some(&i) = order.iter().find(|&&i| remaining[i] > 0) {
            remaining[i] -= 1;
        }
    }
    remaining.iter().all(|&r| r == 0)
}

fn small_set() -> impl Strategy<Value = Vec<Timing>> {
    prop::collection::vec(
        (2u64..=16).prop_flat_map(|t| {
            (1..=t).prop_flat_map(move |d| (1..=d).prop_map(move |c| Timing::new(c, d, t)))
        }),
        1..=4,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn qpa_matches_brute_force(ts in small_set()) {
        prop_assert_eq!(qpa::schedulable(&ts), brute_force_edf(&ts), "{:?}", ts);
    }

    #[test]
    fn rta_matches_simulation(ts in small_set()) {
        let order = priority::deadline_monotonic(&ts);
        let rta_ok = rta::response_times(&ts, &order).iter().all(Option::is_some);
        prop_assert_eq!(rta_ok, simulate_fp(&ts, &order), "{:?}", ts);
    }
}
