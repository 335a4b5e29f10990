"""`smx-debug rules evaluate`: run the built-in rules locally, with what-if parameters and a live mode."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from smx_debug.cli._args import (
    check_output_dir,
    check_output_file,
    non_negative_int,
    positive_float,
    require_data,
)
from smx_debug.errors import ConfigError

__all__ = ["add_rule_options", "register", "rule_selection"]


def add_rule_options(parser: argparse.ArgumentParser) -> None:
    """Options shared with `smx-debug report`: which rules, with which parameters, from which source."""
    parser.add_argument("job_or_path", metavar="JOB_OR_PATH",
                        help="training job name, s3:// profiler-output prefix, or local folder/file")
    parser.add_argument("--plan", metavar="FILE", help="debug plan whose rules and parameters to evaluate")
    parser.add_argument("--rule", action="append", default=[], metavar="NAME", help="evaluate only this rule (repeatable)")
    parser.add_argument("--set", action="append", default=[], metavar="Rule.param=value", dest="sets",
                        help="override a parameter (repeatable): what-if thresholds without re-running the job")
    parser.add_argument("--source", choices=["auto", "debugger", "cloudwatch"], default="auto",
                        help="for a job name: Debugger profiler output, CloudWatch instance metrics, or auto")


def _plan_rules(path: str) -> tuple[list[str], dict[str, dict[str, Any]], list[str]]:
    from smx_debug.config import DebugPlan
    from smx_debug.evaluate import PROFILER_RULES, REGISTRY

    plan = DebugPlan.from_file(path)
    names: list[str] = []
    overrides: dict[str, dict[str, Any]] = {}
    skipped: list[str] = []
    by_lower = {r.lower(): r for r in PROFILER_RULES}
    for rc in plan.rules:
        name = rc.spec.name
        if name == "ProfilerReport":
            for rule in PROFILER_RULES:
                if rule not in names:
                    names.append(rule)
            for key, value in rc.parameters.items():
                head, _, param = key.partition("_")
                target = by_lower.get(head.lower())
                if target is not None:
                    overrides.setdefault(target, {})[param.lower()] = value
        elif name in REGISTRY:
            if name not in names:
                names.append(name)
            overrides.setdefault(name, {}).update(rc.parameters)
        else:
            skipped.append(name)
    return names, overrides, skipped


def rule_selection(args: argparse.Namespace) -> tuple[list[str] | None, dict[str, dict[str, Any]], list[str]]:
    """Rules to run (None: all), parameter overrides, and plan rules we cannot evaluate locally."""
    from smx_debug.evaluate import parse_assignment, rule_defaults

    names: list[str] | None = None
    overrides: dict[str, dict[str, Any]] = {}
    skipped: list[str] = []
    if args.plan:
        names, overrides, skipped = _plan_rules(args.plan)
    if args.rule:
        for r in args.rule:
            rule_defaults(r)
        names = list(dict.fromkeys(args.rule))
    for text in args.sets:
        rule, param, value = parse_assignment(text)
        rule_defaults(rule)
        overrides.setdefault(rule, {})[param] = value
        if names is not None and rule not in names:
            names.append(rule)
    return names, overrides, skipped


def _table(results: Mapping[str, Any]) -> str:
    rows = [("Rule", "Status", "Triggered", "Violations", "Datapoints", "Reason")]
    for name, r in results.items():
        status = "IssuesFound" if r.triggered else ("NoData" if r.datapoints == 0 and name != "OverallSystemUsage"
                                                      else "NoIssuesFound")
        reason = r.message if r.triggered else ""
        rows.append((name, status, str(r.rule_triggered), str(r.violations), str(r.datapoints),
                     reason))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row[:5], widths, strict=True)) + "  " + row[5] for row in rows]
    return "\n".join(line.rstrip() for line in lines)


def _with_status(results: Mapping[str, Any], payload: Mapping[str, Any]) -> dict[str, Any]:
    """--json: each rule's status (as the table shows it) and full reason, then Debugger's own fields."""
    out: dict[str, Any] = {}
    for name, r in results.items():
        status = "IssuesFound" if r.triggered else ("NoData" if r.datapoints == 0 and r.rule != "OverallSystemUsage"
                                                      else "NoIssuesFound")
        out[name] = {"status": status, "reason": r.message, **payload[name]}
    return out


def _run(args: argparse.Namespace) -> int:
    from smx_debug.evaluate import LoadReport, evaluate
    from smx_debug.evaluate.jobs import load_job

    names, overrides, skipped = rule_selection(args)
    if args.live:
        return _live(args, names, overrides)
    check_output_file(args.json, "--json")
    check_output_dir(args.output_dir, "--output-dir")
    report = LoadReport()
    data, info = load_job(args.job_or_path, source=args.source, report=report)
    require_data(data, info.name, info.source)
    results = evaluate(data, names, overrides)
    payload = {name: r.to_debugger_json() for name, r in results.items()}
    if args.output_dir:
        out = Path(args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name, body in payload.items():
            (out / f"{name}.json").write_text(json.dumps(body))
    if args.json:
        text = json.dumps(_with_status(results, payload), indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text)
    if args.json != "-":
        print(f"{info.name}: {len(results)} rules on {len(data.system):,} system rows, {len(data.steps):,} steps, "
              f"{len(data.scalars):,} scalars ({info.source})")
        print(_table(results))
        for what, n in report.skipped.items():
            print(f"skipped {n} {what}", file=sys.stderr)
        for name in skipped:
            print(f"not evaluated locally (needs tensors): {name}", file=sys.stderr)
    fired = any(r.triggered for r in results.values())
    return 1 if fired and args.fail_on_issues else 0


def _live(args: argparse.Namespace, names: list[str] | None, overrides: dict[str, dict[str, Any]]) -> int:
    from smx_debug.evaluate import LiveEvaluator
    from smx_debug.evaluate.jobs import load_job

    if args.interval <= 0:
        raise ConfigError(f"--interval must be positive, got {args.interval!r}", field="--interval", value=args.interval)
    live = LiveEvaluator(rules=names, overrides=overrides)
    updates = 0
    while True:
        data, info = load_job(args.job_or_path, source=args.source)
        transitions = live.update(system=data.system, steps=data.steps, scalars=data.scalars, replace=True,
                                  now=datetime.now(UTC))
        updates += 1
        stamp = datetime.now(UTC).strftime("%H:%M:%S")
        for t in transitions:
            print(f"{stamp} {t.rule}: {t.previous} -> {t.status} {t.status_details.strip()}", flush=True)
        ended = (info.status in {"Completed", "Failed", "Stopped"}) or (
            Path(args.job_or_path).exists() and any(Path(args.job_or_path).rglob("training_job_end.ts"))
        )
        if ended or all(s != "InProgress" for s in live.status.values()) or (
            args.max_updates and updates >= args.max_updates
        ):
            break
        time.sleep(args.interval)
    if ended:
        for t in live.finish():
            print(f"{t.rule}: {t.previous} -> {t.status}", flush=True)
    print(json.dumps([{"RuleConfigurationName": r, "RuleEvaluationStatus": s} for r, s in live.status.items()]))
    return 0


def register(subparsers: Any) -> Any:
    """Add `evaluate` to the `rules` subparsers."""
    parser = subparsers.add_parser(
        "evaluate", help="evaluate the built-in profiler and scalar rules locally",
        description="Evaluate Debugger's built-in profiler rules and the scalar rules (LossNotDecreasing, Overfit, "
        "Overtraining, StalledTrainingRule) on a job's data, in seconds and without rule jobs.",
    )
    add_rule_options(parser)
    parser.add_argument("--json", metavar="FILE", help="write all results as JSON ('-' for stdout only)")
    parser.add_argument("--output-dir", metavar="DIR", help="write <Rule>.json files shaped like Debugger's profiler-reports/")
    parser.add_argument("--fail-on-issues", action="store_true", help="exit 1 when a rule fires")
    parser.add_argument("--live", action="store_true", help="re-evaluate as data arrives and print status transitions")
    parser.add_argument("--interval", type=positive_float, default=60.0,
                        help="seconds between live re-evaluations (default 60)")
    parser.add_argument("--max-updates", type=non_negative_int, default=0,
                        help="stop live mode after this many evaluations (0: until the rules settle)")
    parser.set_defaults(func=_run)
    return parser
