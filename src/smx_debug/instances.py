"""SageMaker training instance types: vCPUs, GPUs, GPU model and list price, from the bundled table.

The one reader of ``htmlreport/instances.json`` (source and date in the file): the report's costs, the
evaluator's per-device division of CloudWatch's host sums and the fleet dataset's ``training_jobs`` rows all
look instance types up here. Standard library only, and read by path (not as a resource of
``smx_debug.htmlreport``, whose import would load the report), so the Lambda assets can ship it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["instance_row", "instance_table"]

_PATH = Path(__file__).resolve().parent / "htmlreport" / "instances.json"


@cache
def instance_table() -> dict[str, Any]:
    """The whole table: ``source``, ``url``, ``as_of``, ``note`` and ``instances`` (type -> row)."""
    table: dict[str, Any] = json.loads(_PATH.read_text())
    return table


def instance_row(instance_type: str | None) -> Mapping[str, Any] | None:
    """One type's row (``price``, ``vcpus``, ``gpus``, ``gpu_model``; ``ml.`` prefix optional), None if unknown."""
    if not instance_type:
        return None
    key = instance_type if instance_type.startswith("ml.") else f"ml.{instance_type}"
    row: Mapping[str, Any] | None = instance_table()["instances"].get(key)
    return row
