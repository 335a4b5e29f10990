"""The process's current hook (smdebug's ``get_hook``/``set_hook``/``del_hook``)."""

from __future__ import annotations

from typing import Any

_hook: Any = None


def set_hook(custom_hook: Any) -> None:
    """Make ``custom_hook`` the current hook (every new Hook does this)."""
    global _hook
    _hook = custom_hook


def del_hook() -> None:
    """Forget the current hook."""
    global _hook
    _hook = None


def current_hook() -> Any:
    """The current hook, or None."""
    return _hook
