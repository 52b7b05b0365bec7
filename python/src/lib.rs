//! `pacer._native`: the Python extension behind the `pacer` package (python/pacer). It exposes
//! the library, not the command line: task-set generation (the `generator` parameters of
//! docs/formats/taskset.md), the analysis suite, rt-app files, and simulations with an optional
//! adaptation controller, whose job records and scheduling events come back as pyarrow tables
//! whose columns are handed over as buffers (no CSV round trip). Simulations run with the GIL released,
//! so threads (and Dask's threaded workers) run them in parallel.
//!
//! The Python-facing signatures, docstrings and type hints are in python/pacer/__init__.py and
//! python/pacer/_native.pyi; this module checks arguments and maps library errors to
//! `pacer.PacerError` with the library's own message (file, field, expected value).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use pacer_adapt::controller::{
    LegacyConfig, LegacyController, ProactiveConfig, ProactiveController, ThreadOptions,
};
use pacer_analysis::gen::{self, GenSpec};
use pacer_analysis::suite::{self, SuiteConfig};
use pacer_model::{Duration, Policy, TaskSet as ModelTaskSet};
use pacer_sim::output::perfetto::PerfettoTrace;
use pacer_sim::output::summary::Summary;
use pacer_sim::output::trace::ChromeTrace;
use pacer_sim::record::{Fanout, JobRecord, PrevState, ThreadId, TraceEvent};
use pacer_sim::{Observer, Sim, SimConfig};
use pacer_workload::placement::{self, SchedPolicy};
use pacer_workload::Workload as ModelWorkload;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

create_exception!(
    _native,
    PacerError,
    PyException,
    "An error from pacer's library: bad input (naming the file, field and expected value) or a \
     simulation that could not run."
);

fn err(e: impl std::fmt::Display) -> PyErr {
    PacerError::new_err(e.to_string())
}

/// The placement's messages name the command-line options (`--cluster-size`); here they are
/// keyword arguments (`cluster_size`).
fn keyword_names(msg: &str) -> String {
    ["cpus", "policy", "cluster-size", "assign", "reclaim"]
        .iter()
        .fold(msg.to_string(), |m, opt| {
            m.replace(&format!("--{opt}"), &opt.replace('-', "_"))
        })
}

/// A duration given as integer nanoseconds or as text with a unit (`"10ms"`, `"1.5s"`).
fn duration_arg(what: &str, v: &Bound<'_, PyAny>) -> PyResult<Duration> {
    if let Ok(ns) = v.extract::<u64>() {
        return Ok(Duration(ns));
    }
    if let Ok(s) = v.extract::<String>() {
        return s
            .parse::<Duration>()
            .map_err(|e| err(format!("{what}: `{s}`: {e}")));
    }
    Err(err(format!(
        "{what}: expected integer nanoseconds or a string such as \"10ms\", got {}",
        v.get_type().name()?
    )))
}

/// A task set (docs/formats/taskset.md): periodic or sporadic tasks with C, D, T.
#[pyclass(module = "pacer._native", frozen)]
#[derive(Clone)]
struct TaskSet {
    inner: ModelTaskSet,
}

#[pymethods]
impl TaskSet {
    /// Parses task-set JSON; `source` names it in errors.
    #[staticmethod]
    #[pyo3(signature = (text, source = "<string>"))]
    fn from_json(text: &str, source: &str) -> PyResult<TaskSet> {
        pacer_model::parse_taskset(text, source)
            .map(|inner| TaskSet { inner })
            .map_err(err)
    }

