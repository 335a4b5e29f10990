"""The fleet queries' defaults, owned here (the standard library and contracts only): :func:`smx_debug.fleet.execute` applies them,
and the CLI's help says them without loading the query side."""

from __future__ import annotations

from datetime import timedelta
from typing import Final, Literal

from smx_debug.contracts import DEFAULT_STACK_NAME

Engine = Literal["duckdb", "athena"]
ENGINES: Final[tuple[Engine, ...]] = ("duckdb", "athena")
DEFAULT_ENGINE: Final[Engine] = "duckdb"
DEFAULT_SINCE: Final = timedelta(days=30)
DEFAULT_TOP: Final = 10
DEFAULT_IDLE_THRESHOLD: Final = 10.0  # percent: LowGPUUtilization's threshold_p5 default
DEFAULT_STACK: Final = DEFAULT_STACK_NAME  # the stack Athena's database and workgroup are named after
