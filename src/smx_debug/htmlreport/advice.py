"""What each rule checks and what to do when it fires (shown in the report's rule table), derived from the rule
registry (:mod:`smx_debug.rules.registry`: each rule carries its description and advice)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from smx_debug.rules.registry import rule_defs

DESCRIPTION: Final[Mapping[str, str]] = {d.name: d.description for d in rule_defs() if d.description}
ADVICE: Final[Mapping[str, str]] = {d.name: d.advice for d in rule_defs() if d.advice}
