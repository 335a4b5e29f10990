"""What a trial holds, without reading tensor values: one entry per event file (step, worker, mode, mode step, and
each tensor's offset and length), from its index file, or by scanning the event file when the index is missing.

Incremental: :meth:`Catalog.refresh` lists the trial and reads only index files it has not read. Tolerant: a
damaged index file, an index whose event file never appears, entries pointing outside their file, damaged
collections files and records in scanned event files are skipped and counted by reason (:attr:`Catalog.skipped`).
An event file seen without its index is scanned at the next refresh (its index may simply not be uploaded yet),
or at once when the training has ended.
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import numpy as np
from botocore.exceptions import ClientError

from smx_debug import _json
from smx_debug.data.sources import LocalSource, ObjectInfo, S3Source, Source
from smx_debug.errors import DataError, translate_client_error
from smx_debug.tensors import layout
from smx_debug.tensors.codec import decode_event
from smx_debug.tensors.collections_file import Collection, CollectionsFile
from smx_debug.tensors.mode_keys import ModeKeys
from smx_debug.tensors.reductions import parse_reduction_name
from smx_debug.tensors.tfrecord import split_records

DAMAGED_INDEX: Final = "index files that are not an index (their event file is scanned instead)"
MISSING_EVENT_FILE: Final = "index entries whose event file never appeared"
BAD_ENTRY: Final = "index entries that point at no record"
DAMAGED_RECORD: Final = "records that are not a tensor event"
UNKNOWN_DTYPE: Final = "tensors of an unknown dtype"
WRONG_TENSOR: Final = "index entries that point at another tensor's record"
T = TypeVar("T")
DAMAGED_COLLECTIONS: Final = "collections files that are not collections JSON"


@dataclass(eq=False, slots=True)
class EventFile:
    """One step of one worker: where its tensors are (``ids`` index :attr:`Catalog.names`)."""

    step: int
    worker: str
    mode: ModeKeys
    mode_step: int
    has_events: bool  # False when the index holds shapes only
    size: int
    ids: np.ndarray  # int32 name ids (shared between files with the same names)
    starts: np.ndarray  # record offsets (uint32 when they fit, else int64)
    lengths: np.ndarray  # record lengths, header and footer included (same)
    shapes: dict[int, tuple[int, ...]] | None = None
    _key: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._key = layout.event_key(self.step, self.worker) if self.has_events else None

    @property
    def key(self) -> str | None:
        """The event file's key (None: shapes only)."""
        return self._key


@dataclass(frozen=True)
class _Index:
    step: int
    worker: str
    mode: ModeKeys
    mode_step: int
    names: list[str]
    starts: np.ndarray  # int64
    lengths: np.ndarray  # int64
    shapes: dict[str, tuple[int, ...]]


def _int(value: Any, what: str) -> int:  # one value; lists are checked with numpy
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise DataError(f"{what} must be an integer >= 0, got {value!r}")
    return value


def _parse_index(step: int, worker: str, data: bytes) -> _Index:
    try:
        doc = _json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("meta"), dict) or not doc["meta"]:
        raise DataError("no 'meta' object")
    meta = doc["meta"]
    mode_name = meta.get("mode")
    if not isinstance(mode_name, str) or mode_name.strip() not in ModeKeys.__members__:
        raise DataError(f"meta.mode must be TRAIN, EVAL, PREDICT or GLOBAL, got {mode_name!r}")
    payload = doc.get("tensor_payload") or []
    try:
        names = [e["tensorname"] for e in payload]
        starts = [e["start_idx"] for e in payload]
        lengths = [e["length"] for e in payload]
    except (KeyError, TypeError):
        raise DataError("a tensor_payload entry lacks tensorname, start_idx or length") from None
    checked = []
    for what, values in (("start_idx", starts), ("length", lengths)):
        arr = np.asarray(values)
        if len(arr) and (arr.dtype.kind not in "iu" or int(arr.min()) < 0):
            raise DataError(f"every {what} must be an integer >= 0, got {values[:5]!r}...")
        checked.append(arr.astype(np.int64))  # one past int64 turns negative: outside every file, dropped later
    shapes: dict[str, tuple[int, ...]] = {}
    for entry in doc.get("shape_payload") or ():
        if not isinstance(entry, dict) or not isinstance(entry.get("tensorname"), str):
            raise DataError(f"shape_payload entry without a tensorname: {entry!r}")
        _check_names([entry["tensorname"]])
        shapes[entry["tensorname"]] = tuple(_int(d, "shape") for d in entry.get("shape") or ())
    return _Index(step, worker, ModeKeys[mode_name.strip()], _int(meta.get("mode_step"), "meta.mode_step"), names,
                  checked[0], checked[1], shapes)


