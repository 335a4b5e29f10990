"""The one registry of rules: every list is derived from it, and a rule of our own is one file.

The end-to-end test copies the package, adds one rule module under ``smx_debug/rules/own/`` and nothing else, and
checks in a fresh interpreter that the rule is listed, planned, evaluated, reported and its state kept.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

import smx_debug
from smx_debug.cli._parser import RULE_FAMILIES, RULE_PROFILES
from smx_debug.errors import ConfigError
from smx_debug.rules import list_rules
from smx_debug.rules.definitions import RuleFamily
from smx_debug.rules.params import PROFILER_RULES, SCALAR_RULES, TENSOR_RULES
from smx_debug.rules.registry import PROFILES, define, find, rule_defs

PACKAGE = Path(smx_debug.__file__).resolve().parent

DESCRIPTION = "The mean absolute value of a weight rose above the limit (a rule of our own, in a test)."
ADVICE = "Lower the learning rate; this advice comes from the module of the rule."
OWN_RULE = textwrap.dedent(f'''
    """MeanAbsAbove: a rule of our own, added as one file."""

    from __future__ import annotations

    from dataclasses import dataclass
    from typing import Any

    from pydantic import BaseModel, ConfigDict, Field

    from smx_debug.rules.definitions import CollectionRequirement
    from smx_debug.rules.registry import define


    class Params(BaseModel):
        model_config = ConfigDict(frozen=True, extra="forbid")

        limit: float = Field(5.0, gt=0, description="mean |x| above which the rule fires")
        collection_names: str = Field("weights", description="collections it checks")


    @dataclass
    class MeanAbsPeak:
        tally: Any
        peak: float = 0.0


    class Evaluator:
        state_types = (MeanAbsPeak,)

        def start(self, params: Params, tally: Any) -> MeanAbsPeak:
            return MeanAbsPeak(tally)

        def update(self, state: MeanAbsPeak, batch: Any, params: Params, selection: Any) -> None:
            assert isinstance(params, Params)  # typed once, never a dict
            for name in selection.names:
                stat = batch.reduction(name, "abs_mean")
                if stat is None:
                    continue
                state.peak = max(state.peak, float(stat.values.max()))
                state.tally.add(stat, stat.values > params.limit, "mean |x| {{v:.3g}} > limit " + f"{{params.limit:g}}",
                                statistic="mean |x|", upper=params.limit)


    RULE = define(name="MeanAbsAbove", summary="A weight's mean absolute value is too large.", params=Params,
                  description={DESCRIPTION!r}, advice={ADVICE!r}, evaluates_on=("tensors",), evaluator=Evaluator(),
                  collections=(CollectionRequirement("weights", save_interval=100),))
''')

PROBE = textwrap.dedent('''
    import contextlib, io, json, sys
    from pathlib import Path

    import numpy as np

    work = Path(sys.argv[1])
    out = {}

    from smx_debug.cli import main

    def cli(*argv):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            code = main(list(argv))
        return code, buf.getvalue()

    code, text = cli("rules", "list", "--output", "json", "--family", "smx")
    out["listed"] = [(r["name"], r["family"], [p["name"] for p in r["parameters"]]) for r in json.loads(text)]

    from smx_debug.config import DebugPlan

    plan = DebugPlan(region="us-west-2", s3_output_path="s3://bucket/x", guard="evaluator",
                     rules=[{"name": "mean_abs_above", "parameters": {"limit": 5}}])
    out["watch_spec"] = [r.as_dict() for r in plan.watch_spec().rules]
    hook = plan.to_request_dict(job_name="j")["DebugHookConfig"]
    out["hooked"] = [c["CollectionName"] for c in hook["CollectionConfigurations"]]
    try:
        DebugPlan(region="us-west-2", s3_output_path="s3://bucket/x", rules=[{"name": "mean_abs_above"}])
    except Exception as exc:
        out["debugger_guard"] = str(exc)
    try:
        DebugPlan(region="us-west-2", s3_output_path="s3://bucket/x", guard="evaluator",
                  rules=[{"name": "mean_abs_above", "parameters": {"limit": -1}}])
    except Exception as exc:
        out["bad_limit"] = str(exc)

    from smx_debug.tensors import Collection, TrialWriter

    trial = work / "trial"
    with TrialWriter(str(trial)) as writer:
        writer.write_collections([Collection(name="weights", tensor_names=("fc.weight",))])
        for step in range(4):
            value = 1.0 if step < 2 else 9.0
            writer.write_step(step, mode="TRAIN", tensors={"fc.weight": np.full((3, 3), value, np.float32)})
        writer.training_end()
    code, text = cli("rules", "evaluate", str(trial), "--rule", "MeanAbsAbove", "--output", "json")
    out["evaluate"] = [code, json.loads(text)]

    code, _ = cli("report", str(trial), "--rule", "MeanAbsAbove", "--out", str(work / "report.html"))
    out["report"] = [code, (work / "report.html").read_text()]

    from smx_debug.evaluate.tensor_eval import TensorEvaluator
    from smx_debug.evaluate.tensor_state import load
    from smx_debug.tensors import create_trial

    ev = TensorEvaluator(create_trial(str(trial)), ["MeanAbsAbove"])
    ev.refresh()
    state = load(ev.snapshot(budget=100_000)).states["MeanAbsAbove"]
    out["state"] = [type(state).__name__, state.peak, state.tally.violations]
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def own_rule_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The package with one rule module added, probed in a fresh interpreter."""
    root = tmp_path_factory.mktemp("own_rule")
    copy = root / "src" / "smx_debug"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "rules" / "own" / "mean_abs_above.py").write_text(OWN_RULE)
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(root)], capture_output=True, text=True, env=env,
                          cwd=root, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def test_registry_own_rule_in_one_file_is_listed(own_rule_run: dict) -> None:
    listed = [r for r in own_rule_run["listed"] if r[0] == "MeanAbsAbove"]  # beside the rules of rules/own
    assert listed == [["MeanAbsAbove", "smx", ["limit", "collection_names"]]]


