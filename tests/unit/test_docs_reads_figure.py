"""README and docs/reports.md state one figure for how much faster our reads are than smdebug's (issue 29, item 9).

The figure is `make bench`'s (bench/reports_bench.py, 8 nodes x 1 h): one ratio from disk and one from S3, the same
in both documents, so that neither drifts when the benchmark is run again.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIGURE = re.compile(r"(\d+(?:\.\d+)?)x faster than smdebug from disk\b[^;]*?(\d+(?:\.\d+)?)x from S3")


def _figures(path: str) -> list[tuple[str, str]]:
    text = " ".join((ROOT / path).read_text(encoding="utf-8").split())
    return FIGURE.findall(text)


def test_docs_reads_figure_readme_and_reports_state_the_same_disk_and_s3_ratios() -> None:
    readme, reports = _figures("README.md"), _figures("docs/reports.md")
    assert len(readme) == 1, f"README states {readme} as the reads figure: one 'Nx faster than smdebug from disk, Mx from S3'"
    assert len(reports) == 1, f"docs/reports.md states {reports}"
    assert readme == reports
