//! The executor on plain threads (no privilege needed): releases, message-released receivers,
//! channel accounting, per-release arenas, the allocation guard, early stop. The real-time mode
//! (policies taken and given back, SCHED_DEADLINE bandwidth back in `total_bw`) is tested as
//! root through `pacer runtime run` in crates/cli/tests/runtime.rs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pacer_runtime::arena::{Arena, ArenaFull};
use pacer_runtime::exec::{self, App, Component, Init, Mode, Release, RunOptions};
use pacer_runtime::guard::GuardedAlloc;
use pacer_runtime::manifest::Manifest;

#[global_allocator]
static ALLOC: GuardedAlloc = GuardedAlloc;

fn manifest(text: &str) -> Manifest {
    Manifest::from_toml(text, "test.toml").expect("valid manifest")
}

const PIPE: &str = r#"
[app]
name = "pipe"

[[component]]
name = "src"
kind = "periodic"
period = "5ms"
wcet = "1ms"
priority = 50
cpus = [0]
per_release = "1KiB"

[[component]]
name = "sink"
kind = "receiver"
period = "5ms"
wcet = "1ms"
priority = 40
cpus = [0]

[[channel]]
name = "data"
sender = "src"
receivers = ["sink"]
message_size = "32B"
capacity = 4
overflow = "drop-newest"
"#;

fn plain(duration_ms: u64) -> RunOptions {
    RunOptions::new(Some(duration_ms * 1_000_000), Mode::Plain)
}

#[test]
fn builtin_components_release_and_deliver() {
    let r = exec::run(App::new(manifest(PIPE)), plain(300)).expect("run");
    assert_eq!(r.schema, "pacer.runtime.run/1");
    let src = &r.components[0];
    // Releases at t0 + j·5 ms for j·5 ms < 300 ms: exactly 60.
    assert_eq!(src.releases, 60, "{src:?}");
    let sink = &r.components[1];
    // The receiver is released by src's messages, at most once per 5 ms.
    assert!(sink.releases >= 50 && sink.releases <= 60, "{sink:?}");
    let ch = &r.channels[0];
    assert_eq!((ch.channel.as_str(), ch.receiver.as_str()), ("data", "sink"));
    assert_eq!(ch.sent, 60);
    assert_eq!(ch.sent, ch.delivered + ch.dropped + ch.evicted + ch.pending);
    assert!(ch.delivered >= 50, "{ch:?}");
    assert!(ch.latency.p50_ns > 0 && ch.latency.p50_ns <= ch.latency.max_ns);
    // The built-in component fills its per-release memory, in the arena, every release.
    assert_eq!(src.per_release_peak_bytes, 1024);
    assert_eq!(src.arena_refused, 0);
    // Nothing of the built-in component allocates on the real-time path.
    let allocs = src
        .allocations
        .expect("the guard is installed in this test binary");
    assert_eq!(allocs.rt_allocations, 0, "{allocs:?}");
    assert_eq!(sink.allocations.unwrap().rt_allocations, 0);
    assert!(r.guard);
    assert!(src.restored && sink.restored);
    assert_eq!(r.records_lost, 0);
}

#[test]
fn the_report_percentiles_are_the_releases_own() {
    // 200 µs of calibrated work per release: the CPU time and response percentiles must be near
    // it, not a histogram's initial bounds (they once all read 2 ns).
    let text = PIPE.replacen(
        "per_release = \"1KiB\"",
        "per_release = \"1KiB\"\nwork = \"200us\"",
        1,
    );
    let r = exec::run(App::new(manifest(&text)), plain(200)).expect("run");
    let src = &r.components[0];
    assert_eq!(src.releases, 40, "{src:?}");
    for (what, s) in [("cpu", src.exec), ("response", src.response)] {
        assert!(
            s.p50_ns >= 100_000 && s.p50_ns <= s.p99_ns && s.p99_ns <= s.max_ns,
            "{what}: {s:?}"
        );
    }
    assert!(src.response.p50_ns >= src.exec.p50_ns, "{src:?}");
    // A timer wake-up takes at least a microsecond on any machine.
    assert!(
        src.jitter.p50_ns >= 1_000 && src.jitter.p99_ns <= src.jitter.max_ns,
        "{:?}",
        src.jitter
    );
}

/// A component that allocates on its real-time path, and keeps some memory from `init`.
struct Leaky {
    kept: Vec<u8>,
}

