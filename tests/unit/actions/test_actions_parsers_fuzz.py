"""Fuzz of the event parsers: whatever an event carries, a parser returns or rejects it as malformed.

Each parser is fed the real sample events (tests/events/) with parts removed or replaced by junk: other types,
text, and the numbers that break arithmetic (integers past a float's range like ``10**400``, ``inf``, ``nan``,
``1e308``). A parser may only return or raise :class:`MalformedEventError`; the retraining step may only return a
state document (its expected failures land in ``state.error``). Any other exception would be retried by Lambda
and end in the DLQ instead of being rejected. Issue 20 found ``parse_time(10**400)`` (OverflowError) and
``retrain._fail`` on a ``history`` that is not an object (AttributeError) this way.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from actions_fakes import FakeSageMaker, fake_runtime
from event_mutations import leaf_paths, mutate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smx_debug.actions.events import (
    MalformedEventError,
    parse_alarm_message,
    parse_execution_change,
    parse_state_change,
    parse_time,
)
from smx_debug.actions.retrain import init_state, run_step

EVENTS = Path(__file__).resolve().parents[2] / "events"


def _sample(name: str) -> Any:
    return json.loads((EVENTS / name).read_text())


# Numbers at and past the edges of what float() and datetime accept.
EDGE_NUMBERS = [10**400, -(10**400), 2**63, 2**1024, 1e308, -1e308, 1.7976931348623157e308, 5e-324,
                float("inf"), float("-inf"), float("nan"), -0.0, 0, -1, 253402300800, 253402300800000]
EDGE_TEXT = ["1e400", "-1e400", "inf", "nan", "9" * 40, "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59",
             "1575185055495", "", "\ud800", "x" * 5000]

scalars = (
    st.none() | st.booleans() | st.integers() | st.integers(-(10**500), 10**500) | st.floats()
    | st.sampled_from(EDGE_NUMBERS) | st.sampled_from(EDGE_TEXT) | st.text(max_size=30)
)
junk = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)


def mutated(sample: Any) -> st.SearchStrategy[Any]:
    """The sample with 1-4 of its parts (at any depth) removed or replaced, by the edge values more often than not."""
    paths = leaf_paths(sample)
    edges = st.sampled_from(EDGE_NUMBERS) | st.sampled_from(EDGE_TEXT) | junk

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        return mutate(draw, sample, paths, edges)

    return build()


STATE_CHANGES = [_sample(n) for n in ("sagemaker_state_change_issues_found.json",
                                      "sagemaker_state_change_in_progress.json",
                                      "sagemaker_state_change_completed.json")]
ALARM = json.loads(_sample("sns_cloudwatch_alarm.json")["Records"][0]["Sns"]["Message"])
EXECUTION = _sample("sfn_execution_timed_out.json")
_RETRAIN = _sample("retrain_input.json")
_STATE = init_state(_RETRAIN["state"]["run_spec"], clock=lambda: 1_795_000_000.0)
RETRAIN_EVENTS = [_RETRAIN, {"step": "train", "state": _STATE},
                  {"step": "monitor", "state": {**_STATE, "next_action": "monitor",
                                                "history": {**_STATE["history"], "latest_job_name": "job-1"}}},
                  {"step": "end", "state": {**_STATE, "error": {"step": "train", "code": "X"}}}]

FUZZ = settings(max_examples=400, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _returns_or_rejects(parse: Callable[[Any], Any], event: Any) -> None:
    with contextlib.suppress(MalformedEventError):  # rejected as malformed: the one allowed exception
        parse(event)


@FUZZ
@given(value=junk)
def test_parse_time_any_value_returns_seconds_or_none(value: Any) -> None:
    result = parse_time(value)
    assert result is None or (isinstance(result, float) and result >= 0 and result == result)


@pytest.mark.parametrize("index", range(len(STATE_CHANGES)))
@FUZZ
@given(data=st.data())
def test_parse_state_change_fuzzed_event_returns_or_rejects(index: int, data: st.DataObject) -> None:
    _returns_or_rejects(parse_state_change, data.draw(mutated(STATE_CHANGES[index])))


@FUZZ
@given(message=mutated(ALARM), as_text=st.booleans())
def test_parse_alarm_message_fuzzed_message_returns_or_rejects(message: Any, as_text: bool) -> None:
    _returns_or_rejects(parse_alarm_message, json.dumps(message) if as_text else message)


@FUZZ
@given(event=mutated(EXECUTION))
def test_parse_execution_change_fuzzed_event_returns_or_rejects(event: Any) -> None:
    _returns_or_rejects(parse_execution_change, event)


@pytest.mark.parametrize("index", range(len(RETRAIN_EVENTS)), ids=[e["step"] for e in RETRAIN_EVENTS])
@FUZZ
@given(data=st.data())
def test_retrain_run_step_fuzzed_state_returns_a_state_document(index: int, data: st.DataObject) -> None:
    event = data.draw(mutated(RETRAIN_EVENTS[index]))
    runtime = fake_runtime(sagemaker=FakeSageMaker(tags={"smx-debug:managed": "true"}))
    result = run_step(event, runtime)
    assert isinstance(result, dict)
