"""Where a writer puts files: a local directory (each file written to ``<name>.tmp`` and renamed, as smdebug does,
so a reader never sees half a file) or an S3 prefix (one PutObject per file; S3 objects appear whole)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

from botocore.config import Config
from botocore.exceptions import ClientError

from smx_debug.errors import ConfigError, translate_client_error
from smx_debug.tensors.layout import TEMP_SUFFIX


class Sink(Protocol):
    """Somewhere files are written whole, by key relative to the trial's root."""

    @property
    def uri(self) -> str: ...

    def put(self, key: str, data: bytes) -> None:
        """Write ``data`` as the file ``key`` (replacing it)."""
        ...


class LocalSink:
    """A directory on disk."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    @property
    def uri(self) -> str:
        return str(self.root)

    def put(self, key: str, data: bytes) -> None:
        path = self.root / key
        tmp = path.with_name(path.name + TEMP_SUFFIX)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError as exc:
            raise ConfigError(f"out_dir {self.uri!r}: cannot write {key!r} ({exc.strerror or exc})",
                              field="out_dir", value=self.uri) from exc


class S3Sink:
    """A prefix in an S3 bucket, through an injected client."""

    def __init__(self, bucket: str, prefix: str, *, s3_client: Any = None) -> None:
        self.bucket = bucket
        self.prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
        if s3_client is None:
            import boto3  # local: a hook writing to disk never loads boto3

            s3_client = boto3.client("s3", config=Config(retries={"mode": "standard"}))
        self.s3 = s3_client

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def put(self, key: str, data: bytes) -> None:
        try:
            self.s3.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=data)
        except ClientError as exc:
            raise translate_client_error(exc, operation="PutObject", where=f"{self.uri}{key}") from exc


def open_sink(out_dir: str | os.PathLike[str], *, s3_client: Any = None) -> Sink:
    """A :class:`LocalSink` for a path, an :class:`S3Sink` for ``s3://bucket/prefix``."""
    if not isinstance(out_dir, str | os.PathLike) or not os.fspath(out_dir):
        raise ConfigError(f"out_dir must be a local path or an s3:// URI, got {out_dir!r}", field="out_dir",
                          value=out_dir)
    text = os.fspath(out_dir)
    if text.startswith("s3://"):
        bucket, _, prefix = text[5:].partition("/")
        if not bucket:
            raise ConfigError(f"out_dir {text!r} names no bucket", field="out_dir", value=text)
        return S3Sink(bucket, prefix, s3_client=s3_client)
    return LocalSink(text)
