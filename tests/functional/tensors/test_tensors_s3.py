"""The tensor writer and reader against the local S3 (moto server)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
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
