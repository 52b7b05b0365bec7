//! rt-app's `util_min`/`util_max` for `pacer run`: utilisation clamps set with `sched_setattr`
//! and `SCHED_FLAG_UTIL_CLAMP_MIN`/`_MAX`, keeping the policy and its parameters
//! (`SCHED_FLAG_KEEP_POLICY | SCHED_FLAG_KEEP_PARAMS`, rt-app's `_set_thread_uclamp()`), after the
//! thread set its policy. As in rt-app they apply to SCHED_OTHER/IDLE/FIFO/RR threads and are
//! not set on SCHED_DEADLINE ones.
//!
//! A kernel built without `CONFIG_UCLAMP_TASK` refuses the flags (EOPNOTSUPP): the thread's
//! setup then fails and so does the run, before anything runs, rather than run a workload whose
//! clamps the kernel ignores.

use pacer_model::Policy;
use pacer_workload::ThreadSpec;

use super::RunError;
use crate::sched::{self, SchedAttr, SCHED_FLAG_KEEP_PARAMS, SCHED_FLAG_KEEP_POLICY};
use crate::sched::{SCHED_FLAG_UTIL_CLAMP_MAX, SCHED_FLAG_UTIL_CLAMP_MIN};

/// Largest clamp value (`SCHED_CAPACITY_SCALE`).
pub const UTIL_MAX: u32 = 1024;

/// Sets the calling thread's clamps, if its spec has any and its policy takes them.
pub(crate) fn apply(spec: &ThreadSpec, policy: &Policy) -> Result<(), RunError> {
    let Some(a) = attr(spec, policy) else {
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
            thread: spec.name.clone(),
            message: format!(
                "cannot set util_min {} / util_max {}: {reason}",
                show(spec.util_min),
                show(spec.util_max)
            ),
        }
    })
}

fn show(v: Option<u32>) -> String {
    v.map_or("(unset)".into(), |v| v.to_string())
}

/// The attribute setting `spec`'s clamps without touching the policy, if there is one to set.
fn attr(spec: &ThreadSpec, policy: &Policy) -> Option<SchedAttr> {
    if (spec.util_min.is_none() && spec.util_max.is_none()) || matches!(policy, Policy::Deadline(_)) {
        return None;
    }
    let mut a = SchedAttr::from_policy(policy, true);
    a.sched_flags |= SCHED_FLAG_KEEP_POLICY | SCHED_FLAG_KEEP_PARAMS;
    if let Some(min) = spec.util_min {
        a.sched_util_min = min;
        a.sched_flags |= SCHED_FLAG_UTIL_CLAMP_MIN;
    }
    if let Some(max) = spec.util_max {
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
        let spec = ThreadSpec {
            util_max: Some(512),
            ..ThreadSpec::default()
        };
        let a = attr(&spec, &Policy::Fifo { priority: 10 }).unwrap();
        assert_eq!(a.sched_util_max, 512);
        assert_ne!(a.sched_flags & SCHED_FLAG_UTIL_CLAMP_MAX, 0);
        assert_eq!(a.sched_flags & SCHED_FLAG_UTIL_CLAMP_MIN, 0);
        assert_ne!(a.sched_flags & SCHED_FLAG_KEEP_POLICY, 0);
        assert_ne!(a.sched_flags & SCHED_FLAG_KEEP_PARAMS, 0);
        assert!(attr(&ThreadSpec::default(), &Policy::Other { nice: 0 }).is_none());
        let us = pacer_model::Duration::from_us;
        let r = pacer_model::Reservation::new(us(100), us(1000), us(1000));
        assert!(attr(&spec, &Policy::Deadline(r)).is_none());
    }
}
