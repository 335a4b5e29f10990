"""`smx-debug rules evaluate` (options in ``cli._parser``): run the built-in rules locally, with what-if parameters and a live mode."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from smx_debug.cli._args import check_output_dir, check_output_file, require_data
from smx_debug.cli._aws import Clients
from smx_debug.cli._exit import ExitStatus
from smx_debug.cli._output import as_table, as_text, emit, output_format
from smx_debug.config import DebugPlan
from smx_debug.contracts import ISSUES_FOUND, JOB_ENDED_STATUSES, RULE_IN_PROGRESS
from smx_debug.data.jobs import load_job
from smx_debug.errors import ConfigError, NoDataYetError
from smx_debug.evaluate import ConfiguredRule, LiveEvaluator, LoadReport, evaluate
from smx_debug.evaluate.tensor_eval import TensorEvaluator
from smx_debug.evaluate.tensor_feed import is_trial
from smx_debug.evaluate.tensor_live import TensorLiveEvaluator
from smx_debug.evaluate.verdict_json import verdict_document
from smx_debug.rules.configured import configured_rule
from smx_debug.rules.params import PROFILER_RULES, SCALAR_RULES, TENSOR_RULES, parse_assignment, rule_defaults
from smx_debug.tensors import create_trial


class RuleSelection:
    """What ``--plan``, ``--rule`` and ``--set`` select, the plan read and checked once.

    ``--plan``: the plan's configurations, each under its configuration name (one rule configured twice is
    two configurations). ``--rule NAME``: only the configurations with that name or rule class (a rule class
    the plan lacks is added with its defaults). ``--set NAME.param=value``: NAME is a configuration name, or a
    rule class (every configuration of it; added with defaults if none is selected); with one --rule,
    ``--set param=value`` is that rule's. No plan, no --rule: every rule of the kind asked for.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self._rules: list[str] = list(args.rule)
        self._sets: list[str] = list(args.sets)
        self._plan = DebugPlan.from_file(args.plan) if args.plan else None

    def profiler(self) -> tuple[list[ConfiguredRule], list[str]]:
        """The profiler and scalar rule configurations, and the plan's rules not evaluated on profiler data."""
        return self._select(tensors=False)

    def tensors(self) -> tuple[list[ConfiguredRule], list[str]]:
        """The tensor rule configurations, and the plan's rules not evaluated on tensors."""
        return self._select(tensors=True)

    def _select(self, *, tensors: bool) -> tuple[list[ConfiguredRule], list[str]]:
        skipped: list[str] = []
        if self._plan is not None:
            configs, skipped = self._plan.tensor_rules() if tensors else self._plan.evaluated_rules()
        else:
            configs = [configured_rule(r) for r in (TENSOR_RULES if tensors else (*PROFILER_RULES, *SCALAR_RULES))]
        if self._rules:
            picked = []
            for name in dict.fromkeys(self._rules):
                hits = [c for c in configs if name in (c.name, c.rule) and c not in picked]
                if not hits:
                    rule_defaults(name)  # neither a configuration of the plan nor a rule: UnknownNameError, a hint
                    hits = [configured_rule(name)]
                picked.extend(hits)
            configs = picked
        only = configs[0].name if self._rules and len(configs) == 1 else None
        for assignment in self._sets:
            key, param, value = parse_assignment(assignment, rule=only)
            targets = [i for i, c in enumerate(configs) if c.name == key] or [
                i for i, c in enumerate(configs) if c.rule == key]
            if not targets:
                rule_defaults(key)
                configs.append(configured_rule(key))
                targets = [len(configs) - 1]
            for i in targets:
                configs[i] = configs[i].with_overrides({param: value})
        return configs, skipped


def _wants_tensors(args: argparse.Namespace) -> bool:
    """Evaluate on a trial's tensors: a rule that only reads tensors is asked for, or JOB_OR_PATH is a trial."""
    if args.source == "cloudwatch":
        return False
    tensor_only = set(TENSOR_RULES) - set(SCALAR_RULES)
    named = {n.partition(".")[0] for n in args.sets} | set(args.rule)
    if named & tensor_only:
        return True
    path = str(args.job_or_path)
    return (path.startswith("s3://") or Path(path).expanduser().is_dir()) and is_trial(path, **Clients(args).injected("s3"))


