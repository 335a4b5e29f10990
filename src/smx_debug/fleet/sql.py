"""The named queries: one SQL text each, in DuckDB's dialect, run on Athena through sqlglot and three AST rules.

sqlglot transpiles these queries from DuckDB to Athena (Trino) as they are, except where Athena has no
equivalent and sqlglot gives no error. Each point is a rule on the parsed tree, never on the text:

- exact percentiles: ``quantile_cont(x, q)`` and ``median(x)`` become ``PERCENTILE_CONT``, which Athena lacks;
  they become ``approx_percentile(x, q)`` (Athena's estimate, rank error about 1%: docs/fleet.md);
- the file a row comes from: DuckDB's ``filename`` column is Athena's hidden ``"$path"``;
- parameters: DuckDB's named ``$since`` become Athena's positional ``?`` (ExecutionParameters, in order).

Parameters are bound by the engines (DuckDB's prepared parameters, Athena's ExecutionParameters), built from
typed values (:class:`Params`), never by formatting user text into SQL.
"""

from __future__ import annotations

import difflib
import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from importlib import resources
from typing import Any, Final, cast

import sqlglot
from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from smx_debug.errors import ConfigError, UnknownNameError
from smx_debug.fleet.defaults import DEFAULT_IDLE_THRESHOLD, DEFAULT_TOP
from smx_debug.fleet.schema import TABLE_NAMES, hour_of

# every parameter a query may use: since (timestamp), since_hour (its partition), n, idle_threshold
PARAMETERS: Final = ("since", "since_hour", "n", "idle_threshold")


@dataclass(frozen=True)
class Params:
    """Typed parameter values; :meth:`values` gives what a query binds."""

    since: datetime
    n: int = DEFAULT_TOP
    idle_threshold: float = DEFAULT_IDLE_THRESHOLD

    def __post_init__(self) -> None:
        if self.since.tzinfo is None:
            raise ConfigError(f"since must be timezone-aware (UTC), got {self.since!r}", field="since",
                              value=self.since)
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ConfigError(f"n must be an integer >= 1, got {self.n!r}", field="n", value=self.n)
        if not 0 <= float(self.idle_threshold) <= 100:
            raise ConfigError(f"idle_threshold must be a percentage 0-100, got {self.idle_threshold!r}",
                              field="idle_threshold", value=self.idle_threshold)

    def values(self) -> dict[str, Any]:
        since = self.since.astimezone(UTC).replace(tzinfo=None)
        return {"since": since, "since_hour": hour_of(self.since), "n": self.n,
                "idle_threshold": float(self.idle_threshold)}


def parse_since(text: str | datetime | timedelta, *, now: datetime | None = None) -> datetime:
    """``30d``, ``12h``, ``90m``, an ISO date/time (UTC when naive), a datetime or a timedelta -> UTC datetime."""
    try:
        return _since(text, now or datetime.now(UTC))
    except OverflowError:  # past timedelta's 999,999,999 days, or outside years 1-9999 once in UTC
        raise ConfigError(f"since {text!r} falls outside the calendar (years 1-9999 UTC); give a shorter duration "
                          "or a later date", field="since", value=text) from None


def _since(text: str | datetime | timedelta, now: datetime) -> datetime:
    if isinstance(text, timedelta):
        return now - text
    if isinstance(text, datetime):
        return text.replace(tzinfo=UTC) if text.tzinfo is None else text.astimezone(UTC)
    raw = str(text).strip()
    units = {"d": "days", "h": "hours", "m": "minutes"}
    if raw[-1:] in units and raw[:-1].isdigit():
        amount = int(raw[:-1])
        if amount < 1:
            raise ConfigError(f"since {text!r} must be at least 1{raw[-1]}", field="since", value=text)
        return now - timedelta(**{units[raw[-1]]: amount})
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise ConfigError(f"since {text!r} is not a duration like 30d, 12h, 90m nor an ISO date", field="since",
                          value=text) from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


