"""A benchmark's timed total against its target: the line it prints and the exit status bench/run.py sums.
Imported as ``_verdict`` (a benchmark runs as ``python bench/<name>.py`` or through bench/run.py, both with bench/
first on ``sys.path``)."""

from __future__ import annotations


def judged(line: str, total_s: float, target_s: float, *, quick: bool) -> int:
    """Print ``line`` and the verdict on ``total_s`` against ``target_s`` (OK, or SLOW at or over it); return the
    exit status: 1 when slow, except in a ``--quick`` run (a smoke run on a smaller input is not judged)."""
    ok = total_s < target_s
    print(f"{line} {'OK' if ok else 'SLOW'}")
    return 0 if ok or quick else 1
