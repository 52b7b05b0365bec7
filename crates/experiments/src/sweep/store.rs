//! The output directory of an experiment: its spec, and one small JSON file per finished run
//! (rm-vs-edf-multicore-linux.txt §6: every (set, configuration) run of the sweep), so an
//! interrupted experiment resumes where it stopped and shards run on different machines merge by
//! copying directories together.
//!
//! Layout: `DIR/experiment.json` (the resolved spec; a directory holding another experiment's spec
//! is refused, so results of different experiments never mix), `DIR/runs/<key>.json` (one
//! [`RunRecord`] per run, named by backend, configuration, point, set and seed), and the tables
//! written when a run or merge completes. Every file is written to a temporary name in the same
//! directory and renamed into place, so a killed process leaves either the old file or the new
//! one, never half of one; a run file that does not parse is treated as not done.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::metrics::{RunMetrics, RunOutput};
use super::spec::{Backend, Configuration, Spec};

/// Schema name of `experiment.json`.
pub const SPEC_SCHEMA: &str = "pacer.experiment.spec/1";
/// Schema name of a run file.
pub const RUN_SCHEMA: &str = "pacer.experiment.run/1";

/// One cell of the run matrix: set `set` of point `point`, configuration `config` (index into the
/// spec's list), on `backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunKey {
    pub point: usize,
    pub set: usize,
    pub config: usize,
    pub backend: Backend,
}

impl RunKey {
    /// The run's file name: readable and unique per (set, configuration, backend, seed).
    pub fn file_name(&self, spec: &Spec) -> String {
        let p = spec.points()[self.point];
        let c = spec.configurations[self.config].label().to_ascii_lowercase();
        format!(
            "{}-{c}-R{}-n{}-set{}-{:016x}.json",
            self.backend.name(),
            p.r,
            p.n,
            self.set,
            spec.set_seed(self.point, self.set)
        )
    }
}

/// What one run leaves on disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub schema: String,
    pub backend: Backend,
    pub configuration: Configuration,
    /// `G-EDF`…
    pub label: String,
    /// Utilisation per CPU R and number of tasks n of the point.
    pub r: f64,
    pub n: usize,
    /// Index of the set within its point, and its generator seed.
    pub set: usize,
    pub set_seed: u64,
    /// Seed of the run's own randomness.
    pub run_seed: u64,
    pub cpus: usize,
    pub metrics: RunMetrics,
    pub output: RunOutput,
    /// Wall-clock time the run took, ns (not part of any table: it varies between machines).
    pub wall_ns: u64,
}

/// Why the output directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{dir}: holds the results of a different experiment (its experiment.json differs from this spec); choose another output directory")]
    OtherExperiment { dir: PathBuf },
    #[error("{dir}: not an experiment directory (no experiment.json)")]
    NotAnExperiment { dir: PathBuf },
    #[error("{path}: {message}")]
    Corrupt { path: PathBuf, message: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// An experiment's output directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

/// The exact text of `experiment.json` for a spec.
fn spec_text(spec: &Spec) -> String {
    let v = serde_json::json!({ "schema": SPEC_SCHEMA, "spec": spec });
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

impl Store {
    /// Opens (creating it if needed) the directory for `spec`; refuses one that holds another
    /// experiment's spec.
    pub fn create(dir: &Path, spec: &Spec) -> Result<Store, StoreError> {
        let runs = dir.join("runs");
        fs::create_dir_all(&runs).map_err(io(&runs))?;
        let store = Store {
            dir: dir.to_path_buf(),
        };
        let path = dir.join("experiment.json");
        let want = spec_text(spec);
        match fs::read_to_string(&path) {
            Ok(have) if have == want => {}
            Ok(_) => {
                return Err(StoreError::OtherExperiment {
                    dir: dir.to_path_buf(),
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Refuse a directory with run files but no spec: whose runs would they be?
                let stray = fs::read_dir(&runs).map_err(io(&runs))?.next().is_some();
                if stray {
                    return Err(StoreError::OtherExperiment {
                        dir: dir.to_path_buf(),
                    });
                }
                store.write("experiment.json", want.as_bytes())?;
            }
            Err(e) => return Err(io(&path)(e)),
        }
        Ok(store)
    }

    /// Opens an existing directory and reads its spec (for `merge`).
    pub fn open(dir: &Path) -> Result<(Store, Spec), StoreError> {
        let path = dir.join("experiment.json");
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotAnExperiment {
                    dir: dir.to_path_buf(),
                })
            }
            Err(e) => return Err(io(&path)(e)),
        };
        #[derive(Deserialize)]
        struct File {
            schema: String,
            spec: Spec,
        }
        let f: File = serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
            path: path.clone(),
            message: e.to_string(),
        })?;
        if f.schema != SPEC_SCHEMA {
            return Err(StoreError::Corrupt {
                path,
                message: format!("schema {:?}, expected {SPEC_SCHEMA:?}", f.schema),
            });
        }
        Ok((
            Store {
                dir: dir.to_path_buf(),
            },
            f.spec,
        ))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether `other` is the spec this directory was made for (byte for byte).
    pub fn same_experiment(&self, spec: &Spec) -> bool {
        fs::read_to_string(self.dir.join("experiment.json")).is_ok_and(|t| t == spec_text(spec))
    }

    fn run_path(&self, spec: &Spec, key: &RunKey) -> PathBuf {
        self.dir.join("runs").join(key.file_name(spec))
    }

    /// The cached record of `key`, if a complete one is there.
    pub fn load(&self, spec: &Spec, key: &RunKey) -> Option<RunRecord> {
        let text = fs::read_to_string(self.run_path(spec, key)).ok()?;
        let r: RunRecord = serde_json::from_str(&text).ok()?;
        (r.schema == RUN_SCHEMA).then_some(r)
    }

    /// Saves a run's record atomically.
    pub fn save(&self, spec: &Spec, key: &RunKey, rec: &RunRecord) -> Result<(), StoreError> {
        let text = serde_json::to_vec(rec).map_err(|e| StoreError::Corrupt {
            path: self.run_path(spec, key),
            message: e.to_string(),
        })?;
        self.write(&format!("runs/{}", key.file_name(spec)), &text)
    }

    /// Writes `DIR/name` atomically (temporary file in the same directory, then rename).
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        write_atomic(&self.dir.join(name), bytes)
    }
}

/// Writes `path` through a temporary file beside it and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = parent.join(format!(
        ".{name}.pacer-tmp-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(io(path))
}
