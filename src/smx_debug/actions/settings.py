"""Deployment settings for the Lambda handlers, read from environment variables once per cold start.

The variable names are a contract with the infrastructure (docs/CONTRACTS.md, "Lambda handlers").
Imports only the standard library.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from smx_debug.contracts import MANAGED_TAG, is_watched
from smx_debug.errors import ConfigError
from smx_debug.tags import ActionSpec, DecodedTags

__all__ = ["DEFAULT_NAMESPACE", "Settings"]

DEFAULT_NAMESPACE = "SmxDebug"
DEFAULT_MAX_ATTEMPTS = 5


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
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    actor: str = "smx-debug"  # recorded in the ledger as who acted (the function name in Lambda)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read ``SMX_*`` variables (and the Lambda runtime's region and function name)."""
        env = os.environ if environ is None else environ
        defaults: list[ActionSpec] = []
        for token in env.get("SMX_DEFAULT_ACTIONS", "").split():
            spec = ActionSpec.parse(token)
            if spec is None:
                raise ConfigError(
                    f"SMX_DEFAULT_ACTIONS: unknown action token {token!r} (stop, notify, notify=<topic arn>)",
                    field="SMX_DEFAULT_ACTIONS",
                    value=token,
                )
            defaults.append(spec)
        raw_attempts = env.get("SMX_MAX_ATTEMPTS", str(DEFAULT_MAX_ATTEMPTS))
        try:
            attempts = int(raw_attempts)
        except ValueError:
            attempts = 0
        if not 1 <= attempts <= 20:
            raise ConfigError(
                f"SMX_MAX_ATTEMPTS: {raw_attempts!r} is not an integer from 1 to 20",
                field="SMX_MAX_ATTEMPTS",
                value=raw_attempts,
            )
        return cls(
            namespace=env.get("SMX_METRIC_NAMESPACE") or DEFAULT_NAMESPACE,
            watch_prefixes=tuple(
                p.strip() for p in env.get("SMX_WATCH_PREFIXES", "").split(",") if p.strip()
            ),
            opt_in_tag=env.get("SMX_OPT_IN_TAG") or MANAGED_TAG,
            default_actions=tuple(defaults),
            ledger_table=env.get("SMX_LEDGER_TABLE") or None,
            topic_arn=env.get("SMX_TOPIC_ARN") or None,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
            max_attempts=attempts,
            actor=env.get("AWS_LAMBDA_FUNCTION_NAME") or "smx-debug",
        )

    def watches(self, job_name: str, tags: Mapping[str, str]) -> bool:
        """True if this deployment may act on the job: a watched name prefix or the opt-in tag set to true."""
        return is_watched(job_name, tags, self.watch_prefixes, self.opt_in_tag)

    def actions_for(self, rule_name: str, decoded: DecodedTags) -> tuple[ActionSpec, ...]:
        """The rule's own actions from the job's tags, then the deployment defaults, without repeats."""
        out: list[ActionSpec] = []
        for spec in (*decoded.actions_for(rule_name), *self.default_actions):
            if spec not in out:
                out.append(spec)
        return tuple(out)
