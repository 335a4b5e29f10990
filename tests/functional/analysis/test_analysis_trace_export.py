"""`smx-debug trace`: the merged Chrome trace-event file, loaded by a real, maintained reader of the format.

The reader is Chrome DevTools' own trace engine (npm ``@paulirish/trace_engine``, the Performance panel's
parser, pinned in package.json), run with Node. Perfetto's Python package (``perfetto``) was checked first:
its trace processor is a native binary it downloads at run time, which cannot work offline.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from smx_debug.analysis.trace_export import TraceMark, chrome_trace
from smx_debug.cli import main
from smx_debug.data.framework_trace import framework_metrics
from smx_debug.evaluate import load_path
from smx_debug.simulate import Simulation, SimulationSpec

ROOT = Path(__file__).resolve().parents[3]
LOADER = ROOT / "tests" / "js" / "load_chrome_trace.mjs"
NODE = shutil.which("node")
HAVE_ENGINE = (ROOT / "node_modules" / "@paulirish" / "trace_engine" / "package.json").exists()
SPEC = SimulationSpec(scenario="dataloader_stall", duration_s=300.0, onset_s=90.0, nodes=2, cpus=4, gpus=2,
                      initialization_s=30.0, finalization_s=20.0, interval_ms=1000, io_every=5)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    root = tmp_path_factory.mktemp("trace")
    Simulation(SPEC).write_local(root / "profiler-output")
    return root


def _load(path: Path) -> dict:
    assert NODE is not None
    done = subprocess.run([NODE, str(LOADER), str(path)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_chrome_trace_counts_and_shape(job):
    data, events = load_path(job), framework_metrics(job, progress=False)
    trace = chrome_trace(data, events, marks=[TraceMark("stop", data.system_span_ns[1], "stop")], job_name="j")
    phases = Counter(e["ph"] for e in trace["traceEvents"])
    x_events = int((events["phase"] == "X").sum())
    assert phases["X"] == x_events
    assert phases["i"] == 1
    # one counter event per node snapshot and track: GPU util, GPU memory, CPU, memory, I/O, network
    snaps = {node: len(s) for node, s in data.snapshots.items()}
    io_snaps = {node: len(ts) for node, (ts, _, _) in data.totals("ReadThroughputInBytesPerSecond").items()}
    expected_c = sum(4 * snaps[n] + 2 * io_snaps[n] for n in snaps)
    assert phases["C"] == expected_c
    gpu = next(e for e in trace["traceEvents"] if e["ph"] == "C" and e["name"] == "GPU utilization (%)")
    assert set(gpu["args"]) == {"gpu0", "gpu1"}
    assert trace["otherData"]["t0_utc"].startswith("2026-01-01T00:00:00")


@pytest.mark.skipif(NODE is None or not HAVE_ENGINE, reason="node or npm deps missing: run `make install`")
def test_trace_cli_file_loads_in_devtools_trace_engine(job, tmp_path):
    out = tmp_path / "trace.json"
    assert main(["trace", str(job), "-o", str(out), "--onset", "2026-01-01T00:01:30Z"]) == 0
    trace = json.loads(out.read_text())
    events = trace["traceEvents"]
    loaded = _load(out)
    assert loaded["events"] == len(events)  # every event parsed
    x_count = sum(1 for e in events if e["ph"] == "X")
    sim = Simulation(SPEC)  # per step: the step, dataloader, forward, backward; plus the checkpoints
    expected = sum(4 * len(sim.steps(n)[0]) + int((sim.checkpoint_steps(n) < len(sim.steps(n)[0])).sum())
                   for n in range(SPEC.nodes))
    assert loaded["slices"] == x_count == expected
    assert loaded["processNames"] == {"1": "algo-1", "2": "algo-2"}
    names = {t["name"] for t in loaded["threads"]}
    assert {"Step:ModeKeys.TRAIN (pid 181)", "DataLoader (pid 181)", "Forward/Backward (pid 181)"} <= names
    triggers = [e for e in events if e["ph"] == "i" and e["cat"] == "trigger"]
    assert triggers and all(e["name"].startswith("first trigger: ") for e in triggers)
    onset = next(e for e in events if e["ph"] == "i" and e["name"] == "onset")
    t0 = datetime.fromisoformat(trace["otherData"]["t0_utc"])
    assert onset["s"] == "g" and t0 + timedelta(microseconds=onset["ts"]) == datetime(2026, 1, 1, 0, 1, 30, tzinfo=UTC)


def test_trace_cli_bad_onset_is_one_error_line(job, tmp_path, capsys):
    assert main(["trace", str(job), "-o", str(tmp_path / "t.json"), "--onset", "yesterday"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --onset must be an ISO-8601 time") and "Traceback" not in err
