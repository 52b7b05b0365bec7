//! Helpers the simulator's test binaries share: a job collector and the events tests build
//! workloads from.
#![allow(dead_code)] // each test binary uses a different subset

use pacer_model::Duration;
use pacer_sim::{JobRecord, Observer};
use pacer_workload::{Event, Work};

/// Collects every job record of a run.
#[derive(Default)]
pub struct Jobs(pub Vec<JobRecord>);

impl Observer for Jobs {
    fn job(&mut self, r: &JobRecord) {
        self.0.push(*r);
    }
}

/// `run` of a fixed `ms` milliseconds of work.
pub fn run(ms: u64) -> Event {
    run_us(ms * 1000)
}

/// `run` of a fixed `us` microseconds of work.
pub fn run_us(us: u64) -> Event {
    Event::Run {
        work: Work::Fixed {
            ns: Duration::from_us(us),
        },
    }
}

/// rt-app's `runtime`: `us` microseconds of wall-clock time.
pub fn runtime_us(us: u64) -> Event {
    Event::Runtime {
        duration: Duration::from_us(us),
    }
}

pub fn sleep(ms: u64) -> Event {
    sleep_us(ms * 1000)
}

pub fn sleep_us(us: u64) -> Event {
    Event::Sleep {
        duration: Duration::from_us(us),
    }
}
