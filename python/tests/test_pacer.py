"""Tests of the `pacer` Python package (run by `cargo test` through crates/cli/tests/python.rs,
or directly: `pip install './python[test]' && pytest python/tests`).

Where the `pacer` command is at hand (PACER_BIN, set by the cargo wrapper), the simulator's job
records are compared with `pacer sim --jobs` row for row: the package is the library, not a
second implementation.
"""

import csv
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

import pacer

ROOT = Path(__file__).resolve().parents[2]
PACER_BIN = os.environ.get("PACER_BIN")
JOBS_COLUMNS = [
    "task",
    "job",
    "release_ns",
    "start_ns",
    "finish_ns",
    "deadline_ns",
    "response_ns",
    "normalised_laxity",
    "missed",
    "exec_ns",
    "preemptions",
    "migrations",
    "cpu",
]


def test_generation_is_seeded_and_recorded():
    a = pacer.generate(5, recipe="rm-vs-edf", cpus=4, seed=7)
    b = pacer.generate(5, recipe="rm-vs-edf", cpus=4, seed=7)
    c = pacer.generate(5, recipe="rm-vs-edf", cpus=4, seed=8)
    assert [s.to_json() for s in a] == [s.to_json() for s in b]
    assert [s.to_json() for s in a] != [s.to_json() for s in c]
    assert len({s.seed for s in a}) == 5
    assert all(len(s) == 12 for s in a)
    # Σ C/T = R·m up to C and T being whole nanoseconds.
    assert all(abs(s.utilization - 2.4) < 1e-6 for s in a)
    one = pacer.generate(seed=3, n=6, utilization=1.5, utilizations="uunifast-discard")[0]
    assert one.seed == 3 and len(one) == 6
    # The spec recorded in a set regenerates it.
    import json

    params = json.loads(one.to_json())["generator"]["parameters"]
    again = pacer.generate(seed=3, spec=params)[0]
    assert again.rows() == one.rows()


def test_bad_generator_parameters_name_the_parameter():
    with pytest.raises(pacer.PacerError, match="utilizations"):
        pacer.generate(seed=1, n=3, utilization=0.5, utilizations="nope")
    with pytest.raises(pacer.PacerError, match="n: required"):
        pacer.generate(seed=1, utilization=0.5)
    with pytest.raises(pacer.PacerError, match="period_min"):
        pacer.generate(seed=1, n=3, utilization=0.5, period_min=2.5)
    with pytest.raises(pacer.PacerError):
        pacer.generate(seed=1, n=3, utilization=5.0, utilizations="uunifast")


def test_task_sets_pickle_and_read(tmp_path):
    ts = pacer.generate(seed=2, n=4, utilization=0.8)[0]
    back = pickle.loads(pickle.dumps(ts))
    assert back.to_json() == ts.to_json()
    f = tmp_path / "set.json"
    f.write_text(ts.to_json())
    assert pacer.read_taskset(f).rows() == ts.rows()
    bad = tmp_path / "bad.json"
    bad.write_text('{"tasks": [{"name": "a", "wcet": "2ms", "period": "1ms"}]}')
    with pytest.raises(pacer.PacerError, match="bad.json"):
        pacer.read_taskset(bad)


def test_analysis_rows():
    ts = pacer.generate(seed=1, recipe="rm-vs-edf", cpus=4, r=0.5)[0]
    table = pacer.analyze(ts, cpus=4, cluster_size=2, milp=False)
    assert isinstance(table, pa.Table)
    ids = table.column("id").to_pylist()
    assert any(i.startswith("g-edf/") for i in ids)
    assert any(i.startswith("p-edf/") for i in ids)
    assert any(i.startswith("c-edf/") for i in ids)
    # Utilisation above the platform: every test says no.
    over = pacer.generate(seed=1, n=8, utilization=4.5, utilizations="randfixedsum")[0]
    verdicts = pacer.analyze(over, cpus=4, milp=False).column("verdict").to_pylist()
    assert "schedulable" not in verdicts, verdicts


