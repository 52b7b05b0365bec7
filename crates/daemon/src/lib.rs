//! `pacer daemon` (pacerd): the privileged service through which unprivileged applications get
//! SCHED_DEADLINE reservations sized by the adaptation engine, and the wire protocol they speak
//! (shared with `pacer-client`, the library applications link).
//!
//! - [`protocol`]: frames and messages (`docs/formats/protocol.md`);
//! - [`config`]: the configuration file and per-user/per-group quotas
//!   (`docs/formats/daemon-config.md`);
//! - [`peer`]: who connected (`SO_PEERCRED`) and whether a thread is theirs (pidfds);
//! - [`service`]: sessions, controllers, the kernel view over every client's threads, status;
//! - [`server`]: the single-threaded event loop over the socket.

pub mod config;
pub mod peer;
pub mod protocol;
pub mod server;
pub mod service;

pub use config::{Config, Quota, DEFAULT_SOCKET};
pub use server::{Listener, Server, Stopped};
pub use service::{DaemonStatus, Service};
