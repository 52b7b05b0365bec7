//! Property-test harness for pacer's parsers (`tests/fuzz_parsers.rs` of each crate that reads
//! user or kernel input; `docs/testing.md`): every parser, on arbitrary and on mutated valid
//! inputs, must return (`Ok` or its typed error), must not panic, must not hang, and must use
//! memory in proportion to its input.
//!
//! [`check`] runs one target: a proptest strategy of inputs and a function that parses one.
//! Each case runs on a thread of its own under a watchdog and a counting allocator:
//!
//! - **panic**: caught, the case fails, proptest shrinks it to a minimal input;
//! - **hang**: the parse has used [`Settings::timeout_cpu_s`] seconds of CPU (CPU, not wall,
//!   time: CI shares its two CPUs with real-time load) without returning. A thread cannot be
//!   stopped, so there is no shrinking: the input is printed and the process exits;
//! - **memory**: the peak of bytes the parse held at once must stay within
//!   [`memory_bound`] of the input's length, else the case fails and is shrunk; far beyond
//!   (twice the bound, at least 1 GiB) the allocation is refused and the process aborts after
//!   printing the input (the `alloc` module), since granting it could take the machine down.
//!
//! Runs are deterministic: the seed is fixed ([`DEFAULT_SEED`], or `PACER_FUZZ_SEED`) and
//! printed with every failure, with the command that reproduces it. Proptest's failure
//! persistence files are off (a fixed seed replays the same cases; the regression of a fixed bug
//! is a unit test next to the parser, with the minimal input).

mod alloc;
pub mod text;
pub mod tree;

use std::fmt::Debug;
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};

pub use alloc::CountingAlloc;

/// The base seed when `PACER_FUZZ_SEED` is not set; each target mixes its name in.
pub const DEFAULT_SEED: u64 = 0x7061_6365_725f_6675; // "pacer_fu"

/// Bytes per input byte a parse may hold at once, unless its target says otherwise
/// ([`check_with_bound`]): a tree of small nodes built from compact text, each node a few machine
/// words, plus the error or result strings that quote it.
pub const BYTES_PER_INPUT_BYTE: usize = 64;

/// Bytes a parse may hold at once for an input of `len` bytes: `per_byte` per input byte and
/// 16 MiB of fixed overhead.
pub fn memory_bound(len: usize, per_byte: usize) -> usize {
    len.saturating_mul(per_byte).saturating_add(16 << 20)
}

/// Beyond this an allocation is refused (and the process aborts): twice the bound, and at least
/// 1 GiB, so that what fails the bound by a little is shrunk while what asks for gigabytes never
/// gets them.
fn hard_cap(bound: usize) -> usize {
    bound.saturating_mul(2).max(1 << 30)
}

/// The parse's stack: the 8 MiB of a process's main thread, where the pacer CLI parses.
const STACK_BYTES: usize = 8 << 20;

/// Run-time settings, from the environment.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `PACER_FUZZ_CASES`: cases per target, instead of each target's default.
    pub cases: Option<u32>,
    /// `PACER_FUZZ_SEED`: the base seed (decimal or `0x` hex).
    pub seed: u64,
    /// `PACER_FUZZ_TIMEOUT_S`: CPU seconds after which a parse counts as hung (default 10).
    pub timeout_cpu_s: f64,
}

impl Settings {
    pub fn from_env() -> Settings {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let cases = var("PACER_FUZZ_CASES").map(|v| {
            v.trim()
                .parse()
                .unwrap_or_else(|_| panic!("PACER_FUZZ_CASES={v}: expected a number of cases"))
        });
        let seed = var("PACER_FUZZ_SEED").map_or(DEFAULT_SEED, |v| {
            let t = v.trim();
            let parsed = match t.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => t.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("PACER_FUZZ_SEED={v}: expected a u64 (decimal or 0x hex)"))
        });
        let timeout_cpu_s = var("PACER_FUZZ_TIMEOUT_S").map_or(10.0, |v| {
            v.trim()
                .parse()
                .ok()
                .filter(|s: &f64| *s > 0.0)
                .unwrap_or_else(|| panic!("PACER_FUZZ_TIMEOUT_S={v}: expected seconds > 0"))
        });
        Settings {
            cases,
            seed,
            timeout_cpu_s,
        }
    }
}

