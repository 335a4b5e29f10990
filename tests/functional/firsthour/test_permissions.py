"""The notebook user's policy is generated from the calls the code makes: run the notebook path on the local AWS
as a user whose only permissions are that policy (smx_debug.local.iam.principals.as_principal: every call authorized before
it runs, a denial fails the test), with every AWS call of the user's own clients recorded, and compare with
smx_debug.permissions.

SageMaker's part (JobPlayback writing profiler output, rule statuses) uses its own clients and is not recorded.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import boto3
import pytest

from smx_debug import DebugPlan, SmxDebugWarning, data, local
from smx_debug.data.jobs import load_job
from smx_debug.local import LOCAL_ACCOUNT_ID, LocalAws, execution_role, iam
from smx_debug.local.sagemaker.playback import JobPlayback
from smx_debug.permissions import NOTEBOOK_CALLS, iam_actions, notebook_policy

ROOT = Path(__file__).resolve().parents[3]
ROLE = f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:role/SageMakerExecution-notebook"


def _record(session: Any, calls: set[tuple[str, str]]) -> None:
    def before_call(model: Any, **_: Any) -> None:
        calls.add((model.service_model.signing_name, model.name))

    session.events.register("before-call", before_call)


def test_permissions_notebook_calls_are_exactly_what_the_code_calls_and_the_policy_allows_them(
    local_aws: LocalAws
) -> None:
    import sagemaker
    from sagemaker.estimator import Estimator

    local_aws.client("s3").create_bucket(Bucket="guard-out",
                                         CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    local.install(local_aws)  # jobs keep their ProfilerConfig, as on SageMaker
    calls: set[tuple[str, str]] = set()
    role = execution_role(local_aws, ROLE.rsplit("/", 1)[1])  # the execution role the user passes
    user = iam.as_principal(local_aws, notebook_policy(bucket="guard-out", role_arn=role, job_prefix="team-a-"),
                            name="notebook-user", session_name="notebook")
    with user.environment():
        _record(boto3.DEFAULT_SESSION, calls)
        plan = DebugPlan.from_file(ROOT / "examples" / "plans" / "cpu_bottleneck_guard.yaml")
        plan = plan.with_output_path("s3://guard-out/debugger")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SmxDebugWarning)
            estimator = Estimator(**plan.to_estimator_kwargs(
                image_uri="763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3.0-gpu-py311",
                role=role, instance_type="ml.p3.2xlarge", instance_count=1, output_path="s3://guard-out/model",
                base_job_name="team-a-resnet", sagemaker_session=sagemaker.Session(), tags={"team": "a"}))
        estimator.fit(wait=False)
        job = estimator.latest_training_job.name
        JobPlayback(local_aws, job, plan, scenario="cpu_bottleneck", minutes=8, onset_min=2, speed=1e6).run()
        data.wait_for_rules(job, poll_s=1, progress=False)
        data.rule_summary_many(job[:10])
        data.system_metrics(job, progress=False)
        data.framework_metrics(job, progress=False)
        load_job(job, source="debugger")
        load_job(job, source="cloudwatch")
    assert calls - {("sts", "GetCallerIdentity")} == NOTEBOOK_CALLS  # STS: allowed to everyone
    checked = {r.operation.split(":")[1] for r in user.records()}  # GetCallerIdentity needs nothing to check
    assert checked == {operation for _, operation in NOTEBOOK_CALLS}  # each authorized, none denied (conftest)


def test_permissions_policy_scopes_every_action_the_calls_need() -> None:
    policy = notebook_policy(bucket="guard-out", role_arn=ROLE, job_prefix="team-a-")
    granted = sorted({a for st in policy["Statement"] for a in st["Action"]})
    assert granted == iam_actions(NOTEBOOK_CALLS) == [
        "cloudwatch:GetMetricData", "iam:PassRole", "s3:GetObject", "s3:ListBucket",
        "sagemaker:AddTags", "sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob",
        "sagemaker:ListTrainingJobs",
    ]
    assert all(st["Resource"] != "*" for st in policy["Statement"]
               if st["Sid"] not in {"ListTrainingJobs", "Metrics"})


def test_permissions_doc_shows_the_generated_policy() -> None:
    text = (ROOT / "docs" / "permissions.md").read_text()
    (block,) = re.findall(r"<!-- generated: python -m smx_debug.permissions (.*?) -->\n```json\n(.*?)```", text, re.S)
    args, body = block
    opts = dict(re.findall(r"--([\w-]+) (\S+)", args))
    expected = notebook_policy(bucket=opts["bucket"], role_arn=opts["role-arn"], job_prefix=opts.get("job-prefix", ""))
    assert json.loads(body) == expected


@pytest.mark.parametrize("call", sorted(NOTEBOOK_CALLS | {("sts", "GetCallerIdentity")}))
def test_permissions_every_call_is_a_real_botocore_operation_the_local_iam_authorizes(call: tuple[str, str]) -> None:
    """The notebook user's calls (the SDK's STS lookup too) are in the local IAM's table, keyed as botocore keys them."""
    signing = {"monitoring": "cloudwatch"}
    client = boto3.client(signing.get(call[0], call[0]), region_name="us-west-2")  # type: ignore[call-overload]
    assert call[1] in client.meta.service_model.operation_names
    assert (client.meta.service_model.service_id.hyphenize(), call[1]) in iam.CALLS
