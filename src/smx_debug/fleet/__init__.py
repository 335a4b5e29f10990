"""The fleet: SQL over every job's utilisation and verdicts, on DuckDB (a folder or the bucket) or Athena.

The dataset (Parquet, zstd, partitioned by hour, the job a column; tables and columns owned by
:data:`smx_debug.contracts.FLEET_TABLES`) is appended job by job (:func:`append_profiler`,
:func:`append_cloudwatch`, :func:`append_verdicts`, :func:`append_job`, or :func:`collect` for many jobs), and
read by the named queries (:func:`list_queries`, :func:`run_query`). In the stack, the scheduled evaluator and
the fleet collector write it (:mod:`smx_debug.fleet.collector`). docs/fleet.md has the layout, each query,
and what a query costs on Athena.

Every name loads its module on first use: the writing side imports pandas, pyarrow and pydantic only (the
stack's functions ship it), the query side DuckDB and sqlglot; ``smx_debug.fleet.defaults`` (the queries'
defaults, which the CLI's help says) loads none of them.
"""

from __future__ import annotations

from smx_debug._lazy import lazy_getattr

__all__ = [
    "ACTION_EVENT",
    "TRIGGER_EVENT",
    "AppendReport",
    "FleetRoot",
    "QueryResult",
    "S3Options",
    "Verdict",
    "append_cloudwatch",
    "append_job",
    "append_profiler",
    "append_system_minutes",
    "append_verdicts",
    "collect",
    "execute",
    "last_minute",
    "list_queries",
    "open_root",
    "run_query",
    "to_athena",
]

_LAZY = {name: f"smx_debug.{module}" for name, module in {
    "ACTION_EVENT": "actions.verdict_log", "TRIGGER_EVENT": "actions.verdict_log",  # the verdicts' event kinds
    "AppendReport": "fleet.append", "Verdict": "fleet.append",
    "append_cloudwatch": "fleet.append", "append_job": "fleet.append", "append_profiler": "fleet.append",
    "append_system_minutes": "fleet.append", "append_verdicts": "fleet.append", "collect": "fleet.append",
    "last_minute": "fleet.append", "FleetRoot": "fleet.root", "S3Options": "fleet.root", "open_root": "fleet.root",
    "QueryResult": "fleet.engines", "execute": "fleet.run", "run_query": "fleet.run", "list_queries": "fleet.sql",
    "to_athena": "fleet.sql",
}.items()}

__getattr__ = lazy_getattr(__name__, _LAZY)
