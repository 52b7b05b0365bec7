//! The audio manager's contract: the mixer's sums, saturation and silence padding; format
//! round trips; the null devices' timing against the Fig. 3 model (`AudioSink::count`); WAV
//! files written, read back and never written through a link or over a file before success;
//! file capture checks; ALSA's `null` PCM; and no allocation on any per-release path.

use std::path::Path;

use pacer_runtime::audio::format::{from_f32, sample_f32, to_f32};
use pacer_runtime::audio::mixer::{AddOutcome, Mixer};
use pacer_runtime::audio::{
    check_session, AudioError, AudioManager, AudioOptions, Backend, BurstOutcome, Delivery, ReadOutcome,
    SizeMismatch, TEST_TONE_AMPLITUDE, TEST_TONE_HZ,
};
use pacer_runtime::manifest::{AudioSession, Direction, SampleFormat};
use pacer_workload::audio::AudioSink;

#[global_allocator]
static ALLOC: pacer_runtime::guard::GuardedAlloc = pacer_runtime::guard::GuardedAlloc;

/// Allocations made by this thread while `f` runs, counted by the runtime's own allocation
/// guard as on a component's real-time path (per thread: parallel tests do not see each other).
fn allocations_in<R>(f: impl FnOnce() -> R) -> (u64, R) {
    let tally = pacer_runtime::guard::Tally::new();
    let r = {
        let _section = pacer_runtime::guard::enter(&tally, pacer_runtime::guard::Section::RealTime);
        f()
    };
    (tally.report().rt_allocations, r)
}

fn session(
    name: &str,
    direction: Direction,
    format: SampleFormat,
    channels: u32,
    burst: u32,
) -> AudioSession {
    AudioSession {
        name: name.into(),
        direction,
        rate: 48_000,
        channels,
        burst_frames: burst,
        format,
        component: "c".into(),
    }
}