    /// Reads a task-set file.
    #[staticmethod]
    fn read(path: PathBuf) -> PyResult<TaskSet> {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| err(format!("{}: cannot read: {e}", path.display())))?;
        TaskSet::from_json(&text, &path.display().to_string())
    }

    /// The task-set JSON `pacer` reads (the file format, with provenance).
    fn to_json(&self) -> String {
        pacer_model::write_taskset(&self.inner)
    }

    #[getter]
    fn name(&self) -> Option<String> {
        self.inner.name.clone()
    }

    /// The generator's seed, when the set was generated.
    #[getter]
    fn seed(&self) -> Option<u64> {
        self.inner.generator.as_ref().and_then(|g| g.seed)
    }

    /// Σ C/T.
    #[getter]
    fn utilization(&self) -> f64 {
        self.inner.utilization()
    }

    /// One tuple per task: (name, wcet_ns, deadline_ns, period_ns, offset_ns).
    fn rows(&self) -> Vec<(String, u64, u64, u64, u64)> {
        self.inner
            .tasks
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    t.wcet.ns(),
                    t.deadline.ns(),
                    t.period.ns(),
                    t.offset.ns(),
                )
            })
            .collect()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "TaskSet({} tasks, U = {:.4}{}{})",
            self.inner.len(),
            self.inner.utilization(),
            self.seed().map(|s| format!(", seed {s}")).unwrap_or_default(),
            self.inner
                .name
                .as_ref()
                .map(|n| format!(", name {n:?}"))
                .unwrap_or_default()
        )
    }

    /// Pickling (Dask, multiprocessing) goes through the JSON form.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let ctor = py.get_type::<TaskSet>().getattr("from_json")?;
        PyTuple::new(
            py,
            [
                ctor,
                PyTuple::new(py, [self.to_json(), "<pickle>".to_string()])?.into_any(),
            ],
        )
    }
}

/// An rt-app workload (threads with phases of events), as `pacer sim FILE` reads it.
#[pyclass(module = "pacer._native", frozen)]
#[derive(Clone)]
struct Workload {
    inner: ModelWorkload,
    source: String,
    text: String,
    lenient: bool,
}

#[pymethods]
impl Workload {
    /// The names of the threads started with the run.
    #[getter]
    fn threads(&self) -> Vec<String> {
        self.inner
            .initial_threads()
            .map(|(_, t)| t.name.clone())
            .collect()
    }

    /// rt-app's `global.duration` in ns, if the file gives one.
    #[getter]
    fn duration_ns(&self) -> Option<u64> {
        self.inner.duration.map(|d| d.ns())
    }

    /// Keys read but not acted on, and with `lenient=True` what was skipped.
    #[getter]
    fn ignored(&self) -> Vec<String> {
        self.inner.ignored.clone()
    }

    #[getter]
    fn source(&self) -> String {
        self.source.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "Workload({:?}, {} threads)",
            self.source,
            self.inner.initial_threads().count()
        )
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        // The module's own function, which pickle finds again by its qualified name.
        let ctor = py.import("pacer._native")?.getattr("parse_rtapp")?;
        PyTuple::new(
            py,
            [
                ctor,
                (self.text.clone(), self.source.clone(), self.lenient)
                    .into_pyobject(py)?
                    .into_any(),
            ],
        )
    }
}

/// Parses rt-app JSON text.
#[pyfunction]
#[pyo3(signature = (text, source = "<string>", lenient = false))]
fn parse_rtapp(text: &str, source: &str, lenient: bool) -> PyResult<Workload> {
    let opts = pacer_workload::RtAppOptions { lenient };
    let inner = pacer_workload::parse_rtapp_with(text, source, &opts).map_err(err)?;
    Ok(Workload {
        inner,
        source: source.to_string(),
        text: text.to_string(),
        lenient,
    })
}

/// Generates `count` task sets from a generator spec given as JSON (the `generator.parameters`
/// object of docs/formats/taskset.md). One set uses the seed as given; several use seeds derived
/// from (seed, k), each recorded in its set.
#[pyfunction]
fn generate_json(py: Python<'_>, spec: &str, count: usize) -> PyResult<Vec<TaskSet>> {
    let spec: GenSpec = serde_json::from_str(spec).map_err(|e| err(format!("generator spec: {e}")))?;
    if count == 0 {
        return Err(err("count: expected at least 1"));
    }
    let sets = py
        .detach(|| {
            if count == 1 {
                gen::generate(&spec).map(|s| vec![s])
            } else {
                gen::generate_many(&spec, count)
            }
        })
        .map_err(err)?;
    Ok(sets.into_iter().map(|inner| TaskSet { inner }).collect())
}

