"""The tensor rules' state between two evaluations in different processes (the scheduled evaluator's runs).

:func:`dump` turns the rules' states (the dataclasses of :mod:`tensor_verdict`, :mod:`tensor_rules`,
:mod:`tensor_input_rules` and :mod:`tensor_loss_rules`: counts, class tallies, channel sums, the first steps a
rule analyses, the last wall time) into compact bytes (JSON, zlib) and :func:`load` back. Only those classes are
rebuilt (an allow-list, no pickle: the bytes come from a database). Raw values a rule keeps to compare the next
step with (UnchangedTensor's and WeightUpdateRatio's previous weights: a model's size, too large for a DynamoDB
item) are not stored: :func:`dump` keeps where they are (tensor, worker, mode, step) and the caller reads those
records again (:attr:`Snapshot.history`). What only the chart or the message needs is dropped first when the
state would not fit its budget (:func:`dump`'s ``budget``).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from smx_debug import _json as bounded_json
from smx_debug.errors import DataError
from smx_debug.evaluate import tensor_input_rules, tensor_loss_rules  # noqa: F401  (their rules are TensorRules)
from smx_debug.evaluate.tensor_rules import TensorRule
from smx_debug.evaluate.tensor_verdict import Tally, _TensorTally
from smx_debug.rules.registry import rule_defs

FORMAT: Final = 1
HistoryRef = tuple[str, str, str, str, int]  # (configuration, tensor, worker, mode, step)


@dataclass
class Snapshot:
    """What :func:`load` gives back: the next global step to read, each configuration's state (by configuration
    name, for its rule class) and the records to read again to refill the compared values."""

    cursor: int
    rules: dict[str, str] = field(default_factory=dict)  # configuration -> rule class
    states: dict[str, Any] = field(default_factory=dict)
    history: list[HistoryRef] = field(default_factory=list)

    @property
    def read_from(self) -> int:
        """The first global step the next evaluation reads (the history's, else the cursor)."""
        return min([self.cursor, *(ref[4] for ref in self.history)])


def _classes() -> dict[str, type]:
    """The allow-list: the Tally every rule may hold, and the state classes each tensor rule declares
    (``state_types``): Debugger's (the TensorRule classes) and our own (their evaluators, from the registry)."""
    rules: list[type] = [TensorRule]
    for cls in rules:
        rules.extend(cls.__subclasses__())
    declared = [*(getattr(d.evaluator, "state_types", ()) for d in rule_defs() if "tensors" in d.evaluates_on),
                *(cls.state_types for cls in rules)]  # type: ignore[attr-defined]
    found = [Tally, _TensorTally, *(c for types in declared for c in types)]
    return {c.__name__: c for c in found}


def _enc(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"$dc": type(value).__name__,
                "f": {f.name: _enc(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, np.ndarray):
        arr = np.ascontiguousarray(value)
        if arr.dtype.kind == "O":
            return {"$t": [_enc(v) for v in arr.tolist()], "$o": True}
        return {"$nd": [arr.dtype.str, list(arr.shape), base64.b64encode(arr.tobytes()).decode()]}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {"$d": [[_enc(k), _enc(v)] for k, v in value.items()]}
    if isinstance(value, set | frozenset):
        return {"$s": [_enc(v) for v in sorted(value)]}
    if isinstance(value, tuple):
        return {"$t": [_enc(v) for v in value]}
    if isinstance(value, list):
        return [_enc(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"tensor rule state holds a {type(value).__name__}, which the evaluator cannot keep")


def _dec(value: Any, classes: Mapping[str, type]) -> Any:
    if isinstance(value, list):
        return [_dec(v, classes) for v in value]
    if not isinstance(value, dict):
        return value
    if "$dc" in value:
        cls = classes.get(value["$dc"])
        if cls is None:
            raise DataError(f"tensor rule state names an unknown class {value['$dc']!r}")
        return cls(**{k: _dec(v, classes) for k, v in value["f"].items()})
    if "$nd" in value:
        dtype, shape, data = value["$nd"]
        return np.frombuffer(base64.b64decode(data), dtype=np.dtype(dtype)).reshape(shape).copy()
    if "$t" in value:
        items = [_dec(v, classes) for v in value["$t"]]
        return np.array(items, dtype=object) if value.get("$o") else tuple(items)
    if "$s" in value:
        return {_dec(v, classes) for v in value["$s"]}
    if "$d" in value:
        return {_dec(k, classes): _dec(v, classes) for k, v in value["$d"]}
    raise DataError(f"tensor rule state has an unknown form {sorted(value)!r}")


def _without_values(name: str, state: Any, history: list[HistoryRef]) -> Any:
    """The state without the charts' traces (the report's, not a rule's) and without what the state itself sheds
    (its ``shed(name, history)``: raw values it compares, replaced by where they are, added to ``history``)."""
    if isinstance(state, Tally):
        return dataclasses.replace(state, traces={})
    tally = getattr(state, "tally", None)
    if isinstance(tally, Tally):
        state = dataclasses.replace(state, tally=dataclasses.replace(tally, traces={}))
    shed = getattr(state, "shed", None)
    return shed(name, history) if shed is not None else state


def _lean(state: Any) -> Any:
    """The state without what only the message and the details need (per-tensor counts, lists of names)."""
    if isinstance(state, Tally):
        return dataclasses.replace(state, tensors={}, extra={})
    tally = getattr(state, "tally", None)
    if isinstance(tally, Tally):
        return dataclasses.replace(state, tally=_lean(tally))
    return state


def dump(cursor: int, rules: Mapping[str, str], states: Mapping[str, Any], *, budget: int) -> bytes:
    """The states of configurations ``rules`` (configuration -> rule class) as at most ``budget`` bytes.

    Raises:
        DataError: when even the lean form is larger than ``budget`` (the caller starts that job over).
    """
    history: list[HistoryRef] = []
    kept = {name: _without_values(name, states[name], history) for name in rules}
    for attempt in (kept, {name: _lean(s) for name, s in kept.items()}):
        body = {"format": FORMAT, "cursor": int(cursor), "rules": dict(rules),
                "states": {name: _enc(s) for name, s in attempt.items()}, "history": [list(h) for h in history]}
        blob = zlib.compress(json.dumps(body, separators=(",", ":")).encode(), 6)
        if len(blob) <= budget:
            return blob
    raise DataError(f"the tensor rules' state takes {len(blob):,} bytes compressed, more than {budget:,}")


def load(blob: bytes) -> Snapshot:
    """A :func:`dump` back.

    Raises:
        DataError: for bytes that are not a state of this format.
    """
    try:
        body = bounded_json.loads(zlib.decompress(blob))  # ValueError: also nested too deep
    except (zlib.error, ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"not a tensor rule state ({exc})") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise DataError("a tensor rule state of another format")
    classes = _classes()
    try:
        return Snapshot(cursor=int(body["cursor"]), rules={str(k): str(v) for k, v in body["rules"].items()},
                        states={k: _dec(v, classes) for k, v in body["states"].items()},
                        history=[(str(c), str(t), str(w), str(m), int(s)) for c, t, w, m, s in body["history"]])
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"a damaged tensor rule state ({type(exc).__name__}: {exc})") from None
