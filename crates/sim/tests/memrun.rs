//! rt-app's `memrun` event in the simulator: work of count × the cost model's figure for the
//! buffer's size and layout (crates/sim/src/memcost.rs).

mod support;

use pacer_sim::{CostCurve, MemRunCost, Sim, SimConfig, SimError};
use pacer_workload::{
    parse_rtapp, ChaseOrder, Event, MemAccess, MemBuffer, MemBufferId, MemBufferKind, Phase, Policy,
    ThreadSpec, Workload,
};
use support::Jobs;

/// One FIFO thread running `events` once, with `buffers`.
fn workload(events: Vec<Event>, buffers: Vec<MemBuffer>) -> Workload {
    Workload {
        threads: vec![ThreadSpec {
            name: "t".into(),
            policy: Policy::Fifo { priority: 10 },
            phases: vec![Phase::new(1, events)],
            loops: Some(1),
            ..Default::default()
        }],
        mem_buffers: buffers,
        ..Default::default()
    }
}

fn chase(size: u64, order: ChaseOrder) -> MemBuffer {
    MemBuffer {
        name: "c".into(),
        size,
        kind: MemBufferKind::Chase { stride: 64, order },
    }
}

fn memrun(buffer: usize, access: MemAccess, count: u64) -> Event {
    Event::MemRun {
        buffer: MemBufferId(buffer),
        access,
        count,
    }
}

/// CPU time the thread took, ns.
fn exec(w: Workload, cfg: SimConfig) -> u64 {
    let mut sim = Sim::new(w, cfg).unwrap_or_else(|e| panic!("{e}"));
    sim.run_until(10_000_000_000, &mut Jobs::default());
    sim.stats()[0].exec
}

fn curve(points: &[(u64, u64)]) -> CostCurve {
    CostCurve::new("test", points.to_vec()).unwrap()
}

#[test]
fn memrun_is_count_times_the_models_cost() {
    let mut cfg = SimConfig::new(1);
    cfg.memrun = MemRunCost {
        read: curve(&[(1000, 2000)]),
        write: curve(&[(1000, 3000)]),
        // 2^15 bytes is halfway (in log2) between 2^10 and 2^20: 2000 ps a hop.
        chase_random: curve(&[(1 << 10, 1000), (1 << 20, 3000)]),
        chase_sequential: curve(&[(1 << 10, 500)]),
    };
    let bufs = vec![
        MemBuffer {
            name: "r".into(),
            size: 4096,
            kind: MemBufferKind::Read,
        },
        MemBuffer {
            name: "w".into(),
            size: 64,
            kind: MemBufferKind::Write,
        },
        chase(1 << 15, ChaseOrder::Random),
        chase(1 << 15, ChaseOrder::Sequential),
    ];
    let one = |e: Event| exec(workload(vec![e], bufs.clone()), cfg.clone());
    assert_eq!(one(memrun(0, MemAccess::Read, 500_000)), 1_000_000);
    assert_eq!(one(memrun(1, MemAccess::Write, 1_000)), 3_000);
    assert_eq!(one(memrun(2, MemAccess::Chase, 1_000)), 2_000);
    assert_eq!(one(memrun(3, MemAccess::Chase, 1_000)), 500);
    assert_eq!(one(memrun(3, MemAccess::Chase, 0)), 0);
    // Work like `mem`'s: scaled by work_scale.
    let mut scaled = cfg.clone();
    scaled.work_scale = 2.0;
    assert_eq!(
        exec(
            workload(vec![memrun(0, MemAccess::Read, 500_000)], bufs.clone()),
            scaled
        ),
        2_000_000
    );
}

#[test]
fn a_chase_costs_more_as_its_chain_outgrows_each_cache() {
    let hops = 100_000;
    let measured = MemRunCost::measured();
    let mut last = 0;
    for kib in [16u64, 256, 16 << 10, 256 << 10] {
        let buf = chase(kib << 10, ChaseOrder::Random);
        let want = (hops as f64 * measured.chase_random.ps_at(kib << 10) / 1000.0).round() as u64;
        let got = exec(
            workload(vec![memrun(0, MemAccess::Chase, hops)], vec![buf]),
            SimConfig::new(1),
        );
        assert_eq!(got, want, "{kib} KiB");
        assert!(got > 2 * last, "{kib} KiB: {got} ns, not well above {last} ns");
        last = got;
    }
    // A sequential chain of the largest size is prefetched: far cheaper.
    let seq = exec(
        workload(
            vec![memrun(0, MemAccess::Chase, hops)],
            vec![chase(256 << 20, ChaseOrder::Sequential)],
        ),
        SimConfig::new(1),
    );
    assert!(seq * 10 < last, "{seq} vs {last}");
}

#[test]
fn an_rt_app_file_with_memrun_runs_at_the_models_cost() {
    // Each pass reads a 1 MiB buffer about twice over, at the measured cost per byte at 1 MiB.
    let w = parse_rtapp(
        r#"{"tasks":{"t":{"policy":"SCHED_FIFO","loop":4,
              "memrun":{"type":"read","size":1048576,"count":2000000},
              "sleep":1000}}}"#,
        "t.json",
    )
    .unwrap();
    let per_byte = MemRunCost::measured().read.ps_at(1 << 20);
    let mut sim = Sim::new(w, SimConfig::new(1)).unwrap();
    let mut jobs = Jobs::default();
    sim.run_until(1_000_000_000, &mut jobs);
    let want = (2_000_000.0 * per_byte / 1000.0).round() as u64;
    let execs: Vec<u64> = jobs.0.iter().map(|j| j.exec).collect();
    assert_eq!(execs, [want; 4]);
}

#[test]
fn memrun_events_with_bad_buffers_are_refused() {
    let buf = vec![chase(4096, ChaseOrder::Random)];
    for (e, bufs) in [
        (memrun(1, MemAccess::Chase, 1), buf.clone()),
        (memrun(0, MemAccess::Read, 1), buf.clone()),
        // One position only.
        (
            memrun(0, MemAccess::Chase, 1),
            vec![chase(127, ChaseOrder::Random)],
        ),
    ] {
        match Sim::new(workload(vec![e.clone()], bufs), SimConfig::new(1)) {
            Err(SimError::BadThread { message, .. }) => assert!(message.contains("memrun"), "{message}"),
            other => panic!("{e:?}: {:?}", other.err()),
        }
    }
}
