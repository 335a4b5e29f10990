"""The retraining workflow: a Step Functions loop over the retrain handler's steps."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

__all__ = ["NEXT_ACTIONS", "RetrainingWorkflow"]

# The retrain handler's answer in ``$.next_action`` and where the loop goes next.
NEXT_ACTIONS = ("launch_new", "monitor", "end")


class RetrainingWorkflow(Construct):
    """init -> train -> wait -> monitor -> choice on ``$.next_action`` (launch_new/monitor/end).

    Each step invokes the retrain handler with ``{"step": <name>, "state": <the state document>}`` and
    continues with the document it returns. Any error is caught, published to the topic, and fails.

    Attributes:
        state_machine: the workflow.
        log_group: its execution log group (level ALL).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        function: lambda_.IFunction,
        topic: sns.ITopic,
        wait_seconds: int,
        timeout_seconds: int,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        failed = sfn.Fail(self, "Failed", error="RetrainingFailed", cause="a retraining step failed")
        notify_failure = tasks.SnsPublish(
            self,
            "NotifyFailure",
            topic=topic,
            subject="smx-debug retraining failed",
            message=sfn.TaskInput.from_text(
                sfn.JsonPath.format(
                    "smx-debug retraining failed: {}: {}",
                    sfn.JsonPath.string_at("$.error.Error"),
                    sfn.JsonPath.string_at("$.error.Cause"),
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
                retry_on_service_exceptions=True,
            )
            task.add_catch(notify_failure, errors=[sfn.Errors.ALL], result_path="$.error")
            return task

        init, train, monitor = step("Init", "init"), step("Train", "train"), step("Monitor", "monitor")
        wait = sfn.Wait(self, "Wait", time=sfn.WaitTime.duration(cdk.Duration.seconds(wait_seconds)))
        unknown = sfn.Fail(
            self, "UnknownNextAction", error="UnknownNextAction", cause="next_action is not launch_new, monitor or end"
        )
        choice = (
            sfn.Choice(self, "NextAction")
            .when(sfn.Condition.string_equals("$.next_action", "launch_new"), train)
            .when(sfn.Condition.string_equals("$.next_action", "monitor"), wait)
            .when(sfn.Condition.string_equals("$.next_action", "end"), sfn.Succeed(self, "Done"))
            .otherwise(unknown)
        )
        definition = init.next(train).next(wait).next(monitor).next(choice)

        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=cdk.RemovalPolicy.DESTROY)
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            timeout=cdk.Duration.seconds(timeout_seconds),
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
        )
        # The topic is KMS-encrypted: publishing needs the key too, which the SnsPublish task does not grant.
        topic.grant_publish(self.state_machine)
