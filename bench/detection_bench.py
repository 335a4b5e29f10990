"""Detection benchmark: the tensor rules, at their default parameters, on small real training runs.

Each run trains a small PyTorch model on the CPU on data made here (a fixed random "teacher" network labels
Gaussian inputs in 4 classes), recorded by smx_debug.hook with what a debug plan listing every tensor rule gives
(its default collections and save interval, 500 steps): 2,500 TRAIN steps of batches of 128 from a training set of
as many samples, and before every 500th and after the last a validation pass of 500 EVAL batches (a fixed,
unshuffled validation set, so each pass saves its first batch's loss; the pass's mean loss and accuracy are kept as
ground truth measured without the rules). The training script also saves each batch's labels and predicted classes (``hook.save_tensor``), as a user
of ClassImbalance and Confusion must. Half the runs are healthy (4 architectures x 5 seeds); the other half carry
one fault each (10 classes x 2 seeds), injected at a known step:

    exploding_gradients  learning rate x 1000 at step 1000          frozen_layer   the middle layer stops at step 1000
    vanishing_gradients  a 10-layer sigmoid stack, from step 0      overfitting    64 training samples, from step 0
    dead_relu            hidden biases initialised to -5            plateau        learning rate x 1e-6 at step 1000
    poor_initialization  weights N(0, 1) instead of PyTorch's       nan_operation  sqrt of a negative at step 1200
    saturated_activation tanh network with weights N(0, 3)          class_imbalance 90% of training labels class 0

Every tensor rule of Debugger's (the ``debugger`` family; smx-debug's own rules are bench/heldout_bench.py's) runs on
every run with default parameters, replayed step by step as a live evaluator would see the trial (TensorEvaluator.refresh(until=...)). A fault is detected when a rule fires at or after its injection
step; the delay is from injection to that saved step. Healthy runs count false positives by rule. Baselines on the
same runs: Lightning-style ``check_finite`` (the training loss checked every step) and
``torch.autograd.detect_anomaly`` (a second run of the same seed under anomaly mode, stopped at its first error).

Beside the table, a "what if": LossNotDecreasing and Overfit at their defaults on each run's smoothed losses (every
validation pass's mean and the mean training loss before it, as a script could save them), against the single
batches the hook's defaults save (:func:`judge_smoothed`; not part of the targets).

Targets: >= 95% of faults detected and <= 5% of healthy runs flagged. Misses and false positives are reported
as they are (docs/rules.md discusses them); the benchmark is not tuned to pass.
Usage: python bench/detection_bench.py [--quick] [--json FILE] [--seeds N]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STEPS, QUICK_STEPS, SAVE_INTERVAL, BATCH, VAL_BATCHES = 2500, 2000, 500, 128, 500
TARGET_DETECTED, TARGET_FLAGGED = 0.95, 0.05
HEALTHY_ARCHS = ("mlp_relu", "mlp_tanh", "mlp_sigmoid", "cnn_relu")


@dataclass(frozen=True)
class Fault:
    """One fault class: the architecture it runs on, its injection step and what it changes."""

    name: str
    arch: str
    inject: int
    lr_factor_at: tuple[int, float] | None = None  # (step, factor)
    init: str = "default"  # default | dead_bias | normal1 | normal3
    freeze_at: int | None = None
    nan_at: int | None = None
    train_samples: int | None = None
    imbalance: float | None = None


FAULTS: tuple[Fault, ...] = (
    Fault("exploding_gradients", "mlp_relu", 1000, lr_factor_at=(1000, 1000.0)),
    Fault("vanishing_gradients", "deep_sigmoid", 0),
    Fault("dead_relu", "mlp_relu", 0, init="dead_bias"),
    Fault("poor_initialization", "mlp_relu", 0, init="normal1"),
    Fault("saturated_activation", "mlp_tanh", 0, init="normal3"),
    Fault("frozen_layer", "mlp_relu", 1000, freeze_at=1000),
    Fault("overfitting", "mlp_relu", 0, train_samples=64),
    Fault("plateau", "mlp_relu", 1000, lr_factor_at=(1000, 1e-6)),
    Fault("nan_operation", "mlp_relu", 1200, nan_at=1200),
    Fault("class_imbalance", "mlp_relu", 0, imbalance=0.9),
)


@dataclass(frozen=True)
class RunSpec:
    arch: str
    seed: int
    fault: Fault | None = None

    @property
    def name(self) -> str:
        return f"{self.fault.name if self.fault else 'healthy'}-{self.arch}-s{self.seed}"


@dataclass
class RunResult:
    spec: RunSpec
    fired: dict[str, list[int]] = field(default_factory=dict)  # rule -> saved steps at which it fired
    no_data: list[str] = field(default_factory=list)
    check_finite_step: int | None = None
    anomaly_step: int | None = None
    seconds: float = 0.0
    validation: list[tuple[float, float]] = field(default_factory=list)  # (mean loss, accuracy) of each pass
    train_windows: list[float] = field(default_factory=list)  # mean training loss since the previous pass
    smoothed: dict[str, list[int]] = field(default_factory=dict)  # loss rules on the means: rule -> steps fired


def _torch() -> Any:
    import torch

    torch.set_num_threads(1)
    return torch


def _model(arch: str, init: str, torch: Any) -> Any:
    nn = torch.nn
    act = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}
    if arch == "cnn_relu":
        model = nn.Sequential(nn.Unflatten(1, (1, 4, 4)), nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                              nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(256, 4))
    elif arch == "deep_sigmoid":
        layers: list[Any] = []
        width = 16
        for _ in range(10):
            layers += [nn.Linear(width, 32), nn.Sigmoid()]
            width = 32
        model = nn.Sequential(*layers, nn.Linear(32, 4))
    else:
        kind = arch.split("_")[1]
        model = nn.Sequential(nn.Linear(16, 64), act[kind](), nn.Linear(64, 64), act[kind](), nn.Linear(64, 4))
    linears = [m for m in model if isinstance(m, nn.Linear)]
    with torch.no_grad():
        if init == "dead_bias":
            for m in linears[:-1]:
                m.bias.fill_(-5.0)
        elif init in ("normal1", "normal3"):
            std = 1.0 if init == "normal1" else 3.0
            for m in linears:
                m.weight.normal_(0.0, std)
    return model


def _data(seed: int, fault: Fault | None, torch: Any) -> tuple[Any, Any, Any, Any]:
    """Training and validation sets labelled by a fixed random teacher (plus 5% label noise). The training set holds
    as many samples as a run draws (STEPS x BATCH), so a healthy run sees each about once and cannot memorise it:
    with 8,192 samples (39 passes) the ReLU and tanh MLPs and the CNN overfitted, their validation loss rising 7-22%
    above its best while the training loss fell, and the rules that said so were right."""
    g = torch.Generator().manual_seed(seed)
    teacher = [torch.randn(16, 32, generator=g), torch.randn(32, 4, generator=g)]

    def labels(x: Any) -> Any:
        y = (torch.tanh(x @ teacher[0]) @ teacher[1]).argmax(1)
        flip = torch.rand(len(x), generator=g) < 0.05
        return torch.where(flip, torch.randint(0, 4, (len(x),), generator=g), y)

    n = fault.train_samples if fault and fault.train_samples else STEPS * BATCH
    x = torch.randn(n if not (fault and fault.imbalance) else 4 * n, 16, generator=g)
    y = labels(x)
    if fault and fault.imbalance:
        zero = torch.nonzero(y == 0).flatten()
        other = torch.nonzero(y != 0).flatten()
        keep_other = other[: int(len(zero) * (1 - fault.imbalance) / fault.imbalance)]
        idx = torch.cat([zero, keep_other])
        x, y = x[idx], y[idx]
    xv = torch.randn(4096, 16, generator=g)
    return x, y, xv, labels(xv)


def _plan() -> Any:
    from smx_debug import DebugPlan

    return DebugPlan.model_validate({"name": "detection-bench", "region": "us-west-2",
                                     "s3_output_path": "s3://detection-bench/runs", "framework": "pytorch",
                                     "rules": [{"name": r} for r in debugger_tensor_rules()]})


def debugger_tensor_rules() -> tuple[str, ...]:
    """Debugger's tensor rules (the ``debugger`` family; smx-debug's own rules are bench/heldout_bench.py's)."""
    from smx_debug.rules.registry import rule_defs

    return tuple(d.name for d in rule_defs(family="debugger") if "tensors" in d.evaluates_on)


