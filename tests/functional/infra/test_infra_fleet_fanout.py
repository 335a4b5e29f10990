"""The deployed stack on the local AWS: the scheduled evaluator fans out through its shard queue (shards in parallel,
at most the mapping's maximum concurrency), each job evaluated and acted on once; the stack's functions fill the
fleet dataset (the evaluator its watched jobs' minutes, through their end even for a job no run saw running, the
collector every job's metadata, the other team's minutes and the verdict log), and a fleet query over the bucket answers for every team. No call is denied."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from smx_debug import fleet, local
from smx_debug.fleet.s3_boto import stack_root
from smx_debug.local import DeployedStack, LocalAws, deploy_stack
from smx_debug.local.awslambda import event_sources
from smx_debug.local.cloudwatch import metric_data
from smx_debug.local.sagemaker import job_metrics
from smx_debug.local.sagemaker.job_metrics import Scenario
from smx_debug.local.sagemaker.other_team import start_other_team

STACK = "SmxDebugGuard"
CONTEXT = {"watch_prefixes": ["guarded-"], "default_actions": ["notify", "stop"], "local": True, "retraining": False,
           "evaluator": {"jobs_per_invocation": 2, "max_concurrency": 2, "default_rules": [{"rule": "CPUBottleneck"}]}}
WATCHED = [f"guarded-{i}" for i in range(5)]
SHORT = "guarded-short"  # a watched job that ended before any evaluator run saw it


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from infra.cdk_app import build_app

    outdir = tmp_path_factory.mktemp("cdk.out")
    build_app(dict(CONTEXT), outdir=str(outdir), nag=False).synth()
    return outdir / f"{STACK}.template.json"


@pytest.fixture
def deployed(local_aws: LocalAws, template: Path) -> Iterator[DeployedStack]:
    local.install(local_aws)
    metric_data.install()
    job_metrics.install()
    yield deploy_stack(local_aws, template, stack_name=STACK)


def _start(aws: LocalAws, bucket: str) -> datetime:
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=12)
    for i, name in enumerate([*WATCHED, SHORT]):
        aws.client("sagemaker").create_training_job(
            TrainingJobName=name,
            AlgorithmSpecification={"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1",
                                    "TrainingInputMode": "File"},
            RoleArn=local.execution_role(aws), ProfilerConfig={"DisableProfiler": True},
            OutputDataConfig={"S3OutputPath": f"s3://{bucket}/output"},
            ResourceConfig={"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
            StoppingCondition={"MaxRuntimeInSeconds": 3600}, Tags=[{"Key": "team", "Value": "vision"}])
        local.set_training_job_status(aws, name, "InProgress")
        job_metrics.set_start_time(aws, name, start)
        scenario = Scenario(kind="cpu_bottleneck" if i == 0 else "healthy", onset=2, vcpus=8, gpus=1, seed=i)
        job_metrics.publish_minutes(aws, name, start=start, first=0, last=4 if name == SHORT else 11,
                                    scenario=scenario)
    local.set_training_job_status(aws, SHORT, "Completed")  # over before the evaluator's first run
    job_metrics.set_end_time(aws, SHORT, start + timedelta(minutes=4.5))
    return start


def test_deployed_evaluator_fans_out_and_the_stack_fills_the_fleet_dataset(local_aws: LocalAws,
                                                                           deployed: DeployedStack) -> None:
    bucket = deployed.output("OutputBucketName")
    start = _start(local_aws, bucket)
    team = start_other_team(local_aws, bucket=bucket, start=start, minutes=12)
    (run,) = local.deliver_schedule(local_aws, handlers=["evaluator"])
    assert run.error is None and (run.result["watched"], run.result["shards"], run.result["evaluated"]) == (5, 3, 0)
    assert run.result["ended"] == [SHORT] and run.result["failed"] == {}  # its minutes, by the run itself
    shards = event_sources.poll(local_aws)
    assert [s.error for s in shards] == [None] * 3 and all(s.failed_ids == () for s in shards)
    assert event_sources.most_at_once(shards) == 2  # in parallel, at most the mapping's maximum concurrency
    summaries = [summary for s in shards for summary in s.result["shards"]]
    assert sum(s["evaluated"] for s in summaries) == 5 and all(s["held"] == [] for s in summaries)
    assert [t["job"] for s in summaries for t in s["triggers"]] == ["guarded-0"]
    assert local.stop_calls(local_aws, "guarded-0") == 1

    (collected,) = local.deliver_schedule(local_aws, handlers=["fleet_collector"])
    assert collected.error is None and collected.result["failed"] == {}, collected.result
    root = stack_root(bucket, local_aws.client("s3"))
    jobs = fleet.run_query("top_wasted_jobs", since="1d", root=root, n=100)
    assert set(jobs["job"]) == {*WATCHED, SHORT, *team.jobs}  # watched minutes (evaluator), the others' (collector)
    files = fleet.run_query("dataset_files", since="1d", root=root)
    short = files[files["file"].str.endswith(f"/{SHORT}.parquet")]
    naive = start.replace(tzinfo=None)
    assert (short["first_minute"].min(), short["last_minute"].max(), short["row_count"].sum()) == (
        naive, naive + timedelta(minutes=4), 5 * 5)  # minutes 0-4 of its one host, 5 metrics each, once
    assert set(jobs["team"].dropna()) == {"vision", "research"}
    stops = fleet.run_query("time_to_stop", since="1d", root=root)
    assert stops["job"].tolist() == ["guarded-0"] and stops["seconds_to_stop"].iloc[0] >= 0
    assert team.touched(local_aws, ledger_table=deployed.output("LedgerTableName")) == []
