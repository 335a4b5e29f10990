"""`smx-debug fleet QUERY`: a named fleet query on DuckDB (a folder or the bucket) or Athena; `fleet list`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from smx_debug.cli._args import check_output_file
from smx_debug.cli._aws import Clients
from smx_debug.cli._output import add_out_option, as_table, as_text, emit, output_format

__all__ = ["register"]


def _list(args: argparse.Namespace) -> int:
    from smx_debug.fleet import list_queries

    queries = list_queries()
    fmt = output_format(args)
    if fmt == "json":
        emit([{"name": q.name, "description": q.description} for q in queries], to=args.out)
    else:
        rows = [(q.name, q.description) for q in queries]
        emit(as_text(rows) if fmt == "text" else as_table(rows), to=args.out)
    return 0


# the options passed on to smx_debug.fleet.execute, by its parameter names: given ones only, so its defaults
# and its checks (one owner) apply; its ConfigErrors are told with the option's name
_OPTIONS = {"since": "--since", "n": "--top", "idle_threshold": "--idle-threshold", "engine": "--engine",
            "root": "--root", "endpoint_url": "--endpoint-url", "stack_name": "--stack", "database": "--database",
            "workgroup": "--workgroup"}


def _run(args: argparse.Namespace) -> int:
    check_output_file(args.out, "--out")
    if args.query == "list":
        return _list(args)
    from smx_debug import fleet
    from smx_debug.errors import ConfigError

    given = {name: getattr(args, name) for name in _OPTIONS if getattr(args, name) is not None}
    given.update(Clients(args).injected("athena"))
    try:
        result = fleet.execute(args.query, **given)
    except ConfigError as exc:
        option = _OPTIONS.get(str(exc.field))
        if option is None:
            raise
        raise ConfigError(f"{exc} ({option})", field=option, value=exc.value) from exc
    frame = result.frame
    fmt = output_format(args)
    if fmt == "json":
        emit(frame.to_json(orient="records", date_format="iso", indent=2), to=args.out)
    elif fmt == "text":
        emit(frame.to_csv(sep="\t", index=False, header=False, date_format="%Y-%m-%dT%H:%M:%S").rstrip("\n"), to=args.out)
    else:
        emit(frame.to_string(index=False) if len(frame) else "(no rows)", to=args.out)
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
    # no defaults here: smx_debug.fleet's apply (fleet.sql's DEFAULT_SINCE, DEFAULT_TOP, DEFAULT_IDLE_THRESHOLD,
    # fleet.run's DEFAULT_STACK), and the help says them; a test keeps the help and the library in step
    parser.add_argument("--since", help="how far back: 30d, 12h, 90m or an ISO date (default 30d)")
    parser.add_argument("--engine", metavar="duckdb|athena", help="the engine (default duckdb)")
    parser.add_argument("--root", metavar="PATH|s3://...", help="the dataset (DuckDB): a folder or s3://bucket/prefix")
    parser.add_argument("--top", type=int, dest="n", metavar="N", help="jobs in top_* queries (default 10)")
    parser.add_argument("--idle-threshold", type=float, metavar="PCT",
                        help="a GPU-minute under this mean utilisation is idle (default 10)")
    parser.add_argument("--stack", dest="stack_name",
                        help="the deployed stack (Athena's database and workgroup; default SmxDebugGuard)")
    parser.add_argument("--database", help="Athena: the Glue database (default: the stack's)")
    parser.add_argument("--workgroup", help="Athena: the workgroup (default: the stack's)")
    add_out_option(parser, "the rows (in the --output format)")
    parser.set_defaults(func=_run)
    return parser
