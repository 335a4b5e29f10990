"""A deliberately tiny intrinsic-function resolver, independent of deploy.py's, to state expectations; a job; a
training run that explodes under the deployed evaluator."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from smx_debug import local
from smx_debug.config import DebugPlan
from smx_debug.local import LocalAws
from smx_debug.local.sagemaker.training_run import TrainingRun, start_training

ROOT = Path(__file__).resolve().parents[3]
EXPLODE_AT = 60  # the training step at which examples/train_cnn.py's learning rate explodes

PSEUDO = {"AWS::Partition": "aws", "AWS::AccountId": "123456789012", "AWS::Region": "us-west-2"}


def resolve(value: Any, refs: Mapping[str, str], atts: Mapping[tuple[str, str], str]) -> Any:
    """Resolve Ref / Fn::GetAtt / Fn::Join with the given values (anything else is left as is)."""
    if isinstance(value, list):
        return [resolve(v, refs, atts) for v in value]
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return {**PSEUDO, **refs}[value["Ref"]]
        if set(value) == {"Fn::GetAtt"}:
            return atts[tuple(value["Fn::GetAtt"])]  # type: ignore[index]
        if set(value) == {"Fn::Join"}:
            sep, parts = value["Fn::Join"]
            return sep.join(resolve(p, refs, atts) for p in parts)
        return {k: resolve(v, refs, atts) for k, v in value.items()}
    return value


def create_job(aws: LocalAws, bucket: str, name: str, tags: Mapping[str, str]) -> None:
    """An InProgress training job writing to the stack's bucket (hyperparameters the retraining strategies change)."""
    local.create_training_job(aws, name, tags, OutputDataConfig={"S3OutputPath": f"s3://{bucket}/output"},
                              HyperParameters={"warmup_learning_rate": "0.1", "learning_rate": "0.1", "epochs": "30"})
    local.set_training_job_status(aws, name, "InProgress")


def exploding_tensor_plan(aws: LocalAws, bucket: str) -> DebugPlan:
    """A plan guarded by the deployed evaluator alone: ExplodingTensor on the gradients and losses saved every 5
    steps stops the job and notifies. Its watch spec is stored in the stack's ``bucket``."""
    plan = DebugPlan(region=aws.region, s3_output_path=f"s3://{bucket}/debugger", guard="evaluator",
                     hook={"save_interval": 5, "collections": [{"name": "gradients"}, {"name": "losses"}]},
                     rules=[{"name": "ExplodingTensor", "actions": ["stop_job", "notify"]}])
    plan.watch_spec().store(bucket, s3_client=aws.client("s3"))
    return plan


def train_exploding_cnn(aws: LocalAws, job: str, workdir: Path,
                        **options: Any) -> tuple[TrainingRun, list[dict[str, Any]]]:
    """Run examples/train_cnn.py as ``job``'s training (600 steps, its learning rate exploding at ``EXPLODE_AT``),
    delivering the stack's schedule every 0.3 s while it runs: the finished training and the deployed evaluator's
    triggers for ``job`` (each run of the evaluator must succeed). ``options`` go to ``start_training``."""
    running = start_training(aws, job, ROOT / "examples" / "train_cnn.py", workdir=workdir, timeout=120,
                             args=["--steps", "600", "--explode-at", str(EXPLODE_AT), "--step-seconds", "0.02"],
                             **options)
    triggers: list[dict[str, Any]] = []
    while running.returncode is None:
        for run in local.deliver_schedule(aws):
            if run.handler == "evaluator":
                assert run.error is None, run.error
                triggers += [t for t in run.result["triggers"] if t["job"] == job]
        time.sleep(0.3)
    return running.wait(), triggers
