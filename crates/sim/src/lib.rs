//! Discrete-event simulator of the Linux scheduler (see ../../shared/DESIGN.md, "Scheduling-class
//! model"): per-CPU run queues, scheduling classes in the kernel's priority order
//! (deadline > rt > fair > idle) with the kernel's verbs, CBS/SCHED_DEADLINE with GRUB
//! reclaiming, fixed priority with FIFO/RR, and global/clustered/partitioned scheduling as
//! affinity configurations of the same classes.

pub mod audio;
pub mod cache;
pub(crate) mod class;
pub mod dvfs;
pub mod engine;
pub mod experiments;
pub mod interactivity;
pub mod kernel;
pub mod memcost;
pub mod output;
pub mod record;
pub(crate) mod sync;

pub use cache::CacheStats;
pub use class::fair::{CfsTunables, FairModel, SLICE_RANGE_NS};
pub use dvfs::{
    table4_energy, CpuEnergy, CpuUtil, EnergyReport, Governor, OppResidency, SchedutilConfig, UtilSignal,
    WaltPolicy,
};
pub use engine::{
    FairBalance, Sim, SimConfig, SimError, BOOT_NEWIDLE_RATIO, DEFAULT_IO_NS_PER_BYTE,
    DEFAULT_MEM_NS_PER_BYTE, DEFAULT_TASKGROUP_MOVE_FAST_NS, DEFAULT_TASKGROUP_MOVE_NS,
    DEFAULT_TASKGROUP_MOVE_WINDOW_NS, DEFAULT_TIMER_SLACK_NS, FORKS_LIMIT, RTAPP_RUNTIME_BURST_NS,
};
pub use kernel::SimKernel;
pub use memcost::{CostCurve, MemCostError, MemRunCost};
pub use record::{JobRecord, Observer, ThreadId, ThreadStats, TraceEvent};
