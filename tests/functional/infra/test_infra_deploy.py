"""The synthesized guard stack deploys into the local AWS; what moto's CloudFormation skips is emulated.

moto 5.2.5's CloudFormation does not create these types, so ``deploy_stack`` builds them from the
template: AWS::CloudWatch::Alarm, AWS::S3::BucketPolicy, AWS::SNS::TopicPolicy, AWS::SQS::QueuePolicy,
AWS::SNS::Subscription, AWS::Lambda::EventInvokeConfig, and the fleet's AWS::Glue::Database, AWS::Glue::Table,
AWS::Athena::WorkGroup and AWS::Athena::NamedQuery. It also ignores S3 bucket versioning, public access
block, lifecycle and logging, and keeps Lambda tags in list form; those properties are applied too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers_infra_deploy import resolve

from smx_debug.local import DeployedStack, LocalAws, deploy_stack

MOTO_SKIPS = {
    "AWS::CloudWatch::Alarm",
    "AWS::S3::BucketPolicy",
    "AWS::SNS::TopicPolicy",
    "AWS::SQS::QueuePolicy",
    "AWS::SNS::Subscription",
    "AWS::Lambda::EventInvokeConfig",
    "AWS::Glue::Database",
    "AWS::Glue::Table",
    "AWS::Athena::WorkGroup",
    "AWS::Athena::NamedQuery",
}
STACK = "SmxDebugGuard"


@pytest.fixture(scope="module")
def deployed(_local_aws_server: LocalAws, synthesized: Path) -> Iterator[DeployedStack]:
    """One deployment shared by this module's read-only tests (none of them uses ``local_aws``)."""
    _local_aws_server.reset()
    yield deploy_stack(_local_aws_server, synthesized / f"{STACK}.template.json", stack_name=STACK)
    _local_aws_server.reset()


@pytest.fixture
def aws(_local_aws_server: LocalAws, deployed: DeployedStack) -> LocalAws:
    return _local_aws_server


def _template(synthesized: Path) -> dict[str, Any]:
    return dict(json.loads((synthesized / f"{STACK}.template.json").read_text()))


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def test_deploy_creates_every_resource_and_emulates_moto_skips(aws: LocalAws, deployed: DeployedStack, synthesized: Path) -> None:
    template = _template(synthesized)
    assert deployed.skipped == {}
    assert set(deployed.physical_ids) == set(template["Resources"])
    created = {e.resource_type for e in deployed.emulated if e.what == "created"}
    assert created == MOTO_SKIPS & {r["Type"] for r in template["Resources"].values()}
    patched = {(e.resource_type, e.what) for e in deployed.emulated if e.what != "created"}
    assert ("AWS::Lambda::Function", "properties Tags") in patched
    assert set(deployed.outputs) == {"OutputBucketName", "TopicArn", "AlarmTopicArn", "LedgerTableName",
                                     "DeadLetterQueueUrl", "RetrainingStateMachineArn", "KeyArn", "FleetRoot",
                                     "FleetDatabase", "FleetWorkGroup", "FleetAnalystPolicyArn"}


def test_deploy_alarms_match_template(aws: LocalAws, deployed: DeployedStack, synthesized: Path) -> None:
    template = _template(synthesized)
    alarms = {a["AlarmName"]: a for a in aws.client("cloudwatch").describe_alarms()["MetricAlarms"]}
    # Two rule alarms, plus the guard's health: DLQ, each of the four functions, retraining executions, the
    # scheduled evaluator's errors, job errors and shard backlog, and the fleet collector's errors.
    assert len(alarms) == 2 + 1 + 4 + 1 + 1 + 1 + 1 + 1
    rule_alarms = {k: v for k, v in _of_type(template, "AWS::CloudWatch::Alarm").items()
                   if v["Properties"].get("MetricName") == "RuleTriggered"}
    assert len(rule_alarms) == 2
    for logical, resource in rule_alarms.items():
        props = resource["Properties"]
        alarm = alarms[deployed.physical_ids[logical]]
        assert {k: alarm[k] for k in ("Namespace", "MetricName", "Statistic", "Period", "EvaluationPeriods",
                                      "DatapointsToAlarm", "ComparisonOperator", "TreatMissingData",
                                      "Dimensions", "AlarmDescription")} == {
            k: props[k] for k in ("Namespace", "MetricName", "Statistic", "Period", "EvaluationPeriods",
                                  "DatapointsToAlarm", "ComparisonOperator", "TreatMissingData",
                                  "Dimensions", "AlarmDescription")
        }
        assert alarm["Threshold"] == float(props["Threshold"])
        assert alarm["AlarmActions"] == [deployed.output("AlarmTopicArn")]


