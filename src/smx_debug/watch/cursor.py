"""Per-job cursors in DynamoDB: what the evaluator knows about a job and the data it has read so far.

One item per watched training job (partition key ``pk`` = job name; an unwatched job has none). It holds the
job's facts read once (hosts, instance type, metric definitions, the rules it gets), ``through`` (epoch seconds: data
before it has been read), the last ``window_minutes`` of datapoints (compressed JSON, a few kB), the rule
configurations that already fired and, for a job with tensor rules, their state and the next step to read
(``tensors``, compressed, at most :data:`smx_debug.watch.evaluate.STATE_BUDGET` bytes of DynamoDB's 400 KB item). Each run reads all cursors with BatchGetItem (100 a call) and writes the
changed ones with BatchWriteItem (25 a call), so the cost of a run does not grow with a job's length. Items
expire (DynamoDB TTL on ``expires_at``) a week after their job was last seen running. The same table holds the
run lease (:data:`RUN_LEASE_KEY`) and the job leases (:func:`smx_debug.contracts.job_lease_key`),
deleted in the same BatchWriteItem calls that save the cursors. An item that cannot be read (not JSON, nested too
deep, a window that is not zlib) is logged and its job starts over, as after another version's item: one damaged
item never fails every run.
"""

from __future__ import annotations

import json
import logging
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from smx_debug import _json as bounded_json
from smx_debug.actions.ledger import Ledger
from smx_debug.contracts import LEDGER_KEY_ATTRIBUTE, LEDGER_TTL_ATTRIBUTE, job_lease_key
from smx_debug.rules.watch_spec import WatchedRule

CURSOR_RETENTION_SECONDS = 7 * 24 * 3600
RUN_LEASE_KEY = "#evaluator-run"  # the run lease's item (no job name can be it: SageMaker names have no "#")
_log = logging.getLogger(__name__)
_FORMAT = 3  # 3: the tensor rules' state (2: watched jobs only; 1 kept unwatched jobs too): older items start over
# epoch minute -> value, per host and metric (instance data) or per metric name (training data)
Window = dict[str, dict[str, dict[int, float]]]


@dataclass(frozen=True)
class Cursor:
    """What the evaluator keeps per job between runs."""

    job: str
    checked_at: float  # when its tags (opt-in, spec) were last read
    info: Mapping[str, Any] = field(default_factory=dict)  # hosts, instance_type, metrics, spec, ...
    through: int | None = None  # epoch seconds, a minute boundary: data before it was read
    data: Window = field(default_factory=dict)  # {"host:algo-1": {"CPUUtilization": {minute: value}}, "train": ...}
    fired: Mapping[str, int | None] = field(default_factory=dict)  # configuration name -> step it fired at
    tensors: bytes | None = None  # the tensor rules' state and next step (smx_debug.watch.evaluate), compressed
    # info["rules"] decoded and checked once, when the cursor is read or its rules change (None: decode them)
    rules: tuple[WatchedRule, ...] = field(default=None, compare=False, repr=False)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        if self.rules is None:
            object.__setattr__(self, "rules", tuple(
                WatchedRule(r["name"], r["rule"], r.get("parameters", {})) for r in self.info.get("rules", [])))

    def with_changes(self, **changes: Any) -> Cursor:
        """A copy with ``changes``; its typed rules are kept unless ``info`` brings other ones."""
        if "info" in changes and "rules" not in changes and changes["info"].get("rules") is not self.info.get("rules"):
            changes["rules"] = None
        return replace(self, **changes)


def _encode_window(data: Window) -> bytes:
    plain = {s: {m: [[int(t), float(v)] for t, v in sorted(pts.items())] for m, pts in ms.items()} for s, ms in data.items()}
    return zlib.compress(json.dumps(plain, separators=(",", ":")).encode(), 6)


def _decode_window(blob: bytes) -> Window:
    plain = bounded_json.loads(zlib.decompress(blob))
    return {s: {m: {int(t): float(v) for t, v in pts} for m, pts in ms.items()} for s, ms in plain.items()}


def _to_item(cursor: Cursor, now: float) -> dict[str, Any]:
    item: dict[str, Any] = {
        LEDGER_KEY_ATTRIBUTE: {"S": cursor.job},
        "format": {"N": str(_FORMAT)},
        "checked_at": {"N": repr(float(cursor.checked_at))},
        "info": {"S": json.dumps(dict(cursor.info), sort_keys=True, separators=(",", ":"))},
        "fired": {"S": json.dumps(dict(cursor.fired), sort_keys=True)},
        "updated_at": {"N": str(int(now))},
        LEDGER_TTL_ATTRIBUTE: {"N": str(int(now) + CURSOR_RETENTION_SECONDS)},
    }
    if cursor.through is not None:
        item["through"] = {"N": str(int(cursor.through))}
    if cursor.data:
        item["data"] = {"B": _encode_window(cursor.data)}
    if cursor.tensors:
        item["tensors"] = {"B": cursor.tensors}
    return item


