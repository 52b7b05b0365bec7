//! pacer's adaptation engine: deterministic controllers that see the system only through the
//! [`kernel::Kernel`] interface, so the same code runs against the simulator and the real kernel.
//!
//! - [`kernel`]: the sensor/actuator interface and the [`kernel::Controller`] hosting contract;
//! - [`period`]: the LFS++ period analyser (spectrum of wake-up times, peak heuristic).
//! - [`predictor`]: percentile, moving-average and (asymmetric) EWMA predictors, workUnits table;
//! - [`controller`]: LFS++ legacy controller, the audio paper's proactive controller, the
//!   job-based adaptive-reservation baseline;
//! - [`supervisor`]: fits budget requests into the Σ Q/P bound (compression, minimum guarantee);
//! - [`power`]: the LFS++ QoS-aware power manager (band, projection, mode-change protocol).

pub mod controller;
pub mod kernel;
pub mod period;
pub mod power;
pub mod predictor;
pub mod supervisor;
pub mod traceio;

pub use controller::{JobController, LegacyController, Pool, ProactiveController};
pub use kernel::{AppEvent, Controller, DlState, FreqState, Kernel, KernelError, Origin, Tid, Wakeup};
pub use power::{Decision, PowerManager};
pub use predictor::{
    AsymmetricEwma, Ewma, MovingAverage, Percentile, Predictor, WorkUnitsPercentiles, WorkUnitsTable,
};
pub use supervisor::{Compression, Grant, Request, Supervisor};
