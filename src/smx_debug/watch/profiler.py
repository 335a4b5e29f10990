"""Debugger profiler output in S3, when a job has it, through the one reader (:mod:`smx_debug.reports`).

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

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from smx_debug.data.job_errors import BAD_DATA, JobError, job_error
from smx_debug.errors import NoDataYetError, NotFoundError

__all__ = ["profiler_frames"]


def _one(job: str, output_path: str, s3: Any, start_s: int, end_s: int) -> tuple[Any, JobError | None]:
    from smx_debug.data.sources import S3Source, job_paths, split_s3_uri
    from smx_debug.reports import SystemMetricsReader

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
    except Exception as exc:  # isolation: this job's output only (smx_debug.watch.isolation)
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
