"""Held-out detection benchmark: Debugger's tensor rules (the ``debugger`` set) against smx-debug's recommended
rules (the ``recommended`` set), on the architectures the thresholds were chosen on and on architectures they were
not (issue 30, item 5).

Each run trains a small PyTorch model on the CPU, as bench/detection_bench.py does (same data: a random teacher
labels Gaussian inputs in 4 classes; same optimizer; a validation pass of 500 EVAL batches before every 500th
training step and after the last, whose mean loss and accuracy are the ground truth measured without the rules),
recorded by smx_debug.hook from the detection benchmark's plan (Debugger's 17 tensor rules: one plan cannot list
both sets, SageMaker's limit is 20 rules; its collections hold everything the recommended rules read, and a plan
with `profile: recommended` does not exist yet). The script also saves each batch's labels and predictions (hook.save_tensor) and, after each validation
pass, the interval means the recommended loss rules read (``hook.save_scalar("train_loss_mean")``: the mean
training loss since the previous pass; ``hook.save_scalar("val_loss_mean")``: the pass's mean): the hook does not
save interval means by itself yet.

Architectures:
  tuning    mlp_relu, mlp_tanh, mlp_sigmoid, cnn_relu (the detection benchmark's), with its ten fault classes on
            the architectures it injects them on (detection_bench.FAULTS). The recommended thresholds were chosen
            on these runs only.
  held-out  mlp_bn (MLP with BatchNorm), resmlp_ln (residual MLP with LayerNorm), gru (GRU sequence classifier
            over 4 tokens of 4 features), attn (one transformer encoder layer with LayerNorm over the same tokens);
            nobody tuned anything on them. The fault classes are injected where they mean something (see
            HELDOUT_FAULTS): the exploding learning rate is x100 here (x1000 in tuning), the saturated network is
            a BatchNorm tanh MLP with its BatchNorm scale set to 15, the dead ReLUs come from a normalisation or
            Linear bias of -5 before a ReLU module; no vanishing-gradient run (every held-out architecture has
            normalisation or gating that prevents it by design), no dead ReLU on gru/attn (no ReLU module).

A fault is detected when a rule of the set fires at or after its injection step (delay: injection to that saved
step, in training steps); a healthy run is flagged when any rule of the set fires.
Targets (recommended set, held-out runs): >= 95% of faults detected, <= 5% of healthy runs flagged, median delay
<= one save interval (500 steps).
Usage: python bench/heldout_bench.py [--quick] [--only tuning|heldout] [--seeds N] [--json FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _detection_bench() -> Any:
    if "detection_bench" not in sys.modules:
        spec = importlib.util.spec_from_file_location("detection_bench", HERE / "detection_bench.py")
        assert spec is not None and spec.loader is not None  # our own file
        module = importlib.util.module_from_spec(spec)
        sys.modules["detection_bench"] = module
        spec.loader.exec_module(module)
    return sys.modules["detection_bench"]


db = _detection_bench()
Fault = db.Fault
STEPS, SAVE_INTERVAL = 2000, db.SAVE_INTERVAL
TARGET_DETECTED, TARGET_FLAGGED = 0.95, 0.05
TUNING_ARCHS = db.HEALTHY_ARCHS
HELDOUT_ARCHS = ("mlp_bn", "resmlp_ln", "gru", "attn")


def recommended_rules() -> tuple[str, ...]:
    """The recommended set: the ``recommended`` profile's rules at their defaults (the rules of our own in it, and
    any of Debugger's it keeps)."""
    from smx_debug.rules.registry import profile_rules

    return profile_rules("recommended")


