"""Resolving job names, s3:// URIs and local paths to the job's profiler output."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from sagemaker_answers import describe_training_job

from smx_debug.data.sources import LocalSource, S3Source, _bounded_map, job_paths, open_source, split_s3_uri
from smx_debug.errors import ConfigError, NotFoundError

DESC = describe_training_job(
    "job-1", TrainingJobStatus="InProgress", SecondaryStatus="Training",
    ProfilerConfig={"S3OutputPath": "s3://bucket/profiler/"}, DebugHookConfig={"S3OutputPath": "s3://bucket/debug"},
)


def _sm(desc: dict[str, Any]) -> tuple[Any, Stubber]:
    sm = boto3.client("sagemaker", region_name="us-west-2")
    stub = Stubber(sm)
    stub.add_response("describe_training_job", desc, {"TrainingJobName": desc["TrainingJobName"]})
    return sm, stub


def test_job_paths_from_describe_training_job() -> None:
    sm, stub = _sm(DESC)
    with stub:
        paths = job_paths("job-1", sagemaker_client=sm)
    assert (paths.debugger, paths.profiler, paths.rule_output) == (
        "s3://bucket/debug/job-1/debug-output/",
        "s3://bucket/profiler/job-1/profiler-output/",
        "s3://bucket/profiler/job-1/rule-output/",
    )


def test_open_source_job_name_resolves_to_profiler_prefix() -> None:
    sm, stub = _sm(DESC)
    with stub:
        src = open_source("job-1", sagemaker_client=sm, s3_client=boto3.client("s3", region_name="us-west-2"))
    assert isinstance(src, S3Source)
    assert src.uri == "s3://bucket/profiler/job-1/profiler-output/"


def test_open_source_job_without_profiler_raises_not_found() -> None:
    desc = {k: v for k, v in DESC.items() if k not in ("ProfilerConfig", "DebugHookConfig")}
    sm, stub = _sm(desc)
    with stub, pytest.raises(NotFoundError, match="profiling was off"):
        open_source("job-1", sagemaker_client=sm)


def test_open_source_local_job_folder_descends_into_profiler_output(tmp_path: Path) -> None:
    (tmp_path / "profiler-output" / "system").mkdir(parents=True)
    src = open_source(tmp_path)
    assert isinstance(src, LocalSource)
    assert src.root == tmp_path / "profiler-output"
    assert open_source(tmp_path, output="rule").uri == str(tmp_path)  # type: ignore[union-attr]


@pytest.mark.parametrize(("value", "field"), [("", "job_or_path"), (42, "job_or_path")])
def test_open_source_bad_argument_raises_config_error(value: object, field: str) -> None:
    with pytest.raises(ConfigError) as exc:
        open_source(value)  # type: ignore[arg-type]
    assert exc.value.field == field


@pytest.mark.parametrize("uri", ["s3://", "s3:///key", "http://bucket/key"])
def test_split_s3_uri_rejects_malformed(uri: str) -> None:
    with pytest.raises(ConfigError, match="not an S3 URI"):
        split_s3_uri(uri)


class _CountingRead:
    """A fake object read that records how many bytes are read-and-not-yet-parsed at once."""

    def __init__(self, sizes: dict[str, int]) -> None:
        self.sizes = sizes
        self.lock = threading.Lock()
        self.live = 0
        self.peak = 0

    def read(self, key: str) -> bytes:
        with self.lock:
            self.live += self.sizes[key]
            self.peak = max(self.peak, self.live)
        return key.encode()

    def parse(self, key: str, data: bytes) -> str:
        with self.lock:
            self.live -= self.sizes[key]
        return data.decode().upper()


def test_bounded_map_bounds_bytes_in_flight_and_keeps_order() -> None:
    sizes = {f"k{i:03d}": 3 << 20 for i in range(40)}  # 120 MiB: the limit is 12 MiB, four objects
    fake = _CountingRead(sizes)
    out = list(_bounded_map(fake.read, list(sizes), fake.parse, workers=16, sizes=sizes))
    assert out == [(k, k.upper()) for k in sizes]
    assert 0 < fake.peak <= 12 << 20


def test_bounded_map_admits_an_object_larger_than_the_limit_alone() -> None:
    sizes = {"small-1": 1 << 20, "huge": 64 << 20, "small-2": 1 << 20}
    fake = _CountingRead(sizes)
    out = list(_bounded_map(fake.read, list(sizes), fake.parse, workers=4, sizes=sizes))
    assert [k for k, _ in out] == list(sizes)
    assert fake.peak == 64 << 20  # the large object was read with nothing else in flight


def test_bounded_map_without_sizes_uses_the_count_window() -> None:
    fake = _CountingRead({f"k{i}": 1 for i in range(50)})
    out = list(_bounded_map(fake.read, list(fake.sizes), fake.parse, workers=3))
    assert [k for k, _ in out] == list(fake.sizes)
    assert fake.peak <= 3


def test_bounded_map_error_propagates_and_cancels_the_rest() -> None:
    started: list[str] = []

    def read(key: str) -> bytes:
        started.append(key)
        if key == "k2":
            raise OSError("boom")
        return b"x"

    keys = [f"k{i}" for i in range(200)]
    with pytest.raises(OSError, match="boom"):
        list(_bounded_map(read, keys, lambda _k, d: d, workers=2, sizes=dict.fromkeys(keys, 1)))
    assert len(started) < len(keys)


def test_local_source_map_passes_sizes(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"f{i}.json").write_bytes(b"x" * (i + 1))
    src = LocalSource(tmp_path)
    infos = src.list()
    got = list(src.map([o.key for o in infos], lambda _k, d: len(d), sizes={o.key: o.size for o in infos}))
    assert got == [(o.key, o.size) for o in infos]
