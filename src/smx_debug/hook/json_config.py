"""The hook's configuration from a ``DebugHookConfig``: the container's JSON on SageMaker, or a debug plan.

SageMaker writes the job's ``DebugHookConfig`` to ``/opt/ml/input/config/debughookconfig.json``
(``SMDEBUG_CONFIG_FILE_PATH`` overrides the path): ``LocalPath`` (default ``/opt/ml/output/tensors``),
``HookParameters`` and ``CollectionConfigurations``, parameter values as strings. smdebug's parsing
(``smdebug/core/json_config.py``) is followed: un-prefixed save keys apply to every mode, ``train.``/``eval.``/
``predict.``/``global.`` keys to one, and a collection's missing keys come from the hook's. Unlike smdebug,
an unknown key, a bad value, or a collection that is neither built in, nor one the built-in rules read
(:data:`~smx_debug.hook.collection.RULE_COLLECTIONS`, whose regex the hook fills in), nor given an
``include_regex`` is a ConfigError/UnknownNameError naming the field and the value, before training starts.

A job launched without a ``DebugHookConfig`` (SDK v3's ``ModelTrainer``, ``plan.to_model_trainer_kwargs()``) has
no such file: its plan rendered the same settings into the job's ``Environment``
(:data:`~smx_debug.contracts.HOOK_OUTPUT_ENV`, the S3OutputPath; :data:`~smx_debug.contracts.HOOK_CONFIG_ENV`,
HookParameters and CollectionConfigurations as JSON, split across numbered variables when longer than an
Environment value). :func:`read_hook_config` takes the file when there is one,
else those variables (:func:`settings_from_environment`): the hook then writes its trial straight to
``<S3OutputPath>/<TRAINING_JOB_NAME>/debug-output/``, because SageMaker uploads nothing for such a job.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import StrictBool, StrictStr

from smx_debug import _json as bounded_json
from smx_debug.config.base import FrozenModel
from smx_debug.config.request import debug_hook_config
from smx_debug.contracts import (
    HOOK_CONFIG_ENV,
    HOOK_OUTPUT_ENV,
    TRAINING_JOB_NAME_ENV,
    hook_trial_uri,
    join_hook_config,
)
from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.hook.collection import DEFAULT_COLLECTIONS, RULE_COLLECTIONS, unknown_collection
from smx_debug.hook.guard import GUARD_PARAMETERS, parse_guard
from smx_debug.hook.reduction_config import ReductionConfig
from smx_debug.hook.save_config import SaveConfig, SaveConfigMode
from smx_debug.rules.definitions import LOSS_MEANS_KEY, SUMMARIES_KEY, closest
from smx_debug.tensors.mode_keys import ModeKeys

if TYPE_CHECKING:
    from smx_debug.config import DebugPlan


CONFIG_FILE_ENV = "SMDEBUG_CONFIG_FILE_PATH"
DEFAULT_CONFIG_FILE = "/opt/ml/input/config/debughookconfig.json"
DEFAULT_LOCAL_PATH = "/opt/ml/output/tensors"

_SAVE_KEYS = ("save_interval", "save_steps", "start_step", "end_step")
_MODE_PREFIXES = {"train.": ModeKeys.TRAIN, "eval.": ModeKeys.EVAL, "predict.": ModeKeys.PREDICT,
                  "global.": ModeKeys.GLOBAL}
_SAVE_ALL_KEYS = frozenset(_SAVE_KEYS) | {p + k for p in _MODE_PREFIXES for k in _SAVE_KEYS}
_REDUCTION_KEYS = frozenset({"reductions", "save_raw_tensor", "save_shape"})
HOOK_KEYS = _SAVE_ALL_KEYS | _REDUCTION_KEYS | {"save_all", "include_regex", "include_workers",
                                                  "export_tensorboard", "tensorboard_dir", "dry_run", LOSS_MEANS_KEY,
                                                  SUMMARIES_KEY}
HOOK_KEYS |= GUARD_PARAMETERS  # the in-process guard's (smx_debug.hook.guard)
COLLECTION_KEYS = _SAVE_ALL_KEYS | _REDUCTION_KEYS | {"include_regex", "save_histogram"}
_TOP_KEYS = ("LocalPath", "S3OutputPath", "HookParameters", "CollectionConfigurations")


class CollectionSettings(FrozenModel):
    """One ``CollectionConfigurations`` entry, parsed."""

    name: StrictStr
    include_regex: tuple[StrictStr, ...] = ()
    save_config: SaveConfig
    reduction_config: ReductionConfig | None = None
    save_histogram: StrictBool | None = None


class HookSettings(FrozenModel):
    """What a hook built from a ``DebugHookConfig`` does (the arguments of ``smd.Hook`` plus collections)."""

    out_dir: StrictStr
    save_config: SaveConfig
    reduction_config: ReductionConfig | None = None
    include_regex: tuple[StrictStr, ...] | None = None
    include_collections: tuple[StrictStr, ...] | None = None
    save_all: StrictBool = False
    include_workers: Literal["one", "all"] = "one"
    dry_run: StrictBool = False
    export_tensorboard: StrictBool = False
    tensorboard_dir: StrictStr | None = None
    collections: tuple[CollectionSettings, ...] = ()
    loss_means: StrictBool = False
    """Save the interval means of the losses (``HookParameters.save_loss_means``: a plan's recommended profile)."""
    guard: Literal["warn", "stop"] | None = None
    """The in-process guard (``HookParameters.in_process_guard``: a plan's ``in_process_guard``)."""
    guard_rules: tuple[tuple[StrictStr, StrictStr, dict[StrictStr, Any]], ...] = ()
    """The guard's rule configurations that are not a recommended rule at its defaults, as ``(configuration name,
    rule, parameters)`` (``HookParameters.in_process_guard_rules``)."""
    summaries: StrictBool = False
    """Save the rules of our own's summary statistics instead of their collections' whole tensors, and every step's
    labels and predictions since the last save (``HookParameters.save_summaries``: a plan's recommended profile)."""


def config_file_path(json_config_path: str | os.PathLike[str] | None = None,
                     environ: Mapping[str, str] | None = None) -> Path:
    """The config file to read: the given path, else ``$SMDEBUG_CONFIG_FILE_PATH`` (of ``environ``, default
    ``os.environ``), else SageMaker's."""
    if json_config_path is not None:
        return Path(json_config_path)
    return Path((os.environ if environ is None else environ).get(CONFIG_FILE_ENV) or DEFAULT_CONFIG_FILE)


def read_hook_config(json_config_path: str | os.PathLike[str] | None = None,
                     environ: Mapping[str, str] | None = None) -> HookSettings:
    """The job's hook settings: its ``DebugHookConfig`` file, else (no path given) its environment.

    ``json_config_path`` given: that file only. Otherwise the file ``$SMDEBUG_CONFIG_FILE_PATH`` or SageMaker's
    names, and when it does not exist, :func:`settings_from_environment` (``environ``, default ``os.environ``).

    Raises:
        NotFoundError: no file and no ``$SMX_DEBUG_OUTPUT`` (the path and the variable named).
        ConfigError: a file or variable that cannot be parsed (the field named).
    """
    env = os.environ if environ is None else environ
    path = config_file_path(json_config_path, env)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if json_config_path is None and env.get(HOOK_OUTPUT_ENV):
            return settings_from_environment(env)
        raise NotFoundError(
            f"hook config {str(path)!r} does not exist (SageMaker writes it when the job has a DebugHookConfig; "
            f"set {CONFIG_FILE_ENV} or pass json_config_path to use another file) and ${HOOK_OUTPUT_ENV} is not "
            "set (a plan renders it into a job launched without a DebugHookConfig: plan.to_model_trainer_kwargs())"
        ) from None
    except OSError as exc:
        raise ConfigError(f"hook config {str(path)!r}: {exc.strerror}", field="path", value=str(path)) from None
    try:
        data = bounded_json.loads(text)  # nested too deep: a JSONDecodeError too
    except json.JSONDecodeError as exc:
        raise ConfigError(f"hook config {str(path)!r}: line {exc.lineno}, column {exc.colno}: invalid JSON "
                          f"({exc.msg})", field="(file)", value=str(path)) from None
    return parse_hook_config(data, source=str(path))


def settings_from_environment(environ: Mapping[str, str]) -> HookSettings:
    """The settings a plan rendered into a job's ``Environment`` (a job without a ``DebugHookConfig``).

    The trial goes to ``<$SMX_DEBUG_OUTPUT>/<$TRAINING_JOB_NAME>/debug-output/``: SageMaker sets
    ``TRAINING_JOB_NAME`` in every training container. ``$SMX_DEBUG_HOOK`` (optional) holds the
    ``HookParameters`` and ``CollectionConfigurations`` of the plan's DebugHookConfig as a JSON object, continued in
    ``$SMX_DEBUG_HOOK_1``, ``$SMX_DEBUG_HOOK_2``, ... when longer than an Environment value
    (:func:`smx_debug.contracts.join_hook_config`).

    Raises:
        ConfigError: a variable missing or malformed (named, with its value).
    """
    output = environ.get(HOOK_OUTPUT_ENV, "")
    if not output.startswith("s3://") or len(output) <= 5 or output[5] == "/":
        raise ConfigError(f"${HOOK_OUTPUT_ENV} must be the s3://bucket/prefix the hook writes the trial under, "
                          f"got {output!r}", field=HOOK_OUTPUT_ENV, value=output)
    job = environ.get(TRAINING_JOB_NAME_ENV, "")
    if not job:
        raise ConfigError(f"${HOOK_OUTPUT_ENV} is set but ${TRAINING_JOB_NAME_ENV} is not: SageMaker sets it in a "
                          "training job's container, and the trial goes under the job's name; set it to run "
                          "outside SageMaker", field=TRAINING_JOB_NAME_ENV, value=None)
    source = f"${HOOK_CONFIG_ENV}"
    data: Mapping[str, Any] = {}
    try:
        raw = join_hook_config(environ)
    except KeyError as exc:
        missing = str(exc.args[0])
        raise ConfigError(f"${missing} is not set but a later part of the hook's settings is (a plan splits them "
                          f"across {HOOK_CONFIG_ENV}, {HOOK_CONFIG_ENV}_1, ...: set every part it rendered)",
                          field=missing, value=None) from None
    if raw is not None:
        try:
            parsed = bounded_json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{source}: column {exc.colno}: invalid JSON ({exc.msg})", field=HOOK_CONFIG_ENV,
                              value=raw) from None
        if not isinstance(parsed, Mapping) or {"LocalPath", "S3OutputPath"} & set(parsed):
            raise ConfigError(f"{source}: a JSON object with HookParameters and CollectionConfigurations only "
                              f"(the trial's place is ${HOOK_OUTPUT_ENV}), got {raw!r}", field=HOOK_CONFIG_ENV,
                              value=raw)
        data = parsed
    return parse_hook_config({**data, "LocalPath": hook_trial_uri(output, job)}, source=source)