impl Component for Leaky {
    fn init(&mut self, _ctx: &mut Init<'_>) -> Result<(), String> {
        self.kept = vec![7u8; 10_000];
        Ok(())
    }

    fn release(&mut self, ctx: &mut Release<'_>) {
        // The mistake the guard is there to catch: a heap allocation per release.
        let v: Vec<u64> = (0..ctx.job + 16).collect();
        std::hint::black_box(&v);
    }
}

#[test]
fn the_guard_reports_allocations_on_the_real_time_path() {
    let app = App::new(manifest(PIPE))
        .with("src", Leaky { kept: Vec::new() })
        .expect("component exists");
    let r = exec::run(app, plain(100)).expect("run");
    let src = &r.components[0];
    let a = src.allocations.expect("guard installed");
    assert_eq!(
        a.rt_allocations, src.releases,
        "one allocation per release: {a:?}"
    );
    assert!(a.rt_frees >= src.releases - 1, "{a:?}");
    assert_eq!(a.rt_first_bytes, 16 * 8);
    // What init kept is counted as its persistent memory.
    assert!(a.init_bytes >= 10_000, "{a:?}");
    // The built-in receiver beside it stays clean.
    assert_eq!(r.components[1].allocations.unwrap().rt_allocations, 0);
}

/// Counts releases and sends a message naming its release.
struct Counter {
    seen: Arc<AtomicU64>,
}

impl Component for Counter {
    fn release(&mut self, ctx: &mut Release<'_>) {
        self.seen.fetch_add(1, Ordering::Relaxed);
        let d = ctx.send("data", &ctx.job.to_le_bytes()).expect("channel exists");
        assert_eq!(d.queued + d.dropped, 1);
        assert!(ctx.send("nope", &[1]).is_err());
        assert!(
            ctx.send("data", &[0u8; 33]).is_err(),
            "longer than the message size"
        );
        // Arena memory is there within budget and refused beyond.
        let a = ctx.arena().alloc_slice(256, 0u32).expect("1 KiB fits");
        a[0] = 1;
        assert!(ctx.arena().alloc_slice(1, 0u8).is_err(), "the budget is spent");
    }
}

/// Checks that messages arrive in order and carry the sender's release.
struct Checker {
    last: Option<u64>,
    got: Arc<AtomicU64>,
}

impl Component for Checker {
    fn release(&mut self, ctx: &mut Release<'_>) {
        let mut last = self.last;
        let got = &self.got;
        ctx.drain("data", usize::MAX, |_, b| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[..8]);
            let v = u64::from_le_bytes(x);
            assert!(last.is_none_or(|l| v > l), "in order");
            last = Some(v);
            got.fetch_add(1, Ordering::Relaxed);
        })
        .expect("input exists");
        self.last = last;
    }
}

#[test]
fn application_code_sends_receives_and_uses_its_arena() {
    let seen = Arc::new(AtomicU64::new(0));
    let got = Arc::new(AtomicU64::new(0));
    let app = App::new(manifest(PIPE))
        .with("src", Counter { seen: seen.clone() })
        .unwrap()
        .with(
            "sink",
            Checker {
                last: None,
                got: got.clone(),
            },
        )
        .unwrap();
    let r = exec::run(app, plain(200)).expect("run");
    assert_eq!(seen.load(Ordering::Relaxed), r.components[0].releases);
    assert!(
        r.components[0].panicked.is_none(),
        "{:?}",
        r.components[0].panicked
    );
    assert!(
        r.components[1].panicked.is_none(),
        "{:?}",
        r.components[1].panicked
    );
    assert_eq!(got.load(Ordering::Relaxed), r.channels[0].delivered);
    assert_eq!(r.components[0].arena_refused, r.components[0].releases);
}

struct Panicky;

impl Component for Panicky {
    fn release(&mut self, ctx: &mut Release<'_>) {
        if ctx.job == 3 {
            panic!("boom at 3");
        }
    }
}

#[test]
fn a_panicking_component_stops_alone_and_is_reported() {
    let app = App::new(manifest(PIPE)).with("src", Panicky).unwrap();
    let r = exec::run(app, plain(100)).expect("run");
    let src = &r.components[0];
    assert_eq!(src.releases, 4);
    assert!(
        src.panicked.as_deref().is_some_and(|p| p.contains("boom at 3")),
        "{src:?}"
    );
    assert!(r.notes.iter().any(|n| n.contains("boom at 3")));
}

struct FailingInit;

