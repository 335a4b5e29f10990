"""Summary statistics (``Hook(summaries=True)``, a recommended-profile plan's ``save_summaries``): each statistic the
hook computes on the device equals the one the rule of our own computes from the raw values; the hook saves them
instead of the rules' collections' whole tensors; it keeps every step's labels and predictions since the last save
(at least ClassImbalance's 500 samples per save, bounded)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import smx_debug.hook as smd  # noqa: E402
from smx_debug.hook.summaries import compute, record_name, statistics_by_collection, to_host  # noqa: E402
from smx_debug.rules.definitions import parse_summary_name, summary_tensor_name  # noqa: E402
from smx_debug.rules.own import _shared  # noqa: E402
from smx_debug.rules.own.smx_stalled_weights import _sample  # noqa: E402

MakeHook = Callable[..., tuple[smd.Hook, smd.MemorySink]]

# the rules' definitions, computed from raw values as the rules do when a trial has no summary
RAW: dict[str, Callable[[np.ndarray], Any]] = {
    "share_zero": _shared.share_zero,
    "share_abs_gt_5": lambda v: _shared.share_abs_beyond(5.0, v),
    "count_nonfinite": _shared.count_nonfinite,
    "abs_mean": _shared.abs_mean,
    "l2": _shared.l2_norm,
    "init_scale": _shared.init_scale,
    "sample": lambda v: np.asarray(_sample(v)),
}


def _tensor(shape: tuple[int, ...], *, seed: int = 0) -> Any:
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g) * 4
    t.view(-1)[::7] = 0.0  # exact zeros
    return t


@pytest.mark.parametrize("stat", sorted(RAW))
@pytest.mark.parametrize("shape", [(64, 48), (8, 3, 5, 5), (1000,), (300, 20)])
def test_summary_statistic_equals_the_rules_value_from_raw(stat: str, shape: tuple[int, ...]) -> None:
    t = _tensor(shape)
    got = to_host(t, compute(t, (stat,)))
    expected = RAW[stat](t.numpy().astype(np.float64))
    if expected is None:  # init_scale of a vector: not computed
        assert stat not in got
        return
    np.testing.assert_allclose(np.asarray(got[stat], np.float64), expected, rtol=1e-12)


def test_summary_statistic_count_nonfinite_counts_nan_and_infinity() -> None:
    t = torch.ones(10)
    t[2], t[5] = math.nan, math.inf
    assert float(to_host(t, compute(t, ("count_nonfinite",)))["count_nonfinite"]) == 2.0


def test_summary_statistic_sample_of_a_large_tensor_is_512_values_not_the_tensor() -> None:
    t = _tensor((256, 256))
    sample = to_host(t, compute(t, ("sample",)))["sample"]
    assert sample.shape == (512,)


def test_summary_statistics_of_integer_tensors_are_not_computed() -> None:
    assert compute(torch.arange(10), ("share_zero", "l2")) == {}


def test_summary_record_names_use_smdebug_reductions_where_they_fit() -> None:
    assert record_name("fc.weight", "abs_mean") == "smdebug/reductions/abs_mean/fc.weight"
    assert record_name("fc.weight", "l2") == "smdebug/reductions/l2/fc.weight"
    assert record_name("fc.weight", "share_zero") == summary_tensor_name("fc.weight", "share_zero")
    assert parse_summary_name(record_name("fc.weight", "sample")) == ("fc.weight", "sample")


def test_statistics_by_collection_holds_what_each_rule_of_our_own_reads() -> None:
    table = statistics_by_collection()
    assert {"share_zero", "l2", "count_nonfinite", "init_scale", "sample"} <= set(table["weights"])
    assert {"share_zero", "abs_mean", "count_nonfinite"} <= set(table["gradients"])
    assert table["relu_output"] == ("share_zero",)
    assert set(table["smx_saturation_inputs"]) == {"share_abs_gt_5", "share_abs_gt_9"}


def _train(hook: smd.Hook, steps: int, *, batch: int = 64, save_labels: bool = False) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.TRAIN)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x, y = torch.randn(batch, 8, generator=g), torch.randint(0, 3, (batch,), generator=g)
        out = model(x)
        if save_labels:
            hook.save_tensor("labels", y, "labels")
            hook.save_tensor("predictions", out.argmax(1), "predictions")
        loss = loss_fn(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()


def _collections() -> list[str]:
    return ["weights", "gradients", "losses", "relu_output"]


def test_hook_summaries_saves_statistics_instead_of_the_rules_collections_tensors(make_hook: MakeHook) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=10), include_collections=_collections(),
                           summaries=True)
    hook.get_collection("relu_output").include(".*relu_output")
    _train(hook, 21)
    names = sink.names(10)
    assert "Sequential_0.weight" not in names and "gradient/Sequential_0.weight" not in names
    assert "0_relu_output_0" not in names and "1_relu_output_0" not in names
    assert summary_tensor_name("Sequential_0.weight", "sample") in names
    assert "smdebug/reductions/abs_mean/gradient/Sequential_0.weight" in names
    assert any(n.startswith("smx/summaries/share_zero/") and "relu_output" in n for n in names)
    assert "CrossEntropyLoss_output_0" in names  # losses stay raw


def test_hook_summaries_collection_asking_for_raw_keeps_its_whole_tensors(make_hook: MakeHook) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=10), include_collections=_collections(),
                           summaries=True)
    hook.get_collection("weights").reduction_config = smd.ReductionConfig(save_raw_tensor=True)
    _train(hook, 11)
    names = sink.names(10)
    assert "Sequential_0.weight" in names and summary_tensor_name("Sequential_0.weight", "sample") in names


def test_hook_without_summaries_saves_whole_tensors_and_no_statistics(make_hook: MakeHook) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=10), include_collections=_collections())
    _train(hook, 11, save_labels=True)
    names = sink.names(10)
    assert "Sequential_0.weight" in names and "gradient/Sequential_0.weight" in names
    assert not any(n.startswith("smx/summaries/") for n in names)
    assert sink.tensor("labels", 10).shape == (64,)  # the step's own labels only, as smdebug


@pytest.mark.parametrize("save_labels", [False, True], ids=["loss-inputs", "save_tensor"])
def test_hook_summaries_saves_at_least_512_labels_and_predictions_per_save(make_hook: MakeHook,
                                                                            save_labels: bool) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=20), include_collections=_collections(),
                           summaries=True)
    _train(hook, 41, batch=48, save_labels=save_labels)
    for step in (20, 40):
        labels, predictions = sink.tensor("labels", step), sink.tensor("predictions", step)
        assert 512 <= len(labels) < 512 + 48 and len(predictions) == len(labels)
        assert labels.dtype.kind == "i" and predictions.dtype.kind == "i"


def test_hook_summaries_labels_of_a_save_are_the_latest_steps(make_hook: MakeHook) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=1000), include_collections=_collections(),
                           summaries=True)
    hook.register_module(model := torch.nn.Linear(2, 3))
    loss_fn = torch.nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.TRAIN)
    for i in range(1001):  # step i's labels are all i % 3; 100 samples a step
        loss_fn(model(torch.zeros(100, 2)), torch.full((100,), i % 3))
    hook.close()
    labels = sink.tensor("labels", 1000)
    assert len(labels) == 600  # the latest six steps hold >= 512 samples, five would not
    assert labels.tolist() == [i % 3 for i in range(995, 1001) for _ in range(100)]
