"""SageMaker answers for botocore's Stubber, which checks them against the service model: the fields an answer
must have, and the ones a test is about given by the test."""

from __future__ import annotations

from typing import Any


def describe_training_job(job: str, **fields: Any) -> dict[str, Any]:
    """A DescribeTrainingJob answer for ``job``: its required fields (one ml.p3.2xlarge in File mode, Completed,
    created 2026-01-01), with ``fields`` added or in their place."""
    return {
        "TrainingJobName": job,
        "TrainingJobArn": f"arn:aws:sagemaker:us-west-2:123456789012:training-job/{job}",
        "TrainingJobStatus": "Completed",
        "SecondaryStatus": "Completed",
        "ModelArtifacts": {"S3ModelArtifacts": ""},
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
        "ResourceConfig": {"InstanceType": "ml.p3.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "CreationTime": "2026-01-01T00:00:00Z",
        **fields,
    }