fn s16(v: &[i16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn s32(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn as_i16(b: &[u8]) -> Vec<i16> {
    b.chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect()
}

fn as_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn the_counting_allocator_sees_allocations() {
    let (n, v) = allocations_in(|| vec![1u8; 100]);
    assert!(n >= 1 && v.len() == 100);
}

// ---------------------------------------------------------------------------------------------
// Mixer

#[test]
fn the_mixer_sums_and_saturates_s16_in_any_order() {
    let a = s16(&[1000, 30000, -30000, -1]);
    let b = s16(&[2000, 10000, -10000, 0]);
    let c = s16(&[0, -10000, 5000, 1]);
    let mut m = Mixer::with_size(SampleFormat::S16, 4);
    let mut out = vec![0xAA; 8];
    m.begin();
    assert_eq!(m.add(&a), AddOutcome::Mixed);
    assert_eq!(m.add(&b), AddOutcome::Mixed);
    let o = m.finish(&mut out).unwrap();
    assert_eq!(as_i16(&out), [3000, 32767, -32768, -1]);
    assert_eq!((o.streams, o.clipped, o.silence), (2, 2, false));

    // Saturation happens once, after the exact sum: 30000 + 10000 − 10000 is not clipped.
    let mut first = vec![0; 8];
    let mut second = vec![0; 8];
    for (order, out) in [([&a, &b, &c], &mut first), ([&c, &b, &a], &mut second)] {
        m.begin();
        for msg in order {
            m.add(msg);
        }
        let o = m.finish(out).unwrap();
        assert_eq!(o.clipped, 1);
    }
    assert_eq!(first, second);
    assert_eq!(as_i16(&first), [3000, 30000, -32768, 0]);
    assert_eq!(m.stats().clipped_samples, 4);
    assert_eq!(m.stats().releases, 3);
}

#[test]
fn the_mixer_saturates_s32_and_clips_f32() {
    let mut m = Mixer::with_size(SampleFormat::S32, 3);
    let mut out = vec![0; 12];
    m.add(&s32(&[i32::MAX, i32::MIN, 7]));
    m.add(&s32(&[1, -1, -7]));
    let o = m.finish(&mut out).unwrap();
    let got: Vec<i32> = out
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, [i32::MAX, i32::MIN, 0]);
    assert_eq!(o.clipped, 2);

    let mut m = Mixer::with_size(SampleFormat::F32, 4);
    let mut out = vec![0; 16];
    m.add(&f32s(&[0.75, -0.75, 0.25, f32::NAN]));
    m.add(&f32s(&[0.5, -0.5, 0.25, 0.0]));
    let o = m.finish(&mut out).unwrap();
    assert_eq!(as_f32(&out), [1.0, -1.0, 0.5, 0.0]);
    assert_eq!(o.clipped, 3, "two past full scale and one NaN");
}

#[test]
fn the_mixer_pads_silence_on_underrun_and_counts_it() {
    let s = session("p", Direction::Playback, SampleFormat::S16, 2, 480);
    let mut m = Mixer::new(&s).unwrap();
    let bb = m.burst_bytes();
    assert_eq!(bb, 480 * 2 * 2);
    let mut out = vec![0xAA; bb];

    // Nothing delivered: a burst of silence, counted as a source underrun.
    m.begin();
    let o = m.finish(&mut out).unwrap();
    assert!(o.silence && o.streams == 0);
    assert!(out.iter().all(|&b| b == 0));
    assert_eq!(m.stats().silent_releases, 1);

    // Only a message longer than a burst: ignored, so silence again.
    out.fill(0xAA);
    m.begin();
    assert_eq!(
        m.add(&vec![1; bb + 2]),
        AddOutcome::Rejected { found_bytes: bb + 2 }
    );
    let o = m.finish(&mut out).unwrap();
    assert!(o.silence && o.rejected == 1);
    assert!(out.iter().all(|&b| b == 0));
    assert_eq!(m.stats().silent_releases, 2);
    assert_eq!(m.stats().rejected_messages, 1);

    // A short message: mixed as far as it goes, the rest silence, counted as padded.
    out.fill(0xAA);
    m.begin();
    let half = s16(&vec![100; 480]);
    assert_eq!(
        m.add(&half),
        AddOutcome::Padded {
            missing_bytes: bb / 2
        }
    );
    let o = m.finish(&mut out).unwrap();
    assert!(!o.silence && o.padded == 1 && o.streams == 1);
    let v = as_i16(&out);
    assert!(v[..480].iter().all(|&x| x == 100) && v[480..].iter().all(|&x| x == 0));
    assert_eq!(m.stats().short_messages, 1);
    assert_eq!(m.stats().silent_releases, 2);

    // A wrong output buffer is refused and the release kept.
    m.add(&half);
    let mut small = vec![0; 10];
    assert_eq!(
        m.finish(&mut small),
        Err(SizeMismatch {
            expected: bb,
            found: 10
        })
    );
    let o = m.finish(&mut out).unwrap();
    assert_eq!(o.streams, 1);
}

// ---------------------------------------------------------------------------------------------
// Formats

#[test]
fn s16_round_trips_exactly_through_f32() {
    let all: Vec<i16> = (i16::MIN..=i16::MAX).collect();
    let bytes = s16(&all);
    let mut f = vec![0.0; all.len()];
    assert_eq!(to_f32(SampleFormat::S16, &bytes, &mut f), all.len());
    assert_eq!(f[0], -1.0);
    assert!(f.iter().all(|x| (-1.0..1.0).contains(x)));
    let mut back = vec![0; bytes.len()];
    assert_eq!(from_f32(SampleFormat::S16, &f, &mut back), 0);
    assert_eq!(back, bytes);
}

#[test]
fn s32_and_f32_round_trip_and_out_of_range_floats_clip() {
    // f32 holds 24 significant bits: s32 values with 24 significant bits round-trip exactly.
    let vals: Vec<i32> = (-128..128).map(|i| i * (1 << 24) + (i & 0xFF) * 256).collect();
    let vals: Vec<i32> = vals.into_iter().chain([i32::MIN, 0, 256, -256]).collect();
    let bytes = s32(&vals);
    let mut f = vec![0.0; vals.len()];
    to_f32(SampleFormat::S32, &bytes, &mut f);
    let mut back = vec![0; bytes.len()];
    assert_eq!(from_f32(SampleFormat::S32, &f, &mut back), 0);
    assert_eq!(back, bytes);

    let floats = [-1.0, -0.5, 0.0, 0.123_456_7, 0.999_999];
    let fb = f32s(&floats);
    let mut f = [0.0; 5];
    to_f32(SampleFormat::F32, &fb, &mut f);
    assert_eq!(f, floats);
    let mut back = vec![0; fb.len()];
    assert_eq!(from_f32(SampleFormat::F32, &f, &mut back), 0);
    assert_eq!(back, fb);

    // Full scale +1.0 does not fit a two's-complement integer: clipped to MAX and counted.
    let mut out = vec![0; 8];
    assert_eq!(from_f32(SampleFormat::S16, &[1.0, 1.5, -1.0, -2.0], &mut out), 3);
    assert_eq!(as_i16(&out), [i16::MAX, i16::MAX, i16::MIN, i16::MIN]);
    assert_eq!(sample_f32(SampleFormat::S16, &out, 2), -1.0);
}

// ---------------------------------------------------------------------------------------------
// Null devices

/// Deterministic write times around the model's thresholds.
fn finishes(t0: u64, t: u64, k: u64, n: u64) -> Vec<u64> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|j| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let release = t0 + j * t;
            match x % 6 {
                0 => release + t / 3,     // on time
                1 => release + t,         // exactly the soft deadline: on time
                2 => release + t + 1,     // late
                3 => release + k * t,     // exactly the read: in time
                4 => release + k * t + 1, // underrun
                _ => release + 3 * k * t, // far too late
            }
        })
        .collect()
}

