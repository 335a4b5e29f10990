"""`smx-debug fleet QUERY`: a named fleet query on DuckDB (a folder or the bucket) or Athena; `fleet list`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from smx_debug.cli._args import check_output_file, positive_int
from smx_debug.cli._output import add_out_option, as_table, as_text, emit, output_format

__all__ = ["register"]


def _threshold(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage, got {text!r}") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"must be a percentage 0-100, got {text!r}")
    return value


def _list(args: argparse.Namespace) -> int:
    from smx_debug.fleet import list_queries

    queries = list_queries()
    fmt = output_format(args)
    if fmt == "json":
        emit([{"name": q.name, "description": q.description} for q in queries], args)
    else:
        rows = [(q.name, q.description) for q in queries]
        emit(as_text(rows) if fmt == "text" else as_table(rows), args)
    return 0


def _run(args: argparse.Namespace) -> int:
    check_output_file(args.out, "--out")
    if args.query == "list":
        return _list(args)
    from smx_debug.errors import ConfigError
    from smx_debug.fleet import execute, get_query, parse_since

    get_query(args.query)  # an unknown name fails before any work
    parse_since(args.since)
    if args.engine == "duckdb" and args.root is None:
        raise ConfigError("--root is required with --engine duckdb: the fleet dataset's folder or "
                          "s3://bucket/prefix (the stack's bucket: s3://<OutputBucketName>/smx-debug/fleet/)",
                          field="--root", value=None)
    result = execute(args.query, since=args.since, n=args.top, idle_threshold=args.idle_threshold,
                     engine=args.engine, root=args.root, endpoint_url=args.endpoint_url, stack_name=args.stack,
                     database=args.database, workgroup=args.workgroup)
    frame = result.frame
    fmt = output_format(args)
    if fmt == "json":
        emit(frame.to_json(orient="records", date_format="iso", indent=2), args)
    elif fmt == "text":
        emit(frame.to_csv(sep="\t", index=False, header=False, date_format="%Y-%m-%dT%H:%M:%S").rstrip("\n"), args)
    else:
        emit(frame.to_string(index=False) if len(frame) else "(no rows)", args)
    print(result.summary(), file=sys.stderr)
    return 0


def register(subparsers: Any) -> Any:
    """Add the `fleet` command."""
    parser = subparsers.add_parser(
        "fleet", help="SQL over every job's utilisation and verdicts (DuckDB or Athena)",
        description="Run a named fleet query (`smx-debug fleet list` names them) over the fleet dataset: with "
        "DuckDB over a folder or s3:// prefix (--root), or with Athena in the deployed stack's workgroup. "
        "Prints the rows (--output table, text or json), then what the query scanned and, on Athena, its price. docs/fleet.md.",
    )
    parser.add_argument("query", help="a named query, or `list`")
    parser.add_argument("--since", default="30d", help="how far back: 30d, 12h, 90m or an ISO date (default 30d)")
    parser.add_argument("--engine", choices=("duckdb", "athena"), default="duckdb")
    parser.add_argument("--root", metavar="PATH|s3://...", help="the dataset (DuckDB): a folder or s3://bucket/prefix")
    parser.add_argument("--endpoint-url", help="S3 endpoint for an s3:// root (e.g. the local AWS)")
    parser.add_argument("--top", type=positive_int, default=10, metavar="N", help="jobs in top_* queries (10)")
    parser.add_argument("--idle-threshold", type=_threshold, default=10.0, metavar="PCT",
                        help="a GPU-minute under this mean utilisation is idle (default 10)")
    parser.add_argument("--stack", default="SmxDebugGuard", help="the deployed stack (Athena's database and workgroup)")
    parser.add_argument("--database", help="Athena: the Glue database (default: the stack's)")
    parser.add_argument("--workgroup", help="Athena: the workgroup (default: the stack's)")
    add_out_option(parser, "the rows (in the --output format)")
    parser.set_defaults(func=_run)
    return parser
