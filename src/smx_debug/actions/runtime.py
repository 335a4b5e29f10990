"""Shared plumbing for the handlers: AWS clients with standard retries, structured JSON logs and the
:class:`Runtime` of a cold start (its own module so the handlers and the retrain steps both import it at module
level, without a cycle).

Imports only boto3/botocore, the standard library and the actions' settings, ledger and deadline.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

from smx_debug.actions.deadline import Deadline
from smx_debug.actions.ledger import Ledger, LedgerLike, MemoryLedger
from smx_debug.actions.settings import Settings

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


_DEFAULT_REGION = "us-east-1"


@dataclass
class Runtime:
    """Settings, clients and ledger of one cold start."""

    settings: Settings
    clients: ClientFactory
    ledger: LedgerLike

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        clients: ClientFactory | None = None,
        context: Any = None,
    ) -> Runtime:
        settings = Settings.from_env(environ, context)
        factory = clients or client_factory(
            settings.region, settings.max_attempts, settings.connect_timeout, settings.read_timeout
        )
        ledger: LedgerLike = (
            Ledger(factory("dynamodb"), settings.ledger_table, lease_seconds=settings.lease_seconds)
            if settings.ledger_table
            else MemoryLedger(lease_seconds=settings.lease_seconds)
        )
        return cls(settings=settings, clients=factory, ledger=ledger)

    @property
    def region(self) -> str:
        return self.settings.region or _DEFAULT_REGION

    def deadline(self, context: Any) -> Deadline:
        """This invocation's deadline: Lambda's time left, against one call's worst case."""
        return Deadline.of(context, self.settings.call_budget)
