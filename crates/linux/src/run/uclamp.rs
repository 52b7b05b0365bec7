//! rt-app's `util_min`/`util_max` for `pacer run` (thread and phase level): utilisation clamps
//! set with `sched_setattr`
//! and `SCHED_FLAG_UTIL_CLAMP_MIN`/`_MAX`, keeping the policy and its parameters
//! (`SCHED_FLAG_KEEP_POLICY | SCHED_FLAG_KEEP_PARAMS`, rt-app's `_set_thread_uclamp()`), after the
//! thread set its policy. As in rt-app they apply to SCHED_OTHER/IDLE/FIFO/RR threads and are
//! not set on SCHED_DEADLINE ones.
//!
//! A kernel built without `CONFIG_UCLAMP_TASK` refuses the flags (EOPNOTSUPP): the thread's
//! setup then fails and so does the run, before anything runs, rather than run a workload whose
//! clamps the kernel ignores.

use pacer_model::Policy;
use pacer_workload::{Phase, ThreadSpec};

use super::RunError;
use crate::sched::{self, SchedAttr, SCHED_FLAG_KEEP_PARAMS, SCHED_FLAG_KEEP_POLICY};
use crate::sched::{SCHED_FLAG_UTIL_CLAMP_MAX, SCHED_FLAG_UTIL_CLAMP_MIN};

/// Largest clamp value (`SCHED_CAPACITY_SCALE`).
pub const UTIL_MAX: u32 = 1024;

/// A thread's utilisation clamps, either of which may be unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Clamps {
    pub min: Option<u32>,
    pub max: Option<u32>,
}

impl Clamps {
    pub(crate) fn of_thread(spec: &ThreadSpec) -> Clamps {
        Clamps {
            min: spec.util_min,
            max: spec.util_max,
        }
    }

    pub(crate) fn of_phase(phase: &Phase) -> Clamps {
        Clamps {
            min: phase.util_min,
            max: phase.util_max,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.min.is_none() && self.max.is_none()
    }
}

/// Sets the calling thread's clamps, if there are any and its policy takes them (thread `name`
/// in errors).
pub(crate) fn apply(name: &str, clamps: Clamps, policy: &Policy) -> Result<(), RunError> {
    let Some(a) = attr(clamps, policy) else {
        return Ok(());
    };
    sched::set_attr(0, &a).map_err(|e| {
        let reason = match e.errno() {
            Some(libc::EOPNOTSUPP) => "this kernel has no utilisation clamping (it was built \
                without CONFIG_UCLAMP_TASK): sched_setattr refuses SCHED_FLAG_UTIL_CLAMP (EOPNOTSUPP); \
                remove util_min/util_max from the file or run it on a kernel with uclamp"
                .to_string(),
            _ => format!("sched_setattr refused them: {e}"),
        };
        RunError::BadThread {
            thread: name.to_string(),
            message: format!(
                "cannot set util_min {} / util_max {}: {reason}",
                show(clamps.min),
                show(clamps.max)
            ),
        }
    })
}

fn show(v: Option<u32>) -> String {
    v.map_or("(unset)".into(), |v| v.to_string())
}

/// The attribute setting `clamps` without touching the policy, if there is one to set.
fn attr(clamps: Clamps, policy: &Policy) -> Option<SchedAttr> {
    if clamps.is_empty() || matches!(policy, Policy::Deadline(_)) {
        return None;
    }
    let mut a = SchedAttr::from_policy(policy, true);
    a.sched_flags |= SCHED_FLAG_KEEP_POLICY | SCHED_FLAG_KEEP_PARAMS;
    if let Some(min) = clamps.min {
        a.sched_util_min = min;
        a.sched_flags |= SCHED_FLAG_UTIL_CLAMP_MIN;
    }
    if let Some(max) = clamps.max {
        a.sched_util_max = max;
        a.sched_flags |= SCHED_FLAG_UTIL_CLAMP_MAX;
    }
    Some(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamps_keep_the_policy_and_skip_deadline() {
        let spec = Clamps {
            min: None,
            max: Some(512),
        };
        let a = attr(spec, &Policy::Fifo { priority: 10 }).unwrap();
        assert_eq!(a.sched_util_max, 512);
        assert_ne!(a.sched_flags & SCHED_FLAG_UTIL_CLAMP_MAX, 0);
        assert_eq!(a.sched_flags & SCHED_FLAG_UTIL_CLAMP_MIN, 0);
        assert_ne!(a.sched_flags & SCHED_FLAG_KEEP_POLICY, 0);
        assert_ne!(a.sched_flags & SCHED_FLAG_KEEP_PARAMS, 0);
        assert!(attr(
            Clamps::of_thread(&ThreadSpec::default()),
            &Policy::Other { nice: 0 }
        )
        .is_none());
        let us = pacer_model::Duration::from_us;
        let r = pacer_model::Reservation::new(us(100), us(1000), us(1000));
        assert!(attr(spec, &Policy::Deadline(r)).is_none());
    }
}