/// Runs the analysis suite (`pacer analyze`) and returns its rows as JSON text.
#[pyfunction]
#[pyo3(signature = (taskset, cpus, cluster_size = None, milp = true))]
fn analyze_json(
    py: Python<'_>,
    taskset: &TaskSet,
    cpus: usize,
    cluster_size: Option<usize>,
    milp: bool,
) -> PyResult<String> {
    if cpus == 0 {
        return Err(err("cpus: expected at least 1"));
    }
    let mut cfg = SuiteConfig::new(cpus);
    if let Some(k) = cluster_size {
        if k == 0 || !cpus.is_multiple_of(k) {
            return Err(err(format!(
                "cluster_size {k}: expected a divisor of cpus {cpus}"
            )));
        }
        cfg.cluster_size = Some(k);
    }
    cfg.milp = milp;
    let set = taskset.inner.clone();
    let rows = py.detach(move || suite::run(&pacer_analysis::timings(&set.tasks), &cfg));
    serde_json::to_string(&rows).map_err(err)
}

const EVENT_KINDS: [&str; 9] = [
    "switch",
    "wakeup",
    "release",
    "finish",
    "throttle",
    "replenish",
    "migrate",
    "frequency",
    "reservation",
];
const PREV_STATES: [&str; 3] = ["runnable", "sleeping", "dead"];

/// One scheduling event as a row of the event table: the fields that do not apply are null.
#[derive(Default)]
struct EventRow {
    ts: u64,
    /// Index into [`EVENT_KINDS`].
    kind: u32,
    cpu: Option<u32>,
    thread: Option<u32>,
    prev_thread: Option<u32>,
    /// Index into [`PREV_STATES`].
    prev_state: Option<u32>,
    job: Option<u64>,
    missed: Option<bool>,
    until: Option<u64>,
    from_cpu: Option<u32>,
    khz: Option<u32>,
    runtime: Option<u64>,
    period: Option<u64>,
}

impl From<&TraceEvent> for EventRow {
    fn from(e: &TraceEvent) -> EventRow {
        let none = EventRow::default();
        match *e {
            TraceEvent::Switch {
                t,
                cpu,
                prev,
                next,
                prev_state,
            } => EventRow {
                ts: t,
                kind: 0,
                cpu: Some(cpu),
                thread: next,
                prev_thread: prev,
                prev_state: prev.map(|_| match prev_state {
                    PrevState::Runnable => 0,
                    PrevState::Sleeping => 1,
                    PrevState::Dead => 2,
                }),
                ..none
            },
            TraceEvent::Wakeup { t, thread, cpu } => EventRow {
                ts: t,
                kind: 1,
                cpu: Some(cpu),
                thread: Some(thread),
                ..none
            },
            TraceEvent::Release { t, thread, job } => EventRow {
                ts: t,
                kind: 2,
                thread: Some(thread),
                job: Some(job),
                ..none
            },
            TraceEvent::Finish {
                t,
                thread,
                job,
                missed,
            } => EventRow {
                ts: t,
                kind: 3,
                thread: Some(thread),
                job: Some(job),
                missed: Some(missed),
                ..none
            },
            TraceEvent::Throttle { t, thread, until } => EventRow {
                ts: t,
                kind: 4,
                thread: Some(thread),
                until: Some(until),
                ..none
            },
            TraceEvent::Replenish { t, thread } => EventRow {
                ts: t,
                kind: 5,
                thread: Some(thread),
                ..none
            },
            TraceEvent::Migrate { t, thread, from, to } => EventRow {
                ts: t,
                kind: 6,
                cpu: Some(to),
                thread: Some(thread),
                from_cpu: Some(from),
                ..none
            },
            // The cluster index goes in `cpu`'s place: a frequency belongs to a cluster.
            TraceEvent::Frequency { t, cluster, khz } => EventRow {
                ts: t,
                kind: 7,
                cpu: Some(cluster),
                khz: Some(khz),
                ..none
            },
            TraceEvent::Reservation {
                t,
                thread,
                runtime,
                period,
            } => EventRow {
                ts: t,
                kind: 8,
                thread: Some(thread),
                runtime: Some(runtime),
                period: Some(period),
                ..none
            },
        }
    }
}