impl Component for FailingInit {
    fn init(&mut self, _ctx: &mut Init<'_>) -> Result<(), String> {
        Err("no sensor".into())
    }
    fn release(&mut self, _ctx: &mut Release<'_>) {}
}

#[test]
fn a_failing_init_stops_the_application_before_it_starts() {
    let app = App::new(manifest(PIPE)).with("sink", FailingInit).unwrap();
    let e = exec::run(app, plain(100)).unwrap_err().to_string();
    assert!(e.contains("sink") && e.contains("no sensor"), "{e}");
}

#[test]
fn unknown_components_and_receivers_without_input_are_refused() {
    assert!(App::new(manifest(PIPE)).with("ghost", Panicky).is_err());
    let lonely = PIPE.replace(
        "[[channel]]\nname = \"data\"\nsender = \"src\"\nreceivers = [\"sink\"]\nmessage_size = \"32B\"\ncapacity = 4\noverflow = \"drop-newest\"\n",
        "",
    );
    let e = exec::run(App::new(manifest(&lonely)), plain(50))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sink") && e.contains("no channel has it as a receiver"),
        "{e}"
    );
}

#[test]
fn the_stop_flag_ends_a_run_without_duration() {
    let opts = RunOptions::new(None, Mode::Plain);
    let stop = opts.stop.clone();
    let t = std::thread::spawn(move || exec::run(App::new(manifest(PIPE)), opts));
    std::thread::sleep(std::time::Duration::from_millis(150));
    stop.store(true, Ordering::SeqCst);
    let r = t.join().unwrap().expect("run");
    assert!(r.components[0].releases >= 10, "{:?}", r.components[0]);
    assert!(r.components.iter().all(|c| c.restored));
}

