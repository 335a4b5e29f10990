"""Deploy a synthesized CloudFormation template into the embedded local AWS.

moto's CloudFormation creates most of what the guard stack declares, but skips some resource types
(CloudWatch alarms, bucket/topic/queue policies, SNS subscriptions, Lambda event-invoke configs) and
ignores some properties (S3 versioning, public access block, lifecycle, access logging; Lambda tags in
CloudFormation's list form). :func:`deploy_stack` creates the stack, then builds those from the same
template's definitions, resolving ``Ref``, ``Fn::GetAtt``, ``Fn::Join``, ``Fn::Sub``, ``Fn::Select`` and
``Fn::Split`` against the deployed resources, and reports each one it emulated.

File assets (the Lambda code) are uploaded first from the cloud assembly's ``*.assets.json`` manifest:
directories are zipped deterministically, buckets created when missing. Synthesize with ``-c local=true``
to get a template that needs no bootstrap stack (see ``infra/cdk_app.py``).

Like a new account, the deploy refuses reserved concurrency that would leave less than Lambda's minimum
unreserved concurrency at the default quota (:mod:`smx_debug.local.awslambda.concurrency`); like Lambda, it refuses an SQS
event source mapping AWS would refuse (:mod:`smx_debug.local.awslambda.event_sources`).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError

from smx_debug.errors import AwsError, DataError, NotFoundError
from smx_debug.local.awslambda import concurrency, event_sources
from smx_debug.local.server import LOCAL_ACCOUNT_ID, LocalAws

Clients = Callable[[str], Any]

_CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]
_DONE = re.compile(r"^(CREATE|UPDATE|ROLLBACK|DELETE|UPDATE_ROLLBACK)_(COMPLETE|FAILED)$")
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class EmulatedResource:
    """A resource (or some properties of one) that we created because moto's CloudFormation does not."""

    logical_id: str
    resource_type: str
    physical_id: str
    what: str  # e.g. "created" or "properties VersioningConfiguration, LifecycleConfiguration"


@dataclass(frozen=True)
class DeployedStack:
    """What :func:`deploy_stack` left in the local AWS.

    Attributes:
        stack_name: the CloudFormation stack name.
        stack_id: its ARN.
        outputs: stack outputs by key.
        physical_ids: physical resource id by logical id (moto's and the emulated ones).
        emulated: resources and properties we created from the template ourselves.
        skipped: ``logical_id -> reason`` for resources neither moto nor we created.
        seconds: wall time of the deployment (assets, stack, emulation).
    """

    stack_name: str
    stack_id: str
    outputs: dict[str, str]
    physical_ids: dict[str, str]
    emulated: tuple[EmulatedResource, ...] = ()
    skipped: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def output(self, key: str) -> str:
        """One output's value; NotFoundError names the key and lists the ones there are."""
        try:
            return self.outputs[key]
        except KeyError:
            raise NotFoundError(
                f"stack {self.stack_name!r} has no output {key!r} (outputs: {', '.join(sorted(self.outputs))})"
            ) from None


