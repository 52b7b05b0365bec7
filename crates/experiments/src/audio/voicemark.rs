//! VoiceMark (SynthMark's calibration test, `adaptive-deadline-audio-android.txt` §6.1: "the
//! VoiceMark benchmark of SynthMark has been used to evaluate the total CPU utilization for a
//! given number of active audio voices. We found out that 210 voices were able to saturate our
//! big CPU"). Here: the CPU time of one burst is measured at a growing number of voices (each
//! point the median of many bursts rendered back to back, on the thread's own CPU clock, so
//! preemption does not count), a line cost(v) = base + v·c is fitted by least squares, and the
//! voices one CPU can render in real time are (T − base)/c for the burst period T.

use std::sync::atomic::{AtomicBool, Ordering};

use pacer_linux::sched;
use pacer_linux::sys::clock_ns;
use pacer_model::Policy;
use pacer_workload::audio::AudioClock;
use serde::{Deserialize, Serialize};

use super::engine::Renderer;
use super::AudioBenchError;

/// How to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct VoiceMarkSpec {
    pub clock: AudioClock,
    /// Bursts rendered per point (the median is kept).
    pub bursts_per_point: usize,
    /// Stop growing the voices once a burst costs this share of T (≥ 1: past saturation).
    pub stop_at: f64,
    /// The most voices tried.
    pub max_voices: u32,
    pub cpu: Option<usize>,
    /// Measure under SCHED_FIFO at this priority (fewer preemptions to pollute the caches).
    pub fifo_priority: Option<u8>,
}

/// One measured point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VoicePoint {
    pub voices: u32,
    /// Median CPU time of a burst, ns.
    pub median_ns: u64,
    /// 99th percentile of the same bursts, ns.
    pub p99_ns: u64,
    /// Their relative standard deviation (sd / mean): the burst-to-burst noise of the cost.
    #[serde(default)]
    pub cv: f64,
}

/// One VoiceMark run: its points and fitted line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VoiceMarkRun {
    pub points: Vec<VoicePoint>,
    pub base_ns: f64,
    pub per_voice_ns: f64,
    /// Coefficient of determination of the fit (1 = a perfect line).
    pub r2: f64,
    /// (T − base)/c.
    pub voices_per_cpu: f64,
}

/// Least-squares line through (voices, median ns): (base, per voice, r²).
pub fn fit(points: &[VoicePoint]) -> Option<(f64, f64, f64)> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.voices as f64).sum::<f64>() / n;
    let my = points.iter().map(|p| p.median_ns as f64).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.voices as f64 - mx).powi(2)).sum();
    let sxy: f64 = points
        .iter()
        .map(|p| (p.voices as f64 - mx) * (p.median_ns as f64 - my))
        .sum();
    if sxx == 0.0 {
        return None;
    }
    let c = sxy / sxx;
    let base = my - c * mx;
    let ss_tot: f64 = points.iter().map(|p| (p.median_ns as f64 - my).powi(2)).sum();
    let ss_res: f64 = points
        .iter()
        .map(|p| (p.median_ns as f64 - base - c * p.voices as f64).powi(2))
        .sum();
    let r2 = if ss_tot == 0.0 { 1.0 } else { 1.0 - ss_res / ss_tot };
    Some((base, c, r2))
}

/// sd / mean of a sample (0 for fewer than two values or a zero mean).
pub fn relative_sd(v: &[u64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    if mean == 0.0 {
        return 0.0;
    }
    let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0);
    var.sqrt() / mean
}

/// The CPU time of `bursts` bursts at `voices` voices (after as many warm-up bursts as the
/// synthesizer needs for new voices' attacks to settle): sorted.
pub fn burst_costs(r: &mut dyn Renderer, clock: &AudioClock, voices: u32, bursts: usize) -> Vec<u64> {
    let mut buf = vec![0.0f32; clock.burst_frames as usize * 2];
    r.set_voices(voices as usize);
    for _ in 0..bursts.min(32) {
        r.render(&mut buf);
    }
    let mut costs = Vec::with_capacity(bursts);
    for _ in 0..bursts {
        let a = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
        r.render(&mut buf);
        costs.push(clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(a));
    }
    std::hint::black_box(&buf);
    costs.sort_unstable();
    costs
}

