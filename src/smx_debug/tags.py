"""How custom actions travel with a training job: as training-job tags.

The debug plan renders, per rule, the actions our infrastructure carries out (stop the job, notify a
topic, start the retraining workflow) into tags on CreateTrainingJob. The Lambda handlers read them
back from the event or from ``ListTags``. Tags survive the job, show in the console, and need no
extra store.

Encoding (all keys share the ``smx-debug:`` prefix; ``aws:`` is reserved by AWS):

- ``smx-debug:managed`` = ``true``: opt-in; deployments that watch by tag only touch such jobs.
- ``smx-debug:plan`` = the plan's name (optional, for people and dashboards).
- ``smx-debug:on:<RuleConfigurationName>`` = space-separated action tokens:
  ``stop``, ``notify`` (the deployment's topic), ``notify=<topic ARN>``, ``retrain``.

SageMaker tag limits apply: keys up to 128 characters, values up to 256, characters from
``[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]``, at most 50 tags. Encoding checks them and raises ConfigError;
decoding is lenient (unknown tokens are returned, not raised) because it runs on untrusted events.
Tag names and the opt-in rule are owned by :mod:`smx_debug.contracts`. This module imports only the
standard library: the Lambda assets ship it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from smx_debug.contracts import (
    MANAGED_TAG,
    OPT_IN_VALUE,
    PLAN_TAG,
    RULE_TAG_PREFIX,
    TAG_PREFIX,
    Env,
    is_opted_in,
    is_watched,
)
from smx_debug.errors import ConfigError

ACTION_KINDS = ("stop", "notify", "retrain")

MAX_KEY_LEN = 128
MAX_VALUE_LEN = 256
MAX_TAGS = 50
_TAG_CHARS = re.compile(r"^[\w\s.:/=+\-@]*$")
_TOPIC_ARN = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$")


@dataclass(frozen=True)
class ActionSpec:
    """One custom action: ``kind`` is stop, notify or retrain; ``target`` is a topic ARN for notify."""

    kind: str
    target: str | None = None

    def token(self) -> str:
        return self.kind if self.target is None else f"{self.kind}={self.target}"

    @classmethod
    def parse(cls, token: str) -> ActionSpec | None:
        kind, sep, target = token.partition("=")
        if kind not in ACTION_KINDS:
            return None
        if sep:
            if kind != "notify" or not _TOPIC_ARN.match(target):
                return None
            return cls(kind, target)
        return cls(kind)


@dataclass(frozen=True)
class DecodedTags:
    """What a job's tags say: opt-in, plan name, per-rule actions and tokens we did not understand."""

    managed: bool = False
    plan: str | None = None
    actions: Mapping[str, tuple[ActionSpec, ...]] = field(default_factory=dict)
    unknown_tokens: tuple[str, ...] = ()

    def actions_for(self, rule_name: str) -> tuple[ActionSpec, ...]:
        return tuple(self.actions.get(rule_name, ()))


def _check(key: str, value: str) -> None:
    if key.startswith("aws:"):
        raise ConfigError(f"tag key {key!r}: the 'aws:' prefix is reserved", field="tags", value=key)
    if not 1 <= len(key) <= MAX_KEY_LEN:
        raise ConfigError(
            f"tag key {key!r} is {len(key)} characters; SageMaker allows 1-{MAX_KEY_LEN} "
            "(shorten the rule name)",
            field="tags",
            value=key,
        )
    if len(value) > MAX_VALUE_LEN:
        raise ConfigError(
            f"tag {key!r}: value is {len(value)} characters; SageMaker allows {MAX_VALUE_LEN}",
            field="tags",
            value=value,
        )
    for part, what in ((key, "key"), (value, "value")):
        if not _TAG_CHARS.match(part):
            raise ConfigError(
                f"tag {what} {part!r} has characters SageMaker tags do not allow "
                "(letters, digits, spaces and _ . : / = + - @ only)",
                field="tags",
                value=part,
            )


