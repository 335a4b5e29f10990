"""What a Lambda function runs with: AWS clients with standard retries, structured JSON logs, the :class:`Runtime`
of a cold start (its own module so the handlers and the retrain steps both import it at module level, without a
cycle) and the :class:`Deadline` of one invocation.

The invocation's deadline: start an AWS call only while its worst case still fits in the function's time. Each call
is bounded by its retries and socket timeouts (:func:`smx_debug.actions.settings.call_budget_seconds`, 24 s by
default), but an event that triggers several rules makes several claim-act-complete rounds, and their sum is not
bounded by anything (issue 20: 6 rules with 3 s answers took 60.6-63.9 s in a 60 s function, so Lambda killed it
holding a claim). :class:`Deadline` reads what Lambda says is left (``context.get_remaining_time_in_millis()``) and
:func:`smx_debug.actions.once.once` asks it before each call that starts something: the claim, then the action.
What does not fit is left unclaimed (or its claim is released) and the invocation fails with
:class:`smx_debug.errors.OutOfTimeError`, so Lambda redelivers the event and the redelivery does the rest (what was
done is found in the ledger). Recording an action that has happened and releasing a claim are always sent.

Imports only boto3/botocore, the standard library and the actions' settings and ledger.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

from smx_debug.actions.ledger import Ledger, LedgerLike, MemoryLedger
from smx_debug.actions.settings import Settings
from smx_debug.errors import OutOfTimeError

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


@dataclass(frozen=True)
class Deadline:
    """What is left of one invocation (``remaining_ms``: Lambda's clock) and the worst case of one call."""

    remaining_ms: Callable[[], float] | None
    call_seconds: float

    @classmethod
    def of(cls, context: Any, call_seconds: float) -> Deadline:
        """The deadline of a Lambda ``context``; unbounded when there is none (a direct call, a test)."""
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        return cls(remaining if callable(remaining) else None, call_seconds)

    def left(self) -> float:
        """Seconds left of the invocation (infinite without a context)."""
        return math.inf if self.remaining_ms is None else float(self.remaining_ms()) / 1000.0

    def fits(self) -> bool:
        """Whether one more call can run to its worst case before the function times out."""
        return self.left() >= self.call_seconds

    def keeping(self, seconds: float) -> Deadline:
        """This deadline with ``seconds`` kept for what must follow it (a final message, saving state)."""
        remaining = self.remaining_ms
        if remaining is None:
            return self
        return Deadline(lambda: max(0.0, float(remaining()) - seconds * 1000.0), self.call_seconds)

    def require(self, what: str) -> None:
        """Raise :class:`OutOfTimeError` unless one more call fits."""
        left = self.left()
        if left < self.call_seconds:
            raise OutOfTimeError(what, left, self.call_seconds)


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
