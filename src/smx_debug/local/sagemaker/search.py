"""SageMaker Search over training jobs on the local AWS, as SageMaker documents it.

The evaluator finds opted-in jobs with ``Search(Resource="TrainingJob")`` and a tag filter (its role may call
ListTags only on watched jobs; Search is allowed on ``*``). moto 5's Search is kinder than SageMaker in ways
that would hide bugs: after a ``Tags.<key>`` filter it stops checking the other filters (a status filter
placed after it is ignored), a tag filter with any operator but ``Equals`` matches every job, ``Exists``,
``NotExists`` and ``In`` are not implemented, ``MaxResults`` and ``NextToken`` are ignored (every match in one
page), and a result is moto's internal attributes rather than the ``TrainingJob`` shape.

:func:`install` replaces moto's Search response for ``Resource="TrainingJob"`` (other resources stay moto's),
through moto's public response class:

- ``SearchExpression``: ``Filters`` (every operator of the API's ``Operator`` enum; ``Value`` required except
  for ``Exists``/``NotExists``, where it is refused; no ``Operator`` means ``Equals``), ``SubExpressions`` and
  ``Operator`` (``And``/``Or``, default ``And``). ``NestedFilters`` is not emulated and refused. At most one
  ``Contains`` (the API's limit for training jobs).
- Properties: any member of the ``TrainingJob`` shape, dotted paths into it (``ResourceConfig.InstanceType``),
  ``Tags.<key>`` and ``HyperParameters.<name>``; an unknown property is a ``ValidationException`` naming it.
  Text compares as text (``GreaterThan`` and friends are refused), numbers as numbers, timestamps as ISO 8601.
  A property a job lacks matches only ``NotExists``.
- ``SortBy`` (default ``LastModifiedTime``), ``SortOrder`` (default ``Descending``), ``MaxResults`` (default
  10, as the API) and ``NextToken`` (an opaque token; a token from another query is refused).
- Each result is ``{"TrainingJob": <DescribeTrainingJob's answer, limited to the shape's members> + "Tags"}``.

Search is not eventually consistent here (SageMaker's index lags job creation by seconds); see
docs/evaluator.md for how the evaluator copes. This module needs moto, so it is not part of the Lambda assets.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import cache
from operator import eq, ge, gt, le, lt, ne
from typing import Any

import botocore.session
from moto.core.responses import ActionResult
from moto.sagemaker.exceptions import ValidationError
from moto.sagemaker.responses import SageMakerResponse

from smx_debug import _json as bounded_json
from smx_debug.local.patching import patch_once

DEFAULT_MAX_RESULTS = 10
_TEXT_ONLY = {"In", "Contains"}
_ORDERED = {"GreaterThan", "GreaterThanOrEqualTo", "LessThan", "LessThanOrEqualTo"}
_NO_VALUE = {"Exists", "NotExists"}


class _Invalid(Exception):
    """A request SageMaker would refuse with ValidationException (re-raised as moto's error in :func:`install`)."""


@cache
def _members() -> tuple[frozenset[str], frozenset[str]]:
    """The TrainingJob shape's member names, and the timestamp ones (from botocore's SageMaker model)."""
    shape: Any = botocore.session.get_session().get_service_model("sagemaker").shape_for("TrainingJob")
    members: Mapping[str, Any] = shape.members
    return frozenset(members), frozenset(n for n, s in members.items() if s.type_name == "timestamp")


def _lookup(job: Mapping[str, Any], name: str) -> tuple[bool, Any]:
    """(present, value) of property ``name`` on a TrainingJob record; _Invalid for a property it cannot have."""
    members, _ = _members()
    head, _, rest = name.partition(".")
    if head not in members:
        raise _Invalid(f"Unknown property name: {name}")
    if head == "Tags":
        if not rest:
            raise _Invalid(f"Unknown property name: {name}")
        tags = {t["Key"]: t["Value"] for t in job.get("Tags", [])}
        return (rest in tags), tags.get(rest)
    value: Any = job
    for part in [head, *(rest.split(".") if rest else [])]:
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _as_time(text: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise _Invalid(f"Value {text!r} is not an ISO 8601 date-time (YYYY-mm-dd'T'HH:MM:SS)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _compare(actual: Any, operator: str, expected: str, name: str) -> bool:
    if isinstance(actual, datetime):
        when = _as_time(expected)
        if operator in _TEXT_ONLY:
            raise _Invalid(f"Operator {operator} is only supported for text properties, not {name}")
        return _ordered(actual, operator, when)
    if isinstance(actual, int | float):  # bool too
        if operator in _TEXT_ONLY:
            raise _Invalid(f"Operator {operator} is only supported for text properties, not {name}")
        try:
            number = float(expected)
        except ValueError:
            raise _Invalid(f"Value {expected!r} of {name} must be a number") from None
        return _ordered(float(actual), operator, number)
    if not isinstance(actual, str):
        raise _Invalid(f"Property {name} cannot be compared with a value")
    if operator in _ORDERED:
        raise _Invalid(f"Operator {operator} is not supported for text properties such as {name}")
    if operator == "In":
        return actual in expected.split(",")
    if operator == "Contains":
        return expected in actual
    return (actual == expected) == (operator == "Equals")


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "Equals": eq, "NotEquals": ne, "GreaterThan": gt, "GreaterThanOrEqualTo": ge, "LessThan": lt,
    "LessThanOrEqualTo": le,
}


def _ordered(actual: Any, op: str, expected: Any) -> bool:
    return bool(_COMPARE[op](actual, expected))


def _filter_matches(job: Mapping[str, Any], flt: Mapping[str, Any]) -> bool:
    name = str(flt.get("Name", ""))
    operator = str(flt.get("Operator") or "Equals")
    value = flt.get("Value")
    if operator in _NO_VALUE and value is not None:
        raise _Invalid(f"Filter {name}: operator {operator} takes no Value")
    if operator not in _NO_VALUE and value is None:
        raise _Invalid(f"Filter {name}: operator {operator} needs a Value")
    present, actual = _lookup(job, name)
    if operator in _NO_VALUE:
        return present == (operator == "Exists")
    return present and _compare(actual, operator, str(value), name)


def _check(expression: Mapping[str, Any], contains: list[int]) -> None:
    if expression.get("NestedFilters"):
        raise _Invalid("NestedFilters are not supported for TrainingJob by the local AWS")
    for flt in expression.get("Filters", []) or []:
        if flt.get("Operator") == "Contains":
            contains.append(1)
    if len(contains) > 1:
        raise _Invalid("'CONTAINS' operator usage limit of 1 exceeded.")
    for sub in expression.get("SubExpressions", []) or []:
        _check(sub, contains)


def _matches(job: Mapping[str, Any], expression: Mapping[str, Any]) -> bool:
    results = [_filter_matches(job, f) for f in expression.get("Filters", []) or []]
    results += [_matches(job, sub) for sub in expression.get("SubExpressions", []) or []]
    if not results:
        return True
    return any(results) if expression.get("Operator") == "Or" else all(results)


def _record(backend: Any, name: str, job: Any) -> dict[str, Any]:
    members, _ = _members()
    described = backend.describe_training_job(name)  # as DescribeTrainingJob answers (with the local additions)
    record = {k: v for k, v in described.items() if k in members and k != "Tags"}
    record["Tags"] = [{"Key": t["Key"], "Value": t["Value"]} for t in getattr(job, "tags", []) or []]
    return record


def _token(query: str, offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"q": query, "o": offset}).encode()).decode()


