"""Every edge where an AWS service delivers to one of the stack's resources, derived from the template alone.

An edge is checked the way AWS checks it in a real account (which the local AWS does not):
- a service principal writing to a resource with a resource policy (CloudWatch -> topic, SNS -> queue,
  EventBridge -> queue, SNS/EventBridge -> Lambda, S3 logging -> bucket): the resource policy must allow it with
  the request context the service sends, and deny the same request made on behalf of another account;
- a service acting through a role (Lambda's DLQ and destinations, Step Functions' tasks, EventBridge targets
  with a role): the role trusts the service and its policies allow the action on that resource;
- when the resource is encrypted with our KMS key: the key policy allows that principal (a service principal
  directly; a role through the key policy's delegation to IAM plus the role's own kms grant).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from smx_debug.local import iam
from smx_debug.local.iam import SOURCE_KEYS_TO_KMS, Principal, Request

DATA_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
ACCOUNT = "111122223333"
FOREIGN_ACCOUNT = "999988887777"
REGION = "us-west-2"

Statement = dict[str, Any]


def _listify(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


@dataclass
class Resolver:
    """Ref / Fn::GetAtt / Fn::Join / Fn::Select / Fn::Split with a fixed account, region and partition."""

    resources: Mapping[str, Any]
    partition: str = "aws"
    account: str = ACCOUNT
    region: str = REGION

    def _arn(self, service: str, resource: str, *, region: bool = True, account: bool = True) -> str:
        return (f"arn:{self.partition}:{service}:{self.region if region else ''}:"
                f"{self.account if account else ''}:{resource}")

    def _name(self, logical: str) -> str:
        """The physical name a resource is given in the template, else its logical id."""
        props = self.resources[logical].get("Properties", {})
        for key in ("StateMachineName", "FunctionName", "TopicName", "QueueName", "TableName"):
            if isinstance(props.get(key), str):
                return str(props[key])
        return logical

    def ref(self, name: str) -> str:
        pseudo = {"AWS::Partition": self.partition, "AWS::AccountId": self.account, "AWS::Region": self.region,
                  "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": "SmxDebugGuard"}
        if name in pseudo:
            return pseudo[name]
        kind = self.resources[name]["Type"]
        refs = {
            "AWS::SNS::Topic": lambda: self._arn("sns", name),
            "AWS::SQS::Queue": lambda: f"https://sqs.{self.region}.amazonaws.com/{self.account}/{self._name(name)}",
            "AWS::S3::Bucket": lambda: name.lower(),
            "AWS::StepFunctions::StateMachine": lambda: self._arn("states", f"stateMachine:{self._name(name)}"),
            "AWS::KMS::Key": lambda: f"key-{name}",
        }
        return refs[kind]() if kind in refs else name

    def get_att(self, name: str, attr: str) -> str:
        kind = self.resources[name]["Type"]
        arns = {
            "AWS::SNS::Topic": lambda: self._arn("sns", name),
            "AWS::SQS::Queue": lambda: self._arn("sqs", self._name(name)),
            "AWS::Lambda::Function": lambda: self._arn("lambda", f"function:{name}"),
            "AWS::S3::Bucket": lambda: self._arn("s3", name.lower(), region=False, account=False),
            "AWS::DynamoDB::Table": lambda: self._arn("dynamodb", f"table/{name}"),
            "AWS::KMS::Key": lambda: self._arn("kms", f"key/key-{name}"),
            "AWS::Events::Rule": lambda: self._arn("events", f"rule/{name}"),
            "AWS::CloudWatch::Alarm": lambda: self._arn("cloudwatch", f"alarm:{name}"),
            "AWS::IAM::Role": lambda: self._arn("iam", f"role/{name}", region=False),
            "AWS::Logs::LogGroup": lambda: self._arn("logs", f"log-group:{name}:*"),
            "AWS::StepFunctions::StateMachine": lambda: self._arn("states", f"stateMachine:{self._name(name)}"),
        }
        if attr == "Arn":
            return arns[kind]()
        if (kind, attr) == ("AWS::SNS::Topic", "TopicArn"):
            return arns[kind]()
        if (kind, attr) == ("AWS::SQS::Queue", "QueueName"):
            return self._name(name)
        if (kind, attr) == ("AWS::SQS::Queue", "QueueUrl"):
            return self.ref(name)
        if (kind, attr) == ("AWS::SNS::Topic", "TopicName"):
            return name
        raise KeyError(f"no attribute {attr} of {kind} in the resolver")

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self(v) for v in value]
        if not isinstance(value, dict):
            return value
        if set(value) == {"Ref"}:
            return self.ref(value["Ref"])
        if set(value) == {"Fn::GetAtt"}:
            target = value["Fn::GetAtt"]
            name, attr = (target.split(".", 1) if isinstance(target, str) else target)
            return self.get_att(name, attr)
        if set(value) == {"Fn::Join"}:
            sep, parts = value["Fn::Join"]
            return sep.join(str(self(p)) for p in parts)
        if set(value) == {"Fn::Select"}:
            index, items = value["Fn::Select"]
            return self(items)[int(index)]
        if set(value) == {"Fn::Split"}:
            sep, text = value["Fn::Split"]
            return str(self(text)).split(sep)
        return {k: self(v) for k, v in value.items()}


def role_principal(role_arn: str) -> Principal:
    """One of the stack's roles as IAM sees it calling (a session of the role)."""
    account, name = role_arn.split(":")[4], role_arn.rsplit("/", 1)[-1]
    return Principal(account, arn=role_arn, session=f"arn:aws:sts::{account}:assumed-role/{name}/session")


