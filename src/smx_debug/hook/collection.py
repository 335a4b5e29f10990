"""Collections: named groups of tensors with their own save and reduction configuration (smdebug's API).

A collection is hook state that scripts change in place (``hook.get_collection("weights").include(...)``), as
in smdebug, so it is a small mutable class whose setters check what they are given; the configuration it is
built from (SaveConfig, ReductionConfig) is frozen.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from smx_debug.errors import ConfigError, UnknownNameError
from smx_debug.hook.reduction_config import ReductionConfig
from smx_debug.hook.save_config import SaveConfig
from smx_debug.rules.catalog import list_rules
from smx_debug.rules.definitions import closest
from smx_debug.tensors import collections_file


class CollectionKeys:
    """The names of smdebug's collections (``smd.CollectionKeys``)."""

    DEFAULT = "default"
    ALL = "all"
    WEIGHTS = "weights"
    BIASES = "biases"
    GRADIENTS = "gradients"
    LOSSES = "losses"
    METRICS = "metrics"
    SM_METRICS = "sm_metrics"
    OPTIMIZER_VARIABLES = "optimizer_variables"


# smdebug.pytorch.collection.CollectionManager._register_default_collections
BUILTIN_REGEXES: dict[str, tuple[str, ...]] = {
    CollectionKeys.ALL: (),
    CollectionKeys.DEFAULT: (),
    CollectionKeys.WEIGHTS: ("^(?!gradient).*weight",),
    CollectionKeys.BIASES: ("^(?!gradient).*bias",),
    CollectionKeys.GRADIENTS: ("^gradient",),
    CollectionKeys.LOSSES: ("[Ll]oss_(?!input).*output",),
}
DEFAULT_COLLECTIONS = frozenset(BUILTIN_REGEXES)


def _rule_collections() -> dict[str, tuple[str, ...]]:
    """The collections the built-in rules read, from the rule catalog (its one owner): smdebug-rulesconfig's
    collections with a regex (DeadRelu's ``relu_output`` ``.*relu_output``, PoorWeightInitialization's
    ``relu_input``, CheckInputImages' ``input_image``, NLPSequenceRatio's ``input_sequence``), then one collection
    per activation a rule's default regex names (SaturatedActivation's ``.*tanh_input|.*sigmoid_input``:
    ``tanh_input`` and ``sigmoid_input``, which smdebug-rulesconfig leaves unnamed)."""
    out: dict[str, tuple[str, ...]] = {}
    for spec in list_rules("debugger"):
        for req in spec.collections:
            if req.include_regex:
                out.setdefault(req.name, (req.include_regex,))
        for param in spec.parameters:
            if param.type == "regex" and isinstance(param.default, str):
                for regex in param.default.split("|"):
                    found = re.fullmatch(r"\.\*([a-z]+_(?:input|output))", regex)
                    if found:
                        out.setdefault(found.group(1), (regex,))
    return out


# Named in include_collections and not configured otherwise, these take the rules' regexes (smdebug 1.0.34 accepts
# the names and saves nothing for them unless the job's DebugHookConfig gives the regex).
RULE_COLLECTIONS: dict[str, tuple[str, ...]] = _rule_collections()


def unknown_collection(name: str, named: str, lacks: str, advice: str = "") -> UnknownNameError:
    """The error for a collection no tensor would be saved in: ``name``, neither built in nor one the built-in rules
    read, and lacking what would select its tensors. The message: ``named`` (where the name stands), the name, that
    it is neither, ``lacks``, the closest known name, ``advice``."""
    suggestion = closest(name, sorted({*BUILTIN_REGEXES, *RULE_COLLECTIONS}))
    hint = f"; did you mean {suggestion!r}?" if suggestion else ""
    return UnknownNameError(
        f"{named} {name!r} is neither a built-in collection ({', '.join(sorted(BUILTIN_REGEXES))}) nor one the "
        f"built-in rules read ({', '.join(sorted(RULE_COLLECTIONS))}), and {lacks}{hint}{advice}",
        name=name, suggestion=suggestion)


