"""The CLI's one AWS client factory: the global ``--region`` and ``--endpoint-url`` (else the default session's),
botocore's standard retries, clients made when a command first uses them and never at import."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config


class _Lazy:
    """A client made on first use: a command that reads a local folder never needs a region."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._client: Any = None
        self._lock = threading.Lock()  # the readers fetch in threads: one client, made once

    def __getattr__(self, name: str) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._make()
        return getattr(self._client, name)


class Clients:
    """The AWS clients of one command."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.region: str | None = getattr(args, "region", None)
        self.endpoint_url: str | None = getattr(args, "endpoint_url", None)

    def client(self, service: str) -> Any:
        """A boto3 client of ``service``, made now."""
        return boto3.client(service, region_name=self.region, endpoint_url=self.endpoint_url,  # type: ignore[call-overload]
                            config=Config(retries={"mode": "standard"}))

    def injected(self, *services: str) -> dict[str, Any]:
        """``{"<service>_client": client}`` for the library's ``*_client`` parameters, each made on first use;
        empty when neither --region nor --endpoint-url is given (the library's own default clients then)."""
        if self.region is None and self.endpoint_url is None:
            return {}
        return {f"{service}_client": _Lazy(lambda service=service: self.client(service))  # type: ignore[misc]
                for service in services}
