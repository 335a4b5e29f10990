"""Shared fixtures: the embedded local AWS and the test data folder."""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from smx_debug.local import LocalAws, iam
from smx_debug.local.awslambda.invoke import reset_handlers
from smx_debug.local.sagemaker import execution_roles

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


@pytest.fixture(scope="session", autouse=True)
def _local_aws_instances() -> Iterator[weakref.WeakSet[LocalAws]]:
    """Every LocalAws started in the session (each keeps its own IAM ledger)."""
    live: weakref.WeakSet[LocalAws] = weakref.WeakSet()
    start = LocalAws.start

    def tracked(self: LocalAws) -> LocalAws:
        live.add(self)
        return start(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LocalAws, "start", tracked)
        yield live


@pytest.fixture(autouse=True)
def local_iam(request: pytest.FixtureRequest, _local_aws_instances: weakref.WeakSet[LocalAws]) -> Iterator[None]:
    """IAM is enforced on every call a deployed function makes (smx_debug.local.iam); a denial on any LocalAws
    fails the test unless it is marked ``iam_denials`` (and asserts the denials itself)."""
    for aws in list(_local_aws_instances):
        iam.ledger(aws).reset()
    yield
    made = [r for aws in list(_local_aws_instances) for r in iam.ledger(aws).reset()]
    if request.node.get_closest_marker("iam_denials") is None:
        denied = [f"{r.caller}: {r.message}" for r in made if not r.allowed]
        assert denied == [], "the local IAM denied calls by deployed functions"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def _local_aws_server() -> Iterator[LocalAws]:

    execution_roles.install()  # CreateTrainingJob checks its role in every test, whatever installed what before
    with LocalAws() as aws:
        yield aws


@pytest.fixture
def local_aws(_local_aws_server: LocalAws) -> Iterator[LocalAws]:
    """The moto server, shared by the session but emptied before each test."""
    _local_aws_server.reset()
    reset_handlers(_local_aws_server)  # warm handlers and uncollected SNS deliveries belong to the previous test's resources
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
