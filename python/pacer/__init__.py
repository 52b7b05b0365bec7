"""pacer from Python: generate and analyse task sets, read rt-app files, simulate the Linux
scheduling classes (with pacer's adaptation controllers), and get job records, summaries and
scheduling events as Arrow tables, ready for pandas or polars without a CSV round trip.

The library is pacer's own Rust code (the same simulator as ``pacer sim``), called in-process.
Simulations release the GIL, so threads run them in parallel; a sweep too large for one
machine runs on a Dask cluster (see docs/python.md).

>>> import pacer
>>> sets = pacer.generate(3, recipe="rm-vs-edf", cpus=4, seed=1)
>>> r = pacer.simulate(sets[0], cpus=4, policy="g-edf", duration="1s")
>>> r.miss_ratio
0.0
>>> r.jobs_df().head()          # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional, Sequence, Union

import pyarrow as pa

from . import _native
from ._native import PacerError, TaskSet, Workload

__all__ = [
    "PacerError",
    "TaskSet",
    "Workload",
    "Simulation",
    "generate",
    "read_taskset",
    "read_rtapp",
    "analyze",
    "simulate",
    "__version__",
]

__version__: str = _native.__version__

#: A duration: integer nanoseconds, or text with a unit ("250us", "10ms", "1.5s").
Duration = Union[int, str]
#: Where DataFrames are built: pandas (Arrow-backed dtypes) or polars.
Backend = Literal["pandas", "polars"]


def _duration_text(what: str, d: Duration) -> str:
    if isinstance(d, bool):
        raise PacerError(f"{what}: expected integer nanoseconds or a string such as '10ms'")
    if isinstance(d, int):
        if d < 0:
            raise PacerError(f"{what}: {d}: expected a duration >= 0")
        return f"{d}ns"
    if isinstance(d, str):
        return d
    raise PacerError(
        f"{what}: expected integer nanoseconds or a string such as '10ms', got {type(d).__name__}"
    )


def _utilizations(method: str, util_min: Optional[float], util_max: Optional[float]) -> dict:
    if method == "uunifast":
        if util_min is not None or util_max is not None:
            raise PacerError("util_min/util_max: only with utilizations='randfixedsum' or 'uunifast-discard'")
        return {"method": "uunifast"}
    if method == "uunifast-discard":
        if util_min is not None:
            raise PacerError("util_min: only with utilizations='randfixedsum'")
        return {"method": "uunifast-discard", "max": 1.0 if util_max is None else util_max}
    if method == "randfixedsum":
        return {
            "method": "randfixedsum",
            "min": 0.0 if util_min is None else util_min,
            "max": 1.0 if util_max is None else util_max,
        }
    if method.startswith("unc:"):
        if util_min is not None or util_max is not None:
            raise PacerError("util_min/util_max: only with utilizations='randfixedsum' or 'uunifast-discard'")
        return {"method": "unc", "distribution": method[4:]}
    raise PacerError(
        f"utilizations: {method!r}: expected 'uunifast', 'uunifast-discard', 'randfixedsum' or "
        "'unc:NAME' (NAME one of uni-/exp-/bimo- light, medium, heavy)"
    )


def _periods(method: str, lo: Duration, hi: Duration, granularity: Duration) -> dict:
    if method in ("log-uniform", "uniform"):
        return {
            "method": method,
            "min": _duration_text("period_min", lo),
            "max": _duration_text("period_max", hi),
            "granularity": _duration_text("granularity", granularity),
        }
    if method.startswith("unc:"):
        return {"method": "unc", "distribution": method[4:]}
    raise PacerError(
        f"periods: {method!r}: expected 'log-uniform', 'uniform' or 'unc:NAME' "
        "(NAME one of uni-/log-uni- short, moderate, long)"
    )


def _deadlines(text: str) -> dict:
    if text == "implicit":
        return {"method": "implicit"}
    bad = PacerError(
        f"deadlines: {text!r}: expected 'implicit' or 'constrained:LO..HI' with 0 <= LO <= HI <= 1"
    )
    if not text.startswith("constrained:") or ".." not in text:
        raise bad
    lo, hi = text[len("constrained:"):].split("..", 1)
    try:
        lo_f, hi_f = float(lo), float(hi)
    except ValueError:
        raise bad from None
    if not (0.0 <= lo_f <= hi_f <= 1.0):
        raise bad
    return {"method": "constrained", "lo": lo_f, "hi": hi_f}


def generate(
    count: int = 1,
    *,
    seed: int,
    recipe: Literal["independent", "rm-vs-edf"] = "independent",
    n: Optional[int] = None,
    utilization: Optional[float] = None,
    utilizations: str = "randfixedsum",
    util_min: Optional[float] = None,
    util_max: Optional[float] = None,
    periods: str = "log-uniform",
    period_min: Duration = "10ms",
    period_max: Duration = "100ms",
    granularity: Duration = "1us",
    deadlines: str = "implicit",
    cpus: int = 4,
    x: int = 3,
    r: float = 0.6,
    variant: Literal["exact-total", "literal"] = "exact-total",
    c_min: Duration = "50us",
    spec: Optional[Dict[str, Any]] = None,
) -> List[TaskSet]:
    """Generates ``count`` task sets, as ``pacer gen`` does (same generators, same seeds).

    ``recipe="independent"`` draws ``n`` utilisations summing to ``utilization`` with
    ``utilizations`` (``uunifast``, ``uunifast-discard``, ``randfixedsum`` in
    [``util_min``, ``util_max``], or ``unc:NAME``), periods with ``periods`` (``log-uniform`` or
    ``uniform`` in [``period_min``, ``period_max``] in steps of ``granularity``, or ``unc:NAME``)
    and ``deadlines`` (``implicit`` or ``constrained:LO..HI``). ``recipe="rm-vs-edf"`` is the
    RM-vs-EDF study's recipe (§5.3): ``x·cpus`` tasks of total utilisation ``r·cpus``.

    ``spec`` instead takes the generator parameters exactly as a task-set file records them
    (its ``generator.parameters``), to regenerate a set from its provenance.

    With ``count == 1`` the set uses ``seed``; otherwise set k uses a seed derived from
    (seed, k), recorded in the set (``TaskSet.seed``). Raises :class:`PacerError` on bad
    parameters, naming the parameter and what it expects.
    """
    if spec is None:
        if recipe == "rm-vs-edf":
            spec = {
                "recipe": "rm-vs-edf",
                "m": cpus,
                "x": x,
                "r": r,
                "variant": variant,
                "c_min": _duration_text("c_min", c_min),
                "period_granularity": _duration_text("granularity", granularity),
            }
        elif recipe == "independent":
            if utilization is None:
                raise PacerError("utilization: required for recipe='independent' (the total Σ C/T)")
            if n is None and not utilizations.startswith("unc:"):
                raise PacerError(
                    f"n: required with utilizations={utilizations!r} (only the unc:* "
                    "distributions derive the number of tasks)"
                )
            spec = {
                "recipe": "independent",
                "utilization": utilization,
                "utilizations": _utilizations(utilizations, util_min, util_max),
                "periods": _periods(periods, period_min, period_max, granularity),
                "deadlines": _deadlines(deadlines),
            }
            if n is not None:
                spec["n"] = n
        else:
            raise PacerError(f"recipe: {recipe!r}: expected 'independent' or 'rm-vs-edf'")
    spec = dict(spec)
    spec["seed"] = seed
    return _native.generate_json(json.dumps(spec), count)


def read_taskset(path: Union[str, os.PathLike]) -> TaskSet:
    """Reads a task-set file (docs/formats/taskset.md)."""
    return TaskSet.read(os.fspath(path))


def read_rtapp(path: Union[str, os.PathLike], *, lenient: bool = False) -> Workload:
    """Reads an rt-app JSON file (docs/rtapp.md) into a :class:`Workload` to simulate.

    Without ``lenient`` a file using something pacer cannot run as rt-app would is refused;
    with it, that is skipped and listed in ``Workload.ignored``.
    """
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise PacerError(f"{p}: cannot read: {e.strerror}") from None
    return _native.parse_rtapp(text, p, lenient)


def _flatten_analysis(row: Dict[str, Any]) -> Dict[str, Any]:
    out = {k: v for k, v in row.items() if k != "placement"}
    for k, v in list(out.items()):
        if isinstance(v, (dict, list)):
            out[k] = json.dumps(v)
    placement = row.get("placement")
    out["placement"] = json.dumps(placement) if placement is not None else None
    return out


def analyze(
    taskset: TaskSet,
    *,
    cpus: int,
    cluster_size: Optional[int] = None,
    milp: bool = True,
    backend: Optional[Backend] = None,
) -> Any:
    """Runs every applicable schedulability test (``pacer analyze``) on ``cpus`` CPUs.

    Returns one row per (scheduler, test): ``id`` (e.g. ``g-edf/bcl``), ``scheduler``, ``test``,
    ``verdict`` and the compared value and bound, as a pyarrow Table, or as a pandas / polars
    DataFrame with ``backend=``. Nested fields (placements, response times) are JSON text.
    """
    rows = json.loads(_native.analyze_json(taskset, cpus, cluster_size, milp))
    table = pa.Table.from_pylist([_flatten_analysis(r) for r in rows])
    return _frame(table, backend)


def _frame(table: pa.Table, backend: Optional[Backend]) -> Any:
    if backend is None:
        return table
    if backend == "pandas":
        import pandas as pd

        return table.to_pandas(types_mapper=pd.ArrowDtype)
    if backend == "polars":
        import polars as pl

        return pl.from_arrow(table)
    raise PacerError(f"backend: {backend!r}: expected 'pandas' or 'polars'")


@dataclass(frozen=True)
class Simulation:
    """What :func:`simulate` returns.

    ``jobs``: one row per finished job, the columns of the jobs CSV (docs/formats/jobs-csv.md)
    with ``task`` dictionary-encoded and ``deadline_ns`` / ``normalised_laxity`` null for jobs
    without a deadline; ``events``: the scheduling events (``events=True``); ``summary``: the
    summary ``pacer sim --json`` prints; ``run``: seed, CPUs, policy, simulated time, wall time.
    The tables' schema metadata records the seed and the run.
    """

    summary: Dict[str, Any]
    run: Dict[str, Any]
    jobs: Optional[pa.Table] = field(repr=False, default=None)
    events: Optional[pa.Table] = field(repr=False, default=None)

    @property
    def miss_ratio(self) -> float:
        """Missed deadlines / finished jobs over all tasks (0 when no job finished)."""
        return self.summary.get("miss_ratio") or 0.0

    def jobs_df(self, backend: Backend = "pandas") -> Any:
        """The job records as a pandas (Arrow-backed dtypes) or polars DataFrame."""
        if self.jobs is None:
            raise PacerError("jobs: this simulation ran with jobs=False")
        return _frame(self.jobs, backend)

    def events_df(self, backend: Backend = "pandas") -> Any:
        """The scheduling events as a pandas or polars DataFrame (``simulate(events=True)``)."""
        if self.events is None:
            raise PacerError("events: this simulation ran without events=True")
        return _frame(self.events, backend)

    def tasks_df(self, backend: Backend = "pandas") -> Any:
        """The summary's per-task rows (jobs, misses, response-time percentiles, …)."""
        rows = [
            {k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in t.items()}
            for t in self.summary.get("per_task", [])
        ]
        return _frame(pa.Table.from_pylist(rows), backend)


