//! Fuzz harness of what pacer-linux reads from the kernel and from its own state files
//! (pacer_testkit::fuzz, `docs/testing.md`): the tracefs ring-buffer pages of the wake-up tracer
//! with the `format` files and `/proc/kallsyms` that say how to decode them, session ledgers
//! (`pacer doctor`), the guardian's protocol lines, the saved cpuset state, and the `/proc` and
//! `/sys` files (mountinfo, CPU lists, the scheduler's debug file, schedstat, `sched` fields and a
//! SCHED_DEADLINE task's `dl.runtime`/`dl.deadline`, perf
//! group reads). No panic, no hang, memory in proportion to the input.
//!
//! Nothing here touches the system: the parsers run on text and bytes (private ones through
//! `pacer_linux::fuzzing`). The guardian's line handler itself (`Book::line`) opens a pidfd per
//! announced process, so its parsing part, [`ThreadSched::decode`] on the words of a line, is
//! what runs here.

use std::collections::BTreeMap;
use std::path::Path;

use pacer_linux::cpuset::{parse_cpu_list, parse_mountinfo, parse_sched_debug};
use pacer_linux::fuzzing::{self, TracefsFiles};
use pacer_linux::ledger::{Entry, Ledger, ProcessId};
use pacer_linux::sched::{SchedAttr, ThreadSched};
use pacer_testkit::fuzz::{self, text};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

#[global_allocator]
static ALLOC: fuzz::CountingAlloc = fuzz::CountingAlloc;

// ---- tracefs ----------------------------------------------------------------------------------

const WAKEUP_ID: u16 = 374;
const TIMER_ID: u16 = 460;

/// The files as on the development VM (Linux 6.18).
const WAKEUP_FORMAT: &str = "name: sched_wakeup
ID: 374
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;

print fmt: \"comm=%s pid=%d prio=%d target_cpu=%03d\", REC->comm, REC->pid, REC->prio, REC->target_cpu
";

const TIMER_FORMAT: &str = "name: hrtimer_start
ID: 460
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:void * hrtimer;\toffset:8;\tsize:8;\tsigned:0;
\tfield:void * function;\toffset:16;\tsize:8;\tsigned:0;
\tfield:s64 expires;\toffset:24;\tsize:8;\tsigned:1;
\tfield:s64 softexpires;\toffset:32;\tsize:8;\tsigned:1;
\tfield:enum hrtimer_mode mode;\toffset:40;\tsize:4;\tsigned:0;
";

const KALLSYMS: &str = "ffffffff813cef70 t inactive_task_timer
ffffffff813d1f20 t dl_task_timer
ffffffff8142cab0 t hrtimer_wakeup
ffffffff81754200 t timerfd_tmrproc
ffffffff81760000 T posix_timer_fn
ffffffff81760100 t it_real_fn
ffffffffc0001000 t hrtimer_wakeup\t[some_module]
";

const HRTIMER_WAKEUP: u64 = 0xffffffff8142cab0;

/// The threads the decoder is told to keep.
const TIDS: [u32; 3] = [7, 42, 4242];

/// One ring-buffer entry, as the kernel writes them (kernel/trace/ring_buffer.c).
#[derive(Debug, Clone)]
enum Entry_ {
    Wakeup {
        delta: u32,
        pid: u32,
        hardirq: bool,
        long: bool,
    },
    TimerSet {
        delta: u32,
        pid: u32,
        function: u64,
        soft: i64,
        mode: u32,
    },
    TimeExtend {
        delta: u32,
        hi: u32,
    },
    TimeStamp {
        delta: u32,
        hi: u32,
    },
    Discarded {
        len: u32,
    },
}

