"""The CLI's one AWS client factory: the default session's region and credentials, botocore's standard retries."""

from __future__ import annotations

from typing import Any

__all__ = ["client"]


def client(service: str) -> Any:
    """A boto3 client of ``service`` for a command (created when the command needs it, never at import)."""
    import boto3
    from botocore.config import Config

    return boto3.client(service, config=Config(retries={"mode": "standard"}))  # type: ignore[call-overload]
