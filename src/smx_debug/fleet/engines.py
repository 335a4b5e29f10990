"""The two engines a named query runs on: DuckDB (default; a folder or the bucket) and Athena (the stack).

DuckDB reads the dataset's Parquet files itself; S3 goes through pyarrow's S3 filesystem (wrapped for DuckDB
by fsspec), never DuckDB's httpfs extension, which downloads itself at run time. The engine lists the files
of the hour partitions the query can need, reads their footers (rows scanned; a file cut mid-write, or a
readable Parquet file whose columns are not the table's, is skipped and counted by reason) and gives DuckDB exactly those files. Athena runs the transpiled SQL in the stack's workgroup and
reports the bytes it scanned and what that cost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from botocore.config import Config
from botocore.exceptions import ClientError
from fsspec.implementations.arrow import ArrowFSWrapper

from smx_debug._lazy import lazy_module
from smx_debug.data.progress import progress_bar
from smx_debug.errors import AwsError, NotFoundError, translate_client_error
from smx_debug.fleet.root import FleetRoot
from smx_debug.fleet.schema import arrow_schema, fleet_table
from smx_debug.fleet.sql import Query, athena_literal, to_athena

if TYPE_CHECKING:
    import boto3
    import duckdb
else:
    boto3 = lazy_module("boto3")  # an Athena client only when none is handed in
    duckdb = lazy_module("duckdb")  # the DuckDB engine only

ATHENA_USD_PER_TB: Final = 5.0
ATHENA_MIN_BYTES: Final = 10_000_000  # Athena bills at least 10 MB per query
DAMAGED_FILE = "damaged Parquet files skipped"
OTHER_SCHEMA = "Parquet files of another schema skipped"


def athena_price(bytes_scanned: int) -> float:
    """What Athena bills for a query that scanned ``bytes_scanned``: $5 per TB, at least 10 MB."""
    return max(int(bytes_scanned), ATHENA_MIN_BYTES) / 1e12 * ATHENA_USD_PER_TB


@dataclass
class QueryResult:
    """A query's rows and what running it took."""

    query: str
    engine: str
    frame: pd.DataFrame
    seconds: float
    rows_scanned: int | None = None
    bytes_scanned: int | None = None
    files: int | None = None
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def price_usd(self) -> float | None:
        """Athena's price for the query (None on DuckDB)."""
        return athena_price(self.bytes_scanned or 0) if self.engine == "athena" else None

    def summary(self) -> str:
        """One line for stderr: time, what was scanned, and Athena's price."""
        parts = [f"{self.query} on {self.engine}: {len(self.frame)} rows in {self.seconds:.2f} s"]
        if self.rows_scanned is not None:
            parts.append(f"{self.rows_scanned:,} rows scanned in {self.files} files")
        if self.bytes_scanned is not None:
            parts.append(f"{self.bytes_scanned:,} bytes scanned")
        if self.price_usd is not None:
            parts.append(f"${self.price_usd:.6f} at ${ATHENA_USD_PER_TB:g}/TB (10 MB minimum)")
        if self.skipped:
            parts.append("skipped: " + ", ".join(f"{n} {reason}" for reason, n in self.skipped.items()))
        return "; ".join(parts)


def _columns(schema: pa.Schema) -> dict[str, pa.DataType]:
    """A file's columns and their types (what the writer wrote for the table, or something else)."""
    return {f.name: f.type for f in schema}


def _s3_for_duckdb(root: FleetRoot) -> Any:
    class _S3(ArrowFSWrapper):  # type: ignore[misc]
        protocol = "s3"  # DuckDB routes s3:// paths to the filesystem registered under this protocol

    return _S3(root.filesystem)


