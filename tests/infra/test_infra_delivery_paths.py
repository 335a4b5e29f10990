"""Every delivery edge of the synthesized stack is allowed by the receiving resource's policy and its KMS key.

The local AWS enforces no resource or key policy, so this test is the guard for what a real account checks.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers_infra import Synth
from infra_delivery import Template, check_edge, derive_edges

CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "full": {"watch_prefixes": ["exp-", "prod-"], "notification_emails": ["ml@example.com"],
             "notification_sms": ["+15555550123"], "alarm_rules": ["VanishingGradient", "LossNotDecreasing"],
             "default_actions": ["notify", "stop"]},
    "minimal": {"opt_in_tag": False, "watch_prefixes": "exp-", "retraining": False},
}


@pytest.fixture(scope="module", params=sorted(CONFIGURATIONS))
def template(request: pytest.FixtureRequest, synth_cached: Synth) -> Template:
    synthesized, _ = synth_cached(**CONFIGURATIONS[request.param])
    return Template(synthesized.to_json())


def test_edges_include_the_paths_a_real_account_checks(template: Template) -> None:
    names = [edge.name for edge in derive_edges(template)]
    kinds = {(edge.service, edge.action, template.resources[edge.target]["Type"]) for edge in derive_edges(template)}
    assert {
        ("cloudwatch.amazonaws.com", "sns:Publish", "AWS::SNS::Topic"),  # alarm -> alarm topic
        ("sns.amazonaws.com", "sqs:SendMessage", "AWS::SQS::Queue"),  # alarm topic subscription -> its DLQ
        ("sns.amazonaws.com", "lambda:InvokeFunction", "AWS::Lambda::Function"),
        ("events.amazonaws.com", "lambda:InvokeFunction", "AWS::Lambda::Function"),
        ("events.amazonaws.com", "sqs:SendMessage", "AWS::SQS::Queue"),
        ("lambda.amazonaws.com", "sqs:SendMessage", "AWS::SQS::Queue"),
        ("logging.s3.amazonaws.com", "s3:PutObject", "AWS::S3::Bucket"),
    } <= kinds, names



@pytest.mark.parametrize("kind", ["alarm-to-topic", "subscription-dlq", "other"])
def test_every_delivery_edge_is_allowed_by_policy_and_key(template: Template, kind: str) -> None:
    edges = derive_edges(template)
    chosen = {
        "alarm-to-topic": [e for e in edges if e.service == "cloudwatch.amazonaws.com"],
        "subscription-dlq": [e for e in edges if e.service == "sns.amazonaws.com" and e.action == "sqs:SendMessage"],
    }
    selected = chosen.get(kind) or [e for e in edges if not any(e in v for v in chosen.values())]
    assert selected
    problems = [problem for edge in selected for problem in check_edge(template, edge)]
    assert problems == []
