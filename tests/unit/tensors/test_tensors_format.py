"""The format's low layers: layout, TFRecord framing, the Event codec, dtypes, reductions, modes, collections."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from smx_debug.errors import ConfigError, DataError, UnknownDtypeError
from smx_debug.tensors import layout, proto
from smx_debug.tensors.codec import decode_event, encode_event
from smx_debug.tensors.collections_file import CollectionsFile, ReductionConfig
from smx_debug.tensors.dtypes import RawTensor, as_array, tensor_value
from smx_debug.tensors.mode_keys import ModeKeys, parse_mode
from smx_debug.tensors.reductions import compute_reduction, parse_reduction_name, reduction_tensor_name
from smx_debug.tensors.tfrecord import (
    BAD_CHECKSUM,
    BAD_HEADER,
    SMDEBUG_FOOTER,
    TRUNCATED,
    frame,
    masked_crc32c,
    split_records,
)

REAL = Path(__file__).parents[2] / "data/third_party/awslabs+sagemaker-debugger/newlogsRunTest1/test_hook_from_json_config"
REAL_EVENT = REAL / "events/000000000000/000000000000_worker_0.tfevents"


def test_layout_keys_match_smdebug_names() -> None:
    assert layout.event_key(12, "worker_0") == "events/000000000012/000000000012_worker_0.tfevents"
    assert layout.index_key(1234, "worker_1") == "index/000000001/000000001234_worker_1.json"
    assert layout.collections_key("worker_0") == "collections/000000000/worker_0_collections.json"
    assert layout.parse_event_key("events/000000000012/000000000012_worker_0.tfevents") == (12, "worker_0")
    assert layout.parse_index_key("index/000000001/000000001234_worker_1.json") == (1234, "worker_1")
    assert layout.parse_collections_key("collections/000000000/worker_0_collections.json") == "worker_0"
    assert layout.parse_event_key("events/000000000012/000000000012_worker_0.tfevents.tmp") is None


@pytest.mark.parametrize("worker", ["", "a/b", "w 1", 3])
def test_layout_bad_worker_raises_config_error_naming_it(worker: object) -> None:
    with pytest.raises(ConfigError, match="worker") as info:
        layout.event_key(0, worker)  # type: ignore[arg-type]
    assert info.value.field == "worker" and info.value.value == worker


def test_tfrecord_footer_is_smdebugs_constant_unless_checksum_asked() -> None:
    rec = frame(b"abc")
    assert int.from_bytes(rec[-4:], "little") == SMDEBUG_FOOTER
    assert int.from_bytes(frame(b"abc", checksum=True)[-4:], "little") == masked_crc32c(b"abc")
    # The real smdebug file carries the constant footer.
    assert int.from_bytes(REAL_EVENT.read_bytes()[-4:], "little") == SMDEBUG_FOOTER


def test_tfrecord_cut_mid_write_keeps_whole_records_and_counts_the_cut() -> None:
    data = frame(b"one") + frame(b"two") + frame(b"three")[:9]
    recs = split_records(data)
    assert [data[a:b] for a, b in recs.spans] == [b"one", b"two"]
    assert recs.skipped == {TRUNCATED: 1}


def test_tfrecord_damaged_header_is_skipped_and_the_next_record_found() -> None:
    first = bytearray(frame(b"damaged"))
    first[3] ^= 0xFF  # the length no longer matches its checksum
    data = bytes(first) + frame(b"kept")
    recs = split_records(data)
    assert [data[a:b] for a, b in recs.spans] == [b"kept"]
    assert recs.skipped == {BAD_HEADER: 1}


def test_tfrecord_verify_rejects_wrong_checksum_and_accepts_both_good_footers() -> None:
    bad = bytearray(frame(b"payload", checksum=True))
    bad[-1] ^= 0x01
    data = frame(b"smdebug") + frame(b"real", checksum=True) + bytes(bad)
    assert len(split_records(data).spans) == 3  # not verified: every footer accepted
    recs = split_records(data, verify=True)
    assert [data[a:b] for a, b in recs.spans] == [b"smdebug", b"real"]
    assert recs.skipped == {BAD_CHECKSUM: 1}


def test_codec_writes_the_real_smdebug_record_byte_for_byte() -> None:
    data = REAL_EVENT.read_bytes()
    [value] = decode_event(data[12:-4])
    assert (value.name, value.mode, value.mode_step, value.step) == ("loss/mul:0", ModeKeys.GLOBAL, 0, 0)
    ours = frame(encode_event(value.name, value.value(), step=0, mode=ModeKeys.GLOBAL, mode_step=0,
                              wall_time=value.wall_time))
    assert ours == data


def test_codec_keeps_both_plugin_entries() -> None:
    payload = encode_event("x", np.float32([1]), step=7, mode=ModeKeys.EVAL, mode_step=3, wall_time=1.0)
    [value] = decode_event(payload)
    assert (value.step, value.mode, value.mode_step) == (7, ModeKeys.EVAL, 3)
    names = [p.plugin_name for p in proto.Event.FromString(payload).summary.value[0].metadata.plugin_data]
    assert names == ["mode_step", "mode"]


def test_codec_garbage_payload_raises_data_error() -> None:
    with pytest.raises(DataError, match="not a TensorFlow Event"):
        decode_event(b"\xff\xff\xff\xff")


@pytest.mark.parametrize(
    "dtype",
    ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "bool", "complex64", "complex128"],
)
def test_dtypes_every_numpy_dtype_round_trips_bit_for_bit(dtype: str) -> None:
    value = (np.arange(-3, 3).reshape(2, 3) * 7).astype(dtype)
    [decoded] = decode_event(encode_event("t", value, step=1, mode=ModeKeys.TRAIN, mode_step=1, wall_time=0.0))
    out = decoded.value()
    assert out.dtype == value.dtype and out.shape == (2, 3)
    assert out.tobytes() == value.tobytes()


def test_dtypes_bfloat16_is_written_as_exact_float32() -> None:
    bits = np.array([0x3F80, 0xC000, 0x7F80, 0x0001], dtype=np.uint16)  # 1, -2, inf, the smallest subnormal
    value = as_array(RawTensor("bfloat16", bits))
    assert value.dtype == np.float32
    assert value[:3].tolist() == [1.0, -2.0, np.inf] and value[3] == np.float32(9.183549615799121e-41)
    assert (value.view(np.uint32) & 0xFFFF == 0).all()


def test_dtypes_strings_are_written_as_smdebug_writes_them() -> None:
    payload = encode_event("s", np.array(["a", "bc"]), step=0, mode=ModeKeys.GLOBAL, mode_step=0, wall_time=0.0)
    tensor = proto.Event.FromString(payload).summary.value[0].tensor
    assert tensor.dtype == 0 and list(tensor.string_val) == [b"a", b"bc"]
    assert tensor_value(tensor).tolist() == ["a", "bc"]


def test_dtypes_typed_value_fields_are_read_with_tensorflows_fill_rule() -> None:
    t = proto.TensorProto(dtype=1)
    t.tensor_shape.dim.add(size=3)
    t.float_val.append(2.5)
    assert tensor_value(t).tolist() == [2.5, 2.5, 2.5]
    half = proto.TensorProto(dtype=19, half_val=[int(np.float16(1.5).view(np.uint16))])
    assert tensor_value(half).tolist() == 1.5


@pytest.mark.parametrize("code", [20, 21, 24, 99])
def test_dtypes_unknown_dtype_raises_unknown_dtype_error_naming_code_and_tensor(code: int) -> None:
    t = proto.TensorProto(dtype=code, tensor_content=b"\x00\x00")
    with pytest.raises(UnknownDtypeError, match=f"dtype {code} of tensor 'g'") as info:
        tensor_value(t, name="g")
    assert info.value.code == code


@pytest.mark.parametrize("value", [np.array([1, 2], dtype=np.float128) if hasattr(np, "float128") else object(),
                                   {"a": 1}, np.array([(1, 2)], dtype=[("a", "i4"), ("b", "i4")])])
def test_dtypes_unsupported_value_raises_config_error_naming_tensor(value: object) -> None:
    with pytest.raises(ConfigError, match="tensor 'w'"):
        as_array(value, name="w")


def test_dtypes_raw_tensor_needs_16_bit_patterns() -> None:
    with pytest.raises(ConfigError, match="int16 or uint16"):
        RawTensor("bfloat16", np.zeros(2, np.float32))


def test_reductions_names_match_smdebug() -> None:
    assert reduction_tensor_name("fc1.weight:0", "mean") == "smdebug/reductions/mean/fc1.weight"
    assert reduction_tensor_name("gradient/x:1", "l2", abs=True) == "smdebug/reductions/abs_l2/gradient/x"
    assert parse_reduction_name("smdebug/reductions/abs_l2/gradient/x") == ("gradient/x", "l2", True)
    assert parse_reduction_name("smdebug/reductions/median/x") is None
    assert parse_reduction_name("loss") is None
    with pytest.raises(ConfigError, match="reduction must be one of"):
        reduction_tensor_name("x", "median")


def test_reductions_computed_as_smdebug_computes_them() -> None:
    v = np.array([[-3.0, 4.0]])
    assert compute_reduction(v, "l2") == 5.0 and compute_reduction(v, "l1") == 7.0
    assert compute_reduction(v, "min", abs=True) == 3.0 and compute_reduction(v, "variance") == 12.25


@pytest.mark.parametrize(("value", "mode"), [("train", ModeKeys.TRAIN), ("ModeKeys.EVAL", ModeKeys.EVAL),
                                             (3, ModeKeys.PREDICT), (ModeKeys.GLOBAL, ModeKeys.GLOBAL)])
def test_modes_parse_names_numbers_and_members(value: object, mode: ModeKeys) -> None:
    assert parse_mode(value) is mode


@pytest.mark.parametrize("value", ["training", 0, 5, True, None])
def test_modes_bad_mode_raises_config_error_naming_value(value: object) -> None:
    with pytest.raises(ConfigError, match="mode must be one of") as info:
        parse_mode(value)
    assert info.value.value == value


def test_collections_real_file_round_trips_as_smdebug_writes_it() -> None:
    text = (REAL / "collections/000000000/worker_0_collections.json").read_text()
    doc = CollectionsFile.from_json(text)
    assert json.loads(doc.to_json()) == json.loads(text)
    grads = doc.get("gradients")
    assert grads is not None and grads.save_config is not None and grads.save_config.TRAIN is not None
    assert grads.save_config.TRAIN.save_interval == 100


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "not JSON"),
    ('{"collections": []}', "'collections' object"),
    ('{"collections": {"w": {"reduction_config": {"reductions": "median"}}}}', "unknown reduction 'median'"),
    ('{"collections": {"w": {"include_regex": ["("]}}}', "invalid regular expression"),
])
def test_collections_bad_file_raises_data_error_naming_field(text: str, message: str) -> None:
    with pytest.raises(DataError, match=message):
        CollectionsFile.from_json(text, where="c.json")


def test_collections_unknown_reduction_in_code_raises_config_error() -> None:
    with pytest.raises(ConfigError, match="reductions"):
        ReductionConfig(reductions=("mean", "median"))
