//! rt-app's `taskgroup` in `pacer run`: the groups are created before the threads start and
//! removed after they end (`cgroup::taskgroup`, which also says what is left as it was); each
//! thread moves itself, as in rt-app: into its thread-level group when it starts, into a phase's
//! group at the start of each pass of that phase when it is not there already (sticky, like a
//! phase's policy), and back to the group it started in before it ends.

use std::path::PathBuf;

use pacer_workload::{ThreadSpec, Workload};

use super::RunError;
use crate::cgroup::taskgroup::{self, CpuHierarchy, TaskGroups};

/// The task groups a workload names (thread- and phase-level), in file order, without repeats.
fn named(w: &Workload) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in &w.threads {
        for g in t
            .taskgroup
            .iter()
            .chain(t.phases.iter().filter_map(|p| p.taskgroup.as_ref()))
        {
            if !out.contains(g) {
                out.push(g.clone());
            }
        }
    }
    out
}

/// Creates the workload's task groups, if it names any (before any thread exists).
pub(crate) fn create(w: &Workload) -> Result<Option<TaskGroups>, RunError> {
    let names = named(w);
    if names.is_empty() {
        return Ok(None);
    }
    let hier = CpuHierarchy::detect().map_err(|e| RunError::Setup(format!("task groups {names:?}: {e}")))?;
    TaskGroups::create(&hier, &names)
        .map(Some)
        .map_err(|e| RunError::Setup(format!("creating the task groups {names:?}: {e}")))
}

/// A thread's membership: where it started, where it is.
pub(crate) struct Member<'a> {
    hier: &'a CpuHierarchy,
    origin: PathBuf,
    current: Option<&'a str>,
    thread: &'a str,
}

impl<'a> Member<'a> {
    /// For a thread whose spec names groups: remembers its group and moves it into its
    /// thread-level group, if it has one.
    pub(crate) fn join(
        hier: Option<&'a CpuHierarchy>,
        spec: &'a ThreadSpec,
    ) -> Result<Option<Member<'a>>, RunError> {
        if !spec.uses_taskgroups() {
            return Ok(None);
        }
        let hier = hier.ok_or_else(|| RunError::Setup("task groups were not created".into()))?;
        let origin =
            taskgroup::current_dir(hier, crate::sched::gettid()).map_err(|e| RunError::BadThread {
                thread: spec.name.clone(),
                message: format!("finding its cgroup: {e}"),
            })?;
        let mut m = Member {
            hier,
            origin,
            current: None,
            thread: &spec.name,
        };
        if let Some(g) = &spec.taskgroup {
            m.enter(g)?;
        }
        Ok(Some(m))
    }

    /// Moves the thread into `group` unless it is there (rt-app's `set_thread_taskgroup()`).
    pub(crate) fn enter(&mut self, group: &'a str) -> Result<(), RunError> {
        if self.current == Some(group) {
            return Ok(());
        }
        taskgroup::attach_self(self.hier, group).map_err(|e| RunError::BadThread {
            thread: self.thread.to_string(),
            message: format!("moving into task group {group}: {e}"),
        })?;
        self.current = Some(group);
        Ok(())
    }

    /// Back to the group the thread started in, so that the groups can be removed.
    pub(crate) fn leave(self) -> Result<(), RunError> {
        if self.current.is_none() {
            return Ok(());
        }
        taskgroup::attach(&self.origin, crate::sched::gettid()).map_err(|e| RunError::BadThread {
            thread: self.thread.to_string(),
            message: format!("moving back to {}: {e}", self.origin.display()),
        })
    }
}