#[test]
fn null_playback_timing_and_counts_equal_the_fig3_model() {
    for k in [1u32, 2, 4] {
        let s = session("out", Direction::Playback, SampleFormat::S16, 2, 480);
        let t0 = 5_000_000_123;
        let opts = AudioOptions {
            device_bursts: k,
            ..AudioOptions::default()
        };
        let mut m = AudioManager::open_with(std::slice::from_ref(&s), &Backend::Null, t0, &opts).unwrap();
        let mut h = m.take_playback("out").unwrap();
        let t = h.period_ns();
        assert_eq!(t, 10_000_000);
        let model = AudioSink::new(t, k).unwrap();
        let fin = finishes(t0, t, u64::from(k), 300);
        let burst = vec![0; h.burst_bytes()];
        let mut kinds = [0; 3];
        for (j, &f) in fin.iter().enumerate() {
            let o = h.play(f, &burst);
            assert_eq!(o.burst, j as u64);
            assert_eq!(o.play_at_ns, t0 + (j as u64 + u64::from(k)) * t);
            assert_eq!(o.outcome, model.outcome(t0, j as u64, f));
            let expect = if o.outcome == BurstOutcome::Underrun {
                Delivery::Discarded
            } else {
                Delivery::Whole
            };
            assert_eq!(o.delivery, expect);
            kinds[o.outcome as usize] += 1;
        }
        // With k = 1 the soft and hard deadlines coincide: nothing is late without an underrun.
        let exercised = if k == 1 { [true, false, true] } else { [true; 3] };
        for (n, e) in kinds.iter().zip(exercised) {
            assert_eq!(*n > 10, e, "outcomes exercised with k = {k}: {kinds:?}");
        }
        let r = h.finish();
        let horizon = t0 + (fin.len() as u64 - 1 + u64::from(k)) * t;
        let c = model.count(t0, &fin, horizon);
        assert_eq!(r.sink, Some(c), "k = {k}");
        assert_eq!(r.underruns, c.underruns);
        assert_eq!(r.late + r.underruns, c.soft_misses);
        assert_eq!(r.bursts, 300);
        assert!(m.finish().is_empty());
    }
}

