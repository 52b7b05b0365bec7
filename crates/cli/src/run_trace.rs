//! `pacer run --trace`: the kernel's record of the run's context switches and wake-ups
//! (`pacer_linux::sched_trace`) written as a Perfetto protobuf trace by the encoder of
//! `pacer sim --trace` (`pacer_sim::output::perfetto`), so a run and its simulation open side by
//! side in ui.perfetto.dev.
//!
//! This module only adapts: each `sched_switch`/`sched_waking` record becomes the same event
//! with the kernel's pids, comms, priorities and raw `prev_state`, on its CPU; the run's threads
//! are described as one process (pacer's pid, the command line) with the workload's names, so
//! the UI shows `render` rather than the 15-byte comm; the other tasks keep the comm of their
//! records. Time stamps stay CLOCK_MONOTONIC ns as recorded, the clock of the run's origin: a
//! job's `release_ns` (jobs CSV) plus the run's `origin_ns` is the trace time of its release,
//! and the optional job slices are placed so.
//!
//! Switches the kernel did not record are counted, not invented: a traced thread that leaves a
//! CPU it was not seen entering ([`Written::unrecorded_switch_ins`]; the filter keeps every
//! switch of a traced thread, so only the kernel can have missed it). Seen on the development
//! VM (Linux 6.18, haltpoll idle): on CPU 1, no `sched_switch` away from the idle task is ever
//! recorded, with no filter either, while CPU 0 records them; a thread woken from idle there
//! shows its switch-out and not its switch-in.

use std::io::{self, Write};

use pacer_linux::kernel::ReservationChange;
use pacer_linux::sched_trace::{SchedEvent, SchedTrace};
use pacer_linux::sys::Uname;
use pacer_sim::output::perfetto::{PerfettoTrace, Task};
use pacer_workload::jobs::JobRecord;

/// The process of the run as the trace describes it.
pub struct Process<'a> {
    pub pid: i32,
    pub ppid: i32,
    pub cmdline: &'a str,
    /// The run's threads, by thread id of the job records: (tid, name); tid 0 for a thread that
    /// never started.
    pub threads: &'a [(u32, &'a str)],
}

/// What was written, for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Written {
    pub switches: u64,
    pub wakings: u64,
    pub job_slices: u64,
    /// Switch-outs of a traced thread from a CPU on which its switch-in was not recorded (after
    /// its first event, which may find it running).
    pub unrecorded_switch_ins: u64,
    /// Reservation changes written as reserved-bandwidth counter values (`pacer exec`).
    pub reservations: u64,
}