class DuckDBEngine:
    """Runs named queries with DuckDB over the dataset at ``root`` (a folder or an ``s3://`` prefix)."""

    name = "duckdb"

    def __init__(self, root: FleetRoot, *, threads: int | None = None, progress: bool | None = None) -> None:
        self.root = root
        self.threads = threads
        self.progress = progress

    def run(self, query: Query, params: Mapping[str, Any]) -> QueryResult:
        started = time.perf_counter()
        con = duckdb.connect(config={"threads": self.threads} if self.threads else {})
        try:
            if self.root.is_s3:
                con.register_filesystem(_s3_for_duckdb(self.root))
            rows = files = 0
            skipped: dict[str, int] = {}
            for table in query.tables:
                urls, n_rows = self._files(table, params.get("since_hour"), skipped)
                rows += n_rows
                files += len(urls)
                self._view(con, table, urls)
            frame = self._execute(con, query, {k: v for k, v in params.items() if k in query.parameters})
        finally:
            con.close()
        return QueryResult(query=query.name, engine=self.name, frame=frame, seconds=time.perf_counter() - started,
                           rows_scanned=rows, files=files, skipped=skipped)

    def _files(self, table: str, since_hour: str | None, skipped: dict[str, int]) -> tuple[list[str], int]:
        infos = self.root.files(table, since_hour if fleet_table(table).hour_of else None)
        if not infos and not self.root.files(table):
            raise NotFoundError(
                f"fleet table {table!r} has no data under {self.root.uri} (expected "
                f"{self.root.url(self.root.table_dir(table))}/...*.parquet): append to the dataset first "
                "(smx_debug.fleet.collect, or the scheduled evaluator)"
            )
        urls, rows = [], 0
        expected = _columns(arrow_schema(table))
        for info in infos:
            try:
                meta = pq.read_metadata(info.path, filesystem=self.root.filesystem)
                columns = _columns(meta.schema.to_arrow_schema())
            except (OSError, ValueError):
                skipped[DAMAGED_FILE] = skipped.get(DAMAGED_FILE, 0) + 1
                continue
            if columns != expected:  # readable, but not this table's: DuckDB would fail the whole query on it
                skipped[OTHER_SCHEMA] = skipped.get(OTHER_SCHEMA, 0) + 1
                continue
            rows += meta.num_rows
            urls.append(self.root.url(info.path))
        return urls, rows

    @staticmethod
    def _view(con: Any, table: str, urls: list[str]) -> None:
        spec = fleet_table(table)
        if not urls:  # no file in the partitions asked for: an empty table of the right columns
            empty = arrow_schema(table).empty_table()
            rel = con.from_arrow(empty)
            rel = rel.project("*, CAST(NULL AS VARCHAR) AS filename" + (
                ", CAST(NULL AS VARCHAR) AS hour" if spec.hour_of else ""))
        else:
            rel = con.read_parquet(urls, filename=True)
            if spec.hour_of:  # the partition value, computed from the column it partitions by (as written)
                rel = rel.project(f"*, strftime({spec.hour_of}, '%Y%m%d%H') AS hour")
        rel.create_view(table)

    def _execute(self, con: Any, query: Query, params: Mapping[str, Any]) -> pd.DataFrame:
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["frame"] = con.execute(query.sql, dict(params)).df()
            except BaseException as exc:
                box["error"] = exc

        worker = threading.Thread(target=work, name="smx-fleet-duckdb", daemon=True)
        worker.start()
        with progress_bar(query.name, 100, enabled=self.progress, unit="%") as bar:
            while worker.is_alive():
                worker.join(0.2)
                done = con.query_progress() if worker.is_alive() else 100.0
                if done and done > bar.n:
                    bar.update(min(done, 100.0) - bar.n)
        if "error" in box:
            raise box["error"]
        frame: pd.DataFrame = box["frame"]
        return frame


_ATHENA_TYPES: Final[dict[str, Callable[[pd.Series], pd.Series]]] = {
    "double": lambda s: pd.to_numeric(s, errors="coerce").astype("float64"),
    "float": lambda s: pd.to_numeric(s, errors="coerce").astype("float64"),
    "real": lambda s: pd.to_numeric(s, errors="coerce").astype("float64"),
    "bigint": lambda s: pd.to_numeric(s, errors="coerce").astype("Int64"),
    "integer": lambda s: pd.to_numeric(s, errors="coerce").astype("Int64"),
    "int": lambda s: pd.to_numeric(s, errors="coerce").astype("Int64"),
    "timestamp": lambda s: pd.to_datetime(s, errors="coerce"),
    "date": lambda s: pd.to_datetime(s, errors="coerce").dt.date,
    "boolean": lambda s: s.map({"true": True, "false": False}),
}
_DONE: Final = ("SUCCEEDED", "FAILED", "CANCELLED")


