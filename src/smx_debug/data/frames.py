"""The inputs of rule evaluation: the DataFrames of docs/CONTRACTS.md, bundled and pre-split once."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from smx_debug.errors import DataError

SYSTEM_COLUMNS = ("timestamp", "node", "type", "name", "dimension", "value")
STEP_COLUMNS = ("node", "rank", "mode", "step", "start", "end", "duration")
SCALAR_COLUMNS = ("metric", "mode", "step", "timestamp", "value")
DATALOADER_COLUMNS = ("node", "pid", "start", "end")

_UTC = "datetime64[ns, UTC]"
# Events of one system snapshot are written by several agent threads a few ms apart (smdebug: 20 ms).
SNAPSHOT_WINDOW_NS = 20_000_000


def empty_system() -> pd.DataFrame:
    """An empty system-metrics frame with the reader's dtypes (categorical strings)."""
    return pd.DataFrame(
        {
            "timestamp": pd.Series([], dtype=_UTC),
            **{c: pd.Series(pd.Categorical([])) for c in ("node", "type", "name", "dimension")},
            "value": pd.Series([], dtype="float64"),
        }
    )


def empty_steps() -> pd.DataFrame:
    """An empty step-durations frame."""
    return pd.DataFrame(
        {
            "node": pd.Series([], dtype="str"),
            "rank": pd.Series([], dtype="int64"),
            "mode": pd.Series([], dtype="str"),
            "step": pd.Series([], dtype="int64"),
            "start": pd.Series([], dtype=_UTC),
            "end": pd.Series([], dtype=_UTC),
            "duration": pd.Series([], dtype="float64"),
        }
    )


def empty_scalars() -> pd.DataFrame:
    """An empty scalars frame (``metric``, ``mode``, ``step``, ``timestamp``, ``value``)."""
    return pd.DataFrame(
        {
            "metric": pd.Series([], dtype=object),
            "mode": pd.Series([], dtype=object),
            "step": pd.Series([], dtype="int64"),
            "timestamp": pd.Series([], dtype=_UTC),
            "value": pd.Series([], dtype="float64"),
        }
    )


def empty_dataloader() -> pd.DataFrame:
    """An empty dataloader-events frame (``node``, ``pid``, ``start``, ``end``)."""
    return pd.DataFrame(
        {
            "node": pd.Series([], dtype=object),
            "pid": pd.Series([], dtype="int64"),
            "start": pd.Series([], dtype=_UTC),
            "end": pd.Series([], dtype=_UTC),
        }
    )