fn entries() -> impl Strategy<Value = Vec<Entry_>> {
    let pid = || prop_oneof![proptest::sample::select(TIDS.to_vec()), any::<u32>()];
    let delta = || 0u32..(1 << 27);
    let e = prop_oneof![
        6 => (delta(), pid(), any::<bool>(), any::<bool>())
            .prop_map(|(delta, pid, hardirq, long)| Entry_::Wakeup { delta, pid, hardirq, long }),
        3 => (delta(), pid(), prop_oneof![Just(HRTIMER_WAKEUP), any::<u64>()], -1i64..200_000_000_000, 0u32..4)
            .prop_map(|(delta, pid, function, soft, mode)| Entry_::TimerSet { delta, pid, function, soft, mode }),
        1 => (delta(), 0u32..8).prop_map(|(delta, hi)| Entry_::TimeExtend { delta, hi }),
        1 => (delta(), 0u32..8).prop_map(|(delta, hi)| Entry_::TimeStamp { delta, hi }),
        1 => (0u32..64).prop_map(|len| Entry_::Discarded { len: len * 4 }),
    ];
    proptest::collection::vec(e, 0..40)
}

fn push32(v: &mut Vec<u8>, x: u32) {
    v.extend(x.to_ne_bytes());
}

/// A page as read from `trace_pipe_raw`: header (time stamp, commit word with the data size and
/// the missed-events flags), the entries, the missed count when stored, zeros to 4096 bytes.
fn page(ts: u64, entries: &[Entry_], missed: Option<Option<u64>>) -> Vec<u8> {
    let mut data = Vec::new();
    for e in entries {
        match *e {
            Entry_::Wakeup {
                delta,
                pid,
                hardirq,
                long,
            } => {
                let mut p = vec![0u8; 36];
                p[0..2].copy_from_slice(&WAKEUP_ID.to_ne_bytes());
                p[2] = if hardirq { 0x08 } else { 0 };
                p[4..8].copy_from_slice(&pid.to_ne_bytes());
                p[8..15].copy_from_slice(b"fuzzing");
                p[24..28].copy_from_slice(&pid.to_ne_bytes());
                if long {
                    push32(&mut data, delta << 5);
                    push32(&mut data, p.len() as u32 + 4);
                } else {
                    push32(&mut data, (p.len() as u32 / 4) | (delta << 5));
                }
                data.extend(p);
            }
            Entry_::TimerSet {
                delta,
                pid,
                function,
                soft,
                mode,
            } => {
                let mut p = vec![0u8; 48];
                p[0..2].copy_from_slice(&TIMER_ID.to_ne_bytes());
                p[4..8].copy_from_slice(&pid.to_ne_bytes());
                p[16..24].copy_from_slice(&function.to_ne_bytes());
                p[24..32].copy_from_slice(&soft.to_ne_bytes());
                p[32..40].copy_from_slice(&soft.to_ne_bytes());
                p[40..44].copy_from_slice(&mode.to_ne_bytes());
                push32(&mut data, (p.len() as u32 / 4) | (delta << 5));
                data.extend(p);
            }
            Entry_::TimeExtend { delta, hi } => {
                push32(&mut data, 30 | (delta << 5));
                push32(&mut data, hi);
            }
            Entry_::TimeStamp { delta, hi } => {
                push32(&mut data, 31 | (delta << 5));
                push32(&mut data, hi);
            }
            Entry_::Discarded { len } => {
                push32(&mut data, 29 | (1 << 5));
                push32(&mut data, len);
                data.extend(vec![0u8; len.saturating_sub(4) as usize]);
            }
        }
    }
    let flags = match missed {
        None => 0,
        Some(None) => 1u64 << 31,
        Some(Some(_)) => (1u64 << 31) | (1 << 30),
    };
    let mut p = Vec::with_capacity(4096);
    p.extend(ts.to_ne_bytes());
    p.extend((data.len() as u64 | flags).to_ne_bytes());
    p.extend(&data);
    if let Some(Some(n)) = missed {
        p.extend(n.to_ne_bytes());
    }
    p.resize(p.len().max(4096), 0);
    p
}

fn valid_page() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u64>(),
        entries(),
        prop_oneof![
            Just(None),
            Just(Some(None)),
            any::<u64>().prop_map(|n| Some(Some(n)))
        ],
    )
        .prop_map(|(ts, e, m)| page(ts, &e, m))
}

fn files(which: [&str; 5]) -> Vec<String> {
    which.iter().map(|s| s.to_string()).collect()
}

