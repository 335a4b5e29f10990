"""Lambda entry point: the fleet collector (one run of smx_debug.fleet.collector per scheduled invocation).

Settings and clients are built once per cold start and kept in this module, as the other handlers keep theirs.
"""

from __future__ import annotations

from typing import Any

from smx_debug.fleet.collector import CollectorRuntime, handle_scheduled

_runtime: CollectorRuntime | None = None


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Write every job's metadata, the unwatched jobs' CloudWatch minutes and the verdict log (docs/fleet.md)."""
    global _runtime
    if _runtime is None:
        _runtime = CollectorRuntime.from_env()
    return handle_scheduled(event, context, runtime=_runtime)
