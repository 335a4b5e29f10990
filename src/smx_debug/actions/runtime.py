"""Shared plumbing for the handlers: AWS clients with standard retries and structured JSON logs.

Imports only boto3/botocore and the standard library.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config

__all__ = ["ClientFactory", "client_factory", "log_json", "logger", "retry_config"]

logger = logging.getLogger("smx_debug.actions")
logger.setLevel(logging.INFO)

ClientFactory = Callable[[str], Any]


def retry_config(max_attempts: int, connect_timeout: float = 2.0, read_timeout: float = 5.0) -> Config:
    """botocore standard retries (exponential backoff with jitter) and socket timeouts sized to the
    function (:func:`smx_debug.actions.settings.call_budget_seconds`); ``max_attempts`` counts the first try."""
    # total_max_attempts includes the first try; Config(retries={"max_attempts": N}) would mean N retries.
    return Config(
        retries={"mode": "standard", "total_max_attempts": max_attempts},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
    )


def client_factory(
    region: str | None = None, max_attempts: int = 3, connect_timeout: float = 2.0, read_timeout: float = 5.0
) -> ClientFactory:
    """A cached ``service -> boto3 client`` factory; ``AWS_ENDPOINT_URL`` (if set) is honoured by boto3."""
    session = boto3.session.Session(region_name=region)
    cache: dict[str, Any] = {}
    config = retry_config(max_attempts, connect_timeout, read_timeout)

    def make(service: str) -> Any:
        if service not in cache:
            cache[service] = session.client(service, config=config)  # type: ignore[call-overload]
        return cache[service]

    return make


def log_json(level: int = logging.INFO, **fields: Any) -> None:
    """One JSON object per line, so CloudWatch Logs Insights can filter on any field."""
    logger.log(level, json.dumps(fields, default=str, sort_keys=True)[:32_768])
