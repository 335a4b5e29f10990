"""A trial with saved steps but no collections file and no end marker is not read yet (a live hook writes the
collections file with its first step): every rule says why it has no data, instead of blaming the tensors."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from smx_debug.evaluate.tensor_eval import TensorEvaluator
from smx_debug.rules.configured import configured_rule
from smx_debug.tensors import Collection, TrialWriter, create_trial


def _trial(root: Path, *, collections: bool, end: bool) -> str:
    with TrialWriter(str(root)) as writer:
        if collections:
            writer.write_collections([Collection(name="losses", tensor_names=("loss",))])
        for step in range(3):
            writer.write_step(step, mode="TRAIN", tensors={"loss": np.float32(1.0 - step / 10)})
        if end:
            writer.training_end()
    return str(root)


def _rules() -> list:
    return [configured_rule("LossNotDecreasing", overrides={"tensor_regex": "loss", "num_steps": 1}),
            configured_rule("ExplodingTensor", overrides={"tensor_regex": "loss"})]


def test_trial_without_collections_or_end_marker_says_it_waits_for_them(tmp_path: Path) -> None:
    results = TensorEvaluator(create_trial(_trial(tmp_path, collections=False, end=False)), _rules()).refresh()
    for name, result in results.items():
        assert result.datapoints == 0
        assert "3 saved steps" in result.message and "collections file" in result.message, (name, result.message)
        assert "training_job_end.ts" in result.message


def test_trial_is_read_once_either_exists(tmp_path: Path) -> None:
    for i, (collections, end) in enumerate([(True, False), (False, True)]):
        trial = create_trial(_trial(tmp_path / str(i), collections=collections, end=end))
        results = TensorEvaluator(trial, _rules()).refresh()
        assert results["ExplodingTensor"].datapoints == 3, (collections, end, results["ExplodingTensor"].message)
