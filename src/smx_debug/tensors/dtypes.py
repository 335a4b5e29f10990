"""TensorProto dtypes <-> numpy, for every dtype Debugger's files hold, and the raw form of bfloat16.

Numbers are TensorFlow's ``DataType`` enum. smdebug 1.0.34 writes int8, int16, uint16, uint32, uint64 and
complex64 but cannot read them back (and reads DT_INT8 as uint8); here each reads as itself. Strings are written as
smdebug writes them (``dtype`` left 0, ``string_val`` per element; its reader accepts nothing else) and read in
both forms (0 or ``DT_STRING``).

bfloat16 has no numpy dtype. A hook passes it as :class:`RawTensor` (the 16-bit patterns, e.g.
``t.view(torch.int16).numpy()``); it is written as ``DT_FLOAT`` holding the exact float32 widening (every bfloat16
is a float32 with the low 16 bits zero), which smdebug and we both read as float32 with the same value. A
``DT_BFLOAT16`` record written by another tool (2 bytes per element) is read as float32 the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np

from smx_debug.errors import ConfigError, DataError, UnknownDtypeError

DT_INVALID: Final = 0
DT_STRING: Final = 7
DT_BFLOAT16: Final = 14
DT_HALF: Final = 19
MAX_NDIM: Final = 64  # numpy's limit (NPY_MAXDIMS)

# DataType number -> numpy dtype (little-endian, as the bytes are written). Quantized types read as their storage.
NUMPY_DTYPES: Final[dict[int, np.dtype[Any]]] = {code: np.dtype(spec) for code, spec in {
    1: "<f4", 2: "<f8", 3: "<i4", 4: "u1", 5: "<i2", 6: "i1",  # FLOAT DOUBLE INT32 UINT8 INT16 INT8 (smdebug: uint8)
    8: "<c8", 9: "<i8", 10: "?", 11: "i1", 12: "u1", 13: "<i4",  # COMPLEX64 INT64 BOOL QINT8 QUINT8 QINT32
    15: "<i2", 16: "<u2", 17: "<u2", 18: "<c16", 19: "<f2",  # QINT16 QUINT16 UINT16 COMPLEX128 HALF
    22: "<u4", 23: "<u8",  # UINT32 UINT64
}.items()}
# numpy kind+size -> the DataType we write (the first of the table for each numpy type).
_WRITE_CODES: Final[dict[str, int]] = {
    "f4": 1, "f8": 2, "i4": 3, "u1": 4, "i2": 5, "i1": 6, "c8": 8, "i8": 9, "b1": 10, "u2": 17, "c16": 18,
    "f2": 19, "u4": 22, "u8": 23,
}
# Which repeated field holds a dtype's values when a writer used typed fields instead of tensor_content.
_VAL_FIELDS: Final[dict[int, str]] = {
    1: "float_val", 2: "double_val", 3: "int_val", 4: "int_val", 5: "int_val", 6: "int_val", 8: "scomplex_val",
    9: "int64_val", 10: "bool_val", 11: "int_val", 12: "int_val", 13: "int_val", 15: "int_val", 16: "int_val",
    17: "int_val", 18: "dcomplex_val", 19: "half_val", 22: "uint32_val", 23: "uint64_val", 14: "half_val",
}


@dataclass(frozen=True)
class RawTensor:
    """A tensor of a dtype numpy lacks, as its raw bit patterns: today ``bfloat16`` as a uint16/int16 array.

    >>> RawTensor("bfloat16", np.array([0x3F80], dtype=np.uint16)).to_numpy()
    array([1.], dtype=float32)
    """

    dtype: Literal["bfloat16"]
    bits: np.ndarray

    def __post_init__(self) -> None:
        if self.dtype != "bfloat16":
            raise ConfigError(f"RawTensor.dtype must be 'bfloat16', got {self.dtype!r}", field="dtype",
                              value=self.dtype)
        if not isinstance(self.bits, np.ndarray) or self.bits.dtype.itemsize != 2 or self.bits.dtype.kind not in "iu":
            got = getattr(self.bits, "dtype", type(self.bits).__name__)
            raise ConfigError(f"RawTensor.bits must be a numpy int16 or uint16 array, got {got}", field="bits",
                              value=got)

    def to_numpy(self) -> np.ndarray:
        """The exact float32 values."""
        return _bf16_to_f32(self.bits.view(np.uint16))


def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def as_array(value: object, *, name: str = "value") -> np.ndarray:
    """A value as smdebug's writer would hold it: arrays as they are (bfloat16 widened), scalars and strings as
    1-element arrays (``make_numpy_array``), lists and tuples through ``np.asarray``.

    Raises:
        ConfigError: naming the tensor for a value of no supported type or dtype.
    """
    if isinstance(value, RawTensor):
        return value.to_numpy()
    if isinstance(value, np.ndarray):
        arr = value
    elif isinstance(value, bool | int | float | complex | str | bytes | np.generic):
        arr = np.array([value])
    elif isinstance(value, list | tuple):
        arr = np.asarray(value)
    else:
        raise ConfigError(
            f"tensor {name!r}: a value must be a numpy array, a Python or numpy scalar, a string or a RawTensor, "
            f"got {type(value).__name__}", field=name, value=type(value).__name__,
        )
    if arr.dtype.kind in "USO":
        return arr
    dtype_code(arr.dtype, name=name)
    return arr


def dtype_code(dtype: np.dtype[Any], *, name: str = "value") -> int:
    """The DataType number written for a numpy dtype (strings: 0, as smdebug writes them)."""
    if dtype.kind in "USO":
        return DT_INVALID
    code = _WRITE_CODES.get(f"{dtype.kind}{dtype.itemsize}")
    if code is None or dtype.kind not in "fiubc" or dtype.fields is not None:
        raise ConfigError(
            f"tensor {name!r}: dtype {dtype} cannot be written (supported: float16/32/64, int8/16/32/64, "
            f"uint8/16/32/64, bool, complex64/128, strings, RawTensor('bfloat16'))", field=name, value=str(dtype),
        )
    return code


def tensor_value(tensor: Any, *, name: str = "") -> np.ndarray:
    """The numpy value of a decoded TensorProto (a fresh, writable array).

    Raises:
        UnknownDtypeError: for a dtype with no numpy form.
        DataError: when the bytes do not fill the shape.
    """
    shape = tuple(int(d.size) for d in tensor.tensor_shape.dim)
    if len(shape) > MAX_NDIM:
        raise DataError(f"tensor {name!r}: {len(shape)} dims, more than numpy's {MAX_NDIM}")
    if any(d < 0 for d in shape):
        raise DataError(f"tensor {name!r}: shape {list(shape)} has a negative dim")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    code = int(tensor.dtype)
    if code in (DT_INVALID, DT_STRING):
        if code == DT_INVALID and not tensor.string_val and count:
            raise UnknownDtypeError(code, tensor=name)
        strings = [s.decode("utf-8", "replace") for s in tensor.string_val]
        return _fill(np.array(strings, dtype=str) if strings else np.array([], dtype=str), shape, count, name)
    content = tensor.tensor_content
    if code == DT_BFLOAT16:
        if content:
            return _reshape(_bf16_to_f32(np.frombuffer(content, "<u2")), shape, count, name)
        return _fill(_bf16_to_f32(np.asarray(tensor.half_val, np.int32).astype(np.uint16)), shape, count, name)
    dtype = NUMPY_DTYPES.get(code)
    if dtype is None:
        raise UnknownDtypeError(code, tensor=name)
    if content:
        if len(content) % dtype.itemsize:
            raise DataError(f"tensor {name!r}: {len(content)} content bytes are not whole {dtype} elements")
        return _reshape(np.frombuffer(content, dtype).astype(dtype.newbyteorder("="), copy=True), shape, count, name)
    vals: Any = getattr(tensor, _VAL_FIELDS[code])
    if code == DT_HALF:
        arr = np.asarray(vals, np.int32).astype(np.uint16).view(np.float16)
    elif dtype.kind == "c":
        pairs = np.asarray(vals, np.float32 if code == 8 else np.float64)
        if pairs.size % 2:
            raise DataError(f"tensor {name!r}: {pairs.size} complex parts are not (real, imaginary) pairs")
        arr = np.empty(pairs.size // 2, dtype.newbyteorder("="))
        arr.real, arr.imag = pairs[0::2], pairs[1::2]
    else:
        arr = np.asarray(vals).astype(dtype.newbyteorder("="))
    return _fill(arr, shape, count, name)


def _reshape(arr: np.ndarray, shape: tuple[int, ...], count: int, name: str) -> np.ndarray:
    if arr.size != count:
        raise DataError(f"tensor {name!r}: {arr.size} elements do not fill shape {list(shape)}")
    return arr.reshape(shape)


def _fill(arr: np.ndarray, shape: tuple[int, ...], count: int, name: str) -> np.ndarray:
    # TensorFlow's rule for typed value fields: none means zeros, one value fills the whole tensor.
    if arr.size == count:
        return arr.reshape(shape)
    if arr.size == 1:
        return np.full(shape, arr[0], dtype=arr.dtype)
    if arr.size == 0:
        return np.zeros(shape, dtype=arr.dtype)
    raise DataError(f"tensor {name!r}: {arr.size} elements do not fill shape {list(shape)}")
