"""The data layer: every reader of what Debugger, SageMaker and CloudWatch write, and the frames
(schemas) they fill. Its face for people is :mod:`smx_debug.reports`; nothing is exported here.
"""

from __future__ import annotations

__all__: list[str] = []
