"""Each Lambda asset, exactly as the template references it, runs alone on a boto3-only Python.

The asset is uploaded by ``publish_assets`` to the local S3 (as for a deployment), downloaded, unzipped
into an empty folder and imported by an interpreter that has only boto3 (the Lambda runtime's
libraries). The handler then handles a sample event from ``tests/events/`` against the local AWS.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import zipfile
from pathlib import Path
from typing import Any

from smx_debug import local
from smx_debug.local import LocalAws
from smx_debug.local.cloudformation.deploy import publish_assets

STACK = "SmxDebugGuard"
EVENTS = Path(__file__).resolve().parents[2] / "events"
# What the Lambda runtime does not have; none of it may be imported by a handler.
FORBIDDEN = ("pydantic", "pandas", "numpy", "yaml", "sagemaker", "moto", "pyarrow", "aws_cdk")

RUN = """
import json, sys
sys.path.insert(0, sys.argv[1])
module, _, function = sys.argv[4].partition(".")  # the function's Handler setting, as Lambda reads it
handler = __import__(module)
event = json.load(open(sys.argv[2]))
result = getattr(handler, function)(event, None)
loaded = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[3].split(",")))
print(json.dumps({"result": result, "loaded": loaded, "package": sys.modules["smx_debug"].__file__}, default=str))
"""


def _asset_of(synthesized: Path, handler: str) -> tuple[str, str, str]:
    """(bucket, key, Handler setting) the template gives the handler's function."""
    template = json.loads((synthesized / f"{STACK}.template.json").read_text())
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        tags = {t["Key"]: t["Value"] for t in resource["Properties"]["Tags"]}
        if tags["smx-debug:handler"] == handler:
            code = resource["Properties"]["Code"]
            bucket = code["S3Bucket"]["Fn::Sub"].replace("${AWS::AccountId}", "123456789012")
            return bucket.replace("${AWS::Region}", "us-west-2"), code["S3Key"], resource["Properties"]["Handler"]
    raise AssertionError(f"no function for {handler}")


def _run(python: Path, aws: LocalAws, synthesized: Path, tmp_path: Path, handler: str, event: str | dict[str, Any],
         env: dict[str, str]) -> dict[str, Any]:
    publish_assets(aws, synthesized)
    bucket, key, entry = _asset_of(synthesized, handler)
    body = aws.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    root = tmp_path / "task"
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        archive.extractall(root)
    event_path = EVENTS / event if isinstance(event, str) else tmp_path / "event.json"
    if not isinstance(event, str):
        event_path.write_text(json.dumps(event))
    completed = subprocess.run(
        [str(python), "-I", "-c", RUN, str(root), str(event_path), ",".join(FORBIDDEN), entry],
        env={"PATH": os.environ.get("PATH", ""), **aws.environ(), **env},
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    out: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    assert out["loaded"] == []
    assert out["package"] == str(root / "smx_debug" / "__init__.py")
    return out


def _watched_job(aws: LocalAws) -> dict[str, Any]:
    """The sample event's job, created on the local AWS with its tags and rule statuses; its state-change event.

    The handlers act only on what SageMaker says (DescribeTrainingJob, ListTags), not on the event's copy.
    """
    sample = json.loads((EVENTS / "sagemaker_state_change_issues_found.json").read_text())["detail"]
    job = sample["TrainingJobName"]
    local.install(aws)
    local.create_training_job(aws, job, sample["Tags"])
    local.set_training_job_status(aws, job, "InProgress")
    local.set_rule_statuses(aws, job, debug=[
        local.rule_status(r["RuleConfigurationName"], r["RuleEvaluationStatus"], details=r.get("StatusDetails"))
        for r in sample["DebugRuleEvaluationStatuses"]
    ])
    return local.state_change_event(aws, job)


_DEPLOYMENT = {"SMX_WATCH_PREFIXES": "smdebugger-", "SMX_ACCOUNT": "123456789012"}


def test_asset_rule_metrics_publishes_metric_from_sample_event(
    boto3_only_python: Path, local_aws: LocalAws, synthesized: Path, tmp_path: Path
) -> None:
    event = _watched_job(local_aws)
    out = _run(boto3_only_python, local_aws, synthesized, tmp_path, "rule_metrics", event,
               {**_DEPLOYMENT, "SMX_METRIC_NAMESPACE": "SmxDebug"})
    assert out["result"].get("rejected") is not True, out
    metrics = local_aws.client("cloudwatch").list_metrics(Namespace="SmxDebug", MetricName="RuleTriggered")
    assert {tuple(sorted((d["Name"], d["Value"]) for d in m["Dimensions"])) for m in metrics["Metrics"]} == {
        (),
        (("RuleName", "VanishingGradient"),),
        (("RuleName", "VanishingGradient"), ("TrainingJobName", "smdebugger-demo-mnist-tensorflow-1575184517")),
    }


def test_asset_notify_publishes_alarm_to_topic(
    boto3_only_python: Path, local_aws: LocalAws, synthesized: Path, tmp_path: Path
) -> None:
    sns, sqs = local_aws.client("sns"), local_aws.client("sqs")
    topic = sns.create_topic(Name="smx-debug")["TopicArn"]
    queue = local.subscribe_queue(local_aws, topic, "inbox")
    out = _run(boto3_only_python, local_aws, synthesized, tmp_path, "notify", "sns_cloudwatch_alarm.json",
               {"SMX_TOPIC_ARN": topic})
    assert [(a["alarm"], a["state"]) for a in out["result"]["alarms"]] == [
        ("smx-debug-ExplodingTensor-triggered", "ALARM")
    ]
    messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    assert len(messages) == 1
    assert "ExplodingTensor" in json.loads(messages[0]["Body"])["Message"]


def test_asset_retrain_init_returns_launch_state(
    boto3_only_python: Path, local_aws: LocalAws, synthesized: Path, tmp_path: Path
) -> None:
    out = _run(boto3_only_python, local_aws, synthesized, tmp_path, "retrain", "retrain_input.json", {})
    state = out["result"]
    assert (state["next_action"], state["error"], state["history"]["num_retraining"]) == ("launch_new", None, 0)
    assert state["run_spec"]["job_name_prefix"] == "resnet-elu-deep"


def test_asset_stop_training_stops_watched_job(
    boto3_only_python: Path, local_aws: LocalAws, synthesized: Path, tmp_path: Path
) -> None:
    event = _watched_job(local_aws)  # its rule VanishingGradient is tagged "stop notify"
    job = event["detail"]["TrainingJobName"]
    out = _run(boto3_only_python, local_aws, synthesized, tmp_path, "stop_training", event, _DEPLOYMENT)
    assert out["result"].get("rejected") is not True, out
    assert local.stop_calls(local_aws, job) == 1
