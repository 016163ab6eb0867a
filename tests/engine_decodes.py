"""The search and the questions the engine tests decode the synthetic models with, and how they compare results.

``SETTINGS`` is a small MFS search on raw prompts (M = 2, N = 3, at most 6 steps, no width pruning);
``QUESTIONS`` are eight questions that :func:`tests.scripted.synthetic_model` takes different numbers
of steps on, so their decodes end at different rounds; :func:`comparable` is a result without the one
field that varies run to run.
"""

from __future__ import annotations

from mfs_core import MFSSettings
from mfs_core.types import DecodeResult

__all__ = ["QUESTIONS", "SETTINGS", "comparable"]

QUESTIONS = [f"question {i}: how many?" for i in range(8)]
SETTINGS = MFSSettings(prompt_format="raw", step_beam_size=2, num_rollouts=3, max_steps=6, prune_lambda=0.0)


def comparable(result: DecodeResult) -> dict:
    """``result`` as a dict without its wall time (the only field that varies run to run)."""
    data = result.to_dict()
    data.pop("wall_seconds")
    return data