fn valid_files() -> Vec<String> {
    files(["374\n", WAKEUP_FORMAT, "460\n", TIMER_FORMAT, KALLSYMS])
}

/// Runs the tracer's decoding on `(files, pages)` and checks what only valid output can be.
fn decode((f, pages): &(Vec<String>, Vec<Vec<u8>>)) {
    let r = fuzzing::decode_pages(
        TracefsFiles {
            wakeup_id: &f[0],
            wakeup_format: &f[1],
            timer_id: &f[2],
            timer_format: &f[3],
            kallsyms: &f[4],
        },
        pages,
        &TIDS,
    );
    if let Ok((pending, _lost, _)) = &r {
        for tid in pending.keys() {
            assert!(TIDS.contains(tid), "a record of untraced thread {tid} was kept");
        }
    }
    let _ = format!("{r:?}");
}

/// Offsets and sizes a format file might claim: the real ones, the edges of a record and of a
/// page, and the edges of `usize` (where `offset + size` overflows).
const FIELD_NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "4",
    "7",
    "8",
    "16",
    "24",
    "32",
    "36",
    "40",
    "44",
    "45",
    "48",
    "4088",
    "4096",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551607",
    "18446744073709551608",
    "18446744073709551612",
    "18446744073709551615",
    "18446744073709551616",
];

/// The format files edited where their meaning is: the `offset:` or `size:` of some fields set
/// to [`FIELD_NUMBERS`] (the files' own grammar; line edits rarely hit those numbers).
fn edited_fields() -> impl Strategy<Value = Vec<String>> {
    let edit = (
        any::<bool>(),
        any::<usize>(),
        any::<bool>(),
        proptest::sample::select(FIELD_NUMBERS),
    );
    proptest::collection::vec(edit, 1..4).prop_map(|edits| {
        let mut f = valid_files();
        for (timer, line, size, value) in edits {
            let file = if timer { 3 } else { 1 };
            let mut lines: Vec<String> = f[file].lines().map(str::to_string).collect();
            let fields: Vec<usize> = (0..lines.len())
                .filter(|&i| lines[i].contains("field:"))
                .collect();
            let l = &mut lines[fields[line % fields.len()]];
            let key = if size { "size:" } else { "offset:" };
            if let Some(at) = l.find(key) {
                let start = at + key.len();
                let end = start + l[start..].find(';').unwrap_or(l.len() - start);
                l.replace_range(start..end, value);
            }
            f[file] = lines.join("\n") + "\n";
        }
        f
    })
}

/// Each of the five files mutated as text with probability 1/2, else as the kernel writes it.
fn mutated_files() -> impl Strategy<Value = Vec<String>> {
    let samples = text::TextSamples::new(valid_files());
    let one = move |i: usize| {
        let samples = samples.clone();
        prop_oneof![
            Just(valid_files()[i].clone()),
            text::TextSamples::ops().prop_map(move |ops| samples.mutate(i, &ops)),
        ]
    };
    (one(0), one(1), one(2), one(3), one(4)).prop_map(|(a, b, c, d, e)| vec![a, b, c, d, e])
}

#[test]
fn tracefs_pages() {
    let samples = {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        std::sync::Arc::new(
            (0..8)
                .map(|_| valid_page().new_tree(&mut runner).expect("a page").current())
                .collect::<Vec<_>>(),
        )
    };
    let pages = proptest::collection::vec(
        prop_oneof![
            6 => text::mutated_bytes(samples),
            2 => valid_page(),
            1 => proptest::collection::vec(any::<u8>(), 0..512),
        ],
        1..4,
    );
    let files = prop_oneof![
        6 => Just(valid_files()),
        1 => mutated_files(),
        2 => edited_fields(),
    ];
    fuzz::check("tracefs_pages", 3000, (files, pages), decode);
}

const FORMAT_TOKENS: &[&str] = &[
    "\n",
    "\t",
    "field:",
    ";",
    "offset:",
    "size:",
    "signed:",
    "0",
    "1",
    "2",
    "4",
    "8",
    "24",
    "32",
    "40",
    "pid",
    "pid_t",
    "common_flags",
    "common_pid",
    "function",
    "softexpires",
    "mode",
    "int",
    "unsigned char",
    "void *",
    "s64",
    "comm[16]",
    "[",
    "]",
    "format:",
    "ID: 374",
    "name:",
    " ",
];

