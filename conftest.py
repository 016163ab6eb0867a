"""Fixtures shared by tests/ and experiments/tests: the demo model loads once per test session.

Tests never touch the network (pytest-socket is on in pyproject.toml) and the Hugging Face
hub is forced offline here.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tests.conftest import SMALL_SEARCH  # noqa: E402


@pytest.fixture(scope="session")
def demo_backend():
    """The bundled demo model behind the transformers backend (loaded once)."""
    from mfs_core import MFSEngine, MFSSettings

    return MFSEngine.from_settings(MFSSettings(device="cpu")).backend


@pytest.fixture(scope="session")
def demo_engine(demo_backend):
    """An engine over the shared demo backend with a small search (M=2, N=3)."""
    from mfs_core import MFSEngine, MFSSettings

    return MFSEngine.from_settings(MFSSettings(device="cpu", **SMALL_SEARCH))


@pytest.fixture(scope="session")
def smollm2_cache(tmp_path_factory):
    """The ``XDG_CACHE_HOME`` SmolLM2-135M-Instruct's packaged GGUF is converted into once per test session
    (:func:`tests.packaged_models.packaged_cache`), shared by its transformers and vLLM tests."""
    from tests.packaged_models import packaged_cache

    return packaged_cache(tmp_path_factory, "smollm2-cache")
