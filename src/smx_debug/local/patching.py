"""How the local AWS extends moto: one method of one of moto's public classes replaced, once per process.

Each behaviour module (``metric_data``, ``throttling``, ``job_metrics``) wraps exactly one moto method.
:func:`patch_once` does the replacing for all of them, thread-safely and only the first time, so calling a
module's ``install`` again (every test, every :class:`~smx_debug.local.server.LocalAws`) costs nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["patch_once"]

_lock = threading.Lock()
_patched: set[tuple[type[Any], str]] = set()


def patch_once(owner: type[Any], name: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Replace ``owner.name`` with ``wrap(original)`` unless this process already did. Idempotent."""
    with _lock:
        if (owner, name) in _patched:
            return
        setattr(owner, name, wrap(getattr(owner, name)))
        _patched.add((owner, name))
