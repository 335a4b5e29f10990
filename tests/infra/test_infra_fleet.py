"""Athena in the stack: what cdk-nag does not check (workgroup enforcement, result encryption, a cutoff on every
workgroup), the Glue tables against the contracts and botocore's model, the named queries from the SQL files,
the analysts' least-privilege policy, and the cdk.json key's validation."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match, Template
from botocore.session import Session
from botocore.validate import ParamValidator
from helpers_infra import Synth

from infra.config import config_from_context
from smx_debug.contracts import FLEET_HOUR_COLUMN, FLEET_TABLES
from smx_debug.errors import ConfigError
from smx_debug.fleet import list_queries, to_athena


def _resources(template: Template, kind: str) -> dict[str, dict[str, Any]]:
    return template.find_resources(kind)


def _validate(service: str, operation: str, params: dict[str, Any]) -> None:
    model = Session().get_service_model(service)
    report = ParamValidator().validate(params, model.operation_model(operation).input_shape)
    assert not report.has_errors(), report.generate_report()


def test_fleet_every_workgroup_enforced_encrypted_and_capped(synth_cached: Synth) -> None:
    """In the manner of cdk-nag: every Athena workgroup in the template, not one found by id."""
    template, _ = synth_cached()
    workgroups = _resources(template, "AWS::Athena::WorkGroup")
    assert workgroups
    for logical, resource in workgroups.items():
        config = resource["Properties"]["WorkGroupConfiguration"]
        assert config["EnforceWorkGroupConfiguration"] is True, logical
        assert config["ResultConfiguration"]["EncryptionConfiguration"]["EncryptionOption"] in {
            "SSE_S3", "SSE_KMS", "CSE_KMS"}, logical
        assert config["BytesScannedCutoffPerQuery"] >= 10_000_000, logical


def test_fleet_cutoff_comes_from_cdk_json_context(synth: Synth) -> None:
    template, _ = synth(fleet={"bytes_scanned_cutoff_per_query": 25_000_000})
    template.has_resource_properties("AWS::Athena::WorkGroup", {
        "WorkGroupConfiguration": Match.object_like({"BytesScannedCutoffPerQuery": 25_000_000})})


@pytest.mark.parametrize("value", [9_999_999, 0, "lots"])
def test_fleet_cutoff_below_athenas_minimum_names_the_key(value: object) -> None:
    with pytest.raises(ConfigError, match=r"fleet\.bytes_scanned_cutoff_per_query"):
        config_from_context({"fleet": {"bytes_scanned_cutoff_per_query": value}})


def test_fleet_disabled_creates_no_athena_or_glue(synth: Synth) -> None:
    template, _ = synth(fleet=False)
    for kind in ("AWS::Athena::WorkGroup", "AWS::Glue::Table", "AWS::Athena::NamedQuery"):
        assert not _resources(template, kind)


def test_fleet_glue_tables_are_the_contracts_with_hourly_projection(synth_cached: Synth) -> None:
    template, _ = synth_cached()
    tables = {r["Properties"]["TableInput"]["Name"]: r["Properties"]["TableInput"]
              for r in _resources(template, "AWS::Glue::Table").values()}
    assert set(tables) == set(FLEET_TABLES)
    for name, spec in FLEET_TABLES.items():
        table = tables[name]
        assert [(c["Name"], c["Type"]) for c in table["StorageDescriptor"]["Columns"]] == list(spec.columns)
        params = table["Parameters"]
        if spec.hour_of is None:
            assert "PartitionKeys" not in table and "projection.enabled" not in params
            continue
        assert table["PartitionKeys"][0]["Name"] == FLEET_HOUR_COLUMN
        assert params["projection.enabled"] == "true"
        assert params[f"projection.{FLEET_HOUR_COLUMN}.format"] == "yyyyMMddHH"
        assert params[f"projection.{FLEET_HOUR_COLUMN}.interval.unit"] == "HOURS"
        assert "${hour}" in str(params["storage.location.template"])


def test_fleet_named_queries_are_the_transpiled_sql_files(synth_cached: Synth) -> None:
    template, _ = synth_cached()
    named = {r["Properties"]["Name"]: r["Properties"] for r in _resources(template, "AWS::Athena::NamedQuery").values()}
    assert set(named) == {q.name for q in list_queries()}
    for query in list_queries():
        assert named[query.name]["QueryString"] == to_athena(query)[0]


def test_fleet_resources_valid_against_botocores_model(synth_cached: Synth) -> None:
    """The same properties, as the Glue and Athena APIs take them (local deploy sends exactly these)."""
    template, stack = synth_cached()
    resolved = stack.resolve
    for r in _resources(template, "AWS::Glue::Database").values():
        _validate("glue", "CreateDatabase", {"DatabaseInput": r["Properties"]["DatabaseInput"]})
    for r in _resources(template, "AWS::Glue::Table").values():
        table_input = {**r["Properties"]["TableInput"]}
        table_input["StorageDescriptor"] = {**table_input["StorageDescriptor"], "Location": "s3://b/p/"}
        table_input["Parameters"] = {k: str(v) if isinstance(v, str) else "s3://b/p/" for k, v in
                                     table_input["Parameters"].items()}
        _validate("glue", "CreateTable", {"DatabaseName": r["Properties"]["DatabaseName"], "TableInput": table_input})
    for r in _resources(template, "AWS::Athena::WorkGroup").values():
        props = r["Properties"]
        config = {**props["WorkGroupConfiguration"]}
        config["ResultConfiguration"] = {**config["ResultConfiguration"], "OutputLocation": "s3://b/r/"}
        _validate("athena", "CreateWorkGroup", {"Name": props["Name"], "Configuration": config,
                                                "Description": props["Description"]})
    for r in _resources(template, "AWS::Athena::NamedQuery").values():
        props = r["Properties"]
        _validate("athena", "CreateNamedQuery", {k: props[k] for k in
                                                 ("Name", "Database", "QueryString", "Description", "WorkGroup")})
    assert resolved is not None


def test_fleet_analyst_policy_least_privilege(synth_cached: Synth) -> None:
    template, _ = synth_cached()
    policies = [r for r in _resources(template, "AWS::IAM::ManagedPolicy").values()
                if "fleet" in r["Properties"].get("Description", "")]
    assert len(policies) == 1
    statements = policies[0]["Properties"]["PolicyDocument"]["Statement"]
    actions = {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert not any(a.endswith(":*") or a == "*" for a in actions)
    assert not {"athena:CreateWorkGroup", "athena:UpdateWorkGroup", "glue:CreateTable", "glue:UpdateTable",
                "s3:DeleteObject"} & actions
    for statement in statements:
        assert statement["Resource"] != "*"
    outputs = template.find_outputs("FleetAnalystPolicyArn")
    assert outputs
