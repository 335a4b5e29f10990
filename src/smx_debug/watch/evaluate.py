"""The evaluator's evaluate step: one watched job's rules judged on its window, and its new triggers.

:func:`evaluate_job` merges the job's new minutes into its window (:func:`smx_debug.watch.read.merge_minutes`)
and evaluates each rule configuration of its cursor (decoded once, :attr:`smx_debug.watch.state.Cursor.rules`)
that has not fired on its last ``window`` minutes: the same rule code as ``smx-debug rules evaluate``, keyed by
configuration name. :func:`evaluate_tensors` judges its tensor rules. A rule whose condition is met is a
:class:`smx_debug.actions.verify.Trigger` (``source=SOURCE_EVALUATOR``), the action core's own, built once here.

Tensor rules. A job whose ``DebugHookConfig`` sends tensors to S3 (``<S3OutputPath>/<job>/debug-output/``, the cursor's
``tensors_s3``), or whose hook writes them there itself (a job without a DebugHookConfig, whose plan put
``SMX_DEBUG_OUTPUT`` in its ``Environment``: :func:`smx_debug.data.sources.job_paths` finds either) gets the tensor rules its watch spec lists (:data:`~smx_debug.rules.watch_spec.TENSOR_WATCH_RULES`),
with the rule catalog's defaults and the plan's parameters. Each run reads only what the job saved since the last
one: the job's cursor item keeps the next global step to read and every rule's state (counts, class tallies,
channel sums, the first steps PoorWeightInitialization analyses, the last step's wall time), compressed, at most
:data:`STATE_BUDGET` bytes (DynamoDB items hold 400 KB; the rest of the cursor is a few kB). The trial is opened
from that step (``create_trial(start_step=)``: earlier index and event files are neither listed nor read), except
for the previous saved step(s) of the weights UnchangedTensor and WeightUpdateRatio compare with, which are read
again (a model's weights do not fit an item). A rule that fired is handed to the action core once and not
evaluated again (the cursor's ``fired``), so its state is dropped.

:func:`evaluate_tensors` runs inside the job's isolation (:mod:`smx_debug.watch.run`): whatever it raises
fails that job only, whose cursor (and tensor state) then stays where it was.
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any, Final

from smx_debug.actions.verify import Trigger
from smx_debug.contracts import HOOK_OUTPUT_ENV, SOURCE_EVALUATOR, condition_met_details
from smx_debug.data.cloudwatch_batch import ReadResult
from smx_debug.data.frames import JobData, empty_dataloader, empty_scalars, empty_steps, empty_system
from smx_debug.data.minute_frames import DEVICE_RULES, job_devices, scalar_frame, system_frame
from smx_debug.errors import ConfigError, DataError, NoDataYetError, SmxDebugError
from smx_debug.evaluate.registry import REGISTRY
from smx_debug.evaluate.tensor_eval import TensorEvaluator
from smx_debug.evaluate.tensor_state import load
from smx_debug.rules.catalog import get_rule
from smx_debug.rules.configured import ConfiguredRule, configured_rule
from smx_debug.rules.watch_spec import WatchedRule
from smx_debug.tensors import create_trial
from smx_debug.watch.read import keep_minutes, merge_minutes
from smx_debug.watch.settings import EvaluatorSettings
from smx_debug.watch.state import Cursor, RunOutcome

STATE_BUDGET: Final = 256 * 1024  # bytes of compressed tensor rule state per job, in its cursor item


def tensor_rules(cursor: Cursor) -> list[WatchedRule]:
    """The job's tensor rule configurations that have not fired yet."""
    return [r for r in cursor.rules if r.reads_tensors and r.name not in cursor.fired]


def evaluate_tensors(cursor: Cursor, outcome: RunOutcome, *, s3: Any, now: float) -> tuple[Cursor, list[Trigger]]:
    """Read the job's tensors saved since its cursor, fold them into its tensor rules, and return the cursor with
    the new state and the configurations that fired (notes go to ``outcome``)."""
    rules = tensor_rules(cursor)
    if not rules:
        return cursor.with_changes(tensors=None), []
    prefix = cursor.info.get("tensors_s3")
    names = ", ".join(r.name for r in rules)
    if not prefix:
        outcome.notes.append(f"{names}: the job has no DebugHookConfig and no {HOOK_OUTPUT_ENV} in its Environment, "
                             "so its hook saves no tensors: not evaluated (launch it with what its plan renders: "
                             "to_request_dict(), to_estimator_kwargs() or to_model_trainer_kwargs())")
        return cursor, []
    configs = []
    for rule in rules:
        try:
            configs.append(_configured(rule.rule, rule.name, tuple(sorted(rule.parameters.items())), None))
        except ConfigError as exc:
            outcome.notes.append(f"{rule.name}: {exc}")
    if not configs:
        return cursor, []
    snapshot = None
    if cursor.tensors:
        try:
            snapshot = load(cursor.tensors)
        except DataError as exc:
            outcome.notes.append(f"tensor rules' saved state unreadable ({exc}): read again from step 0")
    try:
        trial = create_trial(prefix, s3_client=s3, start_step=snapshot.read_from if snapshot else 0)
    except NoDataYetError:
        outcome.notes.append(f"{names}: no tensors under {prefix} yet")
        return cursor, []
    evaluator = TensorEvaluator.restore(trial, configs, snapshot, clock=lambda: now)
    results = evaluator.refresh()
    outcome.status = "evaluated"
    for what, n in trial.skipped.items():
        outcome.notes.append(f"tensors: {n} {what} skipped")
    triggers = [_trigger(name, result.rule, result.trigger_step, result.message)
                for name, result in results.items() if result.triggered]
    fired = {t.rule for t in triggers}
    try:
        state = evaluator.snapshot(budget=STATE_BUDGET, names=[c.name for c in configs if c.name not in fired])
    except DataError as exc:  # over the budget even without per-tensor details: start that job's rules over
        outcome.notes.append(f"tensor rules' state not kept ({exc}); they read the job again from step 0")
        state = None
    return cursor.with_changes(tensors=state), triggers


