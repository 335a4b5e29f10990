"""Fakes of the few AWS calls the handlers make, for pure unit tests (no network, no moto)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from smx_debug.actions import MemoryLedger, Runtime, Settings


class FakeSageMaker:
    def __init__(
        self,
        status: str = "InProgress",
        tags: list[dict[str, str]] | None = None,
        rules: list[dict[str, Any]] | None = None,
    ) -> None:
        self.status = status
        self.tags = tags or []
        self.rules = rules or []
        self.stopped: list[str] = []

    def describe_training_job(self, TrainingJobName: str) -> dict[str, Any]:
        return {
            "TrainingJobName": TrainingJobName,
            "TrainingJobStatus": self.status,
            "DebugRuleEvaluationStatuses": self.rules,
        }

    def stop_training_job(self, TrainingJobName: str) -> dict[str, Any]:
        if self.status != "InProgress":
            raise ClientError(
                {"Error": {"Code": "ValidationException", "Message": "not InProgress"}}, "StopTrainingJob"
            )
        self.stopped.append(TrainingJobName)
        self.status = "Stopping"
        return {}

    def get_paginator(self, name: str) -> Any:
        assert name == "list_tags"
        tags = self.tags

        class _Pages:
            def paginate(self, ResourceArn: str) -> list[dict[str, Any]]:
                return [{"Tags": tags}]

        return _Pages()


class FakeSns:
    def __init__(self) -> None:
        self.published: list[dict[str, str]] = []

    def publish(self, **kwargs: str) -> dict[str, str]:
        self.published.append(kwargs)
        return {"MessageId": f"m-{len(self.published)}"}


class FakeCloudWatch:
    def __init__(self) -> None:
        self.data: list[dict[str, Any]] = []

    def put_metric_data(self, Namespace: str, MetricData: list[dict[str, Any]]) -> dict[str, Any]:
        self.data.append({"Namespace": Namespace, "MetricData": MetricData})
        return {}


def fake_runtime(settings: Settings | None = None, **clients: Any) -> Runtime:
    made = {"sagemaker": FakeSageMaker(), "sns": FakeSns(), "cloudwatch": FakeCloudWatch(), **clients}
    return Runtime(
        settings=settings
        or Settings(
            region="us-west-2",
            topic_arn="arn:aws:sns:us-west-2:123456789012:t",
            watch_prefixes=("smdebugger-",),
        ),
        clients=made.__getitem__,
        ledger=MemoryLedger(),
    )