def test_deploy_bucket_policy_and_properties_match_template(aws: LocalAws, deployed: DeployedStack, synthesized: Path) -> None:
    s3 = aws.client("s3")
    template = _template(synthesized)
    names = {logical: deployed.physical_ids[logical] for logical in _of_type(template, "AWS::S3::Bucket")}
    arns = {(logical, "Arn"): f"arn:aws:s3:::{name}" for logical, name in names.items()}
    for logical, resource in _of_type(template, "AWS::S3::BucketPolicy").items():
        name = names[resource["Properties"]["Bucket"]["Ref"]]
        expected = resolve(resource["Properties"]["PolicyDocument"], names, arns)
        assert json.loads(s3.get_bucket_policy(Bucket=name)["Policy"]) == expected
        assert deployed.physical_ids[logical] == name
    bucket = deployed.output("OutputBucketName")
    writes = [s for s in json.loads(s3.get_bucket_policy(Bucket=bucket)["Policy"])["Statement"]
              if s.get("Sid") == "SageMakerExecutionRolesWrite"]
    assert [(w["Principal"], w["Condition"]) for w in writes] == [
        ({"AWS": "*"},
         {"StringLike": {"aws:PrincipalArn": "arn:aws:iam::123456789012:role/*SageMaker*"},
          "StringEquals": {"aws:PrincipalAccount": "123456789012"}})
    ]
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    assert s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True
    }
    rules = {r["ID"]: r for r in s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]}
    assert rules["debugger-output-retention"]["Expiration"] == {"Days": 365}
    assert rules["debugger-output-retention"]["Transitions"] == [{"Days": 30, "StorageClass": "STANDARD_IA"}]
    logging = s3.get_bucket_logging(Bucket=bucket)["LoggingEnabled"]
    assert logging["TargetPrefix"] == "output/"
    assert s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"][0][
        "ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}


def test_deploy_functions_rules_and_state_machine_wired(aws: LocalAws, deployed: DeployedStack, synthesized: Path) -> None:
    lam = aws.client("lambda")
    handlers: dict[str, dict[str, Any]] = {}
    for fn in lam.list_functions()["Functions"]:
        tags = lam.list_tags(Resource=fn["FunctionArn"])["Tags"]
        handlers[tags["smx-debug:handler"]] = fn
    evaluator = handlers.pop("evaluator")  # the scheduled evaluator: tests/infra/test_infra_evaluator.py
    collector = handlers.pop("fleet_collector")  # tests/infra/test_infra_fleet_writers.py
    assert evaluator["Environment"]["Variables"]["SMX_LEDGER_TABLE"] == deployed.output("LedgerTableName")
    assert sorted(handlers) == ["notify", "retrain", "rule_metrics", "stop_training"]
    for name, fn in handlers.items():
        assert fn["Runtime"] == "python3.14"
        assert fn["Handler"] == f"handler.{name}"  # one entry module, four names
        timeout = 120 if name == "retrain" else 60
        expected = {
            "SMX_METRIC_NAMESPACE": "SmxDebug",
            "SMX_WATCH_PREFIXES": "guarded-",
            "SMX_OPT_IN_TAG": "smx-debug:managed",
            "SMX_DEFAULT_ACTIONS": "notify stop",
            "SMX_LEDGER_TABLE": deployed.output("LedgerTableName"),
            "SMX_TOPIC_ARN": deployed.output("TopicArn"),
            "SMX_ACCOUNT": "123456789012",
            "SMX_FUNCTION_TIMEOUT": str(timeout),
            "SMX_LEASE_SECONDS": str(timeout + 30),
            "SMX_SHOW_KEYS": "",
            "SMX_REDACT_KEYS": "",
        }
        if name != "retrain":  # the action core's verdict log (docs/fleet.md)
            expected["SMX_FLEET_BUCKET"] = deployed.output("OutputBucketName")
        if name in ("stop_training", "notify"):  # starts retraining; reports executions that timed out
            expected["SMX_STATE_MACHINE_ARN"] = deployed.output("RetrainingStateMachineArn")
        assert fn["Environment"]["Variables"] == expected
    events = aws.client("events")
    patterns = {}
    for rule in events.list_rules()["Rules"]:
        targets = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
        if "ScheduleExpression" in rule:  # the evaluator's schedule, the fleet collector's
            assert (rule["ScheduleExpression"], [t["Arn"] for t in targets]) in [
                ("rate(1 minute)", [evaluator["FunctionArn"]]), ("rate(1 hour)", [collector["FunctionArn"]])]
            continue
        patterns[json.dumps(json.loads(rule["EventPattern"])["detail"], sort_keys=True)] = sorted(
            t["Arn"] for t in targets
        )
    expected_targets = sorted(handlers[h]["FunctionArn"] for h in ("rule_metrics", "notify", "stop_training"))
    assert patterns == {
        json.dumps({"$or": [{"TrainingJobName": [{"prefix": "guarded-"}]},
                            {"Tags": {"smx-debug:managed": [{"equals-ignore-case": "true"}]}}]},
                   sort_keys=True): expected_targets,
        json.dumps({"status": ["TIMED_OUT", "ABORTED"],
                    "stateMachineArn": [deployed.output("RetrainingStateMachineArn")]},
                   sort_keys=True): [handlers["notify"]["FunctionArn"]],
    }
    machine = aws.client("stepfunctions").describe_state_machine(
        stateMachineArn=deployed.output("RetrainingStateMachineArn"))
    definition = json.loads(machine["definition"])
    assert definition["States"]["Train"]["Resource"] == handlers["retrain"]["FunctionArn"]
    subscriptions = aws.client("sns").list_subscriptions_by_topic(TopicArn=deployed.output("AlarmTopicArn"))
    assert [(s["Protocol"], s["Endpoint"]) for s in subscriptions["Subscriptions"]] == [
        ("lambda", handlers["notify"]["FunctionArn"])
    ]




