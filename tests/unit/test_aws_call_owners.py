"""One owner per AWS read contract (issue 21): GetMetricData and DescribeTrainingJob-with-translation.

Read with ``ast`` from the source of src/smx_debug. ``local/`` (the local AWS's emulation) answers these calls, so it
is not scanned; nor is ``actions/`` for DescribeTrainingJob: its calls are its own by design (they decide, not read).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "smx_debug"

# GetMetricData: the one module that calls it (data.cloudwatch_batch.read_metrics and data.cloudwatch's
# instance_metrics/training_metrics both go through data.cloudwatch.metric_data_results).
GET_METRIC_DATA_OWNER = "smx_debug/data/cloudwatch.py"
# DescribeTrainingJob: data.sources.describe_job owns the call with error translation. The others call it plainly
# (no try/except around it) and are listed with why.
DESCRIBE_OWNER = "smx_debug/data/sources.py"
DESCRIBE_PLAIN = {
    "smx_debug/htmlreport/outcome.py": "fetch_outcome with an injected client; errors propagate to the caller",
    "smx_debug/cli/report.py": "a tensor-only job's facts for the report; the CLI reports the raw error",
}


def _scanned(*skipped: str) -> list[tuple[str, ast.Module]]:
    """Every module of src/smx_debug but ``local/`` and the ``skipped`` packages, as (path, tree)."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if len(rel.parts) > 1 and rel.parts[0] in {"local", *skipped}:
            continue
        out.append((path.relative_to(PACKAGE.parent).as_posix(), ast.parse(path.read_text(encoding="utf-8"))))
    return out


def _names(tree: ast.AST, name: str) -> list[int]:
    """Lines that use ``name`` as an attribute (``client.name``) or a string (``get_paginator("name")``)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if (isinstance(node, ast.Attribute) and node.attr == name)
        or (isinstance(node, ast.Constant) and node.value == name)
    ]


def _in_try(tree: ast.AST, name: str) -> list[int]:
    """Lines that use ``name`` inside the body of a ``try`` that has an ``except`` (an error translated there)."""
    return [line for node in ast.walk(tree) if isinstance(node, ast.Try) and node.handlers
            for stmt in node.body for line in _names(stmt, name)]


def test_get_metric_data_is_called_by_one_module() -> None:
    callers = [f"{rel}:{line}" for rel, tree in _scanned() if rel != GET_METRIC_DATA_OWNER
               for line in _names(tree, "get_metric_data")]
    assert not callers, f"GetMetricData outside {GET_METRIC_DATA_OWNER} (use its metric_data_results):\n" + "\n".join(
        callers)


def test_get_metric_data_owner_still_calls_it() -> None:
    owner = dict(_scanned())[GET_METRIC_DATA_OWNER]
    assert _names(owner, "get_metric_data")


def test_describe_training_job_with_translation_lives_only_in_data_sources() -> None:
    translated = [f"{rel}:{line}" for rel, tree in _scanned("actions") if rel != DESCRIBE_OWNER
                  for line in _in_try(tree, "describe_training_job")]
    assert not translated, "DescribeTrainingJob translated outside data.sources (use describe_job):\n" + "\n".join(
        translated)
    assert _in_try(dict(_scanned("actions"))[DESCRIBE_OWNER], "describe_training_job")


def test_describe_training_job_plain_calls_are_the_listed_ones() -> None:
    callers = {rel for rel, tree in _scanned("actions") if _names(tree, "describe_training_job")} - {DESCRIBE_OWNER}
    assert callers == set(DESCRIBE_PLAIN), "list a new plain DescribeTrainingJob caller (or use describe_job)"


# ---------------------------------------------------------------------------------------------------------------
# Every AWS call the Lambda assets ship has a row in docs/iam-calls.md ("Every call in the code", issue 29 item 4).
ROOT = PACKAGE.parents[1]
CALLS_DOC = ROOT / "docs" / "iam-calls.md"
CALLS_SECTION = "## Every call in the code"
# botocore's service name of the clients the package makes.
SERVICES = ("sagemaker", "sns", "dynamodb", "s3", "cloudwatch", "sqs", "stepfunctions", "athena")
# How the code names its clients (the receiver of the call, its last name); ``clients("<service>")`` names itself.
CLIENT_NAMES = {"s3": "s3", "s3_client": "s3", "_s3": "s3", "sagemaker": "sagemaker", "sm": "sagemaker",
                "cloudwatch": "cloudwatch", "sns": "sns", "sqs": "sqs", "states": "stepfunctions", "_ddb": "dynamodb",
                "dynamodb": "dynamodb", "athena": "athena"}
# Receivers whose method shares a name with an AWS operation but that are not clients.
NOT_CLIENTS = {
    "note": "actions.notify.Notification.publish, which calls sns.publish in actions/notify.py",
    "re": "the re module", "pattern": "a compiled regex", "p": "a compiled regex", "c": "a compiled regex",
    "self": "a method of the module's own class (config/actions.py stop_job, fleet/engines.py query)",
    "result": "fleet.run's query result",
    "skipped": "a compiled regex (rules/own/_shared.py judged_tensors: the tensors a rule skips)",
    "kept": "a compiled regex (rules/own/_shared.py judged_tensors: the only tensors a rule judges)",
}
_CONSTANT = re.compile(r"^_?[A-Z][A-Z0-9_]*$")  # module constants: compiled regexes (_FILE_RE.search)


def _shipped() -> list[tuple[str, ast.Module]]:
    """The modules a Lambda asset ships (the evaluator's and the collector's: the package but what they skip)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from infra.evaluator_asset import _SKIP_PACKAGES

    return [(rel.removeprefix("smx_debug/"), tree) for rel, tree in _scanned(*_SKIP_PACKAGES)]