def _from_item(item: Mapping[str, Any]) -> Cursor | None:
    if int(item.get("format", {}).get("N", "0")) != _FORMAT:
        return None  # written by another version: start over for this job
    try:
        info, fired = bounded_json.loads(item["info"]["S"]), bounded_json.loads(item["fired"]["S"])
        if not isinstance(info, dict) or not isinstance(fired, dict):
            raise ValueError("info and fired must be JSON objects")
        return Cursor(
            job=item[LEDGER_KEY_ATTRIBUTE]["S"],
            checked_at=float(item["checked_at"]["N"]),
            info=info,
            through=int(item["through"]["N"]) if "through" in item else None,
            data=_decode_window(item["data"]["B"]) if "data" in item else {},
            fired=fired,
            tensors=item["tensors"]["B"] if "tensors" in item else None,
        )
    except (ValueError, KeyError, TypeError, AttributeError, zlib.error) as exc:  # ValueError: also nested too
        # deep, and a rule that is not one (ConfigError)
        # A damaged item would fail every run that reads it: the job starts over, as after another version's item.
        _log.warning("evaluator: cursor of %r cannot be read (%s: %s); the job starts over",
                     str(item.get(LEDGER_KEY_ATTRIBUTE, {}).get("S", "?"))[:100], type(exc).__name__, str(exc)[:200])
        return None


class CursorStore:
    """Batched reads and writes of :class:`Cursor` items in one table (an injected DynamoDB client)."""

    def __init__(self, table: str, dynamodb: Any, *, clock: Any = time.time, max_rounds: int = 8) -> None:
        self.table = table
        self.dynamodb = dynamodb
        self.clock = clock
        self.max_rounds = max_rounds

    def load(self, jobs: Iterable[str]) -> dict[str, Cursor]:
        """The cursors of ``jobs`` that exist (BatchGetItem, 100 keys a call, unprocessed keys retried)."""
        names = list(dict.fromkeys(jobs))
        out: dict[str, Cursor] = {}
        for i in range(0, len(names), 100):
            request: dict[str, Any] = {
                self.table: {"Keys": [{LEDGER_KEY_ATTRIBUTE: {"S": n}} for n in names[i : i + 100]], "ConsistentRead": True}
            }
            for response in self._until_processed(self.dynamodb.batch_get_item, request, "UnprocessedKeys", "keys"):
                for item in response.get("Responses", {}).get(self.table, []):
                    cursor = _from_item(item)
                    if cursor is not None:
                        out[cursor.job] = cursor
        return out

    def claim_run(self, *, lease_seconds: int) -> bool:
        """Take the run lease (:data:`RUN_LEASE_KEY`, the action ledger's lease claim for ``lease_seconds``): False
        when another run holds it."""
        now = self.clock()
        return self._leases(now, lease_seconds).claim(RUN_LEASE_KEY, {"run_at": now})

    def release_run(self) -> None:
        """Give the run lease back (AWS errors propagate: the caller reports them; the lease then expires)."""
        self._leases(self.clock(), 1).release(RUN_LEASE_KEY)

    def _leases(self, now: float, lease_seconds: int) -> Ledger:
        return Ledger(self.dynamodb, self.table, clock=lambda: now, lease_seconds=lease_seconds,
                      retention_seconds=86_400)

    def claim(self, jobs: Iterable[str], *, lease_seconds: int, workers: int = 8) -> set[str]:
        """The jobs whose lease (:func:`smx_debug.contracts.job_lease_key`) this evaluation now holds, for
        ``lease_seconds`` (conditional PutItems, overlapped); the others are held by an evaluation still going
        (another shard, a slow run). :meth:`save` or :meth:`release` gives them back."""
        now = self.clock()
        names = list(dict.fromkeys(jobs))
        leases = self._leases(now, lease_seconds)
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            won = list(pool.map(lambda n: leases.claim(job_lease_key(n), {"run_at": now}), names))
        return {n for n, ok in zip(names, won, strict=True) if ok}

    def save(self, cursors: Iterable[Cursor], *, release: Iterable[str] = ()) -> int:
        """Write ``cursors`` and delete the items ``release`` names (the evaluation's job leases) in the same
        BatchWriteItem calls (25 requests a call, unprocessed ones retried); returns the cursors written."""
        now = self.clock()
        items: list[dict[str, Any]] = [{"PutRequest": {"Item": _to_item(c, now)}} for c in cursors]
        written = len(items)
        items += [{"DeleteRequest": {"Key": {LEDGER_KEY_ATTRIBUTE: {"S": key}}}} for key in dict.fromkeys(release)]
        self._write(items)
        return written

    def release(self, keys: Iterable[str]) -> None:
        """Delete the items ``keys`` names (job leases), swallowing nothing: the caller decides."""
        self._write([{"DeleteRequest": {"Key": {LEDGER_KEY_ATTRIBUTE: {"S": key}}}} for key in dict.fromkeys(keys)])

    def _write(self, items: list[dict[str, Any]]) -> None:
        for i in range(0, len(items), 25):
            request: dict[str, Any] = {self.table: items[i : i + 25]}
            for _ in self._until_processed(self.dynamodb.batch_write_item, request, "UnprocessedItems", "items"):
                pass

    def _until_processed(
        self, call: Callable[..., Mapping[str, Any]], request: dict[str, Any], unprocessed: str, what: str
    ) -> Iterator[Mapping[str, Any]]:
        """Each response of ``call(RequestItems=...)``, re-sent with what DynamoDB left ``unprocessed`` until
        nothing is left; RuntimeError after ``max_rounds`` calls."""
        for _ in range(self.max_rounds):
            response = call(RequestItems=request)
            yield response
            request = response.get(unprocessed) or {}
            if not request:
                return
            time.sleep(0.05)
        raise RuntimeError(f"DynamoDB left {what} of {self.table} unprocessed after {self.max_rounds} rounds")
