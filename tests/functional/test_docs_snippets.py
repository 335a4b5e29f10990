"""Every code block of README.md, docs/*.md and the notebook's markdown that a newcomer is told to type is run.

Rules for the blocks (also what a docs author needs to know):

- Blocks of one file run in order, in a workspace that has what a clone has (every top-level entry of the
  repository, ``.venv`` and ``node_modules`` linked in) plus a ``train.py`` and a ``plan.yaml`` (the README's
  placeholders for yours), against the embedded local AWS: its ``environment()`` is active, so default clients
  (``boto3.client``, ``sagemaker.Session()``, the CLI's) talk to it.
- ```` ```python ```` blocks share one namespace. ``<Placeholder>`` values are replaced by the local values in
  :data:`PLACEHOLDERS`, ``<job>`` and ``<job-1>`` by the namespace's ``job``, and ``<job-2>`` by the ``s3://``
  prefix of that job's profiler output (a second run to compare: the CLI refuses one run given twice); a
  placeholder without a value fails the test.
- ```` ```bash ```` blocks that are not marked run with ``bash -e`` (``make synth`` included).
- ``<!-- local-aws: play job -->`` on the line before a block: before it runs, SageMaker's part of the training
  job named by the namespace variable ``job`` is played (``smx_debug.local.sagemaker.playback``), as a real job would run;
  ``<!-- local-aws: cloudwatch minutes -->``: that job's CloudWatch minutes are published as SageMaker would.
- ``<!-- no-run: reason -->`` on the line before a block: not executed, and the reason says why (a deploy to an
  account, the test suite itself, a run by .ci/run, values only a reader has). Python is still compiled, and every
  ``smx-debug ...`` command line of a shell block is parsed by the CLI's own parser (placeholders filled,
  ``[optional]`` parts dropped, the first of ``a|b``), so a renamed option or command fails here.
- Commands written inline in a sentence (`` `smx-debug rules evaluate TRIAL --live` ``, `` `make bench` ``,
  `` `python bench/x.py --quick` ``) must name what exists: the CLI's command path and options, a make target, a
  script or module and the options its source defines, a test path or pytest marker.
- ```` ```json ```` blocks must parse; ```` ```yaml ```` blocks with ``rules:`` must be valid debug plans. Blocks
  without a language are output or diagrams, and hold no command to type.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from smx_debug import DebugPlan, SmxDebugWarning
from smx_debug.cli._parser import build_parser
from smx_debug.local import LOCAL_ACCOUNT_ID, LocalAws

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), NOTEBOOK]
CI = ROOT / ".ci" / "run"
# What a clone's working tree has that the workspace must not share: git's own files and what runs write.
NOT_LINKED = {".git", "out", "cdk.out", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", ".benchmarks"}
COMMAND = re.compile(r"^\s*(\$ )?(smx-debug|make|python|npx|pip|aws|jupyter|git|source) ")
OUTPUT_BUCKET = "smx-docs-output"
PLACEHOLDERS = {
    "<OutputBucketName>": OUTPUT_BUCKET,
    "<account>": LOCAL_ACCOUNT_ID,
    "<region>": "us-west-2",
    "<SageMakerExecutionRole>": "SageMakerExecution-docs",
}
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
_DIRECTIVE = re.compile(r"<!--\s*(no-run|local-aws)\s*:\s*(.*?)\s*-->\s*$")
_JOB_PLACEHOLDER = re.compile(r"<job(-1)?>")
_SECOND_JOB_PLACEHOLDER = "<job-2>"


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


def _markdown(path: Path) -> str:
    """A Markdown file's text; for a notebook, its markdown cells."""
    if path.suffix != ".ipynb":
        return path.read_text(encoding="utf-8")
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def blocks(path: Path) -> list[Block]:
    text = _markdown(path)
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