def _check_names(names: Iterable[Any]) -> None:
    """Tensor names must be strings a record's tag can hold (UTF-8: no lone surrogate, which JSON can spell)."""
    for n in names:
        if not isinstance(n, str):
            raise DataError(f"a tensorname is not a string: {n!r}")
        try:
            n.encode()
        except UnicodeEncodeError:
            raise DataError(f"tensorname {n!r} is not UTF-8 text (a lone surrogate)") from None


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused (when it runs): parsing thousands of index files allocates a few
    hundred thousand short-lived dicts and lists, freed by reference counting (they form no cycles), whose
    allocations alone trigger collections, the older generations' walking every object the process holds (a
    fifth of opening a trial). Process-wide, as the collector is: a collection another thread would have run
    meanwhile runs after."""
    was = gc.isenabled()
    if was:
        gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _before(name: str, floor: int) -> bool:
    """Whether a step folder or file name (12 digits first) names a step before ``floor``."""
    head = name[:12]
    return len(head) == 12 and head.isdigit() and int(head) < floor


def _list(source: Source, done: Callable[[str], bool], floor: int) -> list[ObjectInfo]:
    """The trial's files from global step ``floor`` on (collections files and the end marker always): only the
    four places a trial writes. A local folder is scanned with ``os.scandir``, skipping step folders ``done``
    says are fully read and stat-ing only event files (their size bounds their entries); an S3 prefix is listed
    per place, index and event keys from ``floor`` on (``StartAfter``: keys sort by step)."""
    if not isinstance(source, LocalSource):
        if not floor:
            return source.list("")
        return [*source.list(layout.END_OF_JOB), *source.list("collections/"),
                *source.list(layout.INDEX_DIR + "/", start_after=layout.index_prefix(floor)),
                *source.list(layout.EVENTS_DIR + "/", start_after=layout.event_prefix(floor))]
    root = str(source.root)
    out: list[ObjectInfo] = []
    end = os.path.join(root, layout.END_OF_JOB)
    if os.path.exists(end):
        out.append(ObjectInfo(layout.END_OF_JOB, 0, ""))
    for top, stat_files in ((layout.EVENTS_DIR, True), (layout.INDEX_DIR, False), ("collections", True)):
        try:
            subdirs = [d for d in os.scandir(os.path.join(root, top)) if d.is_dir()]
        except (FileNotFoundError, NotADirectoryError):
            continue
        for sub in subdirs:
            if top == layout.EVENTS_DIR and (done(sub.name) or _before(sub.name, floor)):
                continue
            if top == layout.INDEX_DIR and sub.name.isdigit() and int(sub.name) < floor // layout.INDEX_STEPS_PER_DIR:
                continue
            for entry in os.scandir(sub.path):
                if not entry.is_file():
                    continue
                if top == layout.INDEX_DIR and _before(entry.name, floor):
                    continue
                key = f"{top}/{sub.name}/{entry.name}"
                if stat_files:
                    st = entry.stat()
                    out.append(ObjectInfo(key, st.st_size, f"{st.st_mtime_ns}-{st.st_size}"))
                else:
                    out.append(ObjectInfo(key, 0, ""))
    return out


def _read_all(source: Source, keys: list[str], fn: Callable[[str, bytes], T]) -> Iterator[tuple[str, T]]:
    """``fn(key, data)`` for each key: sequentially from disk (small files: a thread pool costs more than it
    saves), through the source's bounded thread pool from S3."""
    if isinstance(source, LocalSource):
        root = str(source.root)
        for key in keys:
            with open(os.path.join(root, key), "rb") as fh:
                yield key, fn(key, fh.read())
    else:
        yield from source.map(keys, fn)