#[test]
fn null_capture_serves_the_test_signal_on_its_clock() {
    let s = session("mic", Direction::Record, SampleFormat::F32, 2, 480);
    let t0 = 1_000;
    let mut m = AudioManager::open(std::slice::from_ref(&s), &Backend::Null, t0).unwrap();
    let mut h = m.take_record("mic").unwrap();
    let t = h.period_ns();
    let mut buf = vec![0xAA; h.burst_bytes()];

    assert_eq!(
        h.record(t0 + t - 1, &mut buf),
        ReadOutcome::NotYet {
            burst: 0,
            available_at_ns: t0 + t
        }
    );
    assert!(buf.iter().all(|&b| b == 0), "silence while nothing is available");
    assert_eq!(
        h.record(t0 + t, &mut buf),
        ReadOutcome::Fresh {
            burst: 0,
            captured_at_ns: t0 + t,
            backlog: 0
        }
    );
    let v = as_f32(&buf);
    for (i, fr) in v.chunks_exact(2).enumerate() {
        for (c, &x) in fr.iter().enumerate() {
            let f = f64::from(TEST_TONE_HZ) * (c as f64 + 1.0);
            let want = TEST_TONE_AMPLITUDE * (std::f64::consts::TAU * f * i as f64 / 48_000.0).sin();
            assert!(
                (f64::from(x) - want).abs() < 1e-6,
                "frame {i} channel {c}: {x} vs {want}"
            );
        }
    }
    // One burst behind, within the buffer of 2: fresh, with a backlog.
    assert_eq!(
        h.record(t0 + 3 * t, &mut buf),
        ReadOutcome::Fresh {
            burst: 1,
            captured_at_ns: t0 + 2 * t,
            backlog: 1
        }
    );
    // Far behind: bursts 2..=6 were overwritten (at t0 + 10T the device holds 8 and 9).
    assert_eq!(
        h.record(t0 + 10 * t, &mut buf),
        ReadOutcome::Overrun {
            burst: 8,
            captured_at_ns: t0 + 9 * t,
            dropped: 6
        }
    );
    // Burst 8 of the signal, continuous: frame 8·480 of channel 0.
    let x = as_f32(&buf)[0];
    let want = TEST_TONE_AMPLITUDE * (std::f64::consts::TAU * 440.0 * (8.0 * 480.0) / 48_000.0).sin();
    assert!((f64::from(x) - want).abs() < 1e-6);
    assert!(matches!(
        h.record(t0 + 10 * t, &mut buf),
        ReadOutcome::Fresh { burst: 9, .. }
    ));
    let mut small = [0u8; 4];
    assert!(matches!(
        h.record(t0 + 20 * t, &mut small),
        ReadOutcome::WrongSize { .. }
    ));
    let r = h.finish();
    assert_eq!(
        (r.bursts, r.overruns, r.dropped_bursts, r.not_ready, r.wrong_size),
        (4, 1, 6, 1, 1)
    );
}

// ---------------------------------------------------------------------------------------------
// File backend

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn a_wav_is_written_with_the_right_header_and_reads_back_equal() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::File(dir.path().to_path_buf());
    let s = session("loop", Direction::Playback, SampleFormat::S16, 2, 480);
    let t0 = 0;
    let mut m = AudioManager::open(std::slice::from_ref(&s), &backend, t0).unwrap();
    let mut h = m.take_playback("loop").unwrap();
    let t = h.period_ns();
    let bb = h.burst_bytes();
    let bursts: Vec<Vec<u8>> = (0..6)
        .map(|j| s16(&(0..960).map(|i| (j * 1000 + i) as i16).collect::<Vec<_>>()))
        .collect();
    let mut expected = Vec::new();
    for (j, b) in bursts.iter().enumerate() {
        // Burst 3 is an underrun: the device (and the file) get silence in its place.
        let now = if j == 3 {
            t0 + (j as u64 + 3) * t
        } else {
            t0 + j as u64 * t + 1
        };
        let o = h.play(now, b);
        if j == 3 {
            assert_eq!(
                (o.outcome, o.delivery),
                (BurstOutcome::Underrun, Delivery::Discarded)
            );
            expected.extend(vec![0; bb]);
        } else {
            assert_eq!(o.delivery, Delivery::Whole);
            expected.extend(b);
        }
    }
    let r = h.finish();
    let f = r.file.clone().unwrap();
    assert!(f.complete, "{f:?}");
    assert_eq!((f.bursts, f.frames, f.dropped_bursts), (6, 2880, 0));
    let path = dir.path().join("loop.wav");
    assert_eq!(f.path, path.display().to_string());
    assert!(temp_files(dir.path()).is_empty());

    let w = std::fs::read(&path).unwrap();
    assert_eq!(&w[0..4], b"RIFF");
    assert_eq!(u32_at(&w, 4) as usize, w.len() - 8);
    assert_eq!(&w[8..16], b"WAVEfmt ");
    assert_eq!(u32_at(&w, 16), 16);
    assert_eq!(u16_at(&w, 20), 1, "PCM");
    assert_eq!(u16_at(&w, 22), 2, "channels");
    assert_eq!(u32_at(&w, 24), 48_000);
    assert_eq!(u32_at(&w, 28), 48_000 * 4, "byte rate");
    assert_eq!(u16_at(&w, 32), 4, "block align");
    assert_eq!(u16_at(&w, 34), 16, "bits");
    assert_eq!(&w[36..40], b"data");
    assert_eq!(u32_at(&w, 40) as usize, expected.len());
    assert_eq!(&w[44..], &expected[..]);

    // The same file as a capture device: the same bursts, then from the start again.
    let rec = session("loop", Direction::Record, SampleFormat::S16, 2, 480);
    let mut m = AudioManager::open(std::slice::from_ref(&rec), &backend, t0).unwrap();
    let mut h = m.take_record("loop").unwrap();
    let mut buf = vec![0; bb];
    for j in 0..8u64 {
        let o = h.record(t0 + (j + 1) * t, &mut buf);
        assert!(matches!(o, ReadOutcome::Fresh { burst, .. } if burst == j));
        let k = (j % 6) as usize;
        assert_eq!(buf, expected[k * bb..(k + 1) * bb], "burst {j}");
    }
    assert_eq!(h.finish().source_file, Some(path.display().to_string()));
}

