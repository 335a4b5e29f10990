"""boto3 clients of the local AWS, built once per server and service (shared by the behaviour modules)."""

from __future__ import annotations

import weakref
from typing import Any

from smx_debug.local.server import LocalAws

__all__ = ["client"]

_cache: weakref.WeakKeyDictionary[LocalAws, dict[str, Any]] = weakref.WeakKeyDictionary()


def client(aws: LocalAws, service: str) -> Any:
    """``aws.client(service)``, cached: a boto3 session parses each service model from JSON (SageMaker's is large)."""
    clients = _cache.setdefault(aws, {})
    if service not in clients:
        clients[service] = aws.client(service)
    return clients[service]
