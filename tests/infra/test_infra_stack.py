"""Assertions on the synthesized guard stack: what matters for security and behaviour, by property."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Capture, Match, Template
from helpers_infra import (
    HANDLERS,
    Synth,
    actions_of,
    function_statements,
    functions_by_handler,
    job_arn,
    logical_id,
    only,
    statements_with,
    watch_rules,
)

from infra.config import DEFAULT_RETRAIN_INSTANCE_TYPES
from smx_debug.contracts import LEDGER_TTL_ATTRIBUTE, watch_pattern

STATE_CHANGE = "SageMaker Training Job State Change"


# -- EventBridge ------------------------------------------------------------------------------------------


def test_event_rule_prefix_or_tag_pattern_targets_three_handlers_with_dlq(synth: Synth) -> None:
    template, _ = synth(watch_prefixes=["exp-", "Prod"], opt_in_tag="team:guarded")
    fns = functions_by_handler(template)
    dlq, _ = only(template, "AWS::SQS::Queue", QueueName="SmxDebugGuard-dlq")
    # One rule, so a job with a watched prefix *and* the tag is delivered once.
    (rule,) = watch_rules(template).values()
    assert rule["Properties"]["EventPattern"] == {
        "source": ["aws.sagemaker"],
        "detail-type": [STATE_CHANGE],
        "detail": {"$or": [
            {"TrainingJobName": [{"prefix": "exp-"}, {"prefix": "Prod"}]},
            {"Tags": {"team:guarded": [{"equals-ignore-case": "true"}]}},
        ]},
    }
    assert rule["Properties"]["EventPattern"]["detail"] == watch_pattern(["exp-", "Prod"], "team:guarded")
    assert rule["Properties"]["State"] == "ENABLED"
    targets = rule["Properties"]["Targets"]
    assert sorted(t["Arn"]["Fn::GetAtt"][0] for t in targets) == sorted(
        fns[name] for name in ("rule_metrics", "notify", "stop_training")
    )
    for target in targets:
        assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq, "Arn"]}}
        assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 7200, "MaximumRetryAttempts": 4}


def test_event_rules_opt_in_disabled_only_prefix_rule(synth: Synth) -> None:
    template, _ = synth(watch_prefixes="exp-", opt_in_tag="false")
    rules = watch_rules(template)
    assert [r["Properties"]["EventPattern"]["detail"] for r in rules.values()] == [
        {"TrainingJobName": [{"prefix": "exp-"}]}
    ]


# -- IAM --------------------------------------------------------------------------------------------------


def test_stop_training_scoped_to_watched_prefixes_lowercased_and_opt_in_tag(synth: Synth) -> None:
    template, _ = synth(watch_prefixes=["exp-", "Prod"])
    stops = statements_with(function_statements(template, "stop_training"), "sagemaker:StopTrainingJob")
    # cdk.json's minimizePolicies merges same-scope statements: Describe/ListTags share these scopes.
    assert stops == [
        {
            "Action": ["sagemaker:DescribeTrainingJob", "sagemaker:ListTags", "sagemaker:StopTrainingJob"],
            "Effect": "Allow",
            "Resource": [job_arn("exp-*"), job_arn("prod*")],
        },
        {
            "Action": ["sagemaker:DescribeTrainingJob", "sagemaker:ListTags", "sagemaker:StopTrainingJob"],
            "Condition": {"StringEqualsIgnoreCase": {"aws:ResourceTag/smx-debug:managed": "true"}},
            "Effect": "Allow",
            "Resource": job_arn("*"),
        },
    ]


@pytest.mark.parametrize(
    ("handler", "allowed", "denied"),
    [
        ("rule_metrics", {"cloudwatch:PutMetricData", "sagemaker:DescribeTrainingJob"},
         {"sagemaker:StopTrainingJob", "sns:Publish", "sagemaker:CreateTrainingJob"}),
        ("stop_training", {"sagemaker:StopTrainingJob", "dynamodb:PutItem"},
         {"cloudwatch:PutMetricData", "sns:Publish", "sagemaker:CreateTrainingJob"}),
        ("notify", {"sns:Publish", "sagemaker:ListTags"},
         {"sagemaker:StopTrainingJob", "cloudwatch:PutMetricData", "sagemaker:CreateTrainingJob"}),
        ("retrain", {"sagemaker:CreateTrainingJob", "iam:PassRole", "sagemaker:StopTrainingJob", "sns:Publish"},
         {"cloudwatch:PutMetricData"}),
    ],
)
def test_handler_role_has_only_its_own_actions(
    synth: Synth, handler: str, allowed: set[str], denied: set[str]
) -> None:
    template, _ = synth(watch_prefixes="exp-")
    actions = actions_of(function_statements(template, handler))
    assert allowed <= actions
    assert not denied & actions


@pytest.mark.parametrize(
    ("context", "handler", "action", "condition", "resource"),
    [
        pytest.param({"metric_namespace": "TeamGuard"}, "rule_metrics", "cloudwatch:PutMetricData",
                     {"StringEquals": {"cloudwatch:namespace": "TeamGuard"}}, "*", id="put-metric-data-namespace"),
        pytest.param({"sagemaker_execution_role_pattern": "arn:aws:iam::*:role/ml/SageMaker*"}, "retrain",
                     "iam:PassRole", {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
                     {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"},
                                        ":role/ml/SageMaker*"]]},
                     id="pass-role-execution-roles-of-this-account-to-sagemaker"),
    ],
)
def test_handler_action_limited_to_its_resource_and_condition(
    synth: Synth, context: dict[str, str], handler: str, action: str, condition: dict[str, Any], resource: Any
) -> None:
    template, _ = synth(**context)
    assert statements_with(function_statements(template, handler), action) == [
        {"Action": action, "Condition": condition, "Effect": "Allow", "Resource": resource}
    ]


def test_sns_publish_only_on_our_topic(synth: Synth) -> None:
    template, _ = synth()
    topic, _ = only(template, "AWS::SNS::Topic", DisplayName="smx-debug")
    for handler in ("notify", "retrain"):
        publish = statements_with(function_statements(template, handler), "sns:Publish")
        assert [s["Resource"] for s in publish] == [{"Ref": topic}]


def test_wildcard_resources_only_where_aws_has_no_resource_scope(synth: Synth) -> None:
    template, _ = synth(watch_prefixes="exp-")
    unscoped = {"cloudwatch:PutMetricData", "logs:CreateLogDelivery", "logs:GetLogDelivery",
                "logs:UpdateLogDelivery", "logs:DeleteLogDelivery", "logs:ListLogDeliveries",
                "logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
                "xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules",
                "xray:GetSamplingTargets",
                # the evaluator's: listing running jobs, searching them for the opt-in tag and reading metrics
                # have no resource type
                "sagemaker:ListTrainingJobs", "sagemaker:Search", "cloudwatch:GetMetricData"}
    for policy in template.find_resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Resource"] == "*" or "*" in statement["Resource"]:
                assert actions_of([statement]) <= unscoped, statement


def test_ledger_table_item_actions_only_for_handlers(synth: Synth) -> None:
    template, stack = synth()
    table = logical_id(stack, stack.ledger.table)
    for handler in HANDLERS:
        statements = function_statements(template, handler)
        assert {a for a in actions_of(statements) if a.startswith("dynamodb:")} == {
            "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"
        }
        puts = statements_with(statements, "dynamodb:PutItem")
        assert [s["Resource"] for s in puts] == [{"Fn::GetAtt": [table, "Arn"]}]


# -- storage ----------------------------------------------------------------------------------------------


def test_output_bucket_encrypted_versioned_private_logged_with_lifecycle(synth: Synth) -> None:
    template, _ = synth(output_expiration_days=400, output_transition_to_ia_days=60)
    logging = Capture()
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
            },
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "VersioningConfiguration": {"Status": "Enabled"},
            "LoggingConfiguration": logging,
            "LifecycleConfiguration": {
                "Rules": Match.array_with([
                    {
                        "Id": "debugger-output-retention",
                        "ExpirationInDays": 400,
                        "NoncurrentVersionExpiration": {"NoncurrentDays": 30},
                        "Status": "Enabled",
                        "Transitions": [{"StorageClass": "STANDARD_IA", "TransitionInDays": 60}],
                    }
                ])
            },
        },
    )
    log_bucket = logging.as_object()["DestinationBucketName"]["Ref"]
    assert logging.as_object() == {"DestinationBucketName": {"Ref": log_bucket}, "LogFilePrefix": "output/"}
    assert template.find_resources("AWS::S3::Bucket")[log_bucket]["Properties"]["BucketEncryption"] == {
        "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
    }


def test_buckets_deny_plain_http_and_sagemaker_roles_may_write(synth: Synth) -> None:
    template, _ = synth(sagemaker_execution_role_pattern="arn:aws:iam::*:role/ml-*")
    policies = template.find_resources("AWS::S3::BucketPolicy")
    assert len(policies) == 2
    for policy in policies.values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        denies = [s for s in statements if s["Effect"] == "Deny"]
        assert [(s["Action"], s["Condition"]) for s in denies] == [
            ("s3:*", {"Bool": {"aws:SecureTransport": "false"}})
        ]
    output_bucket = Capture()
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {"Bucket": {"Ref": output_bucket}, "PolicyDocument": {"Statement": Match.array_with([
            Match.object_like({"Sid": "SageMakerExecutionRolesWrite", "Effect": "Allow"}),
        ])}},
    )
    assert "LoggingConfiguration" in template.find_resources("AWS::S3::Bucket")[output_bucket.as_string()]["Properties"]
    writes = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]
              if s.get("Sid") == "SageMakerExecutionRolesWrite"]
    assert len(writes) == 1
    # In the stack's own partition and account, whatever partition the configured pattern spells.
    # Any principal (a grant, not a delegation to the roles' own policies), this account's matching roles only.
    assert writes[0]["Condition"] == {
        "StringLike": {"aws:PrincipalArn": {"Fn::Join": ["", [
            "arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":role/ml-*"]]}},
        "StringEquals": {"aws:PrincipalAccount": {"Ref": "AWS::AccountId"}},
    }
    assert writes[0]["Principal"] == {"AWS": "*"}
    assert "s3:PutObject" in writes[0]["Action"]


def test_ledger_table_encrypted_with_pitr_and_pk(synth: Synth) -> None:
    template, _ = synth()
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "SSESpecification": {"SSEEnabled": True},
            "TimeToLiveSpecification": {"AttributeName": LEDGER_TTL_ATTRIBUTE, "Enabled": True},
        },
    )


# -- SNS, SQS, KMS ----------------------------------------------------------------------------------------


def test_topics_kms_encrypted_tls_only_with_configured_subscriptions(synth: Synth) -> None:
    template, _ = synth(notification_emails="ml@example.com,ops@example.com", notification_sms="+15555550123")
    key, _ = only(template, "AWS::KMS::Key")
    topics = template.find_resources("AWS::SNS::Topic")
    assert len(topics) == 2
    for topic in topics.values():
        assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key, "Arn"]}
    policies = template.find_resources("AWS::SNS::TopicPolicy").values()
    assert sorted(p["Properties"]["Topics"][0]["Ref"] for p in policies) == sorted(topics)
    for policy in policies:
        deny = {k: v for k, v in policy["Properties"]["PolicyDocument"]["Statement"][0].items() if k != "Sid"}
        assert deny == {
            "Action": "sns:Publish",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            "Effect": "Deny",
            "Principal": "*",
            "Resource": policy["Properties"]["Topics"][0],
        }
    main_topic, _ = only(template, "AWS::SNS::Topic", DisplayName="smx-debug")
    subscriptions = [
        (s["Properties"]["Protocol"], s["Properties"]["Endpoint"])
        for s in template.find_resources("AWS::SNS::Subscription").values()
        if s["Properties"]["TopicArn"] == {"Ref": main_topic}
    ]
    assert sorted(subscriptions) == [("email", "ml@example.com"), ("email", "ops@example.com"),
                                     ("sms", "+15555550123")]


def test_kms_key_rotates_and_grants_services_only_data_key_use(synth: Synth) -> None:
    """Whether each service may use the key where it delivers is test_infra_delivery_paths' job; here: no more."""
    template, _ = synth()
    (key,) = template.find_resources("AWS::KMS::Key").values()
    assert key["Properties"]["EnableKeyRotation"] is True
    services = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if "Service" in s["Principal"]]
    assert sorted(s["Principal"]["Service"] for s in services) == [
        "cloudwatch.amazonaws.com", "events.amazonaws.com", "sns.amazonaws.com"
    ]
    for statement in services:
        assert statement["Action"] == ["kms:Decrypt", "kms:GenerateDataKey"], statement