def _fill(code: str, block: Block, job: str | None = None, second: str | None = None) -> str:
    for key, value in PLACEHOLDERS.items():
        code = code.replace(key, value)
    if job is not None:
        code = _JOB_PLACEHOLDER.sub(job, code)
    if second is not None:
        code = code.replace(_SECOND_JOB_PLACEHOLDER, second)
    left = re.findall(r"<[A-Za-z][\w-]*>", code)
    assert not left, f"{block.id}: placeholders without a local value: {left} (add them to PLACEHOLDERS)"
    return code


def _cli_lines(code: str) -> list[list[str]]:
    out = []
    for raw in code.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line.startswith("smx-debug "):
            continue
        line = re.sub(r"\[[^\]]*\]", "", line)  # optional parts of a synopsis
        line = re.sub(r"(\w+)(\|[\w-]+)+", r"\1", line)  # the first of a synopsis' alternatives a|b
        line = re.sub(r"<([^>]+)>", lambda m: re.sub(r"\W+", "-", m.group(1)).strip("-").lower() or "x", line)
        out.append(shlex.split(line)[1:])
    return out


def test_docs_have_runnable_blocks() -> None:
    runnable = [b for b in ALL if b.lang == "python" and b.directive != "no-run"]
    assert {b.file.name for b in runnable} >= {"README.md", "cost.md"}
    shell = [b for b in ALL if b.lang == "bash" and b.directive != "no-run"]
    assert {b.file.name for b in shell} >= {"README.md", "infra.md", "permissions.md"}


def test_docs_block_without_language_holds_no_command() -> None:
    # A command to type goes in a ```bash block, where it runs or is marked no-run with its reason.
    found = [(b.id, line) for b in ALL if b.lang == "" for line in b.code.splitlines() if COMMAND.match(line)]
    assert found == []


def test_docs_no_run_blocks_say_why() -> None:
    assert [b.id for b in ALL if b.directive == "no-run" and len(b.argument) < 10] == []


def test_readme_quickstart_commands_are_what_ci_runs_verbatim() -> None:
    (first,) = [b for b in ALL if b.file.name == "README.md" and b.lang == "bash"][:1]
    assert first.directive == "no-run" and ".ci/run" in first.argument, first
    commands = {line.split(" #", 1)[0].strip() for line in first.code.splitlines() if line.strip()}
    ci = [line.strip() for line in CI.read_text().splitlines() if line.strip() and not line.startswith("#")]
    # fail on the first failure, from the clone's root, the suite and then the demo: nothing else
    assert ci == ["set -euo pipefail", 'cd "$(dirname "$0")/.."', "make test", "make demo"]
    assert commands == {"make test", "make demo"}


@pytest.mark.parametrize("block", [b for b in ALL if b.lang in {"bash", "sh", "shell", "console"}], ids=lambda b: b.id)
def test_docs_shell_block_commands_parse(block: Block) -> None:
    parser = build_parser()
    for argv in _cli_lines(block.code):
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"{block.id}: `smx-debug {' '.join(argv)}` does not parse (exit {exc.code})")
        module, function = args.run  # the command module and its function that runs the line
        assert callable(getattr(importlib.import_module(f"smx_debug.cli.{module}"), function, None)), argv


# ------------------------------------------------------------ commands written inline in the prose
_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_INLINE_COMMAND = re.compile(r"^(smx-debug|make|python3?|\.venv/bin/(python|pytest)|pytest|bash) ")
# Inline spans that start like a command and are not one: the event source name the evaluator writes.
_NOT_COMMANDS = ("smx-debug evaluator",)


@dataclass(frozen=True)
class Inline:
    file: Path
    line: int
    text: str

    @property
    def id(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}"


def inline_commands(path: Path) -> list[Inline]:
    """The commands a reader is told to type inside a sentence (`` `make bench` ``), fenced blocks left out."""
    text = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), _markdown(path))
    return [Inline(path, text.count("\n", 0, m.start()) + 1, m.group(1).strip()) for m in _SPAN.finditer(text)
            if _INLINE_COMMAND.match(m.group(1).strip()) and not m.group(1).strip().startswith(_NOT_COMMANDS)]


