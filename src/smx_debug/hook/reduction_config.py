"""Which reductions of a tensor are saved instead of (or beside) its values: smdebug's ``ReductionConfig``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import StrictBool

from smx_debug.config.base import FrozenModel
from smx_debug.errors import ConfigError
from smx_debug.tensors import collections_file
from smx_debug.tensors.reductions import NORMS, REDUCTIONS

# smx_debug.tensors.reductions' REDUCTIONS and NORMS, as types
Reduction = Literal["min", "max", "mean", "std", "variance", "sum", "prod"]
Norm = Literal["l1", "l2"]


class ReductionConfig(FrozenModel):
    """Reductions computed in the training process and saved as scalars; the raw tensor only if asked.

    Example:
        >>> ReductionConfig(reductions=["mean"], abs_norms=["l2"]).names()
        [('mean', False), ('l2', True)]
    """

    reductions: tuple[Reduction, ...] = ()
    abs_reductions: tuple[Reduction, ...] = ()
    norms: tuple[Norm, ...] = ()
    abs_norms: tuple[Norm, ...] = ()
    save_raw_tensor: StrictBool = False
    save_shape: StrictBool = False

    def __init__(
        self,
        reductions: Iterable[str] | None = None,
        abs_reductions: Iterable[str] | None = None,
        norms: Iterable[str] | None = None,
        abs_norms: Iterable[str] | None = None,
        save_raw_tensor: bool = False,
        save_shape: bool = False,
    ) -> None:
        lists: dict[str, Any] = {"reductions": reductions, "abs_reductions": abs_reductions, "norms": norms,
                                 "abs_norms": abs_norms}
        data: dict[str, Any] = {k: tuple(v) for k, v in lists.items() if v is not None}
        super().__init__(**data, save_raw_tensor=save_raw_tensor, save_shape=save_shape)

    @classmethod
    def from_string(cls, reductions: str, *, save_raw_tensor: bool = False, save_shape: bool = False,
                    field: str = "reductions") -> ReductionConfig:
        """Parse Debugger's comma-separated form: ``min,abs_max,l1_norm,abs_l2_norm`` (``l1``/``l2`` as norms).

        An unknown name raises ConfigError naming ``field`` and the value.
        """
        parts: dict[str, list[str]] = {"reductions": [], "abs_reductions": [], "norms": [], "abs_norms": []}
        for raw in reductions.split(","):
            token = raw.strip()
            if not token:
                continue
            absolute = token.startswith("abs_")
            name = token[4:] if absolute else token
            name = name.removesuffix("_norm")
            if name in NORMS:
                parts["abs_norms" if absolute else "norms"].append(name)
            elif name in REDUCTIONS:
                parts["abs_reductions" if absolute else "reductions"].append(name)
            else:
                known = ", ".join([*REDUCTIONS, "l1_norm", "l2_norm"])
                raise ConfigError(f"{field}: unknown reduction {token!r} (known: {known}, each also as abs_<name>)",
                                  field=field, value=token)
        return cls(**parts, save_raw_tensor=save_raw_tensor, save_shape=save_shape)

    def names(self) -> list[tuple[str, bool]]:
        """Every (reduction, absolute) pair to compute, in smdebug's order, without repeats."""
        out: list[tuple[str, bool]] = []
        for group, absolute in ((self.reductions, False), (self.norms, False), (self.abs_reductions, True),
                                (self.abs_norms, True)):
            for name in group:
                if (name, absolute) not in out:
                    out.append((name, absolute))
        return out

    def file_model(self) -> collections_file.ReductionConfig:
        """The collections file's form (smdebug's tokens: ``mean``, ``l2_norm``, ``abs_max``, ``abs_l1_norm``)."""
        tokens = [*self.reductions, *(f"{n}_norm" for n in self.norms), *(f"abs_{r}" for r in self.abs_reductions),
                  *(f"abs_{n}_norm" for n in self.abs_norms)]
        return collections_file.ReductionConfig(reductions=tuple(tokens), save_raw_tensor=self.save_raw_tensor,
                                                save_shape=self.save_shape)