#[test]
fn float_and_s32_wavs_have_their_headers() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::File(dir.path().to_path_buf());
    let sessions = [
        session("f", Direction::Playback, SampleFormat::F32, 1, 441),
        session("i", Direction::Playback, SampleFormat::S32, 3, 480),
    ];
    let mut m = AudioManager::open(&sessions, &backend, 0).unwrap();
    for name in ["f", "i"] {
        let mut h = m.take_playback(name).unwrap();
        for j in 0..3 {
            h.mixer().begin();
            let msg: Vec<u8> = (0..h.burst_bytes()).map(|i| (i % 7) as u8 * 8).collect();
            h.mixer().add(&msg);
            h.play_mixed(j * h.period_ns());
        }
        let r = h.finish();
        assert!(r.file.as_ref().unwrap().complete, "{r:?}");
    }
    let f = std::fs::read(dir.path().join("f.wav")).unwrap();
    assert_eq!(u32_at(&f, 16), 18, "float fmt chunk has cbSize");
    assert_eq!(u16_at(&f, 20), 3, "IEEE float");
    assert_eq!(u16_at(&f, 34), 32);
    assert_eq!(u16_at(&f, 36), 0, "cbSize");
    assert_eq!(&f[38..42], b"fact");
    assert_eq!(u32_at(&f, 46), 3 * 441, "frames");
    assert_eq!(&f[50..54], b"data");
    assert_eq!(u32_at(&f, 54), 3 * 441 * 4);
    assert_eq!(f.len(), 58 + 3 * 441 * 4);
    let i = std::fs::read(dir.path().join("i.wav")).unwrap();
    assert_eq!(
        (u16_at(&i, 20), u16_at(&i, 22), u16_at(&i, 32), u16_at(&i, 34)),
        (1, 3, 12, 32)
    );
    assert_eq!(u32_at(&i, 40), 3 * 480 * 12);
}

