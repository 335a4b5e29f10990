"""The call tables, one per service: a botocore call (service id, operation, parameters) -> the IAM
authorizations it needs (:class:`Access`: action, resource, the request's own condition keys, the KMS uses).

Only the calls the deployed functions and the principals make are here; any other call is refused loudly
(:class:`~smx_debug.local.iam.policy.UnsupportedPolicyError`). To authorize a new call, add its operation to its
service's table (and a case to tests/unit/test_local_iam_eval.py's ``CALL_EXAMPLES``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from smx_debug.local.iam.policy import ContextValue


@dataclass(frozen=True)
class Access:
    """One authorization a call needs: ``action`` on ``resource`` with the request's own ``context`` keys.

    ``target``: the ARN whose resource policy and KMS key apply (the bucket of an object); ``absent``: keys
    of this action that the call leaves out (an optional parameter not given); ``kms``: the KMS actions the
    service performs with the target's customer managed key on the caller's behalf.
    """

    action: str
    resource: str
    context: Mapping[str, ContextValue] = field(default_factory=dict)
    target: str | None = None
    absent: tuple[str, ...] = ()
    kms: tuple[str, ...] = ()


Mapper = Callable[[Mapping[str, Any], str, str], list[Access]]  # (API parameters, region, account)


def _request_tags(tags: Any, *, key: str = "Key", value: str = "Value") -> dict[str, ContextValue]:
    pairs = {str(t[key]): str(t[value]) for t in tags or []}
    context: dict[str, ContextValue] = {f"aws:RequestTag/{k}": v for k, v in pairs.items()}
    if pairs:
        context["aws:TagKeys"] = list(pairs)
    return context


def _job_arn(name: str, region: str, account: str) -> str:
    return f"arn:aws:sagemaker:{region}:{account}:training-job/{name.lower()}"  # SageMaker lowercases names


def _create_training_job(p: Mapping[str, Any], region: str, account: str) -> list[Access]:
    arn = _job_arn(p["TrainingJobName"], region, account)
    tags = _request_tags(p.get("Tags"))
    resources = p.get("ResourceConfig") or {}
    instance_types = [resources["InstanceType"]] if resources.get("InstanceType") else []
    instance_types += [g["InstanceType"] for g in resources.get("InstanceGroups") or []]
    context: dict[str, ContextValue] = {**tags, "sagemaker:InstanceTypes": instance_types}
    optional = {
        "sagemaker:MaxRuntimeInSeconds": (p.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds"),
        "sagemaker:NetworkIsolation": p.get("EnableNetworkIsolation"),
        "sagemaker:InterContainerTrafficEncryption": p.get("EnableInterContainerTrafficEncryption"),
        "sagemaker:OutputKmsKeyArn": (p.get("OutputDataConfig") or {}).get("KmsKeyId"),
        "sagemaker:VolumeKmsKeyArn": resources.get("VolumeKmsKeyId"),
        "sagemaker:EnableRemoteDebug": (p.get("RemoteDebugConfig") or {}).get("EnableRemoteDebug"),
        "sagemaker:KeepAlivePeriod": resources.get("KeepAlivePeriodInSeconds"),
        "sagemaker:VpcSubnets": (p.get("VpcConfig") or {}).get("Subnets"),
        "sagemaker:VpcSecurityGroupIds": (p.get("VpcConfig") or {}).get("SecurityGroupIds"),
    }
    for key, value in optional.items():
        if value is not None:
            context[key] = ([str(v) for v in value] if isinstance(value, list) else
                            str(value).lower() if isinstance(value, bool) else str(value))
    absent = tuple(k for k, v in optional.items() if v is None)
    if not tags:
        absent += ("aws:TagKeys",)
    accesses = [Access("sagemaker:CreateTrainingJob", arn, context, absent=absent)]
    if tags:  # AWS authorizes tags given on create as sagemaker:AddTags too
        accesses.append(Access("sagemaker:AddTags", arn, {**tags, "sagemaker:TaggingAction": "CreateTrainingJob"}))
    accesses.append(Access("iam:PassRole", p["RoleArn"], {"iam:PassedToService": "sagemaker.amazonaws.com",
                                                           "iam:AssociatedResourceArn": arn}))
    return accesses


def _bucket(name: str) -> str:
    return f"arn:aws:s3:::{name}"


_S3_REQUEST = {"s3:authType": "REST-HEADER", "s3:signatureversion": "AWS4-HMAC-SHA256", "s3:TlsVersion": "1.3"}


def _s3_object(action: str, kms: tuple[str, ...]) -> Mapper:
    def mapper(p: Mapping[str, Any], region: str, account: str) -> list[Access]:
        return [Access(action, f"{_bucket(p['Bucket'])}/{p['Key']}", {**_S3_REQUEST, "s3:ResourceAccount": account},
                       target=_bucket(p["Bucket"]), kms=kms)]
    return mapper


def _s3_list(p: Mapping[str, Any], region: str, account: str) -> list[Access]:
    context: dict[str, ContextValue] = {**_S3_REQUEST, "s3:ResourceAccount": account}
    for param, key in (("Prefix", "s3:prefix"), ("Delimiter", "s3:delimiter"), ("MaxKeys", "s3:max-keys")):
        if p.get(param) is not None:
            context[key] = str(p[param])
    absent = tuple(k for k in ("s3:prefix", "s3:delimiter", "s3:max-keys") if k not in context)
    return [Access("s3:ListBucket", _bucket(p["Bucket"]), context, target=_bucket(p["Bucket"]), absent=absent)]


def _queue_arn(url: str, region: str, account: str) -> str:
    parts = url.rstrip("/").split("/")
    return f"arn:aws:sqs:{region}:{parts[-2]}:{parts[-1]}"


def _table(name: str, region: str, account: str) -> str:
    return name if name.startswith("arn:") else f"arn:aws:dynamodb:{region}:{account}:table/{name}"


def _dynamodb(action: str) -> Mapper:
    def mapper(p: Mapping[str, Any], region: str, account: str) -> list[Access]:
        tables = list(p["RequestItems"]) if "RequestItems" in p else [p["TableName"]]
        return [Access(action, _table(t, region, account)) for t in tables]
    return mapper


def _function_arn(name: str, region: str, account: str) -> str:
    return name if name.startswith("arn:") else f"arn:aws:lambda:{region}:{account}:function:{name}"


def _one(action: str, resource: Callable[[Mapping[str, Any], str, str], str], **more: Any) -> Mapper:
    return lambda p, region, account: [Access(action, resource(p, region, account), **more)]


def _star(action: str) -> Mapper:
    return lambda p, region, account: [Access(action, "*")]


# Each service's table: operation -> the IAM authorizations the call needs.
SAGEMAKER: dict[str, Mapper] = {
    "DescribeTrainingJob": _one("sagemaker:DescribeTrainingJob", lambda p, r, a: _job_arn(p["TrainingJobName"], r, a)),
    "StopTrainingJob": _one("sagemaker:StopTrainingJob", lambda p, r, a: _job_arn(p["TrainingJobName"], r, a)),
    "ListTags": _one("sagemaker:ListTags", lambda p, r, a: str(p["ResourceArn"])),
    "ListTrainingJobs": _star("sagemaker:ListTrainingJobs"),
    "Search": _star("sagemaker:Search"),
    "CreateTrainingJob": _create_training_job,
    "AddTags": lambda p, r, a: [Access("sagemaker:AddTags", str(p["ResourceArn"]), _request_tags(p.get("Tags")))],
}
CLOUDWATCH: dict[str, Mapper] = {
    "GetMetricData": _star("cloudwatch:GetMetricData"),
    "GetMetricStatistics": _star("cloudwatch:GetMetricStatistics"),
    "PutMetricData": lambda p, r, a: [Access("cloudwatch:PutMetricData", "*",
                                             {"cloudwatch:namespace": str(p["Namespace"])})],
}
DYNAMODB: dict[str, Mapper] = {
    operation: _dynamodb(f"dynamodb:{operation}")
    for operation in ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "BatchGetItem", "BatchWriteItem")
}
S3: dict[str, Mapper] = {
    "GetObject": _s3_object("s3:GetObject", ("kms:Decrypt",)),
    "HeadObject": _s3_object("s3:GetObject", ("kms:Decrypt",)),
    "PutObject": _s3_object("s3:PutObject", ("kms:GenerateDataKey",)),
    "ListObjectsV2": _s3_list,
    "DeleteObject": _s3_object("s3:DeleteObject", ()),
    "DeleteObjects": lambda p, r, a: [  # authorized as s3:DeleteObject on each key
        access for o in p["Delete"]["Objects"]
        for access in _s3_object("s3:DeleteObject", ())({"Bucket": p["Bucket"], "Key": o["Key"]}, r, a)],
}
SNS: dict[str, Mapper] = {
    "Publish": lambda p, r, a: [Access("sns:Publish", str(p.get("TopicArn") or p.get("TargetArn")),
                                       kms=("kms:GenerateDataKey", "kms:Decrypt"))],
}
SQS: dict[str, Mapper] = {
    operation: lambda p, r, a: [Access("sqs:SendMessage", _queue_arn(p["QueueUrl"], r, a),
                                       kms=("kms:GenerateDataKey", "kms:Decrypt"))]
    for operation in ("SendMessage", "SendMessageBatch")
}
SFN: dict[str, Mapper] = {
    "StartExecution": _one("states:StartExecution", lambda p, r, a: str(p["stateMachineArn"])),
    "DescribeExecution": _one("states:DescribeExecution", lambda p, r, a: str(p["executionArn"])),
}
LAMBDA: dict[str, Mapper] = {
    "Invoke": _one("lambda:InvokeFunction", lambda p, r, a: _function_arn(p["FunctionName"], r, a)),
}
STS: dict[str, Mapper] = {
    "GetCallerIdentity": lambda p, r, a: [],  # needs no permission (AWS documents it)
}
# botocore service id -> its table. The calls the deployed functions and principals make; any other is refused.
BY_SERVICE: dict[str, dict[str, Mapper]] = {
    "sagemaker": SAGEMAKER, "cloudwatch": CLOUDWATCH, "dynamodb": DYNAMODB, "s3": S3, "sns": SNS, "sqs": SQS,
    "sfn": SFN, "lambda": LAMBDA, "sts": STS,
}
# (botocore service id, operation) -> mapper: every table at once, for lookups and the tests.
CALLS: dict[tuple[str, str], Mapper] = {
    (service, operation): mapper for service, table in BY_SERVICE.items() for operation, mapper in table.items()
}
