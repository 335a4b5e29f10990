"""Helpers for the local AWS's own tests: cached clients and a training job as CreateTrainingJob makes it."""

from __future__ import annotations

from typing import Any

from smx_debug.local import LocalAws
from smx_debug.local.clients import client

__all__ = ["client", "create_job"]


def create_job(aws: LocalAws, name: str, tags: dict[str, str] | None = None, **fields: Any) -> None:
    """CreateTrainingJob with the fields SageMaker requires (moto creates it Completed)."""
    client(aws, "sagemaker").create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1",
                                "TrainingInputMode": "File"},
        RoleArn="arn:aws:iam::123456789012:role/smx-training",
        OutputDataConfig={"S3OutputPath": "s3://smx-out/output"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
        Tags=[{"Key": k, "Value": v} for k, v in (tags or {}).items()],
        **fields,
    )