@lru_cache(maxsize=4096)
def _configured(rule: str, name: str, overrides: tuple[tuple[str, Any], ...], scan_us: int | None) -> ConfiguredRule:
    """Configuration ``name`` of ``rule`` checked against the catalog once per process: every run evaluates the
    same frozen configuration (a bad one raises each time, and is reported each run). ``scan_us``: a minute
    rule's whole window as its one scan interval, for the rules that scan."""
    config = configured_rule(rule, name=name, overrides=dict(overrides))
    if scan_us is not None and "scan_interval_us" in config.parameters:
        config = config.with_overrides({"scan_interval_us": scan_us})
    return config


def _trigger(name: str, rule: str, step: int | None, message: str) -> Trigger:
    """The action core's trigger for configuration ``name`` of rule class ``rule``, met at ``step``."""
    return Trigger(rule=name, kind=get_rule(rule).kind, step=step, source=SOURCE_EVALUATOR,
                   details=condition_met_details(name, step, f" (smx-debug evaluator: {message})"), rule_type=rule)


def _window(frame: Any, lo: int, last: int) -> Any:
    """Rows of a profiler frame in minutes ``lo..last`` (epoch minutes, inclusive)."""
    ns = frame["timestamp"].astype("int64").to_numpy()
    keep = (ns >= lo * 60_000_000_000) & (ns < (last + 1) * 60_000_000_000)
    return frame[keep].reset_index(drop=True)


@cache
def _empty_frames() -> tuple[Any, Any, Any, Any]:
    """Empty system, scalars, steps and dataloader frames, built once (the rules only read them)."""
    return empty_system(), empty_scalars(), empty_steps(), empty_dataloader()


def _evaluate(cursor: Cursor, last: int, now: float, profiler: Any = None) -> tuple[list[Trigger], list[str]]:
    """Evaluate the job's rules on its window; returns new triggers and notes."""
    info = cursor.info
    start_minute = int(info.get("start") or now) // 60
    triggers: list[Trigger] = []
    notes: list[str] = []
    frames: dict[tuple[bool, int], Any] = {}
    # profiler output shows every device; else the table's counts, or for a type it lacks what the sums need
    devices, device_note = job_devices(info.get("instance_type"), cursor.data)
    if device_note and profiler is None and any(r.rule in DEVICE_RULES for r in cursor.rules):
        notes.append(device_note)
    for rule in cursor.rules:
        if rule.name in cursor.fired or rule.reads_tensors:  # tensor rules: smx_debug.watch.evaluate
            continue
        lo = last - rule.window_minutes + 1
        if (rule.rule in DEVICE_RULES, lo) not in frames:  # one frame per kind and window, shared by rules
            empty = _empty_frames()
            frames[(rule.rule in DEVICE_RULES, lo)] = JobData(
                system=(_window(profiler, lo, last) if profiler is not None else system_frame(cursor.data, lo, last,
                                                                                             devices))
                if rule.rule in DEVICE_RULES else empty[0],
                scalars=empty[1] if rule.rule in DEVICE_RULES else scalar_frame(cursor.data, lo, last, start_minute),
                steps=empty[2], dataloader=empty[3], as_of_ns=int(now * 1e9),
            )
        data = frames[(rule.rule in DEVICE_RULES, lo)]
        try:  # one evaluation over the whole window
            config = _configured(rule.rule, rule.name, tuple(sorted(rule.resolved().items())),
                                 rule.window_minutes * 60_000_000)
        except SmxDebugError as exc:
            notes.append(f"{rule.name}: {exc}")
            continue
        result = REGISTRY[rule.rule](data, config.params)
        if result.triggered:
            step = result.trigger_step if rule.rule not in DEVICE_RULES else last - start_minute
            triggers.append(_trigger(rule.name, rule.rule, step, result.message))
    return triggers, notes




def evaluate_job(
    cursor: Cursor, settings: EvaluatorSettings, outcome: RunOutcome, result: ReadResult, profiler: Any, *,
    end: int, now: float,
) -> tuple[Cursor, list[Trigger]]:
    """The job's cursor with its new minutes merged and ``through`` moved to ``end``, and its new triggers."""
    last = end // 60 - 1
    keep_from = last - keep_minutes(cursor, settings) + 1
    cursor = merge_minutes(cursor, result.data.get(cursor.job, {}), keep_from=keep_from).with_changes(through=end)
    if not any(s.startswith("host:") for s in cursor.data) and profiler is None:
        running_for = now - float(cursor.info.get("start") or now)
        if running_for >= settings.missing_after_minutes * 60:
            outcome.notes.append(
                f"no CloudWatch instance metrics for {cursor.job} in the last {settings.window_minutes} minutes "
                f"(namespace /aws/sagemaker/TrainingJobs, dimension Host={cursor.job}/algo-1): not evaluated, "
                "not stopped"
            )
            outcome.status = "no data"
            return cursor, []
    triggers, notes = _evaluate(cursor, last, now, profiler)
    outcome.status = "evaluated"
    outcome.notes.extend(notes)
    return cursor, triggers