def validation_pass(model: Any, loss_fn: Any, xv: Any, yv: Any, torch: Any) -> tuple[float, float]:
    """The model's mean loss and accuracy over ``VAL_BATCHES`` unshuffled batches of the validation set, in eval
    mode without gradients (the model is back in train mode after)."""
    model.eval()
    total = correct = 0.0
    with torch.no_grad():
        for b in range(VAL_BATCHES):
            i = (b * BATCH) % len(xv)
            out = model(xv[i:i + BATCH])
            total += float(loss_fn(out, yv[i:i + BATCH]))
            correct += float((out.argmax(1) == yv[i:i + BATCH]).float().mean())
    model.train()
    return total / VAL_BATCHES, correct / VAL_BATCHES


def scale_lr(opt: Any, fault: Fault | None, step: int) -> None:
    """The fault's change of the learning rate, at its step."""
    if fault and fault.lr_factor_at and step == fault.lr_factor_at[0]:
        for group in opt.param_groups:
            group["lr"] *= fault.lr_factor_at[1]


def training_batch(model: Any, x: Any, y: Any, g: Any, fault: Fault | None, step: int, torch: Any) -> tuple[Any, Any]:
    """A random training batch's labels and the model's output on it; at the fault's ``nan_at`` step the output goes
    through a bad operation (the square root of a negative: NaN)."""
    idx = torch.randint(0, len(x), (min(BATCH, len(x)),), generator=g)
    xb, yb = x[idx], y[idx]
    out = model(xb)
    if fault and fault.nan_at is not None and step == fault.nan_at:
        out = out + torch.sqrt(out[:, :1] - out.abs().max() - 1.0)  # a bad operation: NaN
    return yb, out


