"""Write a trial in Debugger's format, readable by smdebug 1.0.34's ``create_trial`` and by ours.

Each :meth:`TrialWriter.write_step` writes one event file and one index file for its step and worker, as
smdebug's ``FileWriter`` does; :meth:`TrialWriter.write_collections` writes the worker's collections file and
:meth:`TrialWriter.training_end` the empty ``training_job_end.ts`` marker. See docs/tensors.md (writer API).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from smx_debug.errors import ConfigError
from smx_debug.tensors import layout
from smx_debug.tensors.codec import encode_event
from smx_debug.tensors.collections_file import Collection, CollectionsFile
from smx_debug.tensors.dtypes import as_array
from smx_debug.tensors.file_sink import Sink, open_sink
from smx_debug.tensors.mode_keys import ModeKeys, parse_mode
from smx_debug.tensors.tfrecord import frame


def _non_negative(value: object, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{field} must be an integer >= 0, got {value!r}", field=field, value=value)
    return value


class TrialWriter:
    """Writes one worker's share of a trial under ``out_dir`` (a path or ``s3://bucket/prefix``).

    Args:
        out_dir: the trial's root (Debugger's ``LocalPath``, or the job's ``debug-output`` prefix).
        worker: this process's worker name, e.g. ``worker_0`` (smdebug names workers ``worker_<rank>``).
        s3_client: the boto3 S3 client for an ``s3://`` out_dir (default: a new one, standard retries).
        checksums: write real payload checksums instead of smdebug's constant footer. smdebug 1.0.34's reader
            rejects them; leave False unless only our reader will read the trial.

    Not thread-safe: one writer per thread. Global steps must increase from one ``write_step`` to the next.

    >>> import numpy as np, tempfile
    >>> with TrialWriter(tempfile.mkdtemp(), worker="worker_0") as w:
    ...     w.write_step(0, mode=ModeKeys.TRAIN, mode_step=0, tensors={"loss": np.float32(0.5)})
    """

    def __init__(self, out_dir: str | os.PathLike[str], *, worker: str = "worker_0", s3_client: Any = None,
                 checksums: bool = False) -> None:
        self.worker = layout.check_worker(worker)
        self.sink: Sink = open_sink(out_dir, s3_client=s3_client)
        self.checksums = checksums
        self._last_step: int | None = None
        self._closed = False

    @property
    def uri(self) -> str:
        """The trial's root, as given."""
        return self.sink.uri

    def write_step(
        self,
        step: int,
        *,
        mode: ModeKeys | int | str = ModeKeys.GLOBAL,
        mode_step: int | None = None,
        tensors: Mapping[str, Any],
        wall_time: float | None = None,
        shapes: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        """Write the tensors of global step ``step``: one event file and its index file.

        Args:
            step: the global step (increasing across calls).
            mode: TRAIN, EVAL, PREDICT or GLOBAL (a ModeKeys, its number or its name).
            mode_step: the step within ``mode`` (default: ``step``, as smdebug's writer does).
            tensors: name -> value, in the order to write them. A value is a numpy array of any supported dtype,
                a Python or numpy scalar or a string (saved as a 1-element array, as smdebug saves them), or a
                :class:`~smx_debug.tensors.RawTensor` (bfloat16). Reductions are tensors named by
                :func:`~smx_debug.tensors.reduction_tensor_name`.
            wall_time: seconds since the epoch (default: now).
            shapes: name -> shape to record in the index only (smdebug's ``save_shape``), for tensors whose
                values are not saved.

        Raises:
            ConfigError: naming the field and value for a bad step, mode, name or value; or when ``out_dir``
                cannot be written. AWS errors writing to S3 are translated (AccessDeniedError, NotFoundError).
        """
        if self._closed:
            raise ConfigError(f"TrialWriter for {self.uri!r} is closed", field="writer", value="closed")
        _non_negative(step, "step")
        if self._last_step is not None and step <= self._last_step:
            raise ConfigError(
                f"step must increase from one write_step to the next: {step} after {self._last_step}",
                field="step", value=step,
            )
        the_mode = parse_mode(mode)
        the_mode_step = step if mode_step is None else _non_negative(mode_step, "mode_step")
        stamp = time.time() if wall_time is None else float(wall_time)
        event_key = layout.event_key(step, self.worker)
        records: list[bytes] = []
        payload: list[dict[str, Any]] = []
        offset = 0
        for name, value in tensors.items():
            if not isinstance(name, str) or not name:
                raise ConfigError(f"tensor names must be non-empty strings, got {name!r}", field="tensors",
                                  value=name)
            record = frame(encode_event(name, as_array(value, name=name), step=step, mode=the_mode,
                                        mode_step=the_mode_step, wall_time=stamp), checksum=self.checksums)
            records.append(record)
            payload.append({"tensorname": name, "start_idx": offset, "length": len(record)})
            offset += len(record)
        shape_payload = [
            {"tensorname": name, "originalname": name, "shape": [_non_negative(int(d), f"shapes[{name!r}]")
                                                                 for d in shape]}
            for name, shape in (shapes or {}).items()
        ]
        if not records and not shape_payload:
            return
        meta: dict[str, Any] = {"mode": the_mode.name, "mode_step": the_mode_step}
        if records:
            meta["event_file_name"] = event_key
            self.sink.put(event_key, b"".join(records))
        index = {"meta": meta, "tensor_payload": payload, "shape_payload": shape_payload}
        # The index goes last: a reader that sees it finds its event file (smdebug closes them in this order).
        self.sink.put(layout.index_key(step, self.worker), json.dumps(index).encode())
        self._last_step = step

    def write_collections(self, collections: CollectionsFile | Iterable[Collection], *,
                          num_workers: int | None = None) -> None:
        """Write this worker's collections file (smdebug's CollectionManager JSON).

        ``num_workers`` (the job's worker count, which readers wait for) overrides the file's own.
        """
        doc = collections if isinstance(collections, CollectionsFile) else CollectionsFile(
            collections=tuple(collections))
        if num_workers is not None:
            doc = doc.model_copy(update={"num_workers": _positive(num_workers)})
        self.sink.put(layout.collections_key(self.worker), doc.to_json().encode())

    def training_end(self) -> None:
        """Write the empty ``training_job_end.ts`` marker: readers stop waiting for more steps."""
        self.sink.put(layout.END_OF_JOB, b"")

    def close(self) -> None:
        """Stop writing (files are written whole by each call: nothing is pending)."""
        self._closed = True

    def __enter__(self) -> TrialWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _positive(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"num_workers must be an integer >= 1, got {value!r}", field="num_workers", value=value)
    return value