class AthenaEngine:
    """Runs named queries on Athena in the stack's workgroup (the stack's outputs name both)."""

    name = "athena"

    def __init__(self, *, database: str, workgroup: str, athena_client: Any = None,
                 client_factory: Callable[[], Any] | None = None, poll_seconds: float = 1.0,
                 timeout_seconds: float = 600.0, progress: bool | None = None) -> None:
        self.database = database
        self.workgroup = workgroup
        if athena_client is None:
            athena_client = (client_factory or (lambda: boto3.client(
                "athena", config=Config(retries={"mode": "standard"}))))()
        self.athena = athena_client
        self.poll_seconds = poll_seconds
        self.timeout_seconds = timeout_seconds
        self.progress = progress

    def request(self, query: Query, params: Mapping[str, Any]) -> dict[str, Any]:
        """The StartQueryExecution request for ``query`` with ``params`` (typed values, bound by Athena)."""
        sql, order = to_athena(query)
        request: dict[str, Any] = {
            "QueryString": sql,
            "QueryExecutionContext": {"Database": self.database},
            "WorkGroup": self.workgroup,
        }
        if order:
            request["ExecutionParameters"] = [athena_literal(params[name]) for name in order]
        return request

    def run(self, query: Query, params: Mapping[str, Any]) -> QueryResult:
        started = time.perf_counter()
        try:
            qid = self.athena.start_query_execution(**self.request(query, params))["QueryExecutionId"]
            execution = self._wait(qid, query.name)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            message = exc.response.get("Error", {}).get("Message", "")
            translated = translate_client_error(exc, operation="StartQueryExecution",
                                                where=f"Athena workgroup {self.workgroup!r}")
            if translated is not exc:
                raise translated from exc
            if "workgroup" in message.lower() and ("not found" in message.lower() or "not exist" in message.lower()):
                raise NotFoundError(f"Athena workgroup {self.workgroup!r} does not exist: is the stack deployed "
                                    "with the fleet enabled? (output FleetWorkGroup)") from exc
            raise AwsError(f"Athena StartQueryExecution: {code}: {message}", code=code,
                           operation="StartQueryExecution") from exc
        status = execution["Status"]
        if status["State"] != "SUCCEEDED":
            reason = status.get("StateChangeReason", "")
            if "TABLE_NOT_FOUND" in reason or "SCHEMA_NOT_FOUND" in reason or "does not exist" in reason:
                raise NotFoundError(f"{query.name}: Athena says {reason} (database {self.database!r})")
            raise AwsError(f"{query.name}: Athena query {qid} {status['State']}: {reason}",
                           code=status["State"], operation="StartQueryExecution")
        frame = self._results(qid)
        scanned = int(execution.get("Statistics", {}).get("DataScannedInBytes") or 0)
        return QueryResult(query=query.name, engine=self.name, frame=frame, seconds=time.perf_counter() - started,
                           bytes_scanned=scanned)

    def _wait(self, qid: str, label: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_seconds
        with progress_bar(label, 100, enabled=self.progress, unit="%") as bar:
            while True:
                execution: dict[str, Any] = self.athena.get_query_execution(QueryExecutionId=qid)["QueryExecution"]
                scanned = int(execution.get("Statistics", {}).get("DataScannedInBytes") or 0)
                bar.set_postfix_str(f"{scanned:,} bytes scanned", refresh=False)
                if execution["Status"]["State"] in _DONE:
                    return execution
                if time.monotonic() > deadline:
                    self.athena.stop_query_execution(QueryExecutionId=qid)
                    raise AwsError(f"{label}: Athena query {qid} still running after {self.timeout_seconds:.0f} s; "
                                   "stopped", code="Timeout", operation="GetQueryExecution")
                time.sleep(self.poll_seconds)

    def _results(self, qid: str) -> pd.DataFrame:
        columns: list[tuple[str, str]] = []
        rows: list[list[str | None]] = []
        first = True
        for page in self.athena.get_paginator("get_query_results").paginate(QueryExecutionId=qid):
            result = page["ResultSet"]
            if not columns:
                columns = [(c["Name"], c.get("Type", "varchar"))
                           for c in result.get("ResultSetMetadata", {}).get("ColumnInfo", [])]
            data = [[d.get("VarCharValue") for d in row.get("Data", [])] for row in result.get("Rows", [])]
            if first and data and columns and data[0] == [name for name, _ in columns]:
                data = data[1:]  # a SELECT's first row repeats the column names
            first = False
            rows.extend(data)
        frame = pd.DataFrame(rows, columns=[name for name, _ in columns]) if columns else pd.DataFrame()
        for name, kind in columns:
            convert = _ATHENA_TYPES.get(kind.lower())
            if convert is not None:
                frame[name] = convert(frame[name])
        return frame
