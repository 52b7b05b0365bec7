//! Where a thread is in its program: the walk through phases, phase loops and events that both
//! executors (the simulator and `pacer run`) make, defined once so that they agree on what
//! runs next (rt-app semantics: phases in order, each repeated `loops` times, the whole sequence
//! repeated `ThreadSpec::loops` times or forever).

use crate::model::{Event, Phase, ThreadSpec};

/// What comes next in a thread's program.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step<'a> {
    /// A pass through `phase` begins (executors apply phase-level CPUs and policy here).
    PassStart(&'a Phase),
    /// The next event of the current pass.
    Event(&'a Event),
    /// A pass through a phase's events ended; for a thread without timers, each pass is a job.
    PassEnd,
    /// The program is over (the thread's loops are done, or it has nothing to run).
    Done,
}

/// A position in a thread's program.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    outer: u64,
    phase: usize,
    iter: u64,
    ev: usize,
    in_pass: bool,
}

impl Cursor {
    /// The next step of `spec`'s program. Phases with `loops: 0` are skipped; a program whose
    /// every phase is skipped is [`Step::Done`] rather than an endless walk.
    pub fn advance<'a>(&mut self, spec: &'a ThreadSpec) -> Step<'a> {
        if spec.phases.is_empty() {
            return Step::Done;
        }
        let mut skipped = 0usize;
        loop {
            if self.phase >= spec.phases.len() {
                self.outer += 1;
                if spec.loops.is_some_and(|l| self.outer >= l) || skipped > spec.phases.len() {
                    return Step::Done;
                }
                *self = Cursor {
                    outer: self.outer,
                    ..Cursor::default()
                };
                continue;
            }
            let phase = &spec.phases[self.phase];
            if phase.loops == 0 {
                self.phase += 1;
                skipped += 1;
                continue;
            }
            if !self.in_pass {
                self.in_pass = true;
                return Step::PassStart(phase);
            }
            if self.ev >= phase.events.len() {
                self.in_pass = false;
                self.ev = 0;
                self.iter += 1;
                if self.iter >= phase.loops {
                    self.iter = 0;
                    self.phase += 1;
                }
                return Step::PassEnd;
            }
            self.ev += 1;
            return Step::Event(&phase.events[self.ev - 1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Work;
    use pacer_model::{Duration, Policy};

    fn spec(phases: Vec<Phase>, loops: Option<u64>) -> ThreadSpec {
        ThreadSpec {
            name: "t".into(),
            policy: Policy::Other { nice: 0 },
            affinity: None,
            start_delay: Duration(0),
            phases,
            loops,
            cooperative: false,
            job_deadline: None,
            ..Default::default()
        }
    }

    fn run(ns: u64) -> Event {
        Event::Run {
            work: Work::Fixed { ns: Duration(ns) },
        }
    }

    /// Compact trace of the walk: S = pass start, E<ns> = event, P = pass end, D = done.
    fn walk(s: &ThreadSpec, max: usize) -> String {
        let mut c = Cursor::default();
        let mut out = Vec::new();
        for _ in 0..max {
            match c.advance(s) {
                Step::PassStart(_) => out.push("S".to_string()),
                Step::Event(Event::Run {
                    work: Work::Fixed { ns },
                }) => out.push(format!("E{}", ns.0)),
                Step::Event(_) => out.push("E?".into()),
                Step::PassEnd => out.push("P".into()),
                Step::Done => {
                    out.push("D".into());
                    break;
                }
            }
        }
        out.join(" ")
    }

    #[test]
    fn phases_loops_and_outer_loops_in_order() {
        let s = spec(
            vec![Phase::new(2, vec![run(1), run(2)]), Phase::new(1, vec![run(3)])],
            Some(2),
        );
        assert_eq!(
            walk(&s, 100),
            "S E1 E2 P S E1 E2 P S E3 P S E1 E2 P S E1 E2 P S E3 P D"
        );
    }

    #[test]
    fn skipped_phases_and_empty_programs_end() {
        let s = spec(
            vec![Phase::new(0, vec![run(1)]), Phase::new(1, vec![run(2)])],
            Some(1),
        );
        assert_eq!(walk(&s, 100), "S E2 P D");
        let never = spec(vec![Phase::new(0, vec![run(1)])], None);
        assert_eq!(walk(&never, 100), "D");
        let none = spec(vec![], None);
        assert_eq!(walk(&none, 100), "D");
    }

    #[test]
    fn forever_keeps_going() {
        let s = spec(vec![Phase::new(1, vec![run(5)])], None);
        assert_eq!(walk(&s, 7), "S E5 P S E5 P S");
    }
}
