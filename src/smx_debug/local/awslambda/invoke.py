"""Lambda on the local AWS: a deployed function's handler runs in-process (no Docker).

moto cannot run Lambda code without Docker. Here a function's code is the entry of the handler named by the
function's tag ``smx-debug:handler`` (:data:`smx_debug.contracts.HANDLER_TAG`, set by the infrastructure):
``lambdas/<dir>/handler.py`` and the function in it, as :func:`smx_debug.contracts.handler_entry` says (the
infrastructure's Handler setting comes from there too).

- :func:`invoke_handler` runs one handler as Lambda would: the function's environment (within the call, then
  restored), clients pointed at the local server, a warm module reused while the environment is unchanged
  (the LocalAws's :class:`WarmHandlers`; :func:`reset_handlers` forgets them), an exception captured in the
  :class:`Delivery`; a deployed function's handler gets Lambda's context and fails past its Timeout
  (:mod:`smx_debug.local.awslambda.lambda_context`), and its calls are authorized as its role
  (:mod:`smx_debug.local.iam`).
- :func:`concurrent_invocations` runs one function's handler on several threads at once (an event source
  mapping's concurrent executions, :mod:`smx_debug.local.awslambda.event_sources`).

The deliveries that end here: :mod:`smx_debug.local.events.delivery` (EventBridge), :mod:`smx_debug.local.sns.delivery`
(SNS), :mod:`smx_debug.local.stepfunctions.tasks` (Step Functions' Lambda tasks). This module needs moto, so it is
not part of the Lambda assets.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.util
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from botocore.exceptions import ClientError

from smx_debug.contracts import HANDLER_TAG, handler_entry
from smx_debug.errors import NotFoundError
from smx_debug.local.awslambda.lambda_context import FunctionLimits, function_limits, timed_out
from smx_debug.local.clients import client
from smx_debug.local.iam import guard
from smx_debug.local.iam.principals import environment_of
from smx_debug.local.server import LocalAws

_env_lock = threading.RLock()  # os.environ is process-wide: one in-process Lambda invocation at a time


@dataclass(frozen=True)
class Delivery:
    """One in-process Lambda invocation: which function/handler ran and what it returned or raised."""

    function: str
    handler: str
    result: Any = None
    error: BaseException | None = None


class WarmHandlers(dict[str, ModuleType]):
    """One LocalAws's warm handler modules, by function and environment (a warm container each)."""


def reset_handlers(aws: LocalAws) -> None:
    """Forget ``aws``'s warm in-process handlers, so the next delivery is a cold start, and its SNS -> Lambda
    deliveries not yet collected (call after ``aws.reset()``: they belong to resources that are gone)."""
    with _env_lock:
        aws.recorder(WarmHandlers).clear()
        aws.recorder(Deliveries).take()


