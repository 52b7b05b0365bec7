//! The budget formulas of the three controllers, as pure functions: LFS++ §5.3
//! (lfspp-legacy-multimedia.txt) Q_req = (1 + x)·P·𝒫/S; eqs. 3 and 5 of
//! adaptive-deadline-audio-android.txt (normalised runtime, Q = m_m·C_e + m_o); the §7.3
//! adaptive-reservation baseline Q = (1 + x)·𝒫; and the period/bandwidth limits every controller
//! clamps to.

use pacer_model::reservation::{DEFAULT_PERIOD_MAX, DEFAULT_PERIOD_MIN};

use crate::kernel::DlState;

/// Rounds a budget up to whole ns, ignoring float noise below 1e-6 ns (so that an exact
/// 3_450_000.0000000005 is 3_450_000, not 3_450_001).
pub(crate) fn ceil_ns(v: f64) -> u64 {
    if v.is_nan() || v <= 0.0 {
        0
    } else {
        (v - 1e-6).ceil().min(u64::MAX as f64) as u64
    }
}

/// LFS++ §5.3: Q_req = (1 + x) · P · 𝒫(W_k − W_{k−1}) / S, rounded up to whole ns.
/// `predicted` is 𝒫, the CPU time expected over one sampling period S (ns); `spread` is x.
pub fn lfspp_budget(predicted: u64, period: u64, sampling: u64, spread: f64) -> u64 {
    if sampling == 0 {
        return 0;
    }
    ceil_ns((1.0 + spread) * period as f64 * predicted as f64 / sampling as f64)
}

/// The predictor sample that makes [`lfspp_budget`] answer `budget`: 𝒫 = Q·S / ((1 + x)·P),
/// rounded to nearest. Used for the §6.3 history reset ("a single sample equal to the projected
/// budget value") — the history holds CPU time per S, so the budget is translated back.
pub fn lfspp_sample_for_budget(budget: u64, period: u64, sampling: u64, spread: f64) -> u64 {
    if period == 0 {
        return 0;
    }
    let v = budget as f64 * sampling as f64 / ((1.0 + spread) * period as f64);
    if v <= 0.0 {
        0
    } else {
        v.round() as u64
    }
}

/// The sampling period S for a task period P: the multiple of P nearest to `target` (at least P),
/// as §5.3 assumes S = k·P.
pub fn sampling_period_for(period: u64, target: u64) -> u64 {
    if period == 0 {
        return target;
    }
    ((target + period / 2) / period).max(1) * period
}

/// Eq. 3 of adaptive-deadline-audio-android.txt: the normalised runtime of a job,
/// C_m = q_start − q_end + Q·⌈(d_end − d_start)/T⌉, from the SCHED_DEADLINE state at job begin and
/// end. The remaining runtimes are already scaled by the kernel for frequency and capacity; the
/// last term adds back the budget recharged at each deadline postponement (zero when the job ends
/// within its deadline, d_end = d_start). Clamped at 0.
pub fn normalised_runtime(start: DlState, end: DlState, q: u64, t: u64) -> u64 {
    let postponements = if t == 0 {
        0
    } else {
        end.deadline.saturating_sub(start.deadline).div_ceil(t)
    };
    let v = start.runtime as i128 - end.runtime as i128 + q as i128 * postponements as i128;
    v.clamp(0, u64::MAX as i128) as u64
}

/// Eq. 5 of adaptive-deadline-audio-android.txt: Q = m_m·C_e + m_o, rounded up.
pub fn audio_budget(c_e: u64, m_m: f64, m_o: u64) -> u64 {
    ceil_ns(m_m * c_e as f64 + m_o as f64)
}

/// The adaptive-reservation budget of lfspp §7.3: Q = (1 + x)·𝒫(job time), rounded up.
pub fn job_budget(predicted: u64, spread: f64) -> u64 {
    ceil_ns((1.0 + spread) * predicted as f64)
}

