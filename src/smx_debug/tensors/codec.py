"""One tensor <-> one Event record, byte for byte as smdebug 1.0.34's ``FileWriter.write_tensor`` writes it.

A record is an ``Event`` (``wall_time``, ``step`` = the global step, ``summary``) whose one ``Summary.Value`` has
the tensor's name as ``tag``, a ``TensorProto`` (dtype, a shape whose dims are named ``<tag>_<size>``, the
little-endian bytes in ``tensor_content``, or ``string_val`` for strings) and ``metadata`` with two plugin entries,
``{"mode_step": "<n>"}`` then ``{"mode": "<1-4>"}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from smx_debug.errors import DataError
from smx_debug.tensors import proto
from smx_debug.tensors.dtypes import dtype_code, tensor_value
from smx_debug.tensors.mode_keys import ModeKeys


def encode_event(name: str, value: np.ndarray, *, step: int, mode: ModeKeys, mode_step: int,
                 wall_time: float) -> bytes:
    """The serialized Event holding tensor ``name`` (``value`` as :func:`dtypes.as_array` returns it)."""
    event = proto.Event(wall_time=wall_time, step=step)
    item = event.summary.value.add(tag=name)
    tensor = item.tensor
    for size in value.shape:
        tensor.tensor_shape.dim.add(size=int(size), name=f"{name}_{int(size)}")
    if value.dtype.kind in "USO":
        tensor.string_val.extend(
            s if isinstance(s, bytes) else str(s).encode("utf-8") for s in value.reshape(-1).tolist()
        )
    else:
        tensor.dtype = dtype_code(value.dtype, name=name)
        little = value.dtype.newbyteorder("<")
        tensor.tensor_content = np.ascontiguousarray(value, dtype=little).tobytes()
    plugins = item.metadata.plugin_data
    plugins.add(plugin_name=proto.MODE_STEP_PLUGIN, content=str(mode_step).encode())
    plugins.add(plugin_name=proto.MODE_PLUGIN, content=str(int(mode)).encode())
    data: bytes = event.SerializeToString()
    return data


@dataclass(frozen=True)
class DecodedValue:
    """One tensor of a decoded record: mode and mode step as its plugin entries say (smdebug's defaults: GLOBAL,
    and the event's step, when an entry is absent)."""

    name: str
    step: int
    wall_time: float
    mode: ModeKeys
    mode_step: int
    tensor: Any  # the TensorProto; ``value()`` decodes it

    def value(self) -> np.ndarray:
        """The tensor's value (raises UnknownDtypeError or DataError)."""
        return tensor_value(self.tensor, name=self.name)


def decode_event(payload: bytes) -> list[DecodedValue]:
    """The tensors of one record (none for a record without a summary, e.g. a file-version header).

    Raises:
        DataError: when the payload is not an Event, or a plugin entry is not a number.
    """
    try:
        event = proto.Event.FromString(payload)
    except Exception as exc:  # protobuf's DecodeError; the message names nothing useful
        raise DataError(f"record is not a TensorFlow Event ({exc})") from None
    out: list[DecodedValue] = []
    if not event.HasField("summary"):
        return out
    step = int(event.step)
    for item in event.summary.value:
        if not item.HasField("tensor"):
            continue
        mode, mode_step = ModeKeys.GLOBAL, step
        for plugin in item.metadata.plugin_data:
            try:
                if plugin.plugin_name == proto.MODE_STEP_PLUGIN:
                    mode_step = int(plugin.content)
                elif plugin.plugin_name == proto.MODE_PLUGIN:
                    mode = ModeKeys(int(plugin.content))
            except ValueError:
                raise DataError(
                    f"tensor {item.tag!r}: plugin entry {plugin.plugin_name!r} holds {plugin.content!r}, not a "
                    f"mode number"
                ) from None
        out.append(DecodedValue(item.tag, step, float(event.wall_time), mode, mode_step, item.tensor))
    return out
