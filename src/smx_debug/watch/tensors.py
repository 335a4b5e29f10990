"""The evaluator's per-job tensor step: a watched job's tensor rules, judged on the tensors its hook writes to S3.

A job whose ``DebugHookConfig`` sends tensors to S3 (``<S3OutputPath>/<job>/debug-output/``, the cursor's
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

:func:`evaluate_tensors` runs inside the job's isolation (:mod:`smx_debug.watch.isolation`): whatever it raises
fails that job only, whose cursor (and tensor state) then stays where it was.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from smx_debug.contracts import HOOK_OUTPUT_ENV, condition_met_details
from smx_debug.errors import ConfigError, DataError, NoDataYetError
from smx_debug.rules.watch_spec import WatchedRule
from smx_debug.watch.cursor import Cursor
from smx_debug.watch.trigger import Trigger

if TYPE_CHECKING:
    from smx_debug.watch.trigger import JobOutcome

__all__ = ["STATE_BUDGET", "evaluate_tensors", "tensor_rules"]

STATE_BUDGET: Final = 256 * 1024  # bytes of compressed tensor rule state per job, in its cursor item


def tensor_rules(cursor: Cursor) -> list[WatchedRule]:
    """The job's tensor rule configurations that have not fired yet."""
    rules = [WatchedRule(r["name"], r["rule"], r.get("parameters", {})) for r in cursor.info.get("rules", [])]
    return [r for r in rules if r.reads_tensors and r.name not in cursor.fired]


def evaluate_tensors(cursor: Cursor, outcome: JobOutcome, *, s3: Any, now: float) -> tuple[Cursor, list[Trigger]]:
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
    from smx_debug.evaluate.tensor_eval import TensorEvaluator
    from smx_debug.evaluate.tensor_state import load
    from smx_debug.rules.configured import configured_rule
    from smx_debug.tensors import create_trial

    configs = []
    for rule in rules:
        try:
            configs.append(configured_rule(rule.rule, name=rule.name, overrides=dict(rule.parameters)))
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
    triggers = [_trigger(cursor.job, name, result) for name, result in results.items() if result.triggered]
    fired = {t.name for t in triggers}
    try:
        state = evaluator.snapshot(budget=STATE_BUDGET, names=[c.name for c in configs if c.name not in fired])
    except DataError as exc:  # over the budget even without per-tensor details: start that job's rules over
        outcome.notes.append(f"tensor rules' state not kept ({exc}); they read the job again from step 0")
        state = None
    return cursor.with_changes(tensors=state), triggers


def _trigger(job: str, name: str, result: Any) -> Trigger:
    from smx_debug.rules.catalog import get_rule

    step = result.trigger_step
    return Trigger(
        job=job, name=name, rule=result.rule, kind=get_rule(result.rule).kind, step=step, message=result.message,
        status_details=condition_met_details(name, step, f" (smx-debug evaluator: {result.message})"),
    )
