"""The embedded local AWS used by the tests, the examples and ``make demo``.

moto's own behaviour is in :mod:`smx_debug.local.server`; what moto lacks is added one behaviour per module,
each through moto's public backend objects:

- :mod:`~smx_debug.local.training_jobs`: StopTrainingJob (InProgress -> Stopping -> Stopped, calls counted),
  job statuses, and the ProfilerConfig / ProfilerRuleConfigurations moto drops;
- :mod:`~smx_debug.local.execution_roles`: CreateTrainingJob refuses an execution role SageMaker could not
  assume (missing, or not trusting ``sagemaker.amazonaws.com``); :func:`execution_role` makes a real one;
- :mod:`~smx_debug.local.search`: SageMaker Search over training jobs with the API's operators, pages and
  result shape (moto's skips filters and ignores pages);
- :mod:`~smx_debug.local.rule_statuses`: rule evaluation statuses and the job's state-change event;
- :mod:`~smx_debug.local.delivery`: EventBridge -> Lambda and SNS -> Lambda, handlers run in-process;
- :mod:`~smx_debug.local.iam`: every call a deployed function (or a principal of ``iam.as_principal``, the
  notebook user) makes, and every delivery edge, authorized against the deployed policies (roles, resource
  policies, key policies) before it reaches moto;
- :mod:`~smx_debug.local.alarms`: CloudWatch alarm evaluation and notification;
- :mod:`~smx_debug.local.bucket_policy`: whole bucket policies, conditions included, evaluated by the local IAM;
- :mod:`~smx_debug.local.concurrency`: reserved concurrency a new account refuses (quota 10), refused;
- :mod:`~smx_debug.local.event_sources`: SQS -> Lambda event source mappings, checked when created and polled
  (:func:`~smx_debug.local.event_sources.poll`) with Lambda's batch size, maximum concurrency, visibility timeout
  and partial batch failures;
- and, installed on their own: :mod:`~smx_debug.local.metric_data`, :mod:`~smx_debug.local.job_metrics`,
  :mod:`~smx_debug.local.throttling`, :mod:`~smx_debug.local.sfn_lambda`, :mod:`~smx_debug.local.playback`,
  :mod:`~smx_debug.local.training_run` (a job's entry point run as in its container, tensors uploaded) with
  :mod:`~smx_debug.local.container_role` (the container's calls as the job's execution role, authorized).

:func:`install` installs training_jobs (with execution_roles), search, bucket_policy, iam (its server guard),
delivery and event_sources at once; :func:`deploy_stack` installs concurrency and event_sources; the rest act when called.
"""

from __future__ import annotations

from smx_debug.local import bucket_policy, delivery, event_sources, iam, search, training_jobs
from smx_debug.local.alarms import AlarmTransition, evaluate_alarms
from smx_debug.local.delivery import (
    Delivery,
    deliver_event,
    deliver_schedule,
    invoke_handler,
    reset_handlers,
    sns_lambda_deliveries,
    subscribe_queue,
)
from smx_debug.local.deploy import DeployedStack, EmulatedResource, deploy_stack, publish_assets
from smx_debug.local.execution_roles import execution_role
from smx_debug.local.rule_statuses import rule_status, set_rule_statuses, state_change_event
from smx_debug.local.server import DEFAULT_REGION, LOCAL_ACCOUNT_ID, LocalAws
from smx_debug.local.training_jobs import create_training_job, set_training_job_status, stop_calls, tick

__all__ = [
    "DEFAULT_REGION",
    "LOCAL_ACCOUNT_ID",
    "AlarmTransition",
    "Delivery",
    "DeployedStack",
    "EmulatedResource",
    "LocalAws",
    "create_training_job",
    "deliver_event",
    "deliver_schedule",
    "deploy_stack",
    "evaluate_alarms",
    "execution_role",
    "install",
    "invoke_handler",
    "publish_assets",
    "reset_handlers",
    "rule_status",
    "set_rule_statuses",
    "set_training_job_status",
    "sns_lambda_deliveries",
    "state_change_event",
    "stop_calls",
    "subscribe_queue",
    "tick",
]


def install(aws: LocalAws | None = None) -> None:
    """Install what moto lacks for the local AWS: the training-job lifecycle (with its execution roles checked),
    Search over training jobs, evaluated bucket policies, the local IAM's server guard, in-process SNS -> Lambda
    delivery on ``aws`` and SQS -> Lambda event source mappings polled, not pushed (patched once per process).
    Idempotent."""
    training_jobs.install()
    search.install()
    bucket_policy.install()
    iam.install()
    delivery.install(aws)
    event_sources.install()