def simulate(
    target: Union[TaskSet, Workload],
    *,
    cpus: int,
    policy: Optional[str] = None,
    cluster_size: Optional[int] = None,
    duration: Optional[Duration] = None,
    seed: int = 1,
    controller: Optional[Literal["legacy", "proactive"]] = None,
    controlled: Optional[Sequence[str]] = None,
    jobs: bool = True,
    events: bool = False,
    trace: Union[str, os.PathLike, None] = None,
    assign: Optional[str] = None,
    reclaim: bool = False,
) -> Simulation:
    """Simulates a task set or an rt-app workload on ``cpus`` identical CPUs (``pacer sim``).

    A task set runs under ``policy``: ``{g,c,p}-{edf,rm,dm}`` (default ``g-edf``; EDF is
    SCHED_DEADLINE with (C, D, T), RM/DM SCHED_FIFO), ``c-*`` in clusters of ``cluster_size``.
    Partitioned and clustered policies place tasks with ``assign``: a bin-packing heuristic
    (``wfd``, the default, ``ffd``, ``bfd``, ``nfd``, …) or ``ilp`` (the study's min–max-load
    ILP); a set that fits no placement raises :class:`PacerError`. ``reclaim`` gives the EDF
    reservations SCHED_FLAG_RECLAIM (GRUB). An rt-app workload keeps its own policies. ``duration`` defaults to the file's
    ``global.duration``, else 10 s; ``seed`` drives every random draw and is recorded.

    ``controller`` adds pacer's adaptation engine: ``"legacy"`` (period detection and
    percentile budgets for unmodified programs; by default on the SCHED_OTHER threads) or
    ``"proactive"`` (workUnits hints; by default on the threads that send them);
    ``controlled`` names the threads instead.

    ``jobs=False`` keeps only the summary (for large sweeps); ``events=True`` also returns every
    scheduling event; ``trace`` writes a trace file (Perfetto protobuf, or Chrome JSON for a
    ``.json`` name), replacing it only when the simulation succeeds. The GIL is released while
    the simulation runs.
    """
    out = _native.simulate(
        target,
        cpus,
        policy,
        cluster_size,
        duration,
        seed,
        controller,
        list(controlled) if controlled is not None else None,
        jobs,
        events,
        os.fspath(trace) if trace is not None else None,
        assign,
        reclaim,
    )
    return Simulation(
        summary=json.loads(out["summary"]),
        run=json.loads(out["run"]),
        jobs=out["jobs"],
        events=out["events"],
    )
