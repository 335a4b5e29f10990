"""The fleet dataset in S3 through an injected boto3 client: a pyarrow filesystem for the stack's functions.

The evaluator and the fleet collector append to the dataset from Lambda, with the boto3 clients of their
runtime (botocore's standard retries, the function's role; on the local AWS, the local IAM's client plugin
authorizes each call). pyarrow's own S3 filesystem would sign requests itself, outside those clients, so these
functions reach S3 through :func:`boto3_filesystem` instead: a :class:`pyarrow.fs.PyFileSystem` whose handler
maps the few operations the writer needs onto S3 calls:

- a file's info: ``ListObjectsV2`` with the key as prefix (never ``HeadObject``: without ``s3:ListBucket`` on
  the key S3 answers a missing key with 403, and the functions' grant is limited by ``s3:prefix``);
- a folder's entries: ``ListObjectsV2`` with a delimiter (paginated);
- reading a file: one ``GetObject`` (the dataset's files are small: one job-hour each);
- writing a file: one ``PutObject`` of the whole file when the stream closes (readers see the old or the new
  file, never a part of it); deleting one: ``DeleteObject``.

Paths are ``bucket/key``, as pyarrow's S3 filesystem spells them.
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
from botocore.exceptions import ClientError

from smx_debug.contracts import FLEET_PREFIX
from smx_debug.fleet.root import FleetRoot, open_root

_MISSING = {"NoSuchKey", "404", "NotFound"}


def _split(path: str) -> tuple[str, str]:
    bucket, _, key = path.strip("/").partition("/")
    return bucket, key


class _Upload(io.BytesIO):
    """Collects a file's bytes and puts them in one PutObject when closed."""

    def __init__(self, s3: Any, bucket: str, key: str) -> None:
        super().__init__()
        self._s3, self._bucket, self._key = s3, bucket, key

    def close(self) -> None:
        if not self.closed:
            self._s3.put_object(Bucket=self._bucket, Key=self._key, Body=self.getvalue())
        super().close()


class S3ClientHandler(pafs.FileSystemHandler):  # type: ignore[misc]
    """pyarrow's filesystem operations on an injected boto3 S3 client (see the module docstring)."""

    def __init__(self, s3: Any) -> None:
        self.s3 = s3

    def __eq__(self, other: object) -> bool:
        return isinstance(other, S3ClientHandler) and other.s3 is self.s3

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return id(self.s3)

    def get_type_name(self) -> str:
        return "s3-boto3"

    def normalize_path(self, path: str) -> str:
        return path.strip("/")

    # -- listing -----------------------------------------------------------------------------------------

    def _first(self, bucket: str, prefix: str) -> dict[str, Any] | None:
        page = self.s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
        contents = page.get("Contents") or []
        return contents[0] if contents else None

    def _info(self, path: str) -> pafs.FileInfo:
        bucket, key = _split(path)
        if not key:
            return pafs.FileInfo(path, pafs.FileType.Directory)
        found = self._first(bucket, key)
        if found is not None and found["Key"] == key:
            return pafs.FileInfo(path, pafs.FileType.File, size=int(found.get("Size", 0)),
                                 mtime=found.get("LastModified"))
        if found is not None and self._first(bucket, key.rstrip("/") + "/") is not None:
            return pafs.FileInfo(path, pafs.FileType.Directory)
        return pafs.FileInfo(path, pafs.FileType.NotFound)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return [self._info(p) for p in paths]

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        bucket, key = _split(selector.base_dir)
        prefix = key.rstrip("/") + "/" if key else ""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        if not selector.recursive:
            kwargs["Delimiter"] = "/"
        out: list[pafs.FileInfo] = []
        dirs: set[str] = set()
        for page in self.s3.get_paginator("list_objects_v2").paginate(**kwargs):
            for sub in page.get("CommonPrefixes") or []:
                dirs.add(sub["Prefix"].rstrip("/"))
            for obj in page.get("Contents") or []:
                if obj["Key"] == prefix:
                    continue  # a folder marker
                out.append(pafs.FileInfo(f"{bucket}/{obj['Key']}", pafs.FileType.File, size=int(obj.get("Size", 0)),
                                         mtime=obj.get("LastModified")))
                if selector.recursive:  # the folders between the base and the file
                    parts = obj["Key"][len(prefix):].split("/")[:-1]
                    dirs.update(prefix + "/".join(parts[: i + 1]) for i in range(len(parts)))
        if not out and not dirs and not selector.allow_not_found and self._info(selector.base_dir).type != \
                pafs.FileType.Directory:
            raise FileNotFoundError(f"s3://{selector.base_dir}: no such folder")
        out.extend(pafs.FileInfo(f"{bucket}/{d}", pafs.FileType.Directory) for d in sorted(dirs))
        return out

    # -- reading and writing -----------------------------------------------------------------------------

    def open_input_file(self, path: str) -> pa.NativeFile:
        bucket, key = _split(path)
        try:
            body = self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _MISSING:
                raise FileNotFoundError(f"s3://{path}") from exc
            raise
        return pa.BufferReader(body)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.open_input_file(path)

    def open_output_stream(self, path: str, metadata: Any = None) -> pa.NativeFile:
        bucket, key = _split(path)
        return pa.PythonFile(_Upload(self.s3, bucket, key), mode="w")

    def open_append_stream(self, path: str, metadata: Any = None) -> pa.NativeFile:
        raise NotImplementedError("S3 objects cannot be appended to")

    def create_dir(self, path: str, recursive: bool) -> None:
        """S3 has no folders: a key's prefix is its folder."""

    def delete_file(self, path: str) -> None:
        bucket, key = _split(path)
        self.s3.delete_object(Bucket=bucket, Key=key)

    def delete_dir(self, path: str) -> None:
        raise NotImplementedError("the fleet writer never deletes folders")

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        raise NotImplementedError("the fleet writer never deletes folders")

    def delete_root_dir_contents(self) -> None:
        raise NotImplementedError("the fleet writer never deletes folders")

    def move(self, src: str, dest: str) -> None:
        raise NotImplementedError("S3 has no rename; the fleet writer puts whole files")

    def copy_file(self, src: str, dest: str) -> None:
        raise NotImplementedError("the fleet writer never copies files")


def boto3_filesystem(s3: Any) -> pafs.PyFileSystem:
    """A pyarrow filesystem over ``s3`` (a boto3 S3 client); see the module docstring."""
    return pafs.PyFileSystem(S3ClientHandler(s3))


def stack_root(bucket: str, s3: Any) -> FleetRoot:
    """The stack's fleet dataset (``s3://<bucket>/smx-debug/fleet/``) through ``s3``, a boto3 client."""
    return open_root(f"s3://{bucket}/{FLEET_PREFIX}", filesystem=boto3_filesystem(s3))
