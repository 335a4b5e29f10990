"""TrialWriter: the files smdebug's FileWriter writes, per step and worker, and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from smx_debug.errors import ConfigError
from smx_debug.tensors import Collection, ModeKeys, RawTensor, TrialWriter, reduction_tensor_name
from smx_debug.tensors.codec import decode_event
from smx_debug.tensors.tfrecord import split_records


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_writer_step_writes_event_index_collections_and_end_marker(tmp_path: Path) -> None:
    with TrialWriter(tmp_path, worker="worker_1") as w:
        w.write_step(1000, mode="eval", mode_step=3, wall_time=5.0,
                     tensors={"loss": 0.25, reduction_tensor_name("fc.weight", "mean"): np.float32(0.1),
                              "bf": RawTensor("bfloat16", np.array([0x3F80], np.uint16))})
        w.write_collections([Collection(name="losses", include_regex=("loss",))], num_workers=2)
        w.training_end()
    assert _files(tmp_path) == [
        "collections/000000000/worker_1_collections.json",
        "events/000000001000/000000001000_worker_1.tfevents",
        "index/000000001/000000001000_worker_1.json",
        "training_job_end.ts",
    ]
    index = json.loads((tmp_path / "index/000000001/000000001000_worker_1.json").read_text())
    assert index["meta"] == {"mode": "EVAL", "mode_step": 3,
                             "event_file_name": "events/000000001000/000000001000_worker_1.tfevents"}
    data = (tmp_path / "events/000000001000/000000001000_worker_1.tfevents").read_bytes()
    entries = index["tensor_payload"]
    assert [e["tensorname"] for e in entries] == ["loss", "smdebug/reductions/mean/fc.weight", "bf"]
    assert sum(e["length"] for e in entries) == len(data)
    for entry in entries:
        rec = data[entry["start_idx"]:entry["start_idx"] + entry["length"]]
        [value] = decode_event(rec[12:-4])
        assert (value.name, value.step, value.mode, value.mode_step, value.wall_time) == (
            entry["tensorname"], 1000, ModeKeys.EVAL, 3, 5.0)
    loss = decode_event(data[12:entries[0]["length"] - 4])[0].value()
    assert loss.dtype == np.float64 and loss.tolist() == [0.25]  # a Python float: 1-element float64, as smdebug
    assert len(split_records(data).spans) == 3
    assert json.loads((tmp_path / "collections/000000000/worker_1_collections.json").read_text())["_meta"] == {
        "num_workers": 2}
    assert (tmp_path / "training_job_end.ts").read_bytes() == b""


def test_writer_mode_step_defaults_to_step_and_mode_to_global(tmp_path: Path) -> None:
    TrialWriter(tmp_path).write_step(4, tensors={"x": np.zeros(2)})
    index = json.loads((tmp_path / "index/000000000/000000000004_worker_0.json").read_text())
    assert index["meta"]["mode"] == "GLOBAL" and index["meta"]["mode_step"] == 4


def test_writer_shape_only_entries_go_to_the_index(tmp_path: Path) -> None:
    TrialWriter(tmp_path).write_step(0, tensors={}, shapes={"w": (3, 4)})
    index = json.loads((tmp_path / "index/000000000/000000000000_worker_0.json").read_text())
    assert index == {"meta": {"mode": "GLOBAL", "mode_step": 0}, "tensor_payload": [],
                     "shape_payload": [{"tensorname": "w", "originalname": "w", "shape": [3, 4]}]}
    assert not (tmp_path / "events").exists()


def test_writer_nothing_to_save_writes_no_file(tmp_path: Path) -> None:
    TrialWriter(tmp_path).write_step(0, tensors={})
    assert _files(tmp_path) == []


def test_writer_step_not_increasing_raises_config_error(tmp_path: Path) -> None:
    w = TrialWriter(tmp_path)
    w.write_step(5, tensors={"x": 1})
    with pytest.raises(ConfigError, match="step must increase from one write_step to the next: 5 after 5"):
        w.write_step(5, tensors={"x": 2})


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"step": -1}, "step"), ({"step": 1.5}, "step"), ({"step": 0, "mode": "training"}, "mode"),
    ({"step": 0, "mode_step": -2}, "mode_step"),
])
def test_writer_bad_step_or_mode_raises_config_error_naming_field(tmp_path: Path, kwargs: dict[str, object],
                                                                  field: str) -> None:
    with pytest.raises(ConfigError) as info:
        TrialWriter(tmp_path).write_step(tensors={"x": 1}, **kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_writer_bad_tensor_raises_config_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tensor 'x'"):
        TrialWriter(tmp_path).write_step(0, tensors={"x": object()})
    with pytest.raises(ConfigError, match="non-empty strings"):
        TrialWriter(tmp_path).write_step(0, tensors={"": 1})


def test_writer_closed_raises_config_error(tmp_path: Path) -> None:
    w = TrialWriter(tmp_path)
    w.close()
    with pytest.raises(ConfigError, match="closed"):
        w.write_step(0, tensors={"x": 1})


def test_writer_unwritable_out_dir_raises_config_error_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="out_dir") as info:
        TrialWriter(blocker / "trial").write_step(0, tensors={"x": 1})
    assert info.value.field == "out_dir"


@pytest.mark.parametrize("out_dir", ["", "s3://", 5])
def test_writer_bad_out_dir_raises_config_error(out_dir: object) -> None:
    with pytest.raises(ConfigError, match="out_dir"):
        TrialWriter(out_dir)  # type: ignore[arg-type]


def test_writer_imports_neither_pandas_nor_the_reader() -> None:
    """A training hook imports the writer: numpy, protobuf and google-crc32c only (plus pydantic's models)."""
    import subprocess
    import sys

    code = ("from smx_debug.tensors import TrialWriter, RawTensor, reduction_tensor_name, modes; "
            "from smx_debug._lazy import imported; "
            "print(sorted(m for m in ('pandas', 'pyarrow', 'smx_debug.tensors.trial', 'smx_debug.data.system', "
            "'boto3') if imported(m)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
