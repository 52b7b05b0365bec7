//! Entry points for the parser fuzz harness (`tests/fuzz_parsers.rs`, `docs/testing.md`) into
//! parsers that are private to their modules: the tracefs ring-buffer page decoder with the
//! `format` files and `/proc/kallsyms` it depends on, the saved cpuset state, and the small
//! parsers of `/proc` files. Each runs exactly the code pacer runs on that input, without the
//! file or system call around it. Not an API: hidden from the documentation, no stability.

use std::collections::{BTreeSet, HashMap};

use pacer_adapt::kernel::Wakeup;

use crate::sched::Tid;

/// The texts of the tracefs files the wake-up tracer reads before it decodes anything.
#[derive(Debug, Clone, Copy)]
pub struct TracefsFiles<'a> {
    /// `events/sched/sched_wakeup/id`.
    pub wakeup_id: &'a str,
    /// `events/sched/sched_wakeup/format`.
    pub wakeup_format: &'a str,
    /// `events/timer/hrtimer_start/id`.
    pub timer_id: &'a str,
    /// `events/timer/hrtimer_start/format`.
    pub timer_format: &'a str,
    /// `/proc/kallsyms`.
    pub kallsyms: &'a str,
}

/// What the tracer would make of `pages` read from `trace_pipe_raw` while tracing `tids`: the
/// wake-ups and timer records per thread, the events reported lost, and why the formats were
/// refused (`Err` of the wake-up format: nothing is decoded; the timer format's refusal only
/// leaves timer records out, as in [`crate::trace::WakeupTracer`]).
#[allow(clippy::type_complexity)]
pub fn decode_pages(
    files: TracefsFiles<'_>,
    pages: &[Vec<u8>],
    tids: &[Tid],
) -> Result<(HashMap<Tid, Vec<Wakeup>>, u64, Option<String>), String> {
    let format =
        crate::trace::parse_wakeup_format(files.wakeup_id, files.wakeup_format).map_err(|e| e.to_string())?;
    let functions = crate::trace::activating_timer_addresses(files.kallsyms);
    let (timer_format, timer_error) =
        match crate::trace::parse_timer_format(files.timer_id, files.timer_format, functions) {
            Ok(f) => (Some(f), None),
            Err(e) => (None, Some(e)),
        };
    let tids: BTreeSet<Tid> = tids.iter().copied().collect();
    let mut pending = HashMap::new();
    let mut lost = 0u64;
    for page in pages {
        crate::trace::collect_page(
            page,
            &format,
            timer_format.as_ref(),
            &tids,
            &mut pending,
            &mut lost,
        );
    }
    Ok((pending, lost, timer_error))
}

/// The saved state of a cpuset partitioning (`pacer cpuset`'s file for after a SIGKILL): parsed,
/// then written again (`None`: not such a file, or one that cannot be written back).
pub fn saved_cpuset_state(text: &str) -> Option<String> {
    crate::cgroup::SavedState::parse(text)?.render()
}

/// The first field of `/proc/PID/task/TID/schedstat` (CPU time, ns).
pub fn schedstat(text: &str) -> Option<u64> {
    crate::procfs::parse_schedstat(text)
}

/// A `key : value` field of `/proc/PID/sched`.
pub fn sched_field(text: &str, field: &str) -> Option<u64> {
    crate::run::sys::parse_sched_field(text, field)
}

/// The SCHED_DEADLINE state in a `/proc/PID/task/TID/sched` file, as
/// [`crate::dlstate::DlStateReader`] parses it.
pub fn dl_state(text: &[u8]) -> Result<Option<pacer_adapt::DlState>, crate::dlstate::DlParseError> {
    crate::dlstate::parse_dl_state(text)
}

/// A perf group read (`nr, time_enabled, time_running, {value, id} × nr`): context switches and
/// migrations, scaled, and the two times; or why the buffer is not such a read.
pub fn perf_group_read(words: &[u64], cs_id: u64, mig_id: u64) -> Result<[u64; 4], String> {
    crate::perf::parse_group_read(words, cs_id, mig_id).map(|c| {
        [
            c.context_switches,
            c.migrations,
            c.time_enabled_ns,
            c.time_running_ns,
        ]
    })
}
