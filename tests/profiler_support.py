"""Debugger profiler output of a training job in the local AWS: the job's ProfilerConfig (moto drops it on create;
the local AWS keeps what is set here) and a simulation's profiler files in S3, where Debugger writes them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from smx_debug.contracts import PROFILER_OUTPUT
from smx_debug.local import LocalAws
from smx_debug.local.sagemaker import training_jobs
from smx_debug.simulate import Simulation


def set_profiler_config(aws: LocalAws, job: str, bucket: str, **config: Any) -> None:
    """Give ``job`` a ProfilerConfig writing under ``s3://bucket/debugger`` (``config``: its other fields)."""
    training_jobs._profiler_fields[training_jobs.training_job(aws, job)] = {
        "ProfilerConfig": {"S3OutputPath": f"s3://{bucket}/debugger", **config}}


def put_profiler_output(aws: LocalAws, bucket: str, job: str, sim: Simulation, minutes: Iterable[int], *,
                        tail: Callable[[int], bytes] | None = None) -> None:
    """Put ``sim``'s system profiler files of ``minutes`` in ``s3://bucket/debugger/<job>/profiler-output/``, each
    followed by ``tail(minute)`` when given (damaged records)."""
    s3 = aws.client("s3")
    for minute in minutes:
        for key, body, _ in sim.files_for_minute(minute, framework=False):
            s3.put_object(Bucket=bucket, Key=f"debugger/{job}/{PROFILER_OUTPUT}/{key}",
                          Body=body + (tail(minute) if tail else b""))
