"""Debugger's tensor output without smdebug: the format, a writer and a reader.

``from smx_debug import tensors as smd`` ports an smdebug notebook (``smd.create_trial(path)``, ``smd.modes``).
Names load lazily: the writer side (what a training hook imports) needs numpy, protobuf and google-crc32c only;
the reader side adds pandas. docs/tensors.md describes the format, both APIs and what is tolerated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smx_debug._lazy import lazy_getattr

__all__ = [
    "END_OF_JOB",
    "NORMS",
    "REDUCTIONS",
    "REDUCTIONS_PREFIX",
    "TENSOR_COLUMNS",
    "Collection",
    "CollectionsFile",
    "ModeKeys",
    "RawTensor",
    "ReductionConfig",
    "ReductionName",
    "SaveConfig",
    "SaveConfigMode",
    "Tensor",
    "TensorValues",
    "Trial",
    "TrialArrays",
    "TrialWriter",
    "compute_reduction",
    "create_trial",
    "modes",
    "parse_mode",
    "parse_reduction_name",
    "reduction_tensor_name",
]

_LAZY = {
    "END_OF_JOB": "smx_debug.tensors.layout",
    "NORMS": "smx_debug.tensors.reductions",
    "REDUCTIONS": "smx_debug.tensors.reductions",
    "REDUCTIONS_PREFIX": "smx_debug.tensors.reductions",
    "Collection": "smx_debug.tensors.collections_file",
    "CollectionsFile": "smx_debug.tensors.collections_file",
    "ModeKeys": "smx_debug.tensors.mode_keys",
    "RawTensor": "smx_debug.tensors.dtypes",
    "ReductionConfig": "smx_debug.tensors.collections_file",
    "ReductionName": "smx_debug.tensors.reductions",
    "SaveConfig": "smx_debug.tensors.collections_file",
    "SaveConfigMode": "smx_debug.tensors.collections_file",
    "TENSOR_COLUMNS": "smx_debug.tensors.frame",
    "Tensor": "smx_debug.tensors.trial",
    "TensorValues": "smx_debug.tensors.arrays",
    "TrialArrays": "smx_debug.tensors.arrays",
    "Trial": "smx_debug.tensors.trial",
    "TrialWriter": "smx_debug.tensors.writer",
    "create_trial": "smx_debug.tensors.trial",
    "compute_reduction": "smx_debug.tensors.reductions",
    "modes": "smx_debug.tensors.mode_keys",
    "parse_mode": "smx_debug.tensors.mode_keys",
    "parse_reduction_name": "smx_debug.tensors.reductions",
    "reduction_tensor_name": "smx_debug.tensors.reductions",
}

if TYPE_CHECKING:
    from smx_debug.tensors.arrays import TensorValues, TrialArrays
    from smx_debug.tensors.collections_file import (
        Collection,
        CollectionsFile,
        ReductionConfig,
        SaveConfig,
        SaveConfigMode,
    )
    from smx_debug.tensors.dtypes import RawTensor
    from smx_debug.tensors.frame import TENSOR_COLUMNS
    from smx_debug.tensors.layout import END_OF_JOB
    from smx_debug.tensors.mode_keys import ModeKeys, modes, parse_mode
    from smx_debug.tensors.reductions import (
        NORMS,
        REDUCTIONS,
        REDUCTIONS_PREFIX,
        ReductionName,
        compute_reduction,
        parse_reduction_name,
        reduction_tensor_name,
    )
    from smx_debug.tensors.trial import Tensor, Trial, create_trial
    from smx_debug.tensors.writer import TrialWriter


__getattr__ = lazy_getattr(__name__, _LAZY)