def deploy_stack(
    aws: LocalAws,
    template: Mapping[str, Any] | Path,
    *,
    stack_name: str,
    assets_dir: Path | None = None,
    parameters: Mapping[str, str] | None = None,
    timeout_seconds: float = 120.0,
) -> DeployedStack:
    """Create ``template`` as stack ``stack_name`` in the local AWS and emulate what moto skips.

    Args:
        aws: the running local AWS.
        template: the template dict or the path of a ``*.template.json``.
        stack_name: the stack to create (must not exist).
        assets_dir: the cloud assembly directory (``cdk.out``) whose file assets the template uses;
            defaults to the template file's folder when ``template`` is a path.
        parameters: stack parameter values.
        timeout_seconds: how long to wait for the stack.

    Raises:
        DataError: the template is not a CloudFormation template.
        AwsError: the stack failed to create (with moto's reasons), or a function reserves concurrency a new
            account cannot give (code ``InvalidParameterValueException``).
    """
    started = time.monotonic()
    if isinstance(template, Path):
        if assets_dir is None:
            assets_dir = template.parent
        try:
            body: dict[str, Any] = json.loads(template.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DataError(f"template {str(template)!r} is not readable JSON: {exc}") from exc
    else:
        body = dict(template)
    resources = body.get("Resources")
    if not isinstance(resources, dict) or not resources:
        raise DataError("template: no 'Resources' mapping; not a CloudFormation template")
    clients = _client_cache(aws)
    concurrency.install()
    concurrency.check_template(resources, stack_name=stack_name, reserved_now=_reserved_now(clients))
    event_sources.install()  # SQS event source mappings are checked as Lambda does, and polled, not pushed
    if assets_dir is not None:
        publish_assets(aws, assets_dir, clients=clients)
    _ensure_ssm_parameters(clients, body, parameters or {})

    cfn = clients("cloudformation")
    try:
        stack_id = cfn.create_stack(
            StackName=stack_name,
            TemplateBody=json.dumps(body),
            Capabilities=_CAPABILITIES,
            Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in (parameters or {}).items()],
        )["StackId"]
    except ClientError as exc:
        raise AwsError(
            f"CreateStack {stack_name!r}: {exc.response['Error'].get('Message', exc)}",
            code=exc.response["Error"].get("Code", ""),
            operation="CreateStack",
        ) from exc
    stack = _wait(cfn, stack_name, timeout_seconds)
    if stack["StackStatus"] != "CREATE_COMPLETE":
        reasons = [
            f"{e['LogicalResourceId']}: {e.get('ResourceStatusReason', '')}"
            for e in cfn.describe_stack_events(StackName=stack_name)["StackEvents"]
            if e.get("ResourceStatus", "").endswith("FAILED")
        ]
        raise AwsError(f"stack {stack_name!r} ended {stack['StackStatus']}: {'; '.join(reasons) or 'no reason'}",
                       code=stack["StackStatus"], operation="CreateStack")

    physical: dict[str, str] = {}
    for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack_name):
        for summary in page["StackResourceSummaries"]:
            if summary.get("LogicalResourceId") in resources:  # moto may list an unnamed extra entry
                physical[summary["LogicalResourceId"]] = summary["PhysicalResourceId"]
    resolver = _Resolver(clients, resources, physical, parameters or {},
                         _pseudo_parameters(aws.region, stack_name, stack_id))
    emulated, skipped = _emulate(clients, resources, physical, resolver)
    outputs = {o["OutputKey"]: o.get("OutputValue", "") for o in stack.get("Outputs", [])}
    # moto may leave outputs of skipped resources unresolved; resolve them from the template instead.
    for key, spec in (body.get("Outputs") or {}).items():
        if key not in outputs or not outputs[key]:
            try:
                outputs[key] = str(resolver.resolve(spec.get("Value")))
            except _Unresolvable:
                continue
    return DeployedStack(
        stack_name=stack_name,
        stack_id=stack_id,
        outputs=outputs,
        physical_ids=physical,
        emulated=tuple(emulated),
        skipped=skipped,
        seconds=time.monotonic() - started,
    )


# -- assets --------------------------------------------------------------------------------------------


def publish_assets(aws: LocalAws, assets_dir: Path, *, clients: Clients | None = None) -> list[str]:
    """Upload the file assets of every ``*.assets.json`` in ``assets_dir``; returns ``s3://`` URLs.

    Docker image assets are not supported (the guard stack has none) and raise DataError.
    """
    s3 = (clients or _client_cache(aws))("s3")
    uploaded: list[str] = []
    for manifest_path in sorted(assets_dir.glob("*.assets.json")):
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("dockerImages"):
            raise DataError(f"{manifest_path.name}: docker image assets are not supported by the local deploy")
        for asset_id, asset in (manifest.get("files") or {}).items():
            source = assets_dir / asset["source"]["path"]
            if not source.exists():
                raise NotFoundError(f"asset {asset_id}: {source} does not exist (synthesize first)")
            packaging = asset["source"].get("packaging", "file")
            data = _zip_dir(source) if packaging == "zip" and source.is_dir() else source.read_bytes()
            for destination in asset["destinations"].values():
                bucket = _substitute_placeholders(destination["bucketName"], aws.region)
                key = _substitute_placeholders(destination["objectKey"], aws.region)
                _ensure_bucket(s3, bucket, aws.region)
                s3.put_object(Bucket=bucket, Key=key, Body=data)
                uploaded.append(f"s3://{bucket}/{key}")
    return uploaded


