//! QoS-aware power management, lfspp-legacy-multimedia.txt §6.3.
//!
//! A frequency governor that knows about the reservations: it keeps the system load inside a band
//! (default [20 %, 80 %], powernowd's algorithm), raises the frequency at once (a faster CPU cannot
//! hurt a reserved task: its utilisation drops, and the feedback reclaims the excess), and lowers
//! it only through a **mode-change protocol**, because a slower CPU raises every reserved task's
//! utilisation before the (slow, history-based) bandwidth controllers can notice:
//!
//! 1. project the controlled reservations to the target frequency with eq. 6,
//!    U_dest = U_curr · f_curr / f_dest (per reservation: Q' = ⌈Q · f_curr / f_dest⌉);
//! 2. if the projection breaks the schedulability bound of eq. 1 (Σ Q'/P > bound, the bound the
//!    supervisor enforces) — or a single task would exceed its own cap — refuse the switch;
//! 3. otherwise raise every controlled budget to its projection first ([`PowerAction::RaiseBudgets`]);
//! 4. switch only when all the new budgets are in place, i.e. after the longest reservation period
//!    ([`PowerAction::SetFrequency`] at now + max P);
//! 5. reset every controller's history to one sample equal to the projected budget
//!    ([`PowerAction::ResetHistories`]) so the loops restart from the new operating point.
//!
//! The manager is a pure state machine driven by [`PowerManager::tick`]: it sees the system through
//! [`PowerInputs`] and answers with [`PowerAction`]s. It is *owned by* the
//! [`LegacyController`](crate::controller::LegacyController) rather than being a separate
//! [`Controller`](crate::kernel::Controller), because steps 3 and 5 act on that controller's
//! budgets and predictor histories; keeping the owner as the only writer of budgets means the two
//! never race. The same actions can be executed by any other owner.
//!
//! **Stepping.** Like powernowd, one operating point at a time in both directions (the paper notes
//! the choice of powernowd is incidental): above the band → the next higher OPP, below the band →
//! the next lower OPP. Stepping keeps each projection small, so a refused step is a small loss.
//! After an up-switch the histories are reset to the projected (smaller) budgets too: the paper
//! (§6.3, §7.5) credits the integration with faster convergence after increases as well.

use serde::Serialize;

use crate::kernel::Tid;
use crate::supervisor::fits;

/// The utilisation band.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowerConfig {
    /// Below this system load, step the frequency down (default 0.2).
    pub low: f64,
    /// Above this system load, step the frequency up (default 0.8).
    pub high: f64,
}

impl Default for PowerConfig {
    fn default() -> Self {
        PowerConfig { low: 0.2, high: 0.8 }
    }
}

/// Bad band.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PowerError {
    #[error("utilisation band [{low}, {high}] must satisfy 0 ≤ low < high ≤ 1")]
    BadBand { low: f64, high: f64 },
}

/// What the band asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", content = "khz", rename_all = "snake_case")]
pub enum Decision {
    Stay,
    Up(u32),
    Down(u32),
}

/// A controlled reservation: runtime `q` every `p` (ns); `max_q` is its controller's cap (the
/// projection may not exceed it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Reserved {
    pub id: Tid,
    pub q: u64,
    pub p: u64,
    pub max_q: u64,
}

/// What the manager sees at a tick.
#[derive(Debug, Clone, Copy)]
pub struct PowerInputs<'a> {
    /// System load in [0, 1] at the current frequency (busy fraction of the domain's CPUs).
    pub load: f64,
    /// Current frequency, kHz.
    pub cur_khz: u32,
    /// Available frequencies, ascending, kHz.
    pub available_khz: &'a [u32],
    /// The controlled reservations in place.
    pub reservations: &'a [Reserved],
    /// Σ Q/P allowed (the supervisor's effective bound), CPUs.
    pub bound: f64,
}

/// What the owner must do, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum PowerAction {
    /// Set the domain's frequency.
    SetFrequency { khz: u32 },
    /// Raise (never lower) these budgets and hold them until the switch: (thread, runtime ns).
    RaiseBudgets { budgets: Vec<(Tid, u64)> },
    /// Reset these threads' predictor histories to one sample worth this budget (ns), and lift the
    /// hold of [`PowerAction::RaiseBudgets`].
    ResetHistories { budgets: Vec<(Tid, u64)> },
}

