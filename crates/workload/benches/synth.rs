//! Cost of one synthesizer callback: one 64-frame burst at 48 kHz (the audio paper's low-latency
//! burst, 1.333 ms of audio) with 1, 16, 64 and 128 voices. Each case warms up for 1 s of audio
//! first, so every voice is mid-note and the envelopes and filters are in steady state.
//! ns per voice per burst = (time(128) − time(1)) / 127; results: docs/BENCHMARKS.md.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pacer_workload::synth::Synth;

const RATE: u32 = 48_000;
const BURST: usize = 64;

fn render_burst(c: &mut Criterion) {
    let mut group = c.benchmark_group("synth_render_64_frames");
    for voices in [1usize, 16, 64, 128] {
        let mut synth = Synth::new(RATE, 128, 1).expect("valid synth");
        synth.set_voices(voices);
        let mut buf = vec![0.0f32; 2 * BURST];
        for _ in 0..RATE as usize / BURST {
            synth.render(&mut buf);
        }
        group.throughput(Throughput::Elements(voices as u64));
        group.bench_with_input(BenchmarkId::from_parameter(voices), &voices, |b, _| {
            b.iter(|| {
                synth.render(black_box(&mut buf));
            })
        });
    }
    group.finish();
}

criterion_group!(benches, render_burst);
criterion_main!(benches);