def _rows(results: Mapping[str, Any], doc: Mapping[str, Any], *, reasons: bool = False) -> list[tuple[str, ...]]:
    """One row per result (its status from ``doc``, the verdict document); the reason of fired rules
    (``reasons``: of every rule, e.g. what a rule without data needs)."""
    return [(name, r.rule, doc[name]["status"], str(r.rule_triggered), str(r.violations), str(r.datapoints),
             r.message if r.triggered or reasons else "") for name, r in results.items()]


_HEADER = ("Rule", "Class", "Status", "Triggered", "Violations", "Datapoints", "Reason")


def _check_outputs(args: argparse.Namespace) -> None:
    """``--out`` and ``--output-dir`` can be written: checked before any data is read."""
    check_output_file(args.out, "--out")
    check_output_dir(args.output_dir, "--output-dir")


def run(args: argparse.Namespace) -> int:
    if _wants_tensors(args):
        return _run_trial(args)
    configs, skipped = RuleSelection(args).profiler()
    if args.live:
        _check_live(args)
        return _live(args, configs)
    _check_outputs(args)
    report = LoadReport()
    data, info = load_job(args.job_or_path, source=args.source, report=report,
                          **Clients(args).injected("sagemaker", "cloudwatch", "s3"))
    require_data(data, info.name, info.source)
    results = evaluate(data, configs)
    head = (f"{info.name}: {len(results)} rules on {len(data.system):,} system rows, {len(data.steps):,} steps, "
            f"{len(data.scalars):,} scalars ({info.source})")
    return _output(args, results, head, report.skipped, [f"not evaluated locally (needs tensors): {n}" for n in skipped])


