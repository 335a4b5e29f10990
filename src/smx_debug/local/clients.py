"""boto3 clients of the local AWS, built once per server and service (shared by the behaviour modules)."""

from __future__ import annotations

from typing import Any

from smx_debug.local.server import LocalAws


class Clients(dict[str, Any]):
    """One LocalAws's cached administrator clients, by service."""


def client(aws: LocalAws, service: str) -> Any:
    """``aws.client(service)``, cached on ``aws``: a boto3 session parses each service model from JSON (SageMaker's
    is large)."""
    clients = aws.recorder(Clients)
    if service not in clients:
        clients[service] = aws.client(service)
    return clients[service]
