"""Deployment settings for the Lambda handlers, read from environment variables once per cold start.

The variable names are a contract with the infrastructure (:class:`smx_debug.contracts.Env`,
docs/CONTRACTS.md "Lambda handlers"). Every value is checked here, at the cold start: a bad one is a
:class:`~smx_debug.errors.ConfigError` naming the variable. Imports only the standard library.

Time budget (docs/actions.md, "Timeouts"): one AWS call that keeps failing takes at most
``max_attempts * (connect_timeout + read_timeout) + sum of the backoffs`` (botocore standard mode: the
k-th retry waits at most ``min(2 ** (k - 1), 20)`` s). That must fit in half the function timeout, so a
handler that already spent time on other calls still ends inside the timeout, and the ledger lease must
outlast the whole function timeout.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from smx_debug.contracts import (
    DEFAULT_FUNCTION_TIMEOUT_SECONDS,
    DEFAULT_LEASE_SECONDS,
    DEFAULT_NAMESPACE,
    MANAGED_TAG,
    Env,
)
from smx_debug.errors import ConfigError
from smx_debug.tags import ActionSpec, watch_rule_from_env

DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_CONNECT_TIMEOUT = 2.0
DEFAULT_READ_TIMEOUT = 5.0
_MAX_BACKOFF = 20.0  # botocore standard retry mode's cap on one backoff


def call_budget_seconds(max_attempts: int, connect_timeout: float, read_timeout: float) -> float:
    """The longest one AWS call can take before botocore gives up (every attempt hangs to its timeouts)."""
    backoffs = sum(min(2.0 ** (k - 1), _MAX_BACKOFF) for k in range(1, max_attempts))
    return max_attempts * (connect_timeout + read_timeout) + backoffs


@dataclass(frozen=True)
class Settings:
    """What one deployment does: which jobs it watches, its default actions, where it records and notifies."""

    namespace: str = DEFAULT_NAMESPACE
    watch_prefixes: tuple[str, ...] = ()
    opt_in_tag: str = MANAGED_TAG
    default_actions: tuple[ActionSpec, ...] = ()
    ledger_table: str | None = None
    topic_arn: str | None = None
    region: str | None = None
    account: str | None = None  # the deployment's account: events and jobs of other accounts are refused
    state_machine_arn: str | None = None  # the retraining workflow the ``retrain`` action starts
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    read_timeout: float = DEFAULT_READ_TIMEOUT
    function_timeout: float = DEFAULT_FUNCTION_TIMEOUT_SECONDS
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    show_keys: frozenset[str] = frozenset()  # hyperparameter/environment keys whose values messages may show
    redact_keys: frozenset[str] = frozenset()  # keys whose values never enter a retraining execution's input
    actor: str = "smx-debug"  # recorded in the ledger as who acted (the function name in Lambda)
    fleet_bucket: str | None = None  # the verdict log's inbox (actions.verdict_log); None: nothing is logged

    def __post_init__(self) -> None:
        budget = self.call_budget
        if budget > self.function_timeout / 2:
            raise ConfigError(
                f"{Env.MAX_ATTEMPTS}: {self.max_attempts} attempts x ({self.connect_timeout:g} s connect + "
                f"{self.read_timeout:g} s read) + backoff = {budget:g} s per call does not fit in half the "
                f"function timeout ({self.function_timeout:g} s)",
                field=Env.MAX_ATTEMPTS,
                value=self.max_attempts,
            )
        if self.lease_seconds <= self.function_timeout:
            raise ConfigError(
                f"{Env.LEASE_SECONDS}: a {self.lease_seconds:g} s lease must outlast the function timeout "
                f"({self.function_timeout:g} s, {Env.FUNCTION_TIMEOUT})",
                field=Env.LEASE_SECONDS,
                value=self.lease_seconds,
            )

    @property
    def call_budget(self) -> float:
        """Seconds one AWS call may take at worst (see :func:`call_budget_seconds`)."""
        return call_budget_seconds(self.max_attempts, self.connect_timeout, self.read_timeout)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, context: Any = None) -> Settings:
        """Read ``SMX_*`` variables, the Lambda runtime's region and function name, and the account (from
        ``SMX_ACCOUNT`` or the invoked function's ARN in the Lambda ``context``)."""
        env = os.environ if environ is None else environ
        defaults: list[ActionSpec] = []
        for token in env.get(Env.DEFAULT_ACTIONS, "").split():
            spec = ActionSpec.parse(token)
            if spec is None:
                raise ConfigError(
                    f"{Env.DEFAULT_ACTIONS}: unknown action token {token!r} (stop, notify, notify=<topic arn>, "
                    "retrain)",
                    field=Env.DEFAULT_ACTIONS,
                    value=token,
                )
            defaults.append(spec)
        prefixes, opt_in_tag = watch_rule_from_env(env)
        return cls(
            namespace=env.get(Env.NAMESPACE) or DEFAULT_NAMESPACE,
            watch_prefixes=prefixes,
            opt_in_tag=opt_in_tag,
            default_actions=tuple(defaults),
            ledger_table=env.get(Env.LEDGER_TABLE) or None,
            topic_arn=env.get(Env.TOPIC_ARN) or None,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
            account=env.get(Env.ACCOUNT) or _account_of(context),
            state_machine_arn=env.get(Env.STATE_MACHINE_ARN) or None,
            max_attempts=int(_number(env, Env.MAX_ATTEMPTS, DEFAULT_MAX_ATTEMPTS, 1, 20, integer=True)),
            function_timeout=_number(env, Env.FUNCTION_TIMEOUT, DEFAULT_FUNCTION_TIMEOUT_SECONDS, 3, 900),
            lease_seconds=_number(env, Env.LEASE_SECONDS, DEFAULT_LEASE_SECONDS, 4, 86_400),
            show_keys=frozenset(k.strip() for k in env.get(Env.SHOW_KEYS, "").split(",") if k.strip()),
            redact_keys=frozenset(k.strip() for k in env.get(Env.REDACT_KEYS, "").split(",") if k.strip()),
            actor=env.get("AWS_LAMBDA_FUNCTION_NAME") or "smx-debug",
            fleet_bucket=env.get(Env.FLEET_BUCKET) or None,
        )


def _account_of(context: Any) -> str | None:
    arn = getattr(context, "invoked_function_arn", None)
    parts = arn.split(":") if isinstance(arn, str) else []
    return parts[4] if len(parts) > 4 and parts[4].isdigit() else None


def _number(
    env: Mapping[str, str], name: str, default: float, low: float, high: float, *, integer: bool = False
) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        kind = "an integer" if integer else "a number"
        raise ConfigError(f"{name}: {raw!r} is not {kind} from {low:g} to {high:g}", field=name, value=raw)
    return float(value)
