"""What the evaluator benchmarks (bench/evaluator_bench.py, bench/fanout_bench.py) share: their argument parser,
and running training jobs in the local AWS as they meet them. Imported as ``_common``: a benchmark runs as
``python bench/<name>.py`` or through bench/run.py, both with bench/ first on ``sys.path``."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from smx_debug import local
from smx_debug.local.sagemaker import job_metrics
from smx_debug.local.sagemaker.job_metrics import Scenario

HOSTS = 4  # ml.g4dn.12xlarge: 4 GPUs and 48 vCPUs a host
_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1"
_LOSSES = [{"Name": "train:loss", "Regex": "loss=(.*)"}, {"Name": "validation:loss", "Regex": "vl=(.*)"}]


def bench_parser(doc: str | None, quick: str) -> argparse.ArgumentParser:
    """A benchmark's argument parser: the first line of its docstring ``doc`` as description, and ``--quick``
    (help ``quick``: what the smaller run is)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--quick", action="store_true", help=quick)
    return parser


def publish_job_minutes(aws: Any, name: str, *, seed: int, start: datetime, first: int, last: int) -> None:
    """Publish minutes ``first`` to ``last`` (from ``start``) of job ``name``'s per-host instance metrics and its
    losses, as SageMaker does (``job_metrics.Scenario(seed)`` on every host)."""
    job_metrics.publish_minutes(aws, name, start=start, first=first, last=last, hosts=HOSTS,
                                scenario=Scenario(seed=seed, gpus=4, vcpus=48))


def start_running_job(aws: Any, name: str, *, role: str, seed: int, start: datetime, minutes: int, output: str,
                      profiler: Mapping[str, Any], tags: Sequence[Mapping[str, str]] = ()) -> None:
    """Create training job ``name`` (``HOSTS`` x ml.g4dn.12xlarge, train and validation loss metric definitions),
    InProgress since ``start``, with its first ``minutes`` minutes of metrics published."""
    aws.client("sagemaker").create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={"TrainingImage": _IMAGE, "TrainingInputMode": "File", "MetricDefinitions": _LOSSES},
        RoleArn=role, OutputDataConfig={"S3OutputPath": output}, ProfilerConfig=dict(profiler),
        ResourceConfig={"InstanceType": "ml.g4dn.12xlarge", "InstanceCount": HOSTS, "VolumeSizeInGB": 50},
        StoppingCondition={"MaxRuntimeInSeconds": 86400}, **({"Tags": list(tags)} if tags else {}),
    )
    local.set_training_job_status(aws, name, "InProgress")
    job_metrics.set_start_time(aws, name, start)
    publish_job_minutes(aws, name, seed=seed, start=start, first=0, last=minutes - 1)
