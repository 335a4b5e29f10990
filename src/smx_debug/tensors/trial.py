"""smdebug's trial API on our catalog and decoder: ``create_trial(path)``, ``trial.tensor(name).value(step)``.

A notebook written for smdebug ports by changing its import (``from smx_debug import tensors as smd``). Beyond
smdebug: :meth:`Trial.frame` (a tidy DataFrame of scalars and reductions for many tensors at once, read
incrementally with ``start_step``), :attr:`Trial.skipped` (what was skipped, by reason), S3 clients injected,
and errors of the SmxDebugError family instead of smdebug's own.
"""

from __future__ import annotations

import bisect
import difflib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from smx_debug.data.sources import LocalSource, S3Source, Source, job_paths, split_s3_uri
from smx_debug.errors import (
    ConfigError,
    NoDataYetError,
    NotFoundError,
    TensorUnavailableError,
    UnknownNameError,
)
from smx_debug.tensors.arrays import plan_files, read_arrays
from smx_debug.tensors.catalog import Catalog, EventFile
from smx_debug.tensors.collections_file import Collection
from smx_debug.tensors.frame import tensor_frame
from smx_debug.tensors.mode_keys import ModeKeys, parse_mode
from smx_debug.tensors.reductions import NORMS, REDUCTIONS, compute_reduction, reduction_tensor_name
from smx_debug.tensors.values import RecordReader

if TYPE_CHECKING:
    from smx_debug.tensors.arrays import TrialArrays

_GLOBAL = ModeKeys.GLOBAL
_FRAME_REDUCTIONS = frozenset({*REDUCTIONS, *NORMS} | {f"abs_{r}" for r in (*REDUCTIONS, *NORMS)})


def create_trial(path: str | os.PathLike[str] | Source, name: str | None = None, *, s3_client: Any = None,
                 sagemaker_client: Any = None, verify_checksums: bool = False, start_step: int = 0) -> Trial:
    """Open the trial at ``path``: a local folder, an ``s3://`` prefix, or a training job's name (its
    ``DebugHookConfig`` output, ``<S3OutputPath>/<job>/debug-output/``).

    ``start_step`` (global): files of earlier steps are never listed or read, so reopening a long trial where a
    previous reader stopped costs what is new only (the trial then knows nothing of the earlier steps).

    Raises:
        NotFoundError: for a path or prefix that does not exist, or a job without a DebugHookConfig.
        NoDataYetError: for a folder or prefix that exists but holds no tensors yet.
        ConfigError: for a negative ``start_step``.
    """
    if not isinstance(start_step, int) or isinstance(start_step, bool) or start_step < 0:
        raise ConfigError(f"start_step must be an integer >= 0, got {start_step!r}", field="start_step",
                          value=start_step)
    source = _open(path, s3_client=s3_client, sagemaker_client=sagemaker_client)
    trial = Trial(source, name=name, verify_checksums=verify_checksums, start_step=start_step)
    if not trial._catalog.files and not trial._catalog.collections and not trial._catalog.ended:
        raise NoDataYetError(
            f"no tensors under {source.uri}: expected Debugger's events/, index/ and collections/ folders "
            f"(DebugHookConfig's output, <S3OutputPath>/<job>/debug-output/)", where=source.uri,
        )
    return trial


def _open(path: str | os.PathLike[str] | Source, *, s3_client: Any, sagemaker_client: Any) -> Source:
    if isinstance(path, LocalSource | S3Source):
        return path
    if not isinstance(path, str | os.PathLike) or not os.fspath(path).strip():
        raise ConfigError(f"path must be a folder, an s3:// URI or a training job name, got {path!r}",
                          field="path", value=path)
    text = os.fspath(path).strip()
    if text.startswith("s3://"):
        bucket, key = split_s3_uri(text)
        return S3Source(bucket, key, s3_client=s3_client)
    local = os.path.expanduser(text)
    if os.path.isdir(local):
        return LocalSource(local)
    if os.path.exists(local):
        raise NotFoundError(f"trial path {text!r} is a file, not a folder")
    if os.sep in text or text.startswith(".") or "/" in text:
        raise NotFoundError(f"trial path {text!r} does not exist")
    where = job_paths(text, sagemaker_client=sagemaker_client).debugger
    if where is None:
        raise NotFoundError(f"training job {text!r} has no DebugHookConfig: it saved no tensors")
    bucket, key = split_s3_uri(where)
    return S3Source(bucket, key, s3_client=s3_client)