/// The mode-change protocol's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ModeChange {
    /// Following the band.
    Idle,
    /// Budgets raised to `budgets` at `raised_at`; the switch to `to_khz` happens at the first tick
    /// at or after `switch_at` = raised_at + the longest reservation period.
    Switching {
        from_khz: u32,
        to_khz: u32,
        raised_at: u64,
        switch_at: u64,
        budgets: Vec<(Tid, u64)>,
    },
}

/// A refused down-switch (why the frequency stayed up).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refusal {
    pub at: u64,
    pub to_khz: u32,
    /// Projected Σ Q'/P.
    pub projected: f64,
    pub bound: f64,
    /// A task whose projected budget exceeds its cap, if that was the reason.
    pub over_cap: Option<Tid>,
}

/// Why a projection cannot be granted.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Overload {
    /// Projected Σ Q'/P.
    pub projected: f64,
    /// A task whose projected budget exceeds its cap.
    pub over_cap: Option<Tid>,
}

/// Counters for a status view.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PowerStats {
    pub ups: u64,
    pub downs: u64,
    pub refused: u64,
    pub aborted: u64,
    pub last_refusal: Option<Refusal>,
}

/// The LFS++ power manager (§6.3).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowerManager {
    cfg: PowerConfig,
    state: ModeChange,
    stats: PowerStats,
}

impl PowerManager {
    pub fn new(cfg: PowerConfig) -> Result<Self, PowerError> {
        if !((0.0..1.0).contains(&cfg.low) && cfg.low < cfg.high && cfg.high <= 1.0) {
            return Err(PowerError::BadBand {
                low: cfg.low,
                high: cfg.high,
            });
        }
        Ok(PowerManager {
            cfg,
            state: ModeChange::Idle,
            stats: PowerStats::default(),
        })
    }

    pub fn config(&self) -> &PowerConfig {
        &self.cfg
    }

    pub fn state(&self) -> &ModeChange {
        &self.state
    }

    pub fn stats(&self) -> &PowerStats {
        &self.stats
    }

    /// powernowd-style stepping: above the band → next higher OPP, below → next lower OPP, one
    /// step at a time; `Stay` inside the band (bounds included) or at the end of the table.
    /// `available` need not contain `f_current` (e.g. after an external change).
    pub fn decide(&self, u_current: f64, f_current: u32, available: &[u32]) -> Decision {
        if u_current > self.cfg.high {
            available
                .iter()
                .copied()
                .filter(|&f| f > f_current)
                .min()
                .map_or(Decision::Stay, Decision::Up)
        } else if u_current < self.cfg.low {
            available
                .iter()
                .copied()
                .filter(|&f| f < f_current)
                .max()
                .map_or(Decision::Stay, Decision::Down)
        } else {
            Decision::Stay
        }
    }

    /// Eq. 6: U_dest = U_curr · f_curr / f_dest.
    pub fn project(u_curr: f64, f_curr: u32, f_dest: u32) -> f64 {
        u_curr * f_curr as f64 / f_dest as f64
    }

    /// Eq. 6 per reservation, rounded up: Q' = ⌈Q · f_curr / f_dest⌉ (ns).
    pub fn project_budget(q: u64, f_curr: u32, f_dest: u32) -> u64 {
        let (n, d) = (q as u128 * f_curr as u128, f_dest.max(1) as u128);
        n.div_ceil(d).min(u64::MAX as u128) as u64
    }

    /// The projected budgets of a switch `f_curr → f_dest`, or why it must be refused (eq. 1).
    pub fn plan(
        reservations: &[Reserved],
        f_curr: u32,
        f_dest: u32,
        bound: f64,
    ) -> Result<Vec<(Tid, u64)>, Overload> {
        let budgets: Vec<(Tid, u64)> = reservations
            .iter()
            .map(|r| (r.id, Self::project_budget(r.q, f_curr, f_dest)))
            .collect();
        let projected: f64 = reservations
            .iter()
            .zip(&budgets)
            .map(|(r, b)| b.1 as f64 / r.p as f64)
            .sum();
        let over_cap = reservations
            .iter()
            .zip(&budgets)
            .find(|(r, b)| b.1 > r.max_q.min(r.p))
            .map(|(r, _)| r.id);
        if over_cap.is_some() || !fits(reservations.iter().zip(&budgets).map(|(r, b)| (b.1, r.p)), bound) {
            return Err(Overload { projected, over_cap });
        }
        Ok(budgets)
    }

