"""Quiet by default: our commands and the demo show their own output, not their dependencies' chatter.

Hidden unless ``verbose``: the SageMaker SDK's INFO lines (``sagemaker.config INFO - Not applying SDK
defaults ...``, ``Creating training-job ...``), botocore/boto3 INFO and DEBUG, urllib3's "Connection pool is
full" warnings, werkzeug's request log, moto's notes, and Python warnings raised inside those packages.
Our own warnings (``SmxDebugWarning``) still show. Everything is restored when the block ends.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator

# logger -> the level below which its records are hidden by default
NOISY_LOGGERS: dict[str, int] = {
    "sagemaker": logging.WARNING,
    "sagemaker.config": logging.WARNING,
    "sagemaker.telemetry": logging.ERROR,
    "botocore": logging.WARNING,
    "boto3": logging.WARNING,
    "urllib3": logging.ERROR,
    "werkzeug": logging.WARNING,
    "moto": logging.ERROR,
}
_NOISY_MODULES = r"(sagemaker|botocore|boto3|urllib3|moto|werkzeug|jsii|aws_cdk|pandas|pyarrow|tqdm)(\..*)?"


@contextlib.contextmanager
def quiet_dependencies(*, verbose: bool = False) -> Iterator[None]:
    """Hide the dependencies' INFO lines and warnings for the block; with ``verbose`` show them at INFO."""
    saved = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    with warnings.catch_warnings():
        if verbose:
            for name in NOISY_LOGGERS:
                logging.getLogger(name).setLevel(logging.INFO)
        else:
            for name, level in NOISY_LOGGERS.items():
                logging.getLogger(name).setLevel(level)
            warnings.filterwarnings("ignore", module=_NOISY_MODULES)
        try:
            yield
        finally:
            for name, level in saved.items():
                logging.getLogger(name).setLevel(level)