def _check(frame: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DataError(f"{what} frame lacks columns {missing!r} (has {list(frame.columns)!r})")


def _ns(values: Any) -> np.ndarray:
    """Epoch nanoseconds (int64) of a datetime column, naive values taken as UTC."""
    ts = pd.to_datetime(values, utc=True)
    return np.asarray(ts.astype("int64") if isinstance(ts, pd.Series) else ts.asi8, dtype=np.int64)


@dataclass(frozen=True)
class Series:
    """One metric series of one device: sorted epoch-ns timestamps and values."""

    node: str
    name: str
    ts: np.ndarray
    values: np.ndarray


@dataclass(frozen=True)
class JobData:
    """Everything the rules read. Any frame may be empty; rules then report zero datapoints.

    Attributes:
        system: system metrics, long (CONTRACTS.md).
        steps: step durations (CONTRACTS.md).
        scalars: loss/metric series (``metric``, ``mode`` TRAIN/EVAL/GLOBAL, ``step``, ``timestamp``, ``value``).
        dataloader: PyTorch dataloader events (``node``, ``pid``, ``start``, ``end``).
        dataloader_info: ``pin_memory`` / ``num_workers`` seen at dataloader initialisation.
        as_of_ns: "now" (epoch ns) for a live evaluation; StalledTrainingRule measures silence up to it.
    """

    system: pd.DataFrame = field(default_factory=empty_system)
    steps: pd.DataFrame = field(default_factory=empty_steps)
    scalars: pd.DataFrame = field(default_factory=empty_scalars)
    dataloader: pd.DataFrame = field(default_factory=empty_dataloader)
    dataloader_info: dict[str, Any] = field(default_factory=dict)
    as_of_ns: int | None = None
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check(self.system, SYSTEM_COLUMNS, "system metrics")
        _check(self.steps, STEP_COLUMNS, "step durations")
        _check(self.scalars, SCALAR_COLUMNS, "scalars")
        _check(self.dataloader, DATALOADER_COLUMNS, "dataloader")

    # --- system metrics as flat arrays, split once per dimension (no DataFrame copies) ------------
    @cached_property
    def _columns(self) -> dict[str, Any]:
        sysf = self.system
        dim_codes, dims = pd.factorize(sysf["dimension"])
        node_codes, nodes = pd.factorize(sysf["node"])
        name_codes, name_index = pd.factorize(sysf["name"])
        names = [str(n) for n in name_index]
        if len(name_codes) and name_codes.min() < 0:
            # A record without Name (null, as smdebug reads it) is node-level, like "total": one unnamed series.
            name_codes = np.where(name_codes < 0, len(names), name_codes)
            names.append("")
        order = np.argsort(dim_codes, kind="stable")
        cuts = np.flatnonzero(np.diff(dim_codes[order])) + 1
        by_dim = {str(dims[dim_codes[c[0]]]): c for c in np.split(order, cuts) if len(c) and dim_codes[c[0]] >= 0}
        return {
            "ts": _ns(sysf["timestamp"]), "values": sysf["value"].to_numpy(dtype=np.float64),
            "node_codes": node_codes, "nodes": [str(n) for n in nodes],
            "name_codes": name_codes, "names": names, "by_dim": by_dim,
        }

    def dimension(self, dimension: str) -> pd.DataFrame:
        """Rows of one ``dimension`` (empty frame if none)."""
        idx = self._columns["by_dim"].get(dimension) if not self.system.empty else None
        return self.system.iloc[idx] if idx is not None else self.system.iloc[0:0]

    def series(self, dimension: str, *, skip_total: bool = True) -> list[Series]:
        """Per-(node, name) sorted series of one dimension; node-level rows (``total`` and records without a
        name, whose series is named ``""``) skipped unless asked."""
        key = ("series", dimension, skip_total)
        if key in self._cache:
            return list(self._cache[key])
        out: list[Series] = []
        cols = self._columns if not self.system.empty else None
        idx = cols["by_dim"].get(dimension) if cols is not None else None
        if cols is not None and idx is not None:
            names: list[str] = cols["names"]
            name_codes = cols["name_codes"][idx]
            if skip_total:  # node-level rows: "total" and unnamed records
                keep = np.ones(len(idx), dtype=bool)
                for node_level in ("total", ""):
                    if node_level in names:
                        keep &= name_codes != names.index(node_level)
                idx, name_codes = idx[keep], name_codes[keep]
            width = max(len(names), 1)
            codes = cols["node_codes"][idx].astype(np.int64) * width + name_codes
            order = np.argsort(codes, kind="stable")
            cuts = np.flatnonzero(np.diff(codes[order])) + 1
            for chunk in np.split(order, cuts):
                if not len(chunk):
                    continue
                rows = idx[chunk]
                t, v = cols["ts"][rows], cols["values"][rows]
                if len(t) > 1 and np.any(np.diff(t) < 0):
                    o = np.argsort(t, kind="stable")
                    t, v = t[o], v[o]
                ok = ~np.isnan(v)  # malformed values are skipped, never fatal
                c = int(codes[chunk[0]])
                out.append(Series(cols["nodes"][c // width], names[c % width], t[ok], v[ok]))
            out.sort(key=lambda s: (_natural(s.node), _natural(s.name)))
        self._cache[key] = out
        return list(out)

    def totals(self, dimension: str) -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
        """Per node: snapshot timestamps, the sum over devices in each snapshot, and the number of devices."""
        key = ("totals", dimension)
        if key not in self._cache:
            by_node: dict[str, list[Series]] = {}
            for s in self.series(dimension):
                by_node.setdefault(s.node, []).append(s)
            out: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}
            for node, group in by_node.items():
                snap = self.snapshots[node]
                ts = np.concatenate([s.ts for s in group])
                vals = np.concatenate([s.values for s in group])
                idx = np.searchsorted(snap, ts, side="right") - 1
                sums = np.bincount(idx, weights=vals, minlength=len(snap))
                seen = np.bincount(idx, minlength=len(snap)) > 0
                out[node] = (snap[seen], sums[seen], len(group))
            self._cache[key] = out
        result: dict[str, tuple[np.ndarray, np.ndarray, int]] = self._cache[key]
        return result

    @cached_property
    def system_span_ns(self) -> tuple[int, int] | None:
        """First and last system timestamp (epoch ns), or None without system metrics."""
        if self.system.empty:
            return None
        ts = self._columns["ts"]
        return int(ts.min()), int(ts.max())

    @cached_property
    def snapshots(self) -> dict[str, np.ndarray]:
        """Per node, the start timestamp (ns) of every system snapshot (events <= 20 ms apart share one)."""
        if self.system.empty:
            return {}
        cols = self._columns
        codes = cols["node_codes"]
        order = np.argsort(codes, kind="stable")
        cuts = np.flatnonzero(np.diff(codes[order])) + 1
        out: dict[str, np.ndarray] = {}
        for chunk in np.split(order, cuts):
            if not len(chunk) or codes[chunk[0]] < 0:
                continue
            srt = np.sort(cols["ts"][chunk])  # sort + diff: much faster than np.unique's hashing here
            new = np.ones(len(srt), dtype=bool)
            new[1:] = np.diff(srt) > SNAPSHOT_WINDOW_NS
            out[cols["nodes"][codes[chunk[0]]]] = srt[new]
        return out

    @cached_property
    def nodes(self) -> list[str]:
        """Nodes seen in system metrics or steps, sorted."""
        names = {str(n) for n in pd.unique(self.system["node"])} | {str(n) for n in pd.unique(self.steps["node"])}
        return sorted(names, key=_natural)


def _natural(name: str) -> tuple[str, int]:
    """Sort key putting ``gpu10`` after ``gpu9``."""
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return head, int(tail) if tail else -1


def ns(values: Any) -> np.ndarray:
    """Public alias of the epoch-ns conversion used by the rules."""
    return _ns(values)


def series_frame(
    node: str, name: str, dimension: str, values: Any, *, start_s: float = 0.0, interval_s: float = 1.0,
    timestamps_s: Any = None, type: str | None = None,
) -> pd.DataFrame:
    """A system-metrics frame for one device series (tests, simulations, CloudWatch mapping).

    Timestamps are ``start_s + i * interval_s`` epoch seconds unless ``timestamps_s`` is given.
    """
    vals = np.asarray(values, dtype=np.float64)
    ts = (np.asarray(timestamps_s, dtype=np.float64) if timestamps_s is not None
          else start_s + interval_s * np.arange(len(vals)))
    kind = type or ("gpu" if dimension.startswith("GPU") else "cpu")
    return pd.DataFrame({
        "timestamp": pd.to_datetime(np.round(ts * 1e9).astype(np.int64), utc=True),
        "node": node, "type": kind, "name": name, "dimension": dimension, "value": vals,
    })