/// The largest runtime a thread of period `period` may get under `max_bandwidth`.
pub(crate) fn cap_q(period: u64, max_bandwidth: f64) -> u64 {
    ((max_bandwidth * period as f64).floor().max(0.0) as u64).min(period)
}

/// A period `sched_setattr` accepts (the kernel's default `sched_deadline_period_{min,max}_us`).
pub(crate) fn period_in_range(p: u64) -> bool {
    (DEFAULT_PERIOD_MIN.0..=DEFAULT_PERIOD_MAX.0).contains(&p)
}

/// A period that can be reserved: accepted by the kernel, with room for `min_budget` under
/// `max_bandwidth`.
pub(crate) fn usable_period(p: u64, max_bandwidth: f64, min_budget: u64) -> bool {
    period_in_range(p) && cap_q(p, max_bandwidth) >= min_budget
}

/// `q` within [`min_budget`, the cap of `period`]: every controller's last step before a request.
pub(crate) fn clamp_budget(q: u64, min_budget: u64, period: u64, max_bandwidth: f64) -> u64 {
    q.clamp(min_budget, cap_q(period, max_bandwidth))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn lfspp_request_formula() {
        // Q_req = (1 + x)·P·𝒫/S: P = 10 ms, S = 1 s, 𝒫 = 300 ms of CPU per S, x = 0.15
        // → 1.15 · 10 ms · 0.3 = 3.45 ms.
        assert_eq!(lfspp_budget(300 * MS, 10 * MS, 1000 * MS, 0.15), 3_450_000);
        // x = 0.1 and S = 2P: (1.1)·40 ms·30 ms/80 ms = 16.5 ms.
        assert_eq!(lfspp_budget(30 * MS, 40 * MS, 80 * MS, 0.1), 16_500_000);
        // Rounded up.
        assert_eq!(lfspp_budget(1, 3, 2, 0.0), 2);
        // The history-reset inverse gives back the budget.
        let s = lfspp_sample_for_budget(3_450_000, 10 * MS, 1000 * MS, 0.15);
        assert_eq!(s, 300 * MS);
        assert_eq!(lfspp_budget(s, 10 * MS, 1000 * MS, 0.15), 3_450_000);
    }

    #[test]
    fn sampling_period_is_a_multiple_of_p() {
        assert_eq!(sampling_period_for(10 * MS, 1000 * MS), 1000 * MS);
        assert_eq!(sampling_period_for(33 * MS, 1000 * MS), 990 * MS); // 30 periods
        assert_eq!(sampling_period_for(40 * MS, 1000 * MS), 1000 * MS);
        assert_eq!(sampling_period_for(3000 * MS, 1000 * MS), 3000 * MS); // at least one period
    }

    #[test]
    fn eq3_normalised_runtime() {
        // Within the deadline: d_end = d_start, C_m = q_start − q_end.
        let a = DlState {
            deadline: 100 * MS,
            runtime: 2_000_000,
        };
        let b = DlState {
            deadline: 100 * MS,
            runtime: 500_000,
        };
        assert_eq!(normalised_runtime(a, b, 3 * MS, 10 * MS), 1_500_000);
        // Two postponements by T: C_m = 2 − 1 + 3·⌈20/10⌉ = 7 ms.
        let c = DlState {
            deadline: 120 * MS,
            runtime: 1_000_000,
        };
        assert_eq!(normalised_runtime(a, c, 3 * MS, 10 * MS), 7 * MS);
        // A negative remaining runtime (overrun before throttling) counts as used.
        let d = DlState {
            deadline: 100 * MS,
            runtime: -100_000,
        };
        assert_eq!(normalised_runtime(a, d, 3 * MS, 10 * MS), 2_100_000);
    }

    #[test]
    fn eq5_budget() {
        // Q = m_m·C_e + m_o = 1.2·2 ms + 50 µs = 2.45 ms.
        assert_eq!(audio_budget(2 * MS, 1.2, 50_000), 2_450_000);
        assert_eq!(audio_budget(2 * MS, 1.0, 0), 2 * MS);
        assert_eq!(job_budget(2 * MS, 0.15), 2_300_000);
    }
}