def _reserved_now(clients: Clients) -> int:
    """The concurrency already reserved by the account's functions."""
    lam, total = clients("lambda"), 0
    for page in lam.get_paginator("list_functions").paginate():
        for fn in page["Functions"]:
            total += int(lam.get_function_concurrency(FunctionName=fn["FunctionName"]).get(
                "ReservedConcurrentExecutions") or 0)
    return total


def _client_cache(aws: LocalAws) -> Clients:
    """One client per service for the whole deployment (building a boto3 client costs ~0.2 s)."""
    session = aws.session()
    config = Config(retries={"mode": "standard", "max_attempts": 3})
    cache: dict[str, Any] = {}

    def client(service: str) -> Any:
        if service not in cache:
            cache[service] = session.client(service, endpoint_url=aws.endpoint_url, config=config)  # type: ignore[call-overload]
        return cache[service]

    return client


def _substitute_placeholders(text: str, region: str) -> str:
    return (
        text.replace("${AWS::AccountId}", LOCAL_ACCOUNT_ID)
        .replace("${AWS::Region}", region)
        .replace("${AWS::Partition}", "aws")
    )


def _zip_dir(root: Path) -> bytes:
    """A zip of ``root``'s files with fixed timestamps and order, so the same tree gives the same bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(path.relative_to(root).as_posix(), date_time=_ZIP_EPOCH)
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def _ensure_bucket(s3: Any, bucket: str, region: str) -> None:
    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError:
        config = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        s3.create_bucket(Bucket=bucket, **config)


def _ensure_ssm_parameters(clients: Clients, body: Mapping[str, Any], given: Mapping[str, str]) -> None:
    """Create SSM-typed parameters' defaults (e.g. the CDK bootstrap version) that the local AWS lacks."""
    ssm = None
    for name, spec in (body.get("Parameters") or {}).items():
        if name in given or not str(spec.get("Type", "")).startswith("AWS::SSM::Parameter::Value"):
            continue
        default = spec.get("Default")
        if not isinstance(default, str):
            continue
        ssm = ssm or clients("ssm")
        try:
            ssm.get_parameter(Name=default)
        except ClientError:
            # The CDK bootstrap version parameter; any current version number satisfies the stack's rule.
            ssm.put_parameter(Name=default, Value="30", Type="String")


