"""Every rule smx-debug evaluates says, in the report, what it checks and what to do when it fired."""

from __future__ import annotations

import pytest

from smx_debug.htmlreport.advice import ADVICE, DESCRIPTION
from smx_debug.rules.params import PROFILER_RULES, SCALAR_RULES, TENSOR_RULES

EVALUATED = sorted(set(PROFILER_RULES) | set(SCALAR_RULES) | set(TENSOR_RULES))


@pytest.mark.parametrize("rule", EVALUATED)
def test_every_evaluated_rule_has_a_description_and_advice(rule):
    assert DESCRIPTION.get(rule, "").strip(), f"{rule}: the report's rule table would show no description"
    assert ADVICE.get(rule, "").strip(), f"{rule}: a fired {rule} would show an empty 'What to do'"


def test_advice_names_no_rule_we_do_not_evaluate():
    assert set(ADVICE) <= set(EVALUATED) and set(DESCRIPTION) <= set(EVALUATED)