def _operations() -> dict[str, dict[str, str]]:
    """method name (``put_object``) -> {service: operation name (``PutObject``)}."""
    from botocore import xform_name
    from botocore.session import get_session

    session, out = get_session(), {}
    for service in SERVICES:
        for operation in session.get_service_model(service).operation_names:
            out.setdefault(xform_name(operation), {})[service] = operation
    return out


def _receiver_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def code_calls() -> tuple[dict[tuple[str, str], list[int]], list[str]]:
    """(module, ``service:Operation``) -> lines, for every client call or paginator in the shipped modules; and the
    receivers the scan cannot place (a new client name, or a new lookalike: classify it above)."""
    operations = _operations()
    calls: dict[tuple[str, str], list[int]] = {}
    unplaced: list[str] = []
    for rel, tree in _shipped():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            method, receiver = node.attr, node.value
            if method == "get_paginator":
                continue  # its operation is the argument, below
            if method not in operations:
                continue
            if (isinstance(receiver, ast.Call) and receiver.args and isinstance(receiver.args[0], ast.Constant)
                    and receiver.args[0].value in SERVICES):
                service: str | None = receiver.args[0].value  # runtime.clients("sns").publish
            else:
                name = _receiver_name(receiver)
                if name in NOT_CLIENTS or (name and _CONSTANT.match(name)):
                    continue
                service = CLIENT_NAMES.get(name or "")
            if service is None or service not in operations[method]:
                unplaced.append(f"{rel}:{node.lineno}: {ast.unparse(receiver)}.{method}")
                continue
            calls.setdefault((rel, f"{service}:{operations[method][service]}"), []).append(node.lineno)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "get_paginator" and node.args and isinstance(node.args[0], ast.Constant)):
                method = str(node.args[0].value)
                owners = operations.get(method, {})
                service = CLIENT_NAMES.get(_receiver_name(node.func.value) or "")
                service = service if service in owners else (next(iter(owners)) if len(owners) == 1 else None)
                if service is None:
                    unplaced.append(f"{rel}:{node.lineno}: {ast.unparse(node.func.value)}.get_paginator({method!r})")
                    continue
                calls.setdefault((rel, f"{service}:{owners[service]}"), []).append(node.lineno)
    return calls, unplaced


def doc_rows() -> dict[tuple[str, str], dict[str, str]]:
    """docs/iam-calls.md's "Every call in the code": (code, call) -> the row's columns."""
    text = CALLS_DOC.read_text(encoding="utf-8")
    assert CALLS_SECTION in text, f"docs/iam-calls.md has no section {CALLS_SECTION!r}"
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for line in text.split(CALLS_SECTION, 1)[1].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| `") or len(cells) != 5:
            continue
        code, call, actions, made_by, allowed_by = cells
        key = (code.strip("`"), call)
        assert key not in rows, f"docs/iam-calls.md lists {key} twice"
        rows[key] = {"actions": actions, "made_by": made_by, "allowed_by": allowed_by}
    return rows


def test_aws_call_scan_places_every_receiver() -> None:
    _, unplaced = code_calls()
    assert not unplaced, ("calls whose client the scan cannot name: add the name to CLIENT_NAMES (a client) or "
                          "NOT_CLIENTS (a lookalike):\n" + "\n".join(unplaced))


def test_aws_call_scan_finds_the_known_calls() -> None:
    """The scan itself works: calls written in three ways (a named client, ``clients("...")``, a paginator)."""
    calls, _ = code_calls()
    assert {("actions/once.py", "sagemaker:StopTrainingJob"), ("actions/respond.py", "cloudwatch:PutMetricData"),
            ("watch/discover.py", "sagemaker:Search"), ("watch/handler.py", "sqs:SendMessageBatch")} <= set(calls)


def test_iam_calls_doc_has_a_row_for_every_aws_call_in_the_shipped_code() -> None:
    calls, _ = code_calls()
    rows = doc_rows()
    missing = [f"{rel}: {call} (lines {lines})" for (rel, call), lines in sorted(calls.items())
               if (rel, call) not in rows]
    assert not missing, ("docs/iam-calls.md, \"Every call in the code\", has no row (and no statement) for:\n"
                         + "\n".join(missing))


def test_iam_calls_doc_rows_are_calls_of_the_code_and_name_what_allows_them() -> None:
    calls, _ = code_calls()
    for (code, call), row in doc_rows().items():
        assert row["allowed_by"] and row["actions"] and row["made_by"], (code, call, row)
        if code.startswith("infra/"):  # a state machine's task: its definition names the call
            assert (ROOT / code).is_file() and call.split(":")[1] in (ROOT / code).read_text(), (code, call)
        else:
            assert (code, call) in calls, f"docs/iam-calls.md lists {call} in {code}, which the code no longer makes"