#[test]
fn the_jobs_csv_has_one_row_per_release() {
    #[derive(Clone, Default)]
    struct Shared(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Shared::default();
    let mut opts = plain(100);
    opts.jobs = Some(Box::new(buf.clone()));
    let r = exec::run(App::new(manifest(PIPE)), opts).expect("run");
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let rows = pacer_workload::jobs::csv::JobReader::new(text.as_bytes(), "jobs.csv")
        .expect("header")
        .collect::<Result<Vec<_>, _>>()
        .expect("rows valid");
    let total: u64 = r.components.iter().map(|c| c.releases).sum();
    assert_eq!(rows.len() as u64, total);
    let src: Vec<_> = rows.iter().filter(|x| x.task == "src").collect();
    for (j, row) in src.iter().enumerate() {
        assert_eq!(row.job, j as u64);
        assert_eq!(
            row.release_ns,
            j as u64 * 5_000_000,
            "releases on the period grid"
        );
        assert!(row.start_ns >= row.release_ns);
        assert_eq!(row.deadline_ns, Some(row.release_ns + 5_000_000));
    }
}

#[test]
fn arenas_reset_refuse_beyond_budget_and_keep_the_peak() {
    let mut a = Arena::new(100);
    {
        let x = a.alloc_slice(10, 1u64).unwrap();
        assert_eq!(x.len(), 10);
        let e = a.alloc_slice(3, 0u64).unwrap_err();
        assert_eq!(
            e,
            ArenaFull {
                requested: 24,
                used: 80,
                budget: 100
            }
        );
        a.alloc_bytes(&[1; 20]).unwrap();
        assert_eq!(a.used(), 100);
    }
    a.reset();
    assert_eq!(a.used(), 0);
    assert_eq!(a.peak(), 100);
    assert_eq!(a.refused(), 1);
    // After a reset the whole budget is there again, aligned.
    let y = a.alloc(5u32).unwrap();
    assert_eq!(*y, 5);
    assert_eq!((y as *const u32 as usize) % std::mem::align_of::<u32>(), 0);
    let z = a.alloc_slice(12, 0u64).unwrap_err();
    assert_eq!(z.requested, 96);
}

const AUDIO: &str = r#"
[app]
name = "audio"

[[component]]
name = "mic"
kind = "periodic"
period = "10ms"
wcet = "1ms"
priority = 60
cpus = [0]

[[component]]
name = "effect"
kind = "receiver"
period = "10ms"
wcet = "1ms"
priority = 50
cpus = [0]

[[component]]
name = "mixer"
kind = "periodic"
period = "10ms"
wcet = "1ms"
priority = 70
cpus = [0]

[[channel]]
name = "captured"
sender = "mic"
receivers = ["effect"]
message_size = "960B"
capacity = 4
overflow = "drop-oldest"

[[channel]]
name = "stream"
sender = "effect"
receivers = ["mixer"]
message_size = "960B"
capacity = 4
overflow = "drop-oldest"

[[audio]]
name = "in"
direction = "record"
rate = 48000
channels = 1
burst_frames = 480
format = "s16"
component = "mic"

[[audio]]
name = "out"
direction = "playback"
rate = 48000
channels = 1
burst_frames = 480
format = "s16"
component = "mixer"
"#;

/// Passes each recorded burst on, halved in amplitude, and checks it is the test tone.
struct Effect {
    loud: Arc<AtomicU64>,
}

impl Component for Effect {
    fn release(&mut self, ctx: &mut Release<'_>) {
        let mut out = [0u8; 960];
        let mut got = false;
        let loud = &self.loud;
        ctx.drain("captured", usize::MAX, |_, b| {
            for (i, s) in b.chunks_exact(2).enumerate() {
                let x = i16::from_le_bytes([s[0], s[1]]);
                if x.unsigned_abs() > 8000 {
                    loud.fetch_add(1, Ordering::Relaxed);
                }
                out[2 * i..2 * i + 2].copy_from_slice(&(x / 2).to_le_bytes());
            }
            got = true;
        })
        .unwrap();
        if got {
            ctx.send("stream", &out).unwrap();
        }
    }
}

#[test]
fn the_audio_manager_records_mixes_and_writes_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let loud = Arc::new(AtomicU64::new(0));
    let app = App::new(manifest(AUDIO))
        .with("effect", Effect { loud: loud.clone() })
        .unwrap();
    let mut opts = plain(300);
    opts.audio = pacer_runtime::audio::Backend::File(dir.path().to_path_buf());
    // The record session reads `in.wav`: write one second of a 1 kHz tone at 0.5.
    let tone: Vec<i16> = (0..48_000)
        .map(|n| (16384.0 * (std::f64::consts::TAU * 1000.0 * n as f64 / 48_000.0).sin()) as i16)
        .collect();
    write_wav(&dir.path().join("in.wav"), &tone);
    let r = exec::run(app, opts).expect("run");
    let mixer = &r.components[2];
    assert_eq!(mixer.releases, 30);
    assert!(
        loud.load(Ordering::Relaxed) > 0,
        "the recorded tone reached the effect"
    );
    let out = r
        .audio
        .iter()
        .find(|a| a.session.session == "out")
        .expect("playback report");
    assert_eq!(out.component, "mixer");
    assert_eq!(out.session.bursts, 30, "one burst per mixer release");
    let file = out.session.file.as_ref().expect("file backend report");
    assert!(file.complete, "{file:?}");
    // Late bursts are in the file too, as the silence the device played.
    assert_eq!(file.bursts, 30);
    // Until the first stream message arrives the mixer pads silence, and counts it.
    assert!(out.session.silence_padded_bursts >= 1);
    assert!(out.latency.unwrap().p50_ns > 0);
    let written = std::fs::read(dir.path().join("out.wav")).unwrap();
    assert_eq!(written.len(), 44 + 30 * 960);
    // The mixed stream is the tone at half amplitude: peaks near 8192, nothing near 16384.
    let peak = written[44..]
        .chunks_exact(2)
        .map(|s| i16::from_le_bytes([s[0], s[1]]).unsigned_abs())
        .max()
        .unwrap();
    assert!((7000..=8300).contains(&peak), "peak {peak}");
    let rec = r.audio.iter().find(|a| a.session.session == "in").unwrap();
    // Burst j is complete at t0 + (j + 1)·T: the first read finds nothing yet, then each
    // release takes the burst of the period before.
    assert_eq!((rec.session.bursts, rec.session.not_ready), (29, 1));
}

fn write_wav(path: &std::path::Path, samples: &[i16]) {
    let data = samples.len() as u32 * 2;
    let mut b = Vec::new();
    b.extend_from_slice(b"RIFF");
    b.extend_from_slice(&(36 + data).to_le_bytes());
    b.extend_from_slice(b"WAVEfmt ");
    b.extend_from_slice(&16u32.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes()); // PCM
    b.extend_from_slice(&1u16.to_le_bytes()); // mono
    b.extend_from_slice(&48_000u32.to_le_bytes());
    b.extend_from_slice(&96_000u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&16u16.to_le_bytes());
    b.extend_from_slice(b"data");
    b.extend_from_slice(&data.to_le_bytes());
    for s in samples {
        b.extend_from_slice(&s.to_le_bytes());
    }
    std::fs::write(path, b).unwrap();
}