STACK_ROLE = role_principal(f"arn:aws:iam::{ACCOUNT}:role/SmxDebugGuard-Role")


def allowed(statements: list[Statement], action: str, resource: str,
            context: Mapping[str, Any] | None = None) -> bool:
    """Whether identity policy ``statements`` let a role of the stack perform ``action`` on ``resource``
    (the local IAM's evaluator, smx_debug.local.iam)."""
    return iam.evaluate(statements, Request(STACK_ROLE, action, resource, dict(context or {}))).allowed


@dataclass(frozen=True)
class Edge:
    """``source`` (an AWS service acting for ``source_arn``) delivers ``action`` to ``target`` (logical id)."""

    name: str
    service: str
    action: str
    source_arn: str
    target: str
    role: str | None = None  # the role the service uses (role-based edges); None: a resource policy edge
    extra_resources: tuple[str, ...] = field(default=())


class Template:
    """A synthesized template with its intrinsics resolved for a fixed account, region and partition."""

    def __init__(self, template: Mapping[str, Any], partition: str = "aws") -> None:
        self.raw = template
        self.resources: Mapping[str, Any] = template["Resources"]
        self.resolve = Resolver(self.resources, partition=partition)

    def of_type(self, kind: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
        for logical, resource in self.resources.items():
            if resource["Type"] == kind:
                yield logical, resource.get("Properties", {})

    def logical_of(self, value: Any) -> str | None:
        """The logical id a Ref/GetAtt points to (None for anything else)."""
        if isinstance(value, dict) and set(value) == {"Ref"} and value["Ref"] in self.resources:
            return str(value["Ref"])
        if isinstance(value, dict) and set(value) == {"Fn::GetAtt"}:
            target = value["Fn::GetAtt"]
            return str(target.split(".")[0] if isinstance(target, str) else target[0])
        return None

    def arn(self, logical: str) -> str:
        return str(self.resolve.get_att(logical, "Arn"))

    # -- policies ---------------------------------------------------------------------------------------
    def resource_policy(self, logical: str) -> list[Statement]:
        kind = self.resources[logical]["Type"]
        statements: list[Statement] = []
        if kind == "AWS::Lambda::Function":
            for _, perm in self.of_type("AWS::Lambda::Permission"):
                if self.logical_of(perm["FunctionName"]) != logical:
                    continue
                condition: dict[str, dict[str, str]] = {}
                if "SourceArn" in perm:
                    condition["ArnLike"] = {"aws:SourceArn": self.resolve(perm["SourceArn"])}
                if "SourceAccount" in perm:
                    condition["StringEquals"] = {"aws:SourceAccount": self.resolve(perm["SourceAccount"])}
                principal = self.resolve(perm["Principal"])
                statements.append({"Effect": "Allow", "Action": perm["Action"], "Resource": self.arn(logical),
                                   "Principal": {"Service": principal} if "." in principal else {"AWS": principal},
                                   "Condition": condition})
            return statements
        holders = {"AWS::SNS::Topic": ("AWS::SNS::TopicPolicy", "Topics"),
                   "AWS::SQS::Queue": ("AWS::SQS::QueuePolicy", "Queues"),
                   "AWS::S3::Bucket": ("AWS::S3::BucketPolicy", "Bucket")}
        policy_type, attached = holders[kind]
        for _, policy in self.of_type(policy_type):
            if logical in [self.logical_of(t) for t in (policy[attached] if isinstance(policy[attached], list)
                                                         else [policy[attached]])]:
                statements.extend(self.resolve(policy["PolicyDocument"]["Statement"]))
        return statements

    def key_of(self, logical: str) -> str | None:
        props = self.resources[logical].get("Properties", {})
        kind = self.resources[logical]["Type"]
        if kind in ("AWS::SNS::Topic", "AWS::SQS::Queue"):
            return self.logical_of(props.get("KmsMasterKeyId"))
        if kind == "AWS::S3::Bucket":
            for rule in props.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", []):
                default = rule.get("ServerSideEncryptionByDefault", {})
                if default.get("SSEAlgorithm") == "aws:kms":
                    return self.logical_of(default.get("KMSMasterKeyID"))
        return None

    def key_policy(self, key: str) -> list[Statement]:
        return list(self.resolve(self.resources[key]["Properties"]["KeyPolicy"]["Statement"]))

    def role_policy(self, role: str) -> list[Statement]:
        statements: list[Statement] = []
        for _, policy in self.of_type("AWS::IAM::Policy"):
            if role in [self.logical_of(r) for r in policy.get("Roles", [])]:
                statements.extend(self.resolve(policy["PolicyDocument"]["Statement"]))
        for inline in self.resources[role]["Properties"].get("Policies", []):
            statements.extend(self.resolve(inline["PolicyDocument"]["Statement"]))
        assert not self.resources[role]["Properties"].get("ManagedPolicyArns"), f"{role}: managed policies"
        return statements

    def trusts(self, role: str, service: str, source_arn: str) -> bool:
        trust = self.resolve(self.resources[role]["Properties"]["AssumeRolePolicyDocument"]["Statement"])
        context = {"aws:SourceAccount": ACCOUNT, "aws:SourceArn": source_arn}
        request = Request(Principal(ACCOUNT, service=service), "sts:AssumeRole", self.arn(role), context)
        return iam.decide(request, resource=trust).allowed


# ---------------------------------------------------------------------------------------------- edges
def _arn_service(arn: str) -> str:
    return arn.split(":")[2]


def derive_edges(t: Template) -> list[Edge]:
    edges: list[Edge] = []
    for alarm, props in t.of_type("AWS::CloudWatch::Alarm"):
        for field_name in ("AlarmActions", "OKActions", "InsufficientDataActions"):
            for action in props.get(field_name, []):
                target = t.logical_of(action)
                if target and t.resources[target]["Type"] == "AWS::SNS::Topic":
                    edges.append(Edge(f"CloudWatch alarm {alarm} -> topic {target}", "cloudwatch.amazonaws.com",
                                      "sns:Publish", t.arn(alarm), target))
    for sub, props in t.of_type("AWS::SNS::Subscription"):
        topic = t.logical_of(props["TopicArn"])
        assert topic, sub
        endpoint = t.logical_of(props.get("Endpoint"))
        if props["Protocol"] == "lambda" and endpoint:
            edges.append(Edge(f"SNS {topic} -> Lambda {endpoint}", "sns.amazonaws.com", "lambda:InvokeFunction",
                              t.arn(topic), endpoint))
        if props["Protocol"] == "sqs" and endpoint:
            edges.append(Edge(f"SNS {topic} -> queue {endpoint}", "sns.amazonaws.com", "sqs:SendMessage",
                              t.arn(topic), endpoint))
        redrive = props.get("RedrivePolicy")
        if redrive:
            dlq = t.logical_of(redrive["deadLetterTargetArn"])
            assert dlq, sub
            edges.append(Edge(f"SNS {topic} subscription {sub} -> its DLQ {dlq}", "sns.amazonaws.com",
                              "sqs:SendMessage", t.arn(topic), dlq))
    for rule, props in t.of_type("AWS::Events::Rule"):
        for target in props.get("Targets", []):
            logical = t.logical_of(target["Arn"])
            assert logical, target
            kind = t.resources[logical]["Type"]
            role = t.logical_of(target.get("RoleArn"))
            action = {"AWS::Lambda::Function": "lambda:InvokeFunction", "AWS::SNS::Topic": "sns:Publish",
                      "AWS::SQS::Queue": "sqs:SendMessage",
                      "AWS::StepFunctions::StateMachine": "states:StartExecution"}[kind]
            edges.append(Edge(f"EventBridge rule {rule} -> {kind.split('::')[1]} {logical}", "events.amazonaws.com",
                              action, t.arn(rule), logical, role=role))
            dlq = target.get("DeadLetterConfig", {}).get("Arn")
            if dlq:
                edges.append(Edge(f"EventBridge rule {rule} target {target['Id']} -> DLQ {t.logical_of(dlq)}",
                                  "events.amazonaws.com", "sqs:SendMessage", t.arn(rule), str(t.logical_of(dlq))))
    for fn, props in t.of_type("AWS::Lambda::Function"):
        role = t.logical_of(props["Role"])
        dlq = props.get("DeadLetterConfig", {}).get("TargetArn")
        if dlq:
            target = str(t.logical_of(dlq))
            action = "sns:Publish" if t.resources[target]["Type"] == "AWS::SNS::Topic" else "sqs:SendMessage"
            edges.append(Edge(f"Lambda {fn} async failures -> DLQ {target}", "lambda.amazonaws.com", action,
                              t.arn(fn), target, role=role))
    for _, props in t.of_type("AWS::Lambda::EventInvokeConfig"):
        fn = props["FunctionName"]["Ref"]
        role = t.logical_of(t.resources[fn]["Properties"]["Role"])
        for outcome in ("OnFailure", "OnSuccess"):
            dest = props.get("DestinationConfig", {}).get(outcome, {}).get("Destination")
            if dest:
                target = str(t.logical_of(dest))
                action = {"AWS::SNS::Topic": "sns:Publish", "AWS::SQS::Queue": "sqs:SendMessage",
                          "AWS::Lambda::Function": "lambda:InvokeFunction"}[t.resources[target]["Type"]]
                edges.append(Edge(f"Lambda {fn} {outcome} destination -> {target}", "lambda.amazonaws.com",
                                  action, t.arn(fn), target, role=role))
    for machine, props in t.of_type("AWS::StepFunctions::StateMachine"):
        role = t.logical_of(props["RoleArn"])
        definition = json.loads(t.resolve(props["DefinitionString"]))
        for state_name, state in _task_states(definition):
            edges.extend(_task_edges(t, machine, role, state_name, state))
    for bucket, props in t.of_type("AWS::S3::Bucket"):
        logging = props.get("LoggingConfiguration")
        if logging:
            target = str(t.logical_of(logging["DestinationBucketName"]))
            prefix = logging.get("LogFilePrefix", "")
            edges.append(Edge(f"S3 access logs of {bucket} -> bucket {target}", "logging.s3.amazonaws.com",
                              "s3:PutObject", t.arn(bucket), target,
                              extra_resources=(f"{t.arn(target)}/{prefix}2026-11-23-00-00-00-ABCDEF",)))
    return edges


def _task_states(definition: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for name, state in definition.get("States", {}).items():
        if state.get("Type") == "Task":
            yield name, state
        for branch in state.get("Branches", []):
            yield from _task_states(branch)
        if "Iterator" in state or "ItemProcessor" in state:
            yield from _task_states(state.get("ItemProcessor") or state["Iterator"])


def _task_edges(t: Template, machine: str, role: str | None, name: str, state: Mapping[str, Any]) -> list[Edge]:
    resource = state["Resource"]
    params = state.get("Parameters") or state.get("Arguments") or {}
    by_arn = {t.arn(logical): logical for logical in t.resources
              if t.resources[logical]["Type"] in ("AWS::Lambda::Function", "AWS::SNS::Topic",
                                                  "AWS::StepFunctions::StateMachine")}
    if resource.startswith("arn:") and _arn_service(resource) == "lambda" and resource in by_arn:
        return [Edge(f"Step Functions {machine} state {name} -> Lambda {by_arn[resource]}", "states.amazonaws.com",
                     "lambda:InvokeFunction", t.arn(machine), by_arn[resource], role=role)]
    if resource.endswith(":states:::lambda:invoke"):
        fn = params.get("FunctionName")
        return [Edge(f"Step Functions {machine} state {name} -> Lambda {by_arn[fn]}", "states.amazonaws.com",
                     "lambda:InvokeFunction", t.arn(machine), by_arn[fn], role=role)]
    if resource.endswith(":states:::sns:publish"):
        topic = params["TopicArn"]
        return [Edge(f"Step Functions {machine} state {name} -> topic {by_arn[topic]}", "states.amazonaws.com",
                     "sns:Publish", t.arn(machine), by_arn[topic], role=role)]
    if ":states:::aws-sdk:" in resource or ":states:::sagemaker:" in resource:
        return []  # API calls on SageMaker resources (not ours): covered by the IAM reach test
    raise AssertionError(f"state {name}: task resource {resource} is not known to the delivery test")


# ---------------------------------------------------------------------------------------------- checks
def _context(edge: Edge, account: str) -> dict[str, Any]:
    source = edge.source_arn.replace(f":{ACCOUNT}:", f":{account}:")
    return {"aws:SourceArn": source, "aws:SourceAccount": account, "aws:SecureTransport": "true"}


def _target_arn(t: Template, edge: Edge) -> str:
    return edge.extra_resources[0] if edge.extra_resources else t.arn(edge.target)


def check_edge(t: Template, edge: Edge) -> list[str]:
    """The problems with one edge (empty: AWS would deliver, and only for our own account)."""
    problems: list[str] = []
    resource = _target_arn(t, edge)
    if edge.role is None:
        policy = t.resource_policy(edge.target)
        service = Principal(ACCOUNT, service=edge.service)
        if not iam.decide(Request(service, edge.action, resource, _context(edge, ACCOUNT)), resource=policy).allowed:
            problems.append(f"{edge.name}: the resource policy of {edge.target} does not allow {edge.service} "
                            f"{edge.action} from {edge.source_arn}")
        foreign = Request(Principal(FOREIGN_ACCOUNT, service=edge.service), edge.action, resource,
                          _context(edge, FOREIGN_ACCOUNT))
        if iam.decide(foreign, resource=policy).allowed:
            problems.append(f"{edge.name}: the resource policy of {edge.target} also allows {edge.service} "
                            f"acting for account {FOREIGN_ACCOUNT} (no aws:SourceArn/SourceAccount condition)")
    else:
        if not t.trusts(edge.role, edge.service, edge.source_arn):
            problems.append(f"{edge.name}: role {edge.role} does not trust {edge.service}")
        has_policy = t.resources[edge.target]["Type"] in ("AWS::SNS::Topic", "AWS::SQS::Queue", "AWS::S3::Bucket")
        request = Request(role_principal(t.arn(edge.role)), edge.action, resource,
                          {"aws:SecureTransport": "true", "aws:PrincipalArn": t.arn(edge.role),
                           "aws:PrincipalAccount": ACCOUNT})
        decision = iam.decide(request, identity=t.role_policy(edge.role),
                              resource=t.resource_policy(edge.target) if has_policy else None, resource_account=ACCOUNT)
        if not decision.allowed:
            problems.append(f"{edge.name}: role {edge.role} may not {edge.action} on {edge.target} ({decision.reason})")
    key = t.key_of(edge.target)
    if key is not None:
        problems.extend(_check_key(t, edge, key))
    return problems


def _encryption_context(t: Template, edge: Edge) -> dict[str, str]:
    """What SQS and SNS put in the encryption context of every data key: the queue's or topic's ARN."""
    kind = t.resources[edge.target]["Type"]
    if kind == "AWS::SQS::Queue":
        return {"kms:EncryptionContext:aws:sqs:arn": t.arn(edge.target)}
    if kind == "AWS::SNS::Topic":
        return {"kms:EncryptionContext:aws:sns:topicArn": t.arn(edge.target)}
    return {}


# Key grants whose only documented form has no condition: CloudWatch sends no aws:Source* keys to KMS that AWS
# documents, and no encryption context either (which alarms may publish is the topic policy's decision, checked
# above for our account only). docs/infra.md, "The key".
DOCUMENTED_UNCONDITIONED = {
    ("cloudwatch.amazonaws.com", "AWS::SNS::Topic"):
        "https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services",
}


def _check_key(t: Template, edge: Edge, key: str) -> list[str]:
    problems: list[str] = []
    key_policy, key_arn = t.key_policy(key), t.arn(key)
    encryption = _encryption_context(t, edge)
    for action in DATA_KEY_ACTIONS:
        if edge.role is None:
            sends_source = SOURCE_KEYS_TO_KMS.get(edge.service, True)
            context = {**(_context(edge, ACCOUNT) if sends_source else {}), **encryption}
            request = Request(Principal(ACCOUNT, service=edge.service), action, key_arn, context)
            if not iam.decide(request, resource=key_policy, key_policy=True).allowed:
                problems.append(f"{edge.name}: the policy of key {key} does not allow {edge.service} {action} "
                                f"(context {sorted(context)})")
            elif (edge.service, t.resources[edge.target]["Type"]) in DOCUMENTED_UNCONDITIONED:
                continue
            elif not sends_source and iam.decide(
                Request(Principal(ACCOUNT, service=edge.service), action, key_arn,
                        {k: f"{v}-another" for k, v in encryption.items()}), resource=key_policy,
                key_policy=True).allowed:
                problems.append(f"{edge.name}: key {key} also lets {edge.service} {action} for another resource "
                                "(no encryption-context condition)")
            elif sends_source and iam.decide(
                Request(Principal(FOREIGN_ACCOUNT, service=edge.service), action, key_arn,
                        {**_context(edge, FOREIGN_ACCOUNT), **encryption}), resource=key_policy,
                key_policy=True).allowed:
                problems.append(f"{edge.name}: key {key} also lets {edge.service} act for account {FOREIGN_ACCOUNT}")
        else:
            role_arn = t.arn(str(edge.role))
            decision = iam.decide(Request(role_principal(role_arn), action, key_arn, encryption),
                                  identity=t.role_policy(str(edge.role)), resource=key_policy, key_policy=True)
            if not decision.allowed:
                problems.append(f"{edge.name}: role {edge.role} may not {action} with key {key} ({decision.reason})")
    return problems


__all__ = ["ACCOUNT", "FOREIGN_ACCOUNT", "REGION", "Edge", "Resolver", "Template", "allowed", "check_edge",
           "derive_edges", "role_principal"]
