"""The fleet: SQL over every job's utilisation and verdicts, on DuckDB (a folder or the bucket) or Athena.

The dataset (Parquet, zstd, partitioned by hour, the job a column; tables and columns owned by
:data:`smx_debug.contracts.FLEET_TABLES`) is appended job by job (:func:`append_profiler`,
:func:`append_cloudwatch`, :func:`append_verdicts`, :func:`append_job`, or :func:`collect` for many jobs), and
read by the named queries (:func:`list_queries`, :func:`run_query`). docs/fleet.md has the layout, each query,
and what a query costs on Athena.
"""

from __future__ import annotations

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
    verdicts_from_response,
)
from smx_debug.fleet.engines import AthenaEngine, DuckDBEngine, QueryResult, athena_price
from smx_debug.fleet.root import FleetRoot, S3Options, open_root
from smx_debug.fleet.run import ENGINES, execute, run_query
from smx_debug.fleet.schema import TABLE_NAMES, arrow_schema
from smx_debug.fleet.sql import Params, Query, get_query, list_queries, parse_since, to_athena

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
    "verdicts_from_response",
]