def read_range(source: Source, key: str, start: int, length: int) -> bytes:
    """``length`` bytes of ``key`` from ``start`` (a ranged read where the source allows one)."""
    if isinstance(source, LocalSource):
        with open(source.root / key, "rb") as fh:
            fh.seek(start)
            return fh.read(length)
    if isinstance(source, S3Source) and length > 0:
        try:
            resp = source.s3.get_object(Bucket=source.bucket, Key=source.prefix + key,
                                        Range=f"bytes={start}-{start + length - 1}")
        except ClientError as exc:
            raise translate_client_error(exc, operation="GetObject", where=f"{source.uri}{key}") from exc
        data: bytes = resp["Body"].read()
        return data
    return source.read(key)[start:start + length]


def _small(values: np.ndarray) -> np.ndarray:
    """Offsets as uint32 when they fit (half the memory of a large trial's catalog)."""
    return values.astype(np.uint32) if not len(values) or int(values.max()) < 2**32 else values


class Catalog:
    """The files of one trial, refreshed incrementally. Not thread-safe (one refresh at a time)."""

    def __init__(self, source: Source, *, start_step: int = 0) -> None:
        self.source = source
        # Index and event files of steps before the floor are not listed: the start step, then the first step
        # still waiting for a file (an index's event file, an event file's index, a worker's file of the step).
        self.floor = start_step
        self.names: list[str] = []
        self.name_ids: dict[str, int] = {}
        self.base_of: list[str] = []  # name id -> the tensor it belongs to (itself, or what it reduces)
        self.reduction_of: list[str] = []  # name id -> "" for the tensor itself, else "mean", "abs_l2", ...
        self.files: dict[tuple[int, str], EventFile] = {}
        self.order: list[EventFile] = []  # in the order they were added
        self.collections: dict[str, Collection] = {}
        self.num_workers = 1
        self.collection_workers: set[str] = set()
        self.ended = False
        self.skipped: dict[str, int] = {}
        self._read_index: set[str] = set()
        self._collection_etags: dict[str, str] = {}
        self._unindexed: set[str] = set()
        self._damaged_index: set[tuple[int, str]] = set()
        self._lock = threading.Lock()
        self._id_cache: dict[tuple[str, ...], np.ndarray] = {}
        self._counted: set[tuple[int, str, int]] = set()
        self._encoded: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.workers_of: dict[int, list[str]] = {}

    def skip(self, reason: str, n: int = 1) -> None:
        if n:
            self.skipped[reason] = self.skipped.get(reason, 0) + n

    def skip_record(self, f: EventFile, pos: int, reason: str) -> None:
        """Count one indexed record that cannot be read, once however often it is read (value, frame, arrays)."""
        key = (f.step, f.worker, pos)
        if key not in self._counted:
            self._counted.add(key)
            self.skip(reason)

    def encoded_names(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every name's UTF-8 bytes in one uint8 buffer, with each name's offset and length (by name id): what
        a record's tag is compared with."""
        if self._encoded is None or len(self._encoded[1]) != len(self.names):
            raw = [n.encode() for n in self.names]
            lengths = np.array([len(r) for r in raw], np.int64)
            offsets = np.cumsum(lengths) - lengths
            self._encoded = (np.frombuffer(b"".join(raw), np.uint8), offsets, lengths)
        return self._encoded

    def name_id(self, name: str) -> int:
        nid = self.name_ids.get(name)
        if nid is None:
            nid = self.name_ids[name] = len(self.names)
            self.names.append(name)
            parsed = parse_reduction_name(name)
            if parsed is None:
                self.base_of.append(name)
                self.reduction_of.append("")
            else:
                self.base_of.append(parsed.tensor)
                self.reduction_of.append(("abs_" if parsed.abs else "") + parsed.reduction)
        return nid

    def _step_done(self, folder: str) -> bool:
        """Whether every worker's event file of the step in ``events/<folder>`` is already read."""
        try:
            step = int(folder)
        except ValueError:
            return False
        return len(self.workers_of.get(step, ())) >= self.num_workers

    def refresh(self) -> list[EventFile]:
        """List the trial and take in what is new; returns the event files added."""
        with self._lock, _collector_paused():
            return self._refresh()

    def _refresh(self) -> list[EventFile]:
        listed = _list(self.source, self._step_done, self.floor)
        ended = False
        index: list[tuple[str, layout.FileKey]] = []  # each key parsed once
        events: dict[str, tuple[ObjectInfo, layout.FileKey]] = {}
        collections: list[ObjectInfo] = []
        for info in listed:
            key = info.key
            if key.endswith(layout.TEMP_SUFFIX):
                continue
            if key == layout.END_OF_JOB:
                ended = True
            elif key.startswith(layout.INDEX_DIR + "/"):
                if key not in self._read_index:
                    fk = layout.parse_index_key(key)
                    if fk is not None:
                        index.append((key, fk))
            elif key.startswith(layout.EVENTS_DIR + "/"):
                fk = layout.parse_event_key(key)
                if fk is not None:
                    events[key] = (info, fk)
            elif layout.parse_collections_key(key) is not None:
                collections.append(info)
        self._take_collections(collections)
        added: list[EventFile] = []
        index_keys = dict(index)

        def parse(key: str, data: bytes) -> _Index | DataError:
            fk = index_keys[key]
            try:
                return _parse_index(fk.step, fk.worker, data)
            except DataError as exc:
                return exc

        taken = set(self.files)
        for key, result in _read_all(self.source, [k for k, _ in index], parse):
            fk = index_keys[key]
            if (fk.step, fk.worker) in taken:
                self._read_index.add(key)
                continue
            if isinstance(result, DataError):
                self.skip(DAMAGED_INDEX)
                self._read_index.add(key)
                self._damaged_index.add((fk.step, fk.worker))
                continue
            ev_key = layout.event_key(fk.step, fk.worker)
            ev = events.get(ev_key)
            if result.names and ev is None:
                if ended:  # it will never come
                    self.skip(MISSING_EVENT_FILE, len(result.names))
                    self._read_index.add(key)
                continue  # not uploaded yet: read this index again next time
            self._read_index.add(key)
            try:
                added.append(self._add_indexed(result, ev_key if result.names else None,
                                               ev[0].size if ev else 0))
            except DataError:  # tensor names that are not strings, or not UTF-8
                self.skip(DAMAGED_INDEX)
                self._damaged_index.add((fk.step, fk.worker))
                continue
            taken.add((fk.step, fk.worker))
        for ev_key, (info, fk) in events.items():
            if (fk.step, fk.worker) in taken:
                continue
            if ended or ev_key in self._unindexed or (fk.step, fk.worker) in self._damaged_index:
                scanned = self._scan(ev_key, fk.step, fk.worker, info.size)
                if scanned is not None:
                    added.append(scanned)
            else:
                self._unindexed.add(ev_key)  # its index may be on its way: scan it next time if not
        self.ended = ended
        added.sort(key=lambda f: (f.step, f.worker))
        for f in added:
            self.files[(f.step, f.worker)] = f
            self.order.append(f)
            self.workers_of.setdefault(f.step, []).append(f.worker)
        self._raise_floor([fk for _, fk in index] + [fk for _, fk in events.values()], set(events))
        return added

    def _raise_floor(self, listed: list[layout.FileKey], events: set[str]) -> None:
        """Move the floor up to the first step still waiting for a file (else past the last step listed):
        ``listed`` the index and event files of this listing, ``events`` the event keys."""
        if not listed:
            return
        scanned = {(fk.step, fk.worker) for fk in listed if (fk.step, fk.worker) in self._damaged_index
                   and layout.event_key(fk.step, fk.worker) in events}  # no index, and its event file read
        waiting = [fk.step for fk in listed if (fk.step, fk.worker) not in self.files
                   and (fk.step, fk.worker) not in scanned]
        waiting += [s for s, ws in self.workers_of.items() if s >= self.floor and len(ws) < self.num_workers]
        self.floor = max(self.floor, min(waiting, default=max(fk.step for fk in listed) + 1))

    def _take_collections(self, infos: Iterable[ObjectInfo]) -> None:
        for info in infos:
            if self._collection_etags.get(info.key) == info.etag:
                continue
            self._collection_etags[info.key] = info.etag
            worker = layout.parse_collections_key(info.key)
            try:
                doc = CollectionsFile.from_json(self.source.read(info.key), where=info.key)
            except DataError:
                self.skip(DAMAGED_COLLECTIONS)
                continue
            if worker:
                self.collection_workers.add(worker)
            self.num_workers = max(self.num_workers, doc.num_workers)
            for c in doc.collections:
                self.collections.setdefault(c.name, c)

    def _add_indexed(self, idx: _Index, key: str | None, size: int) -> EventFile:
        names = tuple(idx.names)
        ids = self._id_cache.get(names)
        if ids is None:
            _check_names(names)
            ids = np.fromiter((self.name_id(n) for n in names), np.int32, len(names))
            if len(self._id_cache) < 1024:
                self._id_cache[names] = ids
        starts, lengths = idx.starts, idx.lengths
        inside = (starts >= 0) & (starts + lengths <= size) & (lengths >= 16)
        if not inside.all():
            self.skip(BAD_ENTRY, int((~inside).sum()))
            ids, starts, lengths = ids[inside], starts[inside], lengths[inside]
        shapes = {self.name_id(n): s for n, s in idx.shapes.items()} or None
        if size < 2**32:  # every entry lies inside the file: offsets as uint32 (half a large catalog's memory)
            starts, lengths = starts.astype(np.uint32), lengths.astype(np.uint32)
        return EventFile(idx.step, idx.worker, idx.mode, idx.mode_step, key is not None, size, ids, starts, lengths,
                         shapes)

    def _scan(self, key: str, step: int, worker: str, size: int) -> EventFile | None:
        """Catalog an event file from its own records (no usable index)."""
        data = self.source.read(key)
        recs = split_records(data)
        for reason, n in recs.skipped.items():
            self.skip(reason, n)
        ids: list[int] = []
        starts: list[int] = []
        lengths: list[int] = []
        mode, mode_step = ModeKeys.GLOBAL, step
        for (a, b), offset in zip(recs.spans, recs.offsets, strict=True):
            try:
                values = decode_event(data[a:b])
            except DataError:
                self.skip(DAMAGED_RECORD)
                continue
            if not values:
                continue
            if not ids:  # the index's meta comes from the first tensor, as smdebug's index writer takes it
                mode, mode_step = values[0].mode, values[0].mode_step
            ids.append(self.name_id(values[0].name))
            starts.append(offset)
            lengths.append(b + 4 - offset)
        if not ids:
            return None
        return EventFile(step, worker, mode, mode_step, True, len(data), np.asarray(ids, np.int32),
                         _small(np.asarray(starts, np.int64)), _small(np.asarray(lengths, np.int64)))
