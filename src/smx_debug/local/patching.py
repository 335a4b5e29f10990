"""How the local AWS extends moto: the one mechanism every behaviour uses to replace a method of moto's.

:func:`patch_once` replaces one attribute of one of moto's public classes (or modules) with ``wrap(original)``,
thread-safely and only the first time in the process, so calling a behaviour's ``install`` again (every test,
every :class:`~smx_debug.local.server.LocalAws`) costs nothing.

moto keeps its backends per process, not per server: a replaced method runs in moto's thread with no LocalAws in
hand. :func:`serve` names the LocalAws whose behaviours those methods act for (:func:`smx_debug.local.install`
does it), and :func:`served` returns it; what they record goes to that instance (``aws.recorder(...)``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from smx_debug.local.server import LocalAws

_lock = threading.Lock()
_patched: set[tuple[object, str]] = set()
_served: list[LocalAws] = []  # at most one: the LocalAws moto's replaced methods act for


def patch_once(owner: object, name: str, wrap: Callable[[Any], Callable[..., Any]]) -> None:
    """Replace ``owner.name`` with ``wrap(original)`` unless this process already did (``original`` is None for
    what moto lacks). Idempotent."""
    with _lock:
        if (owner, name) in _patched:
            return
        setattr(owner, name, wrap(getattr(owner, name, None)))
        _patched.add((owner, name))


def serve(aws: LocalAws) -> None:
    """From now on moto's replaced methods act for ``aws`` (the last LocalAws installed)."""
    with _lock:
        _served[:] = [aws]


def served() -> LocalAws | None:
    """The LocalAws moto's replaced methods act for, if one was installed."""
    with _lock:
        return _served[0] if _served else None
