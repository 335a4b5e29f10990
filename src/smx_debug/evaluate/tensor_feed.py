"""The reader side of the tensor rules: a trial's newly saved steps as :class:`TensorBatch` objects.

:class:`TrialFeed` keeps a cursor (the next global step to read) and reads, through the reader's public bulk API
(:meth:`smx_debug.tensors.Trial.arrays`), only the steps every worker has finished since the last call, each
record once. Damaged records are skipped and counted in the trial's ``skipped``, never fatal. Issue 21 moves this
module to the data layer.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from smx_debug._lazy import lazy_module
from smx_debug.data.sources import split_s3_uri
from smx_debug.evaluate.tensor_data import TensorBatch

if TYPE_CHECKING:
    import boto3
else:
    boto3 = lazy_module("boto3")  # an S3 client only when none is handed in

_TRIAL_MARKERS = ("index", "events", "collections", "training_job_end.ts")


def is_trial(path: str, *, s3_client: Any = None) -> bool:
    """Whether ``path`` (a local folder or an ``s3://`` prefix) holds Debugger's tensor layout."""
    if path.startswith("s3://"):
        bucket, key = split_s3_uri(path)
        prefix = key.rstrip("/") + "/" if key else ""
        if s3_client is None:
            s3_client = boto3.client("s3")
        listed = s3_client.list_objects_v2(Bucket=bucket, Prefix=prefix, Delimiter="/", MaxKeys=1000)
        tops = {p["Prefix"][len(prefix):].rstrip("/") for p in listed.get("CommonPrefixes", [])}
        tops |= {o["Key"][len(prefix):] for o in listed.get("Contents", [])}
        return bool(tops & set(_TRIAL_MARKERS))
    local = os.path.expanduser(path)
    return os.path.isdir(local) and any(os.path.exists(os.path.join(local, m)) for m in _TRIAL_MARKERS)


class TrialFeed:
    """The steps a trial saved since the previous :meth:`read`, once every worker wrote them.

    While the trial has no collections file yet and has not ended, nothing is read (a rule that reads a
    collection would otherwise miss the first steps, written before the hook's collections file).
    """

    def __init__(self, trial: Any, *, cursor: int | None = None) -> None:
        self.trial = trial
        self.cursor = getattr(trial, "start_step", 0) if cursor is None else cursor  # next global step to read

    def names(self) -> list[str]:
        """Every tensor name the trial holds so far."""
        names: list[str] = self.trial.tensor_names()
        return names

    def collections(self) -> dict[str, Callable[[str], bool]]:
        """The trial's collections, as predicates on tensor names."""
        return {name: coll.matches for name, coll in self.trial.collections().items()}

    def read(self, select: Callable[[list[str], Mapping[str, Callable[[str], bool]]], set[str]], *,
             now: float | None = None, until: int | None = None) -> TensorBatch:
        """Refresh the trial, ask ``select(names, collections)`` which tensors to read, and read them at the
        steps completed since the last call (and before global step ``until``, when given: a replay)."""
        self.trial.refresh()
        ended = bool(self.trial.loaded_all_steps)
        names, collections = self.names(), self.collections()
        empty = TensorBatch(names=names, collections=collections, ended=ended, now=now)
        if not collections and not ended:  # a live hook writes its collections file with the first step
            saved = len(self.trial.steps())
            if not saved:
                return empty
            return TensorBatch(names=names, collections=collections, ended=ended, now=now, waiting=(
                f"the trial has {saved} saved steps but no collections file and no training_job_end.ts yet; its "
                "steps are read once either exists (a hook writes the collections file with its first step)"))
        complete = [s for s in self.trial.steps() if s >= self.cursor and (until is None or s < until)]
        if not complete:
            return empty
        end = max(complete) + 1
        got = self.trial.arrays(select(names, collections), start_step=self.cursor, end_step=end)
        self.cursor = end
        return TensorBatch(arrays=got.values, reductions=got.reductions, wall_times=got.wall_times,
                           names=names, collections=collections, ended=ended, now=now)