def _mode(mode: object) -> ModeKeys:
    return parse_mode(mode)


class Trial:
    """The tensors of one training job (all its workers), read incrementally: each call that looks for data not
    yet seen refreshes once, as smdebug's does. Use :func:`create_trial` to open one."""

    def __init__(self, source: Source, *, name: str | None = None, verify_checksums: bool = False,
                 start_step: int = 0) -> None:
        self.path = source.uri
        self.name = name if name is not None else os.path.basename(self.path.rstrip("/"))
        self.verify_checksums = verify_checksums
        self.start_step = start_step
        self._catalog = Catalog(source, start_step=start_step)
        self._global_to_mode: dict[int, tuple[ModeKeys, int]] = {}
        self._mode_to_global: dict[ModeKeys, dict[int, int]] = {}
        self._known: set[str] = set()  # tensor (base) names
        self._named = 0  # catalog names taken into _known so far
        self._postings: dict[str, _Posting] = {}
        self._parts: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}  # name -> (file index,
        # entry position, name id) arrays
        self._grouped = 0  # files of cat.order grouped into _parts
        self._base_names: dict[str, int] = {}  # tensor (base) name -> its code
        self._base_code: list[int] = []  # name id -> its tensor's code
        self._reader = RecordReader(self._catalog, verify=verify_checksums)
        self._steps: dict[tuple[ModeKeys, bool], tuple[tuple[int, bool, int], list[int]]] = {}
        self._tensors: dict[str, Tensor] = {}
        self.refresh()

    def __repr__(self) -> str:
        return f"<Trial {self.name!r} at {self.path}: {len(self._global_to_mode)} steps, {len(self._known)} tensors>"

    # ---------------------------------------------------------------- refresh
    def refresh(self) -> int:
        """Read what was written since the last refresh; returns the number of new event files."""
        added = self._catalog.refresh()
        for f in added:
            self._global_to_mode.setdefault(f.step, (f.mode, f.mode_step))
            if f.mode is not ModeKeys.GLOBAL:
                self._mode_to_global.setdefault(f.mode, {}).setdefault(f.mode_step, f.step)
        cat = self._catalog
        self._known.update(cat.base_of[self._named:])  # names only in a shape_payload are their own base
        self._named = len(cat.names)
        return len(added)

    def _posting(self, name: str) -> _Posting:
        """Tensor ``name``'s records (it and its reductions), found lazily and extended as files arrive (a trial
        read only through :meth:`frame` never builds these): every tensor's positions are grouped in one pass
        over new files."""
        cat = self._catalog
        post = self._postings.get(name)
        if post is not None and post.seen == len(cat.order):
            return post
        if self._grouped < len(cat.order):
            self._group(cat.order[self._grouped:], self._grouped)
            self._grouped = len(cat.order)
        if post is None:
            post = self._postings[name] = _Posting()
        post.seen = len(cat.order)
        parts = self._parts.get(name, ())
        for file_idx, pos, ids in parts[post.taken:]:
            post.extend([cat.order[k] for k in file_idx.tolist()], pos.tolist(), ids.tolist())
        post.taken = len(parts)
        return post

    def _group(self, files: list[EventFile], first: int) -> None:
        """Append each tensor's (file index, entry position) arrays for ``files`` (``cat.order[first:]``)."""
        cat = self._catalog
        while len(self._base_code) < len(cat.names):
            base = cat.base_of[len(self._base_code)]
            self._base_code.append(self._base_names.setdefault(base, len(self._base_names)))
        lengths = np.fromiter((len(f.ids) for f in files), np.int64, len(files))
        if not lengths.sum():
            return
        ids = np.concatenate([f.ids for f in files])
        file_idx = np.repeat(np.arange(first, first + len(files)), lengths)
        pos = np.arange(len(ids)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        code = np.asarray(self._base_code, np.int64)[ids]
        order = np.argsort(code, kind="stable")
        code = code[order]
        cuts = np.flatnonzero(np.diff(code)) + 1
        names = list(self._base_names)
        starts = np.concatenate([[0], cuts])
        for a, chunk in zip(starts.tolist(), np.split(order, cuts), strict=True):
            self._parts.setdefault(names[int(code[a])], []).append((file_idx[chunk], pos[chunk], ids[chunk]))

    @property
    def loaded_all_steps(self) -> bool:
        """Whether the training has ended (``training_job_end.ts``) and everything written has been read."""
        return self._catalog.ended

    def has_training_ended(self) -> bool:
        """Whether the end marker has been seen (refreshes once)."""
        if not self._catalog.ended:
            self.refresh()
        return self._catalog.ended

    @property
    def skipped(self) -> dict[str, int]:
        """What could not be read so far, counted by reason (never fatal)."""
        return dict(self._catalog.skipped)

    # ---------------------------------------------------------------- names, steps, workers, collections
    def tensor_names(self, show_prefixed_tensors: bool = False, *, step: int | None = None,
                     mode: ModeKeys | int | str = ModeKeys.GLOBAL, regex: str | Sequence[str] | None = None,
                     collection: str | Collection | None = None) -> list[str]:
        """Names of the saved tensors (a tensor saved only as reductions included, the reduction tensors folded
        into it), optionally at one ``step`` (of ``mode``), matching ``regex`` (``re.search``, one pattern or
        several) or in ``collection``.

        Raises:
            ConfigError: when both ``regex`` and ``collection`` are given.
            UnknownNameError: for a collection the trial does not define (names the known ones).
        """
        del show_prefixed_tensors  # smdebug's TensorFlow-only switch: accepted for porting, no effect
        if regex is not None and collection is not None:
            raise ConfigError("pass regex or collection, not both", field="regex", value=regex)
        the_mode = _mode(mode)
        names: Iterable[str] = self._known
        if step is not None:
            names = self._names_at(step, the_mode)
        elif the_mode is not ModeKeys.GLOBAL:
            cat = self._catalog
            names = {cat.base_of[i] for f in cat.order if f.mode is the_mode for i in np.unique(f.ids).tolist()}
        if regex is not None:
            patterns = [regex] if isinstance(regex, str) else list(regex)
            names = [n for n in names if any(re.search(p, n) for p in patterns)]
        elif collection is not None:
            coll = self.collection(collection if isinstance(collection, str) else collection.name)
            names = [n for n in names if coll.matches(n)]
        return sorted(names)

    def _names_at(self, step: int, mode: ModeKeys) -> set[str]:
        g = self._global(step, mode, refresh=True)
        out: set[str] = set()
        for w in self._catalog.workers_of.get(g, ()):
            f = self._catalog.files[(g, w)]
            out.update(self._catalog.base_of[n] for n in f.ids.tolist())
            out.update(self._catalog.names[n] for n in f.shapes or ())
        return out

    def has_tensor(self, name: str) -> bool:
        if name not in self._known:
            self.refresh()
        return name in self._known

    def tensor(self, name: str) -> Tensor:
        """The tensor called ``name``.

        Raises:
            TensorUnavailableError: when the trial has no such tensor (names the closest one).
        """
        if not self.has_tensor(name):
            close = difflib.get_close_matches(name, list(self._known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TensorUnavailableError(f"trial {self.name!r} has no tensor {name!r}{hint}", tensor=name)
        if name not in self._tensors:
            self._tensors[name] = Tensor(self, name)
        return self._tensors[name]

    def steps(self, mode: ModeKeys | int | str = ModeKeys.GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """The saved steps: global steps for GLOBAL, else the mode's own steps. Without ``show_incomplete_steps``,
        only steps every worker has written (or that a later complete step, or the end of training, closes)."""
        the_mode = _mode(mode)
        cat = self._catalog
        key = (the_mode, bool(show_incomplete_steps))
        version = (len(cat.order), cat.ended, cat.num_workers)
        cached = self._steps.get(key)
        if cached is None or cached[0] != version:
            cached = self._steps[key] = (version, self._list_steps(the_mode, show_incomplete_steps))
        return list(cached[1])

    def _list_steps(self, the_mode: ModeKeys, show_incomplete_steps: bool) -> list[int]:
        if the_mode is ModeKeys.GLOBAL:
            pairs = [(g, g) for g in self._global_to_mode]
        else:
            pairs = list(self._mode_to_global.get(the_mode, {}).items())
        if show_incomplete_steps or self._catalog.ended:
            return sorted(s for s, _ in pairs)
        last = self._last_complete_step()
        return sorted(s for s, g in pairs if g <= last)

    def _last_complete_step(self) -> int:
        need = max(self._catalog.num_workers, 1)
        complete = [s for s, ws in self._catalog.workers_of.items() if len(ws) >= need]
        return max(complete, default=-1)

    def workers(self) -> list[str]:
        """Every worker seen (collections files and event files)."""
        ws = set(self._catalog.collection_workers)
        for s in self._catalog.workers_of.values():
            ws.update(s)
        return sorted(ws)

    def collections(self) -> dict[str, Collection]:
        """The collections the hook declared, by name."""
        return dict(self._catalog.collections)

    def collection(self, name: str) -> Collection:
        """One collection.

        Raises:
            UnknownNameError: naming the known collections.
        """
        coll = self._catalog.collections.get(name)
        if coll is None:
            self.refresh()
            coll = self._catalog.collections.get(name)
        if coll is None:
            known = ", ".join(sorted(self._catalog.collections)) or "none"
            close = difflib.get_close_matches(name, list(self._catalog.collections), n=1)
            raise UnknownNameError(
                f"trial {self.name!r} has no collection {name!r} (its collections: {known}); add it to the plan's "
                f"collections to save it", name=name, suggestion=close[0] if close else None,
            )
        return coll

    def modes(self) -> list[ModeKeys]:
        """The modes with saved steps (GLOBAL excluded, as smdebug)."""
        return sorted(self._mode_to_global)

    def mode(self, global_step: int) -> ModeKeys:
        return self._mode_of(global_step)[0]

    def mode_step(self, global_step: int) -> int:
        return self._mode_of(global_step)[1]

    def mode_modestep(self, global_step: int) -> tuple[ModeKeys, int]:
        return self._mode_of(global_step)

    def global_step(self, mode: ModeKeys | int | str, mode_step: int) -> int:
        return self._global(mode_step, _mode(mode), refresh=True)

    def _mode_of(self, global_step: int) -> tuple[ModeKeys, int]:
        if global_step not in self._global_to_mode:
            self.refresh()
        if global_step not in self._global_to_mode:
            raise TensorUnavailableError(f"trial {self.name!r} has no step {global_step}", step=global_step)
        return self._global_to_mode[global_step]

    def _global(self, step: int, mode: ModeKeys, *, refresh: bool) -> int:
        if mode is ModeKeys.GLOBAL:
            if step not in self._global_to_mode and refresh:
                self.refresh()
            if step in self._global_to_mode:
                return step
        else:
            table = self._mode_to_global.get(mode, {})
            if step not in table and refresh:
                self.refresh()
                table = self._mode_to_global.get(mode, {})
            if step in table:
                return table[step]
        raise TensorUnavailableError(f"trial {self.name!r} has no step {step} in mode {mode.name}", step=step,
                                     mode=mode.name)

    # ---------------------------------------------------------------- many tensors at once
    def frame(self, names: Iterable[str] | None = None, *, regex: str | Sequence[str] | None = None,
              collection: str | Collection | None = None, modes: Iterable[ModeKeys | int | str] | None = None,
              workers: Iterable[str] | None = None, start_step: int | None = None, end_step: int | None = None,
              reductions: Iterable[str] = ()) -> pd.DataFrame:
        """A tidy frame (``step, mode, mode_step, worker, tensor, reduction, value``) of the selected tensors:
        one row per saved scalar (``reduction`` is ``""``) and per saved reduction (``"mean"``, ``"abs_l2"``...);
        for tensors of more than one element, the ``reductions`` asked for are computed from their values unless
        saved. ``start_step``/``end_step`` (global, end excluded) read only those steps: a live reader asks from
        its last step + 1. Refreshes first. What cannot be read is skipped and counted in :attr:`skipped` and in
        the frame's ``attrs["skipped_by_reason"]``.

        Raises:
            ConfigError: for an unknown reduction name; UnknownNameError for an unknown collection.
        """
        reds = list(dict.fromkeys(reductions))
        for r in reds:
            if r not in _FRAME_REDUCTIONS:
                raise ConfigError(f"reductions: unknown reduction {r!r} (known: {', '.join(sorted(_FRAME_REDUCTIONS))})",
                                  field="reductions", value=r)
        self.refresh()
        if names is not None:
            wanted = sorted(set(names) & self._known)
        else:
            wanted = self.tensor_names(regex=regex, collection=collection)
        mode_set = {_mode(m) for m in modes} if modes is not None else None
        worker_set = set(workers) if workers is not None else None
        want = set(wanted)
        cat = self._catalog
        wanted_ids = np.array([cat.base_of[i] in want for i in range(len(cat.names))], bool)
        # A record of one element is small (its name twice, 16 content bytes, a few dozen of framing): without
        # reductions to compute, larger records of raw tensors cannot give a row and are not read.
        longest = np.array([np.iinfo(np.int64).max if cat.reduction_of[i] or reds else
                            2 * len(cat.names[i].encode()) + 256 for i in range(len(cat.names))], np.int64)
        plan: list[tuple[EventFile, np.ndarray]] = []
        every: dict[int, np.ndarray] = {}
        for f in sorted(cat.order, key=lambda f: (f.step, f.worker)):
            if f.key is None or (start_step is not None and f.step < start_step) or (
                    end_step is not None and f.step >= end_step):
                continue
            if (mode_set is not None and f.mode not in mode_set) or (worker_set is not None and
                                                                     f.worker not in worker_set):
                continue
            sel = np.flatnonzero(wanted_ids[f.ids] & (f.lengths <= longest[f.ids]))
            if len(sel) == len(f.ids):  # every record: one shared index array (a large plan's memory)
                sel = every.setdefault(len(sel), sel)
            if len(sel):
                plan.append((f, sel))
        before = dict(cat.skipped)
        out = tensor_frame(cat, plan, workers=self.workers(), tensors=wanted, reductions=reds,
                           verify=self.verify_checksums)
        out.attrs["files"] = len(plan)
        out.attrs["skipped_by_reason"] = {k: v - before.get(k, 0) for k, v in cat.skipped.items()
                                          if v != before.get(k, 0)}
        return out

    def arrays(self, names: Iterable[str], *, start_step: int | None = None, end_step: int | None = None,
               ) -> TrialArrays:
        """The raw values, saved reductions (and scalars) and each step's wall time of the tensors ``names`` at
        global steps ``start_step <= step < end_step``, every worker and mode, read in bulk: each record once,
        values of one shape as one ``(records, *shape)`` numpy block per tensor. Refreshes first. What cannot be
        read is skipped and counted in :attr:`skipped`.

        Example::

            got = trial.arrays(["gradient/fc1.weight"], start_step=500)
            got.values["gradient/fc1.weight"].block.shape   # (saved records, 120, 84)
            got.wall_times                                  # {500: 1732537200.1, ...}
        """
        self.refresh()
        plan = plan_files(self._catalog, set(names) & self._known, start_step, end_step)
        return read_arrays(self._catalog, plan, verify=self.verify_checksums)

    # ---------------------------------------------------------------- one record
    def _read_value(self, post: _Posting, i: int) -> np.ndarray:
        """The value of a tensor's record ``i`` (those after it are read ahead)."""
        return self._reader.value(post.files, post.pos, i)


@dataclass(eq=False)
class _Posting:
    """One tensor's records (it and its reductions) in the order files were added: file and entry position, in
    two lists (no container per record), and by global step."""

    files: list[EventFile] = field(default_factory=list)
    pos: list[int] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)  # the record's name id (the tensor's, or a reduction's)
    first: dict[int, int] = field(default_factory=dict)  # global step -> its first record
    more: dict[int, list[int]] = field(default_factory=dict)  # global step -> every record, when several
    taken: int = 0  # parts taken
    seen: int = 0  # files of the catalog's order grouped when last extended

    def extend(self, files: list[EventFile], pos: list[int], ids: list[int]) -> None:
        first, more = self.first, self.more
        for i, f in enumerate(files, start=len(self.files)):
            at = first.setdefault(f.step, i)
            if at != i:
                more.setdefault(f.step, [at]).append(i)
        self.files += files
        self.pos += pos
        self.ids += ids

    def at(self, step: int) -> list[int]:
        """The records at global ``step``."""
        several = self.more.get(step)
        if several is not None:
            return several
        one = self.first.get(step)
        return [] if one is None else [one]


class Tensor:
    """One tensor of a trial across steps, modes and workers (smdebug's ``Tensor``)."""

    def __init__(self, trial: Trial, name: str) -> None:
        self.trial = trial
        self.name = name
        self._post: _Posting | None = None  # set by _find
        self._id = -1  # its name id (-1: saved only as reductions, when _post was set)

    def __repr__(self) -> str:
        return f"<Tensor {self.name!r} of trial {self.trial.name!r}>"

    def _files(self) -> list[EventFile]:
        """The event files of this tensor's records (one per record)."""
        return self.trial._posting(self.name).files

    def steps(self, mode: ModeKeys | int | str = ModeKeys.GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """The steps this tensor (or a reduction of it) was saved at: global steps for GLOBAL, else the mode's."""
        the_mode = _mode(mode)
        trial_steps = set(self.trial.steps(the_mode, show_incomplete_steps=show_incomplete_steps))
        mine: Iterable[int]
        if the_mode is ModeKeys.GLOBAL:
            mine = self.trial._posting(self.name).first.keys()  # the global step of each of its records
        else:
            mine = {f.mode_step for f in self._files() if f.mode is the_mode}
        return sorted(mine & trial_steps)

    def prev_steps(self, step: int, n: int | None = None, mode: ModeKeys | int | str = ModeKeys.GLOBAL) -> list[int]:
        """The saved steps up to and including ``step``, the last ``n`` of them when given."""
        steps = self.steps(mode)
        prev = steps[:bisect.bisect_right(steps, step)]
        return prev[-n:] if n else prev

    def workers(self, step: int, mode: ModeKeys | int | str = ModeKeys.GLOBAL) -> list[str]:
        g = self.trial._global(step, _mode(mode), refresh=True)
        return sorted({f.worker for f in self._files() if f.step == g})

    def _find(self, step: int, mode: ModeKeys | int | str, worker: str | None, name: str
              ) -> tuple[_Posting, int] | None:
        """The record of tensor ``name`` (this one, or one of its reductions) at the step and worker: this
        tensor's records and its index in them."""
        trial = self.trial
        if mode is ModeKeys.GLOBAL and step in trial._global_to_mode:  # the common case, without a refresh
            the_mode, g = ModeKeys.GLOBAL, step
        else:
            the_mode = _mode(mode)
            g = trial._global(step, the_mode, refresh=True)
        post = trial._postings.get(self.name)
        if post is None or post.seen != len(trial._catalog.order):
            post = trial._posting(self.name)
        self._post, self._id = post, trial._catalog.name_ids.get(self.name, -1)
        files = post.files
        here = post.more.get(g)
        nid = trial._catalog.name_ids.get(name)
        if here is None:  # one worker, one record (the tensor or one reduction)
            i = post.first.get(g, -1)
            if i < 0:
                raise TensorUnavailableError(f"tensor {self.name!r} was not saved at step {step} ({the_mode.name})",
                                             tensor=self.name, step=step, mode=the_mode.name)
            f = files[i]
            if worker is not None and f.worker != worker:
                raise TensorUnavailableError(
                    f"tensor {self.name!r} at step {step} was saved by workers {[f.worker]}, not {worker!r}",
                    tensor=self.name, step=step, mode=the_mode.name, worker=worker)
            return (post, i) if post.ids[i] == nid else None
        ws = sorted({files[i].worker for i in here})
        if worker is not None and worker not in ws:
            raise TensorUnavailableError(
                f"tensor {self.name!r} at step {step} was saved by workers {ws}, not {worker!r}",
                tensor=self.name, step=step, mode=the_mode.name, worker=worker)
        chosen = worker if worker is not None else ws[0]
        for i in here:
            if files[i].worker == chosen and post.ids[i] == nid:
                return post, i
        return None

    def value(self, step_num: int, mode: ModeKeys | int | str = ModeKeys.GLOBAL, worker: str | None = None
              ) -> np.ndarray:
        """The saved value at ``step_num`` (global for GLOBAL, else the mode's step), of ``worker`` (default: the
        first worker by name that saved it).

        Raises:
            TensorUnavailableError: when the tensor was not saved there (or only its reductions were).
            DataError: when its record is damaged or holds another tensor; UnknownDtypeError for a dtype with
                no numpy form.
        """
        trial = self.trial
        post = self._post
        if (post is not None and mode is _GLOBAL and worker is None and post.seen == len(trial._catalog.order)
                and step_num in trial._global_to_mode and step_num not in post.more):
            # the common case, as _find takes it, without its detours
            i = post.first.get(step_num, -1)
            if i >= 0 and post.ids[i] == self._id:
                return trial._reader.value(post.files, post.pos, i)
        found = self._find(step_num, mode, worker, self.name)
        if found is None:
            raise TensorUnavailableError(
                f"tensor {self.name!r} at step {step_num}: only its reductions were saved "
                f"({', '.join(sorted(('abs_' if a else '') + r for r, a in self.reduction_values(step_num, mode, worker)))}"
                f"); use reduction_value",
                tensor=self.name, step=step_num, mode=_mode(mode).name, worker=worker)
        post, i = found
        return self.trial._reader.value(post.files, post.pos, i)

    def values(self, mode: ModeKeys | int | str = ModeKeys.GLOBAL, worker: str | None = None
               ) -> dict[int, np.ndarray]:
        """Every saved value, by step (of ``mode``)."""
        return {s: self.value(s, mode, worker) for s in self.steps(mode)}

    def shape(self, step_num: int, mode: ModeKeys | int | str = ModeKeys.GLOBAL, worker: str | None = None
              ) -> tuple[int, ...]:
        """The shape recorded in the index (``save_shape``), else the saved value's."""
        cat = self.trial._catalog
        g = self.trial._global(step_num, _mode(mode), refresh=True)
        nid = cat.name_ids.get(self.name)
        for w in sorted(self.trial._catalog.workers_of.get(g, ())):
            f = cat.files[(g, w)]
            if (worker is None or w == worker) and f.shapes and nid in f.shapes:
                return f.shapes[nid]
        return tuple(self.value(step_num, mode, worker).shape)

    def reduction_value(self, step_num: int, reduction_name: str, mode: ModeKeys | int | str = ModeKeys.GLOBAL,
                        worker: str | None = None, abs: bool = False) -> np.ndarray:
        """The saved reduction, or (as smdebug) the reduction computed from the saved value.

        Raises:
            ConfigError: for an unknown reduction; TensorUnavailableError when neither is saved.
        """
        rname = reduction_tensor_name(self.name, reduction_name, abs=abs)
        found = self._find(step_num, mode, worker, rname)
        if found is not None:
            return self.trial._read_value(*found)
        return compute_reduction(self.value(step_num, mode, worker), reduction_name, abs=abs)

    def reduction_values(self, step_num: int, mode: ModeKeys | int | str = ModeKeys.GLOBAL,
                         worker: str | None = None) -> dict[tuple[str, bool], np.ndarray]:
        """Every saved reduction at the step, by ``(reduction, abs)``."""
        cat = self.trial._catalog
        g = self.trial._global(step_num, _mode(mode), refresh=True)
        post = self.trial._posting(self.name)
        here = post.at(g)
        ws = sorted({post.files[i].worker for i in here})
        chosen = worker if worker is not None else (ws[0] if ws else None)
        out: dict[tuple[str, bool], np.ndarray] = {}
        for i in here:
            f = post.files[i]
            red = cat.reduction_of[post.ids[i]]
            if f.worker == chosen and red:
                is_abs = red.startswith("abs_")
                out[(red[4:] if is_abs else red, is_abs)] = self.trial._read_value(post, i)
        return out
