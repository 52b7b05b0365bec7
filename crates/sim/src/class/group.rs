//! Task groups of the fair class: the cgroup v1 cpu controller's groups (rt-app `taskgroup`), each
//! with `cpu.shares` 1024, and the cost of moving a thread between them.
//!
//! **Shares.** `kernel/sched/fair.c` (Linux 6.18) gives each group a `sched_entity` per CPU in
//! its parent's `cfs_rq`, owning a `cfs_rq` of its own for its threads and child groups. The
//! group entity's weight on a CPU is `calc_group_shares()`: shares × the group's load on this
//! CPU / its load on all CPUs, clamped to [MIN_SHARES, shares], recomputed by
//! `update_cfs_group()` when the group's queue changes and applied by `reweight_entity()`. The
//! threads of the group then share that weight by their own weights.
//!
//! This module computes those weights and flattens them: a thread's effective weight is its own
//! weight times, at each level up to the root, the group entity's weight over the load of the
//! group's queue on that CPU. The fair class then queues every thread on its CPU's one `cfs_rq`
//! with that weight, and the engine reweights the threads of a group (lag kept, as
//! `reweight_entity()` keeps it) whenever one of them joins or leaves a run queue. Where this
//! departs from the kernel's hierarchical pick is said in docs/simulator.md ("Task groups").
//! The loads are the instantaneous `cfs_rq->load.weight` of every CPU (the kernel's formula (1)
//! above `calc_group_shares()`), not the PELT averages (`tg->load_avg`) the kernel approximates
//! them with.
//!
//! **Moves.** Writing a TID to a v1 group's `tasks` (`cgroup1_tasks_write()` →
//! `cgroup_attach_lock()` → `percpu_down_write(&cgroup_threadgroup_rwsem)`) enters the rwsem's
//! `rcu_sync` (`kernel/rcu/sync.c`): from `GP_IDLE` the writer sleeps in `synchronize_rcu()`
//! for a grace period; while the callback of the previous `rcu_sync_exit()` is still pending
//! (`GP_EXIT`, `GP_REPLAY`: a grace period after the last move ended) it passes at once; a
//! writer that arrives while another waits for its grace period waits for the same one.
//! [`RcuSync`] keeps that state for the whole machine.

use crate::record::ThreadId;

/// `cpu.shares` of every group: the v1 default, `scale_load(1024)`.
const SHARES: u64 = 1024 << SCHED_FIXEDPOINT_SHIFT;
/// `MIN_SHARES`, unscaled (the floor `calc_group_shares()` returns, in `scale_load` units).
const MIN_SHARES: u64 = 2;
/// `SCHED_FIXEDPOINT_SHIFT`: group weights and loads are kept at the kernel's high resolution.
const SCHED_FIXEDPOINT_SHIFT: u32 = 10;

/// `scale_load_down()`: a high-resolution weight in nice-0 = 1024 units, at least 2 when not 0.
fn scale_load_down(w: u64) -> u64 {
    if w == 0 {
        0
    } else {
        (w >> SCHED_FIXEDPOINT_SHIFT).max(2)
    }
}

/// The groups a workload names, with their per-CPU loads and entity weights.
#[derive(Debug, Clone)]
pub(crate) struct TaskGroups {
    /// Each group's path (`/tg1`, `/tg1/tg11`), every parent before its children.
    paths: Vec<String>,
    parent: Vec<Option<usize>>,
    cpus: usize,
    /// `cfs_rq->load.weight` of each group's queue on each CPU (`[group * cpus + cpu]`,
    /// `scale_load` units): its threads' weights and its child groups' entity weights.
    load: Vec<u64>,
    /// The group entity's weight on each CPU (`calc_group_shares()`), kept when the group's
    /// queue empties, as `update_cfs_group()` keeps it.
    weight: Vec<u64>,
}

