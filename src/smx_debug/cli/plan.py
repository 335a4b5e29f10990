"""`smx-debug plan validate|render` (options in ``cli._parser``): check a debug plan and print what SageMaker gets."""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from typing import Any

from smx_debug.cli._output import emit, fixed_format, output_format
from smx_debug.config import DebugPlan, SmxDebugWarning


def _load(args: argparse.Namespace) -> DebugPlan:
    plan = DebugPlan.from_file(args.file)
    if getattr(args, "output_path", None):
        plan = plan.with_output_path(args.output_path)
    return plan


def validate(args: argparse.Namespace) -> int:
    plan = _load(args)
    found = plan.validate(job_name=args.job_name)
    for message in found:
        print(f"warning: {message}", file=sys.stderr)
    rules = len(plan.rules)
    if output_format(args) == "json":
        emit({"file": args.file, "rules": rules, "warnings": list(found)})
    else:
        emit(f"ok: {args.file}: {rules} rule{'s' if rules != 1 else ''}, "
             f"{len(found)} warning{'s' if len(found) != 1 else ''}")
    return 0


def _sdk_object(obj: Any) -> Any:
    """A JSON view of an SDK object: what it serializes to in the request."""
    for method in ("_to_request_dict", "to_debugger_rule_config_dict", "to_profiler_rule_config_dict"):
        fn = getattr(obj, method, None)
        if callable(fn):
            name = type(obj).__name__
            return {"type": name, "request": fn()}
    return obj


def render(args: argparse.Namespace) -> int:
    fixed_format(args, "json", "plan render")
    plan = _load(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if args.format == "request":
            out: Any = plan.to_request_dict(job_name=args.job_name)
        else:
            # the SDK logs its config lookup to stdout at import: keep stdout pure JSON
            with contextlib.redirect_stdout(sys.stderr):
                kwargs = plan.to_estimator_kwargs()
            out = {
                key: [_sdk_object(v) for v in value] if key == "rules" else _sdk_object(value)
                for key, value in kwargs.items()
            }
    for w in caught:
        if issubclass(w.category, SmxDebugWarning):
            print(f"warning: {w.message}", file=sys.stderr)
    emit(out)
    return 0