def test_kms_key_cloudwatch_statement_is_the_documented_one_without_source_conditions(synth: Synth) -> None:
    """No AWS page says CloudWatch passes aws:SourceAccount/aws:SourceArn to KMS when an alarm publishes to an
    encrypted topic; AWS's statement has no condition (docs/infra.md, "The key"). A condition here would drop every
    alarm notification in a real account, silently."""
    template, _ = synth()
    (key,) = template.find_resources("AWS::KMS::Key").values()
    (statement,) = [s for s in key["Properties"]["KeyPolicy"]["Statement"]
                    if s["Principal"].get("Service") == "cloudwatch.amazonaws.com"]
    assert statement == {"Sid": "CloudWatchAlarmsPublish", "Effect": "Allow",
                         "Principal": {"Service": "cloudwatch.amazonaws.com"},
                         "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Resource": "*"}


def test_dead_letter_queue_kms_and_tls_only(synth: Synth) -> None:
    template, _ = synth()
    key, _ = only(template, "AWS::KMS::Key")
    queue, _ = only(template, "AWS::SQS::Queue", KmsMasterKeyId={"Fn::GetAtt": [key, "Arn"]},
                    QueueName="SmxDebugGuard-dlq")
    template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "Queues": [{"Ref": queue}],
            "PolicyDocument": {"Statement": Match.array_with([
                Match.object_like({"Action": "sqs:*", "Effect": "Deny",
                                   "Condition": {"Bool": {"aws:SecureTransport": "false"}}}),
                Match.object_like({"Action": "sqs:SendMessage", "Effect": "Allow",
                                   "Principal": {"Service": "events.amazonaws.com"}}),
            ])},
        },
    )


