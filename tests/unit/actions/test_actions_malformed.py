"""Property: malformed events never raise out of a handler, and every rejection is logged as rejected.

(Only malformed input: a bug or an AWS failure must raise; see test_actions_respond.py.)

Thousands of generated events: the real sample events with keys removed, values replaced by other types
and huge strings, plus arbitrary JSON values. AWS is replaced by fakes (tests/unit/actions/actions_fakes.py).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from actions_fakes import FakeSageMaker, fake_runtime
from event_mutations import leaf_paths, mutate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smx_debug.actions import handle_notify, handle_retrain, handle_rule_metrics, handle_stop_training

EVENTS = Path(__file__).resolve().parents[2] / "events"
SAMPLES = [json.loads(p.read_text()) for p in sorted(EVENTS.glob("*.json"))]

junk = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(["IssuesFound", "InProgress", "aws.sagemaker", "", "1575185055495"])
    | st.just("x" * 100_000),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=8,
)


PATHS = [leaf_paths(sample) for sample in SAMPLES]


@st.composite
def malformed_events(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(junk)
    index = draw(st.integers(0, len(SAMPLES) - 1))
    return mutate(draw, SAMPLES[index], PATHS[index], junk)


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(record.getMessage()))


@pytest.mark.parametrize(
    "handler", [handle_rule_metrics, handle_stop_training, handle_notify, handle_retrain]
)
@settings(
    max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(event=malformed_events())
def test_handler_malformed_event_never_raises_and_rejections_are_logged(handler: Any, event: Any) -> None:
    capture = _Capture()
    logger = logging.getLogger("smx_debug.actions")
    logger.addHandler(capture)
    try:
        runtime = fake_runtime(sagemaker=FakeSageMaker(tags={"smx-debug:managed": "true"}))
        result = handler(event, runtime)
    finally:
        logger.removeHandler(capture)
    assert isinstance(result, dict)
    rejected = result.get("rejected") is True or (result.get("error") or {}).get("code") == "RejectedEvent"
    if result.get("rejected") is True:
        assert [line["reason"] for line in capture.lines if line.get("rejected") is True] == [
            result["reason"]
        ]
    elif not rejected:
        assert all(line.get("rejected") is False for line in capture.lines if "rejected" in line)
