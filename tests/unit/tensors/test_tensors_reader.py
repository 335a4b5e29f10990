"""The reader: smdebug's trial API, the tidy frame, incremental refresh, and what it tolerates and counts."""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from smx_debug.errors import (
    ConfigError,
    DataError,
    NoDataYetError,
    NotFoundError,
    TensorUnavailableError,
    UnknownDtypeError,
    UnknownNameError,
)
from smx_debug.tensors import (
    TENSOR_COLUMNS,
    Collection,
    RawTensor,
    TrialWriter,
    create_trial,
    modes,
    proto,
    reduction_tensor_name,
)
from smx_debug.tensors.catalog import BAD_ENTRY, DAMAGED_INDEX, MISSING_EVENT_FILE, UNKNOWN_DTYPE
from smx_debug.tensors.tfrecord import TRUNCATED, frame

DATA = Path(__file__).parents[2] / "data/third_party"
REAL_TF = DATA / "awslabs+sagemaker-debugger/newlogsRunTest1/test_hook_from_json_config"
REAL_MXNET = DATA / "aws+amazon-sagemaker-examples/aws_sagemaker_studio/sagemaker_debugger/mnist_tensor_plot/debug-output"


def _write(root: Path, *, workers: tuple[str, ...] = ("worker_0",), steps: int = 4, end: bool = True) -> None:
    for worker in workers:
        with TrialWriter(root, worker=worker) as w:
            w.write_collections([Collection(name="weights", include_regex=("weight",)),
                                 Collection(name="losses", include_regex=("loss",))], num_workers=len(workers))
            for s in range(steps):
                train = s < steps - 1
                w.write_step(s * 10, mode="train" if train else "eval", mode_step=s if train else 0,
                             wall_time=100.0 + s,
                             tensors={"loss": np.float32(1.0 / (s + 1)),
                                      "fc.weight": np.full((2, 2), s, np.float32),
                                      reduction_tensor_name("fc.weight", "l2"): np.float32(2.0 * s),
                                      reduction_tensor_name("gradient/fc.weight", "mean", abs=True):
                                          np.float64(0.1 * s)})
            if end:
                w.training_end()


def test_trial_api_matches_smdebugs(tmp_path: Path) -> None:
    _write(tmp_path, workers=("worker_0", "worker_1"))
    trial = create_trial(str(tmp_path))
    assert trial.tensor_names() == ["fc.weight", "gradient/fc.weight", "loss"]
    assert trial.tensor_names(collection="weights") == ["fc.weight", "gradient/fc.weight"]
    assert trial.tensor_names(regex=["^lo"]) == ["loss"]
    assert trial.steps() == [0, 10, 20, 30] and trial.steps(modes.TRAIN) == [0, 1, 2]
    assert trial.steps(mode="eval") == [0] and trial.modes() == [modes.TRAIN, modes.EVAL]
    assert trial.workers() == ["worker_0", "worker_1"]
    assert (trial.mode(30), trial.mode_step(30), trial.global_step(modes.TRAIN, 2)) == (modes.EVAL, 0, 20)
    w = trial.tensor("fc.weight")
    assert w.value(20).tolist() == [[2, 2], [2, 2]] and w.value(2, mode=modes.TRAIN, worker="worker_1")[0, 0] == 2
    assert w.reduction_value(10, "l2").tolist() == [2.0]  # the saved one
    assert w.reduction_value(10, "max", abs=True) == 1.0  # computed from the value, as smdebug does
    assert w.reduction_values(10) == {("l2", False): pytest.approx(np.float32([2.0]))}
    assert w.steps(mode=modes.EVAL) == [0] and w.workers(0) == ["worker_0", "worker_1"] and w.shape(0) == (2, 2)
    assert trial.tensor("gradient/fc.weight").reduction_value(30, "mean", abs=True).tolist() == [pytest.approx(0.3)]
    assert sorted(trial.collections()) == ["losses", "weights"]


