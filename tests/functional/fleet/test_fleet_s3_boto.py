"""The fleet dataset written to S3 through an injected boto3 client equals the same appends to a folder."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.fs as pafs
import pytest

from smx_debug import fleet
from smx_debug.contracts import FLEET_PREFIX
from smx_debug.fleet.s3_boto import boto3_filesystem
from smx_debug.local import LocalAws
from smx_debug.simulate.fleet import FleetSimulation, FleetSpec

SPEC = FleetSpec(jobs=2, nodes=2, minutes=6, interval_s=15.0, cpus=1, start=datetime(2026, 11, 2, 23, 57, tzinfo=UTC))
BUCKET = "fleet-bucket"


def _all_rows(root: fleet.FleetRoot, table: str) -> pd.DataFrame:
    import pyarrow.parquet as pq

    frames = []
    for info in root.files(table):
        with root.filesystem.open_input_file(info.path) as f:
            frames.append(pq.read_table(f).to_pandas())
    out = pd.concat(frames, ignore_index=True)
    return out.sort_values(list(out.columns[:6])).reset_index(drop=True)


def test_s3_boto_appends_equal_the_folder_and_go_through_the_client(local_aws: LocalAws, tmp_path: Path) -> None:
    sim = FleetSimulation(SPEC)
    sim.write_local(tmp_path / "raw")
    s3 = local_aws.client("s3")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    calls: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    s3.meta.events.register("before-call.s3.*", count)
    remote = fleet.open_root(f"s3://{BUCKET}/{FLEET_PREFIX}", filesystem=boto3_filesystem(s3))
    local = fleet.open_root(tmp_path / "ds", create=True)
    for root in (local, remote):
        for job in sim.jobs:
            for _ in range(2):  # a rerun replaces rows, never doubles them
                fleet.append_profiler(root, job.name, tmp_path / "raw" / job.name, start=SPEC.start)
    pd.testing.assert_frame_equal(_all_rows(remote, "system_minutes"), _all_rows(local, "system_minutes"))
    assert remote.hours("system_minutes") == local.hours("system_minutes") == ["2026110223", "2026110300"]
    assert fleet.last_minute(remote, sim.jobs[0].name) == fleet.last_minute(local, sim.jobs[0].name)
    # the client made every call: lists, gets and whole-object puts, never HeadObject or multipart uploads
    assert set(calls) == {"ListObjectsV2", "GetObject", "PutObject"}


def test_s3_boto_file_info_tells_files_folders_and_missing_apart(local_aws: LocalAws) -> None:
    s3 = local_aws.client("s3")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    s3.put_object(Bucket=BUCKET, Key="a/b.parquet", Body=b"12345")
    s3.put_object(Bucket=BUCKET, Key="a/b.parquet2", Body=b"x")
    s3.put_object(Bucket=BUCKET, Key="a/c/d.parquet", Body=b"x")
    fs = boto3_filesystem(s3)
    kinds = {p: i.type for p, i in zip(["a/b.parquet", "a/c", "a/b", "a/zz"],
                                        fs.get_file_info([f"{BUCKET}/a/b.parquet", f"{BUCKET}/a/c", f"{BUCKET}/a/b",
                                                          f"{BUCKET}/a/zz"]), strict=True)}
    assert kinds == {"a/b.parquet": pafs.FileType.File, "a/c": pafs.FileType.Directory,
                     "a/b": pafs.FileType.NotFound, "a/zz": pafs.FileType.NotFound}
    assert fs.get_file_info(f"{BUCKET}/a/b.parquet").size == 5
    listed = fs.get_file_info(pafs.FileSelector(f"{BUCKET}/a"))
    assert sorted((i.base_name, i.type) for i in listed) == [
        ("b.parquet", pafs.FileType.File), ("b.parquet2", pafs.FileType.File), ("c", pafs.FileType.Directory)]
    with pytest.raises(FileNotFoundError):
        fs.open_input_file(f"{BUCKET}/a/none.parquet")
    assert fs.get_file_info(pafs.FileSelector(f"{BUCKET}/none", allow_not_found=True)) == []