def _offset(token: str | None, query: str) -> int:
    if not token:
        return 0
    try:
        body = bounded_json.loads(base64.urlsafe_b64decode(token.encode()))  # a client's token: maybe 3,000 deep
        if body["q"] == query and isinstance(body["o"], int) and body["o"] >= 0:
            return int(body["o"])
    except (ValueError, KeyError, TypeError):
        pass
    raise _Invalid("The NextToken is invalid for this request")


def _search_training_jobs(backend: Any, params: Mapping[str, Any]) -> dict[str, Any]:
    """Search's answer for ``Resource="TrainingJob"`` over ``backend`` (moto's SageMaker backend).

    Raises:
        _Invalid: what SageMaker refuses with ValidationException (the message says why).
    """
    expression = params.get("SearchExpression") or {}
    _check(expression, [])
    sort_by = params.get("SortBy") or "LastModifiedTime"
    order = params.get("SortOrder") or "Descending"
    limit = int(params.get("MaxResults") or DEFAULT_MAX_RESULTS)
    query = hashlib.sha256(json.dumps([expression, sort_by, order], sort_keys=True, default=str).encode()).hexdigest()
    start = _offset(params.get("NextToken"), query)
    records = [_record(backend, name, job) for name, job in list(backend.training_jobs.items())]
    found = [r for r in records if _matches(r, expression)]
    keyed = []
    for r in found:
        present, value = _lookup(r, sort_by)
        if present and isinstance(value, Mapping | list):
            raise _Invalid(f"SortBy {sort_by} is not a sortable property")
        keyed.append(((present, value if present else ""), r["TrainingJobName"], r))
    keyed.sort(key=lambda k: (k[0][0], _sort_key(k[0][1]), k[1]), reverse=(order == "Descending"))
    page = [r for _, _, r in keyed[start : start + limit]]
    out: dict[str, Any] = {"Results": [{"TrainingJob": r} for r in page]}
    if start + limit < len(keyed):
        out["NextToken"] = _token(query, start + limit)
    return out


def _sort_key(value: Any) -> tuple[int, Any]:
    if isinstance(value, datetime):
        return 0, value.timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return 0, float(value)
    return 1, str(value)


def install() -> None:
    """Serve Search over training jobs as above (once per process). Idempotent."""
    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def search(self: Any) -> Any:
            if self._get_param("Resource") != "TrainingJob":
                return original(self)
            params = {k: self._get_param(k) for k in
                      ("SearchExpression", "SortBy", "SortOrder", "MaxResults", "NextToken")}
            try:
                return ActionResult(_search_training_jobs(self.sagemaker_backend, params))
            except _Invalid as exc:
                raise ValidationError(message=str(exc)) from None

        return search

    patch_once(SageMakerResponse, "search", wrap)
