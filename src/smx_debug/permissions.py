"""The IAM policy a notebook user needs: generated from the AWS calls our Python API makes.

:data:`NOTEBOOK_CALLS` lists the AWS operations of the notebook path (launch through the SDK v2 ``Estimator``,
``data.wait_for_rules`` / ``rule_summary`` / ``rule_summary_many``, ``system_metrics``,
``framework_metrics``, local rule evaluation from S3 and from CloudWatch). It is not written by hand from
memory: ``tests/functional/firsthour/test_permissions.py`` runs that path on the local AWS with every call
recorded and fails when the list and the calls differ. :func:`iam_actions` maps operations to IAM actions
(S3's list calls are ``s3:ListBucket``; ``CreateTrainingJob`` also needs ``iam:PassRole`` for the role and
``sagemaker:AddTags`` for its tags) and :func:`notebook_policy` scopes them to the job prefix, the bucket and
the role. ``python -m smx_debug.permissions --help`` prints the policy; docs/permissions.md shows it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

# (service signing name, operation) the notebook path calls. STS GetCallerIdentity, which the SDK may call
# (depending on its caches), needs no permission and is left out.
NOTEBOOK_CALLS: frozenset[tuple[str, str]] = frozenset({
    ("monitoring", "GetMetricData"),
    ("s3", "GetObject"),
    ("s3", "ListObjectsV2"),
    ("sagemaker", "CreateTrainingJob"),
    ("sagemaker", "DescribeTrainingJob"),
    ("sagemaker", "ListTrainingJobs"),
})

_PREFIX = {"monitoring": "cloudwatch"}  # signing name -> IAM service prefix, where they differ
_ACTION = {  # operations whose IAM action has another name
    ("s3", "ListObjectsV2"): "s3:ListBucket",
    ("s3", "ListObjects"): "s3:ListBucket",
    ("s3", "HeadBucket"): "s3:ListBucket",
    ("s3", "HeadObject"): "s3:GetObject",
}
_FREE = {("sts", "GetCallerIdentity")}  # allowed to every principal
_IMPLIED = {  # permissions a call needs besides its own action
    ("sagemaker", "CreateTrainingJob"): ("iam:PassRole", "sagemaker:AddTags"),
}


def iam_actions(calls: Iterable[tuple[str, str]]) -> list[str]:
    """The sorted IAM actions that the ``(signing name, operation)`` calls need."""
    out: set[str] = set()
    for call in calls:
        if call in _FREE:
            continue
        service, operation = call
        out.add(_ACTION.get(call, f"{_PREFIX.get(service, service)}:{operation}"))
        out.update(_IMPLIED.get(call, ()))
    return sorted(out)


def notebook_policy(
    *, bucket: str, role_arn: str, job_prefix: str = "", region: str = "*", account: str = "*",
    partition: str = "aws",
) -> dict[str, Any]:
    """The identity policy for a notebook user: launch and read jobs named ``job_prefix*``, read and write
    ``bucket``, pass ``role_arn`` to SageMaker, read CloudWatch metrics."""
    actions = iam_actions(NOTEBOOK_CALLS)
    sagemaker = [a for a in actions if a.startswith("sagemaker:") and a != "sagemaker:ListTrainingJobs"]
    jobs = f"arn:{partition}:sagemaker:{region}:{account}:training-job/{job_prefix}*"
    statements: list[dict[str, Any]] = [
        {"Sid": "TrainingJobs", "Effect": "Allow", "Action": sagemaker, "Resource": jobs},
        # ListTrainingJobs takes no resource (rule_summary_many)
        {"Sid": "ListTrainingJobs", "Effect": "Allow", "Action": ["sagemaker:ListTrainingJobs"], "Resource": "*"},
        {"Sid": "PassExecutionRole", "Effect": "Allow", "Action": ["iam:PassRole"], "Resource": role_arn,
         "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}},
        {"Sid": "Bucket", "Effect": "Allow", "Action": [a for a in actions if a == "s3:ListBucket"],
         "Resource": f"arn:{partition}:s3:::{bucket}"},
        {"Sid": "Objects", "Effect": "Allow",
         "Action": [a for a in actions if a.startswith("s3:") and a != "s3:ListBucket"],
         "Resource": f"arn:{partition}:s3:::{bucket}/*"},
        # GetMetricData has no resource-level permissions
        {"Sid": "Metrics", "Effect": "Allow", "Action": [a for a in actions if a.startswith("cloudwatch:")],
         "Resource": "*"},
    ]
    covered = {a for st in statements for a in st["Action"]}
    if covered != set(actions):  # every action the calls need lands in exactly the statements above
        raise AssertionError(f"actions without a statement: {sorted(set(actions) - covered)}")
    return {"Version": "2012-10-17", "Statement": statements}


def main(argv: Sequence[str] | None = None) -> int:
    """Print the notebook user's policy as JSON."""
    parser = argparse.ArgumentParser(prog="python -m smx_debug.permissions", description=main.__doc__)
    parser.add_argument("--bucket", required=True, help="the guard stack's OutputBucketName")
    parser.add_argument("--role-arn", required=True, help="the SageMaker execution role the notebook passes")
    parser.add_argument("--job-prefix", default="", help="training job name prefix the user may launch and read")
    parser.add_argument("--region", default="*")
    parser.add_argument("--account", default="*")
    args = parser.parse_args(argv)
    policy = notebook_policy(bucket=args.bucket, role_arn=args.role_arn, job_prefix=args.job_prefix,
                             region=args.region, account=args.account)
    json.dump(policy, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
