"""The local IAM as a botocore client plugin: a caller's client authorizes each request before it is sent.

A deployed function's clients load it from the environment (:data:`PLUGIN_ENV`, set by
:func:`~smx_debug.local.iam.principals.function_environment`); a principal's session registers it
(:func:`register`). A denied call is answered as AWS answers it: the service's AccessDenied code, HTTP status and
body for its protocol (:func:`denied_response`), parsed by botocore itself; an allowed call is stamped
(:data:`STAMP_HEADER`) and sent on. This module needs botocore only; it is not part of the Lambda assets.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator, Mapping
from typing import Any
from xml.sax.saxutils import escape

from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders

from smx_debug.local.iam.authorize import authorize_call
from smx_debug.local.iam.ledger import caller_of
from smx_debug.local.iam.policy import UnsupportedPolicyError

PLUGIN_ENV = "BOTOCORE_EXPERIMENTAL__PLUGINS"  # botocore loads client plugins named here at client creation
PLUGIN = "smx_iam=smx_debug.local.iam.plugin"
STAMP_HEADER = "X-Smx-Iam-Checked"

def initialize_client_plugin(client: Any) -> None:
    """botocore's client-plugin entry point (``BOTOCORE_EXPERIMENTAL__PLUGINS``): authorize every request
    of a deployed function's client before it is sent."""
    register(client.meta.events)


def register(events: Any) -> None:
    """The two handlers that authorize each request, on a client's events or a session's (whose clients copy
    them when they are created); once, also when both apply (a session's client with the plugin loaded)."""
    events.register("before-parameter-build", _remember_params, unique_id="smx-iam-params")
    events.register("before-send", _authorize_send, unique_id="smx-iam-send")


def _remember_params(params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
    context["smx_iam_call"] = (model.service_model, model.name, dict(params))


def access_key(headers: Mapping[str, Any]) -> str | None:
    authorization = headers.get("Authorization")
    if isinstance(authorization, bytes):
        authorization = authorization.decode()
    found = re.search(r"Credential=([^/,\s]+)/", str(authorization or ""))
    return found.group(1) if found else None


def _authorize_send(request: Any, **_: Any) -> Any:
    caller = caller_of(access_key(request.headers) or "")
    if caller is None:
        return None
    call = (request.context or {}).get("smx_iam_call")
    if call is None:
        raise UnsupportedPolicyError(f"a request by {caller.who} arrived without its API parameters")
    service_model, operation, params = call
    outcome = authorize_call(caller, service_model.service_id.hyphenize(), operation, params)
    if not outcome.allowed:
        return denied_response(service_model, request, outcome.message)
    request.headers[STAMP_HEADER] = "1"
    return None


# AccessDenied as each protocol (and service) answers it: (code, HTTP status).
_DENIED = {"query": ("AccessDenied", 403), "rest-xml": ("AccessDenied", 403),
           "rest-json": ("AccessDeniedException", 403), "json": ("AccessDeniedException", 400)}
_SERVICE_DENIED = {"sns": ("AuthorizationError", 403)}


class _Raw:
    """The bit of urllib3's response botocore reads a body from."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, *_: Any, **__: Any) -> Iterator[bytes]:
        yield self._body


def denied_response(service_model: Any, request: Any, message: str) -> Any:
    """AWS's AccessDenied answer to ``request`` for the service's protocol, as botocore receives it."""
    protocol = service_model.resolved_protocol  # the one botocore chose among the service's protocols
    service = service_model.service_id.hyphenize()
    query_compatible = service_model.metadata.get("awsQueryCompatible") is not None
    # A service that moved from the query protocol (CloudWatch, SQS) keeps query's code and status.
    code, status = _SERVICE_DENIED.get(service) or (_DENIED["query"] if query_compatible else _DENIED[protocol])
    request_id = str(uuid.uuid4())
    headers = {"x-amzn-RequestId": request_id}
    if query_compatible:
        headers["x-amzn-query-error"] = f"{code};Sender"
    if protocol == "json":
        body = json.dumps({"__type": code if query_compatible else f"com.amazonaws.{service}#{code}",
                           "message": message}).encode()
        headers["Content-Type"] = "application/x-amz-json-1.0"
    elif protocol == "rest-json":
        body = json.dumps({"Type": "User", "message": message}).encode()
        headers.update({"Content-Type": "application/json", "x-amzn-ErrorType": f"{code}:"})
    elif protocol == "rest-xml":
        body = b"" if request.method == "HEAD" else (
            f"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{escape(message)}"
            f"</Message><RequestId>{request_id}</RequestId><HostId>local</HostId></Error>").encode()
        headers = {"x-amz-request-id": request_id, "Content-Type": "application/xml"}
    elif protocol == "query":
        namespace = service_model.metadata.get("xmlNamespace", "")
        body = (f"<ErrorResponse xmlns=\"{namespace}\"><Error><Type>Sender</Type><Code>{code}</Code>"
                f"<Message>{escape(message)}</Message></Error><RequestId>{request_id}</RequestId>"
                "</ErrorResponse>").encode()
        headers["Content-Type"] = "text/xml"
    else:
        raise UnsupportedPolicyError(f"protocol {protocol!r} of {service} has no AccessDenied answer here")
    return AWSResponse(request.url, status, HTTPHeaders.from_dict(headers), _Raw(body))

