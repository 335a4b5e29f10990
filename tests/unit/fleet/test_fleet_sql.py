"""Every named query transpiles to Athena's dialect through the AST rules and parses there; parameters bind
as typed literals, never as formatted user text."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
import sqlglot
from sqlglot import exp

from smx_debug.errors import ConfigError, UnknownNameError
from smx_debug.fleet.sql import Params, athena_literal, get_query, list_queries, parse_since, to_athena

QUERIES = [q.name for q in list_queries()]


def test_list_queries_names_the_issues_queries() -> None:
    assert set(QUERIES) >= {"idle_gpu_hours", "rules_fired", "top_wasted_jobs", "utilization_percentiles",
                            "time_to_stop", "dataset_files"}


@pytest.mark.parametrize("name", QUERIES)
def test_to_athena_every_query_parses_in_athenas_dialect(name: str) -> None:
    sql, order = to_athena(get_query(name))
    tree = sqlglot.parse_one(sql, read="athena")
    assert not list(tree.find_all(exp.PercentileCont, exp.Median)), "Athena has no PERCENTILE_CONT"
    assert not [c for c in tree.find_all(exp.Column) if c.name == "filename"]
    placeholders = list(tree.find_all(exp.Placeholder))
    assert len(placeholders) == len(order) and all(not p.this for p in placeholders)
    assert order == get_query(name).parameters


def test_to_athena_percentile_rule_makes_approx_percentile() -> None:
    sql, _ = to_athena(get_query("utilization_percentiles"))
    assert "PERCENTILE_CONT" not in sql
    tree = sqlglot.parse_one(sql, read="athena")
    quantiles = [q.args["quantile"].this for q in tree.find_all(exp.ApproxQuantile)]
    assert sorted(quantiles) == ["0.5", "0.9", "0.95", "0.99"]  # median -> 0.5


def test_to_athena_path_rule_makes_dollar_path() -> None:
    sql, _ = to_athena(get_query("dataset_files"))
    tree = sqlglot.parse_one(sql, read="athena")
    paths = [c for c in tree.find_all(exp.Column) if c.name == "$path"]
    assert len(paths) == 2 and all(c.this.quoted for c in paths)  # SELECT and GROUP BY


def test_without_the_rules_sqlglot_writes_percentile_cont_for_athena() -> None:
    # the reason for the rule: plain transpilation gives SQL Athena cannot run, with no error
    plain = sqlglot.transpile(get_query("utilization_percentiles").sql, read="duckdb", write="athena")[0]
    assert "PERCENTILE_CONT" in plain


def test_params_values_since_hour_is_the_partition_of_since() -> None:
    values = Params(since=datetime(2026, 11, 2, 23, 5, tzinfo=UTC), n=3).values()
    assert values == {"since": datetime(2026, 11, 2, 23, 5), "since_hour": "2026110223", "n": 3,
                      "idle_threshold": 10.0}


@pytest.mark.parametrize(("value", "literal"), [
    (datetime(2026, 11, 2, 23, 5, 7, 123000), "TIMESTAMP '2026-11-02 23:05:07.123'"),
    ("2026110223", "'2026110223'"),
    ("x' OR '1'='1", "'x'' OR ''1''=''1'"),
    (5, "5"),
    (10.5, "10.5"),
])
def test_athena_literal_typed_values(value: object, literal: str) -> None:
    assert athena_literal(value) == literal


@pytest.mark.parametrize(("text", "expected"), [
    ("30d", datetime(2026, 10, 4, 12, tzinfo=UTC)),
    ("12h", datetime(2026, 11, 3, 0, tzinfo=UTC)),
    ("90m", datetime(2026, 11, 3, 10, 30, tzinfo=UTC)),
    ("2026-11-01", datetime(2026, 11, 1, tzinfo=UTC)),
])
def test_parse_since_durations_and_dates(text: str, expected: datetime) -> None:
    assert parse_since(text, now=datetime(2026, 11, 3, 12, tzinfo=UTC)) == expected


@pytest.mark.parametrize("text", ["3x", "0d", "-1d", "yesterday", ""])
def test_parse_since_bad_value_names_since(text: str) -> None:
    with pytest.raises(ConfigError, match="since"):
        parse_since(text)


@pytest.mark.parametrize(("kwargs", "field"), [({"n": 0}, "n"), ({"n": True}, "n"), ({"idle_threshold": 101}, "idle")])
def test_params_bad_value_names_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        Params(since=datetime(2026, 1, 1, tzinfo=UTC), **kwargs)  # type: ignore[arg-type]


def test_get_query_unknown_suggests_the_closest() -> None:
    with pytest.raises(UnknownNameError, match="idle_gpu_hours"):
        get_query("idle_gpu_hour")


@pytest.mark.parametrize("text", ["99999999999d", "999999d", "99999999999h", "9" * 30 + "m", "0001-01-01T00:00:00+01:00"])
def test_parse_since_duration_past_the_calendar_names_since(text: str) -> None:
    # was an OverflowError traceback from timedelta (issue 29, item 16)
    with pytest.raises(ConfigError, match=re.escape(f"since '{text}'")):
        parse_since(text, now=datetime(2026, 11, 3, 12, tzinfo=UTC))
