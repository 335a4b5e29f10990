"""Running a named query from Python: :func:`run_query` (a DataFrame) and :func:`execute` (with its cost)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

import pandas as pd

from smx_debug.contracts import fleet_database_name, fleet_workgroup_name
from smx_debug.errors import ConfigError
from smx_debug.fleet.defaults import (
    DEFAULT_ENGINE,
    DEFAULT_IDLE_THRESHOLD,
    DEFAULT_SINCE,
    DEFAULT_STACK,
    DEFAULT_TOP,
    ENGINES,
    Engine,
)
from smx_debug.fleet.engines import AthenaEngine, DuckDBEngine, QueryResult
from smx_debug.fleet.root import FleetRoot, S3Options, open_root
from smx_debug.fleet.sql import Params, get_query, parse_since


def execute(
    name: str,
    *,
    since: str | datetime | timedelta = DEFAULT_SINCE,
    n: int = DEFAULT_TOP,
    idle_threshold: float = DEFAULT_IDLE_THRESHOLD,
    engine: Engine = DEFAULT_ENGINE,
    root: FleetRoot | str | os.PathLike[str] | None = None,
    endpoint_url: str | None = None,
    stack_name: str = DEFAULT_STACK,
    database: str | None = None,
    workgroup: str | None = None,
    athena_client: Any = None,
    threads: int | None = None,
    progress: bool | None = None,
    now: datetime | None = None,
) -> QueryResult:
    """Run the named query ``name`` and return its rows with what the run scanned (and cost, on Athena).

    Args:
        since: how far back (``30d``, ``12h``, an ISO date, a datetime or a timedelta).
        n: how many jobs the ``top_*`` queries return.
        idle_threshold: a GPU-minute below this mean utilisation (percent) is idle.
        engine: ``duckdb`` over ``root`` (a folder or ``s3://bucket/prefix``), or ``athena`` in the stack's
            workgroup (``stack_name``'s, or ``database``/``workgroup``).
        endpoint_url: the S3 endpoint for DuckDB over ``s3://`` (the local AWS); default AWS's.
    """
    query = get_query(name)
    params = Params(since=parse_since(since, now=now), n=n, idle_threshold=idle_threshold).values()
    if engine == "duckdb":
        if root is None:
            raise ConfigError("root is required with the duckdb engine: a folder or s3://bucket/prefix of the fleet "
                              "dataset", field="root", value=None)
        fr = root if isinstance(root, FleetRoot) else open_root(root, s3=S3Options(endpoint_url=endpoint_url))
        return DuckDBEngine(fr, threads=threads, progress=progress).run(query, params)
    if engine == "athena":
        athena = AthenaEngine(database=database or fleet_database_name(stack_name),
                              workgroup=workgroup or fleet_workgroup_name(stack_name), athena_client=athena_client,
                              progress=progress)
        return athena.run(query, params)
    raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}", field="engine", value=engine)


def run_query(name: str, **kwargs: Any) -> pd.DataFrame:
    """:func:`execute`'s rows as a DataFrame; what it scanned in ``df.attrs`` (``rows_scanned``,
    ``bytes_scanned``, ``price_usd``, ``seconds``, ``skipped``).

    Example::

        from smx_debug import fleet
        df = fleet.run_query("idle_gpu_hours", since="30d", root="s3://my-bucket/smx-debug/fleet/")
    """
    result = execute(name, **kwargs)
    frame = result.frame
    frame.attrs.update({"query": result.query, "engine": result.engine, "seconds": result.seconds,
                        "rows_scanned": result.rows_scanned, "bytes_scanned": result.bytes_scanned,
                        "files": result.files, "price_usd": result.price_usd, "skipped": dict(result.skipped)})
    return frame
