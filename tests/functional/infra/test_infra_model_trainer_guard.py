"""A job created as SDK v3's ModelTrainer creates it (no DebugHookConfig) is judged on its tensors and stopped once.

Issue 31 items 2 and 4. SDK v3 cannot be installed beside the project, so the job is created with the
CreateTrainingJob request ``plan.to_model_trainer_kwargs()`` makes (the side environment checks that request:
tests/functional/plan/test_sdk_v3.py): no Debugger field, the Environment (``hook_environment``) and Tags
(``tags_list``) it renders. The entry point (examples/train_cnn.py) builds its hook from that Environment and
writes its trial straight to the stack's bucket as the job's execution role, authorized by the local IAM against
the deployed bucket policy (the role has no identity policy: the bucket's grant to SageMaker execution roles is
all it has). The deployed evaluator runs on its schedule, finds ExplodingTensor, and stops the job once.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from helpers_infra_deploy import EXPLODE_AT, exploding_tensor_plan, train_exploding_cnn

from smx_debug import local
from smx_debug.config.sdk_v3 import hook_environment
from smx_debug.contracts import HOOK_OUTPUT_ENV
from smx_debug.local import DeployedStack, LocalAws, iam
from smx_debug.tensors import create_trial

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


def test_model_trainer_job_without_debug_hook_config_is_stopped_once_on_its_tensors(
        local_aws: LocalAws, deployed: DeployedStack, tmp_path: Path) -> None:
    bucket, job = deployed.output("OutputBucketName"), "guarded-v3-cnn-explodes"
    plan = exploding_tensor_plan(local_aws, bucket)
    # what ModelTrainer(**plan.to_model_trainer_kwargs(...)) sends
    local.create_training_job(local_aws, job, OutputDataConfig={"S3OutputPath": f"s3://{bucket}/model"},
                              Environment={**hook_environment(plan), "EPOCHS": "3"}, Tags=plan.tags_list())
    described = local_aws.client("sagemaker").describe_training_job(TrainingJobName=job)
    assert "DebugHookConfig" not in described and described["Environment"][HOOK_OUTPUT_ENV] == plan.s3_output_path

    iam.ledger(local_aws).reset()
    done, triggers = train_exploding_cnn(local_aws, job, tmp_path / "container")

    assert done.uploaded == 0  # SageMaker uploads nothing for such a job: the hook wrote the trial itself
    assert done.debug_output == f"s3://{bucket}/debugger/{job}/debug-output/"
    assert [t["rule"] for t in triggers] == ["ExplodingTensor"] and triggers[0]["step"] >= EXPLODE_AT
    stopped_at = int(re.search(r"stopped by SIGTERM at step (\d+)", done.stdout).group(1))  # type: ignore[union-attr]
    assert done.status == "Stopped" and triggers[0]["step"] <= stopped_at < 600
    assert local.stop_calls(local_aws, job) == 1
    trial = create_trial(done.debug_output, s3_client=local_aws.client("s3"))
    assert trial.has_training_ended()  # the hook marked the end: nobody else does for such a job

    writes = [r for r in iam.ledger(local_aws).records() if r.caller == job]
    assert writes and {r.action for r in writes} == {"s3:PutObject"}
    assert iam.ledger(local_aws).denials(writes) == [] and {(r.statement or {}).get("Sid") for r in writes} == {
        "SageMakerExecutionRolesWrite"}  # the bucket policy's existing grant, nothing added
    assert all(r.resource.startswith(f"arn:aws:s3:::{bucket}/debugger/{job}/debug-output/") for r in writes)
    reads = [r for r in iam.ledger(local_aws).records() if r.caller == "evaluator" and r.action in ("s3:ListBucket", "s3:GetObject")]
    assert iam.ledger(local_aws).denials(reads) == [] and iam.ledger(local_aws).denials() == []
