"""Benchmark: one scheduled-evaluator run over 200 watched jobs x 4 hosts on the local AWS, then the next minute's.

Run ``python bench/evaluator_bench.py`` (``--quick``: 20 jobs). Each job has been running for an hour: the local
CloudWatch holds 60 minutes of its per-host instance metrics (5 per host) and 2 training metrics, as SageMaker
publishes them. Run 1 meets every job for the first time (ListTags + DescribeTrainingJob each, then its whole
window); run 2, one minute later, is the steady state every later run repeats: it must read only the new minute
(plus the 2-minute overlap that catches late datapoints), a small constant per job whatever the job's length.

Printed per run: wall time (target < 60 s, the schedule's period), peak Python memory (tracemalloc; the local AWS
runs in this process, so its allocations during the run are included), AWS calls by API, metrics requested and
datapoints returned per job. Baselines: the 60 s period; and a non-incremental evaluator that re-reads each job's
whole history every minute (60 minutes of datapoints per metric at this point, growing with the job).
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 60.0
HOSTS = 4
MINUTES = 60


def _count_calls(clients: Any, counter: Counter[str]) -> None:
    for client in (clients.sagemaker, clients.cloudwatch, clients.dynamodb, clients.s3):
        service = client.meta.service_model.service_name

        def count(model: Any, service: str = service, **_: Any) -> None:
            counter[f"{service}:{model.name}"] += 1

        client.meta.events.register("before-call.*.*", count)


def _setup(aws: Any, jobs: int, start: datetime) -> None:
    from smx_debug import local
    from smx_debug.local import job_metrics, metric_data
    from smx_debug.local.job_metrics import Scenario, publish_minutes

    metric_data.install()
    job_metrics.install()
    local.install(aws)
    aws.client("dynamodb").create_table(
        TableName="bench-cursors", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST",
    )
    sm = aws.client("sagemaker")
    for i in range(jobs):
        name = f"bench-{i:03d}"
        sm.create_training_job(
            TrainingJobName=name,
            AlgorithmSpecification={"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1",
                                    "TrainingInputMode": "File",
                                    "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=(.*)"},
                                                          {"Name": "validation:loss", "Regex": "vl=(.*)"}]},
            RoleArn="arn:aws:iam::123456789012:role/SageMaker-bench", OutputDataConfig={"S3OutputPath": "s3://b/o"},
            ResourceConfig={"InstanceType": "ml.g4dn.12xlarge", "InstanceCount": HOSTS, "VolumeSizeInGB": 50},
            StoppingCondition={"MaxRuntimeInSeconds": 86400}, ProfilerConfig={"DisableProfiler": True},
        )
        local.set_training_job_status(aws, name, "InProgress")
        job_metrics.set_start_time(aws, name, start)
        publish_minutes(aws, name, start=start, first=0, last=MINUTES - 1, scenario=Scenario(seed=i, gpus=4, vcpus=48),
                        hosts=HOSTS)


def _run(label: str, aws: Any, settings: Any, clients: Any, now: float, jobs: int) -> dict[str, Any]:
    from smx_debug.watch import run_once

    calls: Counter[str] = Counter()
    _count_calls(clients, calls)
    tracemalloc.start()
    started = time.perf_counter()
    report = run_once(settings, clients, lambda job, triggers: {}, now=now)
    wall = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    for client in (clients.sagemaker, clients.cloudwatch, clients.dynamodb, clients.s3):
        client.meta.events.unregister("before-call.*.*")
    evaluated = sum(o.status == "evaluated" for o in report.outcomes.values())
    print(f"{label}: {wall:.2f} s wall ({wall / TARGET_S:.2f}x the {TARGET_S:.0f} s period), peak {peak / 2**20:.0f} MB "
          f"Python memory, {evaluated}/{jobs} jobs evaluated, {len(report.triggers)} triggers")
    print("  AWS calls: " + ", ".join(f"{api} {n}" for api, n in sorted(calls.items())))
    per_job_metrics = report.metrics_requested / max(jobs, 1)
    per_job_points = report.datapoints / max(jobs, 1)
    print(f"  per job: {per_job_metrics:.0f} metrics requested, {per_job_points:.0f} datapoints read; "
          f"{report.get_metric_data_calls} GetMetricData calls for {jobs} jobs")
    return {"wall": wall, "peak": peak, "calls": calls, "points_per_job": per_job_points,
            "metrics_per_job": per_job_metrics, "evaluated": evaluated}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="20 jobs instead of 200")
    parser.add_argument("--jobs", type=int, default=None)
    args, _ = parser.parse_known_args(argv)
    jobs = args.jobs or (20 if args.quick else 200)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from smx_debug.local import LocalAws
    from smx_debug.local.clients import client as cached_client
    from smx_debug.watch import Clients, EvaluatorSettings, WatchSpec

    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=MINUTES + 1)
    with LocalAws() as aws:
        t = time.perf_counter()
        _setup(aws, jobs, start)
        print(f"setup: {jobs} jobs x {HOSTS} hosts, {MINUTES} minutes of CloudWatch data each "
              f"({jobs * (HOSTS * 5 + 2) * MINUTES:,} datapoints), {time.perf_counter() - t:.1f} s")
        clients = Clients(sagemaker=cached_client(aws, "sagemaker"), cloudwatch=cached_client(aws, "cloudwatch"),
                          dynamodb=cached_client(aws, "dynamodb"), s3=cached_client(aws, "s3"))
        settings = EvaluatorSettings(
            watch_prefixes=("bench-",), cursor_table="bench-cursors",
            default_rules=WatchSpec.from_json('[{"rule": "CPUBottleneck"}, {"rule": "LowGPUUtilization"}, '
                                              '{"rule": "LossNotDecreasing"}, {"rule": "Overtraining"}]'),
        )
        now = start.timestamp() + (MINUTES + 1) * 60 + 5
        first = _run("run 1 (every job new)", aws, settings, clients, now, jobs)
        from smx_debug.local.job_metrics import Scenario, publish_minutes

        for i in range(jobs):  # the next minute arrives
            publish_minutes(aws, f"bench-{i:03d}", start=start, first=MINUTES, last=MINUTES,
                            scenario=Scenario(seed=i, gpus=4, vcpus=48), hosts=HOSTS)
        second = _run("run 2 (one minute later)", aws, settings, clients, now + 60, jobs)
    full_history = (HOSTS * 5 + 2) * (MINUTES + 1)
    print(f"run 2 reads {second['points_per_job']:.0f} datapoints per job; a non-incremental evaluator would read "
          f"{full_history} now ({second['points_per_job'] / full_history:.3f}x) and more every minute")
    per_job_calls = {api: n / jobs for api, n in second["calls"].items()}
    print("run 2 calls per job: " + ", ".join(f"{api} {n:.3f}" for api, n in sorted(per_job_calls.items())))
    ok = (first["wall"] < TARGET_S and second["wall"] < TARGET_S and second["evaluated"] == jobs
          and second["points_per_job"] <= (HOSTS * 5 + 2) * 3)
    print(f"targets (each run < {TARGET_S:.0f} s; run 2 reads <= 3 minutes per metric): {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
