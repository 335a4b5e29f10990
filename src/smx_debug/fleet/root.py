"""Where the fleet dataset lives: a local folder or an S3 prefix, behind one pyarrow filesystem.

S3 goes through pyarrow's own S3 filesystem (no DuckDB extension downloads itself at run time), with the
credentials boto3 finds and an endpoint that can be injected, so the same code runs against the local AWS.
Layout under the root: ``<table>/hour=<yyyyMMddHH>/<job>.parquet`` for the hourly tables,
``training_jobs/<job>.parquet`` for the job metadata.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from smx_debug._lazy import lazy_module
from smx_debug.contracts import FLEET_HOUR_COLUMN, is_training_job_name
from smx_debug.errors import ConfigError
from smx_debug.fleet.schema import fleet_table

if TYPE_CHECKING:
    import boto3
else:
    boto3 = lazy_module("boto3")  # its credential chain, for an s3:// root without a filesystem handed in

@dataclass(frozen=True)
class S3Options:
    """How to reach S3: ``endpoint_url`` (the local AWS, or None for AWS) and ``region``."""

    endpoint_url: str | None = None
    region: str | None = None


def s3_filesystem(options: S3Options = S3Options()) -> pafs.S3FileSystem:
    """pyarrow's S3 filesystem with boto3's credentials (environment, profile, role) and ``options``."""
    session = boto3.Session()
    creds = session.get_credentials()
    frozen = creds.get_frozen_credentials() if creds is not None else None
    endpoint = options.endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    kwargs: dict[str, Any] = {"region": options.region or session.region_name or "us-east-1"}
    if frozen is not None:
        kwargs.update(access_key=frozen.access_key, secret_key=frozen.secret_key, session_token=frozen.token)
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        kwargs.update(endpoint_override=host or scheme, scheme=scheme if host else "https")
    return pafs.S3FileSystem(**kwargs)


def check_job(job: object) -> str:
    """``job`` itself when it is a SageMaker training job name; else a ConfigError naming it. A job's name is
    part of its files' paths: a name that is not one (``..``, a ``/``, a NUL) must never become a path."""
    if not is_training_job_name(job):
        raise ConfigError(f"job {job!r} is not a SageMaker training job name (1-63 letters, digits and inner "
                          "hyphens); the fleet dataset stores training jobs only", field="job", value=job)
    return job


@dataclass(frozen=True)
class FleetRoot:
    """The dataset's root: ``uri`` as the user wrote it, the filesystem and the base path in it."""

    uri: str
    filesystem: pafs.FileSystem
    base: str

    @property
    def is_s3(self) -> bool:
        return self.uri.startswith("s3://")

    def table_dir(self, table: str) -> str:
        return f"{self.base}/{fleet_table(table).name}"

    def file_path(self, table: str, job: str, hour: str | None) -> str:
        """Where one job's rows of one hour (or, for the jobs table, its one row) live (:func:`check_job`)."""
        check_job(job)
        if fleet_table(table).hour_of is None:
            return f"{self.table_dir(table)}/{job}.parquet"
        return f"{self.table_dir(table)}/{FLEET_HOUR_COLUMN}={hour}/{job}.parquet"

    def url(self, path: str) -> str:
        """The path as DuckDB opens it: ``s3://bucket/key`` or a local path."""
        return f"s3://{path}" if self.is_s3 else path

    def hours(self, table: str) -> list[str]:
        """The table's hour partitions present, sorted."""
        prefix = f"{FLEET_HOUR_COLUMN}="
        infos = self.filesystem.get_file_info(pafs.FileSelector(self.table_dir(table), allow_not_found=True))
        return sorted(i.base_name[len(prefix):] for i in infos
                      if i.type == pafs.FileType.Directory and i.base_name.startswith(prefix))

    def files(self, table: str, since_hour: str | None = None) -> list[pafs.FileInfo]:
        """The table's Parquet files, in partitions from ``since_hour`` on (partition pruning), sorted."""
        if fleet_table(table).hour_of is None:
            dirs = [self.table_dir(table)]
        else:
            dirs = [f"{self.table_dir(table)}/{FLEET_HOUR_COLUMN}={h}" for h in self.hours(table)
                    if since_hour is None or h >= since_hour]
        out: list[pafs.FileInfo] = []
        for d in dirs:
            infos = self.filesystem.get_file_info(pafs.FileSelector(d, allow_not_found=True))
            out.extend(i for i in infos if i.type == pafs.FileType.File and i.base_name.endswith(".parquet"))
        return sorted(out, key=lambda i: i.path)


def open_root(
    root: str | os.PathLike[str],
    *,
    filesystem: pafs.FileSystem | None = None,
    s3: S3Options = S3Options(),
    filesystem_factory: Callable[[S3Options], pafs.FileSystem] = s3_filesystem,
    create: bool = False,
) -> FleetRoot:
    """Resolve ``root`` (a folder or ``s3://bucket/prefix``); ``create`` makes a missing local folder."""
    text = os.fspath(root)
    if not text:
        raise ConfigError("root is empty: ''", field="root", value=text)
    if text.startswith("s3://"):
        bucket_key = text[5:].strip("/")
        if not bucket_key or bucket_key.startswith("/"):
            raise ConfigError(f"root {text!r} names no bucket (expected s3://bucket/prefix)", field="root", value=text)
        fs = filesystem if filesystem is not None else filesystem_factory(s3)
        return FleetRoot(uri=text, filesystem=fs, base=bucket_key)
    if "://" in text:
        raise ConfigError(f"root {text!r} is neither a folder nor an s3:// URI", field="root", value=text)
    path = Path(text).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"root {text!r} is a file, expected a folder", field="root", value=text)
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return FleetRoot(uri=str(path), filesystem=filesystem or pafs.LocalFileSystem(), base=path.as_posix())
