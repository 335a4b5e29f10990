"""The one registry of rules: every list of rules (the catalog, the evaluators' dispatch, the watch spec, the tensor
state's allow-list, the report's words, the command line) is derived from it, never kept beside it.

Two families:

* ``debugger``: Debugger's built-ins. Their catalog entries are pinned to smdebug-rulesconfig and AWS's guide
  (:mod:`smx_debug.rules._builtin`, checked by ``tests/unit/rules/test_rule_catalog.py``); how smx-debug evaluates
  them and the report's words are :mod:`smx_debug.rules._builtin_local`; their evaluators are
  :mod:`smx_debug.evaluate`'s (bound by name there: the evaluation layer sits above this one).
* ``smx``: smx-debug's own rules, which may define anything Debugger does not. Each is one module under
  :mod:`smx_debug.rules.own` that calls :func:`define` once; the modules are found by name (no hand-kept list).

Adding a rule of our own is adding one file (plus its tests and its docs/rules.md entry)::

    # src/smx_debug/rules/own/weight_norm_growth.py
    from pydantic import BaseModel, ConfigDict, Field
    from smx_debug.rules.registry import define

    class Params(BaseModel):
        model_config = ConfigDict(frozen=True, extra="forbid")
        factor: float = Field(10.0, gt=1, description="growth of the weight norm that fires")

    class Evaluator:
        state_types = ()  # the dataclasses its state holds besides the Tally (saved by the evaluator)

        def update(self, state, batch, params, selection):  # params: a Params, validated once
            import numpy as np  # the evaluation part may use numpy; import it here, never at module level
            ...

    RULE = define(name="WeightNormGrowth", summary="...", params=Params, description="...", advice="...",
                  evaluates_on=("tensors",), evaluator=Evaluator())

A rule module imports only the standard library, pydantic and ``smx_debug.rules.registry``/``definitions`` at its
top level (building a plan must not import numpy). Its evaluator follows
:class:`smx_debug.evaluate.tensor_eval.OwnTensorRule`'s protocol: ``update(state, batch, params, selection)`` is
required; ``select(params, names, collections)``, ``start(params, tally)`` (a state dataclass holding ``tally``,
listed in ``state_types`` so the scheduled evaluator can save and restore it) and ``result(state, params)`` default
to the built-ins' behaviour: every tensor of ``collection_names``/``tensor_regex``, the ``Tally``, its verdict.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    create_model,
)

from smx_debug.contracts import RuleKind
from smx_debug.errors import ConfigError
from smx_debug.rules import _builtin, _builtin_local
from smx_debug.rules.definitions import (
    CollectionRequirement,
    ParamSpec,
    ParamType,
    ParamValue,
    RuleFamily,
    RuleSpec,
)

__all__ = [
    "OWN_RULES_PACKAGE",
    "PROFILES",
    "DataSource",
    "Profile",
    "RuleDef",
    "RuleParams",
    "define",
    "evaluated_on",
    "find",
    "params_model",
    "profile_rules",
    "register",
    "rule_defs",
]

DataSource = Literal["job", "tensors"]
"""What a rule is evaluated on: ``job`` (the profiler's and training metrics' frames), ``tensors`` (a trial)."""
OWN_RULES_PACKAGE = "smx_debug.rules.own"
Profile = Literal["recommended", "debugger"]
"""A plan's set of rules: ``debugger`` (the rules the plan lists, as Debugger has them) or ``recommended`` (the rules
whose :attr:`RuleDef.profiles` hold it, at their defaults, plus the ones the plan lists)."""
PROFILES: tuple[Profile, ...] = get_args(Profile)

RuleParams = Any
"""An instance of a rule's parameter model (:attr:`RuleDef.params`), validated once per configuration
(:attr:`smx_debug.rules.configured.ConfiguredRule.params`); its attributes are typed values. ``Any`` to mypy: the
built-ins' models are generated from the catalog."""

