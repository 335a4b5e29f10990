"""System metrics reader: real smdebug fixtures, generated data, bad input."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from smx_debug.data.sources import LocalSource
from smx_debug.data.system import (
    SYSTEM_COLUMNS,
    SystemMetricsReader,
    _parse_fast,
    parse_system_file,
    system_metrics,
    system_metrics_wide,
)
from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.simulate import Simulation, SimulationSpec

RES = Path("third_party/awslabs+sagemaker-debugger/tests/profiler/resources")


def _oracle(*files: Path) -> pd.DataFrame:
    """The expected rows, by json.loads of every complete line (smdebug's semantics)."""
    rows = []
    for f in files:
        for line in f.read_bytes().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            rows.append(
                {
                    "timestamp": pd.Timestamp(int(r["Timestamp"] * 1e6) * 1000, tz="UTC"),
                    "node": r["NodeId"],
                    "type": r["Type"],
                    "name": r.get("Name"),
                    "dimension": r["Dimension"],
                    "value": float(r["Value"]),
                }
            )
    return _plain(pd.DataFrame(rows, columns=SYSTEM_COLUMNS))


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    for c in ("node", "type", "name", "dimension"):
        out[c] = pd.Series(out[c].astype(object).where(out[c].notna(), None), dtype=object)
    return out.reset_index(drop=True)


def _small_spec(**kw: object) -> SimulationSpec:
    base: dict[str, object] = {"nodes": 2, "cpus": 4, "gpus": 1, "duration_s": 300.0, "initialization_s": 30.0,
                               "finalization_s": 30.0, "interval_ms": 1000, "io_every": 5}
    base.update(kw)
    return SimulationSpec(**base)  # type: ignore[arg-type]


class CountingSource(LocalSource):
    """A local source that records which keys were read."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads: list[str] = []

    def read(self, key: str) -> bytes:
        self.reads.append(key)
        return super().read(key)


def test_system_metrics_smdebug_fixture_matches_json_oracle(data_dir: Path) -> None:
    folder = data_dir / RES / "test_traces"
    df = system_metrics(folder)
    files = sorted((folder / "system" / "incremental").glob("*.json"))
    assert list(df.columns) == SYSTEM_COLUMNS
    assert df.dtypes.astype(str).to_dict() == {
        "timestamp": "datetime64[ns, UTC]", "node": "category", "type": "category", "name": "category",
        "dimension": "category", "value": "float64",
    }
    pd.testing.assert_frame_equal(_plain(df), _oracle(*files))
    assert df.attrs["files"] == 3
    assert df.attrs["skipped_lines"] == 0


def test_system_metrics_truncated_last_line_skipped_and_counted(data_dir: Path, tmp_path: Path) -> None:
    src = data_dir / RES / "1591160699.algo-1.json.corrupt"
    target = tmp_path / "system" / "incremental" / "1591160699.algo-1.json"
    target.parent.mkdir(parents=True)
    shutil.copy(src, target)
    df = system_metrics(tmp_path)
    pd.testing.assert_frame_equal(_plain(df), _oracle(src))
    assert len(df) == 13
    assert df.attrs["skipped_lines"] == 1
    assert df.attrs["skipped_by_file"] == {"system/incremental/1591160699.algo-1.json": 1}


LINE = {"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 4.5, "NodeId": "algo-1",
        "Timestamp": 1591160699.25}


def _lines(*records: object) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in records)


@pytest.mark.parametrize(
    ("content", "rows", "skipped"),
    [
        (_lines(LINE, LINE), 2, 0),
        (_lines(LINE, {**LINE, "Extra": [1, 2]}), 2, 0),
        (_lines(dict(reversed(list(LINE.items())))), 1, 0),
        (_lines({k: v for k, v in LINE.items() if k != "Name"}), 1, 0),
        (_lines(LINE, {**LINE, "Value": "high"}), 1, 1),
        (_lines(LINE, {k: v for k, v in LINE.items() if k != "Timestamp"}), 1, 1),
        (_lines(LINE, b"not json at all", LINE), 2, 1),
        (_lines(LINE, [1, 2, 3]), 1, 1),
        (_lines({**LINE, "Type": "quantum", "Dimension": "QubitUtilization"}), 1, 0),
        (_lines({**LINE, "Name": "c\"pu"}), 1, 0),
        (b"", 0, 0),
        (b"\n  \n", 0, 0),
        (_lines(LINE)[:-20], 0, 1),
    ],
    ids=["canonical", "extra-key", "other-order", "no-name", "string-value", "no-timestamp", "garbage-line",
         "array-line", "unknown-type", "escaped-name", "empty", "blank", "only-truncated"],
)
def test_parse_system_file_bad_or_odd_records_skipped_and_counted(content: bytes, rows: int, skipped: int) -> None:
    table, skips = parse_system_file(content)
    assert (table.num_rows, sum(skips.values())) == (rows, skipped)
    assert set(skips) <= {"malformed lines"}
    expected = []
    for line in content.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and isinstance(r.get("Value"), float) and "Timestamp" in r:
            expected.append((r["Type"], r.get("Name"), r["Value"]))
    got = list(zip(table.column("type").to_pylist(), table.column("name").to_pylist(),
                   table.column("value").to_pylist(), strict=True))
    assert got == expected


def test_parse_system_file_fast_and_general_paths_agree(tmp_path: Path) -> None:
    sim = Simulation(_small_spec())
    _key, data, records = sim.system_file(0, sim.minutes()[1])
    fast, skipped_fast = _parse_fast(data)
    # A JSON escape anywhere sends the file down the general path.
    general, skipped_general = parse_system_file(data.replace(b'"cpu0"', b'"\\u0063pu0"'))
    assert fast.num_rows == general.num_rows == records
    assert skipped_fast == skipped_general == {}
    assert fast.to_pandas().astype(object).equals(general.to_pandas().astype(object))


def test_system_metrics_generated_matches_json_oracle(tmp_path: Path) -> None:
    res = Simulation(_small_spec()).write_local(tmp_path)
    df = system_metrics(tmp_path)
    files = [tmp_path / k for k in res.keys if k.startswith("system/")]
    assert len(df) == res.records
    pd.testing.assert_frame_equal(_plain(df), _oracle(*sorted(files, key=lambda p: (p.name.split(".")[0], p.name))))


def test_system_metrics_window_and_nodes_skip_files_entirely(tmp_path: Path) -> None:
    spec = _small_spec()
    Simulation(spec).write_local(tmp_path)
    t0 = spec.job_start.timestamp()
    src = CountingSource(tmp_path)
    df = system_metrics(src, start=t0 + 90, end=pd.Timestamp(t0 + 150, unit="s", tz="UTC"), nodes="algo-2")
    assert sorted(src.reads) == [
        f"system/incremental/{pd.Timestamp(m, unit='s'):%Y%m%d%H}/{m}.algo-2.json"
        for m in (int(t0) + 60, int(t0) + 120)
    ]
    ts = df["timestamp"].astype("int64") / 1e9
    assert ts.min() >= t0 + 90
    assert ts.max() < t0 + 150
    assert set(df["node"]) == {"algo-2"}
    full = system_metrics(tmp_path)
    fts = full["timestamp"].astype("int64") / 1e9
    assert len(df) == int(((fts >= t0 + 90) & (fts < t0 + 150) & (full["node"] == "algo-2")).sum())


def test_system_metrics_reader_refresh_reads_only_new_or_grown_files(tmp_path: Path) -> None:
    sim = Simulation(_small_spec(nodes=1))
    minutes = sim.minutes()
    sim.write_local(tmp_path, minutes[:2], framework=False)
    src = CountingSource(tmp_path)
    reader = SystemMetricsReader(src)
    first = reader.refresh()
    assert len(src.reads) == 2
    # The live job: minute 3 appears, and the file of minute 2 grows (it was still being written).
    key2, data2, _ = sim.system_file(0, minutes[1])
    (tmp_path / key2).write_bytes(data2 + data2.splitlines(keepends=True)[0])
    sim.write_local(tmp_path, [minutes[2]], framework=False)
    src.reads.clear()
    second = reader.refresh()
    assert sorted(src.reads) == sorted([key2, sim.system_file(0, minutes[2])[0]])
    assert len(second) == len(first) + 1 + sim.system_file(0, minutes[2])[2]
    src.reads.clear()
    assert len(reader.refresh()) == len(second)
    assert src.reads == []


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"start": "yesterday-ish"}, "start"),
        ({"start": True}, "start"),
        ({"start": 200.0, "end": 100.0}, "end"),
        ({"workers": 0}, "workers"),
        ({"nodes": [""]}, "nodes"),
    ],
)
def test_system_metrics_bad_arguments_raise_config_error(data_dir: Path, kwargs: dict[str, object],
                                                          field: str) -> None:
    with pytest.raises(ConfigError) as exc:
        system_metrics(data_dir / RES / "test_traces", **kwargs)  # type: ignore[arg-type]
    assert exc.value.field == field


def test_system_metrics_path_without_profiler_output_raises_not_found(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing here")
    with pytest.raises(NotFoundError, match="no system metrics under"):
        system_metrics(tmp_path)


def test_system_metrics_missing_local_path_raises_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="does not exist"):
        system_metrics(str(tmp_path / "nope"))


def test_system_metrics_unknown_node_raises_not_found_listing_nodes(data_dir: Path) -> None:
    with pytest.raises(NotFoundError, match=r"nodes present: \['algo-1'\]"):
        system_metrics(data_dir / RES / "test_traces", nodes=["algo-9"])


def test_system_metrics_empty_file_gives_empty_typed_frame(tmp_path: Path) -> None:
    f = tmp_path / "system" / "incremental" / "2026010100" / "1767225600.algo-1.json"
    f.parent.mkdir(parents=True)
    f.write_bytes(b"")
    df = system_metrics(tmp_path)
    assert list(df.columns) == SYSTEM_COLUMNS
    assert len(df) == 0
    assert str(df["timestamp"].dtype) == "datetime64[ns, UTC]"


def test_system_metrics_wide_pivots_one_column_per_metric(tmp_path: Path) -> None:
    Simulation(_small_spec(nodes=1, gpus=1, cpus=2)).write_local(tmp_path, framework=False)
    df = system_metrics(tmp_path)
    wide = system_metrics_wide(df, freq="1s")
    expected_cols = {(n, (nm if isinstance(nm, str) else t), d)
                     for n, t, nm, d in df[["node", "type", "name", "dimension"]].astype(object).itertuples(index=False)}
    assert set(wide.columns) == expected_cols
    one = df[(df["name"] == "gpu0") & (df["dimension"] == "GPUUtilization")]
    got = wide[("algo-1", "gpu0", "GPUUtilization")].dropna()
    assert math.isclose(got.mean(), one.groupby(one["timestamp"].dt.floor("1s"))["value"].mean().mean())
    with pytest.raises(ConfigError):
        system_metrics_wide(df.drop(columns=["value"]))


def test_system_metrics_progress_printed_when_asked(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    system_metrics(data_dir / RES / "test_traces", progress=True)
    err = capsys.readouterr().err
    assert err.endswith("\n") and ": 100%|" in err.splitlines()[-1] and " 3/3 " in err.splitlines()[-1]  # tqdm's bar
    system_metrics(data_dir / RES / "test_traces")  # stderr is not a terminal here: silent
    assert capsys.readouterr().err == ""


# --- issue 11 item 8: bad bytes and implausible timestamps are skipped and counted, never fatal -------------

CANON = (b'{"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 4.5, "NodeId": "algo-1", '
         b'"Timestamp": 1591160699.25}\n')
REORDERED = (b'{"Name": "cpu1", "Type": "cpu", "Dimension": "CPUUtilization", "Value": 2.5, "NodeId": "algo-1", '
             b'"Timestamp": 1591160700.5}\n')
BAD_LINES = {
    "xff-byte": (CANON.replace(b'"cpu0"', b'"cpu\xff"'), "lines with bytes that are not UTF-8"),
    "latin1-e": (CANON.replace(b'"cpu0"', "\"caf\u00e9\"".encode("latin-1")), "lines with bytes that are not UTF-8"),
    "ts-1e20": (CANON.replace(b"1591160699.25", b"1e20"), "timestamps out of range"),
    "ts-negative": (CANON.replace(b"1591160699.25", b"-5"), "timestamps out of range"),
    "ts-milliseconds": (CANON.replace(b"1591160699.25", b"1591160699250"), "timestamps in ms/us/ns, not seconds"),
    "ts-nanoseconds": (CANON.replace(b"1591160699.25", b"1591160699250000000"), "timestamps in ms/us/ns, not seconds"),
}

# One bad line, and the reason it is counted under, whatever path the rest of the file sends it down.
POISONED = {
    "lone-surrogate": (CANON.replace(b'"cpu0"', b'"cpu\\ud800"'), "strings with lone surrogates"),
    "lone-low-surrogate": (CANON.replace(b'"cpu0"', b'"\\udc00"'), "strings with lone surrogates"),
    "deep-array-line": (b"[" * 5000 + b"]" * 5000 + b"\n", "malformed lines"),
    "deep-array-value": (CANON.replace(b"4.5", b"[" * 5000 + b"]" * 5000), "malformed lines"),
    "value-nan": (CANON.replace(b"4.5", b"NaN"), "NaN numbers"),
    "value-infinity": (CANON.replace(b"4.5", b"Infinity"), "Infinity numbers"),
    "value-minus-infinity": (CANON.replace(b"4.5", b"-Infinity"), "Infinity numbers"),
    "value-1e400": (CANON.replace(b"4.5", b"1e400"), "numbers beyond float range"),
    "value-minus-1e400": (CANON.replace(b"4.5", b"-1e400"), "numbers beyond float range"),
    "value-400-digit-int": (CANON.replace(b"4.5", b"1" + b"0" * 400), "numbers beyond float range"),
    "timestamp-nan": (CANON.replace(b"1591160699.25", b"NaN"), "NaN numbers"),
    "timestamp-infinity": (CANON.replace(b"1591160699.25", b"Infinity"), "Infinity numbers"),
    "timestamp-1e400": (CANON.replace(b"1591160699.25", b"1e400"), "numbers beyond float range"),
}


@pytest.mark.parametrize("path", ["fast", "general"])
@pytest.mark.parametrize("case", list(BAD_LINES))
def test_parse_system_file_bad_record_skipped_and_counted_by_reason(case: str, path: str) -> None:
    bad, reason = BAD_LINES[case]
    head = CANON if path == "fast" else REORDERED  # another key order sends the file down the JSON path
    table, skips = parse_system_file(head + CANON + bad + CANON)
    assert (table.num_rows, skips) == (3, {reason: 1})
    assert table.to_pandas()["timestamp"].dt.year.tolist() == [2020, 2020, 2020]


@pytest.mark.parametrize("case", [*BAD_LINES, *POISONED])
def test_system_metrics_bad_record_counted_in_attrs_not_raised(case: str, tmp_path: Path) -> None:
    bad, reason = {**BAD_LINES, **POISONED}[case]
    target = tmp_path / "system" / "incremental" / "2020060305" / "1591160640.algo-1.json"
    target.parent.mkdir(parents=True)
    target.write_bytes(CANON * 5 + bad + CANON * 5)
    df = system_metrics(tmp_path)
    assert len(df) == 10
    assert (df.attrs["skipped_lines"], df.attrs["skipped_by_reason"]) == (1, {reason: 1})
    assert df["name"].astype(str).unique().tolist() == ["cpu0"]  # to_pandas did not choke on the bytes


def test_parse_system_file_valid_utf8_names_are_kept() -> None:
    line = CANON.replace(b'"cpu0"', '"caf\u00e9"'.encode())
    table, skips = parse_system_file(CANON + line)
    assert (table.column("name").to_pylist(), skips) == (["cpu0", "caf\u00e9"], {})


def test_parse_fast_garbage_lines_stay_on_the_fast_path() -> None:
    # One garbage line used to push the whole file through json.loads per line (7x slower); now the CSV
    # tokenizer skips and counts it and the file stays on the fast path (_parse_fast does not raise).
    garbage = b"\x00\x01 not a record at all {\n"
    table, skips = _parse_fast(CANON * 100 + garbage + CANON * 100 + b'{"Type": "cpu", "Na')
    assert (table.num_rows, skips) == (200, {"malformed lines": 2})


def test_parse_fast_a_few_records_of_another_shape_are_parsed_not_lost() -> None:
    no_name = b'{"Type": "memory", "Dimension": "MemoryUsedPercent", "Value": 7.5, "NodeId": "algo-1", ' \
              b'"Timestamp": 1591160699.5}\n'
    table, skips = _parse_fast(CANON * 10 + no_name + CANON * 10)
    assert (table.num_rows, skips) == (21, {})
    assert table.column("name").to_pylist().count(None) == 1
    assert table.column("value").to_pylist()[-1] == 7.5


def test_parse_system_file_many_bad_byte_lines_all_counted() -> None:
    bad = CANON.replace(b'"cpu0"', b'"cpu\xff"')
    table, skips = parse_system_file((CANON + bad) * 40)
    assert (table.num_rows, skips) == (40, {"lines with bytes that are not UTF-8": 40})


def test_parse_system_file_utf8_check_across_chunk_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    import smx_debug.data.system as system

    monkeypatch.setattr(system, "_UTF8_CHUNK", 7)  # multi-byte characters straddle chunk boundaries
    good = CANON.replace(b'"cpu0"', '"caf\u00e9\u20ac"'.encode())
    bad = CANON.replace(b'"cpu0"', b'"caf\xe9"')
    table, skips = parse_system_file(good * 3 + bad + good * 2 + bad + good)
    assert (table.num_rows, skips) == (6, {"lines with bytes that are not UTF-8": 2})
    assert set(table.column("name").to_pylist()) == {"caf\u00e9\u20ac"}


# --- issue 20 defects 3 and 10: poisoned lines and non-finite numbers, the same on every parsing path ----------

ESCAPED = CANON.replace(b'"cpu0"', b'"\\u0063pu0"')  # a JSON escape: the pyarrow.json path, not the CSV one
GARBAGE = b"not a record at all\n"  # pyarrow.json refuses the part: the per-line path
PATHS = {
    "fast": (CANON, {}),
    "json": (ESCAPED, {}),
    "per-line": (GARBAGE + ESCAPED, {"malformed lines": 1}),
}


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("case", list(POISONED))
def test_parse_system_file_poisoned_or_non_finite_line_skipped_and_counted_on_every_path(case: str, path: str) -> None:
    bad, reason = POISONED[case]
    head, head_skips = PATHS[path]
    table, skips = parse_system_file(head + CANON + bad + CANON)
    expected = dict(head_skips)
    expected[reason] = expected.get(reason, 0) + 1
    assert (table.num_rows, skips) == (3, expected)
    assert table.column("value").to_pylist() == [4.5, 4.5, 4.5]
    assert table.to_pandas()["timestamp"].dt.year.tolist() == [2020, 2020, 2020]


@pytest.mark.parametrize("path", list(PATHS))
def test_parse_system_file_exact_duplicate_records_kept_on_every_path(path: str) -> None:
    # Decision (docs/reports.md): exact duplicates are kept, as smdebug keeps them; never counted or merged.
    head, head_skips = PATHS[path]
    table, skips = parse_system_file(head + CANON + CANON + CANON)
    assert (table.num_rows, skips) == (4, head_skips)
    assert table.to_pandas().iloc[1:].duplicated(keep=False).all()


# --- issue 29 item 17: one bad line costs its block, never the whole file its fast path ---------------------------

def _one_file(tmp_path: Path, data: bytes) -> pd.DataFrame:
    target = tmp_path / "system" / "incremental" / "2020060305" / "1591160640.algo-1.json"
    target.parent.mkdir(parents=True)
    target.write_bytes(data)
    return system_metrics(tmp_path)


@pytest.mark.parametrize("case", ["lone-surrogate", "lone-low-surrogate"])
def test_system_metrics_one_escaped_bad_line_leaves_the_rest_on_the_fast_path(case: str, tmp_path: Path) -> None:
    bad, reason = POISONED[case]
    df = _one_file(tmp_path, CANON * 2000 + bad + CANON * 2000)
    assert (len(df), df.attrs["skipped_by_reason"]) == (4000, {reason: 1})
    assert df.attrs["lines_parsed_one_by_one"] == 1  # the bad line alone, not the 4,001 of the file


@pytest.mark.parametrize("head", [REORDERED, ESCAPED], ids=["other-key-order", "escaped"])
def test_system_metrics_one_bad_line_in_a_json_path_file_costs_one_block(head: bytes, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import smx_debug.data.system as system

    lines_a_block = 50
    monkeypatch.setattr(system, "_BLOCK", lines_a_block * len(head), raising=False)
    # Every line escaped or in another key order: pyarrow.json's path, which refuses the garbage line's block
    df = _one_file(tmp_path, head * 2000 + GARBAGE + head * 2000)
    assert (len(df), df.attrs["skipped_by_reason"]) == (4000, {"malformed lines": 1})
    assert 1 <= df.attrs["lines_parsed_one_by_one"] <= lines_a_block + 1
    assert df["value"].tolist() == [json.loads(head)["Value"]] * 4000
