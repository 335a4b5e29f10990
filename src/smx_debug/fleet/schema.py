"""The fleet dataset's Arrow schemas, built from the one owner of its columns (:data:`contracts.FLEET_TABLES`).

Timestamps are naive UTC at millisecond precision: what Athena's ``timestamp`` reads from Parquet and what
DuckDB reads back without a time-zone setting.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Final

import pyarrow as pa

from smx_debug.contracts import FLEET_HOUR_FORMAT, FLEET_TABLES, FleetTable
from smx_debug.errors import UnknownNameError

TABLE_NAMES: Final = tuple(FLEET_TABLES)
_TYPES: Final = {
    "string": pa.string(),
    "double": pa.float64(),
    "bigint": pa.int64(),
    "int": pa.int32(),
    "timestamp": pa.timestamp("ms"),
}


def fleet_table(name: str) -> FleetTable:
    """The table's contract; UnknownNameError names the tables there are."""
    try:
        return FLEET_TABLES[name]
    except KeyError:
        raise UnknownNameError(f"fleet table {name!r} does not exist (tables: {', '.join(TABLE_NAMES)})",
                               name=name) from None


@cache
def arrow_schema(name: str) -> pa.Schema:
    """The Parquet schema of one table's files (the hour partition is in the path, not in the file)."""
    return pa.schema([(col, _TYPES[kind]) for col, kind in fleet_table(name).columns])


def hour_of(when: datetime) -> str:
    """The partition value (``yyyyMMddHH``, UTC) of a time; naive times are UTC."""
    aware = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return aware.strftime(FLEET_HOUR_FORMAT[0])


