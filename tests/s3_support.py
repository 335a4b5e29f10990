"""An S3 client that records what a reader asked of S3, for the tests that pin what is read (incremental reads,
one read per file)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class RecordingS3:
    """Passes every call to ``client`` and records the keys each GetObject reads (``gets``) and each listing
    through a paginator returns (``listed``)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.gets: list[str] = []
        self.listed: list[str] = []

    def get_object(self, **kwargs: Any) -> Any:
        self.gets.append(kwargs["Key"])
        return self._client.get_object(**kwargs)

    def get_paginator(self, name: str) -> Any:
        real, listed = self._client.get_paginator(name), self.listed

        class Paginator:
            def paginate(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
                for page in real.paginate(**kwargs):
                    listed.extend(o["Key"] for o in page.get("Contents", ()))
                    yield page

        return Paginator()

    def clear(self) -> None:
        """Forget what was recorded so far."""
        self.gets.clear()
        self.listed.clear()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)