_PARAMS_CONFIG = ConfigDict(frozen=True, extra="forbid")
# A "float" parameter is a number (ParamSpec.check: an int or a float): it keeps the type it was written with, so
# that messages and RuleParameters show 70 as 70, as they did when the evaluators read the plan's values.
_PY_TYPES: Mapping[ParamType, Any] = {"int": int, "float": int | float, "bool": bool, "str": str, "regex": str}


@dataclass(frozen=True)
class RuleDef:
    """One rule: its catalog entry, typed parameter model, report words, what it is evaluated on, and (for a rule
    of our own) its evaluator.

    Attributes:
        spec: the catalog entry (name, plan name, kind, parameters, collections the hook saves for it).
        params: the frozen pydantic model of its parameters; ``params.model_validate(parameters)`` once per
            configuration, attribute access from then on.
        description: what it checks, for the report's rule table.
        advice: what to do when it fires.
        evaluates_on: the data smx-debug evaluates it on (empty: smx-debug does not evaluate it).
        evaluator: a rule of our own's evaluation object (see the module docstring); None for Debugger's built-ins,
            whose evaluators :mod:`smx_debug.evaluate` binds by name.
        minute_defaults: the scheduled evaluator judges it on CloudWatch minutes with these parameters (None: it
            judges a rule evaluated on tensors on the job's tensors).
        profiles: the profiles (:data:`Profile`, other than ``debugger``) that include it at its defaults.
    """

    spec: RuleSpec
    params: type[BaseModel]
    description: str = ""
    advice: str = ""
    evaluates_on: tuple[DataSource, ...] = ()
    evaluator: Any = field(default=None, compare=False)
    minute_defaults: Mapping[str, ParamValue] | None = None
    profiles: tuple[Profile, ...] = ()

    @property
    def name(self) -> str:
        return self.spec.name

    def validate_params(self, values: Mapping[str, Any], *, checked: bool = False) -> RuleParams:
        """``values`` as an instance of :attr:`params` (the model's defaults for those missing). ``checked``: the
        values were checked against the catalog already (a plan's, :func:`smx_debug.rules.params.resolve_params`'s),
        so a built-in's model only types them, without running :meth:`ParamSpec.check` on each again.

        Raises:
            ConfigError: naming ``<Rule>.<parameter>`` and the value; for a built-in, with
                :meth:`ParamSpec.check <smx_debug.rules.definitions.ParamSpec.check>`'s words.
        """
        try:
            return self.params.model_validate(dict(values), context={_CHECKED: True} if checked else None)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = f"{self.name}.{error['loc'][0]}" if error["loc"] else self.name
            value = error.get("input")
            cause = error.get("ctx", {}).get("error")
            problem = str(cause) if error["type"] == "value_error" and cause is not None else error["msg"]
            raise ConfigError(f"{where}: {problem} (got {value!r})", field=where, value=value) from None

    @property
    def kind(self) -> RuleKind:
        return self.spec.kind

    @property
    def family(self) -> RuleFamily:
        return self.spec.family


_CHECKED = "checked against the catalog"


def _checked(spec: ParamSpec) -> BeforeValidator:
    """The catalog's check of one parameter (:meth:`ParamSpec.check`), as the model's validator (skipped for values
    checked already: validation context ``{_CHECKED: True}``)."""

    def check(value: object, info: ValidationInfo) -> object:
        if value is None and spec.default is None:
            return value
        if value is not None and (info.context or {}).get(_CHECKED):  # (resolve_params lets None through)
            return value
        problem = spec.check(value)
        if problem:
            raise ValueError(problem)
        return value

    return BeforeValidator(check)


