"""The synthesized EventBridge pattern (its real JSON) decides like the handler's opt-in rule.

Events are matched with moto's EventBridge pattern engine (the local AWS's; it implements prefix, ``$or`` and
``equals-ignore-case`` as EventBridge documents them), against ``contracts.is_watched``, for every case variant
the handler accepts and values it refuses.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers_infra import Synth, watch_rules

from smx_debug.contracts import DETAIL_TYPE, EVENT_SOURCE, MANAGED_TAG, is_watched

PREFIXES = ["exp-"]
CASES: list[tuple[str, dict[str, str]]] = [
    ("team-run-1", {MANAGED_TAG: "true"}),
    ("team-run-2", {MANAGED_TAG: "True"}),
    ("team-run-3", {MANAGED_TAG: "TRUE"}),
    ("team-run-4", {MANAGED_TAG: "false"}),
    ("team-run-5", {MANAGED_TAG: " true"}),  # no trimming, anywhere
    ("team-run-6", {}),
    ("team-run-7", {"other": "true"}),
    ("exp-run-8", {}),  # by prefix
    ("Exp-run-9", {}),  # prefixes are case-sensitive in EventBridge and in the handler
    ("exp-run-10", {MANAGED_TAG: "TRUE"}),  # both ways: one rule, so delivered once
]


def _event(job: str, tags: dict[str, str]) -> dict[str, Any]:
    return {"version": "0", "id": "1", "detail-type": DETAIL_TYPE, "source": EVENT_SOURCE,
            "account": "111122223333", "region": "us-west-2", "time": "2026-11-23T00:00:00Z", "resources": [],
            "detail": {"TrainingJobName": job, "TrainingJobStatus": "InProgress", "Tags": tags}}


@pytest.mark.parametrize("opt_in", [MANAGED_TAG, False], ids=["prefix-or-tag", "prefix-only"])
def test_pattern_matches_exactly_the_jobs_the_handler_watches(synth_cached: Synth, opt_in: Any) -> None:
    from moto.events.models import EventPattern, EventPatternParser

    template, _ = synth_cached(watch_prefixes=PREFIXES, opt_in_tag=opt_in)
    (rule,) = watch_rules(template).values()
    text = json.dumps(rule["Properties"]["EventPattern"])
    pattern = EventPattern(text, EventPatternParser(text).parse())
    tag_key = MANAGED_TAG if opt_in else None
    decided = {job: pattern.matches_event(_event(job, tags)) for job, tags in CASES}
    expected = {job: is_watched(job, tags, PREFIXES, tag_key) for job, tags in CASES}
    assert decided == expected
    assert sum(decided.values()) == (5 if opt_in else 2)  # the check is not vacuous
