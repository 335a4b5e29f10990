"""A training container's AWS calls on the local AWS: made as the job's execution role, authorized by the local IAM.

SageMaker gives the container the job's execution role (``RoleArn``): its code's SDK calls are the role session
``arn:aws:sts::ACCOUNT:assumed-role/ROLE/SageMaker``, allowed by the role's identity policies or by a resource
policy that grants that role (the stack's bucket grants SageMaker execution roles by name pattern). A hook writing
its trial straight to S3 (a job without a ``DebugHookConfig``) is such a call. Here:

- :func:`container_environment` gives the container's process what SageMaker gives it: credentials of the role
  session (an access key the local AWS knows as that job's container), the region, and the local endpoint
  (``AWS_ENDPOINT_URL``, standing for the real endpoints). Nothing else of the caller's credentials.
- :func:`install` makes the local server authorize every request signed with such a key before moto answers it,
  with the local IAM's evaluator (:func:`smx_debug.local.iam.authorize.authorize_call`: the role's identity policies, the
  bucket policy, conditions, KMS). The container is another process, so the request is read at the server: its
  S3 REST form (method, bucket, key, query) becomes the API call it is. A denied call gets S3's own
  ``AccessDenied`` (403); a call this module cannot name (another service, an S3 call outside
  :data:`smx_debug.local.iam.calls.CALLS`) is refused too, saying so: never waved through. Each decision on a call it
  names is recorded (:func:`smx_debug.local.iam.ledger.IamLedger.records`, ``user=True``, ``caller`` the job's name).

This module needs moto (at call time only), so it is not part of the Lambda assets.
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from collections.abc import Callable
from typing import Any
from xml.sax.saxutils import escape

from moto.moto_server.werkzeug_app import DomainDispatcherApplication

from smx_debug.local.clients import client
from smx_debug.local.iam.authorize import authorize_call
from smx_debug.local.iam.ledger import Caller, container_of, ledger
from smx_debug.local.patching import patch_once
from smx_debug.local.server import LOCAL_ACCOUNT_ID, LocalAws

SESSION_NAME = "SageMaker"  # the role session name SageMaker's training jobs use (as CloudTrail shows them)
_SCOPE = re.compile(r"Credential=([^/,\s]+)/[^/]+/[^/]+/([^/]+)/")  # SigV4: KEY/date/region/service/aws4_request


def container_environment(aws: LocalAws, job_name: str, role_arn: str) -> dict[str, str]:
    """The AWS variables of job ``job_name``'s container: its execution role's session on the local AWS.

    Installs the server's check (:func:`install`). The key is the job's own, so a test can tell its calls apart.
    """
    install()
    role = client(aws, "iam").get_role(RoleName=role_arn.rsplit("/", 1)[-1])["Role"]
    caller = Caller(aws=aws, function=SESSION_NAME, handler=job_name, role_arn=role_arn,
                    role_id=str(role["RoleId"]), region=aws.region, account=LOCAL_ACCOUNT_ID, user=True)
    key = "ASIA" + hashlib.sha1(f"{aws.endpoint_url}|{role_arn}|{job_name}".encode()).hexdigest()[:16].upper()
    ledger(aws).add_container(key, caller)
    return {"AWS_ENDPOINT_URL": aws.endpoint_url, "AWS_ACCESS_KEY_ID": key,
            "AWS_SECRET_ACCESS_KEY": "local-" + key.lower(), "AWS_SESSION_TOKEN": f"local-container-{job_name}",
            "AWS_DEFAULT_REGION": aws.region, "AWS_REGION": aws.region}


def s3_call(method: str, host: str, path: str, query: str) -> tuple[str, dict[str, Any]] | None:
    """The S3 API call (operation, parameters) of a REST request, as :data:`smx_debug.local.iam.calls.CALLS` names it;
    None for one this module does not map. Path-style and virtual-hosted requests.

    Multipart uploads (CreateMultipartUpload, UploadPart, CompleteMultipartUpload) are authorized as PutObject:
    AWS authorizes each of them as ``s3:PutObject`` on the object.
    """
    params = urllib.parse.parse_qs(query, keep_blank_values=True)
    name = host.split(":", 1)[0]
    if name.count(".") and not name.replace(".", "").isdigit() and not name.startswith("s3.") \
            and not name.startswith("localhost"):
        bucket, key = name.split(".", 1)[0], path.lstrip("/")
    else:
        bucket, _, key = path.lstrip("/").partition("/")
    if not bucket:
        return None
    method = method.upper()
    if not key:
        listing = set(params) - {"list-type", "prefix", "delimiter", "max-keys", "marker", "continuation-token",
                                 "start-after", "encoding-type", "fetch-owner"}
        if method == "GET" and not listing and params.get("list-type", ["2"]) == ["2"]:
            out: dict[str, Any] = {"Bucket": bucket}
            for param, field in (("prefix", "Prefix"), ("delimiter", "Delimiter"), ("max-keys", "MaxKeys")):
                if param in params:
                    out[field] = params[param][0]
            return "ListObjectsV2", out
        return None
    target = {"Bucket": bucket, "Key": key}
    subresources = set(params) - {"versionId", "x-id"}
    if method in ("GET", "HEAD") and not subresources:
        return ("GetObject" if method == "GET" else "HeadObject"), target
    if method == "PUT" and (not subresources or subresources == {"partNumber", "uploadId"}):
        return "PutObject", target
    if method == "POST" and subresources in ({"uploads"}, {"uploadId"}):
        return "PutObject", target
    if method == "DELETE" and not subresources:
        return "DeleteObject", target
    return None


def _denied(start_response: Callable[..., Any], method: str, message: str) -> list[bytes]:
    body = b"" if method == "HEAD" else (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>{escape(message)}'
        "</Message><RequestId>local</RequestId><HostId>local</HostId></Error>").encode()
    start_response("403 Forbidden", [("Content-Type", "application/xml"), ("x-amz-request-id", "local")])
    return [body]


def _authorize(caller: Caller, environ: dict[str, Any]) -> str | None:
    """None when the request may proceed, else why not (AWS's message for a denial)."""
    found = _SCOPE.search(str(environ.get("HTTP_AUTHORIZATION", "")))
    service = found.group(2) if found else ""
    method = str(environ.get("REQUEST_METHOD", ""))
    path = environ.get("PATH_INFO", "")
    if isinstance(path, str):  # WSGI's latin-1 string of the request's bytes
        path = path.encode("latin-1").decode("utf-8", errors="replace")
    call = s3_call(method, str(environ.get("HTTP_HOST", "")), path, str(environ.get("QUERY_STRING", ""))) \
        if service == "s3" else None
    if call is None:
        message = (f"{method} {path} ({service or 'no service'}) by training job {caller.handler!r}'s container is "
                   "not a call the local AWS authorizes for a container (smx_debug.local.sagemaker.container_role.s3_call): "
                   "refused")
        return message
    outcome = authorize_call(caller, "s3", *call)
    return None if outcome.allowed else outcome.message


def install() -> None:
    """Make the local server authorize the requests of containers' keys (:func:`container_environment`). Idempotent."""
    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def get_application(self: Any, environ: dict[str, Any]) -> Any:
            found = _SCOPE.search(str(environ.get("HTTP_AUTHORIZATION", "")))
            caller = container_of(found.group(1)) if found else None
            if caller is not None:
                why = _authorize(caller, environ)
                if why is not None:
                    method = str(environ.get("REQUEST_METHOD", ""))
                    return lambda _environ, start_response: _denied(start_response, method, why)
            return original(self, environ)

        return get_application

    patch_once(DomainDispatcherApplication, "get_application", wrap)