def test_job_table_is_the_jobs_csv(tmp_path):
    ts = pacer.generate(seed=4, recipe="rm-vs-edf", cpus=2, r=0.9)[0]
    r = pacer.simulate(ts, cpus=2, policy="g-edf", duration="500ms", seed=5)
    t = r.jobs
    assert t.column_names == JOBS_COLUMNS
    assert t.schema.field("task").type == pa.dictionary(pa.uint32(), pa.string())
    assert t.schema.metadata[b"pacer.seed"] == b"5"
    assert t.num_rows == r.summary["jobs"] == r.run["jobs"]
    assert r.run["seed"] == 5 and r.run["policy"] == "g-edf"
    missed = t.column("missed").to_pylist().count(True)
    assert missed == r.summary["misses"]
    if PACER_BIN is None:
        pytest.skip("PACER_BIN not set: the comparison with `pacer sim --jobs` needs the binary")
    f = tmp_path / "set.json"
    f.write_text(ts.to_json())
    out = tmp_path / "jobs.csv"
    subprocess.run(
        [PACER_BIN, "sim", str(f), "--cpus", "2", "--policy", "g-edf", "--duration", "500ms",
         "--seed", "5", "--jobs", str(out)],
        check=True,
        capture_output=True,
    )
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == t.num_rows
    py = t.to_pylist()
    for a, b in zip(rows, py):
        assert a["task"] == b["task"]
        for col in ("job", "release_ns", "start_ns", "finish_ns", "exec_ns", "cpu"):
            assert int(a[col]) == b[col], col
        assert (a["deadline_ns"] or None) == (str(b["deadline_ns"]) if b["deadline_ns"] is not None else None)
        assert int(a["missed"]) == int(b["missed"])


def test_dataframes_are_arrow_backed():
    pd = pytest.importorskip("pandas")
    pl = pytest.importorskip("polars")
    ts = pacer.generate(seed=1, n=5, utilization=0.9)[0]
    r = pacer.simulate(ts, cpus=1, policy="p-edf", duration="300ms")
    df = r.jobs_df()
    assert isinstance(df["release_ns"].dtype, pd.ArrowDtype)
    assert len(df) == r.jobs.num_rows
    pdf = r.jobs_df("polars")
    assert isinstance(pdf, pl.DataFrame) and pdf.height == r.jobs.num_rows
    tasks = r.tasks_df()
    assert len(tasks) == 5


def test_events_and_traces(tmp_path):
    ts = pacer.generate(seed=1, n=3, utilization=0.7)[0]
    trace = tmp_path / "run.pftrace"
    r = pacer.simulate(ts, cpus=1, policy="p-rm", duration="200ms", events=True, trace=trace)
    kinds = set(r.events.column("kind").to_pylist())
    assert {"switch", "wakeup", "release", "finish"} <= kinds
    switches = r.events.filter(pa.compute.equal(r.events.column("kind"), "switch"))
    assert switches.num_rows >= r.summary["jobs"]
    assert trace.stat().st_size > 0
    # A trace that cannot be written is an error, and nothing is left behind.
    with pytest.raises(pacer.PacerError, match="trace"):
        pacer.simulate(ts, cpus=1, policy="p-rm", duration="10ms", trace=tmp_path / "no" / "t.pftrace")
    assert not (tmp_path / "no").exists()


def test_rtapp_workload_with_the_legacy_controller():
    w = pacer.read_rtapp(ROOT / "examples" / "rtapp-periodic.json")
    assert w.threads
    back = pickle.loads(pickle.dumps(w))
    assert back.threads == w.threads and back.source == w.source
    r = pacer.simulate(w, cpus=2, duration="3s", controller="legacy", controlled=[w.threads[0]])
    assert r.run["controlled"] == [w.threads[0]]
    assert r.summary["jobs"] > 0
    with pytest.raises(pacer.PacerError, match="controller `magic`"):
        pacer.simulate(w, cpus=2, duration="1s", controller="magic")
    with pytest.raises(pacer.PacerError, match="no thread named"):
        pacer.simulate(w, cpus=2, duration="1s", controller="legacy", controlled=["nobody"])
    with pytest.raises(pacer.PacerError, match="only for task sets"):
        pacer.simulate(w, cpus=2, policy="g-edf")


def test_bad_simulation_arguments():
    ts = pacer.generate(seed=1, n=3, utilization=0.5)[0]
    with pytest.raises(pacer.PacerError, match="policy"):
        pacer.simulate(ts, cpus=2, policy="x-edf")
    with pytest.raises(pacer.PacerError, match="duration"):
        pacer.simulate(ts, cpus=2, duration="ten seconds")
    with pytest.raises(pacer.PacerError, match="cpus"):
        pacer.simulate(ts, cpus=0)
    with pytest.raises(pacer.PacerError, match="target"):
        pacer.simulate("set.json", cpus=2)
    # Placement errors name the keyword arguments, not the command line's options.
    with pytest.raises(pacer.PacerError, match="needs cluster_size") as e:
        pacer.simulate(ts, cpus=4, policy="c-edf")
    assert "--" not in str(e.value)
    with pytest.raises(pacer.PacerError, match="assign"):
        pacer.simulate(ts, cpus=2, policy="p-edf", assign="best-guess")
    heavy = pacer.generate(seed=1, n=6, utilization=1.9, utilizations="randfixedsum", util_max=0.9)[0]
    placed = pacer.simulate(heavy, cpus=2, policy="p-edf", assign="ffd", reclaim=True, duration="100ms")
    assert placed.run["policy"] == "p-edf"


