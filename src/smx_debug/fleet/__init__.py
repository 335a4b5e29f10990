"""The fleet: SQL over every job's utilisation and verdicts, on DuckDB (a folder or the bucket) or Athena.

The dataset (Parquet, zstd, partitioned by hour, the job a column; tables and columns owned by
:data:`smx_debug.contracts.FLEET_TABLES`) is appended job by job (:func:`append_profiler`,
:func:`append_cloudwatch`, :func:`append_verdicts`, :func:`append_job`, or :func:`collect` for many jobs), and
read by the named queries (:func:`list_queries`, :func:`run_query`). In the stack, the scheduled evaluator and
the fleet collector write it (:mod:`smx_debug.fleet.collector`). docs/fleet.md has the layout, each query,
and what a query costs on Athena.

The writing side imports pandas, pyarrow and pydantic only (the stack's functions ship it); the query side
(DuckDB, sqlglot) loads on first use.
"""

from __future__ import annotations

from smx_debug._lazy import lazy_getattr
from smx_debug.fleet.append import (
    ACTION_EVENT,
    TRIGGER_EVENT,
    AppendReport,
    Verdict,
    append_cloudwatch,
    append_job,
    append_profiler,
    append_system_minutes,
    append_verdicts,
    collect,
    last_minute,
    minutes_frame,
    verdicts_from_lines,
)
from smx_debug.fleet.root import FleetRoot, S3Options, open_root
from smx_debug.fleet.schema import TABLE_NAMES, arrow_schema

__all__ = [
    "ACTION_EVENT",
    "ENGINES",
    "TABLE_NAMES",
    "TRIGGER_EVENT",
    "AppendReport",
    "AthenaEngine",
    "DuckDBEngine",
    "FleetRoot",
    "Params",
    "Query",
    "QueryResult",
    "S3Options",
    "Verdict",
    "append_cloudwatch",
    "append_job",
    "append_profiler",
    "append_system_minutes",
    "append_verdicts",
    "arrow_schema",
    "athena_price",
    "collect",
    "execute",
    "get_query",
    "last_minute",
    "list_queries",
    "minutes_frame",
    "open_root",
    "parse_since",
    "run_query",
    "to_athena",
    "verdicts_from_lines",
]

_LAZY = {name: f"smx_debug.fleet.{module}" for name, module in {
    "AthenaEngine": "engines", "DuckDBEngine": "engines", "QueryResult": "engines", "athena_price": "engines",
    "ENGINES": "run", "execute": "run", "run_query": "run",
    "Params": "sql", "Query": "sql", "get_query": "sql", "list_queries": "sql", "parse_since": "sql",
    "to_athena": "sql",
}.items()}

__getattr__ = lazy_getattr(__name__, _LAZY)
