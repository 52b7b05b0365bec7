//! Runnable workloads: the model shared by the simulator and the real-kernel executor, the rt-app
//! JSON parser, conversion of pacer task sets, and the per-job results both executors produce
//! ([`jobs`]: record, CSV schema, summary, comparison), and the low-latency audio workload of the
//! audio paper ([`audio`]: synthesizer callback, virtual sink, workUnits patterns, LatencyMark;
//! [`synth`]: a real polyphonic synthesizer whose callback cost grows with its voices).

pub mod audio;
pub mod calibration;
pub mod cursor;
pub mod jobs;
pub mod model;
pub mod placement;
pub mod rtapp;
pub mod rtapp_out;
pub mod synth;
pub mod taskset;
pub mod work;
pub mod wss;

pub use calibration::{CacheProfile, ReloadFrom, CALIBRATION_SCHEMA};
pub use cursor::{Cursor, Step};
pub use model::{
    ChaseOrder, Event, FtraceCategories, MemAccess, MemBuffer, MemBufferId, MemBufferKind, Need, Phase,
    Policy, Resource, ResourceId, ResourceKind, RunSettings, ThreadSpec, TimerId, TimerMode, Work, Workload,
    CHASE_MIN_STRIDE,
};
pub use rtapp::{parse_rtapp, parse_rtapp_with, read_rtapp, RtAppError, RtAppOptions};
pub use taskset::{
    deadline_monotonic_priorities, from_taskset, rate_monotonic_priorities, ExecModel, TaskPolicy,
};
pub use work::{thread_rng, thread_seed, ThreadRng, WorkError};
pub use wss::{WorkingSet, WssAmount, WssOrder};