/// What a simulation keeps, each only when asked for: the job records and the scheduling
/// events, turned into table columns once the run is over.
struct Collect {
    jobs: Option<Vec<JobRecord>>,
    events: Option<Vec<EventRow>>,
}

impl Observer for Collect {
    fn job(&mut self, r: &JobRecord) {
        if let Some(j) = &mut self.jobs {
            j.push(*r);
        }
    }
    fn event(&mut self, e: &TraceEvent) {
        if let Some(ev) = &mut self.events {
            ev.push(e.into());
        }
    }
    fn wants_events(&self) -> bool {
        self.events.is_some()
    }
}

enum TraceFile {
    Json(ChromeTrace<BufWriter<File>>),
    Perfetto(PerfettoTrace<BufWriter<File>>),
}

/// Everything one simulation needs, owned, so that it runs without the GIL.
struct SimRequest {
    workload: ModelWorkload,
    cpus: usize,
    policy_label: Option<String>,
    duration: Option<Duration>,
    seed: u64,
    controller: Option<String>,
    controlled: Option<Vec<String>>,
    jobs: bool,
    events: bool,
    trace: Option<PathBuf>,
}

struct SimOutput {
    names: Vec<String>,
    jobs: Option<Vec<JobRecord>>,
    events: Option<Vec<EventRow>>,
    summary_json: String,
    run_json: String,
}

