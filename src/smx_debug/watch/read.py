"""The evaluator's read step: each watched job's new minutes, from CloudWatch and, when it writes some, from its
Debugger profiler output.

:func:`read_new_minutes` reads every job's minutes since its cursor (less ``overlap_minutes``, for datapoints
CloudWatch publishes late) through the last settled minute, all jobs batched in GetMetricData calls
(:mod:`smx_debug.data.cloudwatch_batch`); :func:`merge_minutes` folds them into the job's window, which keeps
:func:`keep_minutes` of them.

Profiler output. Read through the one reader (:class:`smx_debug.data.system.SystemMetricsReader`).

A job whose ``ProfilerConfig`` is enabled writes system metrics every 100 ms .. 60 s per core and per GPU under
``<S3OutputPath>/<job>/profiler-output/system/``. For such a job the evaluator reads the files of its rule window
only (their names carry their time span, so the reader skips the rest: the cost is the window's, not the job's)
and the per-device rules (CPUBottleneck, LowGPUUtilization, GPUMemoryIncrease) judge that per-core, per-GPU
frame instead of CloudWatch's host averages. Nothing is kept between runs: the window is read again each minute.

Output that cannot be used is that job's :class:`~smx_debug.data.job_errors.JobError` (AWS refused or failed
the read: by its code; output the reader could not survive: ``bad-data``), and the job is judged on CloudWatch's
host averages instead. Damaged lines are not errors: the reader skips and counts them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from smx_debug.data.cloudwatch_batch import MetricRead, ReadResult, read_metrics
from smx_debug.data.job_errors import BAD_DATA, JobError, job_error
from smx_debug.data.sources import S3Source, job_paths, split_s3_uri
from smx_debug.data.system import SystemMetricsReader
from smx_debug.errors import NoDataYetError, NotFoundError
from smx_debug.watch.settings import EvaluatorSettings
from smx_debug.watch.state import Clients, Cursor, RunBudget, RunReport

DEVICE_WINDOW = 10  # minutes of profiler output read per run: the longest device-rule window


def _one(job: str, output_path: str, s3: Any, start_s: int, end_s: int) -> tuple[Any, JobError | None]:

    prefix = job_paths(job, description={"ProfilerConfig": {"S3OutputPath": output_path}}).profiler
    if prefix is None:
        return None, None
    bucket, key = split_s3_uri(prefix)
    try:
        reader = SystemMetricsReader(S3Source(bucket, key, s3_client=s3), start=start_s, end=end_s, progress=False,
                                     workers=4)
        frame = reader.refresh(release=True)
    except (NoDataYetError, NotFoundError):
        return None, None  # no system metrics written yet
    except Exception as exc:  # isolation: this job's output only (smx_debug.watch.save)
        error = job_error(exc, job=job, doing=f"reading profiler output {prefix}", otherwise=BAD_DATA)
        return None, JobError(error.reason, f"{error.message}; CloudWatch host averages used instead")
    return (frame if len(frame) else None), None


def profiler_frames(
    jobs: Sequence[tuple[str, str]], *, s3: Any, start_s: int, end_s: int, workers: int = 4
) -> tuple[dict[str, Any], dict[str, JobError]]:
    """System-metric frames of ``[start_s, end_s)`` for ``(job, profiler S3OutputPath)`` pairs, and errors by job."""
    frames: dict[str, Any] = {}
    errors: dict[str, JobError] = {}
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(lambda j: _one(j[0], j[1], s3, start_s, end_s), jobs))
    for (job, _), (frame, error) in zip(jobs, results, strict=True):
        if frame is not None:
            frames[job] = frame
        if error is not None:
            errors[job] = error
    return frames, errors


def read_new_minutes(
    settings: EvaluatorSettings, clients: Clients, report: RunReport, watched: Sequence[Cursor], budget: RunBudget, *,
    end: int,
) -> tuple[ReadResult, dict[str, Any]]:
    """The read step: each job's CloudWatch minutes since its cursor through ``end`` (epoch seconds; all jobs
    batched, :func:`smx_debug.data.cloudwatch_batch.read_metrics`) and, for the jobs that write it, their profiler
    output over the device rules' window (:func:`profiler_frames`). What the read asked is counted in ``report``;
    a job whose profiler output fails is judged on CloudWatch's host averages."""
    reads = []
    for cursor in watched:
        floor = end - keep_minutes(cursor, settings) * 60
        start = floor if cursor.through is None else max(floor, cursor.through - settings.overlap_minutes * 60)
        job_start = cursor.info.get("start")
        if job_start:
            start = max(start, int(job_start) // 60 * 60)
        reads.append(MetricRead(
            job=cursor.job, start=min(start, end), end=end, hosts=int(cursor.info.get("hosts", 1)),
            metrics=tuple(cursor.info.get("metrics", [])),
        ))
    result: ReadResult = read_metrics(clients.cloudwatch, reads, workers=settings.workers)
    report.metrics_requested, report.datapoints = result.metrics_requested, result.datapoints
    report.get_metric_data_calls = result.calls

    # Debugger profiler output (per core, per GPU) for the jobs that write it: their device rules' window only.
    with_profiler = [(c.job, str(c.info["profiler_s3"])) for c in watched
                     if c.info.get("profiler_s3") and c.job not in result.failed]
    profiler: dict[str, Any] = {}
    if with_profiler and budget.short_of_call() is not None:
        for job, _ in with_profiler:
            report.outcomes[job].notes.append("profiler output not read (out of time): judged on CloudWatch's host "
                                              "averages")
        with_profiler = []
    if with_profiler:
        profiler, profiler_errors = profiler_frames(
            with_profiler, s3=clients.s3, start_s=end - DEVICE_WINDOW * 60, end_s=end, workers=settings.workers)
        for job, error in profiler_errors.items():
            report.outcomes[job].record(error)  # CloudWatch's host averages are used instead
        for job, frame in profiler.items():
            skipped = frame.attrs.get("skipped_by_reason") or {}
            if skipped:  # damaged lines are not errors: the reader skipped and counted them
                reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(skipped.items()))
                report.outcomes[job].notes.append(
                    f"profiler output: {sum(skipped.values())} damaged lines skipped ({reasons})")
    return result, profiler


def keep_minutes(cursor: Cursor, settings: EvaluatorSettings) -> int:
    """Minutes of data the job's cursor keeps: the deployment's window, or a longer rule window."""
    return max([settings.window_minutes, *(r.window_minutes for r in cursor.rules)])


def merge_minutes(cursor: Cursor, new: Mapping[str, Mapping[str, Mapping[int, float]]], keep_from: int) -> Cursor:
    """The cursor with ``new`` minutes merged into its window, minutes before ``keep_from`` dropped."""
    data = {s: {m: dict(p) for m, p in ms.items()} for s, ms in cursor.data.items()}
    for series, metrics in new.items():
        for metric, points in metrics.items():
            data.setdefault(series, {}).setdefault(metric, {}).update(points)
    trimmed = {
        s: {m: {t: v for t, v in p.items() if t >= keep_from} for m, p in ms.items()} for s, ms in data.items()
    }
    trimmed = {s: {m: p for m, p in ms.items() if p} for s, ms in trimmed.items()}
    return cursor.with_changes(data={s: ms for s, ms in trimmed.items() if ms})