def encode_tags(
    rule_actions: Mapping[str, Sequence[ActionSpec]],
    *,
    managed: bool = True,
    plan: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> list[dict[str, str]]:
    """Render custom actions (and the user's own ``extra`` tags) as CreateTrainingJob ``Tags``.

    Rules without custom actions get no tag. Output order is deterministic: user tags, then ours.

    Example:
        >>> encode_tags({"ExplodingTensor": [ActionSpec("stop")]}, plan="guard")
        [{'Key': 'smx-debug:managed', 'Value': 'true'}, {'Key': 'smx-debug:plan', 'Value': 'guard'}, \
{'Key': 'smx-debug:on:ExplodingTensor', 'Value': 'stop'}]
    """
    tags: list[dict[str, str]] = []
    for key, value in (extra or {}).items():
        if key.startswith(TAG_PREFIX):
            raise ConfigError(
                f"tag key {key!r}: the {TAG_PREFIX!r} prefix is reserved for smx-debug", field="tags", value=key
            )
        tags.append({"Key": key, "Value": value})
    if managed:
        tags.append({"Key": MANAGED_TAG, "Value": OPT_IN_VALUE})
    if plan is not None:
        tags.append({"Key": PLAN_TAG, "Value": plan})
    for rule_name, specs in rule_actions.items():
        tokens: list[str] = []
        for spec in specs:
            if spec.token() not in tokens:
                tokens.append(spec.token())
        if tokens:
            tags.append({"Key": RULE_TAG_PREFIX + rule_name, "Value": " ".join(tokens)})
    for tag in tags:
        _check(tag["Key"], tag["Value"])
    if len(tags) > MAX_TAGS:
        raise ConfigError(
            f"tags: {len(tags)} tags; SageMaker allows at most {MAX_TAGS} per training job",
            field="tags",
            value=len(tags),
        )
    return tags


def tags_as_dict(tags: object) -> dict[str, str]:
    """Normalise tags given as ``[{"Key", "Value"}]`` (API) or ``{key: value}`` (events); junk is dropped."""
    out: dict[str, str] = {}
    if isinstance(tags, Mapping):
        items: Iterable[tuple[object, object]] = tags.items()
    elif isinstance(tags, list):
        items = ((t.get("Key"), t.get("Value")) for t in tags if isinstance(t, Mapping))
    else:
        return out
    for key, value in items:
        if isinstance(key, str) and isinstance(value, str):
            out[key] = value
    return out


def decode_tags(tags: object) -> DecodedTags:
    """Read smx-debug's tags back; never raises on malformed input."""
    flat = tags_as_dict(tags)
    actions: dict[str, tuple[ActionSpec, ...]] = {}
    unknown: list[str] = []
    for key, value in flat.items():
        if not key.startswith(RULE_TAG_PREFIX):
            continue
        rule = key[len(RULE_TAG_PREFIX) :]
        specs: list[ActionSpec] = []
        for token in value.split():
            spec = ActionSpec.parse(token)
            if spec is None:
                unknown.append(token)
            elif spec not in specs:
                specs.append(spec)
        if rule and specs:
            actions[rule] = tuple(specs)
    return DecodedTags(
        managed=is_opted_in(flat),
        plan=flat.get(PLAN_TAG),
        actions=actions,
        unknown_tokens=tuple(unknown),
    )


def watch_rule_from_env(env: Mapping[str, str]) -> tuple[tuple[str, ...], str]:
    """The deployment's watch rule as the stack passes it to every function: ``SMX_WATCH_PREFIXES`` (comma-separated
    job-name prefixes) and ``SMX_OPT_IN_TAG`` (the opt-in tag key, :data:`MANAGED_TAG` when unset), the arguments of
    :func:`watched_actions`."""
    prefixes = tuple(p.strip() for p in env.get(Env.WATCH_PREFIXES, "").split(",") if p.strip())
    return prefixes, env.get(Env.OPT_IN_TAG) or MANAGED_TAG


def watched_actions(
    job_name: str,
    tags: Mapping[str, str],
    *,
    prefixes: Sequence[str],
    opt_in_tag: str | None,
    defaults: Sequence[ActionSpec] = (),
    rules: Iterable[str] = (),
) -> dict[str, tuple[ActionSpec, ...]] | None:
    """Is this job watched by a deployment, and which actions apply: the one decision, for the action handlers and
    the evaluator alike.

    None when the deployment does not watch the job (no watched name ``prefixes``, no ``opt_in_tag`` set to true:
    :func:`smx_debug.contracts.is_watched`); else, for each of ``rules``, its own actions from the job's tags then
    the deployment's ``defaults``, without repeats.
    """
    if not is_watched(job_name, tags, prefixes, opt_in_tag):
        return None
    decoded = decode_tags(tags)
    out: dict[str, tuple[ActionSpec, ...]] = {}
    for rule in rules:
        merged: list[ActionSpec] = []
        for spec in (*decoded.actions_for(rule), *defaults):
            if spec not in merged:
                merged.append(spec)
        out[rule] = tuple(merged)
    return out
