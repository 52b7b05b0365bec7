//! pacer's adaptation engine: deterministic controllers that see the system only through the
//! [`kernel::Kernel`] interface, so the same code runs against the simulator and the real kernel.
//!
//! - [`kernel`]: the sensor/actuator interface and the [`kernel::Controller`] hosting contract;
//! - [`period`]: the LFS++ period analyser (spectrum of wake-up times, peak heuristic).

pub mod kernel;
pub mod period;

pub use kernel::{AppEvent, Controller, DlState, FreqState, Kernel, KernelError, Tid};