def _heldout_faults() -> tuple[Fault, ...]:
    out: list[Fault] = []
    for arch in HELDOUT_ARCHS:
        out += [Fault("exploding_gradients", arch, 1000, lr_factor_at=(1000, 100.0))]
        if arch in ("mlp_bn", "resmlp_ln"):
            out += [Fault("dead_relu", arch, 0, init="dead_bias")]
        if arch != "mlp_bn":  # BatchNorm makes the scale of the weights before it irrelevant: no fault there
            out += [Fault("poor_initialization", arch, 0, init="normal1")]
        if arch == "mlp_bn":
            out += [Fault("saturated_activation", "mlp_bn_tanh", 0, init="bn_scale15")]
        out += [Fault("frozen_layer", arch, 1000, freeze_at=1000),
                Fault("overfitting", arch, 0, train_samples=64),
                Fault("plateau", arch, 1000, lr_factor_at=(1000, 1e-6)),
                Fault("nan_operation", arch, 1200, nan_at=1200),
                Fault("class_imbalance", arch, 0, imbalance=0.9)]
    return tuple(out)


HELDOUT_FAULTS = _heldout_faults()


@dataclass(frozen=True)
class Run(db.RunSpec):  # type: ignore[misc]
    """A detection benchmark's run in a group of architectures."""

    group: str = field(kw_only=True)  # tuning | heldout

    @property
    def name(self) -> str:
        return f"{self.group}-{super().name}"


@dataclass
class Outcome:
    run: Run
    fired: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # set -> rule -> training steps fired
    validation: list[tuple[float, float]] = field(default_factory=list)
    stats: dict[str, dict[str, list[tuple[int, float]]]] = field(default_factory=dict)  # rule -> tensor -> values
    seconds: float = 0.0


