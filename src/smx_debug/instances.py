"""SageMaker training instance types: vCPUs, GPUs, Trainium chips, GPU model and list price, from the bundled table.

The one reader of ``htmlreport/instances.json``, which ``tools/instances/generate.py`` generates offline from saved
AWS data (every SageMaker training type in botocore's model; sources and dates in the file). The report's costs,
the evaluator's per-device division of CloudWatch's host sums and the fleet dataset's ``training_jobs`` rows all
look instance types up here. A row's ``price`` is None where no source gave one. Standard library only, and read by
path (not as a resource of ``smx_debug.htmlreport``, whose import would load the report), so the Lambda assets can
ship it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

_PATH = Path(__file__).resolve().parent / "htmlreport" / "instances.json"
_SIZE = re.compile(r"^(?:(\d+)?xlarge|large|medium)$")


@cache
def instance_table() -> dict[str, Any]:
    """The whole table: ``source``, ``as_of``, ``sources`` (file, origin, date), ``note`` and ``instances``."""
    table: dict[str, Any] = json.loads(_PATH.read_text())
    return table


def instance_row(instance_type: str | None) -> Mapping[str, Any] | None:
    """One type's row (``price`` or None, ``vcpus``, ``memory_gib``, ``gpus``, ``gpu_model``, ``gpu_memory_gib``,
    ``trainium``, ``trainium_model``, ``derived``; ``ml.`` prefix optional), None if unknown."""
    if not instance_type:
        return None
    key = instance_type if instance_type.startswith("ml.") else f"ml.{instance_type}"
    row: Mapping[str, Any] | None = instance_table()["instances"].get(key)
    return row


def vcpus_from_size(instance_type: str | None) -> int | None:
    """The vCPUs an AWS size name gives (``large`` and ``medium`` 2, ``xlarge`` 4, ``Nxlarge`` 4N), else None.

    Example:
        >>> vcpus_from_size("ml.p9.48xlarge")
        192
    """
    size = (instance_type or "").rsplit(".", 1)[-1]
    m = _SIZE.match(size)
    if not m:
        return None
    return 2 if size in ("large", "medium") else 4 * int(m.group(1) or 1)
