//! Per-job CSV from the simulator: the shared writer of `pacer_workload::jobs::csv` (one
//! definition of the columns for `pacer sim` and `pacer run`, `docs/formats/jobs-csv.md`) as an
//! [`Observer`], so it streams rows as the simulation finishes jobs.

use std::io::Write;

pub use pacer_workload::jobs::csv::{JobCsv, COLUMNS};

use crate::record::{JobRecord, Observer};

impl<W: Write> Observer for JobCsv<W> {
    fn job(&mut self, r: &JobRecord) {
        self.write(r);
    }
}
