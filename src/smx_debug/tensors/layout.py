"""Where a trial's files live, relative to its root (smdebug 1.0.34's ``locations.py`` and ``utils.py``).

- event files: ``events/<step:012d>/<step:012d>_<worker>.tfevents`` (one per step and worker)
- index files: ``index/<step // 1000:09d>/<step:012d>_<worker>.json`` (one per event file)
- collections: ``collections/000000000/<worker>_collections.json`` (one per worker)
- the end marker: ``training_job_end.ts`` (empty), written when training ends

Local writers (smdebug's and ours) write ``<file>.tmp`` and rename it, so a file with that suffix is a write in
progress, never data.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from smx_debug.errors import ConfigError

EVENTS_DIR: Final = "events"
INDEX_DIR: Final = "index"
COLLECTIONS_DIR: Final = "collections/000000000"
END_OF_JOB: Final = "training_job_end.ts"
INDEX_STEPS_PER_DIR: Final = 1000
TEMP_SUFFIX: Final = ".tmp"

_EVENT_RE = re.compile(r"^events/(\d+)/(\d+)_(.+)\.tfevents$")
_INDEX_RE = re.compile(r"^index/(\d+)/(\d+)_(.+)\.json$")
_COLLECTIONS_RE = re.compile(r"^collections/\d+/(.+)_collections\.json$")
_WORKER_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


class FileKey(NamedTuple):
    """The step and worker a file name says it holds."""

    step: int
    worker: str


def check_worker(worker: object) -> str:
    """``worker`` if it can name files (letters, digits, ``_``, ``.``, ``-``), else a ConfigError naming it."""
    if not isinstance(worker, str) or not _WORKER_RE.match(worker):
        raise ConfigError(
            f"worker must be a non-empty name of letters, digits, '_', '.' or '-' (e.g. 'worker_0'), got {worker!r}",
            field="worker", value=worker,
        )
    return worker


def _check_step(step: object) -> int:
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ConfigError(f"step must be an integer >= 0, got {step!r}", field="step", value=step)
    return step


def event_key(step: int, worker: str) -> str:
    """``events/000000000012/000000000012_worker_0.tfevents`` for step 12 of ``worker_0``."""
    s = f"{_check_step(step):012d}"
    return f"{EVENTS_DIR}/{s}/{s}_{check_worker(worker)}.tfevents"


def index_key(step: int, worker: str) -> str:
    """``index/000000001/000000001234_worker_0.json`` for step 1234 of ``worker_0``."""
    _check_step(step)
    return f"{INDEX_DIR}/{step // INDEX_STEPS_PER_DIR:09d}/{step:012d}_{check_worker(worker)}.json"


def index_prefix(step: int) -> str:
    """What every index key of ``step`` starts with; keys of later steps sort after it."""
    return f"{INDEX_DIR}/{_check_step(step) // INDEX_STEPS_PER_DIR:09d}/{step:012d}"


def event_prefix(step: int) -> str:
    """What every event key of ``step`` starts with; keys of later steps sort after it."""
    return f"{EVENTS_DIR}/{_check_step(step):012d}"


def collections_key(worker: str) -> str:
    """``collections/000000000/worker_0_collections.json`` for ``worker_0``."""
    return f"{COLLECTIONS_DIR}/{check_worker(worker)}_collections.json"


def parse_event_key(key: str) -> FileKey | None:
    """The step and worker of an event file's relative key, or ``None`` for any other key."""
    m = _EVENT_RE.match(key)
    if m is None or int(m.group(1)) != int(m.group(2)):
        return None
    return FileKey(int(m.group(2)), m.group(3))


def parse_index_key(key: str) -> FileKey | None:
    """The step and worker of an index file's relative key, or ``None`` for any other key."""
    m = _INDEX_RE.match(key)
    if m is None:
        return None
    return FileKey(int(m.group(2)), m.group(3))


def parse_collections_key(key: str) -> str | None:
    """The worker of a collections file's relative key, or ``None`` for any other key."""
    m = _COLLECTIONS_RE.match(key)
    return m.group(1) if m else None