@dataclass(frozen=True)
class Query:
    """A named query: its DuckDB SQL text, the first comment as its description, its tables and parameters."""

    name: str
    description: str
    sql: str

    @property
    def tree(self) -> exp.Expression:
        return _parse(self.sql)

    @property
    def parameters(self) -> tuple[str, ...]:
        """Named parameters in the order of the SQL's text, repeated where the SQL repeats them."""
        return _text_order(self.tree, "duckdb")

    @property
    def tables(self) -> tuple[str, ...]:
        """The dataset tables the query reads."""
        names = {t.name for t in self.tree.find_all(exp.Table)}
        return tuple(t for t in TABLE_NAMES if t in names)


@cache
def _parse(sql: str) -> exp.Expression:
    tree: Any = sqlglot.parse_one(sql, read="duckdb")
    return cast(exp.Expression, tree)


def _text_order(tree: exp.Expression, dialect: str) -> tuple[str, ...]:
    """The named parameters in the order ``tree`` prints them in ``dialect``: positional ``?`` bind in that
    order. Read from the printed text's tokens (the tree's walk order is not always the text's)."""
    names = {str(p.this) for p in tree.find_all(exp.Placeholder) if p.this}
    tokens = sqlglot.tokenize(tree.sql(dialect=dialect), read=dialect)
    out = []
    for prev, tok in itertools.pairwise(tokens):
        if prev.token_type in (TokenType.PARAMETER, TokenType.COLON) and tok.text in names:
            out.append(tok.text)
    return tuple(out)


@cache
def _queries() -> dict[str, Query]:
    out: dict[str, Query] = {}
    folder = resources.files("smx_debug.fleet").joinpath("queries")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        text = entry.read_text()
        comments = []
        for line in text.splitlines():
            if not line.startswith("--"):
                break
            comments.append(line[2:].strip())
        name = entry.name[: -len(".sql")]
        query = Query(name=name, description=" ".join(comments), sql=text)
        unknown = sorted(set(query.parameters) - set(PARAMETERS))
        if unknown:  # our own files: a typo in one is a bug found by the tests
            raise ConfigError(f"query {name!r} uses unknown parameters {unknown}", field=name, value=unknown)
        out[name] = query
    return out


def list_queries() -> list[Query]:
    """Every named query, by name."""
    return list(_queries().values())


def get_query(name: str) -> Query:
    """One named query; UnknownNameError suggests the closest name."""
    queries = _queries()
    if name in queries:
        return queries[name]
    close = difflib.get_close_matches(name, list(queries), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f" (queries: {', '.join(queries)})"
    raise UnknownNameError(f"no fleet query named {name!r}{hint}", name=name, suggestion=close[0] if close else None)


# -- the AST rules -----------------------------------------------------------------------------------------

def _percentile_rule(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.PercentileCont):
        return exp.ApproxQuantile(this=node.this.copy(), quantile=node.expression.copy())
    if isinstance(node, exp.Median):
        return exp.ApproxQuantile(this=node.this.copy(), quantile=exp.Literal.number(0.5))
    return node


def _path_rule(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Column) and node.name == "filename" and not node.this.quoted:
        return exp.column(exp.to_identifier("$path", quoted=True), table=node.table or None)
    return node


def _placeholder_rule(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Placeholder) and node.this:
        return exp.Placeholder()
    return node


ATHENA_RULES: Final = (_percentile_rule, _path_rule, _placeholder_rule)


def to_athena(query: Query) -> tuple[str, tuple[str, ...]]:
    """The query in Athena's dialect and the parameter names its ``?`` take, in order."""
    tree = query.tree.copy()
    for rule in ATHENA_RULES[:-1]:
        tree = tree.transform(rule)
    order = _text_order(tree, "athena")  # the named form prints the same tree, so its order is the ?'s order
    tree = tree.transform(_placeholder_rule)
    return tree.sql(dialect="athena", pretty=True), order


def athena_literal(value: Any) -> str:
    """A typed value as the SQL literal Athena's ExecutionParameters take (never user text spliced in SQL)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, datetime):
        return f"TIMESTAMP '{value.strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise ConfigError(f"cannot bind {value!r} as an Athena parameter", field="parameter", value=value)
