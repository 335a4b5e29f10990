"""When tensors are saved: ``SaveConfigMode`` for one mode, ``SaveConfig`` for all four (smdebug's API).

Both extend the collections file's models of :mod:`smx_debug.tensors` (the same fields, defaults and JSON) with
smdebug's constructors and the save decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from smx_debug.errors import ConfigError
from smx_debug.tensors import collections_file
from smx_debug.tensors.mode_keys import ModeKeys


class SaveConfigMode(collections_file.SaveConfigMode):
    """Save every ``save_interval`` steps in ``[start_step, end_step)``, and at every step in ``save_steps``.

    Example:
        >>> SaveConfigMode(save_interval=10, start_step=5).should_save_step(20)
        True
    """

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

    def next_save_step(self, step: int) -> int | None:
        """The first step from ``step`` on that :meth:`should_save_step` saves (None: none is)."""
        first = max(step, self.start_step)
        aligned = first + (-first) % self.save_interval
        candidates = [s for s in self.save_steps if s >= step]
        if self.end_step is None or aligned < self.end_step:
            candidates.append(aligned)
        return min(candidates, default=None)


_DEFAULT = SaveConfigMode()


class SaveConfig(collections_file.SaveConfig):
    """A ``SaveConfigMode`` per mode; a mode left None takes the hook's configuration.

    ``SaveConfig(save_interval=100)`` applies to every mode; ``SaveConfig(mode_save_configs={smd.modes.TRAIN:
    SaveConfigMode(save_interval=10)})`` sets one mode and leaves the others to the hook's default.
    """

    def __init__(
        self,
        mode_save_configs: Mapping[ModeKeys, SaveConfigMode | None] | None = None,
        save_interval: int | None = None,
        start_step: int | None = None,
        end_step: int | None = None,
        save_steps: Iterable[int] | None = None,
    ) -> None:
        if mode_save_configs is None:
            one = SaveConfigMode(save_interval, start_step, end_step, save_steps)
            super().__init__(**{m.name: one for m in ModeKeys})
            return
        if not isinstance(mode_save_configs, Mapping):
            raise ConfigError(f"save_config: mode_save_configs must map smd.modes to SaveConfigMode, got "
                              f"{type(mode_save_configs).__name__}", field="mode_save_configs",
                              value=mode_save_configs)
        for mode, value in mode_save_configs.items():
            if not isinstance(mode, ModeKeys) or not (value is None or isinstance(value, SaveConfigMode)):
                raise ConfigError(
                    f"save_config: each entry of mode_save_configs maps a mode (smd.modes.TRAIN, ...) to a "
                    f"SaveConfigMode, got {mode!r}: {value!r}", field="mode_save_configs", value=mode)
        super().__init__(**{m.name: v for m, v in mode_save_configs.items()})

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

    def mode(self, mode: ModeKeys) -> SaveConfigMode | None:
        """The configuration of ``mode`` as given (None: left to the hook)."""
        value = getattr(self, mode.name)
        return value if isinstance(value, SaveConfigMode) or value is None else SaveConfigMode(**value.model_dump())

    def get_save_config(self, mode: ModeKeys) -> SaveConfigMode:
        """The configuration of ``mode`` (smdebug's default when it was left to the hook)."""
        return self.mode(mode) or _DEFAULT

    def should_save_step(self, mode: ModeKeys, step: int) -> bool:
        """True when step ``step`` of ``mode`` is saved."""
        return self.get_save_config(mode).should_save_step(step)

    def next_save_step(self, mode: ModeKeys, step: int) -> int | None:
        """The first step of ``mode`` from ``step`` on that is saved (None: none is)."""
        return self.get_save_config(mode).next_save_step(step)

    def merged(self, default: SaveConfig) -> SaveConfig:
        """Modes left None take ``default``'s configuration."""
        return SaveConfig(mode_save_configs={m: self.mode(m) or default.mode(m) for m in ModeKeys})
