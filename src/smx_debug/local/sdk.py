"""The SageMaker Python SDK v2 pointed at the embedded local AWS.

Kept apart from :mod:`smx_debug.local.server` because it needs the optional ``sagemaker`` package.
"""

from __future__ import annotations

import logging
from typing import Any

from smx_debug.local import install
from smx_debug.local.server import LocalAws


def disable_sdk_telemetry() -> None:
    """Make the SDK's telemetry a no-op for this process.

    ``Estimator.fit`` reports telemetry to an AWS endpoint, which the local AWS (no network) cannot reach.
    The SDK's documented opt-out (``TelemetryOptOut`` in its config) is re-validated against a JSON schema on
    every lookup, about 10 s per ``fit``; replacing the sender is the cheap equivalent.
    """
    from sagemaker.telemetry import telemetry_logging  # local: the optional sagemaker package, on first use

    telemetry_logging._send_telemetry_request = lambda *args, **kwargs: None


def sagemaker_session(aws: LocalAws, *, boto_session: Any = None, sagemaker_client: Any = None,
                      default_bucket: str | None = None) -> Any:
    """A ``sagemaker.Session`` whose every call goes to ``aws``: no real STS, no real default bucket.

    The SDK finds the account (STS ``GetCallerIdentity``) and creates its default bucket
    ``sagemaker-<region>-<account>`` through clients it makes with explicit endpoints; the local session sends
    those to ``aws`` as well. ``boto_session`` (one of ``aws``'s, by default ``aws.session()``) is whose calls
    they are: ``as_principal(...).session()`` makes them a principal's, authorized by the local IAM.
    Telemetry is off; the SDK's INFO lines are hidden unless its loggers are set.
    """
    # The SDK's INFO lines ("Creating training-job ...", where it looked for its config) would reach the root
    # handler its own modules install at import (logging.basicConfig(level=INFO)): quiet unless configured.
    for name in ("sagemaker", "sagemaker.config"):
        sdk_logger = logging.getLogger(name)
        if sdk_logger.level == logging.NOTSET:
            sdk_logger.setLevel(logging.WARNING)
    from sagemaker.session import Session  # local: optional, and its import sets up logging: after the levels

    install(aws)  # jobs created through this session keep their ProfilerConfig, as on SageMaker
    disable_sdk_telemetry()
    boto_session = boto_session if boto_session is not None else aws.session()
    return Session(
        boto_session=boto_session,
        sagemaker_client=sagemaker_client if sagemaker_client is not None else boto_session.client("sagemaker"),
        default_bucket=default_bucket,
    )
