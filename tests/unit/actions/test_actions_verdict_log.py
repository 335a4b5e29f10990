"""The action core's verdict log: one JSON-lines object per call in the fleet inbox, never in an action's way."""

from __future__ import annotations

import json
from typing import Any

import pytest
from actions_fakes import JOB, TOPIC, FakeSageMaker, FakeSns, fake_runtime, settings
from botocore.exceptions import ClientError

from smx_debug.actions import handle_notify, handle_stop_training
from smx_debug.contracts import FLEET_INBOX_PREFIX, FLEET_TABLES

BUCKET = "guard-bucket"


class FakeS3:
    """PutObject into a dict; ``refuse`` answers AccessDenied."""

    def __init__(self, refuse: bool = False) -> None:
        self.objects: dict[str, bytes] = {}
        self.refuse = refuse

    def put_object(self, Bucket: str, Key: str, Body: bytes, **_: Any) -> dict[str, Any]:
        if self.refuse:
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "denied"}}, "PutObject")
        assert Bucket == BUCKET
        self.objects[Key] = Body
        return {}


def _event() -> dict[str, Any]:
    from actions_fakes import EVENTS

    return json.loads((EVENTS / "sagemaker_state_change_issues_found.json").read_text())


def _rows(s3: FakeS3) -> list[dict[str, Any]]:
    return [json.loads(line) for body in s3.objects.values() for line in body.decode().splitlines()]


def test_verdict_log_stop_handler_writes_trigger_and_stop_rows() -> None:
    s3 = FakeS3()
    runtime = fake_runtime(settings(fleet_bucket=BUCKET, default_actions=()), s3=s3)
    result = handle_stop_training(_event(), runtime)
    assert result["stop"]["outcome"] == "stopped"
    (key,) = s3.objects
    assert key.startswith(f"{FLEET_INBOX_PREFIX}verdicts/") and f"/{JOB}/" in key and key.endswith(".jsonl")
    rows = _rows(s3)
    assert all(list(r) == sorted(FLEET_TABLES["verdicts"].column_names) for r in rows)
    assert [(r["event"], r["action"], r["verdict"], r["rule"]) for r in rows] == [
        ("trigger", None, "IssuesFound", "VanishingGradient"), ("action", "stop", "stopped", "VanishingGradient")]
    assert rows[0]["source"] == "SageMaker Debugger" and rows[0]["time"].startswith("2019-")  # LastModifiedTime
    assert result["verdict_log"] == {"key": key, "rows": 2}


def test_verdict_log_redelivered_event_logs_no_second_action() -> None:
    s3 = FakeS3()
    runtime = fake_runtime(settings(fleet_bucket=BUCKET, default_actions=()), s3=s3)
    handle_stop_training(_event(), runtime)
    first = dict(s3.objects)
    runtime.clients("sagemaker").status = "InProgress"  # as if the first stop had not been seen yet
    handle_stop_training(_event(), runtime)  # the ledger finds the stop done: not an action taken
    later = [k for k in s3.objects if k not in first]
    rows = [json.loads(line) for k in later for line in s3.objects[k].decode().splitlines()]
    assert [(r["event"], r["action"]) for r in rows] == [("trigger", None)]
    # the trigger row is the same row as before: the table's key keeps it once
    assert rows[0] == next(json.loads(x) for x in next(iter(first.values())).decode().splitlines())


def test_verdict_log_put_denied_never_stops_the_action() -> None:
    sagemaker = FakeSageMaker()
    runtime = fake_runtime(settings(fleet_bucket=BUCKET, default_actions=()), sagemaker=sagemaker, s3=FakeS3(True))
    result = handle_stop_training(_event(), runtime)
    assert sagemaker.stopped == [JOB]
    assert result["verdict_log"]["failed"].startswith("ClientError") and result["verdict_log"]["rows"] == 2


def test_verdict_log_failed_action_is_logged_before_the_failure_is_raised() -> None:
    s3 = FakeS3()
    runtime = fake_runtime(settings(fleet_bucket=BUCKET, default_actions=()), sns=FakeSns(refuse=(TOPIC,)), s3=s3)
    with pytest.raises(ClientError):
        handle_notify(_event(), runtime)
    rows = _rows(s3)
    assert [(r["event"], r["action"], r["verdict"]) for r in rows] == [
        ("trigger", None, "IssuesFound"), ("action", "notify", "failed")]
    assert "AuthorizationError" in rows[1]["detail"]


def test_verdict_log_without_fleet_bucket_puts_nothing() -> None:
    s3 = FakeS3()
    result = handle_stop_training(_event(), fake_runtime(settings(default_actions=()), s3=s3))
    assert s3.objects == {} and result["verdict_log"] == {"skipped": "no fleet dataset (SMX_FLEET_BUCKET unset)"}
