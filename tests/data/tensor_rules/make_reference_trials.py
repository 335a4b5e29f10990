"""Write tests/data/tensor_rules/<trial>/ with smdebug 1.0.34's own writer (FileWriter, CollectionManager) and
expected.json: per trial, the rules that must fire and the global step at which each must first fire, known by
construction (the onset of the fault written into the data, and the rule's documented definition). Run in the
side environment (smdebug is never a project dependency):

    bash bench/smdebug_env.sh && bench/.venv-smdebug/bin/python tests/data/tensor_rules/make_reference_trials.py

Every trial is one worker, TRAIN steps 0, 10, ..., 110 (wall time 1 s per step), the tensors a PyTorch-like MLP
hook saves (names chosen to match the rules' default regexes) and collections gradients, weights, biases, losses.
``healthy`` also saves EVAL losses at steps 5, 15, ... and must fire no rule (with the parameters the fault
trials give, e.g. TensorVariance's max_threshold). Each other trial is ``healthy`` with one fault from ``ONSET`` (step 50) unless said.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

os.environ["SMDEBUG_TRAINING_END_DELAY_REFRESH"] = "0"

import numpy as np
from smdebug.core.access_layer.utils import training_has_ended
from smdebug.core.collection import Collection
from smdebug.core.collection_manager import CollectionManager
from smdebug.core.modes import ModeKeys
from smdebug.core.writer import FileWriter

HERE = Path(__file__).resolve().parent
STEPS = range(0, 120, 10)
ONSET = 50
BATCH, IMAGES = 8, 64
Tensors = dict[str, np.ndarray]


def loss_at(step: int) -> float:
    return 2.0 / (1.0 + step / 10.0)


def healthy(step: int, rng: np.random.Generator, state: dict[str, np.ndarray]) -> Tensors:
    """One TRAIN step of a healthy run: every rule stays quiet at its defaults."""
    g1 = rng.normal(size=(8, 8)) * 1e-2
    g2 = rng.normal(size=(4, 8)) * 1e-2
    state["w1"] = state.get("w1", rng.normal(size=(8, 8))) - 0.1 * g1
    state["w2"] = state.get("w2", rng.normal(size=(4, 8))) - 0.1 * g2
    labels = np.arange(IMAGES) % 4
    rng.shuffle(labels)
    tokens = rng.integers(1, 50, size=(4, 16))
    tokens[:, 13:] = 0  # 19% padding
    relu1_in, relu2_in = rng.normal(size=(BATCH, 8)), rng.normal(size=(BATCH, 8))
    return {
        "CrossEntropyLoss_output_0": np.float32(loss_at(step)),
        "gradient/Net_fc1.weight": g1.astype(np.float32), "gradient/Net_fc2.weight": g2.astype(np.float32),
        "Net_fc1.weight": state["w1"].astype(np.float32), "Net_fc2.weight": state["w2"].astype(np.float32),
        "Net_fc1.bias": (rng.normal(size=8) * 0.1).astype(np.float32),
        "fc1_relu_input_0": relu1_in.astype(np.float32), "fc1_relu_output_0": np.maximum(relu1_in + 0.5, 0).astype(np.float32),
        "fc2_relu_input_0": relu2_in.astype(np.float32), "fc2_relu_output_0": np.maximum(relu2_in + 0.5, 0).astype(np.float32),
        "fc3_tanh_input_0": rng.normal(size=(BATCH, 8)).astype(np.float32),
        "labels": labels.astype(np.int32), "predictions": labels.astype(np.int32),
        "hybridsequential0_input_0": rng.normal(size=(IMAGES, 1, 1, 1)).astype(np.float32),
        "embedding0_input_0": tokens.astype(np.int32),
    }


def _after(step: int) -> bool:
    return step >= ONSET


def vanishing_gradient(step: int, t: Tensors, rng: np.random.Generator) -> None:
    if _after(step):
        for name in ("gradient/Net_fc1.weight", "gradient/Net_fc2.weight"):
            t[name] = (t[name] * 1e-7).astype(np.float32)  # mean |g| ~ 8e-10 < 1e-7


def exploding_tensor(step: int, t: Tensors, rng: np.random.Generator) -> None:
    if _after(step):
        t["Net_fc1.weight"] = t["Net_fc1.weight"].copy()
        t["Net_fc1.weight"][2, 3] = np.nan


def dead_relu(step: int, t: Tensors, rng: np.random.Generator) -> None:
    if _after(step):
        t["fc1_relu_output_0"] = t["fc1_relu_output_0"].copy()
        t["fc1_relu_output_0"][:, :6] = 0  # 6 of 8 units (75% > 50%) never active


def poor_weight_initialization(step: int, t: Tensors, rng: np.random.Generator) -> None:
    t["fc2_relu_input_0"] = (t["fc2_relu_input_0"] * 40).astype(np.float32)  # variance ratio across layers ~1600 > 10


def saturated_activation(step: int, t: Tensors, rng: np.random.Generator) -> None:
    if _after(step):
        t["fc3_tanh_input_0"] = (np.sign(t["fc3_tanh_input_0"]) * 15).astype(np.float32)  # |x| > 9.4999


FROZEN: dict[str, np.ndarray] = {}


def frozen_layer(step: int, t: Tensors, rng: np.random.Generator) -> None:
    if step == ONSET - 10:
        FROZEN["w"] = t["Net_fc2.weight"]
    if _after(step):
        t["Net_fc2.weight"] = FROZEN["w"]  # update ratio 0 from 50; equal over 3 saved steps at 60


def all_zero(step: int, t: Tensors, rng: np.random.Generator) -> None:
    if _after(step):
        t["Net_fc1.bias"] = np.zeros(8, np.float32)


def class_imbalance(step: int, t: Tensors, rng: np.random.Generator) -> None:
    labels = np.zeros(IMAGES, np.int32)
    labels[:3] = 1  # 61:3 per step; 500 labels are reached at the 8th saved step (step 70)
    t["labels"] = t["predictions"] = labels


def loss_plateau(step: int, t: Tensors, rng: np.random.Generator) -> None:
    if _after(step):
        t["CrossEntropyLoss_output_0"] = np.float32(loss_at(ONSET - 10))  # LossNotDecreasing 50; 5 stalls by 90


def tensor_variance(step: int, t: Tensors, rng: np.random.Generator) -> None:
    if _after(step):
        t["Net_fc1.weight"] = (t["Net_fc1.weight"] * 40).astype(np.float32)  # variance ~1600 > 100


def check_input_images(step: int, t: Tensors, rng: np.random.Generator) -> None:
    t["hybridsequential0_input_0"] = (t["hybridsequential0_input_0"] * 0.1 + 0.5).astype(np.float32)


def nlp_sequence_ratio(step: int, t: Tensors, rng: np.random.Generator) -> None:
    if _after(step):
        t["embedding0_input_0"] = t["embedding0_input_0"].copy()
        t["embedding0_input_0"][:, 5:] = 0  # 69% padding > 50%


def confusion(step: int, t: Tensors, rng: np.random.Generator) -> None:
    if _after(step):
        p = t["labels"].copy()
        p[p == 1] = 2  # class 1 always predicted as 2: column 2 is half wrong
        t["predictions"] = p


Fault = Callable[[int, Tensors, np.random.Generator], None]
_GRADS, _WEIGHTS, _LOSS = ("gradient/",), ("Net_fc1.weight", "Net_fc2.weight"), ("CrossEntropyLoss",)
_LABELS = ("labels", "predictions")
# trial -> (fault, {rule: (first step, parameters)}, wall-time gap before ONSET, EVAL losses?, tensors kept: names
# starting with one of these; None keeps all). A fault trial keeps only what its rules read (a small repository).
TRIALS: dict[str, tuple[Fault | None, dict[str, tuple[int, dict[str, object]]], float, bool,
                        tuple[str, ...] | None]] = {
    "healthy": (None, {}, 0.0, True, None),
    "vanishing_gradient": (vanishing_gradient, {"VanishingGradient": (50, {})}, 0.0, False, _GRADS),
    "exploding_tensor": (exploding_tensor, {"ExplodingTensor": (50, {})}, 0.0, False, _WEIGHTS + _GRADS),
    "dead_relu": (dead_relu, {"DeadRelu": (50, {})}, 0.0, False, ("fc1_relu_output", "fc2_relu_output")),
    "poor_weight_initialization": (poor_weight_initialization, {"PoorWeightInitialization": (0, {})}, 0.0, False,
                                   ("fc1_relu_input", "fc2_relu_input", *_GRADS, *_LOSS)),
    "saturated_activation": (saturated_activation, {"SaturatedActivation": (50, {})}, 0.0, False, ("fc3_tanh",)),
    "frozen_layer": (frozen_layer, {"WeightUpdateRatio": (50, {}), "UnchangedTensor": (60, {})}, 0.0, False,
                     _WEIGHTS),
    "all_zero": (all_zero, {"AllZero": (50, {})}, 0.0, False, ("Net_fc1",)),
    "class_imbalance": (class_imbalance, {"ClassImbalance": (70, {})}, 0.0, False, _LABELS),
    "loss_plateau": (loss_plateau, {"LossNotDecreasing": (50, {}), "Overtraining": (90, {})}, 0.0, False, _LOSS),
    "overfit": (None, {"Overfit": (55, {})}, 0.0, True, _LOSS),
    "tensor_variance": (tensor_variance, {"TensorVariance": (50, {"max_threshold": 100.0, "tensor_regex": "weight"})},
                        0.0, False, _WEIGHTS),
    "check_input_images": (check_input_images, {"CheckInputImages": (70, {})}, 0.0, False, ("hybridsequential0",)),
    "nlp_sequence_ratio": (nlp_sequence_ratio, {"NLPSequenceRatio": (50, {})}, 0.0, False, ("embedding0",)),
    "confusion": (confusion, {"Confusion": (50, {})}, 0.0, False, _LABELS),
    "stalled_training": (None, {"StalledTrainingRule": (50, {})}, 2000.0, False, _LOSS),
}


def write_trial(name: str, fault: Fault | None, gap: float, evals: bool, keep: tuple[str, ...] | None) -> None:
    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    rng = np.random.default_rng(23)
    state: dict[str, np.ndarray] = {}
    eval_step = 0
    for step in STEPS:
        tensors = healthy(step, rng, state)
        if fault is not None:
            fault(step, tensors, rng)
        wall = 1.7e9 + step + (gap if step >= ONSET else 0.0)
        writer = FileWriter(trial_dir=str(out), step=step, worker="worker_0")
        for tname, value in tensors.items():
            if keep is not None and not tname.startswith(keep):
                continue
            writer.write_tensor(value, tname, mode=ModeKeys.TRAIN, mode_step=step, timestamp=wall)
        writer.close()
        if evals:  # an EVAL loss 5 steps later: 5% above the TRAIN loss, 50% above it from 55 in "overfit"
            factor = 1.5 if name == "overfit" and step + 5 >= 55 else 1.05
            writer = FileWriter(trial_dir=str(out), step=step + 5, worker="worker_0")
            writer.write_tensor(np.float32(loss_at(step) * factor), "CrossEntropyLoss_output_0",
                                mode=ModeKeys.EVAL, mode_step=eval_step, timestamp=wall + 5)
            writer.close()
            eval_step += 1
    cm = CollectionManager()
    for coll, regex in (("gradients", "^gradient"), ("weights", "^(?!gradient).*weight"),
                        ("biases", "^(?!gradient).*bias"), ("losses", "[Ll]oss_(?!input).*output")):
        cm.add(Collection(coll, include_regex=[regex]))
    cm.set_num_workers(1)
    cm.export(str(out), "worker_0_collections.json")
    training_has_ended(str(out))


def main() -> int:
    expected = {}
    for name, (fault, fires, gap, evals, keep) in TRIALS.items():
        write_trial(name, fault, gap, evals, keep)
        expected[name] = {rule: {"trigger_step": step, "parameters": params} for rule, (step, params) in fires.items()}
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
