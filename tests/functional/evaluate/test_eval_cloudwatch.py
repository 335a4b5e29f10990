"""CloudWatch instance and training metrics as rule inputs, on the local AWS (moto server)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from smx_debug.data.cloudwatch import NAMESPACE, instance_metrics, training_metrics
from smx_debug.data.frames import JobData
from smx_debug.data.jobs import load_job
from smx_debug.evaluate import evaluate_rule

JOB = "demo-job"
T0 = (datetime.now(UTC) - timedelta(hours=1)).replace(second=0, microsecond=0)


def _put(cw, metric: str, dims: list[dict[str, str]], values: list[float]) -> None:
    cw.put_metric_data(Namespace=NAMESPACE, MetricData=[
        {"MetricName": metric, "Dimensions": dims, "Timestamp": T0 + timedelta(minutes=i), "Value": v}
        for i, v in enumerate(values)
    ])


@pytest.fixture
def cw(local_aws):
    client = local_aws.client("cloudwatch")
    for h in (1, 2):
        host = [{"Name": "Host", "Value": f"{JOB}/algo-{h}"}]
        _put(client, "CPUUtilization", host, [400.0, 800.0, 3200.0])  # sums over 32 vCPUs
        _put(client, "GPUUtilization", host, [40.0, 20.0, 8.0])       # sums over 4 GPUs
        _put(client, "MemoryUtilization", host, [30.0, 31.0, 32.0])
    job = [{"Name": "TrainingJobName", "Value": JOB}]
    _put(client, "train:loss", job, [1.0, 1.0, 1.0])
    _put(client, "validation:loss", job, [1.5, 1.6, 1.7])
    return client


def test_instance_metrics_map_to_system_frame_per_device(cw):
    df = instance_metrics(JOB, T0, T0 + timedelta(minutes=5), hosts=2, cpus=32, gpus=4, cloudwatch_client=cw)
    algo1 = df[(df["node"] == "algo-1")].sort_values(["dimension", "timestamp"])
    assert algo1[["dimension", "name", "value"]].to_dict("records") == [
        {"dimension": "CPUUtilization", "name": "cpu0", "value": 12.5},
        {"dimension": "CPUUtilization", "name": "cpu0", "value": 25.0},
        {"dimension": "CPUUtilization", "name": "cpu0", "value": 100.0},
        {"dimension": "GPUUtilization", "name": "gpu0", "value": 10.0},
        {"dimension": "GPUUtilization", "name": "gpu0", "value": 5.0},
        {"dimension": "GPUUtilization", "name": "gpu0", "value": 2.0},
        {"dimension": "MemoryUtilization", "name": "MemoryUsedPercent", "value": 30.0},
        {"dimension": "MemoryUtilization", "name": "MemoryUsedPercent", "value": 31.0},
        {"dimension": "MemoryUtilization", "name": "MemoryUsedPercent", "value": 32.0},
    ]
    assert sorted(df["node"].unique()) == ["algo-1", "algo-2"]


def test_instance_metrics_feed_cpu_bottleneck_rule(local_aws):
    # A busy CPU beside idle GPUs, as CloudWatch reports it for a job without Debugger: the CPU series must be a
    # device series the rules read (a node-level "total" row is skipped by them, so the rule could never fire).
    client = local_aws.client("cloudwatch")
    host = [{"Name": "Host", "Value": "cpu-job/algo-1"}]
    _put(client, "CPUUtilization", host, [3100.0] * 5)  # 32 vCPUs at ~97%
    _put(client, "GPUUtilization", host, [8.0] * 5)      # 4 GPUs at 2%
    df = instance_metrics("cpu-job", T0, T0 + timedelta(minutes=6), hosts=1, cpus=32, gpus=4, cloudwatch_client=client)
    r = evaluate_rule("CPUBottleneck", JobData(system=df), {"patience": 2})
    assert r.triggered and r.violations == 5


def test_instance_metrics_feed_low_gpu_rule(cw):
    df = instance_metrics(JOB, T0, T0 + timedelta(minutes=5), hosts=2, gpus=4, cloudwatch_client=cw)
    r = evaluate_rule("LowGPUUtilization", JobData(system=df), {"patience": 2, "window": 3})
    # 1-minute data: the scan at the third minute sees 3 values per host, p95 below 70 -> both hosts listed,
    # one violation per GPU (Debugger counts per violating GPU per scan) and the scan's start (last_timestamp)
    assert (r.rule_triggered, sorted(r.details)) == (2, ["algo-1", "algo-2", "last_timestamp"])


def test_training_metrics_map_train_and_validation_modes(cw):
    df = training_metrics(JOB, ["train:loss", "validation:loss"], T0, T0 + timedelta(minutes=5), cloudwatch_client=cw)
    assert df[["metric", "mode", "step", "value"]].to_dict("records") == [
        {"metric": "loss", "mode": "TRAIN", "step": 0, "value": 1.0},
        {"metric": "loss", "mode": "TRAIN", "step": 1, "value": 1.0},
        {"metric": "loss", "mode": "TRAIN", "step": 2, "value": 1.0},
        {"metric": "loss", "mode": "EVAL", "step": 0, "value": 1.5},
        {"metric": "loss", "mode": "EVAL", "step": 1, "value": 1.6},
        {"metric": "loss", "mode": "EVAL", "step": 2, "value": 1.7},
    ]
    assert evaluate_rule("Overfit", JobData(scalars=df)).rule_triggered == 3  # ratios 0.5, 0.6, 0.7


def test_load_job_unknown_name_raises_not_found(local_aws):
    from smx_debug.errors import NotFoundError

    with pytest.raises(NotFoundError, match="no-such-job"):
        load_job("no-such-job", sagemaker_client=local_aws.client("sagemaker"))
