"""Shared fixtures: the embedded local AWS and the test data folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from smx_debug.local import LocalAws, reset_handlers

DATA = Path(__file__).parent / "data"

# No test may reach a real AWS account: fake credentials and a fixed region for every boto3 client.
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-west-2",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
    }
)
os.environ.pop("AWS_PROFILE", None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "iam_denials: the test expects the local IAM to deny calls (it asserts them)")


@pytest.fixture(autouse=True)
def local_iam(request: pytest.FixtureRequest) -> Iterator[None]:
    """IAM is enforced on every call a deployed function makes (smx_debug.local.iam); a denial fails the
    test unless it is marked ``iam_denials`` (and asserts the denials itself)."""
    from smx_debug.local import iam

    iam.reset_records()
    yield
    made = iam.reset_records()
    if request.node.get_closest_marker("iam_denials") is None:
        denied = [f"{r.caller}: {r.message}" for r in iam.denials(made)]
        assert denied == [], "the local IAM denied calls by deployed functions"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def _local_aws_server() -> Iterator[LocalAws]:
    from smx_debug.local import execution_roles

    execution_roles.install()  # CreateTrainingJob checks its role in every test, whatever installed what before
    with LocalAws() as aws:
        yield aws


@pytest.fixture
def local_aws(_local_aws_server: LocalAws) -> Iterator[LocalAws]:
    """The moto server, shared by the session but emptied before each test."""
    _local_aws_server.reset()
    reset_handlers()  # warm handlers and uncollected SNS deliveries belong to the previous test's resources
    yield _local_aws_server


@pytest.fixture(scope="session")
def boto3_only_python() -> Path:
    """A Python interpreter whose environment has boto3 (at our pinned version) and nothing else.

    It stands in for the Lambda runtime, which provides the standard library and boto3 only. Built once
    under .venv/ and reused; it never sees the project's own site-packages.
    """
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env_dir = root / ".venv" / "boto3-only"
    python = env_dir / "bin" / "python"
    marker = env_dir / ".ready"
    if not marker.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(env_dir)], check=True)
        pins = [
            line.strip()
            for line in (root / "constraints.txt").read_text().splitlines()
            if line.split("==")[0].lower() in {"boto3", "botocore", "s3transfer", "jmespath", "urllib3",
                                               "python-dateutil", "six"}
        ]
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pins], check=True
        )
        marker.touch()
    return python
