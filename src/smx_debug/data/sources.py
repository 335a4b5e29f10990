"""Where profiler output lives: a local directory or an S3 prefix, behind one small interface.

A :class:`Source` lists objects (relative key, size, ETag) under its root and reads them as bytes, in memory.
:meth:`Source.map` fetches many objects with a bounded thread pool and applies a function to each in the
worker thread, so parsing (pyarrow releases the GIL) overlaps with the next downloads.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError, NoRegionError

from smx_debug.contracts import HOOK_OUTPUT_ENV, PROFILER_OUTPUT, hook_trial_uri
from smx_debug.errors import ConfigError, NotFoundError, RegionError, translate_client_error

DEFAULT_WORKERS = 16
_MIN_BYTES_IN_FLIGHT = 8 << 20
T = TypeVar("T")


def _default_s3() -> Any:
    return boto3.client("s3", config=Config(retries={"mode": "standard"}, max_pool_connections=32))


def default_sagemaker() -> Any:
    """A SageMaker client with standard retries in the default region; RegionError when none is configured."""
    try:
        return boto3.client("sagemaker", config=Config(retries={"mode": "standard"}))
    except NoRegionError as exc:
        raise RegionError() from exc


@dataclass(frozen=True)
class ObjectInfo:
    """One object under a source root: ``key`` is relative to the root, with ``/`` separators."""

    key: str
    size: int
    etag: str


class Source(Protocol):
    """A readable tree of profiler output (:class:`LocalSource` and :class:`S3Source` share its ``map``)."""

    @property
    def uri(self) -> str:
        """The root, as the user would write it."""
        ...

    def list(self, prefix: str = "", *, start_after: str | None = None) -> list[ObjectInfo]:
        """Every object whose relative key starts with ``prefix`` (and sorts after ``start_after``), by key."""
        ...

    def read(self, key: str) -> bytes:
        """The whole object at relative ``key``."""
        ...

    def map(
        self,
        keys: Iterable[str],
        fn: Callable[[str, bytes], T],
        *,
        workers: int = DEFAULT_WORKERS,
        sizes: Mapping[str, int] | None = None,
    ) -> Iterator[tuple[str, T]]:
        """Read each key and apply ``fn(key, data)`` in a worker thread; yields in the order of ``keys``.

        ``sizes`` (bytes per key, as listed) lets the reads in flight be bounded by bytes as well as by count.
        """
        return _bounded_map(self.read, keys, fn, self.read_workers(workers), sizes)

    def read_workers(self, workers: int) -> int:
        """How many of ``workers`` threads read at once (all of them, unless the source says fewer)."""
        return workers


class _ByteBudget:
    """Bytes of object data in flight (being read, or read and not yet parsed), bounded by ``limit``.

    One object is always admitted when nothing is in flight, so an object larger than the limit still goes.
    """

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0
        self._cond = threading.Condition()

    def acquire(self, n: int) -> None:
        if self.limit is None:
            return
        with self._cond:
            while self.used and self.used + n > self.limit:
                self._cond.wait()
            self.used += n

    def release(self, n: int) -> None:
        if self.limit is None:
            return
        with self._cond:
            self.used -= n
            self._cond.notify_all()


def _byte_limit(sizes: Mapping[str, int] | None, keys: list[str]) -> int | None:
    # Object data in flight is at most a tenth of what is read (about two thirds of the DataFrame it parses into),
    # so peak memory stays proportional to the result; small reads keep some concurrency, and on large reads
    # the count window binds first.
    if sizes is None:
        return None
    total = sum(sizes.get(k, 0) for k in keys)
    return max(_MIN_BYTES_IN_FLIGHT, total // 10)


def _bounded_map(
    read: Callable[[str], bytes],
    keys: Iterable[str],
    fn: Callable[[str, bytes], T],
    workers: int,
    sizes: Mapping[str, int] | None = None,
) -> Iterator[tuple[str, T]]:
    cores = os.cpu_count() or 1
    keys = list(keys)
    # At most workers + cores objects are submitted and not yet yielded, so memory stays bounded whatever the
    # number of keys; with sizes known, the bytes read and not yet parsed are bounded as well.
    window = max(1, workers + cores)
    budget = _ByteBudget(_byte_limit(sizes, keys))
    # Downloads may run wide, but parsing is CPU-bound: at most one parse per core at a time.
    cpu = threading.BoundedSemaphore(cores)

    def parse(key: str) -> T:
        data = read(key)
        with cpu:
            return fn(key, data)

    def task(key: str, size: int) -> T:
        try:
            return parse(key)  # the data is freed when parse() returns, before its bytes are given back
        finally:
            budget.release(size)

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="smx-read") as pool:
        pending: deque[tuple[str, Future[T]]] = deque()
        try:
            for key in keys:
                while len(pending) >= window or (pending and pending[0][1].done()):
                    done_key, fut = pending.popleft()
                    yield done_key, fut.result()
                size = sizes.get(key, 0) if sizes is not None else 0
                budget.acquire(size)
                pending.append((key, pool.submit(task, key, size)))
            while pending:
                done_key, fut = pending.popleft()
                yield done_key, fut.result()
        finally:
            for _key, fut in pending:
                fut.cancel()


class LocalSource(Source):
    """A directory on disk."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    @property
    def uri(self) -> str:
        return str(self.root)

    def list(self, prefix: str = "", *, start_after: str | None = None) -> list[ObjectInfo]:
        out: list[ObjectInfo] = []
        base = str(self.root)
        start = self.root / prefix.rsplit("/", 1)[0] if "/" in prefix else self.root
        if not start.is_dir():
            return out
        for dirpath, _dirs, files in os.walk(start):
            for name in files:
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, base).replace(os.sep, "/")
                if not rel.startswith(prefix) or (start_after is not None and rel <= start_after):
                    continue
                st = os.stat(full)
                out.append(ObjectInfo(rel, st.st_size, f"{st.st_mtime_ns}-{st.st_size}"))
        out.sort(key=lambda o: o.key)
        return out

    def read(self, key: str) -> bytes:
        return (self.root / key).read_bytes()

    def read_workers(self, workers: int) -> int:
        # Disk reads are cheap; two threads per core keep parsing busy without oversubscribing.
        return min(workers, 2 * (os.cpu_count() or 1))


