"""What a security reviewer asks of the stack's policies (issue 20, defect 14), evaluated on the synthesized template.

- The key lets EventBridge and SNS use it only for the dead-letter queue (the encryption context SQS sends); no
  role or key statement grants ``kms:GenerateDataKey*`` where ``GenerateDataKey`` does.
- The evaluator reads only the watch specs, Debugger profiler output and the hooks' tensors of the stack's bucket
  (and, with the fleet on, its jobs' fleet minutes), not models.
- The retraining state machine's role trusts that state machine only, not any state machine of the account.
- Retraining launches only the configured instance types (``retraining.instance_types``) for at most
  ``retraining.max_runtime_seconds`` (``sagemaker:InstanceTypes``, ``sagemaker:MaxRuntimeInSeconds``).
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers_infra import Synth
from infra_delivery import ACCOUNT, REGION, Template, allowed

from infra.config import GuardConfig, config_from_context
from smx_debug.contracts import EVALUATOR_SPEC_PREFIX, HANDLER_TAG, MANAGED_TAG
from smx_debug.errors import ConfigError
from smx_debug.local import iam
from smx_debug.local.iam import Principal, Request

CONTEXT: dict[str, Any] = {"watch_prefixes": ["exp-"],
                           "retraining": {"instance_types": ["ml.g5.*", "ml.p3.2xlarge"], "max_runtime_seconds": 7200}}


@pytest.fixture(scope="module")
def stack(synth_cached: Synth) -> tuple[Template, Any]:
    synthesized, guard = synth_cached(**CONTEXT)
    return Template(synthesized.to_json()), guard


def _logical(guard: Any, construct: Any) -> str:
    return str(guard.get_logical_id(construct.node.default_child))


def _role_of(t: Template, handler: str) -> list[dict[str, Any]]:
    for _, props in t.of_type("AWS::Lambda::Function"):
        if {tag["Key"]: tag["Value"] for tag in props.get("Tags", [])}.get(HANDLER_TAG) == handler:
            return t.role_policy(str(t.logical_of(props["Role"])))
    raise AssertionError(handler)


def _all_statements(t: Template) -> list[dict[str, Any]]:
    out = [s for _, p in t.of_type("AWS::IAM::Policy") for s in t.resolve(p["PolicyDocument"]["Statement"])]
    out += [s for _, p in t.of_type("AWS::KMS::Key") for s in t.resolve(p["KeyPolicy"]["Statement"])]
    return out


def test_no_statement_grants_generate_data_key_wildcard(stack: tuple[Template, Any]) -> None:
    t, _ = stack
    wild = [s for s in _all_statements(t) if any(a.startswith("kms:GenerateDataKey") and a != "kms:GenerateDataKey"
                                                 for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))]
    assert wild == []


@pytest.mark.parametrize("service", ["events.amazonaws.com", "sns.amazonaws.com"])
def test_key_lets_events_and_sns_use_it_for_the_dead_letter_queue_only(stack: tuple[Template, Any], service: str) -> None:
    t, guard = stack
    key, dlq = _logical(guard, guard.key), _logical(guard, guard.dead_letters)
    policy, key_arn = t.key_policy(key), t.arn(key)
    principal = Principal(ACCOUNT, service=service)
    for action in ("kms:GenerateDataKey", "kms:Decrypt"):
        ours = Request(principal, action, key_arn, {"kms:EncryptionContext:aws:sqs:arn": t.arn(dlq)})
        assert iam.decide(ours, resource=policy, key_policy=True).allowed, action
        other = f"arn:aws:sqs:{REGION}:{ACCOUNT}:someone-elses-queue"
        for context in ({"kms:EncryptionContext:aws:sqs:arn": other}, {}):
            assert not iam.decide(Request(principal, action, key_arn, context), resource=policy,
                                  key_policy=True).allowed, (action, context)


@pytest.mark.parametrize(("key", "expected"), [
    (f"{EVALUATOR_SPEC_PREFIX}0123abcd.json", True),
    ("debugger/exp-1/profiler-output/system/incremental/2026112214/1763820000.algo-1.json", True),
    ("exp-1/profiler-output/framework/pevents/x.json", True),
    ("debugger/exp-1/debug-output/events/000000000000/000000000000_worker_0.tfevents", True),
    ("debugger/exp-1/debug-output/index/000000000/000000000000_worker_0.json", True),
    ("model/exp-1/output/model.tar.gz", False),
    ("model/exp-1/output/debug-outputs.tar.gz", False),
    ("smx-debug/other/secret.json", False),
])
def test_evaluator_reads_only_watch_specs_profiler_output_and_tensors(
    stack: tuple[Template, Any], key: str, expected: bool
) -> None:
    t, guard = stack
    bucket = t.arn(_logical(guard, guard.storage.bucket))
    assert allowed(_role_of(t, "evaluator"), "s3:GetObject", f"{bucket}/{key}") is expected


@pytest.mark.parametrize(("prefix", "expected"), [
    ("debugger/exp-1/profiler-output/system/", True), (EVALUATOR_SPEC_PREFIX, True),
    ("debugger/exp-1/debug-output/", True), ("debugger/exp-1/debug-output/index/", True),
    ("model/exp-1/", False), ("", False), (None, False),
])
def test_evaluator_lists_only_watch_specs_profiler_output_and_tensors(
    stack: tuple[Template, Any], prefix: str | None, expected: bool
) -> None:
    t, guard = stack
    context = {} if prefix is None else {"s3:prefix": prefix}
    bucket = t.arn(_logical(guard, guard.storage.bucket))
    assert allowed(_role_of(t, "evaluator"), "s3:ListBucket", bucket, context) is expected


def test_state_machine_role_trusts_only_its_state_machine(stack: tuple[Template, Any]) -> None:
    t, guard = stack
    machine = guard.workflow.state_machine
    role, arn = _logical(guard, machine.role), t.arn(_logical(guard, machine))
    assert t.trusts(role, "states.amazonaws.com", arn)
    assert not t.trusts(role, "states.amazonaws.com", f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:another")


def _create(instance_types: list[str] | None, runtime: int | None) -> dict[str, Any]:
    """The request context of CreateTrainingJob (as smx_debug.local.iam.calls.CALLS computes it from the request)."""
    context: dict[str, Any] = {f"aws:RequestTag/{MANAGED_TAG}": "true", "aws:TagKeys": [MANAGED_TAG]}
    if instance_types is not None:
        context["sagemaker:InstanceTypes"] = instance_types
    if runtime is not None:
        context["sagemaker:MaxRuntimeInSeconds"] = str(runtime)
    return context


@pytest.mark.parametrize(("types", "runtime", "expected"), [
    (["ml.g5.2xlarge"], 3600, True),
    (["ml.p3.2xlarge"], 7200, True),
    (["ml.g5.2xlarge", "ml.g5.48xlarge"], 60, True),
    (["ml.p4d.24xlarge"], 3600, False),  # not in retraining.instance_types
    (["ml.p3.16xlarge"], 3600, False),
    (["ml.g5.2xlarge", "ml.p5.48xlarge"], 3600, False),  # every instance group must be allowed
    (["ml.g5.2xlarge"], 7201, False),  # longer than retraining.max_runtime_seconds
    (None, 3600, False),
    (["ml.g5.2xlarge"], None, False),
])
def test_retrain_creates_only_allowed_instance_types_and_runtimes(
    stack: tuple[Template, Any], types: list[str] | None, runtime: int | None, expected: bool
) -> None:
    t, _ = stack
    arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/exp-1-1123-1"
    assert allowed(_role_of(t, "retrain"), "sagemaker:CreateTrainingJob", arn, _create(types, runtime)) is expected


@pytest.mark.parametrize(("value", "fragment"), [
    ([], "at least one"), (["g5.2xlarge"], "instance type"), (["ml.g5.*", "ml.g5.*"], "twice"), ("ml.g5.*,", None),
])
def test_config_retraining_instance_types_are_checked_naming_the_key(value: Any, fragment: str | None) -> None:
    if fragment is None:  # -c retraining='{"instance_types": "ml.g5.*,"}': comma-separated is fine
        assert config_from_context({"retraining": {"instance_types": value}}).retraining.instance_types == ("ml.g5.*",)
        return
    with pytest.raises(ConfigError) as caught:
        config_from_context({"retraining": {"instance_types": value}})
    assert caught.value.field == "retraining.instance_types" and fragment in str(caught.value)


def test_config_default_instance_types_leave_out_the_largest_families() -> None:
    types = GuardConfig().retraining.instance_types
    assert "ml.g5.*" in types and not any(t.startswith(("ml.p4", "ml.p5", "ml.trn")) for t in types)