# saved as raw values, never reduced (smdebug.core.collection.SCALAR_COLLECTIONS)
SCALAR_COLLECTIONS = frozenset({CollectionKeys.LOSSES, CollectionKeys.METRICS, CollectionKeys.SM_METRICS})


class Collection:
    """A named group of tensors: the regexes that select them, and when and how they are saved.

    ``save_config``/``reduction_config`` None take the hook's. Regexes match anywhere in a tensor name
    (``re.search``), as smdebug's do.
    """

    def __init__(
        self,
        name: str,
        include_regex: Iterable[str] | None = None,
        tensor_names: Iterable[str] | None = None,
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | None = None,
        save_histogram: bool = True,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"collection name must be a non-empty string, got {name!r}", field="name", value=name)
        self.name = name
        self.include_regex: list[str] = []
        self._compiled: list[re.Pattern[str]] = []
        self.include(list(include_regex or ()))
        self.tensor_names: set[str] = set(tensor_names or ())
        self.reduction_config = reduction_config
        self.save_config = save_config
        self.save_histogram = save_histogram
        self.modules: dict[Any, tuple[bool, bool]] = {}
        """Modules whose inputs/outputs belong to the collection: module -> (inputs, outputs)."""

    # smdebug's setters type-check; ours name the collection and the value too
    @property
    def reduction_config(self) -> ReductionConfig | None:
        """The collection's reductions (None: the hook's)."""
        return self._reduction_config

    @reduction_config.setter
    def reduction_config(self, value: ReductionConfig | None) -> None:
        if value is not None and not isinstance(value, ReductionConfig):
            raise ConfigError(f"collection {self.name!r}: reduction_config must be a ReductionConfig, got "
                              f"{type(value).__name__}", field="reduction_config", value=value)
        self._reduction_config = value

    @property
    def save_config(self) -> SaveConfig | None:
        """The collection's save configuration (None: the hook's)."""
        return self._save_config

    @save_config.setter
    def save_config(self, value: object) -> None:
        self._save_config = None if value is None else SaveConfig.parse(value)

    def include(self, regex: str | Iterable[str]) -> None:
        """Add one regex or a list of them."""
        items = [regex] if isinstance(regex, str) else list(regex)
        for item in items:
            if item in self.include_regex:  # once is enough (the collections file lists each regex once)
                continue
            if not isinstance(item, str):
                raise ConfigError(f"collection {self.name!r}: include_regex entries are strings, got {item!r}",
                                  field="include_regex", value=item)
            try:
                compiled = re.compile(item)
            except re.error as exc:
                raise ConfigError(f"collection {self.name!r}: include_regex {item!r} is not a regular expression "
                                  f"({exc})", field="include_regex", value=item) from None
            self.include_regex.append(item)
            self._compiled.append(compiled)

    def add_module_tensors(self, module: Any, inputs: bool = False, outputs: bool = True) -> None:
        """Save a registered module's inputs and/or outputs in this collection (smdebug's PyTorch API)."""
        self.modules[module] = (inputs, outputs)

    def add_tensor_name(self, name: str) -> None:
        """Add a tensor to the collection by name."""
        self.tensor_names.add(name)

    def has_tensor_name(self, name: str) -> bool:
        """True when ``name`` was added by name."""
        return name in self.tensor_names

    def matches(self, tensor_name: str) -> bool:
        """True when ``tensor_name`` belongs to the collection (by name or by one of its regexes)."""
        return tensor_name in self.tensor_names or any(p.search(tensor_name) for p in self._compiled)

    def file_model(self) -> collections_file.Collection:
        """The entry the collections file holds for this collection."""
        return collections_file.Collection(
            name=self.name,
            include_regex=tuple(self.include_regex),
            tensor_names=tuple(sorted(self.tensor_names)),
            reduction_config=self.reduction_config.file_model() if self.reduction_config else None,
            save_config=self.save_config,
            save_histogram=self.save_histogram,
        )

    def __repr__(self) -> str:
        return f"<Collection {self.name!r} include_regex={self.include_regex}>"
