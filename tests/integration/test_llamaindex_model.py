"""``MFSLLM`` on the bundled demo model: metadata, rendering, settings, sharing and async.

Mechanics only (no answer is asserted), so the tests hold for the stand-in checkpoint and
for the trained demo model alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from llamaindex_mfs import MFSLLM
from mfs_core.call import adapter_arguments
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import Continuation, GenerationRequest

SMALL = {"step_beam_size": 2, "num_rollouts": 2, "max_steps": 1, "max_step_tokens": 8, "max_answer_tokens": 16, "seed": 0}
QUESTION = "Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?"
RENDERED = f"<s><|user|>\n{QUESTION}\n<|assistant|>\nThe reasoning steps are:\n\n"
"""The demo model's chat template with the question as the single user message, plus the assistant prefix."""


@pytest.fixture
def llm() -> MFSLLM:
    return MFSLLM(**adapter_arguments(SMALL))


@pytest.fixture
def prompts(llm: MFSLLM, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The prompt of every request the loaded backend receives during the test."""
    backend = llm.engine.backend
    seen: list[str] = []
    generate = backend.generate

    def recording(requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        seen.extend(request.prompt for request in requests)
        return generate(requests)

    monkeypatch.setattr(backend, "generate", recording)
    return seen


def test_metadata_reads_the_loaded_model(llm: MFSLLM) -> None:
    config = llm.engine.backend.model.config
    metadata = llm.metadata
    assert metadata.context_window == config.max_position_embeddings
    assert metadata.model_name == "mfs-demo"
    assert metadata.num_output == SMALL["max_answer_tokens"]
    assert metadata.is_chat_model is True  # the demo tokenizer has a chat template


def test_complete_and_chat_render_the_same_chat_prompt(llm: MFSLLM, prompts: list[str]) -> None:
    llm.complete(QUESTION)
    first_complete = prompts[0]
    prompts.clear()
    llm.chat([ChatMessage(role=MessageRole.USER, content=QUESTION)])
    assert first_complete == prompts[0] == RENDERED == llm.engine.render(QUESTION)


def test_raw_format_sends_the_prompt_as_is(prompts: list[str], llm: MFSLLM) -> None:
    raw = MFSLLM(**adapter_arguments({**SMALL, "prompt_format": "raw"}))
    assert raw.engine.backend is llm.engine.backend
    assert raw.metadata.is_chat_model is False
    raw.complete(RENDERED)
    assert prompts[0] == RENDERED


def test_equal_backend_settings_share_one_model(llm: MFSLLM) -> None:
    other = MFSLLM(step_beam_size=3, num_rollouts=1, seed=9)
    engine = MFSEngine.from_settings(MFSSettings(step_beam_size=4))
    assert other.engine.backend is llm.engine.backend is engine.backend
    assert other.engine.stats is engine.stats  # one scheduler: their requests batch together


def test_injected_engine_is_used(llm: MFSLLM) -> None:
    engine = MFSEngine.from_settings(MFSSettings(num_rollouts=3, seed=4))
    injected = MFSLLM(engine=engine, step_beam_size=2)
    assert injected.engine is engine
    assert (injected.settings.num_rollouts, injected.settings.seed, injected.settings.step_beam_size) == (3, 4, 2)


def test_environment_fills_unset_fields(monkeypatch: pytest.MonkeyPatch, llm: MFSLLM) -> None:
    monkeypatch.setenv("MFS_NUM_ROLLOUTS", "3")
    monkeypatch.setenv("MFS_SEED", "17")
    from_env = MFSLLM(step_beam_size=2)
    assert (from_env.settings.num_rollouts, from_env.settings.seed, from_env.settings.step_beam_size) == (3, 17, 2)
    assert from_env.engine.backend is llm.engine.backend


async def test_sync_stream_and_async_agree_for_one_seed(llm: MFSLLM) -> None:
    sync = llm.complete(QUESTION)
    streamed = "".join(chunk.delta for chunk in llm.stream_complete(QUESTION))
    asynchronous = await llm.acomplete(QUESTION)
    assert streamed == sync.text == asynchronous.text
    assert asynchronous.raw["usage"] == sync.raw["usage"]
    assert sync.raw["usage"]["completion_tokens"] == sync.raw["result"].output_tokens > 0


async def test_concurrent_async_calls_all_complete(llm: MFSLLM) -> None:
    decodes = llm.engine.stats.decodes
    responses = await asyncio.gather(*(llm.acomplete(QUESTION, seed=seed) for seed in range(3)))
    assert len(responses) == 3
    assert llm.engine.stats.decodes == decodes + 3
    assert all(r.raw["usage"]["completion_tokens"] > 0 for r in responses)
