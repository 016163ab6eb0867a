"""A finished MFS decode with several steps of search, for the tests of the trace views (HTML page, plot).

:func:`searched` decodes "question 3?" on :func:`tests.three_step_model.synthetic_model` with the
engine tests' ``SETTINGS`` and early stopping off, so its trace has candidates, pruned and selected
ones, over several steps.
"""

from __future__ import annotations

from mfs_core import MFSEngine
from mfs_core.types import DecodeResult
from tests.engine_decodes import SETTINGS
from tests.three_step_model import synthetic_model

__all__ = ["searched"]


def searched() -> DecodeResult:
    """A several-step MFS decode on the scripted model."""
    return MFSEngine(synthetic_model(), SETTINGS.model_copy(update={"early_stopping": False})).decode(["question 3?"])[0]
