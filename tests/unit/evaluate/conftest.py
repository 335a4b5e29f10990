"""Builders of small frames whose rule results can be worked out by hand."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from smx_debug.data.frames import series_frame
from smx_debug.evaluate import JobData


def _steps(durations: list[float] | np.ndarray, *, node: str = "algo-1", mode: str = "TRAIN",
           start_s: float = 0.0, first_step: int = 0) -> pd.DataFrame:
    d = np.asarray(durations, dtype=float)
    starts = start_s + np.concatenate([[0.0], np.cumsum(d)[:-1]])
    return pd.DataFrame({
        "node": node, "rank": 0, "mode": mode, "step": np.arange(first_step, first_step + len(d), dtype=np.int64),
        "start": pd.to_datetime(np.round(starts * 1e9).astype(np.int64), utc=True),
        "end": pd.to_datetime(np.round((starts + d) * 1e9).astype(np.int64), utc=True),
        "duration": d,
    })


def _scalars(metric: str, mode: str, values: list[float], *, steps: list[int] | None = None,
             start_s: float = 0.0, interval_s: float = 1.0) -> pd.DataFrame:
    n = len(values)
    return pd.DataFrame({
        "metric": metric, "mode": mode,
        "step": np.asarray(steps if steps is not None else range(n), dtype=np.int64),
        "timestamp": pd.to_datetime(np.round((start_s + interval_s * np.arange(n)) * 1e9).astype(np.int64), utc=True),
        "value": np.asarray(values, dtype=float),
    })


class Frames:
    """Namespace of builders (fixtures cannot be imported across test folders)."""

    series: Callable[..., pd.DataFrame] = staticmethod(series_frame)
    steps: Callable[..., pd.DataFrame] = staticmethod(_steps)
    scalars: Callable[..., pd.DataFrame] = staticmethod(_scalars)

    @staticmethod
    def system(*parts: pd.DataFrame) -> pd.DataFrame:
        return pd.concat(parts, ignore_index=True)

    @staticmethod
    def data(*parts: pd.DataFrame, **frames: pd.DataFrame) -> JobData:
        return JobData(system=pd.concat(parts, ignore_index=True), **frames) if parts else JobData(**frames)


@pytest.fixture
def frames() -> type[Frames]:
    return Frames