#[test]
fn an_existing_file_is_replaced_only_at_finish_and_a_symlink_never() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::File(dir.path().to_path_buf());
    let s = session("out", Direction::Playback, SampleFormat::S16, 1, 480);
    let target = dir.path().join("out.wav");

    // A symbolic link (even to a regular file) is refused, and the file it points to kept.
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    std::os::unix::fs::symlink(&victim, &target).unwrap();
    let e = AudioManager::open(std::slice::from_ref(&s), &backend, 0)
        .err()
        .unwrap();
    assert!(matches!(e, AudioError::Refused { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("symbolic link") && msg.contains("out.wav") && msg.contains("\"out\""),
        "{msg}"
    );
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(temp_files(dir.path()).is_empty());
    std::fs::remove_file(&target).unwrap();

    // A regular file stays as it was while the run writes its temporary file…
    std::fs::write(&target, b"old").unwrap();
    let mut m = AudioManager::open(std::slice::from_ref(&s), &backend, 0).unwrap();
    let mut h = m.take_playback("out").unwrap();
    h.play(0, &vec![1; h.burst_bytes()]);
    assert_eq!(std::fs::read(&target).unwrap(), b"old");
    assert_eq!(temp_files(dir.path()).len(), 1);
    // …and a run abandoned without finish leaves it so, with no temporary file.
    drop(h);
    assert_eq!(std::fs::read(&target).unwrap(), b"old");
    assert!(temp_files(dir.path()).is_empty());

    // Finishing replaces it, by rename.
    let mut m = AudioManager::open(std::slice::from_ref(&s), &backend, 0).unwrap();
    let mut h = m.take_playback("out").unwrap();
    h.play(0, &vec![1; h.burst_bytes()]);
    let r = h.finish();
    assert!(r.file.unwrap().complete);
    let w = std::fs::read(&target).unwrap();
    assert_eq!(&w[0..4], b"RIFF");
    assert_eq!(w.len(), 44 + 960);
    assert!(temp_files(dir.path()).is_empty());

    // A directory in the way is refused too.
    let d = session("sub", Direction::Playback, SampleFormat::S16, 1, 480);
    std::fs::create_dir(dir.path().join("sub.wav")).unwrap();
    let e = AudioManager::open(std::slice::from_ref(&d), &backend, 0)
        .err()
        .unwrap();
    assert!(e.to_string().contains("a directory"), "{e}");
}

#[test]
fn a_full_writer_queue_drops_bursts_without_blocking_and_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::File(dir.path().to_path_buf());
    let s = session("q", Direction::Playback, SampleFormat::S16, 2, 480);
    let opts = AudioOptions {
        file_queue_bursts: Some(1),
        ..AudioOptions::default()
    };
    let mut m = AudioManager::open_with(std::slice::from_ref(&s), &backend, 0, &opts).unwrap();
    let mut h = m.take_playback("q").unwrap();
    let burst = vec![3; h.burst_bytes()];
    let mut full = 0;
    for _ in 0..200 {
        if h.play(0, &burst).delivery == Delivery::QueueFull {
            full += 1;
        }
    }
    let r = h.finish();
    let f = r.file.unwrap();
    assert!(full > 0 && f.complete);
    assert_eq!(r.dropped_writes, full);
    assert_eq!(f.bursts + f.dropped_bursts, 200);
}

fn write_wav(path: &Path, tag: u16, channels: u16, rate: u32, bits: u16, data: &[u8]) {
    let block = channels * bits / 8;
    let mut w = Vec::new();
    w.extend(b"RIFF");
    w.extend((36 + data.len() as u32).to_le_bytes());
    w.extend(b"WAVEfmt ");
    w.extend(16u32.to_le_bytes());
    w.extend(tag.to_le_bytes());
    w.extend(channels.to_le_bytes());
    w.extend(rate.to_le_bytes());
    w.extend((rate * u32::from(block)).to_le_bytes());
    w.extend(block.to_le_bytes());
    w.extend(bits.to_le_bytes());
    w.extend(b"data");
    w.extend((data.len() as u32).to_le_bytes());
    w.extend(data);
    std::fs::write(path, w).unwrap();
}

