//! The audio paper's workload model (adaptive-deadline-audio-android.txt §4.2, §6): the sink's
//! Fig. 3 deadlines on hand-made finish times, the per-voice cost calibration, the workUnits
//! patterns and the LatencyMark search.

use pacer_workload::audio::{
    bursts_needed, latency_mark, AudioClock, AudioError, AudioSink, BurstOutcome, SinkCount, VoiceCost,
    VoicePattern, VoiceSchedule,
};

const T: u64 = 1_000_000; // a round period for hand-made schedules

/// Finish times of jobs 0.. given their response times (activation j·T + t0).
fn finishes(t0: u64, responses: &[u64]) -> Vec<u64> {
    responses
        .iter()
        .enumerate()
        .map(|(j, r)| t0 + j as u64 * T + r)
        .collect()
}

#[test]
fn sink_deadlines_k1_k2_k3() {
    let t0 = 5_000;
    // Job 0 on time, job 1 just at its soft deadline (in time), job 2 after it by 1 ns,
    // job 3 at 2T exactly, job 4 at 2T + 1, job 5 at 3T + 1, job 6 on time.
    let r = [T / 2, T, T + 1, 2 * T, 2 * T + 1, 3 * T + 1, 10];
    let f = finishes(t0, &r);
    let horizon = t0 + 20 * T;
    let outcomes = |k: u32| -> Vec<BurstOutcome> {
        let s = AudioSink::new(T, k).unwrap();
        (0..r.len() as u64)
            .map(|j| s.outcome(t0, j, f[j as usize]))
            .collect()
    };
    use BurstOutcome::*;
    // k = 1: hard deadline = soft deadline = T.
    assert_eq!(
        outcomes(1),
        vec![OnTime, OnTime, Underrun, Underrun, Underrun, Underrun, OnTime]
    );
    // k = 2: hard deadline 2T.
    assert_eq!(
        outcomes(2),
        vec![OnTime, OnTime, Late, Late, Underrun, Underrun, OnTime]
    );
    // k = 3: hard deadline 3T.
    assert_eq!(
        outcomes(3),
        vec![OnTime, OnTime, Late, Late, Late, Underrun, OnTime]
    );

    // Counting over the run: only the 7 bursts were written; reads of bursts 7.. within the
    // horizon find nothing.
    let count = |k: u32| AudioSink::new(T, k).unwrap().count(t0, &f, horizon);
    // Reads at t0 + (j + k)·T ≤ t0 + 20T: j ≤ 20 − k, so 21 − k reads.
    assert_eq!(
        count(1),
        SinkCount {
            reads: 20,
            underruns: 4 + 13,
            soft_misses: 4 + 13
        }
    );
    assert_eq!(
        count(2),
        SinkCount {
            reads: 19,
            underruns: 2 + 12,
            soft_misses: 4 + 12
        }
    );
    assert_eq!(
        count(3),
        SinkCount {
            reads: 18,
            underruns: 1 + 11,
            soft_misses: 4 + 11
        }
    );
    // A horizon that ends right after the written bursts: no missing bursts are read.
    let end = t0 + (6 + 3) * T;
    assert_eq!(
        AudioSink::new(T, 3).unwrap().count(t0, &f, end),
        SinkCount {
            reads: 7,
            underruns: 1,
            soft_misses: 4
        }
    );
    // Before the first read of a produced burst nothing is counted.
    assert_eq!(
        AudioSink::new(T, 3).unwrap().count(t0, &f, t0 + 2 * T),
        SinkCount::default()
    );
    assert_eq!(
        AudioSink::new(T, 3).unwrap().count(t0, &f, 0),
        SinkCount::default()
    );
    assert_eq!(AudioSink::new(T, 0), Err(AudioError::BufferBursts(0)));

    // Bursts of buffering each job needs: ⌈R/T⌉, at least 1.
    let need: Vec<u32> = (0..r.len())
        .map(|j| bursts_needed(T, t0 + j as u64 * T, f[j]))
        .collect();
    assert_eq!(need, vec![1, 1, 2, 2, 3, 4, 1]);
}

#[test]
fn sink_hard_deadline_is_b_over_s() {
    let clock = AudioClock::default();
    let s = AudioSink::new(clock.period_ns(), 2).unwrap();
    assert_eq!(s.soft_deadline_ns(), 1_333_333);
    assert_eq!(s.hard_deadline_ns(), 2_666_666);
    assert!((clock.latency_ms(2) - 2.666_666_7).abs() < 1e-6);
}

#[test]
fn per_voice_cost_saturates_the_cpu_at_210_voices() {
    let clock = AudioClock::default();
    let t = clock.period_ns();
    let c = VoiceCost::calibrated(t, 210, 0).unwrap();
    // 210 voices = 100 % of the big CPU at its top OPP, within the ns rounding of c.
    let full = c.cost_ns(210);
    assert!(
        full.abs_diff(t) <= 105,
        "210 voices cost {full} ns for a {t} ns period"
    );
    assert!((c.utilisation(210, t) - 1.0).abs() < 1e-4);
    // The paper's square wave: 2.38 % to 88 %.
    assert!((c.utilisation(5, t) * 100.0 - 2.38).abs() < 0.01);
    assert!((c.utilisation(185, t) * 100.0 - 88.1).abs() < 0.05);
    // With a per-callback base cost, c shrinks so that 210 voices still fill the period.
    let b = VoiceCost::calibrated(t, 210, 20_000).unwrap();
    assert!(b.cost_ns(210).abs_diff(t) <= 105);
    assert!(b.per_voice_ns < c.per_voice_ns);
    assert_eq!(b.cost_ns(0), 20_000);
    assert!(matches!(
        VoiceCost::calibrated(t, 210, t),
        Err(AudioError::BaseCost { .. })
    ));
    assert_eq!(
        VoiceCost::calibrated(t, 0, 0),
        Err(AudioError::SaturatingVoices(0))
    );
}