fn add_controller(
    sim: &mut Sim,
    kind: &str,
    controlled: &Option<Vec<String>>,
    w: &ModelWorkload,
) -> Result<Vec<String>, String> {
    let names = sim.thread_names();
    let chosen: Vec<usize> = match controlled {
        Some(list) => list
            .iter()
            .map(|n| {
                names.iter().position(|x| x == n).ok_or_else(|| {
                    format!(
                        "controlled: no thread named `{n}` (threads: {})",
                        names.join(", ")
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        None => w
            .threads
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.forked)
            .filter(|(_, t)| match kind {
                "legacy" => matches!(t.policy, Policy::Other { .. }),
                _ => t.cooperative,
            })
            .map(|(i, _)| i)
            .collect(),
    };
    if chosen.is_empty() {
        return Err(format!(
            "controller `{kind}`: no thread to control (give `controlled=[names]`; by default the \
             legacy controller takes the SCHED_OTHER threads, the proactive one the threads that \
             send workUnits hints)"
        ));
    }
    match kind {
        "legacy" => {
            let mut c = LegacyController::new(LegacyConfig::default()).map_err(|e| e.to_string())?;
            for &t in &chosen {
                c.add_thread(t as ThreadId, ThreadOptions::default())
                    .map_err(|e| e.to_string())?;
            }
            sim.add_controller(Box::new(c));
        }
        "proactive" => {
            let mut c = ProactiveController::new(ProactiveConfig::default()).map_err(|e| e.to_string())?;
            for &t in &chosen {
                let Some(period) = w.threads[t].timer_period() else {
                    return Err(format!(
                        "controller `proactive`: thread `{}` has no timer, and the proactive \
                         controller needs its period",
                        names[t]
                    ));
                };
                c.add_thread(t as ThreadId, period.ns(), ThreadOptions::default())
                    .map_err(|e| e.to_string())?;
            }
            sim.add_controller(Box::new(c));
        }
        other => {
            return Err(format!(
                "controller `{other}`: expected \"legacy\" (period detection and percentile budgets, \
                 lfspp-legacy-multimedia.txt) or \"proactive\" (workUnits hints, \
                 adaptive-deadline-audio-android.txt)"
            ))
        }
    }
    Ok(chosen.iter().map(|&t| names[t].clone()).collect())
}

fn run_simulation(req: SimRequest) -> Result<SimOutput, String> {
    let duration = req
        .duration
        .or(req.workload.duration)
        .unwrap_or(Duration::from_secs(10));
    let horizon = duration.ns();
    if horizon == 0 {
        return Err("duration: expected a simulated time > 0".into());
    }
    let mut cfg = SimConfig::new(req.cpus);
    cfg.seed = req.seed;
    let workload = req.workload;
    let mut sim = Sim::new(workload.clone(), cfg).map_err(|e| format!("setting up the simulation: {e}"))?;
    let controlled = match &req.controller {
        Some(kind) => add_controller(&mut sim, kind, &req.controlled, &workload)?,
        None => Vec::new(),
    };
    let names = sim.thread_names();
    let mut summary = Summary::new(names.len());
    let mut collect = Collect {
        jobs: req.jobs.then(Vec::new),
        events: req.events.then(Vec::new),
    };
    let cpus = req.cpus as u32;
    // The trace goes to a temporary name beside the file and replaces it only on success.
    let mut trace = match &req.trace {
        Some(path) => {
            let tmp = temporary_beside(path);
            let f = File::create(&tmp).map_err(|e| format!("trace: {}: {e}", tmp.display()))?;
            let json = path.extension().is_some_and(|e| e == "json");
            Some((
                path.clone(),
                tmp,
                if json {
                    TraceFile::Json(ChromeTrace::new(BufWriter::new(f), names.clone(), cpus))
                } else {
                    TraceFile::Perfetto(PerfettoTrace::for_simulation(BufWriter::new(f), &sim, cpus))
                },
            ))
        }
        None => None,
    };
    let started = std::time::Instant::now();
    {
        let mut observers: Vec<&mut dyn Observer> = vec![&mut summary, &mut collect];
        if let Some((_, _, t)) = trace.as_mut() {
            observers.push(match t {
                TraceFile::Json(t) => t,
                TraceFile::Perfetto(t) => t,
            });
        }
        sim.run_until(horizon, &mut Fanout(observers));
    }
    let wall = started.elapsed().as_secs_f64();
    if let Some((path, tmp, t)) = trace {
        let done = match t {
            TraceFile::Json(t) => t.finish(horizon).map(drop),
            TraceFile::Perfetto(t) => t.finish().map(drop),
        };
        let done = done.and_then(|()| {
            if sim.failure().is_some() {
                Ok(())
            } else {
                std::fs::rename(&tmp, &path)
            }
        });
        if sim.failure().is_some() || done.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        done.map_err(|e| format!("trace: {}: {e}", path.display()))?;
    }
    if let Some(e) = sim.failure() {
        return Err(format!(
            "the simulation stopped at {} ms: {e}",
            sim.now() / 1_000_000
        ));
    }
    let names = sim.thread_names();
    let report = summary.report(&names, &sim.stats(), horizon, cpus);
    let run = serde_json::json!({
        "seed": req.seed,
        "cpus": req.cpus,
        "policy": req.policy_label,
        "simulated_ns": horizon,
        "events": sim.events_processed(),
        "jobs": sim.jobs_finished(),
        "wall_seconds": wall,
        "controller": req.controller,
        "controlled": controlled,
        "ignored_keys": workload.ignored,
    });
    Ok(SimOutput {
        names,
        jobs: collect.jobs,
        events: collect.events,
        summary_json: serde_json::to_string(&report).map_err(|e| e.to_string())?,
        run_json: run.to_string(),
    })
}

fn temporary_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.pacer-tmp-{}", std::process::id()))
}

/// Builds pyarrow arrays from Rust columns: the values are copied once into a Python bytes
/// object that pyarrow wraps as the array's buffer (Arrow's layout: little-endian values, an
/// LSB-first validity bitmap).
struct Arrow<'py> {
    py: Python<'py>,
    pa: Bound<'py, PyModule>,
}

trait Native: Copy + Default {
    const TYPE: &'static str;
    fn put(self, out: &mut Vec<u8>);
}

macro_rules! native {
    ($t:ty, $name:literal) => {
        impl Native for $t {
            const TYPE: &'static str = $name;
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    };
}
native!(u32, "uint32");
native!(u64, "uint64");
native!(f64, "float64");

fn bitmap(bits: impl ExactSizeIterator<Item = bool>) -> Vec<u8> {
    let mut out = vec![0u8; bits.len().div_ceil(8)];
    for (i, b) in bits.enumerate() {
        if b {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

impl<'py> Arrow<'py> {
    fn new(py: Python<'py>) -> PyResult<Arrow<'py>> {
        Ok(Arrow {
            py,
            pa: py.import("pyarrow")?,
        })
    }

    fn buffer(&self, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        self.pa.call_method1("py_buffer", (PyBytes::new(self.py, bytes),))
    }

    fn array_from_buffers(
        &self,
        ty: Bound<'py, PyAny>,
        len: usize,
        validity: Option<Vec<u8>>,
        values: &[u8],
        nulls: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let validity = match validity {
            Some(v) if nulls > 0 => self.buffer(&v)?,
            _ => self.py.None().into_bound(self.py),
        };
        let buffers = PyList::new(self.py, [validity, self.buffer(values)?])?;
        let kwargs = PyDict::new(self.py);
        kwargs.set_item("null_count", nulls)?;
        self.pa
            .getattr("Array")?
            .call_method("from_buffers", (ty, len, buffers), Some(&kwargs))
    }

    fn primitive<T: Native>(&self, values: &[T]) -> PyResult<Bound<'py, PyAny>> {
        let mut bytes = Vec::with_capacity(std::mem::size_of_val(values));
        for v in values {
            v.put(&mut bytes);
        }
        let ty = self.pa.call_method0(T::TYPE)?;
        self.array_from_buffers(ty, values.len(), None, &bytes, 0)
    }

    fn nullable<T: Native>(&self, values: &[Option<T>]) -> PyResult<Bound<'py, PyAny>> {
        let mut bytes = Vec::with_capacity(std::mem::size_of_val(values));
        for v in values {
            v.unwrap_or_default().put(&mut bytes);
        }
        let nulls = values.iter().filter(|v| v.is_none()).count();
        let ty = self.pa.call_method0(T::TYPE)?;
        let validity = bitmap(values.iter().map(Option::is_some));
        self.array_from_buffers(ty, values.len(), Some(validity), &bytes, nulls)
    }

    fn boolean(&self, values: &[bool]) -> PyResult<Bound<'py, PyAny>> {
        let ty = self.pa.call_method0("bool_")?;
        self.array_from_buffers(ty, values.len(), None, &bitmap(values.iter().copied()), 0)
    }

    fn nullable_boolean(&self, values: &[Option<bool>]) -> PyResult<Bound<'py, PyAny>> {
        let ty = self.pa.call_method0("bool_")?;
        let nulls = values.iter().filter(|v| v.is_none()).count();
        self.array_from_buffers(
            ty,
            values.len(),
            Some(bitmap(values.iter().map(Option::is_some))),
            &bitmap(values.iter().map(|v| v.unwrap_or(false))),
            nulls,
        )
    }

    /// A dictionary-encoded string column: `codes[i]` indexes `names` (null where `None`).
    fn dictionary(&self, codes: &[Option<u32>], names: &[&str]) -> PyResult<Bound<'py, PyAny>> {
        let indices = self.nullable(codes)?;
        let dictionary = self
            .pa
            .call_method1("array", (names.to_vec(), self.pa.call_method0("string")?))?;
        self.pa
            .getattr("DictionaryArray")?
            .call_method1("from_arrays", (indices, dictionary))
    }

    fn table(
        &self,
        columns: Vec<(&str, Bound<'py, PyAny>)>,
        metadata: &[(&str, String)],
    ) -> PyResult<Bound<'py, PyAny>> {
        let (names, arrays): (Vec<&str>, Vec<Bound<'py, PyAny>>) = columns.into_iter().unzip();
        let kwargs = PyDict::new(self.py);
        kwargs.set_item("names", names)?;
        let meta = PyDict::new(self.py);
        for (k, v) in metadata {
            meta.set_item(k, v)?;
        }
        kwargs.set_item("metadata", meta)?;
        self.pa
            .getattr("Table")?
            .call_method("from_arrays", (arrays,), Some(&kwargs))
    }
}

/// One column of `rows`.
fn col<R, T>(rows: &[R], f: impl Fn(&R) -> T) -> Vec<T> {
    rows.iter().map(f).collect()
}

fn jobs_table<'py>(
    a: &Arrow<'py>,
    j: &[JobRecord],
    names: &[String],
    meta: &[(&str, String)],
) -> PyResult<Bound<'py, PyAny>> {
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    // A job without a deadline someone asked for has none in the table (as in the CSV).
    let has = |r: &JobRecord| r.has_deadline();
    // Column names and order of the jobs CSV (docs/formats/jobs-csv.md).
    a.table(
        vec![
            ("task", a.dictionary(&col(j, |r| Some(r.thread)), &names)?),
            ("job", a.primitive(&col(j, |r| r.job))?),
            ("release_ns", a.primitive(&col(j, |r| r.release))?),
            ("start_ns", a.primitive(&col(j, |r| r.start))?),
            ("finish_ns", a.primitive(&col(j, |r| r.finish))?),
            (
                "deadline_ns",
                a.nullable(&col(j, |r| has(r).then_some(r.deadline)))?,
            ),
            ("response_ns", a.primitive(&col(j, JobRecord::response_time))?),
            (
                "normalised_laxity",
                a.nullable(&col(j, |r| has(r).then(|| r.normalised_laxity())))?,
            ),
            ("missed", a.boolean(&col(j, |r| has(r) && r.missed()))?),
            ("exec_ns", a.primitive(&col(j, |r| r.exec))?),
            ("preemptions", a.primitive(&col(j, |r| r.preemptions))?),
            ("migrations", a.primitive(&col(j, |r| r.migrations))?),
            ("cpu", a.primitive(&col(j, |r| r.cpu))?),
        ],
        meta,
    )
}

fn events_table<'py>(
    a: &Arrow<'py>,
    e: &[EventRow],
    names: &[String],
    meta: &[(&str, String)],
) -> PyResult<Bound<'py, PyAny>> {
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    a.table(
        vec![
            ("ts_ns", a.primitive(&col(e, |r| r.ts))?),
            ("kind", a.dictionary(&col(e, |r| Some(r.kind)), &EVENT_KINDS)?),
            ("cpu", a.nullable(&col(e, |r| r.cpu))?),
            ("thread", a.dictionary(&col(e, |r| r.thread), &names)?),
            ("prev_thread", a.dictionary(&col(e, |r| r.prev_thread), &names)?),
            (
                "prev_state",
                a.dictionary(&col(e, |r| r.prev_state), &PREV_STATES)?,
            ),
            ("job", a.nullable(&col(e, |r| r.job))?),
            ("missed", a.nullable_boolean(&col(e, |r| r.missed))?),
            ("until_ns", a.nullable(&col(e, |r| r.until))?),
            ("from_cpu", a.nullable(&col(e, |r| r.from_cpu))?),
            ("khz", a.nullable(&col(e, |r| r.khz))?),
            ("runtime_ns", a.nullable(&col(e, |r| r.runtime))?),
            ("period_ns", a.nullable(&col(e, |r| r.period))?),
        ],
        meta,
    )
}