# -- alarms -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("alarm_rules", "dimensions"),
    [
        (["VanishingGradient", "LossNotDecreasing"],
         [[{"Name": "RuleName", "Value": "VanishingGradient"}], [{"Name": "RuleName", "Value": "LossNotDecreasing"}]]),
        (["*"], [None]),
    ],
)
def test_alarm_per_rule_sum_60s_threshold_1_not_breaching_to_alarm_topic(
    synth: Synth, alarm_rules: list[str], dimensions: list[Any]
) -> None:
    template, _ = synth(alarm_rules=alarm_rules)
    alarm_topic, _ = only(template, "AWS::SNS::Topic", DisplayName="smx-debug alarms")
    alarms = template.find_resources("AWS::CloudWatch::Alarm", {"Properties": {"Namespace": "SmxDebug",
                                                                             "MetricName": "RuleTriggered"}})
    found = []
    for alarm in alarms.values():
        props = alarm["Properties"]
        found.append(props.get("Dimensions"))
        assert {k: v for k, v in props.items() if k not in {"Dimensions", "AlarmDescription"}} == {
            "Namespace": "SmxDebug",
            "MetricName": "RuleTriggered",
            "Statistic": "Sum",
            "Period": 60,
            "Threshold": 1,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "EvaluationPeriods": 1,
            "DatapointsToAlarm": 1,
            "TreatMissingData": "notBreaching",
            "AlarmActions": [{"Ref": alarm_topic}],
        }
    assert found == dimensions


