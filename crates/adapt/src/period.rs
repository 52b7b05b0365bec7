//! Period analyser (LFS++ §5.1–5.2). TEMPORARY API SKELETON — being implemented.

use serde::Serialize;

/// Parameters of the spectrum and the peak heuristic.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeriodConfig {
    pub f_min_hz: f64,
    pub f_max_hz: f64,
    pub df_hz: f64,
    pub alpha: f64,
    pub k_max: usize,
    pub eps_hz: f64,
}

/// One candidate frequency of the heuristic.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    pub freq_hz: f64,
    pub period_ns: u64,
    pub amplitude: f64,
    pub harmonic_sum: f64,
}

/// Result of a period analysis.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum PeriodEstimate {
    Periodic { period_ns: u64, freq_hz: f64, confidence: f64, candidates: Vec<Candidate> },
    NotPeriodic { reason: String },
}

/// Analyses wake-up timestamps (ns, ascending).
pub fn analyse(_timestamps_ns: &[u64], _cfg: &PeriodConfig) -> PeriodEstimate {
    PeriodEstimate::NotPeriodic { reason: "not implemented yet".into() }
}