/// Writes `trace` (and `jobs` as slices, their times from `origin_ns`; `reservations` pacer
/// applied as the threads' reserved-bandwidth counters) to `w` as a Perfetto trace; returns the
/// writer and the counts.
#[allow(clippy::too_many_arguments)]
pub fn write_perfetto<W: Write>(
    w: W,
    trace: &SchedTrace,
    process: &Process<'_>,
    uname: &Uname,
    cpus: u32,
    jobs: &[JobRecord],
    origin_ns: u64,
    reservations: &[ReservationChange],
) -> io::Result<(W, Written)> {
    let mut out = PerfettoTrace::for_kernel(w, cpus);
    out.system_info(&uname.sysname, &uname.version, &uname.release, &uname.machine);
    let first = trace
        .records
        .first()
        .map_or(origin_ns, |r| r.ts_ns.min(origin_ns));
    let threads: Vec<(i32, &str)> = process
        .threads
        .iter()
        .filter(|(tid, _)| *tid != 0)
        .map(|&(tid, name)| (tid as i32, name))
        .collect();
    out.process(first, (process.pid, process.ppid, process.cmdline), &threads);
    let mut n = Written::default();
    // Per traced thread: where it runs (`Some(cpu)`), `None` when off every CPU; absent before
    // its first switch.
    let mut running: std::collections::HashMap<i32, Option<u32>> = std::collections::HashMap::new();
    let traced: std::collections::HashSet<i32> = trace.tids.iter().map(|&t| t as i32).collect();
    for r in &trace.records {
        match r.event {
            SchedEvent::Switch {
                ref prev_comm,
                prev_pid,
                prev_prio,
                prev_state,
                ref next_comm,
                next_pid,
                next_prio,
            } => {
                let (pc, nc) = (prev_comm.as_str(), next_comm.as_str());
                let prev = Task {
                    pid: prev_pid,
                    comm: &pc,
                    prio: prev_prio,
                };
                let next = Task {
                    pid: next_pid,
                    comm: &nc,
                    prio: next_prio,
                };
                out.sched_switch(r.ts_ns, r.cpu, prev, prev_state, next);
                n.switches += 1;
                if traced.contains(&prev_pid) {
                    if let Some(&was) = running.get(&prev_pid) {
                        if was != Some(r.cpu) {
                            n.unrecorded_switch_ins += 1;
                        }
                    }
                    running.insert(prev_pid, None);
                }
                if traced.contains(&next_pid) {
                    running.insert(next_pid, Some(r.cpu));
                }
            }
            SchedEvent::Waking {
                ref comm,
                pid,
                prio,
                target_cpu,
            } => {
                let c = comm.as_str();
                let woken = Task { pid, comm: &c, prio };
                out.sched_waking(r.ts_ns, r.cpu, r.common_pid, woken, target_cpu);
                n.wakings += 1;
            }
        }
    }
    for j in jobs {
        let Some(&(tid, _)) = process.threads.get(j.thread as usize) else {
            continue;
        };
        if tid != 0 {
            out.job_slices(j, process.pid, tid as i32, origin_ns);
            n.job_slices += 1;
        }
    }
    // A thread's counters hang from its track, keyed like its job slices by its index among
    // the described threads; a reservation of a thread the trace does not describe is left out.
    for r in reservations {
        let Some(index) = process.threads.iter().position(|&(tid, _)| tid == r.tid) else {
            continue;
        };
        out.reserved_bandwidth(
            r.t_ns,
            index as u32,
            r.runtime_ns,
            r.period_ns,
            process.pid,
            r.tid as i32,
        );
        n.reservations += 1;
    }
    Ok((out.finish()?, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacer_linux::sched_trace::{Comm, SchedRecord};
    use pacer_sim::output::perfetto::wire::{self, Value};

    fn fields(b: &[u8]) -> Vec<(u32, Value<'_>)> {
        wire::fields(b).collect::<Result<_, _>>().expect("valid protobuf")
    }

    fn field<'a>(f: &[(u32, Value<'a>)], n: u32) -> Value<'a> {
        f.iter()
            .find(|(k, _)| *k == n)
            .unwrap_or_else(|| panic!("no field {n}"))
            .1
    }

    fn text<'a>(f: &[(u32, Value<'a>)], n: u32) -> &'a str {
        std::str::from_utf8(field(f, n).bytes().unwrap()).unwrap()
    }

    /// A task of another process (pid 77) waking a SCHED_DEADLINE workload thread from CPU 1,
    /// the idle task switching to it on CPU 0, and a kworker preempting it there.
    fn records() -> SchedTrace {
        SchedTrace {
            records: vec![
                SchedRecord {
                    ts_ns: 5_000_000_100,
                    cpu: 1,
                    common_pid: 77,
                    event: SchedEvent::Waking {
                        comm: Comm::new("render-0"),
                        pid: 4242,
                        prio: -1,
                        target_cpu: 0,
                    },
                },
                SchedRecord {
                    ts_ns: 5_000_000_200,
                    cpu: 0,
                    common_pid: 0,
                    event: SchedEvent::Switch {
                        prev_comm: Comm::new("swapper/0"),
                        prev_pid: 0,
                        prev_prio: 120,
                        prev_state: 0,
                        next_comm: Comm::new("render-0"),
                        next_pid: 4242,
                        next_prio: -1,
                    },
                },
                SchedRecord {
                    ts_ns: 5_000_900_000,
                    cpu: 0,
                    common_pid: 4242,
                    event: SchedEvent::Switch {
                        prev_comm: Comm::new("render-0"),
                        prev_pid: 4242,
                        prev_prio: -1,
                        prev_state: 0x100,
                        next_comm: Comm::new("kworker/0:1"),
                        next_pid: 31,
                        next_prio: 120,
                    },
                },
            ],
            lost_per_cpu: vec![(0, 0), (1, 0)],
            tids: vec![4242],
        }
    }

    #[test]
    fn kernel_records_become_ftrace_events_with_their_own_pids_and_comms() {
        let threads = [(4242u32, "render"), (0, "never-started")];
        let process = Process {
            pid: 4000,
            ppid: 1,
            cmdline: "pacer run w.json",
            threads: &threads,
        };
        let uname = Uname {
            sysname: "Linux".into(),
            version: "#1 SMP".into(),
            release: "6.18.0".into(),
            hostname: "test".into(),
            machine: "x86_64".into(),
        };
        let job = JobRecord {
            thread: 0,
            job: 3,
            release: 0,
            start: 100,
            finish: 900_000,
            deadline: 16_667_000,
            period: 16_667_000,
            exec: 800_000,
            preemptions: 0,
            migrations: 0,
            cpu: 0,
        };
        let (bytes, n) = write_perfetto(
            Vec::new(),
            &records(),
            &process,
            &uname,
            2,
            &[job],
            5_000_000_000,
            // pacer (exec) reserved 2 ms / 10 ms for the thread.
            &[ReservationChange {
                t_ns: 5_000_000_050,
                tid: 4242,
                runtime_ns: 2_000_000,
                period_ns: 10_000_000,
            }],
        )
        .unwrap();
        assert_eq!(
            n,
            Written {
                switches: 2,
                wakings: 1,
                job_slices: 1,
                unrecorded_switch_ins: 0,
                reservations: 1,
            }
        );
        let mut tree_threads = Vec::new();
        let mut events = Vec::new(); // (cpu, ts, pid, kind, payload fields)
        let mut release = None;
        let mut slices = Vec::new();
        for (k, p) in fields(&bytes) {
            assert_eq!(k, 1);
            let packet = fields(p.bytes().unwrap());
            for &(k, v) in &packet {
                match k {
                    45 => {
                        let u = fields(field(&fields(v.bytes().unwrap()), 1).bytes().unwrap());
                        release = Some(text(&u, 3).to_string());
                        assert_eq!(text(&u, 1), "Linux");
                    }
                    2 => {
                        for (k, v) in fields(v.bytes().unwrap()) {
                            let f = fields(v.bytes().unwrap());
                            match k {
                                1 => {
                                    assert_eq!(field(&f, 1).varint(), Some(4000));
                                    assert_eq!(text(&f, 3), "pacer run w.json");
                                }
                                2 => tree_threads.push((
                                    field(&f, 1).varint().unwrap(),
                                    text(&f, 2).to_string(),
                                    field(&f, 3).varint().unwrap(),
                                )),
                                _ => panic!("process tree field {k}"),
                            }
                        }
                    }
                    1 => {
                        let b = fields(v.bytes().unwrap());
                        let cpu = field(&b, 1).varint().unwrap();
                        for (k, e) in &b {
                            if *k != 2 {
                                continue;
                            }
                            let e = fields(e.bytes().unwrap());
                            let (kind, payload) = e
                                .iter()
                                .find(|(k, _)| *k > 2)
                                .map(|(k, v)| (*k, v.bytes().unwrap()))
                                .unwrap();
                            events.push((
                                cpu,
                                field(&e, 1).varint().unwrap(),
                                field(&e, 2).varint().unwrap(),
                                kind,
                                fields(payload),
                            ));
                        }
                    }
                    11 => {
                        let ts = field(&packet, 8).varint().unwrap();
                        let e = fields(v.bytes().unwrap());
                        slices.push((ts, field(&e, 9).varint().unwrap()));
                    }
                    8 | 10 | 60 => {}
                    other => panic!("packet field {other}"),
                }
            }
        }
        assert_eq!(release.as_deref(), Some("6.18.0"));
        // Only the thread that ran is described, with the workload's name, in pacer's process.
        assert_eq!(tree_threads, vec![(4242, "render".to_string(), 4000)]);
        events.sort_by_key(|e| e.1);
        assert_eq!(events.len(), 3);
        // The waking is on the waker's CPU, with the waker as the event's pid.
        let (cpu, ts, pid, kind, w) = &events[0];
        assert_eq!((*cpu, *ts, *pid, *kind), (1, 5_000_000_100, 77, 20));
        assert_eq!(text(w, 1), "render-0");
        assert_eq!(field(w, 2).varint(), Some(4242));
        assert_eq!(field(w, 3).varint(), Some(u64::MAX)); // -1, not zigzag
        assert_eq!(field(w, 5).varint(), Some(0));
        // The switch-in from the idle task keeps pid 0 and its comm.
        let (cpu, ts, pid, kind, s) = &events[1];
        assert_eq!((*cpu, *ts, *pid, *kind), (0, 5_000_000_200, 0, 4));
        assert_eq!(text(s, 1), "swapper/0");
        assert_eq!(field(s, 2).varint(), Some(0));
        assert_eq!(text(s, 5), "render-0");
        assert_eq!(field(s, 6).varint(), Some(4242));
        assert_eq!(field(s, 7).varint(), Some(u64::MAX));
        // Preempted by a kworker: the raw prev_state (TASK_REPORT_MAX) and the kworker's pid.
        let (_, _, pid, kind, s) = &events[2];
        assert_eq!((*pid, *kind), (4242, 4));
        assert_eq!(field(s, 4).varint(), Some(0x100));
        assert_eq!(text(s, 5), "kworker/0:1");
        assert_eq!(field(s, 6).varint(), Some(31));
        assert_eq!(field(s, 7).varint(), Some(120));
        // The job's slice is at its release and finish plus the origin, its used-bandwidth
        // counter (type 4) at the finish, and the reserved-bandwidth counter at the change.
        assert_eq!(
            slices,
            vec![
                (5_000_000_000, 1),
                (5_000_900_000, 2),
                (5_000_900_000, 4),
                (5_000_000_050, 4)
            ]
        );
    }

    #[test]
    fn switch_outs_without_their_switch_in_are_counted() {
        let mut t = records();
        let switch = |ts, cpu, prev_pid, next_pid| SchedRecord {
            ts_ns: ts,
            cpu,
            common_pid: prev_pid,
            event: SchedEvent::Switch {
                prev_comm: Comm::new("a"),
                prev_pid,
                prev_prio: 120,
                prev_state: 1,
                next_comm: Comm::new("b"),
                next_pid,
                next_prio: 120,
            },
        };
        // Back on CPU 1 from idle, switch-in missing, then out again; a first switch-out of
        // another traced thread (running when the recording began) is not counted.
        t.records.push(switch(5_010_000_000, 1, 4242, 0));
        t.records.push(switch(5_020_000_000, 1, 4242, 0));
        t.records.push(switch(5_030_000_000, 0, 4343, 0));
        t.tids.push(4343);
        let process = Process {
            pid: 1,
            ppid: 0,
            cmdline: "x",
            threads: &[],
        };
        let uname = Uname::this_machine();
        let (_, n) = write_perfetto(Vec::new(), &t, &process, &uname, 2, &[], 0, &[]).unwrap();
        assert_eq!(n.switches, 5);
        assert_eq!(
            n.unrecorded_switch_ins, 2,
            "two switch-outs on CPU 1 with no switch-in there"
        );
    }

    #[test]
    fn write_errors_are_returned() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::new(io::ErrorKind::StorageFull, "disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let process = Process {
            pid: 1,
            ppid: 0,
            cmdline: "x",
            threads: &[],
        };
        let r = write_perfetto(Full, &records(), &process, &Uname::this_machine(), 2, &[], 0, &[]);
        assert_eq!(r.err().map(|e| e.kind()), Some(io::ErrorKind::StorageFull));
    }
}