#[test]
fn tracefs_formats() {
    let soup = || text::token_soup(FORMAT_TOKENS, 200);
    let files = prop_oneof![
        4 => mutated_files(),
        3 => edited_fields(),
        1 => (soup(), soup()).prop_map(|(a, b)| files(["374", a.as_str(), "460", b.as_str(), KALLSYMS])),
        1 => (text::any_text(200), text::any_text(200), text::any_text(200))
            .prop_map(|(a, b, k)| files(["374", a.as_str(), "460", b.as_str(), k.as_str()])),
    ];
    let pages = (valid_page(), valid_page()).prop_map(|(a, b)| vec![a, b]);
    fuzz::check("tracefs_formats", 1200, (files, pages), decode);
}

// ---- pacer's own state files ------------------------------------------------------------------

fn thread_scheds() -> impl Strategy<Value = ThreadSched> {
    (
        0u32..8,
        any::<u64>(),
        -20i32..20,
        0u32..100,
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        proptest::collection::vec(0usize..1024, 0..6),
    )
        .prop_map(|(policy, flags, nice, prio, rt, dl, period, mut cpus)| {
            cpus.sort_unstable();
            cpus.dedup();
            let mut attr = SchedAttr::new();
            attr.sched_policy = policy;
            attr.sched_flags = flags;
            attr.sched_nice = nice;
            attr.sched_priority = prio;
            attr.sched_runtime = rt;
            attr.sched_deadline = dl;
            attr.sched_period = period;
            ThreadSched { attr, affinity: cpus }
        })
}

fn ledgers() -> impl Strategy<Value = Ledger> {
    let pid = || (1u32..4_000_000, any::<u64>()).prop_map(|(pid, start)| ProcessId { pid, start });
    (
        "[0-9a-f-]{36}",
        pid(),
        proptest::option::of(pid()),
        proptest::collection::vec((pid(), 1u32..4_000_000, thread_scheds()), 0..6),
    )
        .prop_map(|(boot_id, pacer, guardian, entries)| Ledger {
            path: "/run/pacer/exec-1.state".into(),
            boot_id,
            pacer,
            guardian,
            entries: entries
                .into_iter()
                .map(|(process, tid, original)| {
                    (
                        tid,
                        Entry {
                            process,
                            tid,
                            original,
                        },
                    )
                })
                .collect::<BTreeMap<_, _>>(),
        })
}

fn sample<T: std::fmt::Debug>(s: impl Strategy<Value = T>, n: usize) -> Vec<T> {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    (0..n)
        .map(|_| s.new_tree(&mut runner).expect("a sample").current())
        .collect()
}

#[test]
fn ledger_text() {
    let lines = text::TextSamples::new(sample(ledgers(), 6).iter().map(Ledger::render).collect());
    let inputs = prop_oneof![
        1 => text::any_text(300),
        6 => text::mutated_lines(lines),
        1 => ledgers().prop_map(|l| l.render()),
    ];
    fuzz::check("ledger_text", 1500, inputs, |t: &String| {
        let path = Path::new("/run/pacer/exec-1.state");
        if let Some(l) = Ledger::parse(path, t) {
            // What parses is a ledger pacer can write back and read as the same.
            assert_eq!(Ledger::parse(path, &l.render()), Some(l));
        }
    });
}