    /// One step of the band algorithm and the mode-change protocol at time `now` (ns).
    pub fn tick(&mut self, now: u64, inp: &PowerInputs<'_>) -> Vec<PowerAction> {
        if let ModeChange::Switching {
            to_khz,
            switch_at,
            budgets,
            ..
        } = &self.state
        {
            if now < *switch_at {
                // Budgets are being raised; no new decision until the switch is done.
                return Vec::new();
            }
            let actions = vec![
                PowerAction::SetFrequency { khz: *to_khz },
                PowerAction::ResetHistories {
                    budgets: budgets.clone(),
                },
            ];
            self.stats.downs += 1;
            self.state = ModeChange::Idle;
            return actions;
        }
        match self.decide(inp.load, inp.cur_khz, inp.available_khz) {
            Decision::Stay => Vec::new(),
            Decision::Up(f) => {
                // Immediately; the projected (smaller) budgets seed the histories.
                self.stats.ups += 1;
                let budgets: Vec<(Tid, u64)> = inp
                    .reservations
                    .iter()
                    .map(|r| (r.id, Self::project_budget(r.q, inp.cur_khz, f)))
                    .collect();
                let mut a = vec![PowerAction::SetFrequency { khz: f }];
                if !budgets.is_empty() {
                    a.push(PowerAction::ResetHistories { budgets });
                }
                a
            }
            Decision::Down(f) => match Self::plan(inp.reservations, inp.cur_khz, f, inp.bound) {
                Err(Overload { projected, over_cap }) => {
                    self.stats.refused += 1;
                    self.stats.last_refusal = Some(Refusal {
                        at: now,
                        to_khz: f,
                        projected,
                        bound: inp.bound,
                        over_cap,
                    });
                    Vec::new()
                }
                Ok(budgets) if budgets.is_empty() => {
                    // Nothing reserved: nothing to protect, switch now.
                    self.stats.downs += 1;
                    vec![PowerAction::SetFrequency { khz: f }]
                }
                Ok(budgets) => {
                    let longest = inp.reservations.iter().map(|r| r.p).max().unwrap_or(0);
                    self.state = ModeChange::Switching {
                        from_khz: inp.cur_khz,
                        to_khz: f,
                        raised_at: now,
                        switch_at: now.saturating_add(longest),
                        budgets: budgets.clone(),
                    };
                    vec![PowerAction::RaiseBudgets { budgets }]
                }
            },
        }
    }

    /// Abandons a mode change whose budgets could not all be raised (e.g. admission refused one);
    /// the frequency stays. The owner lifts its holds.
    pub fn abort(&mut self) {
        if matches!(self.state, ModeChange::Switching { .. }) {
            self.stats.aborted += 1;
            self.state = ModeChange::Idle;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const OPPS: [u32; 4] = [500_000, 1_000_000, 1_500_000, 2_000_000];

    fn pm() -> PowerManager {
        PowerManager::new(PowerConfig::default()).unwrap()
    }

    fn inputs<'a>(load: f64, cur: u32, res: &'a [Reserved], bound: f64) -> PowerInputs<'a> {
        PowerInputs {
            load,
            cur_khz: cur,
            available_khz: &OPPS,
            reservations: res,
            bound,
        }
    }

    #[test]
    fn band_and_stepping() {
        let m = pm();
        assert_eq!(m.config(), &PowerConfig { low: 0.2, high: 0.8 });
        assert_eq!(m.decide(0.85, 1_000_000, &OPPS), Decision::Up(1_500_000)); // one step, not max
        assert_eq!(m.decide(0.10, 1_500_000, &OPPS), Decision::Down(1_000_000));
        assert_eq!(m.decide(0.50, 1_000_000, &OPPS), Decision::Stay);
        assert_eq!(m.decide(0.80, 1_000_000, &OPPS), Decision::Stay);
        assert_eq!(m.decide(0.20, 1_000_000, &OPPS), Decision::Stay);
        assert_eq!(m.decide(0.95, 2_000_000, &OPPS), Decision::Stay);
        assert_eq!(m.decide(0.05, 500_000, &OPPS), Decision::Stay);
        assert_eq!(m.decide(0.9, 1_200_000, &OPPS), Decision::Up(1_500_000));
        assert!(PowerManager::new(PowerConfig { low: 0.8, high: 0.2 }).is_err());
    }

    #[test]
    fn projection_is_eq_6() {
        assert!((PowerManager::project(0.3, 2_000_000, 1_500_000) - 0.4).abs() < 1e-12);
        assert_eq!(PowerManager::project_budget(3 * MS, 2_000_000, 1_500_000), 4 * MS);
        assert_eq!(PowerManager::project_budget(10, 3, 2), 15);
        assert_eq!(PowerManager::project_budget(1, 3, 2), 2); // rounded up
    }