impl TaskGroups {
    /// The groups of `paths` and their ancestors, as mkdir -p creates them; `/` is the root,
    /// not a group.
    pub fn new<'a>(paths: impl IntoIterator<Item = &'a str>, cpus: usize) -> Self {
        let mut g = TaskGroups {
            paths: Vec::new(),
            parent: Vec::new(),
            cpus,
            load: Vec::new(),
            weight: Vec::new(),
        };
        for p in paths {
            let mut parent = None;
            let mut prefix = String::new();
            for part in p.split('/').filter(|s| !s.is_empty()) {
                prefix.push('/');
                prefix.push_str(part);
                parent = Some(match g.index(&prefix) {
                    Some(i) => i,
                    None => {
                        g.paths.push(prefix.clone());
                        g.parent.push(parent);
                        g.paths.len() - 1
                    }
                });
            }
        }
        g.load = vec![0; g.paths.len() * cpus];
        g.weight = vec![SHARES; g.paths.len() * cpus];
        g
    }

    /// The group at `path` (`None` for the root `/` or a path not named by the workload).
    pub fn index(&self, path: &str) -> Option<usize> {
        let trimmed = path.trim_end_matches('/');
        self.paths.iter().position(|p| p == trimmed)
    }

    /// Recomputes every group's load and entity weight on every CPU from the threads on run
    /// queues now: (group, CPU, the thread's own weight in nice-0 = 1024 units). Children come
    /// after their parents, so walking the groups backwards settles each group's load before
    /// its parent adds its entity.
    pub fn update(&mut self, members: impl Iterator<Item = (usize, usize, u64)>) {
        self.load.iter_mut().for_each(|l| *l = 0);
        for (g, cpu, w) in members {
            self.load[g * self.cpus + cpu] += w << SCHED_FIXEDPOINT_SHIFT;
        }
        for g in (0..self.paths.len()).rev() {
            let row = g * self.cpus..(g + 1) * self.cpus;
            // `tg->load_avg`: the group's load on all CPUs (instantaneous here).
            let total: u64 = self.load[row.clone()].iter().map(|&l| scale_load_down(l)).sum();
            for cpu in 0..self.cpus {
                let i = g * self.cpus + cpu;
                let load = scale_load_down(self.load[i]);
                if load == 0 {
                    continue;
                }
                let shares = (SHARES as u128 * load as u128 / total.max(1) as u128) as u64;
                self.weight[i] = shares.clamp(MIN_SHARES, SHARES);
                if let Some(p) = self.parent[g] {
                    self.load[p * self.cpus + cpu] += self.weight[i];
                }
            }
        }
    }

    /// The weight a thread of own weight `w` (nice-0 = 1024) in group `g` has on `cpu` once
    /// flattened: its share of the group entity's weight at each level, as [`TaskGroups::update`]
    /// last computed them, rounded as `scale_load_down()`. The thread must be counted on `cpu`.
    pub fn effective(&self, g: usize, cpu: usize, w: u64) -> u64 {
        let mut x = (w as u128) << SCHED_FIXEDPOINT_SHIFT;
        let mut at = Some(g);
        while let Some(g) = at {
            let i = g * self.cpus + cpu;
            x = x * self.weight[i] as u128 / self.load[i].max(1) as u128;
            at = self.parent[g];
        }
        scale_load_down(x.min(u64::MAX as u128) as u64).max(1)
    }
}

/// How long a move into a task group blocks the thread that writes its TID, ns
/// ([`crate::SimConfig::taskgroup_move_ns`] and the fields after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MoveCosts {
    /// From `GP_IDLE`: a grace period.
    pub slow: u64,
    /// Right after another move.
    pub fast: u64,
    /// How long after a move ends the next one still takes the fast path.
    pub window: u64,
}

/// The `rcu_sync` of `cgroup_threadgroup_rwsem`, shared by every move on the machine.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RcuSync {
    /// When the grace period the last slow move waits for ends.
    gp_end: u64,
    /// When the last move ended (`rcu_sync_exit()`).
    last_exit: Option<u64>,
}

impl RcuSync {
    /// A move starting at `now`: when it ends.
    pub fn enter(&mut self, now: u64, c: MoveCosts) -> u64 {
        let end = if now < self.gp_end {
            // Another writer waits for its grace period (`GP_ENTER`): this one waits with it.
            self.gp_end + c.fast
        } else if self.last_exit.is_some_and(|e| now.saturating_sub(e) < c.window) {
            now + c.fast
        } else {
            self.gp_end = now + c.slow;
            self.gp_end
        };
        self.last_exit = Some(self.last_exit.map_or(end, |e| e.max(end)));
        end
    }
}

/// Per-thread state of the task groups, kept out of the engine's hot thread records.
#[derive(Debug, Clone)]
pub(crate) struct GroupState {
    pub groups: TaskGroups,
    /// Each thread's group now (`None`: the root).
    pub member: Vec<Option<usize>>,
    /// The group a thread moves into when the move it sleeps in ends.
    pub moving: Vec<Option<Option<usize>>>,
    /// Whether a thread has written its TID to a group's `tasks` yet (rt-app and `pacer run`
    /// compare a group with the last one written, so the first write, even of `/`, moves).
    pub written: Vec<bool>,
    /// Threads that have been in a group (the only ones whose weight the groups change).
    pub tracked: Vec<ThreadId>,
    pub rcu: RcuSync,
    pub costs: MoveCosts,
    /// Reused buffer of the threads on run queues: (thread, group, CPU, own weight).
    pub scratch: Vec<(ThreadId, usize, usize, u64)>,
}

impl GroupState {
    pub fn new(groups: TaskGroups, costs: MoveCosts) -> Self {
        GroupState {
            groups,
            member: Vec::new(),
            moving: Vec::new(),
            written: Vec::new(),
            tracked: Vec::new(),
            rcu: RcuSync::default(),
            costs,
            scratch: Vec::new(),
        }
    }

    /// Room for thread `t` (a new or forked thread, in the root).
    pub fn add_thread(&mut self, t: ThreadId) {
        let n = t as usize + 1;
        if self.member.len() < n {
            self.member.resize(n, None);
            self.moving.resize(n, None);
            self.written.resize(n, false);
        }
    }

