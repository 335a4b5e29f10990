"""The embedded local AWS used by the tests, the examples and ``make demo``: moto in server mode, stricter than moto.

Laid out as moto lays out its backends, one subpackage per emulated service, each extending moto through its
public backend objects (:mod:`~smx_debug.local.patching`, the one mechanism):

- :mod:`~smx_debug.local.server`: :class:`LocalAws`, moto's own server on a free loopback port; what a behaviour
  records is held by the instance (``aws.recorder(...)``);
- :mod:`~smx_debug.local.iam`: every call a deployed function or a principal makes, and every delivery edge,
  authorized against the deployed policies (its pure evaluator in :mod:`~smx_debug.local.iam.policy`, the call
  tables per service in :mod:`~smx_debug.local.iam.calls`);
- :mod:`~smx_debug.local.sagemaker`: the training-job lifecycle (StopTrainingJob, statuses, profiler fields),
  execution roles, Search, rule statuses, a job's playback and metrics, a job's entry point run as in its
  container (with the container's calls as its role), another team's jobs;
- :mod:`~smx_debug.local.awslambda`: handlers run in-process with Lambda's context, reserved concurrency, SQS
  event source mappings; :mod:`~smx_debug.local.events`: EventBridge -> Lambda; :mod:`~smx_debug.local.sns`:
  SNS -> Lambda and queues; :mod:`~smx_debug.local.stepfunctions`: Step Functions' Lambda and SNS tasks;
- :mod:`~smx_debug.local.cloudwatch`: alarm evaluation, GetMetricData at scale; :mod:`~smx_debug.local.s3`: whole
  bucket policies; :mod:`~smx_debug.local.cloudformation`: a synthesized stack deployed;
- :mod:`~smx_debug.local.throttling` (any service's throttling), :mod:`~smx_debug.local.sdk` (the SageMaker SDK).

:func:`install` installs the training-job lifecycle (with its execution roles checked), Search, bucket policies,
the local IAM's server guard, SNS delivery and SQS event source mappings at once, for ``aws``; :func:`deploy_stack`
installs concurrency and event sources; the rest act when called.
"""

from __future__ import annotations

from smx_debug.local import iam
from smx_debug.local.awslambda import event_sources
from smx_debug.local.cloudformation.deploy import DeployedStack, deploy_stack
from smx_debug.local.cloudwatch.alarms import evaluate_alarms
from smx_debug.local.events.delivery import deliver_event, deliver_schedule
from smx_debug.local.patching import serve
from smx_debug.local.s3 import bucket_policy
from smx_debug.local.sagemaker import search, training_jobs
from smx_debug.local.sagemaker.execution_roles import execution_role
from smx_debug.local.sagemaker.rule_statuses import rule_status, set_rule_statuses, state_change_event
from smx_debug.local.sagemaker.training_jobs import (
    create_training_job,
    set_training_job_status,
    stop_calls,
    tick,
)
from smx_debug.local.server import LOCAL_ACCOUNT_ID, LocalAws
from smx_debug.local.sns import delivery as sns_delivery
from smx_debug.local.sns.delivery import sns_lambda_deliveries, subscribe_queue

__all__ = [
    "LOCAL_ACCOUNT_ID",
    "DeployedStack",
    "LocalAws",
    "create_training_job",
    "deliver_event",
    "deliver_schedule",
    "deploy_stack",
    "evaluate_alarms",
    "execution_role",
    "install",
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
    delivery and SQS -> Lambda event source mappings polled, not pushed (patched once per process); with ``aws``,
    moto's replaced methods act for it from now on (:func:`smx_debug.local.patching.serve`). Idempotent."""
    training_jobs.install()
    search.install()
    bucket_policy.install()
    iam.install()
    sns_delivery.install()
    event_sources.install()
    if aws is not None:
        serve(aws)
