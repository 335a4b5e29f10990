"""The window between an action and its ledger record: a throttled complete must not make the action run twice."""

from __future__ import annotations

import time
from collections.abc import Mapping

import pytest
from botocore.exceptions import ClientError

from smx_debug.actions import MemoryLedger
from smx_debug.actions.once import COMPLETE_ATTEMPTS, once


def _throttled() -> ClientError:
    return ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
                       "UpdateItem")


class FlakyCompleteLedger(MemoryLedger):
    """A ledger whose first ``failures`` completes are throttled (as DynamoDB answers under load)."""

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        super().__init__()
        self.failures, self.error, self.calls = failures, error, 0

    def complete(self, pk: str, outcome: Mapping[str, object]) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error or _throttled()
        super().complete(pk, outcome)


def test_once_throttled_complete_is_retried_and_the_action_runs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda _s: None)
    ledger, sent = FlakyCompleteLedger(COMPLETE_ATTEMPTS - 1), []
    done = once(ledger, "job#notify", {"action": "notify"}, lambda: sent.append(1) or {"outcome": "published"})
    assert done.acted and sent == [1] and ledger.get("job#notify")["state"] == "done"
    # the redelivered event finds the record done and does not publish again
    again = once(ledger, "job#notify", {"action": "notify"}, lambda: sent.append(2) or {"outcome": "published"})
    assert not again.acted and sent == [1]


def test_once_complete_throttled_past_every_attempt_fails_the_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda _s: None)
    ledger = FlakyCompleteLedger(COMPLETE_ATTEMPTS)
    with pytest.raises(ClientError):
        once(ledger, "job#stop", {"action": "stop"}, lambda: {"outcome": "stopped"})
    assert ledger.calls == COMPLETE_ATTEMPTS


def test_once_complete_other_errors_are_not_retried() -> None:
    denied = ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "UpdateItem")
    ledger = FlakyCompleteLedger(1, denied)
    with pytest.raises(ClientError):
        once(ledger, "job#stop", {"action": "stop"}, lambda: {"outcome": "stopped"})
    assert ledger.calls == 1


def test_ledger_claim_is_a_plain_lease_and_a_loser_reads_the_holder_in_the_same_call() -> None:
    ledger = MemoryLedger(lease_seconds=90)
    assert ledger.claim("run", {"actor": "a"}) is True
    assert ledger.claim("run", {"actor": "b"}) is False
    holder = ledger.claim_or_holder("run", {"actor": "b"})
    assert holder is not None and holder["actor"] == "a" and holder["state"] == "claimed"