def test_registry_own_rule_in_one_file_is_planned(own_rule_run: dict) -> None:
    assert own_rule_run["watch_spec"] == [{"name": "MeanAbsAbove", "rule": "MeanAbsAbove",
                                           "parameters": {"limit": 5}}]
    assert "weights" in own_rule_run["hooked"]
    assert "smx-debug's own" in own_rule_run["debugger_guard"] and "guard" in own_rule_run["debugger_guard"]
    assert own_rule_run["bad_limit"] == "rules[0].parameters.limit: must be > 0 (got -1)"


def test_registry_own_rule_in_one_file_is_evaluated(own_rule_run: dict) -> None:
    code, results = own_rule_run["evaluate"]
    assert code == 0
    assert results["MeanAbsAbove"]["status"] == "IssuesFound"
    assert results["MeanAbsAbove"]["reason"].startswith("fc.weight at step 2: mean |x| 9 > limit 5;")
    assert results["MeanAbsAbove"]["RuleParameters"] == "limit:5.0\ncollection_names:weights"


def test_registry_own_rule_in_one_file_is_reported(own_rule_run: dict) -> None:
    code, html = own_rule_run["report"]
    assert code == 0
    assert DESCRIPTION in html and ADVICE in html  # the rule table's words come from the rule's module


def test_registry_own_rule_in_one_file_keeps_its_state(own_rule_run: dict) -> None:
    assert own_rule_run["state"] == ["MeanAbsPeak", 9.0, 2]


def test_registry_lists_are_derived_from_the_registry() -> None:
    assert tuple(d.name for d in rule_defs(kind="profiler") if "job" in d.evaluates_on) == PROFILER_RULES
    assert tuple(d.name for d in rule_defs(kind="debugger") if "job" in d.evaluates_on) == SCALAR_RULES
    assert tuple(d.name for d in rule_defs() if "tensors" in d.evaluates_on) == TENSOR_RULES
    assert [s.name for s in list_rules()] == [d.name for d in rule_defs()]


def test_registry_every_evaluated_rule_has_description_and_advice() -> None:
    for d in rule_defs():
        if d.evaluates_on:
            assert d.description.strip() and d.advice.strip(), d.name


def test_registry_cli_families_are_the_definitions() -> None:
    from typing import get_args

    assert get_args(RuleFamily) == RULE_FAMILIES


def test_registry_cli_profiles_are_the_registry_profiles_that_add_rules() -> None:
    assert tuple(p for p in PROFILES if p != "debugger") == RULE_PROFILES


def test_registry_builtin_params_model_is_typed_frozen_and_closed() -> None:
    model = find("exploding_tensor")
    assert model is not None
    params = model.params.model_validate({"only_nan": True})
    assert params.only_nan is True and params.tensor_regex is None  # type: ignore[attr-defined]
    with pytest.raises(ValidationError):
        model.params.model_validate({"only_nan": True, "typo": 1})
    with pytest.raises(ValidationError):
        params.only_nan = False  # type: ignore[misc]
    loss = find("LossNotDecreasing")
    assert loss is not None
    # a float parameter is a number as written (RuleParameters and messages show 1 as 1, as the plan wrote it),
    # never a string: the catalog's check (ParamSpec.check) is the model's
    assert type(loss.params.model_validate({"diff_percent": 1}).diff_percent) is int  # type: ignore[attr-defined]
    assert type(loss.params.model_validate({"diff_percent": 0.5}).diff_percent) is float  # type: ignore[attr-defined]
    with pytest.raises(ValidationError, match="expected float, got str"):
        loss.params.model_validate({"diff_percent": "1"})


class _Open(BaseModel):
    limit: float = Field(1.0, gt=0)


class _Closed(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    limit: float = Field(1.0, gt=0)


class _Impl:
    def update(self, state: object, batch: object, params: object, selection: object) -> None:
        return None


@pytest.mark.parametrize(
    ("name", "params", "evaluator", "field"),
    [
        ("ExplodingTensor", _Closed, _Impl(), "name"),
        ("exploding_tensor", _Closed, _Impl(), "name"),
        ("MyRule", _Open, _Impl(), "params"),
        ("MyRule", _Closed, None, "evaluator"),
    ],
)
def test_registry_define_refuses_a_bad_rule_naming_the_field(name: str, params: type[BaseModel], evaluator: object,
                                                            field: str) -> None:
    with pytest.raises(ConfigError) as info:
        define(name=name, summary="s", params=params, description="d", advice="a", evaluates_on=("tensors",),
               evaluator=evaluator)
    assert info.value.field == field
    assert find("MyRule") is None
