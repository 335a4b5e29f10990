"""An invocation ends inside its Lambda timeout, however many rules fired, and leaves the rest to the redelivery.

Issue 20: with 6 triggered rules and 3 s answers, an invocation took 60.6-63.9 s against its 60 s timeout (each
call was bounded, their sum was not), so Lambda killed it holding a claim. Here every AWS call (and every ledger
call) takes 3 s of a fake clock that also drives the Lambda context's ``get_remaining_time_in_millis``; the
deployed entry point (``lambdas/actions/handler.py``'s ``rule_metrics``) runs with a runtime of fakes.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType

import pytest
from actions_fakes import ACCOUNT, REGION, SAMPLE, FakeCloudWatch, FakeSageMaker, fake_runtime, settings
from lambda_support import Clock, Context, Slow, entry_point

from smx_debug.actions import MemoryLedger
from smx_debug.actions.ledger import DONE
from smx_debug.actions.runtime import Deadline
from smx_debug.errors import OutOfTimeError

TIMEOUT = 60.0
ANSWER = 3.0
RULES = [f"Rule{i}" for i in range(6)]
ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:rule-metrics"


class SlowLedger(MemoryLedger):
    """The ledger's DynamoDB calls take ``ANSWER`` seconds too."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock, lease_seconds=TIMEOUT + 30)
        self.tick = clock

    def claim_or_holder(self, pk: str, record: Mapping[str, object]) -> dict[str, str] | None:
        self.tick.now += ANSWER
        return super().claim_or_holder(pk, record)

    def complete(self, pk: str, outcome: Mapping[str, object]) -> None:
        self.tick.now += ANSWER
        super().complete(pk, outcome)

    def release(self, pk: str) -> None:
        self.tick.now += ANSWER
        super().release(pk)

    def get(self, pk: str) -> dict[str, str] | None:
        self.tick.now += ANSWER
        return super().get(pk)


def _invoke(module: ModuleType, clock: Clock) -> tuple[float, BaseException | None]:
    started = clock.now
    try:
        module.rule_metrics(SAMPLE, Context(clock, TIMEOUT, ARN))
    except Exception as exc:
        return clock.now - started, exc
    return clock.now - started, None


@pytest.fixture
def setup() -> tuple[ModuleType, Clock, FakeCloudWatch, SlowLedger]:
    clock = Clock()
    rules = [{"RuleConfigurationName": r, "RuleEvaluationStatus": "IssuesFound"} for r in RULES]
    cloudwatch = FakeCloudWatch()
    ledger = SlowLedger(clock)
    runtime = fake_runtime(settings(function_timeout=TIMEOUT), ledger,
                           sagemaker=Slow(FakeSageMaker(tags={"smx-debug:managed": "true"}, rules=rules), clock,
                                          ANSWER),
                           cloudwatch=Slow(cloudwatch, clock, ANSWER))
    module = entry_point("actions", "rule_metrics_entry")
    module._runtime = runtime  # the cold start's runtime, with fakes
    return module, clock, cloudwatch, ledger


def test_rule_metrics_six_rules_with_3s_answers_ends_inside_the_timeout(
    setup: tuple[ModuleType, Clock, FakeCloudWatch, SlowLedger],
) -> None:
    module, clock, _, ledger = setup
    elapsed, error = _invoke(module, clock)
    assert elapsed < TIMEOUT, elapsed
    assert isinstance(error, OutOfTimeError), error  # the invocation fails, so Lambda redelivers the event
    # nothing is left claimed: what was done is recorded, what was not was never claimed (or released)
    assert ledger.items and all(item["state"] == DONE for item in ledger.items.values())


def test_rule_metrics_lambdas_retries_do_the_rest_each_metric_once(
    setup: tuple[ModuleType, Clock, FakeCloudWatch, SlowLedger],
) -> None:
    module, clock, cloudwatch, _ = setup
    outcomes = [_invoke(module, clock)]
    for delay in (60, 120):  # Lambda's two retries of an async invocation, 1 and 2 minutes after a failure
        if outcomes[-1][1] is None:
            break
        clock.now += delay
        outcomes.append(_invoke(module, clock))
    assert all(elapsed < TIMEOUT for elapsed, _ in outcomes), outcomes
    assert outcomes[-1][1] is None, outcomes  # done within Lambda's retries (else the DLQ keeps the event)
    rules = [d["Dimensions"] for put in cloudwatch.data for d in put["MetricData"] if len(d["Dimensions"]) == 1]
    assert sorted(dims[0]["Value"] for dims in rules) == RULES


@pytest.mark.parametrize(("left_ms", "fits"), [(None, True), (24_000, True), (23_999, False), (0, False)])
def test_deadline_fits_only_a_whole_worst_case_call(left_ms: int | None, fits: bool) -> None:
    context = None if left_ms is None else type("C", (), {"get_remaining_time_in_millis": lambda self: left_ms})()
    deadline = Deadline.of(context, call_seconds=24.0)
    assert deadline.fits() is fits
    if not fits:
        with pytest.raises(OutOfTimeError, match="left for the redelivery"):
            deadline.require("claim")


@pytest.mark.parametrize(("left_ms", "kept", "left"), [(None, 24.0, float("inf")), (60_000, 24.0, 36.0),
                                                       (10_000, 24.0, 0.0)])
def test_deadline_keeping_leaves_that_much_for_what_must_follow(left_ms: int | None, kept: float, left: float) -> None:
    context = None if left_ms is None else type("C", (), {"get_remaining_time_in_millis": lambda self: left_ms})()
    assert Deadline.of(context, call_seconds=24.0).keeping(kept).left() == left
