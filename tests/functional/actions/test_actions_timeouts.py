"""A hanging endpoint (accepts the connection, never answers) makes a call fail within the computed budget.

The clients are built the way the handlers build them (``client_factory`` with the Settings' attempts and
socket timeouts); the endpoint is a local socket, so the test needs no AWS and no moto. Timeouts are scaled
down (0.2 s connect, 0.5 s read) to keep the test short; the arithmetic is the same one that sizes the
defaults (3 x (2 s + 5 s) + 1 s + 2 s = 24 s, at most half of the 60 s function timeout).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from botocore.exceptions import ReadTimeoutError

from smx_debug.actions import Settings
from smx_debug.actions.runtime import client_factory
from smx_debug.actions.settings import call_budget_seconds


class HangingServer:
    """Accepts every connection and never writes a byte."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def hanging() -> Iterator[HangingServer]:
    server = HangingServer()
    yield server
    server.close()


def test_call_to_a_hanging_endpoint_fails_within_the_budget(
    hanging: HangingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(max_attempts=3, connect_timeout=0.2, read_timeout=0.5, function_timeout=60)
    monkeypatch.setenv("AWS_ENDPOINT_URL", hanging.url)
    clients = client_factory("us-west-2", settings.max_attempts, settings.connect_timeout, settings.read_timeout)
    sagemaker = clients("sagemaker")
    started = time.monotonic()
    with pytest.raises(ReadTimeoutError):
        sagemaker.stop_training_job(TrainingJobName="hangs")
    elapsed = time.monotonic() - started
    budget = call_budget_seconds(3, 0.2, 0.5)
    assert budget == pytest.approx(5.1)
    assert len(hanging.accepted) == 3  # every attempt was made, each on a new connection
    assert 3 * 0.5 <= elapsed <= budget + 0.5, elapsed


def test_default_settings_worst_call_is_24_s_and_a_handler_ends_inside_the_timeout() -> None:
    settings = Settings()
    assert (settings.max_attempts, settings.connect_timeout, settings.read_timeout) == (3, 2.0, 5.0)
    assert settings.call_budget == 24.0
    # A handler that already spent half the timeout on quick calls can still see one call fail to its end.
    assert settings.function_timeout / 2 + settings.call_budget < settings.function_timeout < settings.lease_seconds
