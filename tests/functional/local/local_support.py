"""Helpers for the local AWS's own tests: cached clients and a training job as CreateTrainingJob makes it."""

from __future__ import annotations

from smx_debug.local.clients import client
from smx_debug.local.sagemaker.training_jobs import create_training_job as create_job

__all__ = ["client", "create_job"]