def params_model(spec: RuleSpec) -> type[BaseModel]:
    """The frozen, ``extra="forbid"`` parameter model of a catalog entry, generated from its ParamSpecs (a default
    of None makes the field optional: the container decides). Each value is checked by its ParamSpec (a string
    is never a number); a float parameter keeps an int as written."""
    fields: dict[str, Any] = {}
    for p in spec.parameters:
        py = _PY_TYPES[p.type]
        annotation: Any = Annotated[py | None if p.default is None else py, _checked(p)]
        fields[p.name] = (annotation, Field(default=p.default, description=p.description))
    model: type[BaseModel] = create_model(f"{spec.name}Params", __config__=_PARAMS_CONFIG, **fields)
    return model


def _param_type(name: str, annotation: Any, extra: Any) -> tuple[ParamType, bool]:
    args = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else (annotation,)
    optional = type(None) in args
    base = [a for a in args if a is not type(None)]
    kinds: dict[Any, ParamType] = {bool: "bool", int: "int", float: "float", str: "str"}
    if len(base) != 1 or base[0] not in kinds:
        raise ConfigError(f"rule parameter {name!r} must be a bool, int, float or str (optionally None), got "
                          f"{annotation!r}", field="params", value=name)
    kind = kinds[base[0]]
    if kind == "str" and isinstance(extra, dict) and extra.get("format") == "regex":
        kind = "regex"
    return kind, optional


def _param_specs(model: type[BaseModel]) -> tuple[ParamSpec, ...]:
    """The catalog's ParamSpecs of a rule of our own, read from its parameter model (the model is the source)."""
    specs = []
    for name, info in model.model_fields.items():
        kind, _ = _param_type(name, info.annotation, info.json_schema_extra)
        bounds: dict[str, float] = {}
        for meta in info.metadata:
            for attr, key in ((annotated_types.Ge, "ge"), (annotated_types.Gt, "gt"), (annotated_types.Le, "le")):
                if isinstance(meta, attr):
                    bounds[key] = float(getattr(meta, key))
        default = None if info.is_required() else info.default
        specs.append(ParamSpec(name, kind, default, info.description or "", required=info.is_required(), **bounds))
    return tuple(specs)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


_OWN: dict[str, RuleDef] = {}
_loaded = False


def define(
    *,
    name: str,
    summary: str,
    params: type[BaseModel],
    description: str,
    advice: str,
    evaluates_on: tuple[DataSource, ...],
    evaluator: Any,
    collections: tuple[CollectionRequirement, ...] = (),
    reads: tuple[str, ...] = (),
    saved_steps_needed: int | str = 1,
    profiles: tuple[Profile, ...] = (),
) -> RuleDef:
    """Register a rule of our own (family ``smx``) and return its :class:`RuleDef`; its plan name is ``name`` in
    snake case, its catalog parameters are read from ``params``.

    Raises:
        ConfigError: a name already taken, a parameter model that is not frozen and ``extra="forbid"``, a parameter
            that is not a bool, number or string, an empty description or advice, or no evaluator.
    """
    spec = RuleSpec(
        name, _snake(name), "debugger" if "tensors" in evaluates_on else "profiler", summary,
        _param_specs(params), collections, saved_steps_needed=saved_steps_needed, reads=reads, family="smx",
    )
    return register(RuleDef(spec=spec, params=params, description=description, advice=advice,
                            evaluates_on=evaluates_on, evaluator=evaluator, profiles=profiles))


