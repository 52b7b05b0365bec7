//! Applying supervisor grants to a kernel (lfspp §4.2): admission-safe ordering and "system full"
//! handling without panics.

mod support;

use pacer_adapt::supervisor::{apply_grants, ApplyOutcome, Grant};
use pacer_adapt::{Compression, Kernel, KernelError, Request, Supervisor};
use pacer_model::{Duration, Policy, Reservation, ReservationFlags};
use support::{FakeKernel, Op, MS};

fn dl(q: u64, p: u64) -> Policy {
    Policy::Deadline(Reservation::new(Duration(q), Duration(p), Duration(p)))
}

fn grant(id: u32, q: u64, p: u64, min_q: u64) -> Grant {
    Grant { id, q, p, min_q }
}

#[test]
fn shrinking_reservations_are_applied_before_growing_ones() {
    // 0.6 + 0.3 in place under a 0.95 limit; the new grants are 0.2 + 0.7. Growing thread 2 first
    // would hit admission (0.6 + 0.7 > 0.95); shrinking thread 1 first makes room.
    let mut k = FakeKernel::new(1, 0.95);
    k.periodic(1, 10 * MS, 0);
    k.periodic(2, 10 * MS, 0);
    k.set_policy(1, dl(6 * MS, 10 * MS)).unwrap();
    k.set_policy(2, dl(3 * MS, 10 * MS)).unwrap();
    k.log.clear();
    let flags = ReservationFlags {
        reset_on_fork: true,
        ..ReservationFlags::default()
    };
    let rep = apply_grants(
        &mut k,
        &[grant(2, 7 * MS, 10 * MS, 1024), grant(1, 2 * MS, 10 * MS, 1024)],
        flags,
    );
    assert!(!rep.system_full, "{rep:?}");
    assert_eq!(rep.results[0], (2, ApplyOutcome::Applied { q: 7 * MS }));
    assert_eq!(rep.results[1], (1, ApplyOutcome::Applied { q: 2 * MS }));
    let order: Vec<u32> = k
        .log
        .iter()
        .filter_map(|(_, op)| match op {
            Op::SetPolicy { tid, .. } => Some(*tid),
            _ => None,
        })
        .collect();
    assert_eq!(order, vec![1, 2]);
    assert!(k.deadline(2).unwrap().flags.reset_on_fork);
}

#[test]
fn admission_refusals_keep_previous_retry_minimum_or_refuse() {
    let mut k = FakeKernel::new(1, 0.5);
    for t in 1..=4 {
        k.periodic(t, 10 * MS, 0);
    }
    k.set_policy(1, dl(3 * MS, 10 * MS)).unwrap(); // 0.3 in place
    let flags = ReservationFlags::default();
    // Order of application: ascending change of bandwidth, ties by id: 9 (+0.1), 1 (+0.3),
    // 3 (+0.3), 2 (+0.4).
    // - 9 does not exist: a kernel error, recorded.
    // - 1 grows to 0.6 > 0.5: refused, keeps its 0.3.
    // - 3 (new) asks 0.3: 0.3 + 0.3 > 0.5 refused; retried at its minimum 0.2: 0.5, admitted.
    // - 2 (new) asks 0.4 with minimum 0.1: both refused (0.5 + 0.1 > 0.5); keeps its own policy.
    let grants = [
        grant(1, 6 * MS, 10 * MS, 1024),
        grant(2, 4 * MS, 10 * MS, MS),
        grant(3, 3 * MS, 10 * MS, 2 * MS),
        grant(9, MS, 10 * MS, 1024),
    ];
    let rep = apply_grants(&mut k, &grants, flags);
    assert!(rep.system_full);
    assert_eq!(
        rep.outcome(9),
        Some(&ApplyOutcome::Failed {
            error: KernelError::NoSuchThread(9)
        })
    );
    assert_eq!(
        rep.outcome(1),
        Some(&ApplyOutcome::KeptPrevious {
            q: 3 * MS,
            p: 10 * MS
        })
    );
    assert_eq!(
        rep.outcome(3),
        Some(&ApplyOutcome::ReducedToMinimum { q: 2 * MS })
    );
    assert!(matches!(rep.outcome(2), Some(ApplyOutcome::Refused { .. })));
    assert_eq!(
        rep.results.iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![1, 2, 3, 9],
        "grant order"
    );
    assert_eq!(k.deadline(1).unwrap().runtime.0, 3 * MS);
    assert_eq!(k.deadline(3).unwrap().runtime.0, 2 * MS);
    assert!(k.deadline(2).is_none());
    // Unchanged reservations cost no system call.
    let n = k.log.len();
    let rep = apply_grants(&mut k, &[grant(1, 3 * MS, 10 * MS, 1024)], flags);
    assert_eq!(rep.results[0], (1, ApplyOutcome::Unchanged));
    assert_eq!(k.log.len(), n);
}

#[test]
fn supervisor_grants_are_admitted_by_the_kernel_rule() {
    // Whatever the policy, compressed grants pass the kernel's Σ Q/P ≤ limit.
    for policy in [
        Compression::Proportional,
        Compression::Weighted,
        Compression::PriorityOrdered,
    ] {
        let mut k = FakeKernel::new(2, 1.9);
        let mut reqs = Vec::new();
        for t in 1..=7u32 {
            k.periodic(t, 0, 0);
            let p = (t as u64 + 3) * 3 * MS + 17;
            reqs.push(Request {
                weight: t as f64,
                priority: (t % 3) as i32,
                ..Request::new(t, p * 2 / 3, p)
            });
        }
        let a = Supervisor::new(k.dl_bandwidth_limit(None), policy)
            .allocate(&reqs)
            .unwrap();
        let rep = apply_grants(&mut k, &a.grants, ReservationFlags::default());
        assert!(!rep.system_full, "{policy:?}: {rep:?}");
        assert!(rep.results.iter().all(|(_, o)| o.in_place()), "{policy:?}");
        let total: f64 = a.grants.iter().map(|g| g.bandwidth()).sum();
        assert!(total <= 1.9 && total > 1.89, "{policy:?}: {total}");
    }
}