def _model(arch: str, init: str, torch: Any) -> Any:
    nn = torch.nn
    if arch in TUNING_ARCHS or arch == "deep_sigmoid":
        return db._model(arch, init, torch)

    class ResBlock(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(64)
            self.fc1 = nn.Linear(64, 64)
            self.relu = nn.ReLU()
            self.fc2 = nn.Linear(64, 64)

        def forward(self, x: Any) -> Any:
            return x + self.fc2(self.relu(self.fc1(self.norm(x))))

    class ResMLP(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Linear(16, 64)
            self.block1 = ResBlock()
            self.block2 = ResBlock()
            self.norm = nn.LayerNorm(64)
            self.head = nn.Linear(64, 4)

        def forward(self, x: Any) -> Any:
            return self.head(self.norm(self.block2(self.block1(self.inp(x)))))

    class GRUClassifier(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRU(4, 32, batch_first=True)
            self.head = nn.Linear(32, 4)

        def forward(self, x: Any) -> Any:
            out, _ = self.gru(x.reshape(-1, 4, 4))
            return self.head(out[:, -1])

    class Attention(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(4, 32)
            self.pos = nn.Parameter(torch.zeros(1, 4, 32))
            self.encoder = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
            self.head = nn.Linear(32, 4)

        def forward(self, x: Any) -> Any:
            return self.head(self.encoder(self.proj(x.reshape(-1, 4, 4)) + self.pos).mean(1))

    model: Any
    if arch in ("mlp_bn", "mlp_bn_tanh"):
        act = nn.Tanh if arch == "mlp_bn_tanh" else nn.ReLU
        model = nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), act(), nn.Linear(64, 64), nn.BatchNorm1d(64),
                              act(), nn.Linear(64, 4))
    else:
        model = {"resmlp_ln": ResMLP, "gru": GRUClassifier, "attn": Attention}[arch]()
    with torch.no_grad():
        if init == "dead_bias":
            if arch == "mlp_bn":
                for m in model:
                    if isinstance(m, nn.BatchNorm1d):
                        m.bias.fill_(-5.0)
            else:
                for block in (model.block1, model.block2):
                    block.fc1.bias.fill_(-5.0)
        elif init == "normal1":
            for p in model.parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, 1.0)
        elif init == "bn_scale15":
            for m in model:
                if isinstance(m, nn.BatchNorm1d):
                    m.weight.fill_(15.0)
    return model


def _frozen_params(model: Any, arch: str, torch: Any) -> list[Any]:
    """The middle layer's parameters (the frozen_layer fault)."""
    if arch in TUNING_ARCHS:
        linears = [m for m in model if isinstance(m, torch.nn.Linear)]
        return [linears[1].weight, linears[1].bias]
    if arch == "mlp_bn":
        return list(model[3].parameters())
    if arch == "resmlp_ln":
        return list(model.block1.parameters())
    if arch == "gru":
        return list(model.gru.parameters())
    return list(model.encoder.linear1.parameters())


def summarising_hook(out_dir: str) -> Any:
    """The detection benchmark's hook (its collections hold what either set reads) with the recommended profile's
    summary statistics (``save_summaries``) beside the whole tensors: the recommended rules read the statistics (a
    rule of our own prefers them), Debugger's the tensors. The saturation rule's collection is added (the
    detection plan has Debugger's tanh/sigmoid inputs, not the recommended profile's collection of them)."""
    import smx_debug.hook as smd
    from smx_debug.config import CollectionConfig
    from smx_debug.hook.json_config import settings_from_plan
    from smx_debug.hook.summaries import statistics_by_collection

    plan = db._plan()
    plan = plan.model_copy(update={"hook": plan.hook.model_copy(update={"collections": (
        *plan.hook.collections,
        CollectionConfig(name="smx_saturation_inputs", include_regex=".*tanh_input|.*sigmoid_input",
                         save_interval=SAVE_INTERVAL))})})
    settings = settings_from_plan(plan, out_dir).model_copy(update={"summaries": True})
    hook = smd.Hook.from_settings(settings)
    for name in statistics_by_collection():
        hook.get_collection(name).reduction_config = smd.ReductionConfig(save_raw_tensor=True)
    return hook


def train(run: Run, out_dir: str, *, steps: int = STEPS) -> list[tuple[float, float]]:
    """One run recorded by the hook; returns each validation pass's mean loss and accuracy (ground truth)."""
    import smx_debug.hook as smd

    torch = db._torch()
    torch.manual_seed(run.seed)
    fault = run.fault
    x, y, xv, yv = db._data(run.seed, fault, torch)
    model = _model(run.arch, fault.init if fault else "default", torch)
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    hook = summarising_hook(out_dir)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    g = torch.Generator().manual_seed(run.seed + 1)
    validation: list[tuple[float, float]] = []
    window: list[float] = []

    def validate() -> None:
        hook.set_mode(smd.modes.EVAL)
        validation.append(db.validation_pass(model, loss_fn, xv, yv, torch))
        hook.set_mode(smd.modes.TRAIN)
        if window:
            hook.save_scalar("train_loss_mean", sum(window) / len(window))
        hook.save_scalar("val_loss_mean", validation[-1][0])
        window.clear()

    hook.set_mode(smd.modes.TRAIN)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step in range(steps):
            if step % SAVE_INTERVAL == 0:
                validate()
            db.scale_lr(opt, fault, step)
            if fault and fault.freeze_at is not None and step == fault.freeze_at:
                for p in _frozen_params(model, run.arch, torch):
                    p.requires_grad_(False)
            yb, out = db.training_batch(model, x, y, g, fault, step, torch)
            loss = loss_fn(out, yb)
            hook.save_tensor("labels", yb, "labels")
            hook.save_tensor("predictions", out.argmax(1), "predictions")
            window.append(float(loss))
            opt.zero_grad()
            loss.backward()
            opt.step()
        validate()
    hook.close()
    return validation


def judge(out_dir: str, rules: Sequence[str]) -> tuple[dict[str, list[int]], dict[str, dict[str, list[tuple[int, float]]]]]:
    """``rules`` at their defaults, replayed saved step by saved step: the training steps at which each fired, and
    each rule's judged values per tensor (for choosing thresholds on the tuning runs)."""
    from smx_debug.evaluate.tensor_eval import TensorEvaluator
    from smx_debug.tensors import create_trial

    trial = create_trial(out_dir)
    ev = TensorEvaluator(trial, list(rules))
    fired: dict[str, list[int]] = {}
    counts: dict[str, int] = {}
    for step in trial.steps():
        for name, r in ev.refresh(until=step + 1).items():
            if r.rule_triggered > counts.get(name, 0):
                at = fired.setdefault(name, [])
                if db.train_steps_before(step) not in at:
                    at.append(db.train_steps_before(step))
            counts[name] = r.rule_triggered
    stats: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for name, state in ev._states.items():
        tally = getattr(state, "tally", state)
        stats[name] = {t: [(db.train_steps_before(int(s)), float(v)) for s, v in zip(tr.steps, tr.values, strict=True)]
                       for t, tr in getattr(tally, "traces", {}).items()}
    return fired, stats


SETS = ("debugger", "recommended")


def run_one(run: Run, root: Path, *, steps: int) -> Outcome:
    t = time.perf_counter()
    out = str(root / run.name)
    validation = train(run, out, steps=steps)
    outcome = Outcome(run, validation=validation)
    for name, rules in (("debugger", db.debugger_tensor_rules()), ("recommended", recommended_rules())):
        fired, stats = judge(out, rules)
        outcome.fired[name] = fired
        if name == "recommended":
            outcome.stats = stats
    outcome.seconds = time.perf_counter() - t
    return outcome


def runs(group: str, *, quick: bool, seeds: int) -> list[Run]:
    if group == "tuning":
        faults = [Run(f.arch, s, f, group=group) for f in db.FAULTS for s in range(seeds)]
        archs = TUNING_ARCHS
    else:
        faults = [Run(f.arch, s, f, group=group) for f in HELDOUT_FAULTS for s in range(max(1, seeds - 1))]
        archs = HELDOUT_ARCHS
    healthy_per_arch = 1 if quick else 5
    healthy = [Run(a, 100 + s, group=group) for a in archs for s in range(healthy_per_arch)]
    if quick:
        keep = {"exploding_gradients", "plateau", "frozen_layer"}
        faults = [r for r in faults if r.fault and r.fault.name in keep and r.seed == 0][:3]
    return faults + healthy


def _detection(o: Outcome, rule_set: str) -> tuple[int | None, list[str]]:
    assert o.run.fault is not None
    return db.first_detection(o.fired[rule_set], o.run.fault.inject)



def report(outcomes: Sequence[Outcome], group: str, rule_set: str) -> dict[str, Any]:
    """Print one group's two tables for one rule set; return its summary."""
    faults = [o for o in outcomes if o.run.group == group and o.run.fault]
    healthy = [o for o in outcomes if o.run.group == group and not o.run.fault]
    print(f"\n[{group} architectures, {rule_set} set]")
    print(f"{'fault class':<22}{'detected':>9}{'delay':>7}  rules that caught it first (runs)")
    detected, delays = 0, []
    per_class: dict[str, Any] = {}
    for fault in dict.fromkeys(o.run.fault.name for o in faults if o.run.fault):
        rs = [o for o in faults if o.run.fault and o.run.fault.name == fault]
        found = [(_detection(o, rule_set), o.run.fault.inject) for o in rs if o.run.fault]
        hit = [d - inject for (d, _), inject in found if d is not None]
        detected += len(hit)
        delays += hit
        caught = db._counts([rule for (_, rules), _ in found for rule in rules])
        median = statistics.median(hit) if hit else None
        print(f"{fault:<22}{len(hit):>5}/{len(rs):<3}{'-' if median is None else f'{median:g}':>7}  "
              f"{db._shown(caught, 90)}")
        per_class[fault] = {"runs": len(rs), "detected": len(hit), "median_delay": median, "rules": caught}
    print(f"{'healthy architecture':<22}{'flagged':>9}         rules that fired (runs)")
    flagged = 0
    per_arch: dict[str, Any] = {}
    for arch in dict.fromkeys(o.run.arch for o in healthy):
        rs = [o for o in healthy if o.run.arch == arch]
        n = sum(bool(o.fired[rule_set]) for o in rs)
        flagged += n
        by_rule = db._counts([rule for o in rs for rule in o.fired[rule_set]])
        print(f"{arch:<22}{n:>5}/{len(rs):<3}         {db._shown(by_rule, 90) if by_rule else 'none'}")
        per_arch[arch] = {"runs": len(rs), "flagged": n, "rules": by_rule}
    n_f, n_h = max(len(faults), 1), max(len(healthy), 1)
    median = statistics.median(delays) if delays else None
    ok = detected / n_f >= TARGET_DETECTED and flagged / n_h <= TARGET_FLAGGED and (
        median is not None and median <= SAVE_INTERVAL)
    print(f"heldout_bench ({group}, {rule_set}): {detected}/{len(faults)} faults detected ({detected / n_f:.0%}, "
          f"target >= {TARGET_DETECTED:.0%}), {flagged}/{len(healthy)} healthy runs flagged ({flagged / n_h:.0%}, "
          f"target <= {TARGET_FLAGGED:.0%}), median delay {'-' if median is None else f'{median:g}'} steps (target "
          f"<= {SAVE_INTERVAL}) {'OK' if ok else 'BELOW TARGET'}")
    truth = sum(db.healthy_by_validation(o.validation) for o in healthy)
    return {"faults": per_class, "healthy": per_arch, "detected": detected, "fault_runs": len(faults),
            "flagged": flagged, "healthy_runs": len(healthy), "median_delay": median, "met": ok,
            "healthy_by_validation": truth}


def ground_truth(outcomes: Sequence[Outcome], group: str) -> None:
    healthy = [o for o in outcomes if o.run.group == group and not o.run.fault]
    faults = [o for o in outcomes if o.run.group == group and o.run.fault]
    truth = sum(db.healthy_by_validation(o.validation) for o in healthy)
    acc = {a: statistics.median(o.validation[-1][1] for o in healthy if o.run.arch == a)
           for a in dict.fromkeys(o.run.arch for o in healthy)}
    fault_acc = {f: statistics.median(o.validation[-1][1] for o in faults if o.run.fault and o.run.fault.name == f)
                 for f in dict.fromkeys(o.run.fault.name for o in faults if o.run.fault)}
    print(f"\nground truth ({group}), without the rules: {truth}/{len(healthy)} healthy runs end within 5% of their "
          "best validation loss with accuracy up 0.3 or more; final validation accuracy (median), healthy: "
          + ", ".join(f"{a} {v:.2f}" for a, v in acc.items()) + "; faulty: "
          + ", ".join(f"{f} {v:.2f}" for f, v in fault_acc.items()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few runs per group (a smoke run)")
    parser.add_argument("--only", choices=("tuning", "heldout"), help="one group of architectures")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per tuning fault class (held-out: one less)")
    parser.add_argument("--json", metavar="FILE", help="also write the summary (and each run's rule values)")
    args, _ = parser.parse_known_args(argv)
    try:
        db._torch()
    except ModuleNotFoundError:
        print("heldout_bench: skipped, torch is not installed (pip install 'smx-debug[torch]')")
        return 0
    groups = [args.only] if args.only else ["tuning", "heldout"]
    t = time.perf_counter()
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="smx-heldout-") as tmp:
        for group in groups:
            for run in runs(group, quick=args.quick, seeds=args.seeds):
                outcomes.append(run_one(run, Path(tmp), steps=STEPS))
    summary: dict[str, Any] = {}
    for group in groups:
        ground_truth(outcomes, group)
        for rule_set in SETS:
            summary[f"{group}/{rule_set}"] = report(outcomes, group, rule_set)
    summary["wall_seconds"] = time.perf_counter() - t
    print(f"\nheldout_bench: {len(outcomes)} runs in {summary['wall_seconds']:.0f} s")
    if args.json:
        summary["runs"] = [{"run": o.run.name, "fired": o.fired, "validation": o.validation, "stats": o.stats}
                           for o in outcomes]
        Path(args.json).write_text(json.dumps(summary, indent=1, default=str) + "\n")
    target = summary.get("heldout/recommended")
    return 0 if args.quick or target is None or target["met"] else 1



if __name__ == "__main__":
    sys.exit(main())
