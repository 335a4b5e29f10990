"""The evaluator's part of the fleet dataset: each evaluated job's new system minutes, every run.

After a run evaluated and acted on its jobs, each one's minutes since the last append go to the stack's fleet
dataset (``system_minutes``, :mod:`smx_debug.fleet`), from what the run already read, at no extra read: the
job's Debugger profiler output when it writes some (per core and GPU, ``source`` ``debugger``), else its
CloudWatch host minutes from its cursor (divided per device, ``source`` ``cloudwatch``). The job's cursor
remembers the last minute appended (``fleet_through``); each append starts at that minute again (it may have been
partial, or CloudWatch published late) and merges by the table's key, so nothing is doubled, and an append that
failed is made up by the next run from the cursor's window.

Inside each job's isolation, and after its actions: a failure to append is recorded for that job (a note, one
count in ``EvaluatorJobErrors`` by its reason) and never stops or undoes an evaluation or an action. The
evaluator is the only writer of its watched jobs' minutes (the fleet collector leaves them to it), and a job is
evaluated by one evaluation at a time (its job lease), so no two writers ever rewrite one file. Once a job has ended,
its last minutes are appended through this sink by :mod:`smx_debug.watch.ended` (under the same lease), which marks
its cursor ``FLEET_COMPLETE``: nothing more is appended for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from smx_debug.fleet.append import Source
    from smx_debug.watch.run import RunReport  # run.py imports this module: the annotation only

from smx_debug.data.job_errors import BAD_DATA, job_error
from smx_debug.watch.cursor import Cursor
from smx_debug.watch.settings import EvaluatorSettings

__all__ = ["FLEET_COMPLETE", "FLEET_THROUGH", "append_minutes"]

FLEET_THROUGH = "fleet_through"  # cursor info: the last epoch minute appended to the fleet dataset
FLEET_COMPLETE = "fleet_complete"  # cursor info: the job ended and its minutes through its end are appended


def _frame(cursor: Cursor, profiler: Any, lo: int, last: int) -> tuple[Any, Source, dict[str, int] | None] | str:
    """The job's minutes ``lo..last`` as a system frame, its source and devices; or why there are none."""
    # the fleet dataset code (pydantic, its schema) loads only when a run has a fleet bucket (run.py imports this
    # module at every cold start)
    from smx_debug.data.minute_frames import device_counts, system_frame
    from smx_debug.fleet.append import cloudwatch_devices

    if profiler is not None:
        ns = profiler["timestamp"].astype("int64").to_numpy()
        keep = (ns >= lo * 60_000_000_000) & (ns < (last + 1) * 60_000_000_000)
        return profiler[keep].reset_index(drop=True), "debugger", None
    devices = device_counts(cursor.info.get("instance_type"))
    if devices is None:
        return (f"fleet dataset: instance type {cursor.info.get('instance_type')!r} has no vCPU/GPU counts in the "
                "table, so its host sums cannot be divided per device; its minutes are not appended")
    return system_frame(cursor.data, lo, last, devices), "cloudwatch", cloudwatch_devices(*devices)


def append_minutes(
    settings: EvaluatorSettings, s3: Any, report: RunReport, cursors: Sequence[Cursor],
    profiler: Mapping[str, Any], *, last: int | Mapping[str, int],
) -> dict[str, Cursor]:
    """Append each job's minutes through ``last`` (epoch minute; or each job's, by name); returns the cursors
    whose ``fleet_through`` moved. A job whose minutes are complete (``FLEET_COMPLETE``: it ended and
    :mod:`smx_debug.watch.ended` appended its last ones) gets nothing more. Failures are recorded in the jobs'
    outcomes of ``report``."""
    # the fleet dataset code (pydantic, its schema) loads only when a run has a fleet bucket (run.py imports this
    # module at every cold start)
    from smx_debug.fleet.append import append_system_minutes
    from smx_debug.fleet.s3_boto import stack_root

    cursors = [c for c in cursors if not c.info.get(FLEET_COMPLETE)]
    if not settings.fleet_bucket or not cursors:
        return {}
    root = stack_root(settings.fleet_bucket, s3)

    def one(cursor: Cursor) -> tuple[Cursor, Cursor | str | BaseException | None]:
        upto = last if isinstance(last, int) else last[cursor.job]
        through = cursor.info.get(FLEET_THROUGH)
        lo = int(through) if isinstance(through, int) else upto - settings.window_minutes + 1
        try:
            found = _frame(cursor, profiler.get(cursor.job), lo, upto)
            if isinstance(found, str):
                return cursor, found
            frame, source, devices = found
            if not len(frame):
                return cursor, None
            append_system_minutes(root, cursor.job, frame, source=source, devices=devices)
        except Exception as exc:  # isolation: this job's append only, after its evaluation and actions
            return cursor, exc
        return cursor, cursor.with_changes(info={**cursor.info, FLEET_THROUGH: upto})

    with ThreadPoolExecutor(max_workers=max(1, settings.workers)) as pool:
        done = list(pool.map(one, cursors))
    moved: dict[str, Cursor] = {}
    for cursor, result in done:
        outcome = report.outcomes[cursor.job]
        if isinstance(result, Cursor):
            moved[cursor.job] = result
        elif isinstance(result, str):
            outcome.notes.append(result)
        elif isinstance(result, BaseException):
            outcome.record(job_error(result, job=cursor.job, doing="appending its minutes to the fleet dataset",
                                     otherwise=BAD_DATA))
    return moved
