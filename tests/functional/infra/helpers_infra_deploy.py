"""A deliberately tiny intrinsic-function resolver, independent of deploy.py's, to state expectations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PSEUDO = {"AWS::Partition": "aws", "AWS::AccountId": "123456789012", "AWS::Region": "us-west-2"}


def resolve(value: Any, refs: Mapping[str, str], atts: Mapping[tuple[str, str], str]) -> Any:
    """Resolve Ref / Fn::GetAtt / Fn::Join with the given values (anything else is left as is)."""
    if isinstance(value, list):
        return [resolve(v, refs, atts) for v in value]
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return {**PSEUDO, **refs}[value["Ref"]]
        if set(value) == {"Fn::GetAtt"}:
            return atts[tuple(value["Fn::GetAtt"])]  # type: ignore[index]
        if set(value) == {"Fn::Join"}:
            sep, parts = value["Fn::Join"]
            return sep.join(resolve(p, refs, atts) for p in parts)
        return {k: resolve(v, refs, atts) for k, v in value.items()}
    return value