def register(rule: RuleDef) -> RuleDef:
    """Add a rule of our own to the registry (:func:`define` builds the :class:`RuleDef`); see :func:`define`."""
    name = rule.name
    taken = {k for d in _builtin_defs() for k in (d.name.lower(), d.spec.function.lower())}
    taken |= {k for d in _OWN.values() for k in (d.name.lower(), d.spec.function.lower())}
    if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", name):
        raise ConfigError(f"a rule's name is a class name (CamelCase letters and digits), got {name!r}",
                          field="name", value=name)
    if name.lower() in taken or rule.spec.function.lower() in taken:
        raise ConfigError(f"rule {name!r} is already registered: a rule of our own needs a name of its own",
                          field="name", value=name)
    if rule.family != "smx":
        raise ConfigError(f"rule {name!r}: only smx-debug's own rules are registered (family 'smx'); Debugger's "
                          "built-ins are the catalog's", field="family", value=rule.family)
    config = rule.params.model_config
    if not config.get("frozen") or config.get("extra") != "forbid":
        raise ConfigError(f"rule {name!r}: its parameter model must be frozen with extra='forbid'",
                          field="params", value=rule.params.__name__)
    if not rule.description.strip() or not rule.advice.strip():
        raise ConfigError(f"rule {name!r} needs a description and advice (the report shows both)",
                          field="description", value=name)
    if any(p not in PROFILES or p == "debugger" for p in rule.profiles):
        raise ConfigError(f"rule {name!r}: profiles are {[p for p in PROFILES if p != 'debugger']} (every "
                          f"Debugger rule is the debugger profile's), got {rule.profiles!r}",
                          field="profiles", value=rule.profiles)
    if rule.evaluates_on != ("tensors",) or rule.evaluator is None or not callable(
            getattr(rule.evaluator, "update", None)):
        raise ConfigError(f"rule {name!r}: a rule of our own is evaluated on tensors (evaluates_on=('tensors',)) "
                          "by an evaluator with an update(state, batch, params, selection) method",
                          field="evaluator", value=name)
    _OWN[name] = rule
    _all_defs.cache_clear()
    _index.cache_clear()
    return rule


@cache
def _builtin_defs() -> tuple[RuleDef, ...]:
    local = _builtin_local
    return tuple(
        RuleDef(spec=spec, params=params_model(spec), description=local.DESCRIPTION.get(spec.name, ""),
                advice=local.ADVICE.get(spec.name, ""),
                evaluates_on=tuple(local.EVALUATES_ON.get(spec.name, ())),  # type: ignore[arg-type]
                minute_defaults=local.MINUTE_DEFAULTS.get(spec.name),
                profiles=tuple(local.PROFILES.get(spec.name, ())))  # type: ignore[arg-type]
        for spec in _builtin.RULES
    )


def _load() -> None:
    """Import every rule module of our own once (found by name under :data:`OWN_RULES_PACKAGE`)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    package = importlib.import_module(OWN_RULES_PACKAGE)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{OWN_RULES_PACKAGE}.{info.name}")


@cache
def _all_defs() -> tuple[RuleDef, ...]:
    builtin = _builtin_defs()
    own = tuple(sorted(_OWN.values(), key=lambda d: d.name))
    # Debugger's rules, then ours, then the profiler rules (each family's kind "debugger" first, as before).
    return (*(d for d in builtin if d.kind == "debugger"), *(d for d in own if d.kind == "debugger"),
            *(d for d in builtin if d.kind == "profiler"), *(d for d in own if d.kind == "profiler"))


def rule_defs(*, kind: RuleKind | None = None, family: RuleFamily | None = None) -> tuple[RuleDef, ...]:
    """Every rule (Debugger's rules, ours, then the profiler rules), optionally of one kind and/or family."""
    _load()
    return tuple(d for d in _all_defs() if (kind is None or d.kind == kind) and (family is None or d.family == family))


def find(name: str) -> RuleDef | None:
    """The rule named ``name`` (its class or plan name, case-insensitive), or None."""
    _load()
    return _index().get(name.lower())


@cache
def _index() -> dict[str, RuleDef]:
    return {key: d for d in _all_defs() for key in (d.name.lower(), d.spec.function.lower())}


def profile_rules(profile: Profile) -> tuple[str, ...]:
    """The names of the rules ``profile`` adds at their defaults, in registry order (none for ``debugger``: that
    profile is the rules the plan lists)."""
    return tuple(d.name for d in rule_defs() if profile in d.profiles)


def evaluated_on(source: DataSource, *, kind: RuleKind | None = None) -> tuple[str, ...]:
    """The names of the rules smx-debug evaluates on ``source``, in registry order."""
    return tuple(d.name for d in rule_defs(kind=kind) if source in d.evaluates_on)
