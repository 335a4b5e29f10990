"""A hook factory that always closes its hooks (each registers a global optimizer hook)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import smx_debug.hook as smd


@pytest.fixture
def make_hook() -> Iterator[Callable[..., tuple[smd.Hook, smd.MemorySink]]]:
    hooks: list[smd.Hook] = []

    def make(**kwargs: Any) -> tuple[smd.Hook, smd.MemorySink]:
        sink = kwargs.pop("sink", None) or smd.MemorySink()
        hook = smd.Hook(out_dir=kwargs.pop("out_dir", "/tmp/smx-hook-test-unused"), sink=sink, **kwargs)
        hooks.append(hook)
        return hook, sink

    yield make
    for hook in hooks:
        hook.close()
    smd.del_hook()