#[test]
fn file_capture_refuses_a_wav_that_does_not_match_and_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::File(dir.path().to_path_buf());
    let s = session("mic", Direction::Record, SampleFormat::S16, 2, 480);
    let path = dir.path().join("mic.wav");
    let data = vec![0; 4 * 100];
    for (tag, ch, rate, bits, field, found) in [
        (1, 2, 44_100, 16, "rate", "44100 Hz"),
        (1, 1, 48_000, 16, "channels", "found 1"),
        (3, 2, 48_000, 32, "format", "f32"),
        (1, 2, 48_000, 8, "format", "0x0001 with 8 bits"),
    ] {
        write_wav(&path, tag, ch, rate, bits, &data);
        let e = AudioManager::open(std::slice::from_ref(&s), &backend, 0)
            .err()
            .unwrap();
        let msg = e.to_string();
        assert!(matches!(e, AudioError::WavMismatch { .. }), "{msg}");
        assert!(
            msg.contains(&path.display().to_string()) && msg.contains(field) && msg.contains(found),
            "{msg}"
        );
    }
    std::fs::write(&path, b"not a wav").unwrap();
    let msg = AudioManager::open(std::slice::from_ref(&s), &backend, 0)
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("RIFF") && msg.contains("mic.wav"), "{msg}");
    std::fs::remove_file(&path).unwrap();
    let msg = AudioManager::open(std::slice::from_ref(&s), &backend, 0)
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("mic.wav") && msg.contains("No such file"), "{msg}");
    // A short file loops: 100 frames, bursts of 480.
    write_wav(&path, 1, 2, 48_000, 16, &s16(&(0..200).collect::<Vec<i16>>()));
    let mut m = AudioManager::open(std::slice::from_ref(&s), &backend, 0).unwrap();
    let mut h = m.take_record("mic").unwrap();
    let mut buf = vec![0; h.burst_bytes()];
    let first: Vec<i16> = (0..960).map(|i| (i % 200) as i16).collect();
    h.record(h.period_ns() * 2, &mut buf);
    assert_eq!(as_i16(&buf), first, "burst 0 loops over the 100 frames");
    h.record(h.period_ns() * 2, &mut buf);
    let v = as_i16(&buf);
    let want: Vec<i16> = (0..960).map(|i| ((480 * 2 + i) % 200) as i16).collect();
    assert_eq!(v, want, "burst 1 starts at frame 480 mod 100");
}

// ---------------------------------------------------------------------------------------------
// Checks and the manager

#[test]
fn bad_sessions_are_refused_naming_the_session_and_field() {
    let mut s = session("tone", Direction::Playback, SampleFormat::S16, 2, 480);
    s.rate = 44_000;
    let msg = check_session(&s).unwrap_err().to_string();
    assert!(
        msg.contains("\"tone\"") && msg.contains("`rate`") && msg.contains("44000 Hz"),
        "{msg}"
    );
    s.rate = 48_000;
    s.channels = 9;
    let msg = check_session(&s).unwrap_err().to_string();
    assert!(
        msg.contains("`channels`") && msg.contains("1 to 8") && msg.contains("found 9"),
        "{msg}"
    );
    s.channels = 2;
    s.burst_frames = 4;
    let msg = check_session(&s).unwrap_err().to_string();
    assert!(
        msg.contains("`burst_frames`") && msg.contains("100 µs") && msg.contains("4 frames"),
        "{msg}"
    );
    s.burst_frames = 480;
    assert!(check_session(&s).is_ok());

    let mut f = s.clone();
    f.name = "../x".into();
    let msg = AudioManager::open(&[f], &Backend::File("/tmp".into()), 0)
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("`name`") && msg.contains("../x"), "{msg}");

    let msg = AudioManager::open(&[s.clone(), s.clone()], &Backend::Null, 0)
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("\"tone\" twice"), "{msg}");

    let mut m = AudioManager::open(std::slice::from_ref(&s), &Backend::Null, 0).unwrap();
    let msg = m.take_record("tone").err().unwrap().to_string();
    assert!(msg.contains("no record audio session named \"tone\""), "{msg}");
    let msg = m.take_playback("nope").err().unwrap().to_string();
    assert!(msg.contains("\"nope\"") && msg.contains("\"tone\""), "{msg}");
    let h = m.take_playback("tone").unwrap();
    assert!(matches!(m.take_playback("tone"), Err(AudioError::Taken { .. })));
    drop(h);
}

#[test]
fn alsa_null_device_records_on_the_model_clock() {
    let s = session("mic", Direction::Record, SampleFormat::S32, 2, 480);
    let backend = Backend::Alsa {
        device: "null".into(),
    };
    let mut m = AudioManager::open(std::slice::from_ref(&s), &backend, 0).unwrap();
    let mut h = m.take_record("mic").unwrap();
    let t = h.period_ns();
    let mut buf = vec![0; h.burst_bytes()];
    assert!(matches!(h.record(t - 1, &mut buf), ReadOutcome::NotYet { .. }));
    for j in 0..20 {
        let o = h.record((j + 1) * t, &mut buf);
        assert!(
            matches!(o, ReadOutcome::Fresh { burst, .. } if burst == j),
            "{o:?}"
        );
    }
    let r = h.finish();
    let a = r.alsa_capture.unwrap();
    assert_eq!((a.rate, a.period_frames, a.errors), (48_000, 480, 0), "{a:?}");
    assert_eq!(a.frames_read, 20 * 480, "{a:?}");
    assert_eq!((r.bursts, r.not_ready), (20, 1));

    let mut s = s;
    s.name = "gone".into();
    let e = AudioManager::open(
        &[s],
        &Backend::Alsa {
            device: "hw:97,0".into(),
        },
        0,
    )
    .err()
    .unwrap();
    let msg = e.to_string();
    assert!(matches!(e, AudioError::AlsaCapture { .. }));
    assert!(msg.contains("\"gone\"") && msg.contains("hw:97,0"), "{msg}");
}

