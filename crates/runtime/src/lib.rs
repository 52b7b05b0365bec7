//! The real-time component runtime (rtdroid-android-timeliness.txt, §3): an application is a set
//! of components (periodic tasks, services, receivers) declared in a manifest with their timing
//! and memory needs, connected by preallocated channels and served by an audio manager, and the
//! whole application is validated before anything starts (§3, "Verification checks").
//!
//! - [`manifest`]: the TOML manifest (docs/formats/manifest.md), parsed key by key;
//! - [`validate`]: the checks before start: schedulability with `pacer_analysis` for the chosen
//!   policy, memory sums, channel capacities, audio sessions (`pacer runtime check`);
//! - [`channel`]: the preallocated, sender-priority-ordered channels (§3.2);
//! - [`exec`]: the executor (`pacer runtime run`): one real-time thread per component, releases
//!   recorded in the jobs-CSV schema, clean shutdown;
//! - [`arena`]: per-release memory, reset after every release;
//! - [`guard`]: the allocation guard that reports heap allocations on the real-time path;
//! - [`audio`]: the audio manager (§4.2): sessions on a null, file or ALSA backend, mixer, recorder.

pub mod arena;
pub mod audio;
pub mod channel;
pub mod exec;
pub mod guard;
pub mod manifest;
pub mod validate;
