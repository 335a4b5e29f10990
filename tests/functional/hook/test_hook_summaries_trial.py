"""A run written by ``smx_debug.hook`` from a ``profile: recommended`` plan holds the rules of our own's summary
statistics, not their collections' whole tensors; the rules' verdicts on it equal their verdicts on the same run
saved with whole tensors (same seed, faults from the tuning set); ClassImbalance gets at least 500 labels per save;
a ``profile: debugger`` plan's hook writes what it wrote before (whole tensors, the step's own labels)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import smx_debug.hook as smd  # noqa: E402
from smx_debug.config import DebugPlan  # noqa: E402
from smx_debug.evaluate.tensor_eval import TensorEvaluator  # noqa: E402
from smx_debug.hook.json_config import settings_from_plan  # noqa: E402
from smx_debug.hook.summaries import statistics_by_collection  # noqa: E402
from smx_debug.rules.definitions import SUMMARY_PREFIX  # noqa: E402
from smx_debug.rules.registry import profile_rules, rule_defs  # noqa: E402
from smx_debug.tensors import create_trial  # noqa: E402

STEPS, SAVE_INTERVAL, ONSET, BATCH = 300, 50, 150, 64
BASE = {"name": "summaries", "region": "us-west-2", "s3_output_path": "s3://bucket/debug"}
RECOMMENDED = DebugPlan.model_validate({**BASE, "profile": "recommended", "hook": {"save_interval": SAVE_INTERVAL}})
# the rules of our own that read summary statistics
OWN = tuple(d.name for d in rule_defs(family="smx") if any(c.statistics for c in d.spec.collections))


def _run(out_dir: Path, fault: str, *, summaries: bool, plan: DebugPlan = RECOMMENDED, keep_raw: bool = False) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    teacher = torch.randn(16, 4, generator=g)
    x = torch.randn(2048, 16, generator=g)
    y = (x @ teacher).argmax(1)
    act = torch.nn.Tanh if fault == "saturated" else torch.nn.ReLU
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), act(), torch.nn.Linear(32, 32), act(),
                                torch.nn.Linear(32, 4))
    with torch.no_grad():
        for m in model:
            if isinstance(m, torch.nn.Linear) and fault in ("poor_init", "saturated"):
                m.weight.normal_(0.0, 1.0 if fault == "poor_init" else 3.0)
            if isinstance(m, torch.nn.Linear) and fault == "dead_relu" and m is not model[4]:
                m.bias.fill_(-5.0)
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    settings = settings_from_plan(plan, str(out_dir))
    hook = smd.Hook.from_settings(settings.model_copy(update={"summaries": summaries}))
    if keep_raw:  # the statistics beside the whole tensors
        for name in statistics_by_collection():
            hook.get_collection(name).reduction_config = smd.ReductionConfig(save_raw_tensor=True)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.TRAIN)
    for step in range(STEPS):
        if step == ONSET and fault == "exploding":
            for group in opt.param_groups:
                group["lr"] *= 1000
        if step == ONSET and fault == "frozen":
            model[2].weight.requires_grad_(False)
            model[2].bias.requires_grad_(False)
        idx = torch.randint(0, len(x), (BATCH,), generator=g)
        out = model(x[idx])
        if step == ONSET and fault == "nan":
            out = out + torch.sqrt(out[:, :1] - out.abs().max() - 1.0)
        loss = loss_fn(out, y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()


def _verdicts(trial_dir: Path) -> dict[str, tuple[int, int, int | None]]:
    results = TensorEvaluator(create_trial(str(trial_dir)), OWN).refresh()
    return {name: (r.rule_triggered, r.datapoints, r.trigger_step) for name, r in results.items()}


def test_hook_summaries_recommended_trial_holds_statistics_not_whole_tensors(tmp_path: Path) -> None:
    _run(tmp_path / "t", "healthy", summaries=settings_from_plan(RECOMMENDED, "x").summaries)
    trial = create_trial(str(tmp_path / "t"))
    names = set(trial.tensor_names())
    stats = {s for stats in statistics_by_collection().values() for s in stats}
    assert {n.split("/")[2] for n in names if n.startswith(SUMMARY_PREFIX)} == stats - {"abs_mean", "l2"} - {
        s for s in stats if s.startswith("share_abs_gt_")}  # smdebug's reductions; no tanh/sigmoid in this model
    values = trial.arrays(names, start_step=0, end_step=STEPS + 1).values
    whole = sorted(n for n, v in values.items() if not n.startswith(SUMMARY_PREFIX) and len(v) and v.values[0].size > 1)
    assert whole == ["labels", "predictions"]  # every other tensor saved is a statistic or a scalar (the loss)
    assert "smdebug/reductions/abs_mean/gradient/Sequential_0.weight" not in names  # folded into its tensor...
    assert "gradient/Sequential_0.weight" in names  # ...which the trial knows by its reductions only


@pytest.mark.parametrize("fault", ["healthy", "exploding", "dead_relu", "poor_init", "saturated", "frozen", "nan"])
def test_hook_summaries_own_rules_verdicts_equal_those_on_whole_tensors(tmp_path: Path, fault: str) -> None:
    _run(tmp_path / "summaries", fault, summaries=True)
    _run(tmp_path / "whole", fault, summaries=False)
    on_summaries, on_whole = _verdicts(tmp_path / "summaries"), _verdicts(tmp_path / "whole")
    assert on_summaries == on_whole
    fired = {name for name, (triggered, _, _) in on_whole.items() if triggered}
    expected = {"healthy": set(), "exploding": {"SmxWeightGrowth"}, "dead_relu": {"SmxDeadReluShare"},
                "poor_init": {"SmxWeightScale"}, "saturated": {"SmxSaturatedShare"}, "frozen": {"SmxStalledWeights"},
                "nan": {"SmxWeightGrowth"}}[fault]
    assert expected <= fired and (fired or fault == "healthy")


def test_hook_summaries_class_imbalance_gets_500_labels_per_save(tmp_path: Path) -> None:
    _run(tmp_path / "t", "healthy", summaries=True)
    trial = create_trial(str(tmp_path / "t"))
    labels = trial.tensor("labels")
    saved = [s for s in labels.steps() if s > 0]
    assert saved and all(len(labels.value(s)) >= 500 for s in saved)
    result = TensorEvaluator(trial, ["ClassImbalance"]).refresh()["ClassImbalance"]
    assert result.datapoints > 0 and result.details["samples"] >= 500 * len(saved)


def test_hook_debugger_profile_trial_saves_whole_tensors_as_before(tmp_path: Path) -> None:
    plan = DebugPlan.model_validate({**BASE, "profile": "debugger", "rules": [{"name": "VanishingGradient"}],
                                     "hook": {"save_interval": SAVE_INTERVAL}})
    settings = settings_from_plan(plan, str(tmp_path / "t"))
    assert settings.summaries is False
    _run(tmp_path / "t", "healthy", summaries=False, plan=plan)
    names: Any = set(create_trial(str(tmp_path / "t")).tensor_names())
    assert not any(n.startswith(SUMMARY_PREFIX) for n in names)
    assert "gradient/Sequential_0.weight" in names
    assert set(profile_rules("recommended")) >= set(OWN) and len(OWN) == 7


def test_hook_summaries_beside_whole_tensors_leave_debuggers_rules_verdicts_unchanged(tmp_path: Path) -> None:
    debugger = [d.name for d in rule_defs(family="debugger") if "tensors" in d.evaluates_on
                and d.name not in ("ClassImbalance", "Confusion")]  # these read the labels, kept since the last save
    plan = DebugPlan.model_validate({**BASE, "rules": [{"name": r} for r in debugger],
                                     "hook": {"save_interval": SAVE_INTERVAL}})
    _run(tmp_path / "both", "healthy", summaries=True, plan=plan, keep_raw=True)
    _run(tmp_path / "whole", "healthy", summaries=False, plan=plan)
    assert any(n.startswith(SUMMARY_PREFIX) for n in create_trial(str(tmp_path / "both")).tensor_names())

    def verdicts(trial_dir: Path) -> tuple[dict[str, tuple[int, int]], set[str]]:
        ev = TensorEvaluator(create_trial(str(trial_dir)), debugger)
        results = ev.refresh()
        read = {n for sel in ev._selections.values() for n in sel.names}
        # the rules of every tensor (AllZero, ExplodingTensor, UnchangedTensor) also judge the labels and predictions
        # the recommended hook keeps: their datapoints are not compared
        every = {"AllZero", "ExplodingTensor", "UnchangedTensor"}
        return {name: (r.rule_triggered, -1 if name in every else r.datapoints) for name, r in results.items()}, read

    (both, read), (whole, _) = verdicts(tmp_path / "both"), verdicts(tmp_path / "whole")
    assert not any(n.startswith(SUMMARY_PREFIX) for n in read)
    assert both == whole
