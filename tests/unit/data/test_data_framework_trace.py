"""Framework traces and step durations: real smdebug traces, generated timelines, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from smx_debug.data.framework_trace import (
    EVENT_COLUMNS,
    STEP_COLUMNS,
    framework_metrics,
    parse_trace,
    step_durations,
    trace_file,
)
from smx_debug.data.sources import ObjectInfo
from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.simulate import Simulation, SimulationSpec

RES = Path("third_party/awslabs+sagemaker-debugger/tests/profiler/resources")
PYTL = "merge_traces/framework/pevents/2020071317/1594662624718694_905-b88ab1bb8259_pythontimeline.json"


def test_framework_metrics_python_timeline_absolute_times_match_trace(data_dir: Path) -> None:
    df = framework_metrics(data_dir / RES / "merge_traces", kinds=["pythontimeline"])
    raw = json.loads((data_dir / RES / PYTL).read_text())
    base = raw[0]["args"]["start_time_since_epoch_in_micros"]
    events = [e for e in raw if e["ph"] != "M"]
    assert list(df.columns) == EVENT_COLUMNS
    assert len(df) == len(events)
    assert df["start"].astype("int64").tolist() == [(base + e["ts"]) * 1000 for e in events]
    assert df["end"].astype("int64").tolist() == [(base + e["ts"] + e["dur"]) * 1000 for e in events]
    assert df["step"].tolist() == [int(e["args"]["step_num"]) for e in events]
    assert set(df["node"]) == {"b88ab1bb8259"}
    assert set(df["pid"]) == {905}
    names = {e["pid"]: e["args"]["name"] for e in raw if e["ph"] == "M" and "name" in e["args"]}
    assert df["process"].tolist() == [names[e["pid"]] for e in events]


def test_step_durations_real_python_timeline_follows_contract(data_dir: Path) -> None:
    steps = step_durations(framework_metrics(data_dir / RES / "merge_traces"))
    raw = [e for e in json.loads((data_dir / RES / PYTL).read_text()) if e.get("name", "").startswith("Step:")]
    assert list(steps.columns) == STEP_COLUMNS
    assert steps["step"].tolist() == [int(e["args"]["step_num"]) for e in raw]
    assert steps["duration"].tolist() == [e["dur"] / 1e6 for e in raw]
    assert steps["mode"].tolist() == [e["name"].rsplit(".", 1)[-1] for e in raw]
    assert set(steps["rank"]) == {0}
    assert steps.dtypes.astype(str).to_dict() == {
        "node": "str", "rank": "int64", "mode": "str", "step": "int64",
        "start": "datetime64[ns, UTC]", "end": "datetime64[ns, UTC]", "duration": "float64",
    }


@pytest.mark.parametrize(
    ("folder", "kind", "files"),
    [
        ("horovod_timeline_traces", "horovod_timeline", 2),
        ("model_timeline_traces", "model_timeline", 3),
        ("test_traces", "pythontimeline", 4),
    ],
)
def test_framework_metrics_real_traces_every_event_read(data_dir: Path, folder: str, kind: str, files: int) -> None:
    df = framework_metrics(data_dir / RES / folder)
    paths = sorted((data_dir / RES / folder).rglob("*.json"))
    paths = [p for p in paths if "framework" in p.parts]
    expected = sum(sum(1 for e in json.loads(p.read_text()) if e.get("ph") != "M") for p in paths)
    assert (len(df), df.attrs["files"], df.attrs["skipped"]) == (expected, files, 0)
    assert set(df["kind"]) == {kind}


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("framework/pevents/2020071317/1594662624718694_905-b88ab1bb8259_pythontimeline.json",
         (1594662624718694, 905, "b88ab1bb8259", "pythontimeline")),
        ("pevents/2020052602/1590461127873222_0001_model_timeline.json",
         (1590461127873222, 1, "0001", "model_timeline")),
        ("1589314018481947000_1234-testhost_model_timeline.json",
         (1589314018481947, 1234, "testhost", "model_timeline")),
        ("a/1593673051472361_88359-8c859046be41.ant.amazon.com_horovod_timeline.json",
         (1593673051472361, 88359, "8c859046be41.ant.amazon.com", "horovod_timeline")),
        ("framework/pevents/2020071317/notes.json", None),
    ],
)
def test_trace_file_name_parsed(key: str, expected: tuple[int, int, str, str] | None) -> None:
    tf = trace_file(ObjectInfo(key, 1, ""))
    assert (None if tf is None else (tf.end_us, tf.pid, tf.node, tf.kind)) == expected


def test_parse_trace_truncated_file_keeps_complete_events(data_dir: Path) -> None:
    data = (data_dir / RES / PYTL).read_bytes()
    whole, skipped_whole = parse_trace(data)
    cut = data[: int(len(data) * 0.6)]
    part, skipped = parse_trace(cut)
    assert skipped_whole == 0
    assert skipped == 1
    assert 0 < len(part) < len(whole)
    pd.testing.assert_frame_equal(part, whole.iloc[: len(part)].reset_index(drop=True))


@pytest.mark.parametrize(
    ("content", "rows", "skipped"),
    [
        (b"", 0, 1),
        (b"{}", 0, 1),
        (b'[{"ph": "X", "name": "a", "ts": "soon"}, 7, {"ph": "X", "name": "b", "ts": 5, "dur": 1}]', 1, 2),
        (b'{"traceEvents": [{"ph": "i", "name": "a", "ts": 1}]}', 1, 0),
        # issue 20 defect 3's poison in a trace: counted, never a RecursionError or UnicodeEncodeError
        (b"[" * 5000 + b"]" * 5000, 0, 1),
        (b'[{"ph": "X", "name": "a", "ts": 1, "dur": 1}, ' + b"[" * 5000 + b"]" * 5000 + b"]", 1, 1),
        (b'[{"ph": "X", "name": "\\ud800", "ts": 1, "dur": 1}, {"ph": "X", "name": "b", "ts": 2, "dur": 1}]', 1, 1),
        (b'[{"ph": "X\\udc00", "name": "a", "ts": 1, "dur": 1}]', 0, 1),
    ],
    ids=["empty", "object", "bad-events", "trace-viewer-object", "deep-array", "deep-event", "lone-surrogate-name",
         "lone-surrogate-phase"],
)
def test_parse_trace_bad_input_counted_not_raised(content: bytes, rows: int, skipped: int) -> None:
    df, n = parse_trace(content)
    assert (len(df), n) == (rows, skipped)
    assert list(df.columns) == EVENT_COLUMNS


def test_framework_metrics_generated_steps_match_simulation(tmp_path: Path) -> None:
    spec = SimulationSpec(nodes=2, cpus=2, gpus=1, duration_s=240.0, initialization_s=20.0, finalization_s=10.0,
                          step_s=0.5)
    sim = Simulation(spec)
    sim.write_local(tmp_path)
    steps = step_durations(framework_metrics(tmp_path))
    for node in range(2):
        start, dur = sim.steps(node)
        mine = steps[steps["node"] == f"algo-{node + 1}"]
        assert mine["step"].tolist() == list(range(len(start)))
        assert mine["rank"].unique().tolist() == [node]
        assert mine["duration"].round(6).tolist() == (dur * 1e6).round().astype(int).__truediv__(1e6).round(6).tolist()


def test_framework_metrics_window_drops_files_and_events(tmp_path: Path) -> None:
    spec = SimulationSpec(nodes=1, cpus=2, gpus=1, duration_s=300.0, initialization_s=20.0, finalization_s=10.0)
    Simulation(spec).write_local(tmp_path)
    t0 = pd.Timestamp(spec.job_start)
    all_events = framework_metrics(tmp_path)
    part = framework_metrics(tmp_path, start=t0 + pd.Timedelta(seconds=100), end=t0 + pd.Timedelta(seconds=160))
    assert part.attrs["files"] < all_events.attrs["files"]
    keep = (all_events["end"] >= t0 + pd.Timedelta(seconds=100)) & (all_events["start"] < t0 + pd.Timedelta(seconds=160))
    assert len(part) == int(keep.sum())


def test_framework_metrics_no_traces_raises_not_found(data_dir: Path, tmp_path: Path) -> None:
    shutil.copytree(data_dir / RES / "test_traces" / "system", tmp_path / "system")
    with pytest.raises(NotFoundError, match="no framework traces"):
        framework_metrics(tmp_path)


def test_framework_metrics_unknown_kind_raises_config_error(data_dir: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        framework_metrics(data_dir / RES / "merge_traces", kinds=["tensorboard"])
    assert (exc.value.field, exc.value.value) == ("kinds", ["tensorboard"])


def test_step_durations_missing_columns_raises_config_error() -> None:
    with pytest.raises(ConfigError, match="lacks columns"):
        step_durations(pd.DataFrame({"node": []}))


def test_parse_trace_raw_horovod_timeline_absolute_microseconds(data_dir: Path) -> None:
    raw = json.loads((data_dir / RES / "horovod_timeline_small.json").read_text())
    df, skipped = parse_trace((data_dir / RES / "horovod_timeline_small.json").read_bytes(), kind="horovod_timeline")
    events = [e for e in raw if e.get("ph") != "M"]
    assert (len(df), skipped) == (len(events), 0)
    assert df["start"].astype("int64").tolist() == [int(e["ts"]) * 1000 for e in events]
    assert df["phase"].tolist() == [e["ph"] for e in events]


_START = {"name": "process_name", "ph": "M", "pid": 1, "args": {"start_time_since_epoch_in_micros": 1594662614815222}}
_STEP = {"name": "Step:ModeKeys.TRAIN", "ph": "X", "ts": 10, "dur": 5, "pid": 1, "args": {"step_num": 1}}


@pytest.mark.parametrize(
    ("events", "rows", "skipped"),
    [
        ([_START, _STEP, {**_STEP, "ts": 1e20}], 1, 1),
        ([{**_START, "args": {"start_time_since_epoch_in_micros": 1e20}}, _STEP], 0, 1),
        ([_START, _STEP, {**_STEP, "dur": 1e20}], 1, 1),
        ([{**_STEP, "ts": 1594662614815222000}], 0, 1),  # absolute time in ns where microseconds belong
    ],
    ids=["ts-1e20", "start-1e20", "dur-1e20", "ts-in-ns"],
)
def test_parse_trace_implausible_times_skipped_and_counted_not_overflowed(events: list, rows: int,
                                                                           skipped: int) -> None:
    df, n = parse_trace(json.dumps(events).encode())
    assert (len(df), n) == (rows, skipped)
    assert (df["start"].dt.year == 2020).all()
