"""A rule reaches IssuesFound: metric in CloudWatch, job stopped once, message in the subscribed queue.

Delivery goes the way EventBridge would route it: rule on the default bus -> Lambda targets deployed in
the local AWS (tagged smx-debug:handler) -> lambdas/<dir>/handler.py run in-process (local.delivery).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from actions_support import LAMBDAS, Stack, client, create_job, deploy_function

from smx_debug import local
from smx_debug.local.sagemaker import rule_statuses

HANDLERS = ("rule_metrics", "stop_training", "notify")
PATTERN = {"source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"]}


def _deploy(stack: Stack, env: dict[str, str]) -> None:
    """What the infrastructure deploys, reduced to what routing needs: functions, one rule, its targets."""
    events = client(stack.aws, "events")
    rule = events.put_rule(Name="smx-rule-changes", EventPattern=json.dumps(PATTERN), State="ENABLED")["RuleArn"]
    targets = []
    for name in HANDLERS:
        arn = deploy_function(stack, f"smx-{name}", name, env, invoked_by=("events.amazonaws.com", rule))
        targets.append({"Id": name, "Arn": arn})
    events.put_targets(Rule="smx-rule-changes", Targets=targets)


def test_rule_issues_found_stops_once_publishes_metric_and_notifies(stack: Stack) -> None:
    aws = stack.aws
    job = "guard-resnet-001"
    create_job(
        aws,
        job,
        {
            "smx-debug:managed": "true",
            "smx-debug:plan": "guard",
            "smx-debug:on:ExplodingTensor": "stop notify",
        },
        rules=("ExplodingTensor",),
    )
    _deploy(stack, stack.env())

    # While the rule is still evaluating, nothing happens.
    quiet = local.deliver_event(aws, local.state_change_event(aws, job))
    assert [d.error for d in quiet] == [None, None, None]
    assert local.stop_calls(aws, job) == 0

    local.set_rule_statuses(aws, job, debug=[local.rule_status("ExplodingTensor", "IssuesFound", step=500)])
    event = local.state_change_event(aws, job)
    first = local.deliver_event(aws, event)
    again = local.deliver_event(aws, event)  # EventBridge delivers at least once
    later = local.deliver_event(aws, local.state_change_event(aws, job))  # the rule stays IssuesFound

    assert [(d.function, d.error) for d in first] == [(f"smx-{n}", None) for n in HANDLERS]
    assert first[1].result["stop"] == {"rule": "ExplodingTensor", "outcome": "stopped", "step": 500}
    assert [d.result["stop"].get("skipped") for d in (again[1], later[1])] == [
        "job status is Stopped",
        "job status is Stopped",
    ]
    assert local.stop_calls(aws, job) == 1
    assert (
        client(aws, "sagemaker").describe_training_job(TrainingJobName=job)["TrainingJobStatus"] == "Stopped"
    )

    cw = client(aws, "cloudwatch")
    metrics = cw.list_metrics(Namespace="SmxDebug", MetricName="RuleTriggered")["Metrics"]
    assert sorted(tuple((d["Name"], d["Value"]) for d in m["Dimensions"]) for m in metrics) == [
        (),
        (("RuleName", "ExplodingTensor"),),
        (("TrainingJobName", job), ("RuleName", "ExplodingTensor")),
    ]
    now = datetime.now(UTC)
    points = cw.get_metric_statistics(
        Namespace="SmxDebug",
        MetricName="RuleTriggered",
        StartTime=now - timedelta(minutes=5),
        EndTime=now + timedelta(minutes=1),
        Period=60,
        Statistics=["Sum"],
        Dimensions=[
            {"Name": "TrainingJobName", "Value": job},
            {"Name": "RuleName", "Value": "ExplodingTensor"},
        ],
    )["Datapoints"]
    assert [(p["Sum"], p["Unit"]) for p in points] == [(1.0, "Count")]

    messages = stack.messages()
    assert [m["Subject"] for m in messages] == [f"smx-debug: ExplodingTensor found issues in {job}"]
    body = messages[0]["Message"]
    rule_job = rule_statuses._rule_job_arn(aws, job, "ExplodingTensor").rsplit("/", 1)[1]
    expected_lines = [
        f"SageMaker Debugger: rule ExplodingTensor found issues in training job {job}.",
        "Rule:            ExplodingTensor (debugger rule, evaluated by SageMaker Debugger)",
        "Status details:  RuleEvaluationConditionMet: Evaluation of the rule ExplodingTensor at step 500 "
        "resulted in the condition being met",
        "Step:            500",
        "Job status:      Stopping",
        "Action taken:    stop by smx-stop_training (rule ExplodingTensor; stopped); notification sent",
        "Debug plan:      guard",
        f"Training job in the console: https://us-west-2.console.aws.amazon.com/sagemaker/home?region=us-west-2"
        f"#/jobs/{job}",
    ]
    for line in expected_lines:
        assert line in body.splitlines()
    assert f"FlogStreamNameFilter$3D{rule_job}" in body

    record = client(aws, "dynamodb").get_item(TableName=stack.table, Key={"pk": {"S": f"{job}#stop"}})["Item"]
    assert {
        k: next(iter(v.values()))
        for k, v in record.items()
        if k not in ("claimed_at", "done_at", "lease_until", "expires_at")
    } == {
        "pk": f"{job}#stop",
        "state": "done",
        "action": "stop",
        "job": job,
        "rule": "ExplodingTensor",
        "rule_kind": "debugger",
        "source": "SageMaker Debugger",
        "step": "500",
        "actor": "smx-stop_training",
        "outcome": "stopped",
        "previous_status": "InProgress",
        "status_details": "RuleEvaluationConditionMet: Evaluation of the rule ExplodingTensor at step 500 "
        "resulted in the condition being met\n",
    }


def test_deliver_event_with_handler_mapping_loads_the_handler_files(stack: Stack) -> None:
    aws = stack.aws
    create_job(aws, "demo-7", {}, rules=("LossNotDecreasing",))
    local.set_rule_statuses(
        aws, "demo-7", debug=[local.rule_status("LossNotDecreasing", "IssuesFound", step=3000)]
    )
    env = stack.env(SMX_WATCH_PREFIXES="demo-", SMX_DEFAULT_ACTIONS="stop")
    deliveries = local.deliver_event(
        aws,
        local.state_change_event(aws, "demo-7", include_tags=False),
        {"stop_training": env, "notify": env},
        lambdas_dir=LAMBDAS,
    )
    assert [(d.handler, d.error, d.result) for d in deliveries] == [
        (
            "stop_training",
            None,
            {
                "action": "stop",
                "job": "demo-7",
                "triggered": ["LossNotDecreasing"],
                "stop": {"rule": "LossNotDecreasing", "outcome": "stopped", "step": 3000},
                "retrain": {"skipped": "no triggered rule asks for retrain"},
                "verdict_log": {"skipped": "no fleet dataset (SMX_FLEET_BUCKET unset)"},
            },
        ),
        (  # defaults say stop only
            "notify",
            None,
            {"action": "notify", "job": "demo-7", "triggered": ["LossNotDecreasing"], "notify": {"sent": []},
             "verdict_log": {"skipped": "no fleet dataset (SMX_FLEET_BUCKET unset)"}},
        ),
    ]
    assert local.stop_calls(aws, "demo-7") == 1
