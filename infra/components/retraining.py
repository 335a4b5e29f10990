"""The retraining workflow: a Step Functions loop over the retrain handler's steps, bounded and always reported.

Defaults -> Init -> Train -> Wait -> Monitor -> NextAction (launch_new: Train, monitor: Wait, end: End) and
End (the handler's ``end`` step publishes the final message) -> Done. Any task failure is caught into
``$.error`` and goes through the same ``end`` step (EndAfterFailure -> Failed); if even that fails, the error's
name (never its cause, which may quote request values) is published directly.

History bound: the Defaults state merges the deployment's settings *under* the execution's run spec
(``wait_seconds``, ``max_runtime_seconds``, ``max_retraining``, ``max_polls``); the handler stops polling after
``max_polls`` (:func:`smx_debug.contracts.retrain_max_polls`) and ends through ``end``, so an execution cannot
reach Step Functions' 25,000-event history. ``infra.config.RetrainingConfig`` refuses settings whose worst
case would. The execution timeout is only a backstop, after the poll budget.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from infra.config import RetrainingConfig
from smx_debug.actions.retrain import LAUNCH_NEW, MONITOR, STEP_END, STEP_INIT, STEP_MONITOR, STEP_TRAIN
from smx_debug.contracts import retrain_max_polls

# The execution timeout is the poll budget plus this: the loop ends (and reports) through `end` first.
BACKSTOP_SECONDS = 3600


def run_spec_defaults(settings: RetrainingConfig) -> dict[str, Any]:
    """The deployment's settings that the Defaults state merges under each execution's run spec (the launch limits
    too, which the retrain role's policy enforces: the handler applies them first and says what it refused)."""
    polls = -(-settings.max_runtime_seconds // settings.wait_seconds)
    return {
        "wait_seconds": settings.wait_seconds,
        "max_runtime_seconds": settings.max_runtime_seconds,
        "max_retraining": settings.max_retraining,
        "max_polls": max(1, min(polls, retrain_max_polls(settings.max_retraining))),
        "instance_types": list(settings.instance_types),
    }


class RetrainingWorkflow(Construct):
    """The retraining state machine; each task invokes the retrain handler with ``{"step", "state"}``.

    Attributes:
        state_machine: the workflow (named ``state_machine_name``).
        log_group: its execution log group (every event, without execution data: states carry requests).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        function: lambda_.IFunction,
        topic: sns.ITopic,
        key: kms.IKey,
        state_machine_name: str,
        settings: RetrainingConfig,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        failed = sfn.Fail(self, "Failed", error="RetrainingFailed", cause="a retraining step failed")
        # Last resort when the end step itself fails: the error's name only (its cause may quote values).
        notify_failure = tasks.SnsPublish(
            self,
            "NotifyFailure",
            topic=topic,
            subject="smx-debug retraining failed",
            message=sfn.TaskInput.from_text(
                sfn.JsonPath.format(
                    "smx-debug retraining execution {} failed ({}) and its final step could not report: see the "
                    "executions of the retraining state machine.",
                    sfn.JsonPath.string_at("$$.Execution.Name"),
                    sfn.JsonPath.string_at("$.end_error.Error"),
                )
            ),
            result_path=sfn.JsonPath.DISCARD,
        ).next(failed)

        def step(state_id: str, name: str) -> tasks.LambdaInvoke:
            task = tasks.LambdaInvoke(
                self,
                state_id,
                lambda_function=function,
                payload=sfn.TaskInput.from_object({"step": name, "state": sfn.JsonPath.entire_payload}),
                payload_response_only=True,
                retry_on_service_exceptions=False,
                task_timeout=sfn.Timeout.duration(cdk.Duration.minutes(5)),
            )
            # Lambda's own transient failures, a bounded number of times (each retry adds history events).
            task.add_retry(errors=["Lambda.ServiceException", "Lambda.AWSLambdaException",
                                   "Lambda.SdkClientException", "Lambda.TooManyRequestsException"],
                           interval=cdk.Duration.seconds(2), max_attempts=2, backoff_rate=2)
            return task

        end_after_failure = step("EndAfterFailure", STEP_END)
        end_after_failure.add_catch(notify_failure, errors=[sfn.Errors.ALL], result_path="$.end_error")
        end_after_failure.next(failed)
        end = step("End", STEP_END)
        end.add_catch(notify_failure, errors=[sfn.Errors.ALL], result_path="$.end_error")
        end.next(sfn.Succeed(self, "Done"))

        init, train, monitor = step("Init", STEP_INIT), step("Train", STEP_TRAIN), step("Monitor", STEP_MONITOR)
        for task in (init, train, monitor):
            task.add_catch(end_after_failure, errors=[sfn.Errors.ALL], result_path="$.error")
        defaults = sfn.Pass(
            self,
            "Defaults",
            parameters={"defaults": run_spec_defaults(settings), "run_spec": sfn.JsonPath.object_at("$.run_spec")},
        )
        apply_defaults = sfn.Pass(
            self,
            "ApplyDefaults",
            parameters={"run_spec": sfn.JsonPath.json_merge(sfn.JsonPath.object_at("$.defaults"),
                                                            sfn.JsonPath.object_at("$.run_spec"))},
        )
        wait = sfn.Wait(self, "Wait", time=sfn.WaitTime.seconds_path("$.run_spec.wait_seconds"))
        after_init = (
            sfn.Choice(self, "AfterInit")
            .when(sfn.Condition.string_equals("$.next_action", LAUNCH_NEW), train)
            .otherwise(end)
        )
        choice = (
            sfn.Choice(self, "NextAction")
            .when(sfn.Condition.string_equals("$.next_action", LAUNCH_NEW), train)
            .when(sfn.Condition.string_equals("$.next_action", MONITOR), wait)
            .otherwise(end)  # "end", or anything else: report and stop
        )
        train.next(wait)
        wait.next(monitor)
        monitor.next(choice)
        definition = defaults.next(apply_defaults).next(init).next(after_init)

        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=cdk.RemovalPolicy.DESTROY)
        # Our own role, trusted by this state machine only (CDK's default trusts every state machine of the account).
        stack = cdk.Stack.of(self)
        machine_arn = stack.format_arn(service="states", resource="stateMachine", resource_name=state_machine_name,
                                       arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)
        role = iam.Role(self, "Role", description="smx-debug retraining state machine", assumed_by=iam.ServicePrincipal(
            "states.amazonaws.com",
            conditions={"ArnEquals": {"aws:SourceArn": machine_arn}, "StringEquals": {"aws:SourceAccount": stack.account}},
        ))
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            role=role,
            state_machine_name=state_machine_name,
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            timeout=cdk.Duration.seconds(settings.max_runtime_seconds + BACKSTOP_SECONDS),
            tracing_enabled=True,
            # Every event (cdk-nag SF1), but never execution data: states carry CreateTrainingJob requests
            # (Environment, HyperParameters), which must not reach the logs.
            logs=sfn.LogOptions(destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
        )
        # The topic is KMS-encrypted: publishing needs data keys, which the SnsPublish task does not grant.
        self.state_machine.add_to_role_policy(
            iam.PolicyStatement(actions=["kms:GenerateDataKey", "kms:Decrypt"], resources=[key.key_arn])
        )