def _wait(cfn: Any, stack_name: str, timeout_seconds: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_seconds
    delay = 0.05
    while True:
        stack: dict[str, Any] = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
        if _DONE.match(stack["StackStatus"]):
            return stack
        if time.monotonic() > deadline:
            raise AwsError(f"stack {stack_name!r} still {stack['StackStatus']} after {timeout_seconds:.0f}s",
                           code="Timeout", operation="CreateStack")
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


# -- intrinsic functions ---------------------------------------------------------------------------------


class _Unresolvable(Exception):
    """A value refers to something this resolver cannot compute (reported as skipped, never raised)."""


def _pseudo_parameters(region: str, stack_name: str, stack_id: str) -> dict[str, str]:
    """CloudFormation's pseudo parameters for the stack (``AWS::Region``, ``AWS::StackName``, ...)."""
    return {"AWS::AccountId": LOCAL_ACCOUNT_ID, "AWS::Region": region, "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": stack_name, "AWS::StackId": stack_id}


class _Resolver:
    """Resolves intrinsic functions against the deployed stack's physical ids (``pseudo``: its pseudo parameters)."""

    def __init__(self, clients: Clients, resources: Mapping[str, Any], physical: dict[str, str],
                 parameters: Mapping[str, str], pseudo: Mapping[str, str]) -> None:
        self.clients, self.resources, self.physical = clients, resources, physical
        self.parameters, self.pseudo, self.region = parameters, pseudo, pseudo["AWS::Region"]
        self._cache: dict[tuple[str, str], str] = {}

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [item for item in (self.resolve(v) for v in value) if item is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (key, arg), = value.items()
            if key == "Ref":
                return self.ref(str(arg))
            if key == "Fn::GetAtt":
                logical, attr = arg if isinstance(arg, list) else str(arg).split(".", 1)
                return self.get_att(str(logical), str(attr))
            if key == "Fn::Join":
                return str(arg[0]).join(str(part) for part in self.resolve(arg[1]))
            if key == "Fn::Sub":
                text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], self.resolve(arg[1]))
                return self.sub(text, variables)
            if key == "Fn::Select":
                return self.resolve(arg[1])[int(self.resolve(arg[0]))]
            if key == "Fn::Split":
                return str(self.resolve(arg[1])).split(str(arg[0]))
            if key.startswith("Fn::") or key == "Condition":
                raise _Unresolvable(f"{key} is not supported by the local deploy")
        out = {k: self.resolve(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not _NO_VALUE}

    def ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return _NO_VALUE
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.parameters:
            return self.parameters[name]
        if name in self.physical:
            return self.physical[name]
        raise _Unresolvable(f"Ref {name}: not deployed")

    def sub(self, text: str, variables: Mapping[str, Any]) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name:
                logical, attr = name.split(".", 1)
                return str(self.get_att(logical, attr))
            return str(self.ref(name))

        return re.sub(r"\$\{([^}!][^}]*)\}", replace, text)

    def get_att(self, logical: str, attr: str) -> str:
        key = (logical, attr)
        if key not in self._cache:
            self._cache[key] = self._get_att(logical, attr)
        return self._cache[key]

    def _get_att(self, logical: str, attr: str) -> str:
        phys = self.physical.get(logical)
        kind = (self.resources.get(logical) or {}).get("Type", "")
        if phys is None:
            raise _Unresolvable(f"Fn::GetAtt {logical}.{attr}: not deployed")
        region, account, client = self.region, LOCAL_ACCOUNT_ID, self.clients
        getter: dict[tuple[str, str], Callable[[], str]] = {
            ("AWS::S3::Bucket", "Arn"): lambda: f"arn:aws:s3:::{phys}",
            ("AWS::S3::Bucket", "DomainName"): lambda: f"{phys}.s3.amazonaws.com",
            ("AWS::SQS::Queue", "Arn"): lambda: client("sqs").get_queue_attributes(
                QueueUrl=phys, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"],
            ("AWS::SQS::Queue", "QueueName"): lambda: phys.rsplit("/", 1)[-1],
            ("AWS::SNS::Topic", "TopicArn"): lambda: phys,
            ("AWS::SNS::Topic", "TopicName"): lambda: phys.rsplit(":", 1)[-1],
            ("AWS::Lambda::Function", "Arn"): lambda: client("lambda").get_function(
                FunctionName=phys)["Configuration"]["FunctionArn"],
            ("AWS::KMS::Key", "Arn"): lambda: client("kms").describe_key(KeyId=phys)["KeyMetadata"]["Arn"],
            ("AWS::DynamoDB::Table", "Arn"): lambda: client("dynamodb").describe_table(
                TableName=phys)["Table"]["TableArn"],
            ("AWS::IAM::Role", "Arn"): lambda: client("iam").get_role(RoleName=phys)["Role"]["Arn"],
            ("AWS::Events::Rule", "Arn"): lambda: client("events").describe_rule(Name=phys)["Arn"],
            ("AWS::Logs::LogGroup", "Arn"): lambda: f"arn:aws:logs:{region}:{account}:log-group:{phys}:*",
            ("AWS::StepFunctions::StateMachine", "Arn"): lambda: phys,
            ("AWS::StepFunctions::StateMachine", "Name"): lambda: phys.rsplit(":", 1)[-1],
        }
        fetch = getter.get((kind, attr))
        if fetch is None:
            raise _Unresolvable(f"Fn::GetAtt {logical}.{attr} ({kind}) is not supported by the local deploy")
        return fetch()


_NO_VALUE: Any = object()


# -- what moto's CloudFormation skips ----------------------------------------------------------------------

# (local AWS, resolved properties, a name for it like CloudFormation would generate) -> physical id
_Emulator = Callable[[Clients, dict[str, Any], str], str]


def _alarm(clients: Clients, props: dict[str, Any], name: str) -> str:
    params = dict(props)
    params.setdefault("AlarmName", name)
    if "Threshold" in params:
        params["Threshold"] = float(params["Threshold"])
    for key in ("EvaluationPeriods", "DatapointsToAlarm", "Period"):
        if key in params:
            params[key] = int(params[key])
    clients("cloudwatch").put_metric_alarm(**params)
    return str(params["AlarmName"])


def _bucket_policy(clients: Clients, props: dict[str, Any], name: str) -> str:
    clients("s3").put_bucket_policy(Bucket=props["Bucket"], Policy=json.dumps(props["PolicyDocument"]))
    return str(props["Bucket"])


def _topic_policy(clients: Clients, props: dict[str, Any], name: str) -> str:
    sns = clients("sns")
    for topic in props["Topics"]:
        sns.set_topic_attributes(TopicArn=topic, AttributeName="Policy",
                                 AttributeValue=json.dumps(props["PolicyDocument"]))
    return ",".join(props["Topics"])


def _queue_policy(clients: Clients, props: dict[str, Any], name: str) -> str:
    sqs = clients("sqs")
    for queue in props["Queues"]:
        sqs.set_queue_attributes(QueueUrl=queue, Attributes={"Policy": json.dumps(props["PolicyDocument"])})
    return ",".join(props["Queues"])


def _subscription(clients: Clients, props: dict[str, Any], name: str) -> str:
    attributes = {
        name: json.dumps(props[name]) if isinstance(props[name], dict) else str(props[name])
        for name in ("RedrivePolicy", "FilterPolicy", "RawMessageDelivery", "DeliveryPolicy")
        if name in props
    }
    response = clients("sns").subscribe(
        TopicArn=props["TopicArn"], Protocol=props["Protocol"], Endpoint=props["Endpoint"],
        Attributes=attributes, ReturnSubscriptionArn=True,
    )
    return str(response["SubscriptionArn"])


def _event_invoke_config(clients: Clients, props: dict[str, Any], name: str) -> str:
    params = {k: props[k] for k in ("FunctionName", "Qualifier", "MaximumRetryAttempts",
                                    "MaximumEventAgeInSeconds", "DestinationConfig") if k in props}
    clients("lambda").put_function_event_invoke_config(**params)
    return f"{props['FunctionName']}:{props.get('Qualifier', '$LATEST')}"


def _glue_database(clients: Clients, props: dict[str, Any], name: str) -> str:
    clients("glue").create_database(DatabaseInput=props["DatabaseInput"])
    return str(props["DatabaseInput"]["Name"])


def _glue_table(clients: Clients, props: dict[str, Any], name: str) -> str:
    table = dict(props["TableInput"])
    table["Parameters"] = {k: str(v) for k, v in (table.get("Parameters") or {}).items()}
    clients("glue").create_table(DatabaseName=props["DatabaseName"], TableInput=table)
    return f"{props['DatabaseName']}|{table['Name']}"


def _athena_workgroup(clients: Clients, props: dict[str, Any], name: str) -> str:
    params: dict[str, Any] = {k: props[k] for k in ("Name", "Description") if k in props}
    if "WorkGroupConfiguration" in props:
        params["Configuration"] = props["WorkGroupConfiguration"]
    clients("athena").create_work_group(**params)
    return str(props["Name"])


def _athena_named_query(clients: Clients, props: dict[str, Any], name: str) -> str:
    params = {k: props[k] for k in ("Name", "Database", "QueryString", "Description", "WorkGroup") if k in props}
    return str(clients("athena").create_named_query(**params)["NamedQueryId"])


# Resource types moto's CloudFormation does not create, and how we create them from their properties.
EMULATED_TYPES: dict[str, _Emulator] = {
    "AWS::Glue::Database": _glue_database,
    "AWS::Glue::Table": _glue_table,
    "AWS::Athena::WorkGroup": _athena_workgroup,
    "AWS::Athena::NamedQuery": _athena_named_query,
    "AWS::CloudWatch::Alarm": _alarm,
    "AWS::S3::BucketPolicy": _bucket_policy,
    "AWS::SNS::TopicPolicy": _topic_policy,
    "AWS::SQS::QueuePolicy": _queue_policy,
    "AWS::SNS::Subscription": _subscription,
    "AWS::Lambda::EventInvokeConfig": _event_invoke_config,
}


def _bucket_properties(clients: Clients, phys: str, props: Mapping[str, Any]) -> list[str]:
    """Apply the S3 bucket properties moto's CloudFormation ignores (it applies encryption and tags)."""
    s3 = clients("s3")
    calls: dict[str, Callable[[Any], Any]] = {
        "VersioningConfiguration": lambda v: s3.put_bucket_versioning(
            Bucket=phys, VersioningConfiguration={"Status": v["Status"]}),
        "PublicAccessBlockConfiguration": lambda v: s3.put_public_access_block(
            Bucket=phys, PublicAccessBlockConfiguration=v),
        "OwnershipControls": lambda v: s3.put_bucket_ownership_controls(Bucket=phys, OwnershipControls=v),
        "LifecycleConfiguration": lambda v: s3.put_bucket_lifecycle_configuration(
            Bucket=phys, LifecycleConfiguration={"Rules": [_lifecycle_rule(r) for r in v["Rules"]]}),
        "LoggingConfiguration": lambda v: s3.put_bucket_logging(Bucket=phys, BucketLoggingStatus={
            "LoggingEnabled": {"TargetBucket": v["DestinationBucketName"], "TargetPrefix": v.get("LogFilePrefix", "")}}),
    }
    done = []
    for name, call in calls.items():
        if name in props:
            call(props[name])
            done.append(name)
    return done


def _lifecycle_rule(rule: Mapping[str, Any]) -> dict[str, Any]:
    """CloudFormation's lifecycle rule spelling -> the S3 API's."""
    out: dict[str, Any] = {"ID": rule.get("Id", ""), "Status": rule.get("Status", "Enabled"),
                           "Filter": {"Prefix": rule.get("Prefix", "")}}
    if "ExpirationInDays" in rule:
        out["Expiration"] = {"Days": int(rule["ExpirationInDays"])}
    if "NoncurrentVersionExpiration" in rule:
        out["NoncurrentVersionExpiration"] = {
            "NoncurrentDays": int(rule["NoncurrentVersionExpiration"]["NoncurrentDays"])}
    if "AbortIncompleteMultipartUpload" in rule:
        out["AbortIncompleteMultipartUpload"] = {
            "DaysAfterInitiation": int(rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"])}
    if "Transitions" in rule:
        out["Transitions"] = [{"Days": int(t["TransitionInDays"]), "StorageClass": t["StorageClass"]}
                              for t in rule["Transitions"]]
    return out


def _function_tags(clients: Clients, phys: str, props: Mapping[str, Any]) -> list[str]:
    """moto's CloudFormation keeps Lambda tags in CloudFormation's list form; set them as a map."""
    tags = props.get("Tags")
    if not tags:
        return []
    client = clients("lambda")
    arn = client.get_function(FunctionName=phys)["Configuration"]["FunctionArn"]
    client.tag_resource(Resource=arn, Tags={t["Key"]: str(t["Value"]) for t in tags})
    return ["Tags"]


def _state_machine(clients: Clients, phys: str, props: Mapping[str, Any]) -> list[str]:
    """With execution enabled, moto serves Step Functions from a backend CloudFormation does not write to."""
    sfn = clients("stepfunctions")
    try:
        sfn.describe_state_machine(stateMachineArn=phys)
        return []
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "StateMachineDoesNotExist":
            raise
    params: dict[str, Any] = {
        "name": phys.rsplit(":", 1)[-1],
        "definition": props["DefinitionString"],
        "roleArn": props["RoleArn"],
        "type": props.get("StateMachineType", "STANDARD"),
    }
    logging_config = props.get("LoggingConfiguration")
    if logging_config:
        params["loggingConfiguration"] = {
            "level": logging_config.get("Level", "OFF"),
            "includeExecutionData": bool(logging_config.get("IncludeExecutionData", False)),
            "destinations": [
                {"cloudWatchLogsLogGroup": {"logGroupArn": d["CloudWatchLogsLogGroup"]["LogGroupArn"]}}
                for d in logging_config.get("Destinations", [])
            ],
        }
    if "TracingConfiguration" in props:
        params["tracingConfiguration"] = {"enabled": bool(props["TracingConfiguration"].get("Enabled"))}
    sfn.create_state_machine(**params)
    return ["(recreated in the Step Functions API)"]


def _key_policy(clients: Clients, phys: str, props: Mapping[str, Any]) -> list[str]:
    """moto's CloudFormation keeps a key's policy as a mapping, which its KMS API then fails to read (500 on
    DescribeKey); store it as the JSON text KMS keeps."""
    if not isinstance(props.get("KeyPolicy"), Mapping):
        return []
    clients("kms").put_key_policy(KeyId=phys, PolicyName="default", Policy=json.dumps(props["KeyPolicy"]))
    return ["KeyPolicy"]


_PROPERTY_PATCHES: dict[str, Callable[[Clients, str, Mapping[str, Any]], list[str]]] = {
    "AWS::KMS::Key": _key_policy,
    "AWS::S3::Bucket": _bucket_properties,
    "AWS::Lambda::Function": _function_tags,
    "AWS::StepFunctions::StateMachine": _state_machine,
}


def _emulate(
    clients: Clients, resources: Mapping[str, Any], physical: dict[str, str], resolver: _Resolver
) -> tuple[list[EmulatedResource], dict[str, str]]:
    emulated: list[EmulatedResource] = []
    skipped: dict[str, str] = {}
    stack_name = str(resolver.pseudo["AWS::StackName"])
    ordered = list(_in_dependency_order(resources))
    # First the resources moto skipped (policies first matter: S3 logging needs the target's policy) ...
    for logical, spec in ordered:
        kind = spec.get("Type", "")
        if logical in physical:
            continue
        create = EMULATED_TYPES.get(kind)
        if create is None:
            skipped[logical] = f"{kind} is not created by moto's CloudFormation nor emulated"
            continue
        with _skipping(skipped, logical, kind):
            physical[logical] = create(clients, resolver.resolve(spec.get("Properties") or {}),
                                       f"{stack_name}-{logical}")
            emulated.append(EmulatedResource(logical, kind, physical[logical], "created"))
    # ... then the properties moto ignored on resources it did create.
    for logical, spec in ordered:
        kind = spec.get("Type", "")
        patch = _PROPERTY_PATCHES.get(kind)
        if patch is None or logical not in physical:
            continue
        with _skipping(skipped, logical, f"{kind} properties"):
            done = patch(clients, physical[logical], resolver.resolve(spec.get("Properties") or {}))
            if done:
                emulated.append(EmulatedResource(logical, kind, physical[logical], "properties " + ", ".join(done)))
    return emulated, skipped


@contextlib.contextmanager
def _skipping(skipped: dict[str, str], logical: str, what: str) -> Iterator[None]:
    """Within the block, a reference that cannot be resolved or a refusal of the local AWS is recorded in
    ``skipped[logical]`` (the resource is reported, the deployment goes on) instead of raised."""
    try:
        yield
    except _Unresolvable as exc:
        skipped[logical] = f"{what}: {exc}"
    except ClientError as exc:
        skipped[logical] = f"{what}: {_client_error(exc)}"


def _client_error(exc: ClientError) -> str:
    error = exc.response.get("Error", {})
    return f"{error.get('Code', '')}: {error.get('Message', '')}"


def _in_dependency_order(resources: Mapping[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    """Resources with every referenced/DependsOn resource before them (template order otherwise)."""
    deps = {name: _references(spec) & set(resources) for name, spec in resources.items()}
    done: set[str] = set()
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in done or name in path:
            return
        for dep in sorted(deps[name]):
            visit(dep, (*path, name))
        done.add(name)
        order.append(name)

    for name in resources:
        visit(name, ())
    return [(name, resources[name]) for name in order]


def _references(spec: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(spec, dict):
        for key, value in spec.items():
            if key == "Ref" and isinstance(value, str):
                found.add(value)
            elif key == "Fn::GetAtt":
                found.add(value[0] if isinstance(value, list) else str(value).split(".", 1)[0])
            elif key == "DependsOn":
                found.update([value] if isinstance(value, str) else value)
            elif key == "Fn::Sub":
                text = value if isinstance(value, str) else value[0]
                found.update(m.split(".", 1)[0] for m in re.findall(r"\$\{([^}!][^}]*)\}", text))
            found |= _references(value)
    elif isinstance(spec, list):
        for item in spec:
            found |= _references(item)
    return found