#[test]
fn alsa_null_device_plays_20_bursts() {
    for (format, channels) in [(SampleFormat::F32, 2), (SampleFormat::S16, 1)] {
        let s = session("spk", Direction::Playback, format, channels, 480);
        let backend = Backend::Alsa {
            device: "null".into(),
        };
        let mut m = AudioManager::open(std::slice::from_ref(&s), &backend, 0).unwrap();
        let mut h = m.take_playback("spk").unwrap();
        let t = h.period_ns();
        let burst = vec![0x10; h.burst_bytes()];
        for j in 0..20 {
            let o = h.play(j * t, &burst);
            assert_eq!((o.outcome, o.delivery), (BurstOutcome::OnTime, Delivery::Whole));
        }
        let r = h.finish();
        let a = r.alsa.unwrap();
        assert_eq!((a.rate, a.period_frames), (48_000, 480));
        assert_eq!(
            a.frames_written,
            (20 + 2) * 480,
            "20 bursts after 2 primed: {a:?}"
        );
        assert_eq!((a.xruns, a.dropped_bursts, a.errors), (0, 0, 0));
        assert!(!a.clocked);
        assert_eq!(r.bursts, 20);
    }
    let s = session("wide", Direction::Playback, SampleFormat::S16, 4, 480);
    let msg = AudioManager::open(
        &[s],
        &Backend::Alsa {
            device: "null".into(),
        },
        0,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(msg.contains("`channels`") && msg.contains("found 4"), "{msg}");
}

// ---------------------------------------------------------------------------------------------
// No allocation per release

#[test]
fn no_allocation_on_the_per_release_paths() {
    let dir = tempfile::tempdir().unwrap();
    for backend in [
        Backend::Null,
        Backend::File(dir.path().to_path_buf()),
        Backend::Alsa {
            device: "null".into(),
        },
    ] {
        let sessions = [
            session("out", Direction::Playback, SampleFormat::S16, 2, 480),
            session("f", Direction::Playback, SampleFormat::F32, 2, 480),
            session("in", Direction::Record, SampleFormat::S32, 2, 480),
        ];
        if let Backend::File(d) = &backend {
            write_wav(&d.join("in.wav"), 1, 2, 48_000, 32, &vec![1; 8 * 1000]);
        }
        let mut m = AudioManager::open(&sessions, &backend, 0).unwrap();
        let mut out = m.take_playback("out").unwrap();
        let mut f = m.take_playback("f").unwrap();
        let mut mic = m.take_record("in").unwrap();
        let t = out.period_ns();
        let a = vec![7u8; out.burst_bytes()];
        let short = vec![9u8; out.burst_bytes() / 2];
        let long = vec![9u8; out.burst_bytes() + 2];
        let fa = f32s(&vec![0.9; 960]);
        let mut rec = vec![0u8; 480 * 8];
        let (n, ()) = allocations_in(|| {
            for j in 0..100u64 {
                let now = j * t + (j % 5) * t;
                let mixer = out.mixer();
                mixer.begin();
                mixer.add(&a);
                mixer.add(&short);
                mixer.add(&long);
                out.play_mixed(now);
                out.play(now, &short);
                out.play(now, &long);
                f.mixer().begin();
                f.mixer().add(&fa);
                f.mixer().add(&fa);
                f.play_mixed(now);
                mic.record(now, &mut rec);
                mic.record(now + 20 * t, &mut rec);
                mic.record(now, &mut rec[..4]);
            }
        });
        assert_eq!(n, 0, "{} backend allocated", backend.name());
        let r = out.finish();
        assert_eq!(r.bursts, 300);
        assert!(f.finish().clipped_samples > 0);
        assert!(mic.finish().overruns > 0);
    }
}