def settings_from_plan(plan: DebugPlan, out_dir: str) -> HookSettings:
    """The settings a job launched with ``plan`` gives its hook, writing to ``out_dir``."""
    config = dict(debug_hook_config(plan))
    config["LocalPath"] = out_dir
    return parse_hook_config(config, source="plan")


def parse_hook_config(data: object, *, source: str = "DebugHookConfig") -> HookSettings:
    """Parse a ``DebugHookConfig`` mapping (as SageMaker writes it, or as CreateTrainingJob takes it)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: a DebugHookConfig is a JSON object, got {type(data).__name__}",
                          field="(config)", value=data)
    for key in data:
        if key not in _TOP_KEYS:
            raise _unknown(source, "", key, _TOP_KEYS)
    local_path = data.get("LocalPath", DEFAULT_LOCAL_PATH)
    if not isinstance(local_path, str) or not local_path:
        raise ConfigError(f"{source}: LocalPath must be a non-empty string, got {local_path!r}",
                          field="LocalPath", value=local_path)
    hook_params = _params(data.get("HookParameters"), source, "HookParameters", HOOK_KEYS)
    base_modes = _save_modes(hook_params, source, "HookParameters", None)
    save_config = _save_config(base_modes, source, "HookParameters")

    reduction_config = None
    if "reductions" in hook_params:
        reduction_config = _reduction_config(hook_params, source, "HookParameters")
    include_workers = hook_params.get("include_workers", "one")
    if include_workers not in ("one", "all"):
        raise ConfigError(f"{source}: HookParameters.include_workers must be 'one' or 'all', got "
                          f"{include_workers!r}", field="HookParameters.include_workers", value=include_workers)

    collections: list[CollectionSettings] = []
    entries = data.get("CollectionConfigurations")
    if entries is not None and not isinstance(entries, list):
        raise ConfigError(f"{source}: CollectionConfigurations must be a list, got {type(entries).__name__}",
                          field="CollectionConfigurations", value=entries)
    for i, entry in enumerate(entries or []):
        collections.append(_collection(entry, source, f"CollectionConfigurations[{i}]", base_modes))
    names = [c.name for c in collections]
    return HookSettings(
        out_dir=local_path,
        save_config=save_config,
        reduction_config=reduction_config,
        include_regex=_regexes(hook_params["include_regex"]) if "include_regex" in hook_params else None,
        include_collections=tuple(names) if entries is not None else None,
        save_all=_bool(hook_params.get("save_all", False), source, "HookParameters.save_all"),
        include_workers=include_workers,
        dry_run=_bool(hook_params.get("dry_run", False), source, "HookParameters.dry_run"),
        loss_means=_bool(hook_params.get(LOSS_MEANS_KEY, False), source, f"HookParameters.{LOSS_MEANS_KEY}"),
        **parse_guard(hook_params, source),
        summaries=_bool(hook_params.get(SUMMARIES_KEY, False), source, f"HookParameters.{SUMMARIES_KEY}"),
        export_tensorboard=_bool(hook_params.get("export_tensorboard", False), source,
                                 "HookParameters.export_tensorboard"),
        tensorboard_dir=str(hook_params["tensorboard_dir"]) if "tensorboard_dir" in hook_params else None,
        collections=tuple(collections),
    )


def _collection(entry: object, source: str, where: str, base_modes: dict[ModeKeys, dict[str, Any]]
                ) -> CollectionSettings:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{source}: {where} must be an object, got {entry!r}", field=where, value=entry)
    for key in entry:
        if key not in ("CollectionName", "CollectionParameters"):
            raise _unknown(source, where, key, ("CollectionName", "CollectionParameters"))
    name = entry.get("CollectionName")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{source}: {where}.CollectionName must be a non-empty string, got {name!r}",
                          field=f"{where}.CollectionName", value=name)
    params = _params(entry.get("CollectionParameters"), source, f"{where}.CollectionParameters", COLLECTION_KEYS)
    regexes = _regexes(params["include_regex"]) if "include_regex" in params else ()
    if name not in DEFAULT_COLLECTIONS and name not in RULE_COLLECTIONS and not regexes:
        # a rules' collection without include_regex takes the rules' regex in the hook (Hook._check_collections)
        raise unknown_collection(name, f"{source}: {where}.CollectionName: collection",
                                 "has no include_regex, so no tensor would be saved in it")
    for regex in regexes:
        try:
            re.compile(regex)
        except re.error as exc:
            raise ConfigError(f"{source}: {where}.CollectionParameters.include_regex: {regex!r} is not a regular "
                              f"expression ({exc})", field=f"{where}.CollectionParameters.include_regex",
                              value=regex) from None
    modes = _save_modes(params, source, f"{where}.CollectionParameters", base_modes)
    return CollectionSettings(
        name=name,
        include_regex=regexes,
        save_config=_save_config(modes, source, f"{where}.CollectionParameters"),
        reduction_config=(_reduction_config(params, source, f"{where}.CollectionParameters")
                          if "reductions" in params else None),
        save_histogram=(_bool(params["save_histogram"], source, f"{where}.CollectionParameters.save_histogram")
                        if "save_histogram" in params else None),
    )


def _params(value: object, source: str, where: str, known: frozenset[str]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{source}: {where} must be an object, got {value!r}", field=where, value=value)
    for key in value:
        if key not in known:
            raise _unknown(source, where, key, tuple(sorted(known)))
    return dict(value)


def _unknown(source: str, where: str, key: object, known: tuple[str, ...]) -> ConfigError:
    field = f"{where}.{key}" if where else str(key)
    suggestion = closest(str(key), list(known))
    hint = f"; did you mean {suggestion!r}?" if suggestion else ""
    shown = [k for k in known if "." not in k]
    more = ", each save key also as train./eval./predict./global.<key>" if len(shown) < len(known) else ""
    return ConfigError(f"{source}: {field}: unknown key{hint} (known: {', '.join(shown)}{more})", field=field,
                       value=key)


def _int(value: object, source: str, field: str) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{source}: {field} must be an integer, got {value!r}", field=field, value=value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ConfigError(f"{source}: {field} must be an integer, got {value!r}", field=field, value=value)


def _bool(value: object, source: str, field: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"{source}: {field} must be true or false, got {value!r}", field=field, value=value)


def _regexes(value: object) -> tuple[str, ...]:
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return tuple(part.strip() for part in str(value).split(",") if part.strip())


def _save_modes(params: Mapping[str, Any], source: str, where: str,
                base: dict[ModeKeys, dict[str, Any]] | None) -> dict[ModeKeys, dict[str, Any]]:
    """mode -> SaveConfigMode keyword arguments: un-prefixed keys, then the mode's own, over ``base``."""
    def parse(prefix: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in _SAVE_KEYS:
            if prefix + key not in params:
                continue
            raw = params[prefix + key]
            field = f"{where}.{prefix}{key}"
            if key == "save_steps":
                items = raw if isinstance(raw, list) else [p for p in str(raw).split(",") if p.strip()]
                out[key] = tuple(_int(item, source, field) for item in items)
            else:
                out[key] = _int(raw, source, field)
        return out

    common = parse("")
    modes: dict[ModeKeys, dict[str, Any]] = {}
    for prefix, mode in _MODE_PREFIXES.items():
        own = {**common, **parse(prefix)}
        modes[mode] = {**(base[mode] if base else {}), **own}
    return modes


def _save_config(modes: dict[ModeKeys, dict[str, Any]], source: str, where: str) -> SaveConfig:
    configs: dict[ModeKeys, SaveConfigMode | None] = {}
    for mode, kwargs in modes.items():
        try:
            configs[mode] = SaveConfigMode(**kwargs)
        except ConfigError as exc:
            field = f"{where}.{exc.field}" if exc.field else where
            problem = str(exc).removeprefix(f"{exc.field}: ")
            raise ConfigError(f"{source}: {field} ({mode.name.lower()} steps): {problem}", field=field,
                              value=exc.value) from None
    return SaveConfig(mode_save_configs=configs)


def _reduction_config(params: Mapping[str, Any], source: str, where: str) -> ReductionConfig:
    raw = params["reductions"]
    if not isinstance(raw, str):
        raise ConfigError(f"{source}: {where}.reductions must be a comma-separated string, got {raw!r}",
                          field=f"{where}.reductions", value=raw)
    try:
        return ReductionConfig.from_string(
            raw,
            save_raw_tensor=_bool(params.get("save_raw_tensor", False), source, f"{where}.save_raw_tensor"),
            save_shape=_bool(params.get("save_shape", False), source, f"{where}.save_shape"),
            field=f"{where}.reductions",
        )
    except ConfigError as exc:
        if str(exc).startswith(source):
            raise
        raise ConfigError(f"{source}: {exc}", field=exc.field, value=exc.value) from None
