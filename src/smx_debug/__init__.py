"""smx-debug: automated guardrails for SageMaker training jobs.

The top-level names are loaded lazily so that ``import smx_debug.actions`` (what the Lambda assets
do) needs only boto3 and the standard library, never pydantic, pandas or the SageMaker SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smx_debug._lazy import lazy_getattr
from smx_debug.errors import (
    AccessDeniedError,
    AwsError,
    ConfigError,
    DataError,
    JobNotFoundError,
    NoDataYetError,
    NotFoundError,
    RegionError,
    SmxDebugError,
    TensorUnavailableError,
    UnknownDtypeError,
    UnknownNameError,
)

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY = {
    "DebugPlan": "smx_debug.config",
    "SmxDebugWarning": "smx_debug.config",
}

__all__ = [
    "AccessDeniedError",
    "AwsError",
    "ConfigError",
    "DataError",
    "DebugPlan",
    "JobNotFoundError",
    "NoDataYetError",
    "NotFoundError",
    "RegionError",
    "SmxDebugError",
    "SmxDebugWarning",
    "TensorUnavailableError",
    "UnknownDtypeError",
    "UnknownNameError",
    "__version__",
]

if TYPE_CHECKING:
    from smx_debug.config import DebugPlan, SmxDebugWarning


__getattr__ = lazy_getattr(__name__, _LAZY)
