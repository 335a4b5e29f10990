from __future__ import annotations

import pytest

from smx_debug.errors import ConfigError
from smx_debug.tags import (
    MANAGED_TAG,
    ActionSpec,
    decode_tags,
    encode_tags,
)

TOPIC = "arn:aws:sns:us-west-2:123456789012:ml-alerts"


def test_encode_tags_round_trip_keeps_every_action() -> None:
    rule_actions = {
        "ExplodingTensor": [ActionSpec("stop"), ActionSpec("notify", TOPIC)],
        "LossNotDecreasing": [ActionSpec("retrain")],
        "Overfit": [],
    }
    tags = encode_tags(rule_actions, plan="guard", extra={"team": "vision"})
    assert tags == [
        {"Key": "team", "Value": "vision"},
        {"Key": MANAGED_TAG, "Value": "true"},
        {"Key": "smx-debug:plan", "Value": "guard"},
        {"Key": "smx-debug:on:ExplodingTensor", "Value": f"stop notify={TOPIC}"},
        {"Key": "smx-debug:on:LossNotDecreasing", "Value": "retrain"},
    ]
    decoded = decode_tags(tags)
    assert decoded.managed and decoded.plan == "guard"
    assert decoded.actions_for("ExplodingTensor") == (ActionSpec("stop"), ActionSpec("notify", TOPIC))
    assert decoded.actions_for("Overfit") == ()


def test_encode_tags_duplicate_actions_are_written_once() -> None:
    tags = encode_tags({"R": [ActionSpec("stop"), ActionSpec("stop")]}, managed=False)
    assert tags == [{"Key": "smx-debug:on:R", "Value": "stop"}]


@pytest.mark.parametrize(
    ("rule_actions", "extra", "needle"),
    [
        ({"x" * 200: [ActionSpec("stop")]}, None, "characters; SageMaker allows 1-128"),
        ({"R": [ActionSpec("stop")]}, {"smx-debug:managed": "no"}, "reserved for smx-debug"),
        ({"R": [ActionSpec("stop")]}, {"aws:team": "x"}, "'aws:' prefix is reserved"),
        ({"R": [ActionSpec("stop")]}, {"team": "a,b"}, "characters SageMaker tags do not allow"),
        ({f"R{i}": [ActionSpec("stop")] for i in range(60)}, None, "at most 50"),
    ],
)
def test_encode_tags_invalid_input_raises_config_error(rule_actions, extra, needle) -> None:
    with pytest.raises(ConfigError, match=needle) as info:
        encode_tags(rule_actions, extra=extra)
    assert info.value.field == "tags"


@pytest.mark.parametrize(
    "tags",
    [None, "junk", 42, [1, 2], [{"Key": 1}], {"smx-debug:on:R": 5}, {"smx-debug:on:": "stop"}],
)
def test_decode_tags_malformed_input_is_empty_not_an_error(tags) -> None:
    assert decode_tags(tags).actions == {}


def test_decode_tags_unknown_tokens_are_reported_and_event_dict_form_accepted() -> None:
    decoded = decode_tags({"smx-debug:on:R": "stop explode notify=not-an-arn", MANAGED_TAG: "TRUE"})
    assert decoded.actions_for("R") == (ActionSpec("stop"),)
    assert decoded.unknown_tokens == ("explode", "notify=not-an-arn")
    assert decoded.managed


def test_watched_actions_unwatched_job_returns_none_watched_job_merges_tags_and_defaults() -> None:
    from smx_debug.tags import watched_actions

    tags = {"smx-debug:on:R": "stop notify"}
    assert watched_actions("x-1", tags, prefixes=("a-",), opt_in_tag=MANAGED_TAG, rules=("R",)) is None
    opted = {**tags, MANAGED_TAG: "true"}
    assert watched_actions("x-1", opted, prefixes=("a-",), opt_in_tag=MANAGED_TAG, defaults=(ActionSpec("notify"),),
                           rules=("R", "S")) == {"R": (ActionSpec("stop"), ActionSpec("notify")),
                                                 "S": (ActionSpec("notify"),)}
