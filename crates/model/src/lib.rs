//! pacer's vocabulary, shared by every other crate: integer-nanosecond time, tasks and task sets,
//! jobs, SCHED_DEADLINE reservations, platforms, the task-set file format, and the strict key
//! reader of pacer's TOML files.

pub mod bytes;
pub mod format;
pub mod job;
pub mod platform;
pub mod policy;
pub mod reservation;
pub mod task;
pub mod text;
pub mod time;
pub mod toml_keys;

pub use format::{parse_taskset, read_taskset, write_taskset, FormatError};
pub use job::Job;
pub use platform::{Cluster, Cpu, Opp, Platform, PlatformError, CAPACITY_SCALE};
pub use policy::Policy;
pub use reservation::{Reservation, ReservationError, ReservationFlags};
pub use task::{total_utilization, Arrival, Provenance, Task, TaskSet};
pub use time::{Duration, Instant};