class Deliveries:
    """One LocalAws's in-process Lambda invocations made by a service (SNS, Step Functions), in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sns: list[Delivery] = []
        self._tasks: list[Delivery] = []

    def add(self, delivery: Delivery, *, sns: bool) -> None:
        with self._lock:
            (self._sns if sns else self._tasks).append(delivery)

    def take(self) -> list[Delivery]:
        """The SNS -> Lambda deliveries made so far (and clears them)."""
        with self._lock:
            out, self._sns = self._sns, []
            return out

    def tasks(self) -> list[Delivery]:
        """The Step Functions Lambda tasks run so far."""
        with self._lock:
            return list(self._tasks)

    def clear_tasks(self) -> None:
        with self._lock:
            self._tasks.clear()


def send_to_queue(aws: LocalAws, queue_arn: str, body: str) -> None:
    """Send ``body`` to the queue ``queue_arn`` as the account (a delivery's dead-letter queue)."""
    account, name = queue_arn.split(":", 5)[4:]
    sqs = client(aws, "sqs")
    sqs.send_message(QueueUrl=sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"],
                     MessageBody=body)


def _lambdas_dir(given: Path | None) -> Path:
    if given is not None:
        return given
    candidates = [Path.cwd(), *Path.cwd().parents, *Path(__file__).resolve().parents]
    for base in candidates:
        if (base / "lambdas").is_dir():
            return base / "lambdas"
    raise NotFoundError("no lambdas/ directory found above the working directory; pass lambdas_dir=")


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _load(aws: LocalAws, handler_dir: Path, cache_key: str) -> ModuleType:
    warm = aws.recorder(WarmHandlers)
    module = warm.get(cache_key)
    if module is None:
        path = handler_dir / "handler.py"
        if not path.is_file():
            raise NotFoundError(f"handler {str(path)!r} does not exist")
        name = f"_smx_lambda_{hashlib.sha1(cache_key.encode()).hexdigest()[:12]}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise NotFoundError(f"handler {str(path)!r} cannot be loaded")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        warm[cache_key] = module
    return module


def _invocation_env(aws: LocalAws, handler: str, environment: Mapping[str, str] | None,
                    function_name: str | None) -> tuple[dict[str, str], str, FunctionLimits | None]:
    """The invocation's environment, its warm-module key, and the limits of the function when it is deployed.
    A deployed function runs as its role: its own key and the local IAM's client plugin (smx_debug.local.iam).
    Its GetFunction answer is read once, as the local account, before the function's credentials apply."""
    guard.install()
    described = _described(aws, function_name) if function_name else None
    role = environment_of(aws, described) if described else None
    env = {**dict(environment or {}), **aws.environ(), **(role or {}),
           "AWS_LAMBDA_FUNCTION_NAME": function_name or handler}
    limits = function_limits(described["Configuration"]) if described else None
    return env, json.dumps([handler, function_name, sorted(env.items())]), limits


def _described(aws: LocalAws, function_name: str) -> dict[str, Any] | None:
    try:
        return dict(client(aws, "lambda").get_function(FunctionName=function_name))
    except ClientError:
        return None  # not deployed: nothing to enforce, no context


def _call(module: ModuleType, handler: str, function_name: str | None, event: Any,
          limits: FunctionLimits | None) -> Delivery:
    context = limits.context() if limits else None
    try:
        entry = getattr(module, handler_entry(handler)[1].partition(".")[2])  # the function's Handler setting
        result = entry(copy.deepcopy(event), context)
    except Exception as exc:
        error: BaseException | None = exc
        result = None
    else:
        error = None
    late = timed_out(context, limits) if context and limits else None
    if late is not None:  # AWS would have ended it at the Timeout: whatever it returned or raised is lost
        return Delivery(function=function_name or handler, handler=handler, error=late)
    return Delivery(function=function_name or handler, handler=handler, result=result, error=error)


def invoke_handler(
    aws: LocalAws,
    handler: str,
    event: Any,
    environment: Mapping[str, str] | None = None,
    *,
    function_name: str | None = None,
    lambdas_dir: Path | None = None,
) -> Delivery:
    """Run ``handler``'s entry (``lambdas/<dir>/handler.py``, :func:`~smx_debug.contracts.handler_entry`) in-process
    as Lambda would, with ``environment`` and clients
    pointed at the local server. A module is reused while the function's environment is unchanged
    (a warm container); exceptions are captured in the Delivery, as Lambda captures them.

    When ``function_name`` is deployed on ``aws``, its code runs as the function's role: every call its
    clients make is authorized by :mod:`smx_debug.local.iam` against the role's policies first."""
    env, key, limits = _invocation_env(aws, handler, environment, function_name)
    with _env_lock, _environment(env):
        try:
            module = _load(aws, _lambdas_dir(lambdas_dir) / handler_entry(handler)[0], key)
        except Exception as exc:
            return Delivery(function=function_name or handler, handler=handler, error=exc)
        return _call(module, handler, function_name, event, limits)


@contextlib.contextmanager
def concurrent_invocations(
    aws: LocalAws,
    handler: str,
    environment: Mapping[str, str] | None = None,
    *,
    function_name: str | None = None,
    lambdas_dir: Path | None = None,
) -> Iterator[Callable[[Any], Delivery]]:
    """Within the block, ``invoke(event)`` runs the function's handler as :func:`invoke_handler` does, and may
    be called from several threads at once (concurrent executions of one function, e.g. an event source
    mapping's). The process environment is the function's for the whole block (other invocations wait), and
    the warm module is shared, as one container's would be by its requests."""
    env, key, limits = _invocation_env(aws, handler, environment, function_name)
    with _env_lock, _environment(env):
        module = _load(aws, _lambdas_dir(lambdas_dir) / handler_entry(handler)[0], key)
        yield lambda event: _call(module, handler, function_name, event, limits)


def function_target(aws: LocalAws, arn: str) -> tuple[str, str | None, dict[str, str]]:
    """A function's name, its handler tag (None: not ours) and its environment variables."""
    response = client(aws, "lambda").get_function(FunctionName=arn)
    config = response["Configuration"]
    env = (config.get("Environment") or {}).get("Variables") or {}
    return config["FunctionName"], (response.get("Tags") or {}).get(HANDLER_TAG), dict(env)

