"""Run docs/frameworks.md's snippets and small scripts in a framework's side environment, and judge the trial.

transformers and lightning are never project dependencies: `make pytest` builds bench/.venv-transformers and
bench/.venv-lightning (bench/transformers_env.sh, bench/lightning_env.sh: torch's CPU wheel, the framework and this
working tree's wheel); a test whose environment is not built skips and says how to build it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from smx_debug.evaluate.tensor_eval import evaluate_trial

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "frameworks.md"
JUDGED = ("ExplodingTensor", "WeightUpdateRatio")  # the rules a framework test judges its trial with
_BLOCK = re.compile(r"<!-- no-run: runs in the (?P<env>\w+) side environment[^>]*-->\n```python\n(?P<code>.*?)^```",
                    re.S | re.M)


def docs_snippet(env: str) -> str:
    """The docs/frameworks.md block marked to run in ``env``'s side environment."""
    (code,) = [m.group("code") for m in _BLOCK.finditer(DOCS.read_text()) if m.group("env") == env]
    return code


def side_python(env: str) -> Path:
    """The side environment's python, its wheel refreshed from this tree (skips when the env is not built)."""
    env_dir = ROOT / "bench" / f".venv-{env}"
    script = ROOT / "bench" / f"{env}_env.sh"
    if not (env_dir / ".ready-framework").exists():
        pytest.skip(f"the {env} side environment bench/.venv-{env} is not built: `make {env}-env` builds it "
                    f"({script.relative_to(ROOT)}; about 4 minutes from PyPI)")
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, f"{script.name} could not install this tree's wheel:\n{done.stderr[-3000:]}"
    return env_dir / "bin" / "python"


def side_python_fixture(env: str) -> Any:
    """A module-scoped ``python`` fixture: the side environment ``env``'s python (``side_python``)."""

    @pytest.fixture(scope="module")
    def python() -> Path:
        return side_python(env)

    return python


def run(python: Path, code: str, cwd: Path, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as a script in ``cwd`` with the side python (no AWS, no SageMaker job)."""
    script = cwd / "script.py"
    script.write_text(code)
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("PYTHON", "TRAINING_JOB", "SMDEBUG", "SM_", "AWS_"))}
    base.update(HOME=str(cwd), TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", **(env or {}))
    return subprocess.run([str(python), str(script)], capture_output=True, text=True, cwd=cwd, env=base,
                          timeout=600, check=False)


def run_snippet_with_lr(python: Path, env: str, healthy_lr: str, lr: str, cwd: Path) -> None:
    """Run ``env``'s docs snippet with its learning-rate line ``healthy_lr`` (which it must have) set to ``lr``;
    the script must succeed."""
    code = docs_snippet(env)
    assert healthy_lr in code
    done = run(python, code.replace(healthy_lr, lr), cwd)
    assert done.returncode == 0, done.stderr[-3000:]


def flagged(trial: Path, *rules: str) -> dict[str, bool]:
    """Whether each rule fires on a written trial (``smx_debug.evaluate.tensor_eval.evaluate_trial``, what
    ``smx-debug rules evaluate TRIAL`` runs); a rule without data fails the test (it judged nothing)."""
    results = evaluate_trial(str(trial), list(rules))
    assert all(r.datapoints > 0 for r in results.values()), {n: r.message for n, r in results.items()}
    return {name: r.rule_triggered > 0 for name, r in results.items()}
