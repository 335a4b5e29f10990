"""smdebug's per-value API on the batched reader: read ahead, kept within a budget, the same values as the
protobuf path and the frame, the same header check as a scan."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from smx_debug.tensors import RawTensor, TrialWriter, create_trial, reduction_tensor_name
from smx_debug.tensors.tfrecord import frame, header_ok, split_records
from smx_debug.tensors.values import RecordReader

SMDEBUG_WRITTEN = Path(__file__).parents[2] / "data/tensors/smdebug_written"


def test_header_ok_agrees_with_split_records_on_every_record() -> None:
    rng = np.random.default_rng(7)
    records = [frame(rng.integers(0, 256, int(n), dtype=np.uint8).tobytes()) for n in rng.integers(0, 400, 300)]
    data = bytearray(b"".join(records))
    starts = np.cumsum([0] + [len(r) for r in records[:-1]])
    lengths = np.array([len(r) for r in records])
    for k in (3, 50, 299):  # damage a length's checksum, a length, the last checksum
        data[int(starts[k]) + (9 if k != 50 else 0)] ^= 0x10
    buf = np.frombuffer(bytes(data), np.uint8)
    got = header_ok(buf, starts, lengths)
    want = [bool(split_records(bytes(data), start=int(a), end=int(a + n)).spans) for a, n in zip(starts, lengths,
                                                                                            strict=True)]
    assert got.tolist() == want and np.flatnonzero(~got).tolist() == [3, 50, 299]


def _write(root: Path, steps: int = 12) -> None:
    with TrialWriter(root, worker="worker_0") as w:
        for s in range(steps):
            w.write_step(s, mode="train", mode_step=s, wall_time=1.0 + s, tensors={
                "loss": np.float64(s), "big": np.full((40, 40), s, np.float32),
                "ids": np.arange(6, dtype=np.int64).reshape(1, 2, 3) + s, "flag": np.bool_(s % 2),
                "half": RawTensor("bfloat16", np.array([0x3F80], np.uint16)),
                reduction_tensor_name("big", "mean"): np.float32(s)})
        w.training_end()


def _every_value(trial: object) -> dict[tuple[str, int], tuple[str, tuple[int, ...], bytes]]:
    out = {}
    for name in trial.tensor_names():  # type: ignore[attr-defined]
        tensor = trial.tensor(name)  # type: ignore[attr-defined]
        for step in tensor.steps():
            v = tensor.value(step)
            out[(name, step)] = (str(v.dtype), v.shape, v.tobytes())
    return out


def test_tensor_value_budget_smaller_than_a_record_rereads_and_returns_the_same_values(tmp_path: Path) -> None:
    _write(tmp_path)
    kept = create_trial(tmp_path)
    tight = create_trial(tmp_path)
    tight._reader = RecordReader(tight._catalog, budget=1)
    assert _every_value(tight) == _every_value(kept)
    got = _every_value(kept)
    assert got[("ids", 5)] == ("int64", (1, 2, 3), (np.arange(6, dtype=np.int64) + 5).tobytes())
    assert got[("half", 3)][:2] == ("float32", (1,)) and got[("flag", 3)] == ("bool", (1,), b"\x01")
    assert kept.tensor("big").reduction_value(4, "mean") == pytest.approx(4.0) and kept.skipped == {}
    mine = kept.tensor("big").value(3)
    mine[:] = -1  # a fresh array, as smdebug returns: writing to it changes nothing kept
    assert kept.tensor("big").value(3)[0, 0] == 3


def test_tensor_value_reads_the_smdebug_written_trial_as_its_frame() -> None:
    trial = create_trial(SMDEBUG_WRITTEN)
    df = trial.frame(["loss"])
    for row in df.itertuples():
        assert trial.tensor("loss").value(int(row.step), worker=str(row.worker)).tolist() == [row.value]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                                   "uint16", "uint32", "uint64", "bool", "complex64", "complex128"])
def test_tensor_value_small_records_decoded_in_bulk_are_the_written_arrays(tmp_path: Path, dtype: str) -> None:
    rng = np.random.default_rng(3)
    shapes = [(3,), (2, 2), (1, 2, 3), (5,)]
    written = {}
    with TrialWriter(tmp_path, worker="worker_0") as w:
        for s in range(6):
            tensors = {}
            for k, shape in enumerate(shapes):  # one shape per tensor, and a tensor changing shape over steps
                shape = shape if k < 3 else (s + 1,)
                v = (rng.standard_normal(shape) * 100).astype(dtype)
                tensors[f"t{k}"] = written[(f"t{k}", s)] = v
            w.write_step(s, mode="train", mode_step=s, wall_time=1.0 + s, tensors=tensors)
        w.training_end()
    trial = create_trial(tmp_path)
    got = _every_value(trial)
    assert got == {key: (str(v.dtype), v.shape, v.tobytes()) for key, v in written.items()}
    assert trial.skipped == {}


def test_tensor_value_of_a_live_trial_sees_a_tensor_saved_raw_after_only_its_reductions(tmp_path: Path) -> None:
    from smx_debug.errors import TensorUnavailableError

    with TrialWriter(tmp_path, worker="worker_0") as w:
        w.write_step(0, mode="train", mode_step=0, wall_time=1.0,
                     tensors={"loss": np.float32(0), reduction_tensor_name("w", "mean"): np.float32(0.5)})
        trial = create_trial(tmp_path)
        w_tensor = trial.tensor("w")
        with pytest.raises(TensorUnavailableError, match="only its reductions"):
            w_tensor.value(0)
        w.write_step(1, mode="train", mode_step=1, wall_time=2.0,
                     tensors={"loss": np.float32(1), "w": np.full((2, 2), 7, np.float32)})
        assert w_tensor.value(1).tolist() == [[7, 7], [7, 7]]
        with pytest.raises(TensorUnavailableError, match="only its reductions"):
            w_tensor.value(0)
        assert trial.tensor("loss").value(1).tolist() == [1]
