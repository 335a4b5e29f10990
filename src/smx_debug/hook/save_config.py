"""When tensors are saved: ``SaveConfigMode`` for one mode, ``SaveConfig`` for all four (smdebug's API)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from smx_debug.config._base import FrozenModel, NonNegativeInt, PositiveInt
from smx_debug.errors import ConfigError
from smx_debug.hook.modes import ModeKeys

__all__ = ["DEFAULT_SAVE_INTERVAL", "SaveConfig", "SaveConfigMode"]

DEFAULT_SAVE_INTERVAL = 500  # smdebug's DEFAULT_SAVE_CONFIG_INTERVAL

class SaveConfigMode(FrozenModel):
    """Save every ``save_interval`` steps in ``[start_step, end_step)``, and at every step in ``save_steps``.

    Example:
        >>> SaveConfigMode(save_interval=10, start_step=5).should_save_step(20)
        True
    """

    save_interval: PositiveInt = DEFAULT_SAVE_INTERVAL
    start_step: NonNegativeInt = 0
    end_step: NonNegativeInt | None = None
    save_steps: tuple[NonNegativeInt, ...] = ()

    def __init__(
        self,
        save_interval: int | None = None,
        start_step: int | None = None,
        end_step: int | None = None,
        save_steps: Iterable[int] | None = None,
    ) -> None:
        given: dict[str, Any] = {"save_interval": save_interval, "start_step": start_step, "end_step": end_step,
                                 "save_steps": tuple(save_steps) if save_steps is not None else None}
        super().__init__(**{k: v for k, v in given.items() if v is not None})

    def should_save_step(self, step: int) -> bool:
        """True when ``step`` (a step of this mode) is saved."""
        if step in self.save_steps:
            return True
        in_range = step >= self.start_step and (self.end_step is None or step < self.end_step)
        return in_range and step % self.save_interval == 0

    def to_json_dict(self) -> dict[str, Any]:
        """smdebug's serialised form (the collections file's ``save_config`` entries)."""
        return {"save_interval": self.save_interval, "save_steps": list(self.save_steps),
                "start_step": self.start_step, "end_step": self.end_step}

class SaveConfig(FrozenModel):
    """A ``SaveConfigMode`` per mode; a mode left None takes the hook's configuration.

    ``SaveConfig(save_interval=100)`` applies to every mode; ``SaveConfig(mode_save_configs={smd.modes.TRAIN:
    SaveConfigMode(save_interval=10)})`` sets one mode and leaves the others to the hook's default.
    """

    modes: dict[ModeKeys, SaveConfigMode | None] = Field(default_factory=dict)

    def __init__(
        self,
        mode_save_configs: Mapping[ModeKeys, SaveConfigMode | None] | None = None,
        save_interval: int | None = None,
        start_step: int | None = None,
        end_step: int | None = None,
        save_steps: Iterable[int] | None = None,
        **data: Any,
    ) -> None:
        if data:  # pydantic's own copy/validate path
            super().__init__(**data)
            return
        if mode_save_configs is None:
            one = SaveConfigMode(save_interval, start_step, end_step, save_steps)
            configs: dict[ModeKeys, SaveConfigMode | None] = dict.fromkeys(ModeKeys, one)
        else:
            if not isinstance(mode_save_configs, Mapping):
                raise ConfigError(f"save_config: mode_save_configs must map smd.modes to SaveConfigMode, got "
                                  f"{type(mode_save_configs).__name__}", field="mode_save_configs",
                                  value=mode_save_configs)
            configs = {mode: None for mode in ModeKeys}
            for mode, value in mode_save_configs.items():
                if not isinstance(mode, ModeKeys) or not (value is None or isinstance(value, SaveConfigMode)):
                    raise ConfigError(
                        f"save_config: each entry of mode_save_configs maps a mode (smd.modes.TRAIN, ...) to a "
                        f"SaveConfigMode, got {mode!r}: {value!r}", field="mode_save_configs", value=mode)
                configs[mode] = value
        super().__init__(modes=configs)

    @model_validator(mode="after")
    def _all_modes(self) -> SaveConfig:
        missing = [m.name for m in ModeKeys if m not in self.modes]
        if missing:
            raise PydanticCustomError("smx_field", "modes {missing} are missing",
                                      {"subpath": "modes", "bad_value": missing, "missing": missing})
        return self

    @classmethod
    def parse(cls, obj: object) -> SaveConfig:
        """None, a SaveConfig, a SaveConfigMode or a ``{mode: SaveConfigMode}`` dict, as smdebug's hooks take."""
        if obj is None:
            return cls()
        if isinstance(obj, SaveConfig):
            return obj
        if isinstance(obj, SaveConfigMode):
            return cls(mode_save_configs=dict.fromkeys(ModeKeys, obj))
        if isinstance(obj, Mapping):
            return cls(mode_save_configs=obj)
        raise ConfigError(f"save_config: expected a SaveConfig, SaveConfigMode or dict, got {type(obj).__name__}",
                          field="save_config", value=obj)

    def get_save_config(self, mode: ModeKeys) -> SaveConfigMode:
        """The configuration of ``mode`` (the default one when it was left to the hook)."""
        return self.modes.get(mode) or SaveConfigMode()

    def should_save_step(self, mode: ModeKeys, step: int) -> bool:
        """True when step ``step`` of ``mode`` is saved."""
        return self.get_save_config(mode).should_save_step(step)

    def merged(self, default: SaveConfig) -> SaveConfig:
        """Modes left None take ``default``'s configuration."""
        return SaveConfig(mode_save_configs={m: self.modes.get(m) or default.modes.get(m) for m in ModeKeys})

    def to_json_dict(self) -> dict[str, Any]:
        """smdebug's serialised form: mode name -> SaveConfigMode dict."""
        return {m.name: self.get_save_config(m).to_json_dict() for m in ModeKeys}

