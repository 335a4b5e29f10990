"""smx_debug.local.sagemaker.other_team: another team's jobs, tempting and unwatched, and the check that nothing touched them."""

from __future__ import annotations

from datetime import UTC, datetime

from local_support import client

from smx_debug.contracts import is_watched
from smx_debug.data.system import system_metrics
from smx_debug.local import LocalAws
from smx_debug.local.sagemaker import training_jobs
from smx_debug.local.sagemaker.other_team import PREFIX, start_other_team

T0 = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)


def _team(aws: LocalAws):  # type: ignore[no-untyped-def]
    aws.client("s3").create_bucket(Bucket="shared", CreateBucketConfiguration={"LocationConstraint": aws.region})
    return start_other_team(aws, bucket="shared", start=T0, minutes=10)


def test_other_team_jobs_run_unwatched_with_damaged_profiler_output(local_aws: LocalAws) -> None:
    team = _team(local_aws)
    sagemaker = client(local_aws, "sagemaker")
    for job in team.jobs:
        description = sagemaker.describe_training_job(TrainingJobName=job)
        tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=description["TrainingJobArn"])["Tags"]}
        assert description["TrainingJobStatus"] == "InProgress"
        assert not is_watched(job, tags, ["guarded-", "smx-demo-", "exp-"], "smx-debug:managed")
        assert description["ProfilerConfig"]["S3OutputPath"] == team.output_path
    frame = system_metrics(f"{team.output_path}/{team.jobs[0]}/profiler-output/", s3_client=local_aws.client("s3"))
    assert len(frame) > 0
    assert set(frame.attrs["skipped_by_reason"]) == {
        "strings with lone surrogates", "malformed lines", "NaN numbers", "Infinity numbers",
        "numbers beyond float range"}
    assert team.touched(local_aws) == []
    assert team.summary([]).endswith("untouched (0 stops, 0 messages, 0 metrics)")


def test_other_team_touched_names_a_stop_and_a_message(local_aws: LocalAws) -> None:
    training_jobs.install()
    team = _team(local_aws)
    client(local_aws, "sagemaker").stop_training_job(TrainingJobName=team.jobs[1])
    sns = client(local_aws, "sns")
    topic = sns.create_topic(Name="alerts")["TopicArn"]
    sns.publish(TopicArn=topic, Message=f"stopped {team.jobs[1]}")
    touched = team.touched(local_aws)
    assert touched == [f"{team.jobs[1]}: 1 StopTrainingJob call(s)", f"{team.jobs[1]}: Stopping",
                       f"{team.jobs[1]}: named in a message to {topic}"]
    assert team.jobs[1].startswith(PREFIX) and "TOUCHED" in team.summary(touched)
