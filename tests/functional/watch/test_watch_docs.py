"""docs/evaluator.md's three ways to opt a job in: the SDK v2 and boto3 snippets run verbatim on the local AWS and
the evaluator then guards the job they created; the SDK v3 snippet cannot run here (v3 cannot share a virtualenv
with v2), so the CreateTrainingJob request its arguments make is validated with botocore's own validator."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.validate import ParamValidator
from watch_support import BUCKET, Recorder, clients, publish, settings

from smx_debug import local
from smx_debug.contracts import EVALUATOR_TAG, is_watched
from smx_debug.local import LocalAws
from smx_debug.local.sagemaker import job_metrics
from smx_debug.local.sagemaker.job_metrics import Scenario
from smx_debug.watch import run_once
from smx_debug.watch.state import CursorStore

DOC = Path(__file__).resolve().parents[3] / "docs" / "evaluator.md"
IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution-docs"
CPU = Scenario(kind="cpu_bottleneck", onset=10)


def snippet(name: str) -> str:
    match = re.search(rf"<!-- snippet: {re.escape(name)} -->\s*(?:<!-- no-run: [^\n]*-->\s*)?```python\n(.*?)```", DOC.read_text(), re.S)
    assert match, f"docs/evaluator.md has no snippet {name!r}"
    return match.group(1)


def _guard(aws: LocalAws, job: str, **changes: Any) -> tuple[Recorder, Any]:
    local.set_training_job_status(aws, job, "InProgress")
    from watch_support import T0

    job_metrics.set_start_time(aws, job, T0)
    publish(aws, job, 0, 20, CPU)
    recorder = Recorder()
    for m in range(8, 16):
        run_once(settings(**changes), clients(aws), recorder, now=T0.timestamp() + m * 60 + 5)
    return recorder, CursorStore("smx-debug-cursors", clients(aws).dynamodb).load([job])[job]


def _execution_role(aws: LocalAws) -> str:
    """ROLE, made in the local IAM: SageMaker assumes the role a snippet passes."""
    return local.execution_role(aws, ROLE.rsplit("/", 1)[1])


def test_docs_sdk_v2_snippet_creates_a_job_without_debugger_that_the_evaluator_guards(aws: LocalAws) -> None:
    from smx_debug.local.sdk import sagemaker_session

    with aws.environment():
        exec(snippet("sdk-v2"), {"bucket": BUCKET, "image": IMAGE, "role": _execution_role(aws),
                                 "session": sagemaker_session(aws)})
    job = aws.client("sagemaker").describe_training_job(TrainingJobName="exp-resnet-42")
    assert "DebugRuleConfigurations" not in job and "ProfilerRuleConfigurations" not in job
    assert job.get("ProfilerConfig", {}).get("DisableProfiler") is True
    tags = {t["Key"]: t["Value"] for t in aws.client("sagemaker").list_tags(ResourceArn=job["TrainingJobArn"])["Tags"]}
    assert tags[EVALUATOR_TAG].startswith("smx-debug/watch-specs/")
    recorder, cursor = _guard(aws, "exp-resnet-42", watch_prefixes=())
    assert [r["name"] for r in cursor.info["rules"]] == ["CPUBottleneck", "Loss", "LossNotDecreasing"]
    assert [t.rule for _, ts in recorder.calls for t in ts] == ["CPUBottleneck"]


def test_docs_boto3_snippet_opts_in_by_tag_and_gets_the_default_rules(aws: LocalAws) -> None:
    with aws.environment():
        exec(snippet("boto3"), {"bucket": BUCKET, "image": IMAGE, "role": _execution_role(aws)})
    recorder, cursor = _guard(aws, "bert-finetune-7", watch_prefixes=())
    assert [r["name"] for r in cursor.info["rules"]] == ["CPUBottleneck", "LossNotDecreasing"]
    assert recorder.jobs() == ["bert-finetune-7"]


def _v3_arguments() -> dict[str, Any]:
    tree = ast.parse(snippet("sdk-v3"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "ModelTrainer"]
    assert len(calls) == 1
    out: dict[str, Any] = {}
    for kw in calls[0].keywords:
        if kw.arg == "compute":
            assert isinstance(kw.value, ast.Call)
            out["compute"] = {k.arg: ast.literal_eval(k.value) for k in kw.value.keywords}
        elif kw.arg == "tags":  # [Tag(key=..., value=...)]: the API's {"Key", "Value"}
            assert isinstance(kw.value, ast.List)
            tags = []
            for tag in kw.value.elts:
                assert isinstance(tag, ast.Call) and getattr(tag.func, "id", "") == "Tag"
                fields = {k.arg: ast.literal_eval(k.value) for k in tag.keywords}
                tags.append({"Key": fields["key"], "Value": fields["value"]})
            out["tags"] = tags
        elif isinstance(kw.value, ast.Name):
            out[str(kw.arg)] = kw.value.id
        else:
            out[str(kw.arg)] = ast.literal_eval(kw.value)
    return out


def test_docs_sdk_v3_snippet_request_shape_is_a_valid_watched_create_training_job() -> None:
    args = _v3_arguments()
    assert set(args) == {"training_image", "role", "base_job_name", "compute", "tags"}
    # What ModelTrainer.train() sends for these arguments (its defaults: File mode, 30 GB, one day).
    request = {
        "TrainingJobName": f"{args['base_job_name']}-2026-11-23-10-00-00-000",
        "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        "RoleArn": ROLE,
        "OutputDataConfig": {"S3OutputPath": "s3://sagemaker-us-west-2-123456789012/llm-sft"},
        "ResourceConfig": {"InstanceType": args["compute"]["instance_type"],
                           "InstanceCount": args["compute"]["instance_count"], "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        "Tags": args["tags"],
    }
    model = botocore.session.get_session().get_service_model("sagemaker")
    report = ParamValidator().validate(request, model.operation_model("CreateTrainingJob").input_shape)
    assert not report.has_errors(), report.generate_report()
    tags = {t["Key"]: t["Value"] for t in args["tags"]}
    assert is_watched(request["TrainingJobName"], tags, prefixes=(), tag_key="smx-debug:managed")
    assert tags["smx-debug:on:LossNotDecreasing"] == "stop notify"


@pytest.mark.parametrize("name", ["sdk-v2", "boto3", "sdk-v3"])
def test_docs_snippets_parse(name: str) -> None:
    ast.parse(snippet(name))
