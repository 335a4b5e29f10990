"""Every code block of README.md and docs/*.md that is meant to run is run, extracted from the Markdown.

Rules for the blocks (also what a docs author needs to know):

- ```` ```python ```` blocks of one file run in order in one namespace, against the embedded local AWS: its
  ``environment()`` is active, so default clients (``boto3.client``, ``sagemaker.Session()``, the CLI's) talk
  to it. ``<Placeholder>`` values in the code are replaced by the local values in :data:`PLACEHOLDERS`; a
  placeholder not listed there fails the test.
- ``<!-- local-aws: play job -->`` on the line before a block: before it runs, SageMaker's part of the training
  job named by the namespace variable ``job`` is played (``smx_debug.local.playback``), as a real job would run.
- ``<!-- no-run: reason -->`` on the line before a block: not executed. Python is still compiled, and every
  ``smx-debug ...`` command line of a shell block is parsed by the CLI's own parser (placeholders filled,
  ``[optional]`` parts dropped), so a renamed option or command fails here.
- ```` ```bash ```` blocks that are not marked are executed with ``bash -e`` against the local AWS.
- ```` ```json ```` blocks must parse; ```` ```yaml ```` blocks with ``rules:`` must be valid debug plans. Blocks
  without a language are output or diagrams, not code.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from smx_debug import DebugPlan, SmxDebugWarning
from smx_debug.cli import build_parser
from smx_debug.local import LOCAL_ACCOUNT_ID, LocalAws

ROOT = Path(__file__).resolve().parents[2]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OUTPUT_BUCKET = "smx-docs-output"
PLACEHOLDERS = {
    "<OutputBucketName>": OUTPUT_BUCKET,
    "<account>": LOCAL_ACCOUNT_ID,
    "<region>": "us-west-2",
    "<SageMakerExecutionRole>": "SageMakerExecution-docs",
}
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
_DIRECTIVE = re.compile(r"<!--\s*(no-run|local-aws)\s*:\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    file: Path
    line: int
    lang: str
    code: str
    directive: str  # "", "no-run" or "local-aws"
    argument: str

    @property
    def id(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    out = []
    for m in _FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        d = _DIRECTIVE.search(before)
        indent = m.group("indent")
        code = "\n".join(line[len(indent):] if line.startswith(indent) else line
                         for line in m.group("body").splitlines())
        out.append(Block(path, text.count("\n", 0, m.start()) + 1, m.group("info").strip().split(" ")[0].lower(),
                         code + "\n", d.group(1) if d else "", d.group(2) if d else ""))
    return out


ALL = [b for f in FILES for b in blocks(f)]


def _fill(code: str, block: Block) -> str:
    for key, value in PLACEHOLDERS.items():
        code = code.replace(key, value)
    left = re.findall(r"<[A-Z][A-Za-z]+>", code)
    assert not left, f"{block.id}: placeholders without a local value: {left} (add them to PLACEHOLDERS)"
    return code


def _cli_lines(code: str) -> list[list[str]]:
    out = []
    for raw in code.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line.startswith("smx-debug "):
            continue
        line = re.sub(r"\[[^\]]*\]", "", line)  # optional parts of a synopsis
        line = re.sub(r"<([^>]+)>", lambda m: re.sub(r"\W+", "-", m.group(1)).strip("-").lower() or "x", line)
        out.append(shlex.split(line)[1:])
    return out


def test_docs_have_runnable_blocks() -> None:
    runnable = [b for b in ALL if b.lang == "python" and b.directive != "no-run"]
    assert {b.file.name for b in runnable} >= {"README.md", "cost.md"}


@pytest.mark.parametrize("block", [b for b in ALL if b.lang in {"bash", "sh", "shell", "console"}], ids=lambda b: b.id)
def test_docs_shell_block_commands_parse(block: Block) -> None:
    parser = build_parser()
    for argv in _cli_lines(block.code):
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"{block.id}: `smx-debug {' '.join(argv)}` does not parse (exit {exc.code})")
        assert callable(getattr(args, "func", None)), argv


@pytest.mark.parametrize("block", [b for b in ALL if b.lang == "python" and b.directive == "no-run"],
                         ids=lambda b: b.id)
def test_docs_python_block_not_run_compiles(block: Block) -> None:
    compile(block.code, block.id, "exec")


@pytest.mark.parametrize("block", [b for b in ALL if b.lang in {"json", "yaml", "yml"}], ids=lambda b: b.id)
def test_docs_data_block_parses(block: Block) -> None:
    if block.lang == "json":
        json.loads(block.code)
        return
    data = yaml.safe_load(block.code)
    if isinstance(data, dict) and "rules" in data:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SmxDebugWarning)
            DebugPlan.from_dict(data)


def _runnable_files() -> list[Path]:
    return [f for f in FILES if any(b.file == f and b.directive != "no-run"
                                    and b.lang in {"python", "bash", "sh", "shell"} for b in ALL)]


@pytest.mark.parametrize("path", _runnable_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_runnable_blocks_run_on_the_local_aws(path: Path, local_aws: LocalAws, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from smx_debug import local
    from smx_debug.local.playback import JobPlayback

    local.install(local_aws)
    local_aws.client("s3").create_bucket(Bucket=OUTPUT_BUCKET,
                                         CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    # What the README's notebook code has beside it: the repository's examples and a training script.
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "train.py").write_text("print('training')\n")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__docs__",
                                 "role": f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:role/SageMakerExecution-docs"}
    with local_aws.environment():
        for block in [b for b in ALL if b.file == path and b.directive != "no-run"]:
            if block.directive == "local-aws":
                assert block.argument == "play job", f"{block.id}: unknown directive {block.argument!r}"
                JobPlayback(local_aws, namespace["job"], namespace["plan"], scenario="cpu_bottleneck", minutes=10,
                            onset_min=2, speed=1e6).run()
            code = _fill(block.code, block)
            if block.lang == "python":
                exec(compile(code, block.id, "exec"), namespace)  # the documentation's own code
            elif block.lang in {"bash", "sh", "shell"}:
                path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
                env = {**os.environ, **local_aws.environ(), "PATH": path}
                done = subprocess.run(["bash", "-e", "-c", code], env=env, capture_output=True, text=True, timeout=300)
                assert done.returncode == 0, f"{block.id}:\n{done.stdout}\n{done.stderr}"
    if path.name == "README.md":  # the notebook code launched a job whose rules settled and were read back
        assert namespace["summary"]["status"].notna().all() and len(namespace["stats"]) > 0
