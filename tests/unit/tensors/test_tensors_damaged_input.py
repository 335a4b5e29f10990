"""Damaged or hostile trial files: each is skipped and counted by reason, in value() and frame() alike, never a
crash and never another tensor's values."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from smx_debug.errors import DataError
from smx_debug.tensors import Collection, CollectionsFile, TrialWriter, create_trial, proto
from smx_debug.tensors.catalog import (
    BAD_ENTRY,
    DAMAGED_COLLECTIONS,
    DAMAGED_INDEX,
    DAMAGED_RECORD,
    WRONG_TENSOR,
)
from smx_debug.tensors.dtypes import tensor_value
from smx_debug.tensors.tfrecord import frame

SMDEBUG_WRITTEN = Path(__file__).parents[2] / "data/tensors/smdebug_written"
DEEP = "[" * 100_000 + "]" * 100_000


def _write(root: Path, steps: int = 3) -> None:
    with TrialWriter(root, worker="worker_0") as w:
        w.write_collections([Collection(name="losses", include_regex=("loss",))])
        for s in range(steps):
            w.write_step(s, mode="train", mode_step=s, wall_time=100.0 + s,
                         tensors={"loss": np.float32(s + 0.5), "fc.weight": np.full((8, 4), s, np.float32)})
        w.training_end()


def _index(root: Path, step: int, worker: str = "worker_0") -> Path:
    return root / f"index/000000000/{step:012d}_{worker}.json"


def _event(root: Path, step: int, worker: str = "worker_0") -> Path:
    return root / f"events/{step:012d}/{step:012d}_{worker}.tfevents"


def _entry(root: Path, step: int, name: str) -> dict[str, int]:
    doc = json.loads(_index(root, step).read_text())
    entry: dict[str, int] = next(e for e in doc["tensor_payload"] if e["tensorname"] == name)
    return entry


# ---------------------------------------------------------------- item 12: JSON nested past the recursion limit
def test_trial_index_nested_too_deep_is_skipped_and_its_event_file_scanned(tmp_path: Path) -> None:
    _write(tmp_path)
    _index(tmp_path, 1).write_text(DEEP)
    trial = create_trial(tmp_path)
    assert trial.skipped == {DAMAGED_INDEX: 1}
    assert trial.tensor("loss").value(1).tolist() == [1.5]  # read from the scanned event file


def test_trial_collections_file_nested_too_deep_is_skipped_and_counted(tmp_path: Path) -> None:
    _write(tmp_path)
    (tmp_path / "collections/000000000/worker_0_collections.json").write_text(DEEP)
    trial = create_trial(tmp_path)
    assert trial.skipped == {DAMAGED_COLLECTIONS: 1} and trial.collections() == {}
    assert trial.tensor("loss").value(2).tolist() == [2.5]


def test_collections_file_nested_too_deep_raises_data_error() -> None:
    with pytest.raises(DataError, match=r"w_collections\.json: not JSON"):
        CollectionsFile.from_json(DEEP, where="w_collections.json")


# ---------------------------------------------------------------- item 15: another tensor's record
def _swap(root: Path, step: int, worker: str, a: str, b: str) -> None:
    path = _index(root, step, worker)
    doc = json.loads(path.read_text())
    ea = next(e for e in doc["tensor_payload"] if e["tensorname"] == a)
    eb = next(e for e in doc["tensor_payload"] if e["tensorname"] == b)
    ea["tensorname"], eb["tensorname"] = b, a
    path.write_text(json.dumps(doc))


def test_trial_swapped_index_entries_value_raises_and_counts_wrong_tensor(tmp_path: Path) -> None:
    shutil.copytree(SMDEBUG_WRITTEN, tmp_path / "t")
    _swap(tmp_path / "t", 5, "worker_0", "loss", "fc1.weight:0")
    trial = create_trial(tmp_path / "t")
    with pytest.raises(DataError, match=r"tensor 'loss' at step 5 of worker 'worker_0'.*holds tensor 'fc1.weight:0'"):
        trial.tensor("loss").value(5, worker="worker_0")
    with pytest.raises(DataError, match="holds tensor 'loss'"):
        trial.tensor("fc1.weight:0").value(5, worker="worker_0")
    assert trial.skipped == {WRONG_TENSOR: 2}
    assert trial.tensor("loss").value(5, worker="worker_1").tolist() == [pytest.approx(1 / 6)]  # the rest kept


def test_trial_swapped_index_entries_frame_skips_and_counts_wrong_tensor(tmp_path: Path) -> None:
    _write(tmp_path)
    _swap(tmp_path, 1, "worker_0", "loss", "fc.weight")
    trial = create_trial(tmp_path)
    df = trial.frame(["loss", "fc.weight"], reductions=["mean"])
    by = {(int(r.step), r.tensor, r.reduction): r.value for r in df.itertuples()}
    assert by == {(0, "loss", ""): 0.5, (0, "fc.weight", "mean"): 0.0, (2, "loss", ""): 2.5,
                  (2, "fc.weight", "mean"): 2.0}
    assert df.attrs["skipped_by_reason"] == {WRONG_TENSOR: 2} and trial.skipped == {WRONG_TENSOR: 2}


def test_trial_swapped_index_entries_arrays_skip_and_count_wrong_tensor(tmp_path: Path) -> None:
    _write(tmp_path)
    _swap(tmp_path, 1, "worker_0", "loss", "fc.weight")
    trial = create_trial(tmp_path)
    got = trial.arrays(["loss", "fc.weight"])
    assert got.values["fc.weight"].steps.tolist() == [0, 2] and got.values["loss"].steps.tolist() == [0, 2]
    assert trial.skipped == {WRONG_TENSOR: 2}


def test_trial_surrogate_tensor_name_in_index_is_skipped_and_event_file_scanned(tmp_path: Path) -> None:
    _write(tmp_path)
    path = _index(tmp_path, 1)
    path.write_text(path.read_text().replace('"loss"', '"lo\\ud800ss"'))
    trial = create_trial(tmp_path)
    df = trial.frame()
    assert df[df.tensor == "loss"]["value"].tolist() == [0.5, 1.5, 2.5]
    assert trial.skipped == {DAMAGED_INDEX: 1} and "lo\ud800ss" not in trial.tensor_names()


def _record(name: str, dims: int, *, step: int = 0) -> bytes:
    event = proto.Event(step=step, wall_time=1.0)
    item = event.summary.value.add(tag=name)
    item.tensor.dtype = 1
    for _ in range(dims):
        item.tensor.tensor_shape.dim.add(size=1)
    item.tensor.tensor_content = np.float32([7.0]).tobytes()
    item.metadata.plugin_data.add(plugin_name="mode", content=b"4")
    return frame(event.SerializeToString())


def test_tensor_value_of_70_dims_raises_data_error() -> None:
    event = proto.Event.FromString(_record("deep", 70)[12:-4])
    with pytest.raises(DataError, match="tensor 'deep': 70 dims, more than numpy's 64"):
        tensor_value(event.summary.value[0].tensor, name="deep")


def test_trial_record_of_70_dims_raises_data_error_and_frame_counts_it(tmp_path: Path) -> None:
    path = _event(tmp_path, 0)
    path.parent.mkdir(parents=True)
    path.write_bytes(_record("deep", 70) + _record("fine", 1))
    (tmp_path / "training_job_end.ts").write_bytes(b"")
    trial = create_trial(tmp_path)
    with pytest.raises(DataError, match="70 dims"):
        trial.tensor("deep").value(0)
    assert trial.frame()["tensor"].tolist() == ["fine"] and trial.skipped == {DAMAGED_RECORD: 1}
    assert trial.arrays(["deep"]).values == {} and trial.skipped == {DAMAGED_RECORD: 1}  # one record, counted once


def test_cli_rules_evaluate_record_of_70_dims_reports_it_skipped(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from smx_debug.cli import main

    with TrialWriter(tmp_path, worker="worker_0") as w:
        w.write_collections([Collection(name="gradients", include_regex=("gradient/",))])
        for s in range(3):
            w.write_step(s, mode="train", mode_step=s, wall_time=100.0 + s,
                         tensors={"gradient/fc.weight": np.full((8, 4), s + 1.0, np.float32)})
    path = _event(tmp_path, 3)
    path.parent.mkdir(parents=True)
    path.write_bytes(_record("gradient/fc.weight", 70, step=3))
    (tmp_path / "training_job_end.ts").write_bytes(b"")
    assert main(["rules", "evaluate", str(tmp_path), "--rule", "VanishingGradient"]) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err and DAMAGED_RECORD in out.out + out.err


def test_trial_damaged_record_header_refused_by_value_and_frame_alike(tmp_path: Path) -> None:
    _write(tmp_path)
    entry = _entry(tmp_path, 1, "loss")
    path = _event(tmp_path, 1)
    data = bytearray(path.read_bytes())
    crc = entry["start_idx"] + 8  # the length stays right; its checksum is damaged
    data[crc:crc + 4] = struct.pack("<I", struct.unpack_from("<I", data, crc)[0] ^ 1)
    path.write_bytes(bytes(data))
    trial = create_trial(tmp_path)
    with pytest.raises(DataError, match="tensor 'loss' at step 1 of worker 'worker_0'"):
        trial.tensor("loss").value(1)
    df = trial.frame(["loss"])
    assert df["step"].tolist() == [0, 2] and trial.skipped == {BAD_ENTRY: 1}  # counted once
