"""The fleet collector on the local AWS: every job's metadata, the unwatched jobs' CloudWatch minutes, the verdict
log compacted from the inbox; idempotent on reruns and redelivered inbox objects; each job's failure its own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pandas as pd
import pyarrow.parquet as pq
import pytest

from smx_debug import local
from smx_debug.actions.verdict_log import inbox_key
from smx_debug.contracts import FLEET_INBOX_PREFIX, FLEET_STATE_KEY, MANAGED_TAG
from smx_debug.fleet.collector import CollectorClients, CollectorSettings, collect_fleet
from smx_debug.fleet.s3_boto import stack_root
from smx_debug.local import LocalAws, job_metrics, metric_data
from smx_debug.local.clients import client
from smx_debug.local.job_metrics import Scenario

BUCKET = "fleet-guard"
T0 = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)
NOW = (T0 + timedelta(minutes=30)).timestamp()


@pytest.fixture
def aws(local_aws: LocalAws) -> Iterator[LocalAws]:
    local.install(local_aws)
    metric_data.install()
    job_metrics.install()
    client(local_aws, "s3").create_bucket(Bucket=BUCKET,
                                          CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    yield local_aws


def _job(aws: LocalAws, name: str, tags: dict[str, str], *, instance: str = "ml.g5.2xlarge", hosts: int = 2) -> None:
    client(aws, "sagemaker").create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1",
                                "TrainingInputMode": "File"},
        RoleArn=local.execution_role(aws), OutputDataConfig={"S3OutputPath": "s3://o/o"},
        ResourceConfig={"InstanceType": instance, "InstanceCount": hosts, "VolumeSizeInGB": 5},
        StoppingCondition={"MaxRuntimeInSeconds": 36000}, Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
    local.set_training_job_status(aws, name, "InProgress")
    job_metrics.set_start_time(aws, name, T0)
    job_metrics.publish_minutes(aws, name, start=T0, first=0, last=28, hosts=hosts,
                                scenario=Scenario(kind="cpu_bottleneck", onset=10, gpus=1, vcpus=8))


def _clients(aws: LocalAws) -> CollectorClients:
    return CollectorClients(sagemaker=client(aws, "sagemaker"), cloudwatch=client(aws, "cloudwatch"),
                            s3=client(aws, "s3"))


def _table(aws: LocalAws, table: str) -> pd.DataFrame:
    root = stack_root(BUCKET, client(aws, "s3"))
    frames = []
    for info in root.files(table):
        with root.filesystem.open_input_file(info.path) as f:
            frames.append(pq.read_table(f).to_pandas())
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _inbox(aws: LocalAws, job: str, rows: list[dict[str, object]], *, now: float, body: bytes | None = None) -> str:
    key = inbox_key(job, rows, now=now)
    data = body if body is not None else "".join(json.dumps(r) + "\n" for r in rows).encode()
    client(aws, "s3").put_object(Bucket=BUCKET, Key=key, Body=data)
    return key


def _row(job: str, event: str, action: str | None, verdict: str, time: str) -> dict[str, object]:
    return {"job": job, "rule": "CPUBottleneck", "rule_type": "CPUBottleneck", "event": event, "verdict": verdict,
            "action": action, "source": "smx-debug evaluator", "time": time, "detail": None}


def test_collector_writes_every_job_and_leaves_watched_minutes_to_the_evaluator(aws: LocalAws) -> None:
    _job(aws, "guarded-a", {"team": "vision"})                    # watched by prefix: the evaluator's minutes
    _job(aws, "research-b", {"team": "research"})                 # unwatched: the collector's minutes
    _job(aws, "research-c", {MANAGED_TAG: "true", "team": "nlp"})  # opted in: the evaluator's
    settings = CollectorSettings(bucket=BUCKET, watch_prefixes=("guarded-",), evaluator_appends=True)
    report = collect_fleet(settings, _clients(aws), now=NOW)
    assert (report.jobs, report.metadata_written, report.left_to_evaluator, report.minutes_jobs) == (3, 3, 2, 1)
    jobs = _table(aws, "training_jobs").set_index("job")
    assert jobs.loc["research-b", ["team", "instance_type", "instance_count", "gpus_per_instance"]].tolist() == [
        "research", "ml.g5.2xlarge", 2, 1]
    minutes = _table(aws, "system_minutes")
    assert set(minutes["job"]) == {"research-b"} and set(minutes["source"]) == {"cloudwatch"}
    # the first run reads the minutes of the last first_read_hours up to the settled minute (29 minutes, 2 hosts)
    gpu = minutes[minutes["dimension"] == "GPUUtilization"]
    assert len(gpu) == 2 * 29 and set(gpu["devices"]) == {1}
    # without an evaluator, the collector writes every job's minutes
    alone = collect_fleet(CollectorSettings(bucket=BUCKET, watch_prefixes=("guarded-",)), _clients(aws), now=NOW)
    assert alone.left_to_evaluator == 0 and set(_table(aws, "system_minutes")["job"]) == {
        "guarded-a", "research-b", "research-c"}


def test_collector_rerun_rewrites_nothing_new_and_doubles_no_row(aws: LocalAws) -> None:
    _job(aws, "research-b", {"team": "research"})
    settings = CollectorSettings(bucket=BUCKET)
    collect_fleet(settings, _clients(aws), now=NOW)
    before = _table(aws, "system_minutes")
    job_metrics.publish_minutes(aws, "research-b", start=T0, first=29, last=29, hosts=2,
                                scenario=Scenario(kind="cpu_bottleneck", onset=10, gpus=1, vcpus=8))
    again = collect_fleet(settings, _clients(aws), now=NOW + 60)
    after = _table(aws, "system_minutes")
    assert again.metadata_written == 0  # unchanged job: its metadata row is not rewritten
    assert len(after) == len(before) + 2 * 5  # the new minute (2 hosts x 5 metrics); the overlap replaced
    assert not after.duplicated(["job", "node", "minute", "source", "name", "dimension"]).any()
    state = json.loads(client(aws, "s3").get_object(Bucket=BUCKET, Key=FLEET_STATE_KEY)["Body"].read())
    assert state["through"] == int(NOW + 60 - 60) // 60 * 60 and list(state["jobs"]) == ["research-b"]


def test_collector_compacts_the_inbox_idempotently_and_counts_damaged_lines(aws: LocalAws) -> None:
    _job(aws, "guarded-a", {})
    rows = [_row("guarded-a", "trigger", None, "IssuesFound", "2026-11-23T08:14:00.000+00:00"),
            _row("guarded-a", "action", "stop", "stopped", "2026-11-23T08:14:02.000+00:00")]
    _inbox(aws, "guarded-a", rows, now=NOW - 600)
    _inbox(aws, "guarded-a", rows[:1], now=NOW - 300)  # a redelivered event: the same trigger again
    _inbox(aws, "guarded-a", rows[1:], now=NOW - 200,
           body=b"not json\n" + json.dumps(rows[1]).encode() + b"\n" + b'{"job": "guarded-a", "ru')
    settings = CollectorSettings(bucket=BUCKET, watch_prefixes=("guarded-",), evaluator_appends=True)
    report = collect_fleet(settings, _clients(aws), now=NOW)
    assert report.inbox_objects == 3
    assert report.appended.skipped == {"verdict lines not JSON": 1, "verdict lines cut mid-write": 1}
    verdicts = _table(aws, "verdicts")
    assert sorted(zip(verdicts["event"], verdicts["action"].fillna("-"), strict=True)) == [
        ("action", "stop"), ("trigger", "-")]
    left = client(aws, "s3").list_objects_v2(Bucket=BUCKET, Prefix=FLEET_INBOX_PREFIX).get("Contents", [])
    assert left == []  # compacted objects are deleted
    _inbox(aws, "guarded-a", rows, now=NOW)  # the same rows once more: still one row each
    collect_fleet(settings, _clients(aws), now=NOW + 60)
    assert len(_table(aws, "verdicts")) == 2


def test_collector_debugger_triggers_come_from_rule_statuses(aws: LocalAws) -> None:
    _job(aws, "research-b", {})
    local.set_rule_statuses(aws, "research-b", debug=[local.rule_status("LossNotDecreasing", "IssuesFound", step=5)])
    collect_fleet(CollectorSettings(bucket=BUCKET), _clients(aws), now=NOW)
    verdicts = _table(aws, "verdicts")
    assert verdicts[["job", "rule", "event", "source"]].values.tolist() == [
        ["research-b", "LossNotDecreasing", "trigger", "SageMaker Debugger"]]