/// An input the harness can measure and print raw.
pub trait Input: Debug + Send + Sync + 'static {
    /// Its size in bytes (what [`memory_bound`] is of).
    fn len_bytes(&self) -> usize;
    /// Its bytes, for the reports that cannot format (a refused allocation) and for the file
    /// a failing input is saved to.
    fn raw(&self) -> Vec<u8>;
}

impl Input for String {
    fn len_bytes(&self) -> usize {
        self.len()
    }
    fn raw(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}

impl Input for Vec<u8> {
    fn len_bytes(&self) -> usize {
        self.len()
    }
    fn raw(&self) -> Vec<u8> {
        self.clone()
    }
}

impl<A: Input, B: Input> Input for (A, B) {
    fn len_bytes(&self) -> usize {
        self.0.len_bytes() + self.1.len_bytes()
    }
    fn raw(&self) -> Vec<u8> {
        let mut v = self.0.raw();
        v.extend_from_slice(b"\n--- second part ---\n");
        v.extend(self.1.raw());
        v
    }
}

impl<A: Input, B: Input, C: Input> Input for (A, B, C) {
    fn len_bytes(&self) -> usize {
        self.0.len_bytes() + self.1.len_bytes() + self.2.len_bytes()
    }
    fn raw(&self) -> Vec<u8> {
        let mut v = (self.0.raw(), self.1.raw()).raw();
        v.extend_from_slice(b"\n--- third part ---\n");
        v.extend(self.2.raw());
        v
    }
}

impl<T: Input> Input for Vec<T> {
    fn len_bytes(&self) -> usize {
        self.iter().map(Input::len_bytes).sum()
    }
    fn raw(&self) -> Vec<u8> {
        let mut v = Vec::new();
        for (i, x) in self.iter().enumerate() {
            if i > 0 {
                v.extend_from_slice(b"\n--- next part ---\n");
            }
            v.extend(x.raw());
        }
        v
    }
}

/// What one case did.
struct Outcome {
    peak: usize,
    panic: Option<String>,
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(a panic with a non-string payload)".into())
}

/// Worker threads are named `fuzz-<target>`.
const WORKER_PREFIX: &str = "fuzz-";

thread_local! {
    /// The last panic of a worker, with its location, as the quiet hook recorded it.
    static LAST_PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Makes panics of worker threads quiet: shrinking panics the parse hundreds of times, and the
/// report gives the one that matters (message and location) with its minimal input. Other
/// threads' panics go to the hook that was there.
fn install_quiet_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with(WORKER_PREFIX))
            {
                let at = info.location().map(|l| format!(" at {l}")).unwrap_or_default();
                let message = format!("{}{at}", panic_message(info.payload()));
                let _ = LAST_PANIC.try_with(|p| *p.borrow_mut() = Some(message));
            } else {
                previous(info);
            }
        }));
    });
}

