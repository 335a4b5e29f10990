"""Throttling on the local AWS: make the next N calls of one API fail as AWS does under load.

AWS answers a caller over its rate with error code ``Throttling`` (CloudWatch) or ``ThrottlingException``
(SageMaker, DynamoDB's ``ThrottlingException``/``ProvisionedThroughputExceededException``); botocore's standard
retry mode retries them with backoff. moto never throttles. :func:`throttle` wraps moto's request dispatch
(``BaseResponse.call_action``, moto's public entry point for every action) so that the next ``times`` calls of
``action`` on ``service`` get that error, then the calls succeed again. ``jobs=`` limits it to calls about
those training jobs (``TrainingJobName``, or a ``ResourceArn`` ending in ``/<job>``), as when one job's calls
hit a hot partition. Every throttled call is counted.

Example::

    with throttle("cloudwatch", "GetMetricData", times=2) as throttled:
        run_evaluator(...)          # the first two GetMetricData calls fail with Throttling
    assert throttled.count == 2
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any

from moto.core.exceptions import ServiceException
from moto.core.responses import ActionResult, BaseResponse

from smx_debug.errors import ConfigError
from smx_debug.local.patching import patch_once

_lock = threading.RLock()
_rules: list[Throttled] = []

_CODES = {"cloudwatch": "Throttling", "sagemaker": "ThrottlingException", "dynamodb": "ThrottlingException"}


@dataclass
class Throttled:
    """One active throttling rule: ``remaining`` calls still to fail, ``count`` failed so far."""

    service: str
    action: str
    remaining: int
    code: str
    count: int = 0
    jobs: frozenset[str] | None = None  # only calls about these training jobs


def _install() -> None:
    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def call_action(self: Any) -> Any:
            rule = _match(str(getattr(self, "service_name", "") or ""), self._get_action(), lambda: _job_of(self))
            if rule is None:
                return original(self)
            error = _throttling_error(ServiceException)(rule.code, "Rate exceeded")
            with warnings.catch_warnings():  # moto warns that the code is not in the model: AWS sends it anyway
                warnings.simplefilter("ignore", UserWarning)
                status, headers, body = self.serialized(ActionResult(error))
            # The service model may not declare this error; AWS sends throttling as HTTP 400.
            return 400 if status == 500 else status, headers, body

        return call_action

    patch_once(BaseResponse, "call_action", wrap)  # moto's dispatch entry point


def _throttling_error(base: type[Any]) -> type[Any]:
    # Defined here, outside moto's packages, so moto serialises it with the called service's own model.
    return type("ThrottlingError", (base,), {"__module__": __name__})


def _job_of(response: Any) -> str:
    """The training job a request is about (its name, or the last part of its ARN), or ""."""
    try:
        name = response._get_param("TrainingJobName") or response._get_param("ResourceArn") or ""
    except (ValueError, TypeError, AttributeError):  # a body moto cannot read as parameters
        return ""
    return str(name).rsplit("/", 1)[-1]


def _match(service: str, action: str, job: Callable[[], str]) -> Throttled | None:
    with _lock:
        for rule in _rules:
            if rule.service == service and rule.action == action and rule.remaining > 0 and (
                    rule.jobs is None or job() in rule.jobs):
                rule.remaining -= 1
                rule.count += 1
                return rule
    return None


@contextlib.contextmanager
def throttle(
    service: str, action: str, *, times: int, code: str | None = None, jobs: Collection[str] | None = None
) -> Iterator[Throttled]:
    """Throttle the next ``times`` calls of ``service``'s ``action`` (e.g. ``"cloudwatch"``, ``"GetMetricData"``),
    or only those about the training jobs ``jobs``.

    Raises:
        ConfigError: ``times`` is not a positive integer.
    """
    if not isinstance(times, int) or isinstance(times, bool) or times < 1:
        raise ConfigError(f"throttle: times must be a positive integer, got {times!r}", field="times", value=times)
    _install()
    rule = Throttled(service, action, times, code or _CODES.get(service, "ThrottlingException"),
                     jobs=None if jobs is None else frozenset(jobs))
    with _lock:
        _rules.append(rule)
    try:
        yield rule
    finally:
        with _lock:
            _rules.remove(rule)
