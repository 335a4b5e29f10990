"""Statistics: percentiles per node and dimension, training phases, step statistics and outliers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from smx_debug.analysis.stats import (
    DEFAULT_STDDEV,
    step_outliers,
    step_statistics,
    training_phases,
    utilization_stats,
)
from smx_debug.errors import ConfigError


def _system(seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 400
    return pd.DataFrame(
        {
            "timestamp": pd.date_range("2026-01-01", periods=n, freq="500ms", tz="UTC"),
            "node": pd.Categorical(rng.choice(["algo-1", "algo-2"], n)),
            "type": pd.Categorical(["gpu"] * n),
            "name": pd.Categorical(rng.choice(["gpu0", "gpu1"], n)),
            "dimension": pd.Categorical(rng.choice(["GPUUtilization", "GPUMemoryUtilization"], n)),
            "value": rng.uniform(0, 100, n),
        }
    )


def test_utilization_stats_equal_numpy_per_group() -> None:
    df = _system()
    stats = utilization_stats(df, decimals=6)
    assert list(stats.columns) == ["node", "dimension", "unit", "count", "mean", "min", "max", "p50", "p90", "p95",
                                   "p99"]
    for row in stats.itertuples(index=False):
        v = df[(df["node"] == row.node) & (df["dimension"] == row.dimension)]["value"].to_numpy()
        assert row.count == len(v) and row.unit == "%"
        assert np.allclose([row.mean, row.min, row.max, row.p50, row.p90, row.p95, row.p99],
                           [v.mean(), v.min(), v.max(), *np.percentile(v, [50, 90, 95, 99])], atol=1e-6)
    assert len(stats) == 4


def test_utilization_stats_one_unit_per_row_and_plain_numbers() -> None:
    ts = pd.date_range("2026-01-01", periods=4, freq="500ms", tz="UTC")
    rows = [("cpu", "CPUUtilization", [10.0, 20.0, 30.0, 40.0]),
            ("network", "ReceiveBytesPerSecond", [6.2e7, 5.0e7, 1.25e6, 0.0]),
            ("io", "ReadThroughputInBytesPerSecond", [2.4e7, 2.4e7, 2.4e7, 2.4e7]),
            ("io", "IOPS", [430.1, 12.0, 0.5, 3.0])]
    system = pd.concat([pd.DataFrame({"timestamp": ts, "node": "algo-1", "type": t, "name": "x", "dimension": d,
                                      "value": v}) for t, d, v in rows], ignore_index=True)
    stats = utilization_stats(system).set_index("dimension")
    assert stats["unit"].to_dict() == {"CPUUtilization": "%", "IOPS": "ops/s", "ReadThroughputInBytesPerSecond": "MB/s",
                                       "ReceiveBytesPerSecond": "MB/s"}
    assert stats.loc["ReceiveBytesPerSecond", "max"] == 62.0
    assert stats.loc["ReadThroughputInBytesPerSecond", "mean"] == 24.0
    assert stats.loc["CPUUtilization", "mean"] == 25.0
    text = stats.to_string()
    assert "e+" not in text and "e-" not in text


def _steps(durations: list[float], node: str = "algo-1") -> pd.DataFrame:
    start = pd.Timestamp("2026-01-01T00:01:00Z") + pd.to_timedelta(np.cumsum([0.0, *durations[:-1]]), unit="s")
    return pd.DataFrame({"node": node, "rank": 0, "mode": "TRAIN", "step": np.arange(len(durations)),
                         "start": start, "end": start + pd.to_timedelta(durations, unit="s"),
                         "duration": durations})


def test_step_statistics_and_outliers_use_mean_plus_stddev_times_std() -> None:
    durations = [0.25] * 60 + [2.0] + [0.25] * 39
    steps = pd.concat([_steps(durations), _steps([0.5] * 10, node="algo-2")], ignore_index=True)
    stats = step_statistics(steps)
    d = np.array(durations)
    thr = d.mean() + DEFAULT_STDDEV * d.std()  # population std, as StepOutlier
    one = stats[stats["node"] == "algo-1"].iloc[0]
    assert (one["count"], one["outliers"], one["unit"]) == (100, 1, "s")
    assert np.isclose(one["threshold"], thr)
    assert np.isclose(one["p95"], np.percentile(d, 95))
    assert stats[stats["node"] == "algo-2"]["outliers"].tolist() == [0]
    out = step_outliers(steps)
    assert out[["node", "step", "duration"]].to_dict("records") == [{"node": "algo-1", "step": 60, "duration": 2.0}]
    assert np.isclose(out["threshold"][0], thr)
    assert len(step_outliers(steps, stddev=100)) == 0


def test_training_phases_split_job_time() -> None:
    steps = _steps([1.0] * 10)
    job_start = pd.Timestamp("2026-01-01T00:00:00Z")
    job_end = pd.Timestamp("2026-01-01T00:01:30Z")
    ph = training_phases(steps, job_start, job_end)
    assert ph[["phase", "seconds"]].to_dict("records") == [
        {"phase": "initialization", "seconds": 60.0},
        {"phase": "training_loop", "seconds": 10.0},
        {"phase": "finalization", "seconds": 20.0},
    ]
    assert np.isclose(ph["percent"].sum(), 100.0)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: step_statistics(_steps([1.0]), stddev=0), "stddev"),
        (lambda: step_outliers(_steps([1.0]), stddev=True), "stddev"),
        (lambda: training_phases(_steps([1.0]).iloc[:0]), "steps"),
        (lambda: utilization_stats(pd.DataFrame({"value": [1.0]})), "system"),
    ],
)
def test_stats_bad_input_raises_config_error(call: object, field: str) -> None:
    with pytest.raises(ConfigError) as exc:
        call()  # type: ignore[operator]
    assert exc.value.field == field