def train(spec: RunSpec, out_dir: str | None, *, steps: int = STEPS,
          anomaly: bool = False) -> tuple[int | None, int | None, list[tuple[float, float]], list[float]]:
    """One run; with ``out_dir`` recorded by the hook. Returns (first step with a non-finite training loss, step of
    detect_anomaly's first error when ``anomaly``, each validation pass's mean loss and accuracy over all its
    batches: the ground truth the rules are judged against, measured without them, and the mean training loss of
    the steps before each pass)."""
    torch = _torch()
    torch.manual_seed(spec.seed)
    fault = spec.fault
    x, y, xv, yv = _data(spec.seed, fault, torch)
    model = _model(spec.arch, fault.init if fault else "default", torch)
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    hook = None
    if out_dir is not None:
        import smx_debug.hook as smd

        hook = smd.Hook.from_plan(_plan(), out_dir)
        hook.register_module(model)
        hook.register_loss(loss_fn)
    g = torch.Generator().manual_seed(spec.seed + 1)
    nonfinite: int | None = None
    linears = [m for m in model if isinstance(m, torch.nn.Linear)]
    validation: list[tuple[float, float]] = []
    windows: list[float] = []
    window: list[float] = []

    def validate() -> None:
        if hook is not None:
            hook.set_mode(smd.modes.EVAL)
        validation.append(validation_pass(model, loss_fn, xv, yv, torch))
        windows.append(sum(window) / len(window) if window else math.nan)
        window.clear()
        if hook is not None:
            hook.set_mode(smd.modes.TRAIN)

    if hook is not None:
        hook.set_mode(smd.modes.TRAIN)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anomaly mode warns that it is on, and prints each forward trace
        ctx = torch.autograd.detect_anomaly(check_nan=True) if anomaly else _Null()
    with warnings.catch_warnings(), ctx:
        warnings.simplefilter("ignore")
        for step in range(steps):
            if step % SAVE_INTERVAL == 0 and not anomaly:
                validate()
            scale_lr(opt, fault, step)
            if fault and fault.freeze_at is not None and step == fault.freeze_at:
                linears[1].weight.requires_grad_(False)
                linears[1].bias.requires_grad_(False)
            yb, out = training_batch(model, x, y, g, fault, step, torch)
            loss = loss_fn(out, yb)
            if hook is not None:
                hook.save_tensor("labels", yb, "labels")
                hook.save_tensor("predictions", out.argmax(1), "predictions")
            window.append(float(loss))
            if nonfinite is None and not bool(torch.isfinite(loss)):
                nonfinite = step
            opt.zero_grad()
            try:
                loss.backward()
            except RuntimeError:
                if anomaly:
                    return nonfinite, step, validation, windows
                raise
            opt.step()
        if not anomaly:
            validate()  # the trained model's pass, as a training script's last validation
    if hook is not None:
        hook.close()
    return nonfinite, None, validation, windows


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def train_steps_before(global_step: int) -> int:
    """Training steps done when ``global_step`` ran: validation k takes global steps [1000k, 1000k + 500), then
    500 training steps follow (the hook counts every forward pass, TRAIN and EVAL, as a global step)."""
    cycle = VAL_BATCHES + SAVE_INTERVAL
    return SAVE_INTERVAL * (global_step // cycle) + max(0, global_step % cycle - VAL_BATCHES)


def judge(out_dir: str) -> tuple[dict[str, list[int]], list[str]]:
    """Every tensor rule of Debugger's with its defaults, replayed saved step by saved step: the training step at which each
    fired (:func:`train_steps_before` its saved global step), and the rules that never saw data."""
    from smx_debug.evaluate.tensor_eval import TensorEvaluator
    from smx_debug.tensors import create_trial

    trial = create_trial(out_dir)
    ev = TensorEvaluator(trial, debugger_tensor_rules())
    fired: dict[str, list[int]] = {}
    counts: dict[str, int] = {}
    results: dict[str, Any] = {}
    for step in trial.steps():
        results = ev.refresh(until=step + 1)
        for name, r in results.items():
            if r.rule_triggered > counts.get(name, 0):
                at = fired.setdefault(name, [])
                if train_steps_before(step) not in at:
                    at.append(train_steps_before(step))
            counts[name] = r.rule_triggered
    return fired, sorted(n for n, r in results.items() if r.datapoints == 0)


def run_one(spec: RunSpec, root: Path, *, steps: int, baselines: bool) -> RunResult:
    t = time.perf_counter()
    out = root / spec.name
    nonfinite, _, validation, windows = train(spec, str(out), steps=steps)
    fired, no_data = judge(str(out))
    anomaly = train(spec, None, steps=steps, anomaly=True)[1] if baselines else None
    smoothed = judge_smoothed(validation, windows, root / f"{spec.name}-smoothed")
    return RunResult(spec, fired, no_data, nonfinite, anomaly, time.perf_counter() - t, validation, windows, smoothed)


SMOOTHED_RULES = ("LossNotDecreasing", "Overfit")


def judge_smoothed(validation: Sequence[tuple[float, float]], windows: Sequence[float], out_dir: Path, *,
                   rules: Sequence[str] = SMOOTHED_RULES) -> dict[str, list[int]]:
    """What if the job had saved smoothed losses: LossNotDecreasing and Overfit (or ``rules``), at their default
    thresholds, on a trial holding each validation pass's mean loss (EVAL) and the mean training loss of the 500
    steps before it (TRAIN), as a training script can save them with ``hook.save_scalar``. Returns the training
    steps at which each fired. Not part of the targets: the hook's defaults save single batches (the main table).
    A loss that became NaN never fires LossNotDecreasing (a comparison with NaN is false: the loss "decreased by
    NaN percent"); ExplodingTensor is the rule that flags it."""
    import numpy as np

    from smx_debug.evaluate.tensor_eval import TensorEvaluator
    from smx_debug.rules.configured import configured_rule
    from smx_debug.tensors import Collection, TrialWriter, create_trial

    with TrialWriter(str(out_dir)) as writer:
        writer.write_collections([Collection(name="losses", tensor_names=("loss",))])
        for k, ((val, _), train_mean) in enumerate(zip(validation, windows, strict=True)):
            # global steps as the run counted them: pass k took [1000k, 1000k + 500), the training steps before it
            # end at 1000k - 1; each mean is saved at the step that completes it
            cycle = VAL_BATCHES + SAVE_INTERVAL
            if k:  # no training before the first pass
                writer.write_step(cycle * k - 1, mode="TRAIN", mode_step=SAVE_INTERVAL * k - 1,
                                  tensors={"loss": np.float32(train_mean)})
            writer.write_step(cycle * k + VAL_BATCHES - 1, mode="EVAL", mode_step=VAL_BATCHES * (k + 1) - 1,
                              tensors={"loss": np.float32(val)})
        writer.training_end()
    trial = create_trial(str(out_dir))
    ev = TensorEvaluator(trial, [configured_rule(r) for r in rules])  # their defaults
    fired: dict[str, list[int]] = {}
    counts: dict[str, int] = {}
    for step in trial.steps():
        for name, r in ev.refresh(until=step + 1).items():
            if r.rule_triggered > counts.get(name, 0):
                fired.setdefault(name, []).append(train_steps_before(step))
            counts[name] = r.rule_triggered
    return fired


def runs(quick: bool, seeds: int) -> list[RunSpec]:
    if quick:
        return [RunSpec("mlp_relu", 0, FAULTS[0]), RunSpec("mlp_relu", 0, FAULTS[2]), RunSpec("mlp_relu", 0),
                RunSpec("mlp_tanh", 0)]
    out = [RunSpec(f.arch, s, f) for f in FAULTS for s in range(seeds)]
    per_arch = math.ceil(len(out) / len(HEALTHY_ARCHS))  # as many healthy runs as faulty ones
    out += [RunSpec(a, s) for a in HEALTHY_ARCHS for s in range(per_arch)]
    return out


def _detection(r: RunResult, rules: set[str] | None = None) -> tuple[int | None, list[str]]:
    """The first saved step at or after injection at which a rule (of ``rules``, default any) fired, and the
    rules that fired then."""
    assert r.spec.fault is not None
    return first_detection(r.fired, r.spec.fault.inject, rules)


def first_detection(fired: Mapping[str, Sequence[int]], at: int,
                    rules: set[str] | None = None) -> tuple[int | None, list[str]]:
    """The first step at or after ``at`` at which a rule of ``fired`` (of ``rules``, default any) fired, and the
    rules that fired then."""
    hits = {rule: min((s for s in steps if s >= at), default=None) for rule, steps in fired.items()
            if rules is None or rule in rules}
    first = min((s for s in hits.values() if s is not None), default=None)
    return first, sorted(rule for rule, s in hits.items() if s is not None and s == first)


def healthy_by_validation(validation: Sequence[tuple[float, float]]) -> bool:
    """Ground truth measured without the rules: the last validation pass's mean loss within 5% of the run's best (no
    overfitting, no divergence) and its accuracy at least 0.3 above the untrained model's."""
    losses = [loss for loss, _ in validation]
    accuracy = [acc for _, acc in validation]
    return (len(losses) >= 2 and all(math.isfinite(x) for x in losses) and losses[-1] <= 1.05 * min(losses)
            and accuracy[-1] >= accuracy[0] + 0.3)


def _final_accuracy(rs: Sequence[RunResult]) -> str:
    values = [r.validation[-1][1] for r in rs if r.validation]
    return f"{statistics.median(values):.2f}" if values else "-"


def _median(values: Sequence[int]) -> str:
    return f"{statistics.median(values):g}" if values else "-"


def _counts(names: Sequence[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in names:
        out[n] = out.get(n, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def _shown(counts: Mapping[str, int], width: int) -> str:
    text = ", ".join(f"{k} ({v})" for k, v in counts.items()) or "MISSED"
    return text if len(text) <= width else text[: width - 3] + "..."


def report(results: Sequence[RunResult]) -> dict[str, Any]:
    """Print the tables; return the summary. Two views: every rule at its defaults (the targets), and only the
    rules that flag at most 5% of the healthy runs ("quiet" rules: what a user could leave on)."""
    faults = [r for r in results if r.spec.fault]
    healthy = [r for r in results if not r.spec.fault]
    fp = _counts([rule for r in healthy for rule in r.fired])
    quiet = {rule for rule in {x for r in results for x in r.fired} | set(fp)
             if fp.get(rule, 0) <= TARGET_FLAGGED * max(len(healthy), 1)}
    summary: dict[str, Any] = {"faults": {}, "healthy": {}, "false_positives_by_rule": fp}
    print(f"\n{'fault class':<21}{'any rule':>9}{'delay':>7}  {'quiet rules that caught it (runs)':<45}{'quiet':>6}"
          f"{'delay':>7}{'check_finite':>14}{'delay':>6}{'detect_anomaly':>15}{'delay':>6}")
    det_any = det_quiet = 0
    for fault in dict.fromkeys(r.spec.fault.name for r in faults if r.spec.fault):
        rs = [r for r in faults if r.spec.fault and r.spec.fault.name == fault]
        inject = rs[0].spec.fault.inject if rs[0].spec.fault else 0
        anyr = [_detection(r) for r in rs]
        qr = [_detection(r, quiet) for r in rs]
        hit_a = [d for d, _ in anyr if d is not None]
        hit_q = [d for d, _ in qr if d is not None]
        det_any += len(hit_a)
        det_quiet += len(hit_q)
        caught = _counts([rule for _, rules in qr for rule in rules])
        cf = [r.check_finite_step - inject for r in rs if r.check_finite_step is not None]
        an = [r.anomaly_step - inject for r in rs if r.anomaly_step is not None]
        print(f"{fault:<21}{len(hit_a):>5}/{len(rs):<3}{_median([d - inject for d in hit_a]):>7}  "
              f"{_shown(caught, 44):<45}{len(hit_q):>3}/{len(rs):<2}{_median([d - inject for d in hit_q]):>7}"
              f"{len(cf):>11}/{len(rs):<2}{_median(cf):>6}{len(an):>12}/{len(rs):<2}{_median(an):>6}")
        summary["faults"][fault] = {
            "runs": len(rs), "injected_at": inject, "detected_any_rule": len(hit_a),
            "median_delay_any_rule": statistics.median([d - inject for d in hit_a]) if hit_a else None,
            "detected_quiet_rules": len(hit_q), "quiet_rules": caught,
            "median_delay_quiet_rules": statistics.median([d - inject for d in hit_q]) if hit_q else None,
            "all_rules_fired_after_injection": _counts(
                [rule for r in rs for rule, st in r.fired.items() if any(x >= inject for x in st)]),
            "check_finite": len(cf), "check_finite_median_delay": statistics.median(cf) if cf else None,
            "detect_anomaly": len(an), "detect_anomaly_median_delay": statistics.median(an) if an else None}
    print(f"\n{'healthy architecture':<21}{'flagged':>9}{'by quiet':>10}  false positives by rule (runs); "
          f"check_finite, detect_anomaly")
    flagged_quiet = 0
    for arch in dict.fromkeys(r.spec.arch for r in healthy):
        rs = [r for r in healthy if r.spec.arch == arch]
        by_rule = _counts([rule for r in rs for rule in r.fired])
        fq = sum(bool(set(r.fired) & quiet) for r in rs)
        flagged_quiet += fq
        cf = sum(r.check_finite_step is not None for r in rs)
        an = sum(r.anomaly_step is not None for r in rs)
        print(f"{arch:<21}{sum(bool(r.fired) for r in rs):>5}/{len(rs):<3}{fq:>6}/{len(rs):<3}  "
              f"{_shown(by_rule, 80) if by_rule else 'none'}; {cf}, {an}")
        summary["healthy"][arch] = {"runs": len(rs), "flagged": sum(bool(r.fired) for r in rs),
                                    "flagged_by_quiet_rules": fq, "rules": by_rule, "check_finite": cf,
                                    "detect_anomaly": an}
    no_data = _counts([rule for r in results for rule in r.no_data])
    n_f, n_h = max(len(faults), 1), max(len(healthy), 1)
    flagged_any = sum(bool(r.fired) for r in healthy)
    summary.update({"detected_rate": det_any / n_f, "flagged_rate": flagged_any / n_h,
                    "quiet_rules": sorted(quiet), "quiet_detected_rate": det_quiet / n_f,
                    "quiet_flagged_rate": flagged_quiet / n_h, "no_data_runs": no_data, "runs": len(results)})
    truly_healthy = sum(healthy_by_validation(r.validation) for r in healthy)
    arch_accuracy = {a: _final_accuracy([r for r in healthy if r.spec.arch == a]) for a in HEALTHY_ARCHS}
    fault_accuracy = {f.name: _final_accuracy([r for r in faults if r.spec.fault == f]) for f in FAULTS}
    summary.update({"healthy_by_validation": truly_healthy, "final_accuracy_healthy": arch_accuracy,
                    "final_accuracy_faults": fault_accuracy})
    print(f"\nground truth, without the rules: {truly_healthy}/{len(healthy)} healthy runs end within 5% of their best "
          f"validation loss with accuracy up 0.3 or more; final validation accuracy (median), healthy: "
          + ", ".join(f"{a} {v}" for a, v in arch_accuracy.items() if v != "-") + "; faulty: "
          + ", ".join(f"{f} {v}" for f, v in fault_accuracy.items() if v != "-"))
    print(f"rules that never saw data, in how many runs: {_shown(no_data, 200) if no_data else 'none'}")
    print(f"quiet rules (flag <= {TARGET_FLAGGED:.0%} of healthy runs): {', '.join(sorted(quiet))}")
    smoothed: dict[str, Any] = {}
    for rule, fault in (("LossNotDecreasing", "plateau"), ("Overfit", "overfitting")):
        hits = [r for r in faults if r.spec.fault and r.spec.fault.name == fault]
        caught = sum(any(x >= r.spec.fault.inject for x in r.smoothed.get(rule, [])) for r in hits if r.spec.fault)
        flagged_smoothed = sum(bool(r.smoothed.get(rule)) for r in healthy)
        smoothed[rule] = {"fault": fault, "caught": caught, "runs": len(hits), "healthy_flagged": flagged_smoothed,
                          "healthy_flagged_on_single_batches": fp.get(rule, 0)}
        print(f"what if the job saved smoothed losses (pass means, hook.save_scalar): {rule} at its defaults flags "
              f"{flagged_smoothed}/{len(healthy)} healthy runs (on single batches: {fp.get(rule, 0)}) and catches "
              f"{caught}/{len(hits)} {fault}")
    summary["smoothed_losses"] = smoothed
    for label, det, flagged in (("every rule", det_any, flagged_any), ("quiet rules only", det_quiet, flagged_quiet)):
        ok = det / n_f >= TARGET_DETECTED and flagged / n_h <= TARGET_FLAGGED
        print(f"detection_bench ({label}): {det}/{len(faults)} faults detected ({det / n_f:.0%}, target >= "
              f"{TARGET_DETECTED:.0%}), {flagged}/{len(healthy)} healthy runs flagged ({flagged / n_h:.0%}, target "
              f"<= {TARGET_FLAGGED:.0%}) {'OK' if ok else 'BELOW TARGET'}")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 runs of 2,000 steps, no detect_anomaly runs")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per fault class (as many healthy runs in all)")
    parser.add_argument("--json", metavar="FILE", help="also write the summary as JSON")
    args, _ = parser.parse_known_args(argv)
    try:
        _torch()
    except ModuleNotFoundError:
        print("detection_bench: skipped, torch is not installed (pip install 'smx-debug[torch]')")
        return 0
    steps = QUICK_STEPS if args.quick else STEPS
    specs = runs(args.quick, args.seeds)
    t = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="smx-detection-") as tmp:
        for spec in specs:
            results.append(run_one(spec, Path(tmp), steps=steps, baselines=not args.quick))
    summary = report(results)
    summary["wall_seconds"] = time.perf_counter() - t
    print(f"detection_bench: {len(results)} runs in {summary['wall_seconds']:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1, default=_jsonable) + "\n")
    met = summary["detected_rate"] >= TARGET_DETECTED and summary["flagged_rate"] <= TARGET_FLAGGED
    return 0 if met or args.quick else 1


def _jsonable(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else str(value)

if __name__ == "__main__":
    sys.exit(main())
