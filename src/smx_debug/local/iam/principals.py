"""Who calls on the local AWS: a deployed function's role session (its handler's clients) or a person's
(:func:`as_principal`, the notebook user of docs/permissions.md).

Each caller gets its own access key, registered in the LocalAws's :class:`~smx_debug.local.iam.ledger.IamLedger`;
the clients it makes carry the local IAM's botocore plugin (:mod:`smx_debug.local.iam.plugin`), which authorizes
every request before it is sent.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import ClientError

from smx_debug.contracts import HANDLER_TAG
from smx_debug.errors import NotFoundError
from smx_debug.local.clients import client
from smx_debug.local.iam import guard
from smx_debug.local.iam.ledger import Caller, Record, ledger
from smx_debug.local.iam.plugin import PLUGIN, PLUGIN_ENV, register
from smx_debug.local.server import LOCAL_ACCOUNT_ID, LocalAws, scoped_environ

_PRINCIPAL_POLICY = "identity"  # the name of the inline policy as_principal gives its role


def function_environment(aws: LocalAws, function: str) -> dict[str, str] | None:
    """The credentials and client plugin a deployed function's code runs with on the local AWS, or None
    when ``function`` is not deployed there (then nothing is enforced: there is no role to enforce).

    The access key is the function's own; its identity policies are re-read from the local IAM.
    """
    try:
        response = client(aws, "lambda").get_function(FunctionName=function)
    except ClientError:
        return None
    return environment_of(aws, response)


def environment_of(aws: LocalAws, described: Mapping[str, Any]) -> dict[str, str]:
    """:func:`function_environment` from the function's GetFunction answer, for a caller that has it."""
    config = described["Configuration"]
    role_arn = str(config["Role"])
    role = client(aws, "iam").get_role(RoleName=role_arn.rsplit("/", 1)[-1])["Role"]
    caller = Caller(aws=aws, function=str(config["FunctionName"]),
                    handler=(described.get("Tags") or {}).get(HANDLER_TAG, str(config["FunctionName"])),
                    role_arn=role_arn, role_id=str(role["RoleId"]), region=aws.region,
                    account=str(config["FunctionArn"]).split(":")[4])
    key = "ASIA" + hashlib.sha1(f"{aws.endpoint_url}|{config['FunctionArn']}".encode()).hexdigest()[:16].upper()
    ledger(aws).add_caller(key, caller)
    return {"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": "local-" + key.lower(),
            "AWS_SESSION_TOKEN": f"local-session-{caller.function}", PLUGIN_ENV: PLUGIN}


@contextlib.contextmanager
def as_function(aws: LocalAws, function: str) -> Iterator[dict[str, str]]:
    """Within the block, clients created from the environment (``boto3.session.Session()``) are the deployed
    ``function``'s: its key and this plugin (for code that runs a function's core outside
    :func:`~smx_debug.local.awslambda.invoke.invoke_handler`). Raises NotFoundError when it is not deployed."""
    env = function_environment(aws, function)
    if env is None:
        raise NotFoundError(f"function {function!r} is not deployed on the local AWS")
    with scoped_environ(env):
        yield env


@dataclass(frozen=True)
class LocalPrincipal:
    """A person's role session on the local AWS (:func:`as_principal`): every call of its clients is authorized
    against the role's identity policy before it reaches moto, and recorded with ``user=True``."""

    caller: Caller
    credentials: Mapping[str, str]  # aws_access_key_id, aws_secret_access_key, aws_session_token

    def session(self) -> Any:
        """A boto3 session of the local AWS whose clients are this principal's (also those the SageMaker SDK
        makes from it: pass it as ``boto_session``)."""
        session = self.caller.aws.session(credentials=self.credentials)
        register(session.events)
        return session

    def client(self, service: str, **kwargs: Any) -> Any:
        """A client of ``service`` that calls as this principal."""
        return self.session().client(service, **kwargs)

    @contextlib.contextmanager
    def environment(self) -> Iterator[None]:
        """Within the block, this process's default clients (``boto3.client(...)``, ``sagemaker.Session()``, the
        CLI's, a new ``boto3.Session()``'s) are this principal's, on the local AWS (:meth:`LocalAws.environment`)."""
        env = {"AWS_ACCESS_KEY_ID": self.credentials["aws_access_key_id"],
               "AWS_SECRET_ACCESS_KEY": self.credentials["aws_secret_access_key"],
               "AWS_SESSION_TOKEN": self.credentials["aws_session_token"], PLUGIN_ENV: PLUGIN}
        with self.caller.aws.environment(), scoped_environ(env):  # the outer one restores boto3's default session
            boto3.DEFAULT_SESSION = self.session()
            yield

    def records(self) -> list[Record]:
        """The authorizations of this principal's calls since the ledger's last reset."""
        return [r for r in ledger(self.caller.aws).records() if r.user and r.caller == self.caller.handler]

    def summary_line(self, who: str, policy: str) -> str:
        """``[iam] N calls by <who> checked against <policy>: M denied``, like the demo's line."""
        made = self.records()
        denied = {r.call for r in made if not r.allowed}
        return f"[iam] {len({r.call for r in made})} calls by {who} checked against {policy}: {len(denied)} denied"


def as_principal(aws: LocalAws, policy: Mapping[str, Any], *, name: str, session_name: str = "session") -> LocalPrincipal:
    """Run clients as a person: a role ``name`` in the local IAM whose only identity policy is ``policy``
    (replaced if the role exists), assumed as ``session_name``. The calls of the principal's clients
    (:meth:`LocalPrincipal.session`, :meth:`LocalPrincipal.client`) are authorized like a deployed function's
    (the same evaluator, :data:`~smx_debug.local.iam.calls.CALLS`, resource and key policies, AWS's AccessDenied answers), and the server
    refuses a request signed with its key that was not authorized.

    Example:
        >>> policy = notebook_policy(bucket="b", role_arn=role)  # doctest: +SKIP
        >>> user = iam.as_principal(aws, policy, name="notebook-user")  # doctest: +SKIP
        >>> user.client("sagemaker").stop_training_job(TrainingJobName="j")  # doctest: +SKIP
        ClientError: ... (AccessDeniedException) ... is not authorized to perform: sagemaker:StopTrainingJob ...
    """
    account = LOCAL_ACCOUNT_ID
    guard.install()
    iam = client(aws, "iam")
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                     "Principal": {"AWS": f"arn:aws:iam::{account}:root"}}]}
    try:
        role = iam.get_role(RoleName=name)["Role"]
    except ClientError:
        role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]
    for page in iam.get_paginator("list_role_policies").paginate(RoleName=name):
        for old in page["PolicyNames"]:
            iam.delete_role_policy(RoleName=name, PolicyName=old)
    iam.put_role_policy(RoleName=name, PolicyName=_PRINCIPAL_POLICY, PolicyDocument=json.dumps(policy))
    caller = Caller(aws=aws, function=session_name, handler=name, role_arn=str(role["Arn"]),
                    role_id=str(role["RoleId"]), region=aws.region, account=account, user=True)
    key = "ASIA" + hashlib.sha1(f"{aws.endpoint_url}|{role['Arn']}|{session_name}".encode()).hexdigest()[:16].upper()
    ledger(aws).add_caller(key, caller)
    return LocalPrincipal(caller, {"aws_access_key_id": key, "aws_secret_access_key": "local-" + key.lower(),
                                   "aws_session_token": f"local-session-{session_name}"})