INLINE = [c for f in FILES for c in inline_commands(f)]


def _subcommands(parser: Any) -> dict[str, Any]:
    actions = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return dict(actions[0].choices) if actions else {}


def _check_cli(words: list[str], where: str) -> None:
    """The command path (``rules evaluate``, ``plan validate/render``) exists and every option named is one of it."""
    parser = build_parser()
    options = set(parser._option_string_actions)
    rest = words
    while rest and not rest[0].startswith("-"):
        choices = _subcommands(parser)
        if not choices:
            break
        names = rest[0].split("/")  # `plan validate/render` names two commands
        missing = [n for n in names if n not in choices]
        assert not missing, f"{where}: `smx-debug ... {rest[0]}`: no command {missing} (known: {sorted(choices)})"
        parser = choices[names[0]]
        options |= set(parser._option_string_actions)
        rest = rest[1:]
    named = [w.split("=", 1)[0] for w in rest if re.fullmatch(r"--?[A-Za-z][\w-]*(=.*)?", w)]
    unknown = [o for o in named if o not in options]
    assert not unknown, f"{where}: options not known to `smx-debug {' '.join(words)}`: {unknown}"


def _check_script(words: list[str], where: str) -> None:
    """A script or module the docs name exists, and every option named appears in its source."""
    if words[0] == "-m":
        source = ROOT / (words[1].replace(".", "/") + ".py")
        rest = words[2:]
    else:
        source, rest = ROOT / words[0], words[1:]
    assert source.is_file(), f"{where}: {source.relative_to(ROOT)} does not exist"
    text = source.read_text(encoding="utf-8")
    named = (w.split("=", 1)[0] for w in rest if w.startswith("--") and w != "--help")  # argparse's own
    unknown = [o for o in named if f'"{o}"' not in text]
    assert not unknown, f"{where}: {source.relative_to(ROOT)} takes no {unknown}"


@pytest.mark.parametrize("command", INLINE, ids=lambda c: f"{c.id}:{c.text}")
def test_docs_inline_command_names_what_exists(command: Inline) -> None:
    line = re.sub(r"\[[^\]]*\]", "", command.text).replace("...", "")  # a synopsis' optional parts
    words = shlex.split(line)
    tool, args = words[0], words[1:]
    if tool == "smx-debug":
        _check_cli(args, command.id)
    elif tool == "make":
        targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
        assert set(args) <= targets, f"{command.id}: no make target {sorted(set(args) - targets)}"
    elif tool == "bash":
        assert (ROOT / args[0]).is_file(), f"{command.id}: {args[0]} does not exist"
    elif tool.endswith("pytest"):
        markers = {m.split(":")[0] for m in load_pyproject()["tool"]["pytest"]["ini_options"]["markers"]}
        for i, word in enumerate(args):
            if word == "-m":
                assert args[i + 1] in markers, f"{command.id}: no pytest marker {args[i + 1]!r}"
            elif not word.startswith("-") and (i == 0 or args[i - 1] != "-m"):
                assert (ROOT / word.split("::")[0]).exists(), f"{command.id}: {word} does not exist"
    else:  # python
        _check_script(args, command.id)


def load_pyproject() -> dict[str, Any]:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


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


def _workspace(where: Path) -> None:
    """What a clone has (the repository's entries, its .venv and node_modules), beside a training script and a plan."""
    for entry in ROOT.iterdir():
        if entry.name not in NOT_LINKED:
            (where / entry.name).symlink_to(entry)
    (where / "train.py").write_text("print('training')\n")
    (where / "plan.yaml").symlink_to(ROOT / "examples" / "plans" / "profiling_only.yaml")