    #[test]
    fn up_switch_is_immediate_and_resets_histories() {
        let mut m = pm();
        let res = [Reserved {
            id: 1,
            q: 4 * MS,
            p: 10 * MS,
            max_q: 9 * MS,
        }];
        let a = m.tick(0, &inputs(0.9, 1_000_000, &res, 0.95));
        assert_eq!(
            a,
            vec![
                PowerAction::SetFrequency { khz: 1_500_000 },
                PowerAction::ResetHistories {
                    budgets: vec![(1, 2_666_667)]
                },
            ]
        );
        assert_eq!(m.state(), &ModeChange::Idle);
    }

    #[test]
    fn down_switch_refused_when_projection_breaks_the_bound() {
        let mut m = pm();
        // Σ Q/P = 0.3 + 0.25 = 0.55 at 2 GHz; at 1.5 GHz → 0.7333 > bound 0.7: refused.
        let res = [
            Reserved {
                id: 1,
                q: 3 * MS,
                p: 10 * MS,
                max_q: 9 * MS,
            },
            Reserved {
                id: 2,
                q: 5 * MS,
                p: 20 * MS,
                max_q: 18 * MS,
            },
        ];
        assert!(m.tick(0, &inputs(0.1, 2_000_000, &res, 0.7)).is_empty());
        assert_eq!(m.stats().refused, 1);
        let r = m.stats().last_refusal.clone().unwrap();
        assert!((r.projected - 0.55 * 4.0 / 3.0).abs() < 1e-6, "{}", r.projected);
        assert_eq!(m.state(), &ModeChange::Idle);
        // A task whose own projection would exceed its cap also refuses.
        let capped = [Reserved {
            id: 1,
            q: 6 * MS,
            p: 10 * MS,
            max_q: 7 * MS,
        }];
        assert!(m.tick(1, &inputs(0.1, 2_000_000, &capped, 4.0)).is_empty());
        assert_eq!(m.stats().last_refusal.clone().unwrap().over_cap, Some(1));
    }

    #[test]
    fn mode_change_raises_first_switches_after_longest_period_then_resets() {
        let mut m = pm();
        let res = [
            Reserved {
                id: 1,
                q: 3 * MS,
                p: 10 * MS,
                max_q: 9 * MS,
            },
            Reserved {
                id: 2,
                q: 5 * MS,
                p: 40 * MS,
                max_q: 36 * MS,
            },
        ];
        let t0 = 1_000 * MS;
        let a = m.tick(t0, &inputs(0.1, 2_000_000, &res, 0.95));
        let projected = vec![(1, 4 * MS), (2, 6_666_667)];
        assert_eq!(
            a,
            vec![PowerAction::RaiseBudgets {
                budgets: projected.clone()
            }]
        );
        assert!(matches!(m.state(), ModeChange::Switching { switch_at, .. } if *switch_at == t0 + 40 * MS));
        // Before the longest period elapsed: nothing, even if the load asks for more.
        assert!(m
            .tick(t0 + 20 * MS, &inputs(0.05, 2_000_000, &res, 0.95))
            .is_empty());
        assert!(m
            .tick(t0 + 39 * MS, &inputs(0.95, 2_000_000, &res, 0.95))
            .is_empty());
        let a = m.tick(t0 + 40 * MS, &inputs(0.1, 2_000_000, &res, 0.95));
        assert_eq!(
            a,
            vec![
                PowerAction::SetFrequency { khz: 1_500_000 },
                PowerAction::ResetHistories { budgets: projected },
            ]
        );
        assert_eq!(m.state(), &ModeChange::Idle);
        assert_eq!(m.stats().downs, 1);
    }

    #[test]
    fn abort_and_empty_reservations() {
        let mut m = pm();
        let res = [Reserved {
            id: 1,
            q: 3 * MS,
            p: 10 * MS,
            max_q: 9 * MS,
        }];
        m.tick(0, &inputs(0.1, 2_000_000, &res, 0.95));
        m.abort();
        assert_eq!(m.state(), &ModeChange::Idle);
        assert_eq!(m.stats().aborted, 1);
        assert_eq!(
            m.tick(5, &inputs(0.1, 2_000_000, &[], 0.95)),
            vec![PowerAction::SetFrequency { khz: 1_500_000 }]
        );
    }
}
