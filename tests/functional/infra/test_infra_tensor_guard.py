"""A job guarded by the deployed evaluator alone (no Debugger rules) whose training explodes is stopped once.

A real small PyTorch run (examples/train_cnn.py with smx_debug.hook) in the local container: its learning rate
goes x 10^7 at a known step; its tensors reach the local S3 while it trains. The deployed evaluator function runs
on its schedule with its role's calls authorized by the local IAM, reads the new steps, finds ExplodingTensor, and
the action core stops the job: StopTrainingJob sends the training SIGTERM, which ends it, once.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from helpers_infra_deploy import EXPLODE_AT, exploding_tensor_plan, train_exploding_cnn

from smx_debug import local
from smx_debug.contracts import stop_key
from smx_debug.local import DeployedStack, LocalAws, iam

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


def test_evaluator_alone_stops_an_exploding_pytorch_job_once(local_aws: LocalAws, deployed: DeployedStack,
                                                              tmp_path: Path) -> None:
    bucket, job = deployed.output("OutputBucketName"), "guarded-cnn-explodes"
    plan = exploding_tensor_plan(local_aws, bucket)
    request = plan.to_request_dict(job_name=job)
    assert "DebugRuleConfigurations" not in request and "DebugHookConfig" in request
    local.create_training_job(local_aws, job, OutputDataConfig={"S3OutputPath": f"s3://{bucket}/model"}, **request)
    iam.ledger(local_aws).reset()
    done, triggers = train_exploding_cnn(local_aws, job, tmp_path / "container", upload_interval=0.3)

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