#[test]
fn guardian_lines() {
    let line = |(pid, tid, s): (u32, u32, ThreadSched)| format!("track {pid} {tid} {}\n", s.encode());
    let protocol = sample(
        proptest::collection::vec(
            (1u32..100_000, 1u32..100_000, thread_scheds()).prop_map(line),
            1..5,
        ),
        6,
    );
    let lines = text::TextSamples::new(
        protocol
            .iter()
            .map(|l| l.concat() + "untrack 5\ndone\n")
            .collect(),
    );
    let inputs = prop_oneof![
        1 => text::any_text(200),
        6 => text::mutated_lines(lines),
    ];
    fuzz::check("guardian_lines", 1500, inputs, |t: &String| {
        // As the guardian reads its pipe: line by line, words split on whitespace.
        for l in t.lines() {
            let words: Vec<&str> = l.split_whitespace().collect();
            if let ["track", _pid, _tid, rest @ ..] = words.as_slice() {
                if let Some(s) = ThreadSched::decode(rest) {
                    let again = s.encode();
                    let again: Vec<&str> = again.split_whitespace().collect();
                    assert_eq!(ThreadSched::decode(&again), Some(s));
                }
            }
        }
    });
}

#[test]
fn cpuset_saved_state() {
    let state = |root: &str, restores: &[(&str, &str)]| {
        let mut s = format!(
            "pacer-cpuset-state 1\nboot_id 6f1c0a4e-94a9-4e0b-a7c5-3c7e0b3e9a11\npid 4242\nstarttime 123456\nversion v1\nroot {root}\n"
        );
        for (k, v) in restores {
            s.push_str(&format!("restore {k} {v}\n"));
        }
        s
    };
    let samples = vec![
        state(
            "/sys/fs/cgroup/cpuset",
            &[("cpuset.cpu_exclusive", "0"), ("cpuset.sched_load_balance", "1")],
        ),
        state("/sys/fs/cgroup", &[("cgroup.subtree_control", "-cpuset")]).replace("v1", "v2"),
        state("/mnt/with space", &[]),
    ];
    let inputs = prop_oneof![
        1 => text::any_text(300),
        6 => text::mutated_lines(text::TextSamples::new(samples)),
    ];
    fuzz::check("cpuset_saved_state", 1200, inputs, |t: &String| {
        if let Some(r) = fuzzing::saved_cpuset_state(t) {
            assert_eq!(fuzzing::saved_cpuset_state(&r).as_deref(), Some(r.as_str()));
        }
    });
}

// ---- /proc and /sys -------------------------------------------------------------------------

const MOUNTINFO: &str = "22 27 0:21 / /proc rw,relatime - proc proc rw
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime shared:9 - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/mem\\040ory rw,relatime master:3 shared:10 - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
44 23 0:8 / /sys/kernel/debug rw,relatime - debugfs debugfs rw
50 23 0:12 / /sys/kernel/tracing rw,nosuid,nodev,noexec,relatime - tracefs tracefs rw
";

const SCHED_DEBUG: &str = "Sched Debug Version: v0.11, 6.18.44
cpu#0, 2495.998 MHz
  .nr_running                    : 1
rt_rq[0]:/
  .rt_runtime                    : 950.000000

dl_rq[0]:
  .dl_nr_running                 : 0
  .dl_bw->bw                     : 996147
  .dl_bw->total_bw               : 157285

runnable tasks:
 S            task   PID
cpu#1
dl_rq[1]:
  .dl_nr_running                 : 1
  .dl_bw->bw                     : 996147
  .dl_bw->total_bw               : -52428
";

const PROC_SCHED: &str = "pacer (4242, #threads: 3)
-------------------------------------------------------------------
se.exec_start                                :        123456.789012
se.sum_exec_runtime                          :          1234.567890
se.nr_migrations                             :                   17
nr_switches                                  :                  240
policy                                       :                    6
prio                                         :                   -1
";

/// `file contents`: which `/proc` or `/sys` file the text is, then the text (so a failure shows
/// both).
#[test]
fn proc_and_sys_files() {
    let samples = vec![
        MOUNTINFO.to_string(),
        SCHED_DEBUG.to_string(),
        PROC_SCHED.to_string(),
        "0-3,6\n".to_string(),
        "0 1 2 3\n".to_string(),
        "1234567 890 12\n".to_string(),
    ];
    let texts = prop_oneof![
        1 => text::any_text(300),
        6 => text::mutated_lines(text::TextSamples::new(samples)),
    ];
    let which = proptest::sample::select(vec!["mountinfo", "cpulist", "sched_debug", "schedstat", "sched"]);
    fuzz::check(
        "proc_and_sys_files",
        2500,
        (which.prop_map(str::to_string), texts),
        |(which, t): &(String, String)| match which.as_str() {
            "mountinfo" => {
                let _ = format!("{:?}", parse_mountinfo(t));
            }
            "cpulist" => {
                if let Some(cpus) = parse_cpu_list(t) {
                    assert!(cpus.windows(2).all(|w| w[0] < w[1]), "ascending and distinct");
                }
            }
            "sched_debug" => {
                let _ = format!("{:?}", parse_sched_debug(t));
            }
            "schedstat" => {
                let _ = fuzzing::schedstat(t);
            }
            _ => {
                let _ = fuzzing::sched_field(t, "se.nr_migrations");
            }
        },
    );
}