def test_trial_frame_is_tidy_with_saved_and_computed_reductions(tmp_path: Path) -> None:
    _write(tmp_path)
    trial = create_trial(tmp_path)
    df = trial.frame(reductions=["mean"])
    assert list(df.columns) == TENSOR_COLUMNS and len(df) == 4 * 4
    assert isinstance(df["tensor"].dtype, pd.CategoricalDtype)
    row = df[(df.step == 30) & (df.tensor == "fc.weight") & (df.reduction == "mean")].iloc[0]
    assert (row["mode"], row["mode_step"], row["worker"], row["value"]) == ("EVAL", 0, "worker_0", 3.0)
    assert df[(df.tensor == "loss")]["reduction"].tolist() == [""] * 4
    assert df[df.tensor == "loss"]["value"].tolist() == pytest.approx([1.0, 0.5, 1 / 3, 0.25])
    only = trial.frame(["gradient/fc.weight"], modes=["train"], start_step=10)
    assert only["step"].tolist() == [10, 20] and set(only["reduction"]) == {"abs_mean"}


def test_trial_frame_reads_only_new_steps_when_live(tmp_path: Path) -> None:
    w = TrialWriter(tmp_path)
    w.write_collections([Collection(name="losses", include_regex=("loss",))])
    w.write_step(0, tensors={"loss": 1.0})
    trial = create_trial(tmp_path)
    assert trial.steps() == [0]
    w.write_step(1, tensors={"loss": 2.0})
    w.write_step(2, tensors={"loss": 3.0})
    assert trial.refresh() == 2
    assert trial.frame(start_step=1).attrs["files"] == 2
    assert trial.tensor("loss").value(2).tolist() == [3.0]


def test_trial_incomplete_steps_wait_for_every_worker(tmp_path: Path) -> None:
    for worker in ("worker_0", "worker_1"):
        TrialWriter(tmp_path, worker=worker).write_collections([], num_workers=2)
    TrialWriter(tmp_path, worker="worker_0").write_step(0, tensors={"loss": 1.0})
    trial = create_trial(tmp_path)
    assert trial.steps() == [] and trial.steps(show_incomplete_steps=True) == [0]


def test_trial_reads_the_real_tf_hook_output() -> None:
    trial = create_trial(REAL_TF)
    assert trial.tensor_names() == ["loss/mul:0"] and trial.steps() == [0] and trial.workers() == ["worker_0"]
    assert trial.tensor("loss/mul:0").value(0).dtype == np.float32
    assert trial.tensor("loss/mul:0").value(0).tolist() == [pytest.approx(129.74995)]
    assert "gradients" in trial.collections() and trial.mode(0) == modes.GLOBAL
    assert trial.frame()["value"].tolist() == [pytest.approx(129.74995)]


def test_trial_real_index_without_event_files_counts_them_missing() -> None:
    # The MXNet sample's event files (27 MB each) were not published: its four index files point at nothing.
    trial = create_trial(REAL_MXNET)
    assert trial.tensor_names() == [] and trial.steps() == []
    assert trial.skipped == {MISSING_EVENT_FILE: 4 * 49}
    assert sorted(trial.collections()) == ["all", "all_tensors", "biases", "default", "gradients", "losses",
                                           "weights"]


def test_trial_damaged_index_falls_back_to_the_event_file(tmp_path: Path) -> None:
    _write(tmp_path)
    (tmp_path / "index/000000000/000000000010_worker_0.json").write_text('{"meta": {"mode": "TRA')
    trial = create_trial(tmp_path)
    assert trial.skipped == {DAMAGED_INDEX: 1}
    assert trial.tensor("loss").value(10).tolist() == [0.5] and trial.mode_step(10) == 1


def test_trial_missing_index_is_read_from_the_event_file(tmp_path: Path) -> None:
    _write(tmp_path)
    shutil.rmtree(tmp_path / "index")
    trial = create_trial(tmp_path)
    assert trial.steps() == [0, 10, 20, 30] and trial.skipped == {}
    assert len(trial.frame()) == 4 * 3


def test_trial_event_file_cut_mid_write_keeps_whole_records_and_counts_the_rest(tmp_path: Path) -> None:
    _write(tmp_path)
    event = tmp_path / "events/000000000010/000000000010_worker_0.tfevents"
    event.write_bytes(event.read_bytes()[:-30])
    shutil.rmtree(tmp_path / "index")
    trial = create_trial(tmp_path)
    assert trial.skipped == {TRUNCATED: 1}
    df = trial.frame()
    assert len(df[df.step == 10]) == 2 and len(df) == 4 * 3 - 1  # everything else kept