def _shell_env(workspace: Path) -> dict[str, str]:
    """The environment of a workspace's shell blocks: the project's python first on PATH, and ``make`` using the
    linked .venv and node_modules as they are (never reinstalling them from here). GNU make takes ``-o FILE`` only
    as an argument (it ignores it in MAKEFLAGS), so a ``make`` first on PATH passes it."""
    real = shutil.which("make")
    assert real is not None, "make is not installed"
    shim = workspace / ".docs-bin"
    shim.mkdir(exist_ok=True)
    (shim / "make").write_text(f'#!/bin/sh\nexec {shlex.quote(real)} -o .venv/.stamp-install '
                               f'-o node_modules/.stamp-install "$@"\n')
    (shim / "make").chmod(0o755)
    return {**os.environ, "PATH": f"{shim}:{Path(sys.executable).parent}:{os.environ['PATH']}"}


def test_docs_workspace_make_never_reinstalls_the_linked_venv(tmp_path: Path) -> None:
    # A reinstall from the workspace runs pip in the repository's own .venv (linked) with the workspace's path,
    # so its console scripts (.venv/bin/smx-debug) point at a python under tmp_path, gone once the test passes.
    _workspace(tmp_path)
    planned = subprocess.run(["make", "-n", "-W", "pyproject.toml", "-W", "package.json", "install"], cwd=tmp_path,
                             env=_shell_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert planned.returncode == 0, planned.stderr
    assert "pip install" not in planned.stdout and "npm ci" not in planned.stdout, planned.stdout


@pytest.mark.parametrize("path", _runnable_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_runnable_blocks_run_on_the_local_aws(path: Path, local_aws: LocalAws, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from smx_debug import local

    local.install(local_aws)
    local_aws.client("s3").create_bucket(Bucket=OUTPUT_BUCKET,
                                         CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    _workspace(tmp_path)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__docs__",
                                 "role": local.execution_role(local_aws, "SageMakerExecution-docs")}
    with local_aws.environment():
        for block in [b for b in ALL if b.file == path and b.directive != "no-run"]:
            if block.directive == "local-aws":
                _prepare(local_aws, block, namespace)
            second = (_profiler_prefix(local_aws, namespace["job"])
                      if _SECOND_JOB_PLACEHOLDER in block.code and "job" in namespace else None)
            code = _fill(block.code, block, namespace.get("job"), second)
            if block.lang == "python":
                exec(compile(code, block.id, "exec"), namespace)  # the documentation's own code
            elif block.lang in {"bash", "sh", "shell"}:
                env = {**_shell_env(tmp_path), **local_aws.environ()}
                done = subprocess.run(["bash", "-e", "-c", code], env=env, capture_output=True, text=True, timeout=600)
                assert done.returncode == 0, f"{block.id}:\n{done.stdout}\n{done.stderr}"
    if path.name == "README.md":  # the notebook code launched a job whose rules settled and were read back
        assert namespace["summary"]["status"].notna().all() and len(namespace["stats"]) > 0


def _profiler_prefix(aws: LocalAws, job: str) -> str:
    """The ``s3://`` prefix of ``job``'s profiler output: the same data as ``job``, given as another run."""
    desc = aws.client("sagemaker").describe_training_job(TrainingJobName=job)
    return f"{desc['ProfilerConfig']['S3OutputPath'].rstrip('/')}/{job}/profiler-output"


def _prepare(aws: LocalAws, block: Block, namespace: dict[str, Any]) -> None:
    """What ``<!-- local-aws: ... -->`` asks SageMaker to have done for the namespace's ``job`` before the block."""
    from smx_debug.local.sagemaker import job_metrics
    from smx_debug.local.sagemaker.playback import JobPlayback

    job = namespace["job"]
    if block.argument == "play job":
        JobPlayback(aws, job, namespace["plan"], scenario="cpu_bottleneck", minutes=10, onset_min=2, speed=1e6).run()
    elif block.argument == "cloudwatch minutes":
        start = aws.client("sagemaker").describe_training_job(TrainingJobName=job)["CreationTime"]
        job_metrics.publish_minutes(aws, job, start=start, first=0, last=10,
                                    scenario=job_metrics.Scenario("cpu_bottleneck", onset=2))
    else:
        raise AssertionError(f"{block.id}: unknown directive local-aws: {block.argument!r}")