/// A `/proc/PID/task/TID/sched` file of Linux 6.18 for a task of `policy` (the `dl.` lines for
/// SCHED_DEADLINE, `se.slice` for the fair policies, as `proc_sched_show_task()` prints them).
fn task_sched_file(policy: u32, runtime: i64, deadline: u64) -> String {
    let mut s = String::from(
        "worker (4242, #threads: 3)\n-------------------------------------------------------------------\n\
         se.exec_start                                :        543210.696855\n\
         se.sum_exec_runtime                          :             2.172784\n",
    );
    s.push_str(&format!("{:<45}:{:>21}\n", "policy", policy));
    s.push_str(&format!(
        "{:<45}:{:>21}\n",
        "prio",
        if policy == 6 { -1 } else { 120 }
    ));
    if policy == 6 {
        s.push_str(&format!("{:<45}:{:>21}\n", "dl.runtime", runtime));
        s.push_str(&format!("{:<45}:{:>21}\n", "dl.deadline", deadline as i64));
    } else {
        s.push_str(&format!("{:<45}:{:>21}\n", "se.slice", 1_400_000));
    }
    s.push_str("clock-delta                                  :                   91\n");
    s
}

/// The parser of `DlStateReader` (a real-time thread's own deadline state): what the kernel
/// prints parses to exactly the values printed; anything else is `None` or a typed error.
#[test]
fn dl_state_sched_file() {
    let printed = (prop_oneof![Just(6u32), 0u32..8], any::<i64>(), 0u64..(1 << 63));
    // Round trip: a deterministic property run (the values are the point, not robustness).
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    runner
        .run(&printed, |(policy, runtime, deadline)| {
            let text = task_sched_file(policy, runtime, deadline);
            let want = (policy == 6).then_some(pacer_adapt::DlState { deadline, runtime });
            prop_assert_eq!(fuzzing::dl_state(text.as_bytes()), Ok(want));
            Ok(())
        })
        .expect("what the kernel prints parses to the values printed");
    let samples = vec![
        task_sched_file(6, 2_827_216, 543_441_589_049),
        task_sched_file(6, -35_012, 1),
        task_sched_file(0, 0, 0),
        PROC_SCHED.to_string(),
    ];
    let texts = prop_oneof![
        1 => text::any_text(300),
        6 => text::mutated_lines(text::TextSamples::new(samples)),
    ];
    fuzz::check("dl_state_sched_file", 2500, texts, |t: &String| {
        if let Ok(Some(s)) = fuzzing::dl_state(t.as_bytes()) {
            // Only a SCHED_DEADLINE task's text has a state, and a non-negative deadline.
            assert!(s.deadline <= i64::MAX as u64);
            assert!(t.contains("dl.runtime") && t.contains("dl.deadline"));
        }
    });
}

#[test]
fn perf_group_read() {
    // `read()` of a perf group: words, biased to small counts (`nr` first) and the two ids.
    let word = prop_oneof![0u64..8, Just(11u64), Just(12u64), any::<u64>()];
    fuzz::check(
        "perf_group_read",
        1500,
        proptest::collection::vec(word, 0..16)
            .prop_map(|w| w.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>()),
        |bytes: &Vec<u8>| {
            let words: Vec<u64> = bytes
                .chunks_exact(8)
                .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
                .collect();
            let _ = fuzzing::perf_group_read(&words, 11, 12);
        },
    );
}
