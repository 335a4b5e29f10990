"""Fixtures for the evaluator's functional tests: the local AWS is never empty (issue 20 item 2)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from watch_support import BUCKET, LEDGER, T0, make_table

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the `infra` package (the evaluator's asset builder)

from smx_debug.local import LocalAws  # noqa: E402
from smx_debug.local.clients import client as cached_client  # noqa: E402
from smx_debug.local.sagemaker.other_team import OtherTeam, start_other_team  # noqa: E402

_JOB_CALLS = frozenset({"ListTags", "DescribeTrainingJob", "StopTrainingJob", "AddTags", "DeleteTags"})


@pytest.fixture
def aws(local_aws: LocalAws) -> Iterator[LocalAws]:
    """The local AWS with the cursor table, the stack's bucket and another team's jobs running the whole time
    (unwatched, bad metrics, damaged profiler output). After the test, nothing may have touched them: no call
    of the shared SageMaker client names one, no stop, message, metric or ledger record."""
    make_table(local_aws)
    team = start_other_team(local_aws, bucket=BUCKET, start=T0, minutes=40)
    calls: list[tuple[str, str]] = []

    def record(model: Any, params: Any, **_: Any) -> None:
        if model.name in _JOB_CALLS:
            body = json.loads(params.get("body") or b"{}")
            target = str(body.get("TrainingJobName") or body.get("ResourceArn") or "")
            calls.extend((model.name, job) for job in team.jobs if target.endswith(job))

    sagemaker = cached_client(local_aws, "sagemaker")
    sagemaker.meta.events.register("before-call.sagemaker.*", record, unique_id="other-team-calls")
    try:
        yield local_aws
    finally:
        sagemaker.meta.events.unregister("before-call.sagemaker.*", unique_id="other-team-calls")
    assert calls == [], f"the evaluator called SageMaker about another team's jobs: {calls}"
    assert _touched(local_aws, team) == []


def _touched(aws: LocalAws, team: OtherTeam) -> list[str]:
    tables = cached_client(aws, "dynamodb").list_tables()["TableNames"]
    return team.touched(aws, ledger_table=LEDGER if LEDGER in tables else None)
