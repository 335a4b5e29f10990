"""The modes a step is saved in, numbered as smdebug numbers them (``smdebug.modes``)."""

from __future__ import annotations

from enum import IntEnum

from smx_debug.errors import ConfigError


class ModeKeys(IntEnum):
    """The mode of a saved step: the value is what the event files and index files carry."""

    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4


# smdebug users write ``smd.modes.TRAIN``: the same enum under the name they know.
modes = ModeKeys


def parse_mode(value: object, *, field: str = "mode") -> ModeKeys:
    """A :class:`ModeKeys` from itself, its number (1-4) or its name in any case (``"train"``).

    Raises:
        ConfigError: naming ``field`` and the value when it is none of them.
    """
    if isinstance(value, ModeKeys):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return ModeKeys(value)
        except ValueError:
            pass
    elif isinstance(value, str):
        name = value.strip().upper()
        if name.startswith("MODEKEYS."):
            name = name[len("MODEKEYS."):]
        if name in ModeKeys.__members__:
            return ModeKeys[name]
    choices = ", ".join(f"{m.name} ({m.value})" for m in ModeKeys)
    raise ConfigError(f"{field} must be one of {choices}, got {value!r}", field=field, value=value)
