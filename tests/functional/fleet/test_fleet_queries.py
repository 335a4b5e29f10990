"""Each named query on DuckDB equals the answer computed independently in pandas from the raw profiler output
(and, where the generator knows it, the truth: idle windows, triggers, stops) of 20 jobs x 2 nodes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from fleet_data import build, device_minutes

from smx_debug import fleet
from smx_debug.htmlreport.cost import instance_spec
from smx_debug.simulate.fleet import FleetSimulation

SINCE = datetime(2026, 11, 1, tzinfo=UTC)
IDLE = 10.0


@pytest.fixture(scope="module")
def fleet_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[FleetSimulation, Path, pd.DataFrame]:
    sim, raw, root = build(tmp_path_factory.mktemp("fleet"))
    return sim, root, device_minutes(sim, raw)


def _run(root: Path, name: str, **kwargs: object) -> pd.DataFrame:
    return fleet.run_query(name, root=root, since=kwargs.pop("since", SINCE), **kwargs)  # type: ignore[arg-type]


def _same(actual: pd.DataFrame, expected: pd.DataFrame, keys: list[str]) -> None:
    a = actual[expected.columns].sort_values(keys).reset_index(drop=True)
    e = expected.sort_values(keys).reset_index(drop=True)
    for col in e.columns:
        if pd.api.types.is_datetime64_any_dtype(e[col]) or pd.api.types.is_datetime64_any_dtype(a[col]):
            a[col] = pd.to_datetime(a[col]).astype("datetime64[ns]")
            e[col] = pd.to_datetime(e[col]).astype("datetime64[ns]")
    pd.testing.assert_frame_equal(a, e, check_dtype=False, rtol=1e-9)


def _price_per_gpu(instance_type: str) -> float:
    spec = instance_spec(instance_type)
    return spec.price / spec.gpus


def test_idle_gpu_hours_duckdb_equals_pandas_and_the_known_idle_windows(fleet_data) -> None:  # type: ignore[no-untyped-def]
    sim, root, dm = fleet_data
    gpu = dm[(dm["dimension"] == "GPUUtilization") & (dm["value"] < IDLE)].copy()
    gpu["day"] = gpu["minute"].dt.date
    expected = gpu.groupby(["job", "team", "instance_type", "day"]).size().rename("minutes").reset_index()
    expected["idle_gpu_hours"] = expected["minutes"] / 60
    expected["idle_cost_usd"] = expected["idle_gpu_hours"] * expected["instance_type"].map(_price_per_gpu)
    expected = expected.drop(columns="minutes")
    actual = _run(root, "idle_gpu_hours")
    actual["day"] = pd.to_datetime(actual["day"]).dt.date
    _same(actual, expected, ["job", "day"])
    # the truth: every GPU of both nodes idles for exactly the job's idle window
    truth = {j.name: (j.idle[1] - j.idle[0]) * j.gpus * 2 / 60 for j in sim.jobs if j.idle}
    assert actual.groupby("job")["idle_gpu_hours"].sum().to_dict() == pytest.approx(truth)


def test_rules_fired_duckdb_equals_the_known_triggers(fleet_data) -> None:  # type: ignore[no-untyped-def]
    sim, root, _ = fleet_data
    expected = pd.DataFrame([
        {"rule": "LowGPU", "rule_type": "LowGPUUtilization", "job": j.name, "team": j.team, "triggers": 1,
         "first_trigger": j.trigger.replace(tzinfo=None), "last_trigger": j.trigger.replace(tzinfo=None)}
        for j in sim.jobs if j.trigger
    ])
    _same(_run(root, "rules_fired"), expected, ["rule", "job"])


def test_top_wasted_jobs_duckdb_equals_pandas(fleet_data) -> None:  # type: ignore[no-untyped-def]
    _sim, root, dm = fleet_data
    gpu = dm[dm["dimension"] == "GPUUtilization"]
    per_job = gpu.groupby(["job", "team", "instance_type"]).agg(
        gpu_hours=("value", lambda v: len(v) / 60), idle_gpu_hours=("value", lambda v: (v < IDLE).sum() / 60)
    ).reset_index()
    per_job["idle_share"] = per_job["idle_gpu_hours"] / per_job["gpu_hours"]
    per_job["idle_cost_usd"] = per_job["idle_gpu_hours"] * per_job["instance_type"].map(_price_per_gpu)
    per_job = per_job.sort_values(["idle_cost_usd", "idle_gpu_hours", "job"], ascending=[False, False, True])
    expected = per_job.head(5).reset_index(drop=True)
    expected["wasted_rank"] = range(1, 6)
    actual = _run(root, "top_wasted_jobs", n=5)
    assert list(actual["job"]) == list(expected["job"])
    _same(actual, expected, ["wasted_rank"])


def test_utilization_percentiles_duckdb_equals_pandas_exactly(fleet_data) -> None:  # type: ignore[no-untyped-def]
    _sim, root, dm = fleet_data
    rows = []
    for (itype, dim), g in dm.groupby(["instance_type", "dimension"]):
        v = g["value"]
        rows.append({"instance_type": itype, "dimension": dim, "jobs": g["job"].nunique(), "device_minutes": len(v),
                     "mean": v.mean(), "p50": v.quantile(0.5), "p90": v.quantile(0.9), "p95": v.quantile(0.95),
                     "p99": v.quantile(0.99)})
    _same(_run(root, "utilization_percentiles"), pd.DataFrame(rows), ["instance_type", "dimension"])


def test_time_to_stop_duckdb_equals_the_known_stops(fleet_data) -> None:  # type: ignore[no-untyped-def]
    sim, root, _ = fleet_data
    expected = pd.DataFrame([
        {"job": j.name, "team": j.team, "rule": "LowGPU", "first_trigger": j.trigger.replace(tzinfo=None),
         "stopped_at": j.stopped.replace(tzinfo=None),
         "seconds_to_stop": int((j.stopped - j.trigger).total_seconds())}
        for j in sim.jobs if j.trigger and j.stopped
    ])
    assert len(expected) >= 5
    _same(_run(root, "time_to_stop"), expected, ["job"])


def test_dataset_files_duckdb_equals_the_files_on_disk(fleet_data) -> None:  # type: ignore[no-untyped-def]
    _sim, root, _ = fleet_data
    files = sorted((root / "system_minutes").rglob("*.parquet"))
    expected = pd.DataFrame([{"file": str(f), "row_count": pq.read_metadata(f).num_rows} for f in files])
    actual = _run(root, "dataset_files")
    _same(actual[["file", "row_count"]], expected, ["file"])
    assert actual.attrs["rows_scanned"] == expected["row_count"].sum()


def test_run_query_since_prunes_hours_and_rows(fleet_data) -> None:  # type: ignore[no-untyped-def]
    _sim, root, _ = fleet_data
    late = datetime(2026, 11, 3, 0, 0, tzinfo=UTC)
    everything = _run(root, "idle_gpu_hours")
    recent = _run(root, "idle_gpu_hours", since=late)
    assert recent.attrs["rows_scanned"] < everything.attrs["rows_scanned"]
    assert (pd.to_datetime(recent["day"]) >= pd.Timestamp("2026-11-03")).all()
    assert len(recent) < len(everything)
