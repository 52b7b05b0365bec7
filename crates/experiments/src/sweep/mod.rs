//! The RM-vs-EDF multicore experiment as code (rm-vs-edf-multicore-linux.txt §5–6): random task
//! sets swept over utilisation and task count (§5.3), each run under partitioned, clustered and
//! global EDF and RM (§5.4, Table 1) on the simulator or the real kernel, the metrics of §5.5
//! (Table 2) per run, and the aggregation of Table 4 and Figs. 3–4.
//!
//! - [`spec`]: the experiment TOML and the built-in paper sweep, typed errors naming the key;
//! - [`execute`]: the run matrix, shards, parallel runs, resume;
//! - [`runner`]: the backend interface ([`Runner`]) and the simulator's implementation;
//! - [`metrics`]: per-task and per-run figures and the per-job laxity histograms;
//! - [`store`]: the output directory, one atomically written JSON file per run;
//! - [`mod@aggregate`]: Table 4 (mean ± sd over sets), laxity quantiles, sim-vs-real, text/JSON/CSV;
//! - [`mod@report`]: the HTML report.

pub mod aggregate;
pub mod execute;
pub mod metrics;
pub mod report;
pub mod runner;
pub mod spec;
pub mod store;

pub use aggregate::{aggregate, Aggregate};
pub use execute::{collect, matrix, run, shard_of, Bins, ExperimentError, Outcome, Progress, Shard};
pub use runner::{LinuxRunner, RunError, RunRequest, Runner, SimRunner};
pub use spec::{Backend, Configuration, Spec, SpecError};
pub use store::{RunKey, RunRecord, Store, StoreError};