def test_trial_index_pointing_past_its_file_counts_the_entries(tmp_path: Path) -> None:
    _write(tmp_path)
    event = tmp_path / "events/000000000000/000000000000_worker_0.tfevents"
    event.write_bytes(event.read_bytes()[:100])
    trial = create_trial(tmp_path)
    assert trial.skipped == {BAD_ENTRY: 3}
    assert trial.tensor("loss").value(0).tolist() == [1.0]


def test_trial_unknown_dtype_is_skipped_in_frames_and_named_by_value(tmp_path: Path) -> None:
    event = proto.Event(step=0)
    item = event.summary.value.add(tag="handle")
    item.tensor.dtype = 20  # DT_RESOURCE
    item.tensor.tensor_content = b"\x01"
    item.metadata.plugin_data.add(plugin_name="mode", content=b"4")
    path = tmp_path / "events/000000000000/000000000000_worker_0.tfevents"
    path.parent.mkdir(parents=True)
    path.write_bytes(frame(event.SerializeToString()))
    (tmp_path / "training_job_end.ts").write_bytes(b"")
    trial = create_trial(tmp_path)
    assert trial.frame().empty and trial.skipped == {UNKNOWN_DTYPE: 1}
    with pytest.raises(UnknownDtypeError, match="dtype 20 of tensor 'handle'"):
        trial.tensor("handle").value(0)


def test_trial_bfloat16_reads_back_as_float32(tmp_path: Path) -> None:
    TrialWriter(tmp_path).write_step(0, tensors={"g": RawTensor("bfloat16", np.array([0x4040], np.int16))})
    assert create_trial(tmp_path).tensor("g").value(0).tolist() == [3.0]


def test_trial_bad_names_raise_clear_errors(tmp_path: Path) -> None:
    _write(tmp_path)
    trial = create_trial(tmp_path)
    with pytest.raises(TensorUnavailableError, match="no tensor 'los'; did you mean 'loss'"):
        trial.tensor("los")
    with pytest.raises(TensorUnavailableError, match="no step 5 in mode TRAIN"):
        trial.tensor("loss").value(5, mode=modes.TRAIN)
    with pytest.raises(TensorUnavailableError, match="not 'worker_9'"):
        trial.tensor("loss").value(0, worker="worker_9")
    with pytest.raises(TensorUnavailableError, match="only its reductions were saved \\(abs_mean\\)"):
        trial.tensor("gradient/fc.weight").value(0)
    with pytest.raises(UnknownNameError, match=r"no collection 'weight' .*weights"):
        trial.tensor_names(collection="weight")
    with pytest.raises(ConfigError, match="unknown reduction 'median'"):
        trial.frame(reductions=["median"])


def test_trial_damaged_record_read_by_name_raises_data_error(tmp_path: Path) -> None:
    _write(tmp_path)
    event = tmp_path / "events/000000000000/000000000000_worker_0.tfevents"
    data = bytearray(event.read_bytes())
    data[0] ^= 0xFF
    event.write_bytes(bytes(data))
    trial = create_trial(tmp_path)
    with pytest.raises(DataError, match="tensor 'loss' at step 0 of worker 'worker_0'"):
        trial.tensor("loss").value(0)
    df = trial.frame(start_step=0, end_step=1)
    assert df["reduction"].tolist() == ["l2", "abs_mean"] and trial.skipped == {BAD_ENTRY: 1}  # the rest kept


def test_create_trial_missing_path_raises_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="does not exist"):
        create_trial(tmp_path / "nope")
    with pytest.raises(NoDataYetError, match="no tensors under"):
        create_trial(tmp_path)
    with pytest.raises(ConfigError, match="path must be"):
        create_trial("")


@pytest.mark.parametrize("enabled", [True, False])
def test_trial_open_and_refresh_leave_the_garbage_collector_as_found(tmp_path: Path, enabled: bool) -> None:
    with TrialWriter(tmp_path, worker="worker_0") as w:
        w.write_step(0, mode="train", mode_step=0, wall_time=1.0, tensors={"loss": np.float32(1)})
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        trial = create_trial(tmp_path)
        after_open = gc.isenabled()
        trial.refresh()
        assert (after_open, gc.isenabled()) == (enabled, enabled)
    finally:
        (gc.enable if was else gc.disable)()