def test_notify_handler_subscribed_to_alarm_topic(synth: Synth) -> None:
    template, _ = synth()
    alarm_topic, _ = only(template, "AWS::SNS::Topic", DisplayName="smx-debug alarms")
    notify = functions_by_handler(template)["notify"]
    template.has_resource_properties(
        "AWS::SNS::Subscription",
        {"Protocol": "lambda", "TopicArn": {"Ref": alarm_topic}, "Endpoint": {"Fn::GetAtt": [notify, "Arn"]},
         "RedrivePolicy": {"deadLetterTargetArn": Match.any_value()}},
    )


# -- Lambda -----------------------------------------------------------------------------------------------


def test_functions_runtime_handler_environment_and_tags(synth: Synth) -> None:
    template, stack = synth(watch_prefixes=["exp-", "prod-"], default_actions="notify,stop", log_retention_days=90,
                        show_keys="epochs,learning_rate")
    table = logical_id(stack, stack.ledger.table)
    topic, _ = only(template, "AWS::SNS::Topic", DisplayName="smx-debug")
    fns = {name: logical for name, logical in functions_by_handler(template).items() if name in HANDLERS}
    assert sorted(fns) == sorted(HANDLERS)
    for name, logical in fns.items():
        props = template.find_resources("AWS::Lambda::Function")[logical]["Properties"]
        assert (props["Runtime"], props["Handler"], props["Architectures"]) == ("python3.14", f"handler.{name}",
                                                                                 ["arm64"])
        timeout = 120 if name == "retrain" else 60
        assert props["Timeout"] == timeout
        expected = {
            "SMX_METRIC_NAMESPACE": "SmxDebug",
            "SMX_WATCH_PREFIXES": "exp-,prod-",
            "SMX_OPT_IN_TAG": "smx-debug:managed",
            "SMX_DEFAULT_ACTIONS": "notify stop",
            "SMX_LEDGER_TABLE": {"Ref": table},
            "SMX_TOPIC_ARN": {"Ref": topic},
            "SMX_ACCOUNT": {"Ref": "AWS::AccountId"},
            "SMX_FUNCTION_TIMEOUT": str(timeout),
            "SMX_LEASE_SECONDS": str(timeout + 30),
            "SMX_SHOW_KEYS": "epochs,learning_rate",
            "SMX_REDACT_KEYS": "",
        }
        if name in ("rule_metrics", "stop_training", "notify"):  # the action core's verdict log
            expected["SMX_FLEET_BUCKET"] = {"Ref": logical_id(stack, stack.storage.bucket)}
        if name in ("stop_training", "notify"):  # starts retraining; reports its unreported ends
            expected["SMX_STATE_MACHINE_ARN"] = {"Fn::Join": ["", [
                "arn:", {"Ref": "AWS::Partition"}, ":states:", {"Ref": "AWS::Region"}, ":",
                {"Ref": "AWS::AccountId"}, ":stateMachine:SmxDebugGuard-retraining"]]}
        assert props["Environment"] == {"Variables": expected}
        assert {"Key": "smx-debug:handler", "Value": name} in props["Tags"]
        log_group = props["LoggingConfig"]["LogGroup"]["Ref"]
        assert template.find_resources("AWS::Logs::LogGroup")[log_group]["Properties"]["RetentionInDays"] == 90
        assert "TargetArn" in props["DeadLetterConfig"]