    /// Thread `t`'s move into `g` (`None`: the root) starts at `now`: when it ends.
    pub fn start_move(&mut self, t: ThreadId, g: Option<usize>, now: u64) -> u64 {
        self.moving[t as usize] = Some(g);
        self.rcu.enter(now, self.costs)
    }

    /// The move `t` slept in has ended: it is in its new group. True when it moved.
    pub fn finish_move(&mut self, t: ThreadId) -> bool {
        let Some(g) = self.moving[t as usize].take() else {
            return false;
        };
        self.member[t as usize] = g;
        if g.is_some() && !self.tracked.contains(&t) {
            self.tracked.push(t);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_create_their_parents_and_the_root_is_no_group() {
        let g = TaskGroups::new(["/tg1/tg11", "/", "/tg2", "/tg1"], 2);
        assert_eq!(g.paths, ["/tg1", "/tg1/tg11", "/tg2"]);
        assert_eq!(g.parent, [None, Some(0), None]);
        assert_eq!(g.index("/"), None);
        assert_eq!(g.index("/tg1/tg11/"), Some(1));
    }

    #[test]
    fn a_group_on_one_cpu_weighs_its_shares_split_by_its_threads_weights() {
        let mut g = TaskGroups::new(["/a"], 1);
        g.update([(0, 0, 1024), (0, 0, 1024)].into_iter());
        assert_eq!(g.effective(0, 0, 1024), 512);
        // nice 5 (335) beside nice 0: 1024 · 335 / 1359.
        g.update([(0, 0, 1024), (0, 0, 335)].into_iter());
        assert_eq!(g.effective(0, 0, 335), 1024 * 335 / 1359);
        assert_eq!(g.effective(0, 0, 1024), 1024 * 1024 / 1359);
    }

    #[test]
    fn shares_follow_the_load_on_each_cpu_and_nest() {
        let mut g = TaskGroups::new(["/a/b"], 2);
        // /a/b: two threads on CPU 0, one on CPU 1; /a: one thread of its own, on CPU 1.
        g.update([(1, 0, 1024), (1, 0, 1024), (1, 1, 1024), (0, 1, 1024)].into_iter());
        // b's entity: 1024 · 2/3 on CPU 0, 1024 · 1/3 on CPU 1. a's queue: b's entity on
        // CPU 0 (682.7), b's entity and a's thread on CPU 1 (1365.3): a's entity weighs
        // 1024 · 682.7 / 2048 = 341.3 on CPU 0 and 682.7 on CPU 1.
        let (b0, b1) = (1024.0 * 2.0 / 3.0, 1024.0 / 3.0);
        let (a0, a1) = (1024.0 * b0 / 2048.0, 1024.0 * (b1 + 1024.0) / 2048.0);
        let near = |got: u64, want: f64| assert!((got as f64 - want).abs() <= 1.0, "{got} vs {want:.1}");
        // A thread of b on CPU 0: half of b's entity, all of a's on CPU 0.
        near(g.effective(1, 0, 1024), a0 / 2.0);
        // On CPU 1, b's entity and a's thread split a's entity by their weights.
        near(g.effective(1, 1, 1024), a1 * b1 / (b1 + 1024.0));
        near(g.effective(0, 1, 1024), a1 * 1024.0 / (b1 + 1024.0));
    }

    #[test]
    fn a_thread_with_a_tiny_part_of_its_groups_load_keeps_a_weight() {
        let mut g = TaskGroups::new(["/a"], 2);
        // SCHED_IDLE (3) on CPU 1 against 40 nice-0 threads on CPU 0: the group entity on CPU 1
        // weighs 1024 · 3 / 40963 in scale_load units (76), and the thread the 2 that
        // scale_load_down() keeps at least.
        let many = (0..40).map(|_| (0usize, 0usize, 1024u64));
        g.update(many.chain([(0, 1, 3)]));
        assert_eq!(g.weight[1], (SHARES as u128 * 3 / (40 * 1024 + 3)) as u64);
        assert_eq!(g.effective(0, 1, 3), 2);
        // Each of the 40 shares CPU 0's entity (≈ 1024): 25.6, rounded down.
        assert_eq!(g.effective(0, 0, 1024), 25);
    }

    #[test]
    fn rcu_sync_fast_path_after_a_recent_move_and_shared_grace_periods() {
        let c = MoveCosts {
            slow: 8_000_000,
            fast: 10_000,
            window: 16_000_000,
        };
        let mut r = RcuSync::default();
        assert_eq!(r.enter(0, c), 8_000_000);
        // Another writer during that grace period waits for it.
        assert_eq!(r.enter(1_000_000, c), 8_010_000);
        // Within the window after the last exit: fast.
        assert_eq!(r.enter(20_000_000, c), 20_010_000);
        // Past it: a grace period again.
        assert_eq!(r.enter(40_000_000, c), 48_000_000);
    }
}
