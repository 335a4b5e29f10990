"""Idempotent writes: one Parquet file (zstd) per table, hour and job, merged by the table's key.

An append reads the job's file of each hour it touches, replaces rows with the same key (the table's
contract), adds the new ones and writes the file back: a rerun, or a minute read again once complete, never
doubles a row, and other jobs' files are never touched (an evaluator can append job by job, in parallel). A
file cut mid-write (unreadable Parquet) is counted by reason in the report and replaced by the new rows.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow.fs import FileType

from smx_debug.contracts import FLEET_HOUR_FORMAT
from smx_debug.errors import DataError
from smx_debug.fleet.root import FleetRoot
from smx_debug.fleet.schema import arrow_schema, fleet_table

DAMAGED_FILE = "damaged Parquet files replaced"


@dataclass
class WriteReport:
    """What one append wrote: rows new and replaced, files written, problems by reason."""

    rows_added: int = 0
    rows_replaced: int = 0
    files_written: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def count(self, reason: str, n: int = 1) -> None:
        if n:
            self.skipped[reason] = self.skipped.get(reason, 0) + n

    def merge(self, other: WriteReport) -> None:
        self.rows_added += other.rows_added
        self.rows_replaced += other.rows_replaced
        self.files_written += other.files_written
        for reason, n in other.skipped.items():
            self.count(reason, n)


def read_file(root: FleetRoot, path: str, table: str) -> pa.Table | None:
    """The file's rows, None when it does not exist; DataError when it is not readable Parquet."""
    if root.filesystem.get_file_info(path).type != FileType.File:
        return None
    try:
        with root.filesystem.open_input_file(path) as source:
            return pq.read_table(source, schema=arrow_schema(table))
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"{root.url(path)}: not readable Parquet ({exc})") from exc


def _frame_to_table(df: pd.DataFrame, table: str) -> pa.Table:
    schema = arrow_schema(table)
    missing = [c for c in schema.names if c not in df.columns]
    if missing:
        raise DataError(f"rows for fleet table {table!r} lack columns {missing}")
    return pa.Table.from_pandas(df[schema.names], schema=schema, preserve_index=False)


def write_rows(root: FleetRoot, table: str, rows: pd.DataFrame) -> WriteReport:
    """Merge ``rows`` (the table's columns) into the dataset, by job and hour; returns what changed."""
    spec = fleet_table(table)
    report = WriteReport()
    if rows.empty:
        return report
    if spec.hour_of is not None:
        hours = pd.to_datetime(rows[spec.hour_of]).dt.strftime(FLEET_HOUR_FORMAT[0])
    else:
        hours = pd.Series([None] * len(rows), index=rows.index, dtype="object")
    key = list(spec.key)
    for (job, hour), part in rows.groupby([rows["job"], hours], sort=True, dropna=False):
        path = root.file_path(table, str(job), hour if isinstance(hour, str) else None)
        new = _frame_to_table(part, table)
        try:
            old = read_file(root, path, table)
        except DataError:
            report.count(DAMAGED_FILE)
            old = None
        merged = new.to_pandas()
        replaced = 0
        if old is not None and old.num_rows:
            before = old.to_pandas()
            combined = pd.concat([before, merged], ignore_index=True)
            keys = combined[key].astype("object").where(combined[key].notna(), "\0")
            dup_of_new = keys.duplicated(keep="last")
            replaced = int(dup_of_new.iloc[: len(before)].sum())
            merged = combined[~dup_of_new]
        else:
            keys = merged[key].astype("object").where(merged[key].notna(), "\0")
            merged = merged[~keys.duplicated(keep="last")]
        merged = merged.sort_values(key, kind="stable")
        out = _frame_to_table(merged, table)
        _write_atomic(root, path, out)
        report.rows_added += out.num_rows - (old.num_rows if old is not None else 0)
        report.rows_replaced += replaced
        report.files_written += 1
    return report


def _write_atomic(root: FleetRoot, path: str, table: pa.Table) -> None:
    parent = path.rsplit("/", 1)[0]
    fs = root.filesystem
    if root.is_s3:  # PutObject replaces the object whole: readers see the old or the new file, never a part
        pq.write_table(table, path, filesystem=fs, compression="zstd")
        return
    fs.create_dir(parent, recursive=True)
    tmp = f"{parent}/.{uuid.uuid4().hex}.tmp"  # not *.parquet: readers never list a file being written
    pq.write_table(table, tmp, filesystem=fs, compression="zstd")
    fs.move(tmp, path)
