"""The progress bar of a long read (the readers', the fleet queries'): tqdm on stderr, on a terminal only."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from tqdm import tqdm


def progress_bar(label: str, total: int, *, enabled: bool | None = None, file: TextIO | None = None,
                 unit: str = "file") -> Any:
    """A tqdm bar for a read of ``total`` files (``unit``s) on stderr (``file``).

    ``enabled=None``: shown only when the stream is a terminal (silent when piped, in a Lambda or a notebook's
    captured stderr), and only once the read has taken a second (tqdm's ``delay``): short reads print nothing.
    ``enabled=True``: shown from the start, wherever the stream goes, and left on screen at the end.
    """
    forced = enabled is True
    return tqdm(total=total, desc=label, unit=unit, delay=0.0 if forced else 1.0, leave=forced,
                file=file if file is not None else sys.stderr,
                disable=None if enabled is None else not enabled)
