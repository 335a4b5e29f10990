"""Two LocalAws in one process keep what they record apart, and using the local AWS leaves the process's
environment as it was (moto's backends are per process; what our behaviours record is per LocalAws)."""

from __future__ import annotations

import os
from urllib.parse import urlparse

import pytest
from botocore.exceptions import ClientError
from moto.stepfunctions.parser.asl.utils import boto_client

from smx_debug.local import LocalAws, iam
from smx_debug.local.stepfunctions import tasks

POLICY = {"Version": "2012-10-17",
          "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::elsewhere/*"}]}


@pytest.mark.iam_denials
def test_local_aws_two_instances_keep_their_own_iam_records(local_aws: LocalAws) -> None:
    with LocalAws() as other:
        user = iam.as_principal(local_aws, POLICY, name="isolated-user")
        with pytest.raises(ClientError):
            user.client("sagemaker").list_training_jobs()
        assert [(r.caller, r.action) for r in iam.ledger(local_aws).denials()] == [
            ("isolated-user", "sagemaker:ListTrainingJobs")]
        assert iam.ledger(other).records() == []
        assert iam.ledger(other) is not iam.ledger(local_aws)


@pytest.mark.parametrize("before", [None, "5000"])
def test_stepfunctions_install_leaves_the_process_moto_port_as_it_was(
    local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch, before: str | None
) -> None:
    if before is None:
        monkeypatch.delenv("MOTO_PORT", raising=False)
    else:
        monkeypatch.setenv("MOTO_PORT", before)
    tasks.install(local_aws)
    assert os.environ.get("MOTO_PORT") == before
    # moto's state machine interpreter still calls this server, whose port is not moto's default
    assert boto_client.moto_server_port() == str(urlparse(local_aws.endpoint_url).port)
