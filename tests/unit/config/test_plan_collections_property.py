"""Property: merged collections are unique, complete and never save less often than a rule asks."""

from __future__ import annotations

import warnings

from hypothesis import given, settings
from hypothesis import strategies as st

from smx_debug.config import DebugPlan
from smx_debug.rules import list_rules

DEBUGGER = [s.function for s in list_rules("debugger", family="debugger") if not any(p.required for p in s.parameters)]


@settings(max_examples=60, deadline=None)
@given(
    rules=st.lists(st.sampled_from(DEBUGGER), unique=True, max_size=8),
    hook_interval=st.none() | st.integers(1, 2000),
    user=st.dictionaries(st.sampled_from(["losses", "gradients", "weights", "custom"]), st.none() | st.integers(1, 2000)),
)
def test_collections_any_rules_unique_complete_not_sparser(
    rules: list[str], hook_interval: int | None, user: dict[str, int | None]
) -> None:
    plan = DebugPlan(
        region="us-west-2",
        s3_output_path="s3://bucket/x",
        hook={"save_interval": hook_interval, "collections": [{"name": n, "save_interval": i} for n, i in user.items()]},
        rules=[{"name": r} for r in rules],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        entries = plan.to_request_dict(job_name="j")["DebugHookConfig"]["CollectionConfigurations"]
    names = [e["CollectionName"] for e in entries]
    assert len(names) == len(set(names))
    assert names[: len(user)] == list(user)
    by_name = {e["CollectionName"]: e.get("CollectionParameters", {}) for e in entries}
    for rule in plan.rules:
        for req in rule.spec.collections:
            params = by_name[req.name]
            if req.save_interval is not None:
                assert int(params["save_interval"]) <= req.save_interval
                explicit = user.get(req.name) or hook_interval
                if explicit is not None:
                    assert int(params["save_interval"]) <= explicit