class S3Source(Source):
    """A prefix in an S3 bucket, read through an injected boto3 client."""

    def __init__(self, bucket: str, prefix: str, *, s3_client: Any = None) -> None:
        self.bucket = bucket
        self.prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
        self.s3 = s3_client if s3_client is not None else _default_s3()

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def list(self, prefix: str = "", *, start_after: str | None = None) -> list[ObjectInfo]:
        out: list[ObjectInfo] = []
        full = self.prefix + prefix
        extra = {"StartAfter": self.prefix + start_after} if start_after is not None else {}
        try:
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full, **extra):
                for obj in page.get("Contents", ()):
                    out.append(ObjectInfo(obj["Key"][len(self.prefix):], int(obj["Size"]), obj.get("ETag", "")))
        except ClientError as exc:
            raise _translate(exc, "ListObjectsV2", f"s3://{self.bucket}/{full}") from exc
        out.sort(key=lambda o: o.key)
        return out

    def has_prefix(self, prefix: str) -> bool:
        """Whether any object's relative key starts with ``prefix`` (one cheap request)."""
        try:
            resp = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=self.prefix + prefix, MaxKeys=1)
        except ClientError as exc:
            raise _translate(exc, "ListObjectsV2", f"s3://{self.bucket}/{self.prefix}{prefix}") from exc
        return bool(resp.get("KeyCount") or resp.get("Contents"))

    def read(self, key: str) -> bytes:
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=self.prefix + key)["Body"]
            data: bytes = body.read()
            return data
        except ClientError as exc:
            raise _translate(exc, "GetObject", f"s3://{self.bucket}/{self.prefix}{key}") from exc


def _translate(exc: ClientError, operation: str, where: str) -> Exception:
    return translate_client_error(exc, operation=operation, where=where)


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> ``("bucket", "a/b")``."""
    if not uri.startswith("s3://") or len(uri) <= 5 or uri[5] == "/":
        raise ConfigError(f"not an S3 URI: {uri!r}", field="uri", value=uri)
    bucket, _, key = uri[5:].partition("/")
    return bucket, key


@dataclass(frozen=True)
class JobPaths:
    """The S3 locations of one training job's Debugger output, from DescribeTrainingJob."""

    job_name: str
    debugger: str | None
    profiler: str | None
    rule_output: str | None


