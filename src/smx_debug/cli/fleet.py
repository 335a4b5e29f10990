"""`smx-debug fleet QUERY` (options in ``cli._parser``): a named fleet query on DuckDB (a folder or the bucket) or Athena; `fleet list`."""

from __future__ import annotations

import argparse
import sys

from smx_debug import fleet
from smx_debug.cli._args import check_output_file
from smx_debug.cli._aws import Clients
from smx_debug.cli._output import as_table, as_text, emit, output_format
from smx_debug.errors import ConfigError


def _list(args: argparse.Namespace) -> int:
    queries = fleet.list_queries()
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


def run(args: argparse.Namespace) -> int:
    check_output_file(args.out, "--out")
    if args.query == "list":
        return _list(args)
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
