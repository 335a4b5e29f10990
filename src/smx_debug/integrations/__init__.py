"""One-line framework integrations: ``callbacks=[SmxDebugCallback()]``.

- Hugging Face: ``from smx_debug.integrations.transformers import SmxDebugCallback`` (a ``TrainerCallback``).
- Lightning: ``from smx_debug.integrations.lightning import SmxDebugCallback`` (a ``lightning.pytorch`` Callback).

Each module imports its framework; this package and :mod:`smx_debug.integrations.core` import none, and neither
framework is a dependency of smx-debug (docs/frameworks.md).
"""

from __future__ import annotations

__all__: list[str] = []
