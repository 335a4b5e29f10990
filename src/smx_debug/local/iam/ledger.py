"""What the local IAM keeps for one :class:`~smx_debug.local.server.LocalAws`: the callers its access keys stand
for, every decision made (:class:`Record`), and the roles' identity policies read.

Held by the LocalAws instance (:func:`ledger`), so two local AWSes in one process keep apart. The one process-wide
piece is the index from an access key to its caller, needed because a botocore client (built from a handler's
environment) and moto's server thread see only the key; it holds the callers weakly, so a caller lives as long
as the ledger that made it.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from dataclasses import dataclass

from smx_debug.local.iam.policy import ContextValue, Principal, Statement
from smx_debug.local.server import LocalAws


@dataclass(frozen=True)
class Caller:
    """A deployed function as IAM sees it: its role session and where it runs.

    With ``user``, a person's role session instead (:func:`~smx_debug.local.iam.principals.as_principal`):
    ``function`` is the session name and ``handler`` the role's name.
    """

    aws: LocalAws
    function: str
    handler: str
    role_arn: str
    role_id: str
    region: str
    account: str
    user: bool = False

    @property
    def who(self) -> str:
        """The caller in the local IAM's own messages."""
        return f"principal {self.principal.name!r}" if self.user else f"deployed function {self.function!r}"

    @property
    def principal(self) -> Principal:
        role_name = self.role_arn.rsplit("/", 1)[-1]
        return Principal(self.account, arn=self.role_arn,
                         session=f"arn:aws:sts::{self.account}:assumed-role/{role_name}/{self.function}")

    def context(self) -> dict[str, ContextValue]:
        return {"aws:PrincipalArn": self.role_arn, "aws:PrincipalAccount": self.account,
                "aws:PrincipalType": "AssumedRole", "aws:userid": f"{self.role_id}:{self.function}",
                "aws:SecureTransport": "true", "aws:RequestedRegion": self.region,
                "aws:ViaAWSService": "false", "aws:PrincipalIsAWSService": "false"}


@dataclass(frozen=True)
class Record:
    """One authorization made by the local IAM: who (a function's handler or a service), what, the outcome
    and the statement that decided it."""

    caller: str
    operation: str
    action: str
    resource: str
    allowed: bool
    statement: Statement | None
    policy: str
    message: str = ""
    call: int = 0  # the API call or delivery this authorization belongs to (one call may need several)
    user: bool = False  # a call by a principal of as_principal (a person), not by a deployed function


class IamLedger:
    """One LocalAws's IAM state: its callers by access key, its records, its cache of identity policies."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._call_ids = itertools.count(1)
        self._callers: dict[str, Caller] = {}
        self._records: list[Record] = []
        self._identity: dict[str, list[Statement]] = {}
        self._containers: dict[str, Caller] = {}

    def records(self) -> list[Record]:
        """Every authorization made since the last :meth:`reset` (calls, their KMS uses, and edges)."""
        with self._lock:
            return list(self._records)

    def reset(self) -> list[Record]:
        """Forget the records (returns them)."""
        with self._lock:
            out = list(self._records)
            self._records.clear()
            return out

    def denials(self, since: list[Record] | None = None) -> list[Record]:
        """The denied records (of ``since``, else of all recorded so far)."""
        return [r for r in (self.records() if since is None else since) if not r.allowed]

    def summary_line(self) -> str:
        """The demo's line: how many calls by deployed functions were checked, how many denied."""
        made = [r for r in self.records() if not r.user and not r.caller.endswith(".amazonaws.com")]
        calls = {r.call for r in made}
        denied = {r.call for r in made if not r.allowed}
        return (f"[iam] {len(calls)} calls by deployed functions checked against their roles' policies: "
                f"{len(denied)} denied")

    def record(self, record: Record) -> None:
        with self._lock:
            self._records.append(record)

    def new_call(self) -> int:
        """A new id for an API call or a delivery (its records share it)."""
        with self._lock:
            return next(self._call_ids)

    def add_caller(self, key: str, caller: Caller) -> None:
        """``key`` is ``caller``'s from now on; its role's identity policies are read again at the next call."""
        with self._lock:
            self._callers[key] = caller
            self._identity.pop(caller.role_arn, None)
        _by_key[key] = caller

    def add_container(self, key: str, caller: Caller) -> None:
        """``key`` is a training job's container's (its execution role's session): the server authorizes its
        requests itself (:mod:`smx_debug.local.sagemaker.container_role`), no client plugin stamps them."""
        with self._lock:
            self._containers[key] = caller
        _containers_by_key[key] = caller

    def identity(self, role_arn: str) -> list[Statement] | None:
        with self._lock:
            return self._identity.get(role_arn)

    def remember_identity(self, role_arn: str, statements: list[Statement]) -> None:
        with self._lock:
            self._identity[role_arn] = statements


# access key -> caller, for every live ledger (weak: the ledger's own dictionaries keep their callers alive)
_by_key: weakref.WeakValueDictionary[str, Caller] = weakref.WeakValueDictionary()
_containers_by_key: weakref.WeakValueDictionary[str, Caller] = weakref.WeakValueDictionary()


def ledger(aws: LocalAws) -> IamLedger:
    """The IAM ledger of ``aws`` (its records: ``ledger(aws).records()``, ``.denials()``, ``.reset()``)."""
    return aws.recorder(IamLedger)


def caller_of(access_key: str) -> Caller | None:
    """The deployed function or principal whose key this is, on any live local AWS."""
    return _by_key.get(access_key)


def container_of(access_key: str) -> Caller | None:
    """The training job's container whose key this is, on any live local AWS."""
    return _containers_by_key.get(access_key)