def test_deploy_fleet_tables_workgroup_and_queries_exist(aws: LocalAws, deployed: DeployedStack) -> None:
    from smx_debug.contracts import FLEET_TABLES
    from smx_debug.fleet import list_queries

    glue, athena = aws.client("glue"), aws.client("athena")
    database = deployed.output("FleetDatabase")
    tables = glue.get_tables(DatabaseName=database)["TableList"]
    assert {t["Name"] for t in tables} == set(FLEET_TABLES)
    config = athena.get_work_group(WorkGroup=deployed.output("FleetWorkGroup"))["WorkGroup"]["Configuration"]
    assert config["EnforceWorkGroupConfiguration"] is True and config["BytesScannedCutoffPerQuery"] >= 10_000_000
    ids = athena.list_named_queries(WorkGroup=deployed.output("FleetWorkGroup"))["NamedQueryIds"]
    assert len(ids) == len(list_queries())


def test_fleet_athena_engine_runs_in_the_deployed_workgroup(aws: LocalAws, deployed: DeployedStack) -> None:
    """As far as moto goes: moto runs no SQL (it returns the rows its results API was given), so this checks the
    request (transpiled SQL, typed parameters, database, workgroup), the polling and the price."""
    from smx_debug import fleet
    from smx_debug.errors import NotFoundError

    athena = aws.client("athena")
    result = fleet.execute("rules_fired", engine="athena", since="30d", database=deployed.output("FleetDatabase"),
                           workgroup=deployed.output("FleetWorkGroup"), athena_client=athena)
    assert result.engine == "athena" and result.bytes_scanned == 0
    assert result.price_usd == pytest.approx(10_000_000 / 1e12 * 5)  # the 10 MB minimum
    executions = athena.list_query_executions(WorkGroup=deployed.output("FleetWorkGroup"))["QueryExecutionIds"]
    assert executions
    with pytest.raises(NotFoundError, match="no-such-workgroup"):
        fleet.execute("rules_fired", engine="athena", database=deployed.output("FleetDatabase"),
                      workgroup="no-such-workgroup", athena_client=athena)


def test_deploy_key_policy_is_readable_as_kms_keeps_it(aws: LocalAws, deployed: DeployedStack,
                                                       synthesized: Path) -> None:
    """moto's CloudFormation kept the key policy as a mapping and DescribeKey then failed with a 500; the local
    deploy stores it as JSON text, so KMS (and the local IAM, which reads key policies) can read it."""
    (logical, resource), = _of_type(_template(synthesized), "AWS::KMS::Key").items()
    kms = aws.client("kms")
    key = deployed.physical_ids[logical]
    assert kms.describe_key(KeyId=key)["KeyMetadata"]["KeyId"] == key
    policy = json.loads(kms.get_key_policy(KeyId=key, PolicyName="default")["Policy"])
    assert len(policy["Statement"]) == len(resource["Properties"]["KeyPolicy"]["Statement"])