/// One VoiceMark run on a thread of its own (pinned, optionally SCHED_FIFO), with a fresh
/// renderer from `make`.
pub fn run(
    spec: &VoiceMarkSpec,
    make: &(dyn Fn() -> Result<Box<dyn Renderer>, AudioBenchError> + Sync),
    stop: &AtomicBool,
) -> Result<VoiceMarkRun, AudioBenchError> {
    let period = spec.clock.period_ns();
    std::thread::scope(|scope| {
        scope
            .spawn(|| -> Result<VoiceMarkRun, AudioBenchError> {
                let tid = sched::gettid();
                if let Some(c) = spec.cpu {
                    sched::set_affinity(tid, &[c]).map_err(|e| AudioBenchError::Setup {
                        what: format!("pinning VoiceMark to CPU {c}"),
                        why: e.to_string(),
                    })?;
                }
                if let Some(p) = spec.fifo_priority {
                    sched::set_policy(tid, Policy::Fifo { priority: p }, true).map_err(|e| {
                        AudioBenchError::Setup {
                            what: format!("VoiceMark under SCHED_FIFO priority {p}"),
                            why: e.to_string(),
                        }
                    })?;
                }
                let mut r = make()?;
                let mut points = Vec::new();
                let mut v = 0u32;
                loop {
                    if stop.load(Ordering::Relaxed) {
                        return Err(AudioBenchError::Interrupted);
                    }
                    let costs = burst_costs(r.as_mut(), &spec.clock, v, spec.bursts_per_point);
                    let median = super::percentile(&costs, 0.5).unwrap_or(0);
                    points.push(VoicePoint {
                        voices: v,
                        median_ns: median,
                        p99_ns: super::percentile(&costs, 0.99).unwrap_or(0),
                        cv: relative_sd(&costs),
                    });
                    if median as f64 >= spec.stop_at * period as f64 || v >= spec.max_voices {
                        break;
                    }
                    v = if v == 0 { 8 } else { v.saturating_mul(2) }.min(spec.max_voices);
                }
                let (base, c, r2) = fit(&points).ok_or_else(|| {
                    AudioBenchError::Measurement("VoiceMark needs at least two different voice counts".into())
                })?;
                if c <= 0.0 {
                    return Err(AudioBenchError::Measurement(format!(
                        "VoiceMark measured no cost per voice ({c:.3} ns); the renderer does no work"
                    )));
                }
                Ok(VoiceMarkRun {
                    points,
                    base_ns: base,
                    per_voice_ns: c,
                    r2,
                    voices_per_cpu: (period as f64 - base.max(0.0)) / c,
                })
            })
            .join()
            .unwrap_or_else(|_| {
                Err(AudioBenchError::Setup {
                    what: "the VoiceMark thread".into(),
                    why: "it panicked".into(),
                })
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_recovers_a_line() {
        let pts: Vec<VoicePoint> = [0u32, 8, 16, 32, 64]
            .iter()
            .map(|&v| VoicePoint {
                voices: v,
                median_ns: 1000 + 250 * v as u64,
                p99_ns: 0,
                cv: 0.0,
            })
            .collect();
        let (b, c, r2) = fit(&pts).unwrap();
        assert!((b - 1000.0).abs() < 1e-6 && (c - 250.0).abs() < 1e-9 && (r2 - 1.0).abs() < 1e-12);
        assert!(fit(&pts[..1]).is_none());
        assert_eq!(super::super::percentile(&[1, 2, 3, 4], 0.5), Some(2));
        assert_eq!(super::super::percentile(&[1, 2, 3, 4], 0.99), Some(4));
        assert_eq!(relative_sd(&[5]), 0.0);
        assert!((relative_sd(&[9, 11]) - 2f64.sqrt() / 10.0).abs() < 1e-12);
    }
}
