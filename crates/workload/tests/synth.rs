//! The synthesizer's public behaviour: determinism, seeds, bounds, release, voice accounting.

use pacer_workload::synth::{Synth, SynthError, MAX_VOICES_LIMIT, RELEASE_NS};

const RATE: u32 = 48_000;
const BURST: usize = 64;

/// Renders `seconds` of audio in 64-frame bursts, calling `at_burst(synth, burst_index)` first.
fn render(s: &mut Synth, seconds: f64, mut at_burst: impl FnMut(&mut Synth, usize)) -> Vec<f32> {
    let bursts = (seconds * f64::from(s.sample_rate_hz()) / BURST as f64) as usize;
    let mut out = vec![0.0; bursts * BURST * 2];
    for (i, chunk) in out.chunks_exact_mut(BURST * 2).enumerate() {
        at_burst(s, i);
        s.render(chunk);
    }
    out
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// A voice count that changes every 0.25 s, as a benchmark's workUnits pattern would.
fn pattern(s: &mut Synth, i: usize) {
    if i.is_multiple_of(187) {
        s.set_voices([4, 32, 0, 17, 64][(i / 187) % 5]);
    }
}

#[test]
fn same_inputs_give_bit_identical_output() {
    let mut a = Synth::new(RATE, 64, 7).unwrap();
    let mut b = Synth::new(RATE, 64, 7).unwrap();
    let x = render(&mut a, 2.0, pattern);
    let y = render(&mut b, 2.0, pattern);
    assert!(x.iter().any(|&v| v != 0.0));
    assert_eq!(bits(&x), bits(&y));
}

#[test]
fn burst_size_does_not_change_the_output() {
    let mut a = Synth::new(RATE, 16, 11).unwrap();
    let mut b = Synth::new(RATE, 16, 11).unwrap();
    a.set_voices(16);
    b.set_voices(16);
    let mut x = vec![0.0; 2 * 48_000];
    a.render(&mut x);
    let mut y = vec![0.0; 2 * 48_000];
    for chunk in y.chunks_mut(2 * 37) {
        b.render(chunk);
    }
    assert_eq!(bits(&x), bits(&y));
}

#[test]
fn different_seeds_give_different_output() {
    let mut a = Synth::new(RATE, 8, 1).unwrap();
    let mut b = Synth::new(RATE, 8, 2).unwrap();
    a.set_voices(8);
    b.set_voices(8);
    let x = render(&mut a, 0.5, |_, _| {});
    let y = render(&mut b, 0.5, |_, _| {});
    let differing = x.iter().zip(&y).filter(|(p, q)| p != q).count();
    assert!(
        differing > x.len() / 2,
        "only {differing} of {} samples differ",
        x.len()
    );
}

#[test]
fn output_is_finite_and_within_full_scale() {
    for seed in [0, 1, 42, 0xdead_beef] {
        for voices in [0, 1, 128] {
            let mut s = Synth::new(RATE, 128, seed).unwrap();
            s.set_voices(voices);
            let out = render(&mut s, 3.0, |_, _| {});
            let peak = out.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            assert!(
                out.iter().all(|x| x.is_finite() && (-1.0..=1.0).contains(x)),
                "seed {seed}"
            );
            if voices == 0 {
                assert_eq!(peak, 0.0);
            } else {
                // Audible (one voice of 128 is scaled by 1/√128), and the gain rule keeps the
                // full mix well off full scale on average.
                let rms = (out.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>() / out.len() as f64).sqrt();
                let clipped = out.iter().filter(|x| x.abs() > 0.99).count();
                eprintln!(
                    "seed {seed}, {voices} voices: peak {peak:.3}, rms {rms:.4}, {clipped} samples > 0.99"
                );
                assert!(peak > 0.01, "seed {seed}, {voices} voices: peak {peak}");
                assert!(
                    rms > 0.002 && rms < 0.5,
                    "seed {seed}, {voices} voices: rms {rms}"
                );
                assert!(
                    clipped < out.len() / 1000,
                    "seed {seed}: {clipped} samples near full scale"
                );
            }
        }
    }
}

#[test]
fn a_single_voice_at_max_voices_one_stays_within_full_scale() {
    for seed in 0..8 {
        let mut s = Synth::new(RATE, 1, seed).unwrap();
        s.set_voices(1);
        let out = render(&mut s, 2.0, |_, _| {});
        assert!(out.iter().all(|x| x.is_finite() && (-1.0..=1.0).contains(x)));
        assert!(out.iter().any(|x| x.abs() > 0.05));
    }
}

#[test]
fn released_voices_fade_then_stop() {
    let mut s = Synth::new(RATE, 32, 5).unwrap();
    s.set_voices(32);
    render(&mut s, 1.0, |_, _| {});
    assert_eq!(s.active_voices(), 32);
    s.set_voices(0);
    // Still costing work while fading.
    assert_eq!(s.active_voices(), 32);
    let release = s.release_frames();
    assert_eq!(release as u64, RELEASE_NS * u64::from(RATE) / 1_000_000_000);
    let mut fade = vec![0.0; 2 * release];
    s.render(&mut fade);
    // A fade, not a cut: the first frames still sound, the level falls to exactly 0.
    assert!(fade[..2 * 16].iter().any(|&x| x != 0.0));
    assert_eq!(&fade[fade.len() - 2..], &[0.0, 0.0]);
    assert_eq!(s.active_voices(), 0);
    let after = render(&mut s, 0.5, |_, _| {});
    assert!(after.iter().all(|&x| x == 0.0));
}

#[test]
fn fading_voices_end_within_the_release_whatever_the_burst() {
    let mut s = Synth::new(RATE, 16, 9).unwrap();
    s.set_voices(16);
    render(&mut s, 0.3, |_, _| {});
    s.set_voices(4);
    assert_eq!(s.active_voices(), 16);
    let mut buf = vec![0.0; 2 * BURST];
    let bursts = s.release_frames().div_ceil(BURST);
    for _ in 0..bursts {
        s.render(&mut buf);
    }
    assert_eq!(s.active_voices(), 4);
}

#[test]
fn voice_counts_are_clamped_and_revived() {
    let mut s = Synth::new(RATE, 8, 3).unwrap();
    assert_eq!(s.max_voices(), 8);
    assert_eq!(s.sample_rate_hz(), RATE);
    assert_eq!(s.active_voices(), 0);
    s.set_voices(100);
    assert_eq!(s.active_voices(), 8);
    s.set_voices(2);
    s.set_voices(8);
    assert_eq!(s.active_voices(), 8);
    let out = render(&mut s, 0.1, |_, _| {});
    assert!(out.iter().all(|x| x.is_finite()));
}

#[test]
fn notes_are_retriggered() {
    // Over 3 s every voice plays several notes: the output's envelope must rise again after
    // falling (a voice with a single note would decay to its sustain and stay there).
    let mut s = Synth::new(RATE, 1, 4).unwrap();
    s.set_voices(1);
    let out = render(&mut s, 3.0, |_, _| {});
    let block = 2 * 480; // 10 ms
    let rms: Vec<f64> = out
        .chunks(block)
        .map(|c| (c.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>() / c.len() as f64).sqrt())
        .collect();
    let quiet = rms.iter().filter(|&&r| r < 1e-4).count();
    assert!(
        quiet >= 3,
        "gaps between notes expected, found {quiet} quiet 10 ms blocks"
    );
    let rises = rms.windows(2).filter(|w| w[0] < 1e-4 && w[1] > 1e-3).count();
    assert!(rises >= 3, "re-triggered notes expected, found {rises}");
}

#[test]
fn odd_buffers_and_bad_arguments() {
    let mut s = Synth::new(RATE, 2, 0).unwrap();
    s.set_voices(2);
    let mut buf = vec![9.0; 7];
    s.render(&mut buf);
    assert_eq!(buf[6], 0.0);
    s.render(&mut []);
    assert_eq!(Synth::new(0, 4, 0).unwrap_err(), SynthError::SampleRate(0));
    assert_eq!(Synth::new(RATE, 0, 0).unwrap_err(), SynthError::MaxVoices(0));
    assert!(Synth::new(RATE, MAX_VOICES_LIMIT + 1, 0).is_err());
    assert!(Synth::new(1_000_000, 4, 0).is_err());
}
