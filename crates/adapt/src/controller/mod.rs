//! Bandwidth controllers: the loops that turn measurements into SCHED_DEADLINE budgets.
//!
//! - [`LegacyController`] ([`legacy`]) — LFS++ (lfspp-legacy-multimedia.txt §4.2, Fig. 3, §5.3)
//!   for unmodified applications: wake-ups → period analyser (§5.1–5.2) → period P; CPU time
//!   sampled every S (a multiple of P) → percentile predictor → Q_req = (1 + x)·P·𝒫(W_k −
//!   W_{k−1})/S → supervisor (eq. 1) → SCHED_DEADLINE(Q, P, P). Optionally owns the §6.3
//!   [`crate::power::PowerManager`].
//! - [`ProactiveController`] ([`proactive`]) — the audio paper (adaptive-deadline-audio-android.txt
//!   §5.2) for cooperating applications: per-job normalised runtime C_m (eq. 3), per-workUnits
//!   asymmetric EWMA (eq. 4) in a [`WorkUnitsTable`](crate::predictor::WorkUnitsTable), Q =
//!   m_m·C_e + m_o (eq. 5) on every workUnits change and every N jobs; optionally Q from a
//!   percentile of each workUnits value's runtimes instead ([`MarginMode::Percentile`], LFS++ §5.3).
//! - [`JobController`] ([`job`]) — the adaptive-reservation baseline LFS++ compares against
//!   (§7.3): jobs measured exactly from begin/end CPU times, percentile predictor, Q = (1 + x)·𝒫.
//!
//! The formulas are in [`budget`]. All three submit their requests to a [`Supervisor`] through a
//! reservation [`Pool`] ([`pool`]: private to the controller, or shared by several) that applies
//! the grants with [`apply_grants`](crate::supervisor::apply_grants)' rules, so an admission
//! refusal is recorded as "system full" and never panics. Every reservation carries
//! `SCHED_FLAG_RESET_ON_FORK` (a reserved thread must stay able to fork/create threads) and, if
//! configured, `SCHED_FLAG_RECLAIM`.
//!
//! [`Supervisor`]: crate::supervisor::Supervisor

pub mod budget;
mod common;
pub mod job;
pub mod legacy;
pub mod pool;
pub mod proactive;

use crate::kernel::Tid;
use crate::power::PowerError;
use crate::predictor::PredictorError;

pub use budget::{
    audio_budget, job_budget, lfspp_budget, lfspp_sample_for_budget, normalised_runtime, sampling_period_for,
};
pub use common::ThreadOptions;
pub use job::{JobConfig, JobController, JobThreadStatus};
pub use legacy::{
    detect_marked, Detector, LegacyConfig, LegacyController, LegacyThreadStatus, Phase, PowerStatus,
    WakeupSource, DEFAULT_PROBE_WAIT, MIN_TIMER_WAKEUPS, PROBE_LATE_USE, PROBE_LIMIT_WINDOWS,
    PROBE_MIN_BANDWIDTH, PROBE_PERIOD_NS,
};
pub use pool::{Pool, PoolError};
pub use proactive::{
    MarginMode, Measure, PercentileMargin, ProactiveConfig, ProactiveController, ProactiveThreadStatus,
};

/// Invalid controller configuration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    Predictor(#[from] PredictorError),
    #[error(transparent)]
    Power(#[from] PowerError),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("thread {0} is already controlled")]
    Duplicate(Tid),
    /// The thread is controlled by another controller of the same pool.
    #[error(transparent)]
    Pool(#[from] PoolError),
    #[error(
        "period {0} ns is outside the SCHED_DEADLINE period range or leaves no room for the minimum budget"
    )]
    BadPeriod(u64),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_are_validated() {
        assert!(LegacyConfig::default().validate().is_ok());
        assert!(LegacyConfig {
            min_budget_ns: 10,
            ..LegacyConfig::default()
        }
        .validate()
        .is_err());
        assert!(LegacyConfig {
            percentile: 0.0,
            ..LegacyConfig::default()
        }
        .validate()
        .is_err());
        assert!(ProactiveConfig::default().validate().is_ok());
        assert!(ProactiveConfig {
            margin_mult: 0.9,
            ..ProactiveConfig::default()
        }
        .validate()
        .is_err());
        assert!(JobConfig {
            max_bandwidth: 1.5,
            ..JobConfig::default()
        }
        .validate()
        .is_err());
    }
}
