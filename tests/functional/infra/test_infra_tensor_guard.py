"""A job guarded by the deployed evaluator alone (no Debugger rules) whose training explodes is stopped once.

A real small PyTorch run (examples/train_cnn.py with smx_debug.hook) in the local container: its learning rate
goes x 10^7 at a known step; its tensors reach the local S3 while it trains. The deployed evaluator function runs
on its schedule with its role's calls authorized by the local IAM, reads the new steps, finds ExplodingTensor, and
the action core stops the job: StopTrainingJob sends the training SIGTERM, which ends it, once.
"""

from __future__ import annotations

import importlib.util
import re
import time
from pathlib import Path

import pytest

from smx_debug import local
from smx_debug.config import DebugPlan
from smx_debug.contracts import stop_key
from smx_debug.local import DeployedStack, LocalAws, deploy_stack, iam

ROOT = Path(__file__).resolve().parents[3]
STACK = "SmxDebugGuard"
EXPLODE_AT = 60

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


@pytest.fixture
def deployed(local_aws: LocalAws, synthesized: Path) -> DeployedStack:
    stack = deploy_stack(local_aws, synthesized / f"{STACK}.template.json", stack_name=STACK)
    local.install(local_aws)
    return stack


def test_evaluator_alone_stops_an_exploding_pytorch_job_once(local_aws: LocalAws, deployed: DeployedStack,
                                                              tmp_path: Path) -> None:
    from smx_debug.local.sagemaker.training_run import start_training

    bucket, job = deployed.output("OutputBucketName"), "guarded-cnn-explodes"
    plan = DebugPlan(region=local_aws.region, s3_output_path=f"s3://{bucket}/debugger", guard="evaluator",
                     hook={"save_interval": 5, "collections": [{"name": "gradients"}, {"name": "losses"}]},
                     rules=[{"name": "ExplodingTensor", "actions": ["stop_job", "notify"]}])
    plan.watch_spec().store(bucket, s3_client=local_aws.client("s3"))
    request = plan.to_request_dict(job_name=job)
    assert "DebugRuleConfigurations" not in request and "DebugHookConfig" in request
    local_aws.client("sagemaker").create_training_job(
        TrainingJobName=job, RoleArn=local.execution_role(local_aws),
        AlgorithmSpecification={"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1",
                                "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": f"s3://{bucket}/model"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
        StoppingCondition={"MaxRuntimeInSeconds": 3600}, **request)
    iam.ledger(local_aws).reset()
    running = start_training(local_aws, job, ROOT / "examples" / "train_cnn.py", workdir=tmp_path / "container",
                             upload_interval=0.3, timeout=120,
                             args=["--steps", "600", "--explode-at", str(EXPLODE_AT), "--step-seconds", "0.02"])
    triggers = []
    while running.returncode is None:
        for run in local.deliver_schedule(local_aws):
            if run.handler == "evaluator":
                assert run.error is None, run.error
                triggers += [t for t in run.result["triggers"] if t["job"] == job]
        time.sleep(0.3)
    done = running.wait()

    assert [t["rule"] for t in triggers] == ["ExplodingTensor"] and triggers[0]["step"] >= EXPLODE_AT
    stopped_at = int(re.search(r"stopped by SIGTERM at step (\d+)", done.stdout).group(1))  # type: ignore[union-attr]
    assert done.status == "Stopped" and triggers[0]["step"] <= stopped_at < 600
    assert local.stop_calls(local_aws, job) == 1
    ledger = local_aws.client("dynamodb").get_item(TableName=deployed.output("LedgerTableName"),
                                                   Key={"pk": {"S": stop_key(job)}})["Item"]
    assert ledger["state"]["S"] == "done"
    reads = [r for r in iam.ledger(local_aws).records() if r.caller == "evaluator" and r.action in ("s3:ListBucket", "s3:GetObject")]
    assert iam.ledger(local_aws).denials(reads) == [] and iam.ledger(local_aws).denials() == []
    assert any(f"/debugger/{job}/debug-output/" in r.resource for r in reads if r.action == "s3:GetObject")
