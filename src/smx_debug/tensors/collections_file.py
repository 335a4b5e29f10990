"""The collections file, ``collections/000000000/<worker>_collections.json``, in smdebug's ``CollectionManager``
JSON (1.0.34's ``to_json_dict``)::

    {"collections": {"<name>": {"name", "include_regex": [...], "tensor_names": [...],
                                "reduction_config": {"save_raw_tensor", "reductions": "mean,abs_max,l2_norm",
                                                     "save_shape"} | null,
                                "save_config": {"TRAIN": {"save_interval", "save_steps", "start_step",
                                                          "end_step"}, "EVAL": ..., "PREDICT": ..., "GLOBAL": ...}
                                               | null,
                                "save_histogram": bool}},
     "_meta": {"num_workers": n}}

Reading keeps only these keys (files from older smdebug versions lack ``save_shape``); a file that is not this
JSON raises DataError naming the field and value.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import StrictBool, StrictStr, ValidationError, field_validator

from smx_debug import _json
from smx_debug.config.base import FrozenModel, NonNegativeInt, PositiveInt, Regex, to_config_error
from smx_debug.errors import ConfigError, DataError
from smx_debug.tensors.reductions import NORMS, REDUCTIONS

_MODES = ("TRAIN", "EVAL", "PREDICT", "GLOBAL")


def _reduction_names() -> frozenset[str]:
    names = set(REDUCTIONS) | {f"{n}_norm" for n in NORMS}
    return frozenset(names | {f"abs_{n}" for n in names})


_REDUCTION_NAMES = _reduction_names()


class SaveConfigMode(FrozenModel):
    """When one mode saves: every ``save_interval`` mode steps from ``start_step`` (before ``end_step``), and at
    ``save_steps``. Defaults are smdebug's."""

    save_interval: PositiveInt = 500
    save_steps: tuple[NonNegativeInt, ...] = ()
    start_step: NonNegativeInt = 0
    end_step: NonNegativeInt | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return {"save_interval": self.save_interval, "save_steps": list(self.save_steps),
                "start_step": self.start_step, "end_step": self.end_step}


class SaveConfig(FrozenModel):
    """A :class:`SaveConfigMode` per mode (``None``: the hook's default for that mode)."""

    TRAIN: SaveConfigMode | None = None
    EVAL: SaveConfigMode | None = None
    PREDICT: SaveConfigMode | None = None
    GLOBAL: SaveConfigMode | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return {m: (c.to_json_dict() if c is not None else None) for m in _MODES
                for c in (getattr(self, m),)}


class ReductionConfig(FrozenModel):
    """Which reductions a collection saves (smdebug's names: ``mean``, ``abs_max``, ``l2_norm``, ``abs_l1_norm``),
    whether the raw tensor is saved too, and whether its shape is recorded in the index."""

    reductions: tuple[StrictStr, ...] = ()
    save_raw_tensor: StrictBool = False
    save_shape: StrictBool = False

    @field_validator("reductions")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if name not in _REDUCTION_NAMES:
                raise ValueError(f"unknown reduction {name!r}; known: {', '.join(sorted(_REDUCTION_NAMES))}")
        return value

    def to_json_dict(self) -> dict[str, Any]:
        return {"save_raw_tensor": self.save_raw_tensor, "reductions": ",".join(self.reductions),
                "save_shape": self.save_shape}


class Collection(FrozenModel):
    """A named group of tensors: exact ``tensor_names`` and ``include_regex`` patterns (``re.search``, as smdebug
    matches them), with how they are reduced and when they are saved."""

    name: StrictStr
    include_regex: tuple[Regex, ...] = ()
    tensor_names: tuple[StrictStr, ...] = ()
    reduction_config: ReductionConfig | None = None
    save_config: SaveConfig | None = None
    save_histogram: StrictBool = True

    def matches(self, tensor: str) -> bool:
        """Whether ``tensor`` belongs to this collection."""
        return tensor in self.tensor_names or any(re.search(p, tensor) for p in self.include_regex)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "include_regex": list(self.include_regex),
            "tensor_names": sorted(self.tensor_names),
            "reduction_config": self.reduction_config.to_json_dict() if self.reduction_config else None,
            "save_config": self.save_config.to_json_dict() if self.save_config else None,
            "save_histogram": self.save_histogram,
        }


class CollectionsFile(FrozenModel):
    """One worker's collections file: its collections (by name) and the number of workers of the job."""

    collections: tuple[Collection, ...] = ()
    num_workers: PositiveInt = 1

    def get(self, name: str) -> Collection | None:
        """The collection called ``name``, if any."""
        return next((c for c in self.collections if c.name == name), None)

    def to_json(self) -> str:
        """The file's text, as smdebug writes it."""
        return json.dumps({"collections": {c.name: c.to_json_dict() for c in self.collections},
                           "_meta": {"num_workers": self.num_workers}})

    @classmethod
    def from_json(cls, text: str | bytes, *, where: str = "collections file") -> CollectionsFile:
        """Parse a collections file.

        Raises:
            DataError: naming ``where``, the field and the value when the text is not a collections file.
        """
        try:
            doc = _json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise DataError(f"{where}: not JSON ({exc})") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("collections"), dict):
            raise DataError(f"{where}: expected an object with a 'collections' object, got {str(doc)[:80]!r}")
        meta = doc.get("_meta") or {}
        try:
            return cls.model_validate({
                "collections": tuple(_collection(name, body) for name, body in doc["collections"].items()),
                "num_workers": meta.get("num_workers", 1) if isinstance(meta, dict) else meta,
            })
        except ValidationError as exc:
            raise DataError(f"{where}: {to_config_error(exc)}") from None
        except ConfigError as exc:
            raise DataError(f"{where}: {exc}") from None


def _collection(name: str, body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ConfigError(f"collections.{name}: expected an object, got {body!r}", field=f"collections.{name}",
                          value=body)
    out: dict[str, Any] = {"name": body.get("name", name)}
    for key in ("include_regex", "tensor_names"):
        if body.get(key) is not None:
            out[key] = tuple(body[key]) if isinstance(body[key], list) else body[key]
    if "save_histogram" in body:
        out["save_histogram"] = body["save_histogram"]
    red = body.get("reduction_config")
    if isinstance(red, dict):
        names = red.get("reductions", "")
        out["reduction_config"] = {
            "reductions": tuple(x.strip() for x in names.split(",") if x.strip()) if isinstance(names, str)
            else names,
            "save_raw_tensor": red.get("save_raw_tensor", False),
            "save_shape": red.get("save_shape", False),
        }
    elif red is not None:
        out["reduction_config"] = red
    save = body.get("save_config")
    if isinstance(save, dict):
        out["save_config"] = {
            mode: ({k: (tuple(v) if isinstance(v, list) else v) for k, v in cfg.items()
                    if k in ("save_interval", "save_steps", "start_step", "end_step") and v is not None}
                   if isinstance(cfg, dict) else cfg)
            for mode, cfg in save.items()
        }
    elif save is not None:
        out["save_config"] = save
    return out
