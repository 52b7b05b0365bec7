//! The SynthMark-style audio benchmark on the real kernel (issue 17; `adaptive-deadline-audio-
//! android.txt` §5.3–6): a real synthesizer callback ([`pacer_workload::synth`]) every b frames
//! at S Hz, a virtual sink of k bursts consumed on the clock ([`engine`]), background load
//! ([`crate::load`]), the per-voice cost ([`voicemark`]) and the summaries every mode prints.
//!
//! The paper's workUnits patterns are in its voices, where 210 voices saturate the HiKey960's big
//! CPU at its top OPP (§6.1). A pattern is played here in this machine's voices, scaled by the
//! voices one CPU renders in real time as VoiceMark measures them ([`scale_voices`]): 185 paper
//! voices are 88 % of a CPU on both machines.

pub mod engine;
pub mod voicemark;

use pacer_workload::audio::{AudioClock, VoicePattern, VoiceSchedule};
use serde::Serialize;

pub use crate::load::{Load, LoadError, LoadSpec};
pub use engine::{Callback, Renderer, RunResult, RunSpec, Scheduling, Via};

/// Voices that saturate the paper's CPU (§6.1).
pub const PAPER_SATURATING_VOICES: f64 = 210.0;

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum AudioBenchError {
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Load(#[from] crate::load::LoadError),
    #[error("{what}: {why}")]
    Setup { what: String, why: String },
    #[error("{0}")]
    Measurement(String),
    #[error("interrupted")]
    Interrupted,
}

/// The voices of every callback of a run of `duration_ns`: the pattern's steps (paper voices)
/// times `voices_per_cpu / 210 · scale`, rounded, at least 0.
pub fn scale_voices(
    pattern: &VoicePattern,
    clock: &AudioClock,
    step_ns: u64,
    duration_ns: u64,
    voices_per_cpu: f64,
    scale: f64,
) -> Result<Vec<u32>, AudioBenchError> {
    let sched = VoiceSchedule::new(pattern, clock, step_ns, duration_ns)
        .map_err(|e| AudioBenchError::Input(e.to_string()))?;
    let f = voices_per_cpu / PAPER_SATURATING_VOICES * scale;
    Ok((0..sched.jobs)
        .map(|j| {
            (sched.voices_of(j) as f64 * f)
                .round()
                .clamp(0.0, u32::MAX as f64) as u32
        })
        .collect())
}

/// Nearest-rank percentile of sorted values (the definition `pacer compare` uses).
pub fn percentile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// p50 / p99 / max of a set of durations, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Spread {
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

impl Spread {
    pub fn of(mut v: Vec<u64>) -> Option<Spread> {
        v.sort_unstable();
        Some(Spread {
            count: v.len() as u64,
            p50_ns: percentile(&v, 0.5)?,
            p99_ns: percentile(&v, 0.99)?,
            max_ns: *v.last()?,
        })
    }
}

/// What a run's table row and JSON object say.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub configuration: &'static str,
    pub bursts: u32,
    pub latency_ms: f64,
    pub callbacks: u64,
    pub planned: u64,
    pub underruns: u64,
    pub soft_misses: u64,
    /// Wake-up latency of the callbacks that slept until their time.
    pub wakeup: Option<Spread>,
    /// Completion latency (end − due).
    pub completion: Option<Spread>,
    /// CPU time per callback.
    pub cpu: Option<Spread>,
    pub used_bandwidth: f64,
    pub reserved_bandwidth: Option<f64>,
    pub reserved_over_used: Option<f64>,
    pub rms: f64,
    pub interrupted: bool,
    pub refused_notifications: u32,
    /// Hypervisor steal time during the run, all CPUs (see [`RunResult::steal_ns`]).
    pub steal_ns: Option<u64>,
    /// What the ALSA device saw (`--device`): its xruns and dropped bursts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<pacer_linux::playback::PlaybackReport>,
    pub cpus: Vec<usize>,
    pub notes: Vec<String>,
}

impl RunSummary {
    pub fn of(r: &RunResult, clock: &AudioClock) -> RunSummary {
        let used = r.used_bandwidth();
        let reserved = r.reserved_bandwidth();
        RunSummary {
            configuration: r.configuration,
            bursts: r.bursts,
            latency_ms: clock.latency_ms(r.bursts),
            callbacks: r.callbacks.len() as u64,
            planned: r.planned,
            underruns: r.sink.underruns,
            soft_misses: r.sink.soft_misses,
            wakeup: Spread::of(r.callbacks.iter().filter_map(|c| c.wakeup_latency_ns()).collect()),
            completion: Spread::of(r.callbacks.iter().map(|c| c.latency_ns()).collect()),
            cpu: Spread::of(r.callbacks.iter().map(|c| c.cpu_ns).collect()),
            used_bandwidth: used,
            reserved_bandwidth: reserved,
            reserved_over_used: reserved.filter(|_| used > 0.0).map(|b| b / used),
            rms: r.rms,
            interrupted: r.interrupted,
            refused_notifications: r.refused_notifications,
            steal_ns: r.steal_ns,
            device: r.device.clone(),
            cpus: r.cpus.clone(),
            notes: r.notes.clone(),
        }
    }
}

/// A histogram of durations: `bins` equal bins over [0, max], counts per bin (JitterMark).
pub fn histogram_ns(values: &[u64], bin_ns: u64) -> Vec<(u64, u64)> {
    let bin_ns = bin_ns.max(1);
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    for v in sorted {
        let lo = v / bin_ns * bin_ns;
        match out.last_mut() {
            Some((l, n)) if *l == lo => *n += 1,
            _ => out.push((lo, 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_voices_scale_to_this_machine() {
        let clock = AudioClock::default();
        let v = scale_voices(
            &VoicePattern::paper_square(),
            &clock,
            3_000_000_000,
            6_000_000_000,
            420.0,
            1.0,
        )
        .unwrap();
        assert_eq!(v.len(), 4500);
        assert_eq!(v[0], 10);
        assert_eq!(v[2250], 370);
        let half = scale_voices(
            &VoicePattern::paper_square(),
            &clock,
            3_000_000_000,
            6_000_000_000,
            420.0,
            0.5,
        )
        .unwrap();
        assert_eq!(half[2250], 185);
    }

    #[test]
    fn spreads_and_histograms() {
        let s = Spread::of(vec![5, 1, 3, 2, 4]).unwrap();
        assert_eq!((s.count, s.p50_ns, s.p99_ns, s.max_ns), (5, 3, 5, 5));
        assert!(Spread::of(Vec::new()).is_none());
        assert_eq!(
            histogram_ns(&[1, 9, 10, 25, 29], 10),
            vec![(0, 2), (10, 1), (20, 2)]
        );
    }
}