def test_the_gil_is_released_while_simulating():
    # If the simulation held the GIL, this thread could not count while it runs: about a
    # million jobs keep the simulator busy for a second or so.
    ts = pacer.generate(seed=1, recipe="rm-vs-edf", cpus=8, x=6, r=0.7)[0]
    done = threading.Event()
    count = 0

    def run():
        pacer.simulate(ts, cpus=8, policy="g-edf", duration="1000s", jobs=False)
        done.set()

    t = threading.Thread(target=run)
    started = time.monotonic()
    t.start()
    while not done.is_set():
        count += 1
        time.sleep(0.001)
    t.join()
    took = time.monotonic() - started
    assert took > 0.2, f"the simulation took only {took:.3f} s: too short to tell"
    assert count > 20, f"the main thread ran {count} times during the {took:.3f} s simulation"


def test_sweep_through_dask():
    pytest.importorskip("dask.distributed")
    script = ROOT / "python" / "examples" / "sweep.py"
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = {l.split()[0]: l.split() for l in out.stdout.splitlines() if l.split() and l.split()[0] in ("g-edf", "p-edf")}
    assert set(lines) == {"g-edf", "p-edf"}, out.stdout
    # size: sets run; count: sets with a result (p-edf: those a partition fits).
    for policy, fields in lines.items():
        size, count, mean, top = int(fields[1]), int(fields[2]), float(fields[3]), float(fields[4])
        assert size == 100, out.stdout
        assert 0 < count <= 100, out.stdout
        assert 0.0 <= mean <= top <= 1.0, out.stdout
    assert int(lines["g-edf"][2]) == 100, out.stdout


def test_perfetto_trace_decodes_with_perfetto_s_own_protos(tmp_path):
    # trace_processor itself cannot be fetched here (its binary comes from get.perfetto.dev);
    # the `perfetto` package's compiled Trace proto is Perfetto's schema, so decoding with it
    # checks field numbers and types, and the events must be those the simulator reported.
    pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    ts = pacer.generate(seed=3, recipe="rm-vs-edf", cpus=2, r=0.8)[0]
    path = tmp_path / "run.perfetto-trace"
    r = pacer.simulate(ts, cpus=2, policy="g-edf", duration="300ms", events=True, trace=path)
    trace = pb.Trace()
    trace.ParseFromString(path.read_bytes())
    switches, wakings, names = [], [], {}
    for packet in trace.packet:
        if packet.HasField("process_tree"):
            for t in packet.process_tree.threads:
                names[t.tid] = t.name
        if packet.HasField("ftrace_events"):
            cpu = packet.ftrace_events.cpu
            for ev in packet.ftrace_events.event:
                if ev.HasField("sched_switch"):
                    switches.append((cpu, ev.timestamp, ev.sched_switch))
                elif ev.HasField("sched_waking"):
                    wakings.append(ev.sched_waking)
    kinds = r.events.column("kind").to_pylist()
    assert len(switches) == kinds.count("switch")
    assert len(wakings) == kinds.count("wakeup")
    assert sorted(set(names.values())) == sorted(name for name, *_ in ts.rows())
    for cpu in (0, 1):
        stamps = [t for c, t, _ in switches if c == cpu]
        assert stamps == sorted(stamps) and stamps, cpu
    # Every switched-in task is a workload thread (by tid and comm) or the idle task.
    for _, _, s in switches:
        assert s.next_pid == 0 or names[s.next_pid] == s.next_comm
        assert s.prev_state in (0, 1, 0x80)
    # Each task's SCHED_DEADLINE reservation (C, T) is a "reserved bandwidth" counter at C/T.
    counters = {
        p.track_descriptor.uuid
        for p in trace.packet
        if p.HasField("track_descriptor") and p.track_descriptor.name == "reserved bandwidth"
    }
    assert len(counters) == len(ts)
    values = sorted(
        p.track_event.double_counter_value
        for p in trace.packet
        if p.HasField("track_event") and p.track_event.track_uuid in counters
    )
    expected = sorted(wcet / period for _, wcet, _, period, _ in ts.rows())
    assert values == pytest.approx(expected, rel=1e-5)
    # The event table has the same reservations.
    res = [e for e in r.events.to_pylist() if e["kind"] == "reservation"]
    assert sorted(e["runtime_ns"] / e["period_ns"] for e in res) == pytest.approx(expected, rel=1e-5)
