"""Hypothesis helpers shared by the property tests of the event parsers and handlers: events with parts removed
or replaced."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st


def leaf_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys and indexes) into ``value``, at any depth, the root excluded."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            out += leaf_paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out += leaf_paths(child, (*prefix, i))
    return out


def mutate(draw: st.DrawFn, sample: Any, paths: list[tuple[Any, ...]], junk: st.SearchStrategy[Any]) -> Any:
    """A copy of ``sample`` with 1-4 of its ``paths`` removed or replaced by a ``junk`` value."""
    event = copy.deepcopy(sample)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(paths))
        parent = event
        try:
            for key in path[:-1]:
                parent = parent[key]
            if draw(st.booleans()):
                parent.pop(path[-1])
            else:
                parent[path[-1]] = draw(junk)
        except (KeyError, IndexError, TypeError, AttributeError):
            continue  # an earlier mutation removed or replaced this part
    return event