/// Simulates a task set (under `policy`) or an rt-app workload; returns a dict with `summary`
/// and `run` (JSON text), and `jobs` / `events` (pyarrow tables, or None when not asked for).
#[pyfunction]
#[pyo3(signature = (
    target, cpus, policy = None, cluster_size = None, duration = None, seed = 1,
    controller = None, controlled = None, jobs = true, events = false, trace = None,
    assign = None, reclaim = false
))]
#[allow(clippy::too_many_arguments)]
fn simulate<'py>(
    py: Python<'py>,
    target: &Bound<'py, PyAny>,
    cpus: u32,
    policy: Option<&str>,
    cluster_size: Option<u32>,
    duration: Option<&Bound<'py, PyAny>>,
    seed: u64,
    controller: Option<String>,
    controlled: Option<Vec<String>>,
    jobs: bool,
    events: bool,
    trace: Option<PathBuf>,
    assign: Option<&str>,
    reclaim: bool,
) -> PyResult<Bound<'py, PyDict>> {
    if cpus == 0 {
        return Err(err("cpus: expected at least 1"));
    }
    let duration = duration.map(|d| duration_arg("duration", d)).transpose()?;
    let (workload, policy_label) = if let Ok(ts) = target.cast::<TaskSet>() {
        let policy_text = policy.unwrap_or("g-edf");
        let sched: SchedPolicy = policy_text.parse().map_err(|e| err(format!("policy: {e}")))?;
        let mut cfg = placement::Configuration::new(sched, cpus, cluster_size);
        if let Some(a) = assign {
            cfg.assign = placement::Assign::parse(a, Duration::from_secs(10))
                .map_err(|e| err(keyword_names(&e.to_string())))?;
        }
        cfg.reclaim = reclaim;
        let placed =
            placement::place(&ts.get().inner, &cfg).map_err(|e| err(keyword_names(&e.to_string())))?;
        (placed.workload, Some(policy_text.to_string()))
    } else if let Ok(w) = target.cast::<Workload>() {
        if policy.is_some() || cluster_size.is_some() || assign.is_some() || reclaim {
            return Err(err(
                "policy, cluster_size, assign, reclaim: only for task sets; an rt-app workload sets each thread's \
                 policy and CPUs itself",
            ));
        }
        (w.get().inner.clone(), None)
    } else {
        return Err(err(format!(
            "target: expected a pacer.TaskSet or pacer.Workload, got {}",
            target.get_type().name()?
        )));
    };
    let req = SimRequest {
        workload,
        cpus: cpus as usize,
        policy_label,
        duration,
        seed,
        controller,
        controlled,
        jobs,
        events,
        trace,
    };
    let out = py.detach(move || run_simulation(req)).map_err(err)?;
    let result = PyDict::new(py);
    result.set_item("summary", &out.summary_json)?;
    result.set_item("run", &out.run_json)?;
    let meta = [
        ("pacer.seed", seed.to_string()),
        ("pacer.run", out.run_json.clone()),
    ];
    let arrow = if out.jobs.is_some() || out.events.is_some() {
        Some(Arrow::new(py)?)
    } else {
        None
    };
    match (&out.jobs, &arrow) {
        (Some(j), Some(a)) => result.set_item("jobs", jobs_table(a, j, &out.names, &meta)?)?,
        _ => result.set_item("jobs", py.None())?,
    }
    match (&out.events, &arrow) {
        (Some(e), Some(a)) => result.set_item("events", events_table(a, e, &out.names, &meta)?)?,
        _ => result.set_item("events", py.None())?,
    }
    Ok(result)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("PacerError", m.py().get_type::<PacerError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<TaskSet>()?;
    m.add_class::<Workload>()?;
    m.add_function(wrap_pyfunction!(parse_rtapp, m)?)?;
    m.add_function(wrap_pyfunction!(generate_json, m)?)?;
    m.add_function(wrap_pyfunction!(analyze_json, m)?)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    Ok(())
}
