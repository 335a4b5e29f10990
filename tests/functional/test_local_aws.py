from __future__ import annotations

from smx_debug.local import LocalAws


def test_local_aws_reset_forgets_resources(local_aws: LocalAws) -> None:
    s3 = local_aws.client("s3")
    s3.create_bucket(Bucket="smx-reset-check", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["smx-reset-check"]
    local_aws.reset()
    assert s3.list_buckets()["Buckets"] == []


def test_local_aws_listens_on_loopback_only(local_aws: LocalAws) -> None:
    assert local_aws.endpoint_url.startswith("http://127.0.0.1:")


def test_local_aws_stop_leaves_no_state_for_the_next_server() -> None:
    with LocalAws() as first:
        first.client("sqs").create_queue(QueueName="left-behind")
    with LocalAws() as second:
        assert second.client("sqs").list_queues().get("QueueUrls", []) == []


def test_local_aws_environment_points_default_clients_here_then_restores(local_aws: LocalAws,
                                                                          monkeypatch) -> None:
    import os

    import boto3

    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with local_aws.environment():
        boto3.client("sqs").create_queue(QueueName="via-default-client")
    assert "AWS_ENDPOINT_URL" not in os.environ
    urls = local_aws.client("sqs").list_queues()["QueueUrls"]
    assert [u.rsplit("/", 1)[-1] for u in urls] == ["via-default-client"]