def describe_job(job_name: str, sagemaker_client: Any = None) -> dict[str, Any]:
    """DescribeTrainingJob, its errors translated (JobNotFoundError, AccessDeniedError, ...): the readers' one call."""
    sm = sagemaker_client if sagemaker_client is not None else default_sagemaker()
    try:
        desc: dict[str, Any] = sm.describe_training_job(TrainingJobName=job_name)
        return desc
    except ClientError as exc:
        raise translate_client_error(exc, operation="DescribeTrainingJob", job_name=job_name,
                                     region=sm.meta.region_name) from exc


def _join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts]) + "/"


def job_paths(job_name: str, *, sagemaker_client: Any = None, description: dict[str, Any] | None = None) -> JobPaths:
    """The job's debugger (tensors), profiler and rule-output S3 prefixes.

    Debugger writes tensors under ``DebugHookConfig.S3OutputPath/<job>/debug-output/``, profiler data under
    ``ProfilerConfig.S3OutputPath/<job>/profiler-output/`` and rule outputs under ``.../<job>/rule-output/``.
    A job without a DebugHookConfig whose plan rendered the hook's settings into its ``Environment`` has its
    hook's trial at the same place under ``SMX_DEBUG_OUTPUT`` (:func:`smx_debug.contracts.hook_trial_uri`).
    """
    desc = description if description is not None else describe_job(job_name, sagemaker_client)
    hook = (desc.get("DebugHookConfig") or {}).get("S3OutputPath")
    env_hook = (desc.get("Environment") or {}).get(HOOK_OUTPUT_ENV)
    prof = (desc.get("ProfilerConfig") or {}).get("S3OutputPath")
    rule_base = prof or hook
    trial = hook or env_hook
    return JobPaths(
        job_name=job_name,
        debugger=hook_trial_uri(str(trial), job_name) if trial else None,
        profiler=_join(prof, job_name, PROFILER_OUTPUT) if prof else None,
        rule_output=_join(rule_base, job_name, "rule-output") if rule_base else None,
    )


def open_source(
    job_or_path: str | os.PathLike[str] | Source,
    *,
    sagemaker_client: Any = None,
    s3_client: Any = None,
    output: Literal["profiler", "rule"] = "profiler",
) -> Source:
    """Resolve a training job name, an ``s3://`` URI or a local path to the job's profiler-output root.

    A local directory (or S3 prefix) that contains a ``profiler-output`` folder is resolved to that folder.
    With ``output="rule"`` a job name resolves to its ``rule-output/`` prefix and paths are taken as given.
    """
    if isinstance(job_or_path, LocalSource | S3Source):
        return job_or_path
    if not isinstance(job_or_path, str | os.PathLike):
        raise ConfigError(
            f"job_or_path must be a job name, an s3:// URI or a path, got {job_or_path!r}",
            field="job_or_path",
            value=job_or_path,
        )
    text = os.fspath(job_or_path)
    if not text:
        raise ConfigError("job_or_path is empty: ''", field="job_or_path", value=text)
    if text.startswith("s3://"):
        bucket, key = split_s3_uri(text)
        src = S3Source(bucket, key, s3_client=s3_client)
        if output == "profiler" and src.has_prefix("profiler-output/"):
            return S3Source(bucket, src.prefix + "profiler-output/", s3_client=src.s3)
        return src
    path = Path(text)
    if path.exists():
        if output == "profiler" and (path / PROFILER_OUTPUT).is_dir():
            path = path / PROFILER_OUTPUT
        return LocalSource(path)
    if os.sep in text or text.startswith("."):
        raise NotFoundError(f"local path {text!r} does not exist")
    paths = job_paths(text, sagemaker_client=sagemaker_client)
    where = paths.profiler if output == "profiler" else paths.rule_output
    if where is None:
        raise NotFoundError(f"training job {text!r} has no ProfilerConfig.S3OutputPath: profiling was off")
    bucket, key = split_s3_uri(where)
    return S3Source(bucket, key, s3_client=s3_client)
