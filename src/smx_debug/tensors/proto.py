"""The protobuf schema of Debugger's event files, built at import time from ``descriptor_pb2``.

These are the parts of TensorFlow's ``Event``, ``Summary``, ``SummaryMetadata``, ``TensorProto`` and
``TensorShapeProto`` that Debugger uses, with their field numbers, in a private descriptor pool (so nothing
clashes with TensorBoard's or TensorFlow's protos if they are loaded too). One deliberate difference from
TensorBoard's compiled protos: ``SummaryMetadata.plugin_data`` is REPEATED, as in smdebug's own ``summary.proto``,
so both entries a Debugger record carries - ``{"mode_step": n}`` and ``{"mode": m}`` - survive; TensorBoard
declares it singular and keeps only the last. ``PluginData.content`` is ``bytes`` (TensorFlow's type; smdebug
declares ``string``, same wire format), so odd bytes never fail a parse. Decoding is done by the maintained
``protobuf`` package (upb).
"""

from __future__ import annotations

import re
from typing import Any, Final

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

MODE_STEP_PLUGIN: Final = "mode_step"
MODE_PLUGIN: Final = "mode"

_F = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "smx_debug.tfevent"


# The messages in .proto syntax (proto3; ``repeated`` marks a list). TensorProto.dtype is TensorFlow's DataType
# enum, kept as its number.
_SCHEMA = """
Event { double wall_time = 1; int64 step = 2; string file_version = 3; bytes graph_def = 4; Summary summary = 5; }
Summary { repeated SummaryValue value = 1; }
SummaryValue { string tag = 1; float simple_value = 2; string node_name = 7; TensorProto tensor = 8;
               SummaryMetadata metadata = 9; }
SummaryMetadata { repeated PluginData plugin_data = 1; }
PluginData { string plugin_name = 1; bytes content = 2; }
TensorProto { int32 dtype = 1; TensorShapeProto tensor_shape = 2; int32 version_number = 3; bytes tensor_content = 4;
              repeated float float_val = 5; repeated double double_val = 6; repeated int32 int_val = 7;
              repeated bytes string_val = 8; repeated float scomplex_val = 9; repeated int64 int64_val = 10;
              repeated bool bool_val = 11; repeated double dcomplex_val = 12; repeated int32 half_val = 13;
              repeated uint32 uint32_val = 16; repeated uint64 uint64_val = 17; }
TensorShapeProto { repeated TensorShapeDim dim = 2; bool unknown_rank = 3; }
TensorShapeDim { int64 size = 1; string name = 2; }
"""
_MESSAGE = re.compile(r"(\w+)\s*\{([^}]*)\}")
_FIELD = re.compile(r"(repeated\s+)?(\w+)\s+(\w+)\s*=\s*(\d+)")


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="smx_debug/tfevent.proto", package=_PACKAGE, syntax="proto3")
    for name, body in _MESSAGE.findall(_SCHEMA):
        msg = fd.message_type.add(name=name)
        for repeated, ftype, fname, number in _FIELD.findall(body):
            label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
            scalar = getattr(_F, f"TYPE_{ftype.upper()}", None)
            f = msg.field.add(name=fname, number=int(number), label=label, type=scalar or _F.TYPE_MESSAGE)
            if scalar is None:
                f.type_name = f".{_PACKAGE}.{ftype}"
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())


def _cls(name: str) -> Any:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.{name}"))


Event: Any = _cls("Event")
Summary: Any = _cls("Summary")
SummaryValue: Any = _cls("SummaryValue")
SummaryMetadata: Any = _cls("SummaryMetadata")
PluginData: Any = _cls("PluginData")
TensorProto: Any = _cls("TensorProto")
TensorShapeProto: Any = _cls("TensorShapeProto")
