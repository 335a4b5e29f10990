"""Execution roles on the local AWS: CreateTrainingJob refuses a role SageMaker could not assume.

SageMaker runs a training job as its execution role (``RoleArn``) and checks when the job is created that it can
assume it. A role that does not exist, or whose trust policy does not let ``sagemaker.amazonaws.com``
``sts:AssumeRole`` it, fails the call at once with HTTP 400 and no job is created::

    An error occurred (ValidationException) when calling the CreateTrainingJob operation: Could not assume role
    arn:aws:iam::123456789012:role/x. Please ensure that the role exists and allows principal
    'sagemaker.amazonaws.com' to assume the role.

(AWS's wording as users quote it: github.com/awslabs/predictive-maintenance-using-machine-learning/issues/3 for a
role that does not exist, on SageMaker's CreateTransformJob; the same code and sentence for CreateTrainingJob in a
public repository's troubleshooting note, for a role that exists without the SageMaker trust; a role named without
its path is another ARN, which SageMaker cannot assume: github.com/aws/sagemaker-python-sdk/issues/43.) moto 5.2.5
records any ``RoleArn``. Here:

- :func:`install` makes CreateTrainingJob check the role in the local IAM before moto creates the job: a role with
  exactly that ARN (path included) must exist in the job's account, and its trust policy must allow the SageMaker
  service principal ``sts:AssumeRole``, as decided by the local IAM's own evaluator
  (:func:`smx_debug.local.iam.authorize.service_may_assume`: explicit deny wins, conditions, wildcards). Otherwise the call
  fails with SageMaker's ``ValidationException`` and message above. The assumption is evaluated without
  ``aws:SourceArn``/``aws:SourceAccount``: AWS does not document SageMaker supplying them for an execution role,
  so a trust policy conditioned on them is refused here (the stricter answer, never the kinder one).
- :func:`execution_role` finds or creates a SageMaker execution role (trust: ``sagemaker.amazonaws.com``) in the
  local IAM and returns its ARN: the one helper every caller uses that creates training jobs on the local AWS
  (:func:`smx_debug.local.create_training_job`, the examples, the notebook, the benchmarks, the tests).

A job's own calls from its container are made as its role (:mod:`smx_debug.local.sagemaker.container_role`); the local
container uploads a DebugHookConfig's LocalPath as the platform. This module needs moto (at call time only), so
it is not part of the Lambda assets.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

from moto.iam.models import iam_backends
from moto.sagemaker.exceptions import ValidationError
from moto.sagemaker.models import SageMakerModelBackend
from moto.utilities.utils import get_partition

from smx_debug.local.clients import client
from smx_debug.local.iam import service_may_assume
from smx_debug.local.patching import patch_once
from smx_debug.local.server import LocalAws

SAGEMAKER = "sagemaker.amazonaws.com"
EXECUTION_ROLE = "SageMakerExecution-local"  # matches the stack's default execution-role pattern (*SageMaker*)
TRUST_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": SAGEMAKER}, "Action": "sts:AssumeRole"}]}


def could_not_assume(role_arn: str) -> str:
    """SageMaker's message when it cannot assume ``role_arn``."""
    return (f"Could not assume role {role_arn}. Please ensure that the role exists and allows principal "
            f"'{SAGEMAKER}' to assume the role.")


def _assumable(account: str, region: str, role_arn: str) -> bool:
    backend = iam_backends[account][get_partition(region)]
    role = next((r for r in backend.get_roles() if r.arn == role_arn), None)  # the whole ARN: path included
    return role is not None and service_may_assume(role.assume_role_policy_document, SAGEMAKER, role_arn).allowed


def install() -> None:
    """Make CreateTrainingJob refuse an execution role SageMaker could not assume (patched once per process).
    Idempotent."""
    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        def create_training_job(self: Any, *args: Any, **kwargs: Any) -> Any:
            role_arn = str(signature.bind(self, *args, **kwargs).arguments.get("role_arn") or "")
            if not _assumable(self.account_id, self.region_name, role_arn):
                raise ValidationError(message=could_not_assume(role_arn))
            return original(self, *args, **kwargs)

        return create_training_job

    patch_once(SageMakerModelBackend, "create_training_job", wrap)


def execution_role(aws: LocalAws, name: str = EXECUTION_ROLE) -> str:
    """The ARN of the SageMaker execution role ``name`` in the local IAM, created (trusting only
    ``sagemaker.amazonaws.com``) when it does not exist; installs the check of :func:`install`.

    Example:
        >>> role = execution_role(aws)  # doctest: +SKIP
        >>> aws.client("sagemaker").create_training_job(TrainingJobName="j", RoleArn=role, ...)  # doctest: +SKIP
    """
    install()
    iam = client(aws, "iam")
    try:
        return str(iam.get_role(RoleName=name)["Role"]["Arn"])
    except iam.exceptions.NoSuchEntityException:
        pass
    try:
        created = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(TRUST_POLICY),
                                  Description="SageMaker execution role of the local AWS")
    except iam.exceptions.EntityAlreadyExistsException:  # another thread created it meanwhile
        return str(iam.get_role(RoleName=name)["Role"]["Arn"])
    return str(created["Role"]["Arn"])
