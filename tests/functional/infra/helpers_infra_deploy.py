"""A deliberately tiny intrinsic-function resolver, independent of deploy.py's, to state expectations; a job."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from smx_debug import local
from smx_debug.local import LocalAws

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
    aws.client("sagemaker").create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1",
                                "TrainingInputMode": "File"},
        HyperParameters={"warmup_learning_rate": "0.1", "learning_rate": "0.1", "epochs": "30"},
        RoleArn=local.execution_role(aws),
        OutputDataConfig={"S3OutputPath": f"s3://{bucket}/output"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
        Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
    )
    local.set_training_job_status(aws, name, "InProgress")
