"""The tensor writer and reader against the local S3 (moto server)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest

from smx_debug.errors import NotFoundError
from smx_debug.local import LocalAws
from smx_debug.tensors import Collection, TrialWriter

BUCKET = "smx-tensors"


@pytest.fixture
def s3(local_aws: LocalAws) -> Any:
    client = local_aws.client("s3")
    client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    return client


def test_writer_s3_writes_the_same_keys_and_bytes_as_on_disk(s3: Any, tmp_path: Any) -> None:
    for out in (f"s3://{BUCKET}/job/debug-output", tmp_path):
        with TrialWriter(out, worker="worker_0", s3_client=s3) as w:
            w.write_step(0, mode="train", mode_step=0, wall_time=1.0, tensors={"loss": np.float32(1.5)})
            w.write_collections([Collection(name="losses", include_regex=("loss",))])
            w.training_end()
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix="job/debug-output/")["Contents"]
    keys = sorted(o["Key"].removeprefix("job/debug-output/") for o in listed)
    assert keys == sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    for key in keys:
        body = s3.get_object(Bucket=BUCKET, Key=f"job/debug-output/{key}")["Body"].read()
        assert body == (tmp_path / key).read_bytes(), key
    index = json.loads((tmp_path / "index/000000000/000000000000_worker_0.json").read_text())
    assert index["meta"]["mode"] == "TRAIN"


def test_writer_s3_missing_bucket_raises_not_found_naming_it(s3: Any) -> None:
    with pytest.raises(NotFoundError, match="s3://no-such-bucket/p/"):
        TrialWriter("s3://no-such-bucket/p", s3_client=s3).write_step(0, tensors={"x": 1})


class CountingS3:
    """Delegates to a boto3 S3 client and records every GetObject's key and range."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.gets: list[tuple[str, str]] = []

    def get_object(self, **kwargs: Any) -> Any:
        self.gets.append((kwargs["Key"], kwargs.get("Range", "")))
        return self._client.get_object(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _trial(root: Any, s3: Any = None) -> None:
    from smx_debug.tensors import reduction_tensor_name

    for worker in ("worker_0", "worker_1"):
        with TrialWriter(root, worker=worker, s3_client=s3) as w:
            w.write_collections([Collection(name="weights", include_regex=("weight",))], num_workers=2)
            for step in range(3):
                w.write_step(step, mode="train", wall_time=1.0, tensors={
                    "loss": np.float32(step), "fc.weight": np.full((64, 64), step, np.float32),
                    reduction_tensor_name("fc.weight", "l2"): np.float32(step * 64)})
            w.training_end()


def test_reader_s3_and_disk_give_the_same_frames_and_values(s3: Any, tmp_path: Any) -> None:
    from smx_debug.tensors import create_trial

    _trial(tmp_path)
    _trial(f"s3://{BUCKET}/job/debug-output", s3)
    disk = create_trial(tmp_path)
    remote = create_trial(f"s3://{BUCKET}/job/debug-output", s3_client=s3)
    for kwargs in ({}, {"reductions": ["mean", "abs_max"]}, {"names": ["loss"], "start_step": 1}):
        a, b = disk.frame(**kwargs), remote.frame(**kwargs)  # type: ignore[arg-type]
        pd.testing.assert_frame_equal(a, b)
        assert len(a) > 0
    assert remote.tensor_names() == disk.tensor_names() and remote.steps() == disk.steps()
    assert remote.tensor("fc.weight").value(2, worker="worker_1").tobytes() == disk.tensor("fc.weight").value(
        2, worker="worker_1").tobytes()
    assert remote.skipped == disk.skipped == {}


def test_reader_s3_reads_only_the_records_it_needs(s3: Any) -> None:
    from smx_debug.tensors import create_trial

    _trial(f"s3://{BUCKET}/job/debug-output", s3)
    counting = CountingS3(s3)
    trial = create_trial(f"s3://{BUCKET}/job/debug-output", s3_client=counting)
    counting.gets.clear()
    df = trial.frame(["loss", "fc.weight"])  # the scalars and the saved l2, not the 16 KB weights
    assert len(df) == 2 * 3 * 2
    event_gets = [(k, r) for k, r in counting.gets if k.endswith(".tfevents")]
    # Two ranges per file (the loss before the weights, the l2 after them); the 16 KB weights are never read.
    assert len(event_gets) == 12 and all(r.startswith("bytes=") for _, r in event_gets)
    spans = [tuple(int(x) for x in r.removeprefix("bytes=").split("-")) for _, r in event_gets]
    assert all(b - a < 200 for a, b in spans)


def test_reader_s3_missing_prefix_raises_no_data_yet(s3: Any) -> None:
    from smx_debug.errors import NoDataYetError
    from smx_debug.tensors import create_trial

    with pytest.raises(NoDataYetError, match=f"no tensors under s3://{BUCKET}/nothing/"):
        create_trial(f"s3://{BUCKET}/nothing", s3_client=s3)


class ListingS3(CountingS3):
    """Also records every key ListObjectsV2 returns (through the paginator)."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.listed: list[str] = []

    def get_paginator(self, name: str) -> Any:
        real = self._client.get_paginator(name)
        outer = self

        class Paginator:
            def paginate(self, **kwargs: Any) -> Any:
                for page in real.paginate(**kwargs):
                    outer.listed.extend(o["Key"] for o in page.get("Contents", ()))
                    yield page

        return Paginator()


def _steps(root: Any, s3: Any, steps: range) -> None:
    with TrialWriter(root, worker="worker_0", s3_client=s3) as w:
        if steps.start == 0:
            w.write_collections([Collection(name="weights", include_regex=("weight",))])
        for step in steps:
            w.write_step(step, mode="train", wall_time=1000.0 + step,
                         tensors={"loss": np.float32(step), "fc.weight": np.full((4, 4), step, np.float32)})


def test_trial_start_step_s3_lists_and_reads_no_file_of_earlier_steps(s3: Any) -> None:
    from smx_debug.tensors import create_trial

    root = f"s3://{BUCKET}/job/debug-output"
    _steps(root, s3, range(30))
    counting = ListingS3(s3)
    trial = create_trial(root, s3_client=counting, start_step=25)
    got = trial.arrays(["fc.weight", "loss"])
    assert trial.steps() == [25, 26, 27, 28, 29]
    assert got.values["fc.weight"].steps.tolist() == [25, 26, 27, 28, 29]
    assert got.values["fc.weight"].block[:, 0, 0].tolist() == [25.0, 26.0, 27.0, 28.0, 29.0]
    read = {k.split("/")[-1][:12] for k, _ in counting.gets if "/index/" in k or "/events/" in k}
    listed = {k.split("/")[-1][:12] for k in counting.listed if "/index/" in k or "/events/" in k}
    assert read == listed == {f"{s:012d}" for s in range(25, 30)}


def test_trial_refresh_s3_lists_only_steps_not_yet_complete(s3: Any) -> None:
    from smx_debug.tensors import create_trial

    root = f"s3://{BUCKET}/job/debug-output"
    _steps(root, s3, range(10))
    counting = ListingS3(s3)
    trial = create_trial(root, s3_client=counting)
    _steps(root, s3, range(10, 12))
    counting.listed.clear()
    trial.refresh()
    assert trial.steps()[-2:] == [10, 11]
    steps_listed = {k.split("/")[-1][:12] for k in counting.listed if "/index/" in k or "/events/" in k}
    assert steps_listed == {f"{s:012d}" for s in (10, 11)}


def test_tensor_value_every_value_reads_each_file_once_per_pass_of_reads_ahead(s3: Any) -> None:
    from smx_debug.tensors import create_trial

    _trial(f"s3://{BUCKET}/job/debug-output", s3)
    counting = CountingS3(s3)
    trial = create_trial(f"s3://{BUCKET}/job/debug-output", s3_client=counting)
    per_pass = []
    for _ in range(2):
        counting.gets.clear()
        for name in ("loss", "fc.weight"):
            tensor = trial.tensor(name)
            for step in tensor.steps():
                for worker in tensor.workers(step):
                    assert tensor.value(step, worker=worker).reshape(-1)[0] == step
                    if name == "fc.weight":  # the saved one
                        assert tensor.reduction_value(step, "l2", worker=worker) == step * 64
        per_pass.append(sorted(k.rsplit("/", 1)[-1] for k, _ in counting.gets if k.endswith(".tfevents")))
    files = sorted(f"{s:012d}_worker_{w}.tfevents" for s in range(3) for w in (0, 1))
    # The first value of loss reads ahead loss and the small l2 of every file (two ranges: the 16 KB weights lie
    # between them), the first weight every file's weights: three reads per file for 18 values; then none.
    assert per_pass == [sorted(files * 3), []]