#[test]
fn square_and_random_patterns_are_seeded_and_reproducible() {
    let clock = AudioClock::default();
    let s = 1_000_000_000;
    let sq = VoiceSchedule::new(&VoicePattern::paper_square(), &clock, 3 * s, 60 * s).unwrap();
    assert_eq!(sq.jobs, 45_000);
    assert_eq!(sq.step_jobs, 2_250);
    assert_eq!(sq.voices.len(), 20);
    assert!(sq.voices.chunks(2).all(|p| p == [5, 185]));
    assert_eq!(sq.voices_of(0), 5);
    assert_eq!(sq.voices_of(2_249), 5);
    assert_eq!(sq.voices_of(2_250), 185);
    assert_eq!(sq.jobs_in_step(19), 2_250);

    let a = VoiceSchedule::new(&VoicePattern::paper_random(1), &clock, 3 * s, 60 * s).unwrap();
    let b = VoiceSchedule::new(&VoicePattern::paper_random(1), &clock, 3 * s, 60 * s).unwrap();
    let c = VoiceSchedule::new(&VoicePattern::paper_random(2), &clock, 3 * s, 60 * s).unwrap();
    assert_eq!(a, b, "same seed, same sequence");
    assert_ne!(a.voices, c.voices, "another seed, another sequence");
    assert!(a.voices.iter().all(|v| (5..=185).contains(v)));
    // Not degenerate: the 20 steps spread over the range.
    let (lo, hi) = (a.voices.iter().min().unwrap(), a.voices.iter().max().unwrap());
    assert!(hi - lo > 90, "{:?}", a.voices);
    // A shorter run draws a prefix of the same stream.
    let short = VoiceSchedule::new(&VoicePattern::paper_random(1), &clock, 3 * s, 9 * s).unwrap();
    assert_eq!(short.voices[..], a.voices[..3]);

    // Lists repeat; bad patterns are refused with the field named.
    let l = VoicePattern::List { voices: vec![1, 2] }.steps(5).unwrap();
    assert_eq!(l, vec![1, 2, 1, 2, 1]);
    let e = VoicePattern::Square { low: 9, high: 1 }.steps(2).unwrap_err();
    assert!(e.to_string().contains("low ≤ high"), "{e}");
    let e = VoicePattern::Random {
        min: 9,
        max: 1,
        seed: 0,
    }
    .steps(2)
    .unwrap_err();
    assert!(e.to_string().contains("min ≤ max"), "{e}");
    assert!(VoicePattern::List { voices: vec![] }.validate().is_err());
    assert!(matches!(
        VoiceSchedule::new(&VoicePattern::paper_square(), &clock, 3 * s, 1_000),
        Err(AudioError::Duration { .. })
    ));
}

#[test]
fn latency_mark_finds_the_smallest_glitch_free_buffer() {
    // A synthetic configuration: jobs whose worst response time is 6.2 periods glitch for
    // k ≤ 6 and are clean from k = 7 on.
    let t0 = 0;
    let mut r = vec![T / 3; 100];
    r[17] = 6 * T + T / 5;
    r[40] = 4 * T;
    let f = finishes(t0, &r);
    let mut calls = Vec::new();
    let m = latency_mark(64, |k| -> Result<u64, ()> {
        calls.push(k);
        // Judge only the bursts that were produced (the horizon-limited count adds the reads of
        // never-written bursts at the end, which a bigger buffer removes too).
        let s = AudioSink::new(T, k).unwrap();
        Ok((0..f.len() as u64)
            .filter(|&j| s.outcome(t0, j, f[j as usize]) == BurstOutcome::Underrun)
            .count() as u64)
    })
    .unwrap();
    assert_eq!(m.bursts, Some(7));
    // Doubling 1, 2, 4, 8, then bisection 6, 7.
    assert_eq!(calls, vec![1, 2, 4, 8, 6, 7]);
    assert_eq!(m.tried.last(), Some(&(7, 0)));
    // Agrees with the closed form max ⌈R/T⌉.
    let closed = (0..f.len()).map(|j| bursts_needed(T, j as u64 * T, f[j])).max();
    assert_eq!(closed, Some(7));

    // Glitch-free at once; never glitch-free within the limit; an oracle that fails.
    assert_eq!(latency_mark(10, |_| Ok::<u64, ()>(0)).unwrap().bursts, Some(1));
    let never = latency_mark(10, |_| Ok::<u64, ()>(3)).unwrap();
    assert_eq!(never.bursts, None);
    assert_eq!(
        never.tried.iter().map(|t| t.0).collect::<Vec<_>>(),
        vec![1, 2, 4, 8, 10]
    );
    assert_eq!(latency_mark(10, |_| Err::<u64, &str>("boom")), Err("boom"));
    // Every threshold in 1..=40 is found exactly.
    for want in 1..=40u32 {
        let got = latency_mark(40, |k| Ok::<u64, ()>(u64::from(k < want))).unwrap();
        assert_eq!(got.bursts, Some(want));
    }
}
