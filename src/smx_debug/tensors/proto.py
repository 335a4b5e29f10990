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

from typing import Any, Final

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

MODE_STEP_PLUGIN: Final = "mode_step"
MODE_PLUGIN: Final = "mode"

_F = descriptor_pb2.FieldDescriptorProto
_OPT, _REP = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_PACKAGE = "smx_debug.tfevent"


def _message(name: str, *fields: tuple[str, int, int, int, str]) -> descriptor_pb2.DescriptorProto:
    msg = descriptor_pb2.DescriptorProto(name=name)
    for fname, number, label, ftype, type_name in fields:
        f = msg.field.add(name=fname, number=number, label=label, type=ftype)
        if type_name:
            f.type_name = f".{_PACKAGE}.{type_name}"
    return msg


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="smx_debug/tfevent.proto", package=_PACKAGE, syntax="proto3")
    fd.message_type.extend([
        _message("Event",
                 ("wall_time", 1, _OPT, _F.TYPE_DOUBLE, ""),
                 ("step", 2, _OPT, _F.TYPE_INT64, ""),
                 ("file_version", 3, _OPT, _F.TYPE_STRING, ""),
                 ("graph_def", 4, _OPT, _F.TYPE_BYTES, ""),
                 ("summary", 5, _OPT, _F.TYPE_MESSAGE, "Summary")),
        _message("Summary", ("value", 1, _REP, _F.TYPE_MESSAGE, "SummaryValue")),
        _message("SummaryValue",
                 ("tag", 1, _OPT, _F.TYPE_STRING, ""),
                 ("simple_value", 2, _OPT, _F.TYPE_FLOAT, ""),
                 ("node_name", 7, _OPT, _F.TYPE_STRING, ""),
                 ("tensor", 8, _OPT, _F.TYPE_MESSAGE, "TensorProto"),
                 ("metadata", 9, _OPT, _F.TYPE_MESSAGE, "SummaryMetadata")),
        _message("SummaryMetadata", ("plugin_data", 1, _REP, _F.TYPE_MESSAGE, "PluginData")),
        _message("PluginData",
                 ("plugin_name", 1, _OPT, _F.TYPE_STRING, ""),
                 ("content", 2, _OPT, _F.TYPE_BYTES, "")),
        _message("TensorProto",
                 ("dtype", 1, _OPT, _F.TYPE_INT32, ""),  # TensorFlow's DataType enum, kept as its number
                 ("tensor_shape", 2, _OPT, _F.TYPE_MESSAGE, "TensorShapeProto"),
                 ("version_number", 3, _OPT, _F.TYPE_INT32, ""),
                 ("tensor_content", 4, _OPT, _F.TYPE_BYTES, ""),
                 ("float_val", 5, _REP, _F.TYPE_FLOAT, ""),
                 ("double_val", 6, _REP, _F.TYPE_DOUBLE, ""),
                 ("int_val", 7, _REP, _F.TYPE_INT32, ""),
                 ("string_val", 8, _REP, _F.TYPE_BYTES, ""),
                 ("scomplex_val", 9, _REP, _F.TYPE_FLOAT, ""),
                 ("int64_val", 10, _REP, _F.TYPE_INT64, ""),
                 ("bool_val", 11, _REP, _F.TYPE_BOOL, ""),
                 ("dcomplex_val", 12, _REP, _F.TYPE_DOUBLE, ""),
                 ("half_val", 13, _REP, _F.TYPE_INT32, ""),
                 ("uint32_val", 16, _REP, _F.TYPE_UINT32, ""),
                 ("uint64_val", 17, _REP, _F.TYPE_UINT64, "")),
        _message("TensorShapeProto",
                 ("dim", 2, _REP, _F.TYPE_MESSAGE, "TensorShapeDim"),
                 ("unknown_rank", 3, _OPT, _F.TYPE_BOOL, "")),
        _message("TensorShapeDim",
                 ("size", 1, _OPT, _F.TYPE_INT64, ""),
                 ("name", 2, _OPT, _F.TYPE_STRING, "")),
    ])
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
