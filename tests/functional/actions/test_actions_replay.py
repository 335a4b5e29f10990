"""The replay benchmark, smaller: shuffled, duplicated and forged events over 12 jobs delivered concurrently to
the three state-change handlers, 10% of the invocations crashing right after a claim and 10% of the AWS calls
throttled; failed invocations redelivered after the lease. Each eligible job is stopped exactly once, every
other job never, and each asked-for message goes out once (bench/replay_bench.py runs 500 events, 30 jobs).
"""

from __future__ import annotations

import logging
from types import ModuleType

import pytest
from bench_support import bench_module

from smx_debug.local import LocalAws


def _bench() -> ModuleType:
    return bench_module("replay_bench")


def test_job_cases_cover_every_opt_in_variant_rule_kind_and_status() -> None:
    cases = _bench().job_cases(30)
    opt_ins = {c.tags.get("smx-debug:managed") for c in cases}
    assert opt_ins == {None, "true", "True", "TRUE", "tRuE", " true", "false"}
    assert {c.kind for c in cases} == {"debugger", "profiler"}
    assert {c.rule_status for c in cases} | {c.other_status for c in cases} >= {
        "InProgress", "NoIssuesFound", "IssuesFound", "Error", "Stopping", "Stopped"
    }
    assert [c.watched for c in cases if c.tags.get("smx-debug:managed") == " true"] == [False] * 4
    assert sum(c.eligible() for c in cases) >= 8
    assert any(c.finished and c.rule_status == "IssuesFound" for c in cases)


def test_concurrent_replay_with_crashes_and_throttling_stops_each_eligible_job_exactly_once(
    local_aws: LocalAws, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.CRITICAL, logger="smx_debug.actions")
    bench = _bench()
    report = bench.replay(local_aws, n_jobs=12, n_events=120, threads=4, seed=7)
    bench.print_report(report)
    assert report.eligible >= 4
    assert (report.stopped_once, report.wrong_stops) == (report.eligible, {})
    assert (report.messages_ok, report.wrong_messages) == (report.messages_expected, {})
    assert report.crashes > 0 and report.throttled > 0
    assert len(report.rounds) >= 2  # the crashed and throttled-out invocations were redelivered
