"""smdebug's SageMaker-metrics JSON-lines files: a bad line is skipped and counted, the others kept."""

from __future__ import annotations

import json
from pathlib import Path

from smx_debug.data.metrics_file import read_scalars


def test_read_scalars_line_nested_100000_deep_skipped_and_counted(tmp_path: Path) -> None:
    good = [json.dumps({"MetricName": "loss_TRAIN", "Value": v, "Timestamp": 1_700_000_000 + s,
                        "IterationNumber": s}) for s, v in ((0, 2.5), (1, 2.0))]
    path = tmp_path / "metrics.json"
    path.write_text("\n".join([good[0], "[" * 100_000 + "]" * 100_000, good[1]]) + "\n")
    skipped: dict[str, int] = {}
    frame = read_scalars([path], skipped)
    assert skipped == {"malformed lines (metrics files)": 1}
    assert frame["value"].tolist() == [2.5, 2.0]