/// CPU time used so far by the thread behind `h`.
fn thread_cpu_s(h: &std::thread::JoinHandle<()>) -> Option<f64> {
    use std::os::unix::thread::JoinHandleExt;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: the handle's pthread_t is live until joined; `clock` is a valid out-pointer.
    if unsafe { libc::pthread_getcpuclockid(h.as_pthread_t() as libc::pthread_t, &mut clock) } != 0 {
        return None;
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}

struct Ctx {
    target: &'static str,
    /// This target's seed.
    seed: u64,
    /// `PACER_FUZZ_SEED` (or the default), from which `seed` derives.
    base_seed: u64,
    cases: u32,
    timeout_cpu_s: f64,
    per_byte: usize,
}

/// Runs `parse(input)` on a worker thread, armed, under the watchdog.
fn run_case<T: Input>(ctx: &Ctx, input: Arc<T>, parse: Arc<dyn Fn(&T) + Send + Sync>) -> Outcome {
    let len = input.len_bytes();
    let raw = input.raw();
    let (tx, rx) = mpsc::channel();
    let target = ctx.target;
    let base_seed = ctx.base_seed;
    let per_byte = ctx.per_byte;
    let worker_input = Arc::clone(&input);
    let handle = std::thread::Builder::new()
        .name(format!("{WORKER_PREFIX}{target}"))
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let hard_cap = hard_cap(memory_bound(len, per_byte));
            let at_arm = alloc::current();
            alloc::arm(hard_cap, target, &raw, base_seed);
            let r = std::panic::catch_unwind(AssertUnwindSafe(|| parse(&worker_input)));
            let peak = alloc::disarm(at_arm);
            let panic = r.err().map(|p| {
                LAST_PANIC
                    .try_with(|l| l.borrow_mut().take())
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| panic_message(&*p))
            });
            drop(raw);
            let _ = tx.send(Outcome { peak, panic });
        })
        .expect("spawning a fuzz worker thread");
    let started = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(outcome) => {
                let _ = handle.join();
                return outcome;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // The worker died without sending: only a panic outside catch_unwind does that.
                let _ = handle.join();
                return Outcome {
                    peak: 0,
                    panic: Some("the worker thread ended without a result".into()),
                };
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let cpu = thread_cpu_s(&handle).unwrap_or(started.elapsed().as_secs_f64());
                // Wall time only as a backstop (a parse blocked, not computing), far beyond.
                if cpu >= ctx.timeout_cpu_s || started.elapsed().as_secs_f64() >= 30.0 * ctx.timeout_cpu_s {
                    report_hang(ctx, &*input, cpu, started.elapsed());
                }
            }
        }
    }
}

fn save(target: &str, seed: u64, input: &dyn Input) -> Option<std::path::PathBuf> {
    let path = std::env::temp_dir().join(format!("pacer-fuzz-{target}-{seed:016x}.input"));
    std::fs::write(&path, input.raw()).ok().map(|_| path)
}

/// The command that replays a target's cases (the test is named as the target).
fn reproduce(ctx: &Ctx) -> String {
    let krate = std::env::var("CARGO_PKG_NAME").unwrap_or_else(|_| "<crate>".into());
    format!(
        "PACER_FUZZ_SEED={:#x} PACER_FUZZ_CASES={} cargo test -p {krate} --test fuzz_parsers -- --exact {}",
        ctx.base_seed, ctx.cases, ctx.target
    )
}

fn report_hang(ctx: &Ctx, input: &dyn Input, cpu: f64, wall: Duration) -> ! {
    let saved = save(ctx.target, ctx.seed, input);
    let mut shown = format!("{input:?}");
    if shown.len() > 20_000 {
        let mut cut = 20_000;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push_str("… (cut)");
    }
    // Straight to the process's standard error: libtest's capture would be lost by the exit.
    let _ = writeln!(
        std::io::stderr(),
        "\nfuzz target `{}`: the parse did not return after {cpu:.1} s of CPU ({:.1} s wall); \
         it cannot be stopped, so the test binary exits.\nseed {:#x}; input ({} bytes{}):\n{shown}\n\
         reproduce with:\n  {}\n",
        ctx.target,
        wall.as_secs_f64(),
        ctx.seed,
        input.len_bytes(),
        saved.map_or(String::new(), |p| format!(", saved to {}", p.display())),
        reproduce(ctx),
    );
    std::process::exit(101);
}