def test_alarm_stops_training_adds_stop_to_default_actions(synth: Synth) -> None:
    template, _ = synth(alarm_stops_training=True)
    for resource in template.find_resources("AWS::Lambda::Function").values():
        variables = resource["Properties"]["Environment"]["Variables"]
        if "SMX_LEDGER_TABLE" in variables:  # every function acting on jobs (not the fleet collector)
            assert variables["SMX_DEFAULT_ACTIONS"] == "notify stop"


# -- Step Functions ---------------------------------------------------------------------------------------


def _definition(template: Template) -> dict[str, Any]:
    _, machine = only(template, "AWS::StepFunctions::StateMachine")
    parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    return dict(json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts)))


def test_state_machine_loop_defaults_init_train_wait_monitor_choice_end(synth: Synth) -> None:
    template, _ = synth(retraining={"enabled": True, "wait_seconds": 120, "max_runtime_seconds": 7200})
    definition = _definition(template)
    states = definition["States"]
    assert definition["StartAt"] == "Defaults"
    assert {name: (s["Type"], s.get("Next")) for name, s in states.items()} == {
        "Defaults": ("Pass", "ApplyDefaults"),
        "ApplyDefaults": ("Pass", "Init"),
        "Init": ("Task", "AfterInit"),
        "AfterInit": ("Choice", None),
        "Train": ("Task", "Wait"),
        "Wait": ("Wait", "Monitor"),
        "Monitor": ("Task", "NextAction"),
        "NextAction": ("Choice", None),
        "End": ("Task", "Done"),
        "Done": ("Succeed", None),
        "EndAfterFailure": ("Task", "Failed"),
        "NotifyFailure": ("Task", "Failed"),
        "Failed": ("Fail", None),
    }
    # The deployment's settings go under the execution's run spec (its own values win).
    assert states["Defaults"]["Parameters"] == {
        "defaults": {"wait_seconds": 120, "max_runtime_seconds": 7200, "max_retraining": 10, "max_polls": 60,
                     "instance_types": list(DEFAULT_RETRAIN_INSTANCE_TYPES)},
        "run_spec.$": "$.run_spec",
    }
    assert states["ApplyDefaults"]["Parameters"] == {"run_spec.$": "States.JsonMerge($.defaults, $.run_spec, false)"}
    assert states["Wait"]["SecondsPath"] == "$.run_spec.wait_seconds"
    assert [(c["StringEquals"], c["Next"]) for c in states["NextAction"]["Choices"]] == [
        ("launch_new", "Train"), ("monitor", "Wait")
    ]
    assert states["NextAction"]["Default"] == "End"  # end, or anything unexpected: report, then stop
    retrain = functions_by_handler(template)["retrain"]
    _, machine = only(template, "AWS::StepFunctions::StateMachine")
    assert machine["Properties"]["StateMachineName"] == "SmxDebugGuard-retraining"
    assert definition["TimeoutSeconds"] == 7200 + 3600  # a backstop: the poll budget ends it first
    assert {"Fn::GetAtt": [retrain, "Arn"]} in machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    for name, step in (("Init", "init"), ("Train", "train"), ("Monitor", "monitor"), ("End", "end"),
                       ("EndAfterFailure", "end")):
        assert states[name]["Parameters"] == {"step": step, "state.$": "$"}
        assert states[name]["Resource"] == "TOKEN"
        assert states[name]["TimeoutSeconds"] == 300
    for name in ("Init", "Train", "Monitor"):
        assert states[name]["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error",
                                          "Next": "EndAfterFailure"}]
    for name in ("End", "EndAfterFailure"):
        assert states[name]["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.end_error",
                                          "Next": "NotifyFailure"}]
    # The last-resort message names the error, never its cause (which may quote request values).
    assert "Cause" not in json.dumps(states["NotifyFailure"]["Parameters"])


def test_state_machine_logs_without_execution_data_and_traces(synth: Synth) -> None:
    template, _ = synth()
    template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "LoggingConfiguration": {"Level": "ALL", "IncludeExecutionData": False,
                                     "Destinations": [Match.any_value()]},
            "TracingConfiguration": {"Enabled": True},
        },
    )


def test_retraining_disabled_no_state_machine_nor_output(synth: Synth) -> None:
    template, _ = synth(retraining="false")
    assert template.find_resources("AWS::StepFunctions::StateMachine") == {}
    assert sorted(set(functions_by_handler(template)) & set(HANDLERS)) == ["notify", "rule_metrics", "stop_training"]
    for policy in template.find_resources("AWS::IAM::Policy").values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        assert not {"sagemaker:CreateTrainingJob", "iam:PassRole"} & actions_of(statements)
    assert "RetrainingStateMachineArn" not in template.to_json()["Outputs"]
    assert {"OutputBucketName", "TopicArn", "AlarmTopicArn", "LedgerTableName"} <= set(
        template.to_json()["Outputs"]
    )