def _output(args: argparse.Namespace, results: Mapping[str, Any], head: str, skipped: Mapping[str, int],
            notes: list[str], *, reasons: bool = False) -> int:
    """The results in the ``--output`` format (and as files under ``--output-dir``); what was read, skipped and
    not evaluated to stderr; the exit status (RULES_FIRED when a rule fired and --fail-on-issues)."""
    doc = verdict_document(results)
    payload = {name: r.to_debugger_json() for name, r in results.items()}
    if args.output_dir:
        out = Path(args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name, body in payload.items():
            (out / f"{name}.json").write_text(json.dumps(body))
    fmt = output_format(args)
    if fmt == "json":
        emit(doc, to=args.out)
    elif fmt == "text":
        emit(as_text(_rows(results, doc, reasons=reasons)), to=args.out)
    else:
        emit(f"{head}\n{as_table(_rows(results, doc, reasons=reasons), _HEADER)}", to=args.out)
    if fmt != "table":
        print(head, file=sys.stderr)
    for what, n in skipped.items():
        print(f"skipped {n} {what}", file=sys.stderr)
    for note in notes:
        print(note, file=sys.stderr)
    fired = any(r.triggered for r in results.values())
    return ExitStatus.RULES_FIRED if fired and args.fail_on_issues else ExitStatus.OK


def _run_trial(args: argparse.Namespace) -> int:
    """The tensor rules over a trial (a folder, an ``s3://`` prefix, or a job's DebugHookConfig output)."""
    configs, skipped = RuleSelection(args).tensors()
    if args.live:
        _check_live(args)
        return _live_trial(args, configs)
    _check_outputs(args)
    trial = create_trial(args.job_or_path, **Clients(args).injected("s3", "sagemaker"))
    results = TensorEvaluator(trial, configs).refresh()
    head = (f"{trial.name}: {len(results)} tensor rules on {len(trial.steps())} saved steps, "
            f"{len(trial.tensor_names())} tensors ({trial.path})")
    return _output(args, results, head, trial.skipped, [f"not evaluated on tensors: {n}" for n in skipped],
                   reasons=True)


def _print_transitions(args: argparse.Namespace, transitions: Any, *, reasons: bool = False) -> None:
    """Each status change as it happens: stdout, or stderr with ``--output json`` (stdout is then the statuses)."""
    stream = sys.stderr if output_format(args) == "json" else sys.stdout
    stamp = datetime.now(UTC).strftime("%H:%M:%S")
    for t in transitions:
        reason = f" ({t.result.message})" if reasons and t.result.message else ""
        print(f"{stamp} {t.rule}: {t.previous} -> {t.status} {t.status_details.strip()}{reason}".rstrip(),
              file=stream, flush=True)


def _finish_live(args: argparse.Namespace, status: Mapping[str, str]) -> int:
    """The final statuses (as DescribeTrainingJob's rule statuses) in the --output format; the exit status."""
    rows = [{"RuleConfigurationName": r, "RuleEvaluationStatus": s} for r, s in status.items()]
    fmt = output_format(args)
    if fmt == "json":
        emit(rows, to=args.out)
    elif fmt == "text":
        emit(as_text([(r, s) for r, s in status.items()]), to=args.out)
    else:
        emit(json.dumps(rows), to=args.out)  # the line live mode has always ended with
    fired = any(s == ISSUES_FOUND for s in status.values())
    return ExitStatus.RULES_FIRED if fired and args.fail_on_issues else ExitStatus.OK


def _check_live(args: argparse.Namespace) -> None:
    """Live mode prints as it goes: there is no one result to write to --out or --output-dir."""
    for option, value in (("--out", args.out), ("--output-dir", args.output_dir)):
        if value is not None:
            raise ConfigError(f"{option} does not apply to --live (it prints the status changes as they happen)",
                              field=option, value=value)


def _live_trial(args: argparse.Namespace, configs: list[ConfiguredRule]) -> int:
    """The tensor rules on a trial being written: every ``--interval`` s, read the new steps and print each rule
    the moment it fires (with the tensor, step and value); until the training ends (the trial's end marker),
    every rule has fired, or ``--max-updates``."""
    updates = 0
    trial = None
    while trial is None:  # a job that has not written its first step yet
        try:
            trial = create_trial(args.job_or_path, **Clients(args).injected("s3", "sagemaker"))
        except NoDataYetError as exc:
            updates += 1
            if args.max_updates and updates >= args.max_updates:
                raise
            if updates == 1:
                print(f"waiting for tensors: {exc}", file=sys.stderr, flush=True)
            time.sleep(args.interval)
    live = TensorLiveEvaluator(trial, configs)
    print(f"{trial.name}: watching {len(configs)} tensor rules on {trial.path} every {args.interval:g} s",
          flush=True)
    while True:
        _print_transitions(args, live.update(), reasons=True)
        updates += 1
        if live.ended or not live.board.in_progress() or (args.max_updates and updates >= args.max_updates):
            break
        time.sleep(args.interval)
    if live.ended:
        _print_transitions(args, live.finish())
    for what, n in trial.skipped.items():
        print(f"skipped {n} {what}", file=sys.stderr)
    return _finish_live(args, live.status)


def _live(args: argparse.Namespace, configs: list[ConfiguredRule]) -> int:
    live = LiveEvaluator(rules=configs)
    updates = 0
    while True:
        data, info = load_job(args.job_or_path, source=args.source, **Clients(args).injected("sagemaker", "cloudwatch", "s3"))
        transitions = live.update(system=data.system, steps=data.steps, scalars=data.scalars, replace=True,
                                  now=datetime.now(UTC))
        updates += 1
        _print_transitions(args, transitions)
        ended = (info.status in JOB_ENDED_STATUSES) or (
            Path(args.job_or_path).exists() and any(Path(args.job_or_path).rglob("training_job_end.ts"))
        )
        if ended or all(s != RULE_IN_PROGRESS for s in live.status.values()) or (
            args.max_updates and updates >= args.max_updates
        ):
            break
        time.sleep(args.interval)
    if ended:
        _print_transitions(args, live.finish())
    return _finish_live(args, live.status)