/// Runs fuzz target `target`: `default_cases` cases (or `PACER_FUZZ_CASES`) of `strategy`, each
/// parsed by `parse` under the watchdog and the memory bound. `parse` should call the parser
/// and render what it returns (`to_string()` of an error, `Debug` of a result), since a
/// formatting panic is a parser bug too. Panics with a report on the first failure, after
/// shrinking it.
pub fn check<T, S, F>(target: &'static str, default_cases: u32, strategy: S, parse: F)
where
    T: Input + Clone,
    S: Strategy<Value = T>,
    F: Fn(&T) + Send + Sync + 'static,
{
    check_with_bound(target, default_cases, BYTES_PER_INPUT_BYTE, strategy, parse);
}

/// [`check`] with `per_byte` bytes of memory per input byte instead of
/// [`BYTES_PER_INPUT_BYTE`], for a parser whose representation is inherently larger (a
/// third-party document model); still a bound in proportion to the input.
pub fn check_with_bound<T, S, F>(
    target: &'static str,
    default_cases: u32,
    per_byte: usize,
    strategy: S,
    parse: F,
) where
    T: Input + Clone,
    S: Strategy<Value = T>,
    F: Fn(&T) + Send + Sync + 'static,
{
    install_quiet_hook();
    let settings = Settings::from_env();
    let cases = settings.cases.unwrap_or(default_cases);
    // FNV-1a of the name: each target draws its own cases from the same base seed.
    let seed = target.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }) ^ settings.seed;
    let ctx = Ctx {
        target,
        seed,
        base_seed: settings.seed,
        cases,
        timeout_cpu_s: settings.timeout_cpu_s,
        per_byte,
    };
    let config = Config {
        cases,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        // Shrinking re-runs the parse; keep a failing CI run within minutes.
        max_shrink_iters: 2048,
        max_shrink_time: 120_000,
        fork: false,
        timeout: 0,
        ..Config::default()
    };
    let parse: Arc<dyn Fn(&T) + Send + Sync> = Arc::new(parse);
    let mut runner = TestRunner::new(config);
    let started = Instant::now();
    let largest = std::cell::Cell::new((0usize, 0usize, 0f64));
    let result = runner.run(&strategy, |input| {
        let len = input.len_bytes();
        let outcome = run_case(&ctx, Arc::new(input), Arc::clone(&parse));
        if let Some(p) = outcome.panic {
            return Err(TestCaseError::fail(format!("panicked: {p}")));
        }
        let bound = memory_bound(len, per_byte);
        if outcome.peak > bound {
            return Err(TestCaseError::fail(format!(
                "held {} bytes at once for a {len}-byte input, more than the bound of {bound} \
                 ({per_byte} × input + 16 MiB): memory sized by something in the input rather \
                 than by its length",
                outcome.peak
            )));
        }
        // What the bound is tuned against: the largest peak, and the most memory per input
        // byte among inputs large enough for the ratio to mean something.
        let (peak, peak_len, ratio) = largest.get();
        let r = if len >= 16 << 10 {
            outcome.peak as f64 / len as f64
        } else {
            0.0
        };
        let (peak, peak_len) = if outcome.peak > peak {
            (outcome.peak, len)
        } else {
            (peak, peak_len)
        };
        largest.set((peak, peak_len, ratio.max(r)));
        Ok(())
    });
    match result {
        Ok(()) => {
            let (peak, len, ratio) = largest.get();
            // Shown with --nocapture: what a run covered, for tuning case counts and bounds.
            println!(
                "fuzz target `{target}`: {cases} cases in {:.2} s, seed {seed:#x}; largest peak \
                 {peak} bytes (input of {len} bytes); most bytes per input byte (inputs ≥ 16 KiB): \
                 {ratio:.1}",
                started.elapsed().as_secs_f64()
            );
        }
        Err(TestError::Fail(why, input)) => {
            let saved = save(target, seed, &input);
            let mut shown = format!("{input:?}");
            if shown.len() > 8_000 {
                let mut cut = 8_000;
                while !shown.is_char_boundary(cut) {
                    cut -= 1;
                }
                shown.truncate(cut);
                shown.push_str("… (cut; the whole input is in the saved file)");
            }
            panic!(
                "fuzz target `{target}` failed: {why}\nminimal input ({} bytes{}):\n{shown}\n\
                 seed {seed:#x}; reproduce with:\n  {}",
                input.len_bytes(),
                saved.map_or(String::new(), |p| format!(", saved to {}", p.display())),
                reproduce(&ctx),
            );
        }
        Err(TestError::Abort(why)) => panic!("fuzz target `{target}` aborted: {why}"),
    }
}

/// Forces the formatting of a parse result, so that `Display` and `Debug` of results and errors
/// run inside the harness (and their output is dropped).
pub fn render<T: Debug, E: std::fmt::Display + Debug>(r: &Result<T, E>) {
    use std::fmt::Write as _;
    struct Sink;
    impl std::fmt::Write for Sink {
        fn write_str(&mut self, _: &str) -> std::fmt::Result {
            Ok(())
        }
    }
    match r {
        Ok(v) => {
            let _ = write!(Sink, "{v:?}");
        }
        Err(e) => {
            let _ = write!(Sink, "{e} {e:?}");
        }
    }
}
