"""Unit tests of :class:`llamaindex_mfs.MFSLLM` on a scripted backend (no model is loaded).

The scripted backend answers every request with the rest of one fixed solution after the
part already in the prompt, so a decode is short, deterministic and its token counts can be
recomputed here from the requests the backend received.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pydantic
import pytest
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, MessageRole, TextBlock
from llama_index.core.llms.custom import CustomLLM

import llamaindex_mfs
from llamaindex_mfs import MFSLLM
from llamaindex_mfs import base as llamaindex_base
from mfs_core.call import ADAPTER_FIELDS
from mfs_core.call import stream_chunks
from mfs_core.engine import MFSEngine
from mfs_core.settings import DEMO_ASSISTANT_PREFIX, DEMO_MODEL, MFSSettings
from mfs_core.types import Continuation, DecodeResult, GenerationRequest
from tests.scripted import ScriptedBackend, continuation

PREFIX = DEMO_ASSISTANT_PREFIX
SOLUTION = "3 + 4 = 7\nThe answer is: \\boxed{7}.<end_of_reasoning>"
ANSWER_TEXT = "3 + 4 = 7\nThe answer is: \\boxed{7}."
QUESTION = "Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?"


def solve(request: GenerationRequest) -> list[Continuation]:
    """The rest of :data:`SOLUTION` after the prompt's assistant prefix, cut at a stop string."""
    done = request.prompt.rsplit(PREFIX, 1)[-1]
    rest = SOLUTION[len(done) :] if SOLUTION.startswith(done) else SOLUTION
    hits = [(rest.find(stop), stop) for stop in request.stop if stop in rest]
    if hits:
        cut, stop = min(hits)
        cont = continuation(rest[:cut], mean_logprob=-0.1, finish_reason="stop", stop_reason=stop)
    else:
        cont = continuation(rest, mean_logprob=-0.1, finish_reason="eos")
    return [cont] * request.n


def make_engine(backend: ScriptedBackend, **settings: object) -> MFSEngine:
    return MFSEngine(backend, MFSSettings(**{"step_beam_size": 2, "num_rollouts": 2, "max_steps": 3, **settings}))


@pytest.fixture
def backend() -> ScriptedBackend:
    return ScriptedBackend(solve, context_window=1024, model_name=DEMO_MODEL)


@pytest.fixture
def llm(backend: ScriptedBackend) -> MFSLLM:
    return MFSLLM(engine=make_engine(backend))


def chat_prompt(*turns: tuple[str, str]) -> str:
    """The scripted template's rendering of ``turns`` plus the assistant prefix."""
    return "<s>" + "".join(f"<|{role}|>\n{text}\n" for role, text in turns) + "<|assistant|>\n" + PREFIX


# --- construction and settings ------------------------------------------------------------
def test_exports() -> None:
    assert llamaindex_mfs.__all__ == ["MFSLLM"]
    assert llamaindex_base.__all__ == ["MFSLLM"]
    assert llamaindex_mfs.MFSLLM is llamaindex_base.MFSLLM
    assert MFSLLM.class_name() == "MFSLLM"


def test_every_flat_setting_is_an_optional_field_with_its_description() -> None:
    for name in ADAPTER_FIELDS:
        setting, field = MFSSettings.model_fields[name], MFSLLM.model_fields[name]
        assert field.default is None, name
        assert setting.description in field.description, name
        assert f"MFS_{name.upper()}" in field.description, name
    own = set(MFSLLM.model_fields) - set(CustomLLM.model_fields) | {"system_prompt"}
    assert own == set(ADAPTER_FIELDS) | {"engine", "method", "timeout", "model_kwargs"}
    for name in own:
        assert MFSLLM.model_fields[name].description, name


def test_fields_left_none_come_from_the_injected_engine(backend: ScriptedBackend) -> None:
    engine = make_engine(backend, seed=5)
    llm = MFSLLM(engine=engine, num_rollouts=3)
    assert llm.engine is engine
    assert (llm.settings.num_rollouts, llm.settings.step_beam_size, llm.settings.seed) == (3, 2, 5)
    assert engine.settings.num_rollouts == 2
    assert llm.num_rollouts == 3 and llm.step_beam_size is None


def test_a_bad_setting_names_the_field(backend: ScriptedBackend) -> None:
    with pytest.raises(pydantic.ValidationError, match="step_beam_size"):
        MFSLLM(engine=make_engine(backend), step_beam_size=0)
    with pytest.raises(pydantic.ValidationError, match="min_steps"):
        MFSLLM(engine=make_engine(backend), model_kwargs={"min_steps": 9})  # > max_steps = 3


def test_an_unknown_method_is_refused(backend: ScriptedBackend) -> None:
    with pytest.raises(ValueError, match="'beam-me-up'"):
        MFSLLM(engine=make_engine(backend), method="beam-me-up")


def test_serialisation_leaves_the_engine_out(llm: MFSLLM) -> None:
    data = llm.to_dict()
    assert "engine" not in data
    assert data["class_name"] == "MFSLLM"
    assert data["step_beam_size"] is None and data["method"] == "mfs"


# --- metadata ---------------------------------------------------------------------------------
def test_metadata_comes_from_the_loaded_model_and_settings(backend: ScriptedBackend) -> None:
    llm = MFSLLM(engine=make_engine(backend), max_answer_tokens=40)
    metadata = llm.metadata
    assert metadata.context_window == 1024
    assert metadata.model_name == DEMO_MODEL
    assert metadata.num_output == 40
    assert metadata.is_chat_model is True
    assert metadata.is_function_calling_model is False
    assert MFSLLM(engine=make_engine(backend)).metadata.num_output == 512  # the settings default
    assert backend.calls == []  # reading metadata samples nothing


def test_is_chat_model_follows_the_prompt_format(backend: ScriptedBackend) -> None:
    assert MFSLLM(engine=make_engine(backend), model_kwargs={"prompt_format": "raw"}).metadata.is_chat_model is False
    assert MFSLLM(engine=make_engine(backend), model_kwargs={"prompt_format": "chat"}).metadata.is_chat_model is True
    no_template = ScriptedBackend(solve, chat_template=None)
    assert MFSLLM(engine=make_engine(no_template)).metadata.is_chat_model is False


# --- complete ------------------------------------------------------------------------------
def test_complete_returns_the_decode_with_usage_and_metadata(llm: MFSLLM, backend: ScriptedBackend) -> None:
    response = llm.complete(QUESTION)
    assert response.text == ANSWER_TEXT
    assert response.delta is None
    requests = backend.requests
    assert requests[0].prompt == chat_prompt(("user", QUESTION))
    assert requests[0].n == 4  # M * N candidates at step 0
    prompt_tokens = sum(backend.count_tokens(r.prompt) for r in requests)
    completion_tokens = sum(c.num_tokens for r in requests for c in solve(r))
    assert response.raw["usage"] == {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    result = response.raw["result"]
    assert isinstance(result, DecodeResult)
    assert (result.prompt_tokens, result.output_tokens) == (prompt_tokens, completion_tokens)
    extra = response.additional_kwargs
    assert (extra["answer"], extra["vote_share"], extra["method"]) == ("7", 1.0, "mfs")
    assert len(extra["trace"]) == extra["num_steps"] == len(result.steps) >= 1
    assert extra["flops"] == 6.0 * completion_tokens * backend.num_parameters


def test_complete_renders_the_system_prompt_as_a_system_message(backend: ScriptedBackend) -> None:
    llm = MFSLLM(engine=make_engine(backend), system_prompt="Answer briefly.")
    assert llm.complete(QUESTION).text == ANSWER_TEXT
    assert backend.requests[0].prompt == chat_prompt(("system", "Answer briefly."), ("user", QUESTION))


def test_raw_format_sends_the_prompt_verbatim(backend: ScriptedBackend) -> None:
    llm = MFSLLM(engine=make_engine(backend), model_kwargs={"prompt_format": "raw"}, system_prompt="ignored in raw")
    prompt = f"Question: {QUESTION}\nAnswer: {PREFIX}"
    assert llm.complete(prompt).text == ANSWER_TEXT
    assert backend.requests[0].prompt == prompt


def test_completion_to_prompt_applies_unless_formatted(backend: ScriptedBackend) -> None:
    llm = MFSLLM(engine=make_engine(backend), completion_to_prompt=lambda p: f"Q: {p}")
    llm.complete(QUESTION)
    assert backend.requests[0].prompt == chat_prompt(("user", f"Q: {QUESTION}"))
    backend.calls.clear()
    llm.complete(QUESTION, formatted=True)
    assert backend.requests[0].prompt == chat_prompt(("user", QUESTION))


def test_per_call_settings_change_only_that_call(llm: MFSLLM, backend: ScriptedBackend) -> None:
    llm.complete(QUESTION, step_beam_size=3, seed=7)
    assert backend.requests[0].n == 3 * 2
    backend.calls.clear()
    llm.complete(QUESTION)
    assert backend.requests[0].n == 2 * 2
    assert llm.step_beam_size is None and llm.settings.step_beam_size == 2


def test_an_unknown_keyword_is_refused_before_decoding(llm: MFSLLM, backend: ScriptedBackend) -> None:
    with pytest.raises(TypeError, match="max_new_tokens"):
        llm.complete(QUESTION, max_new_tokens=5)
    assert backend.calls == []


def test_stop_cuts_the_text_not_the_answer(llm: MFSLLM) -> None:
    response = llm.complete(QUESTION, stop=["="])
    assert response.text == "3 + 4 "
    assert response.additional_kwargs["answer"] == "7"


def test_stream_complete_deltas_join_to_the_text(llm: MFSLLM) -> None:
    chunks = list(llm.stream_complete(QUESTION))
    assert [c.delta for c in chunks] == list(stream_chunks(ANSWER_TEXT))
    cumulative = ""
    for chunk in chunks:
        cumulative += chunk.delta
        assert chunk.text == cumulative
        assert chunk.additional_kwargs["answer"] == "7"
    assert chunks[-1].text == llm.complete(QUESTION).text
    assert chunks[-1].raw["usage"] == llm.complete(QUESTION).raw["usage"]


def test_an_empty_answer_streams_one_empty_chunk(backend: ScriptedBackend) -> None:
    empty = ScriptedBackend(lambda r: [continuation("", finish_reason="eos", num_tokens=1)] * r.n)
    llm = MFSLLM(engine=make_engine(empty))
    chunks = list(llm.stream_complete(QUESTION))
    assert [(c.text, c.delta) for c in chunks] == [("", "")]
    assert chunks[0].raw["usage"]["completion_tokens"] == 4  # M * N one-token candidates


# --- chat ----------------------------------------------------------------------------------
def test_chat_renders_the_conversation_through_the_template(llm: MFSLLM, backend: ScriptedBackend) -> None:
    messages = [
        ChatMessage(role=MessageRole.SYSTEM, content="Be exact."),
        ChatMessage(role=MessageRole.USER, content="Ann has 2 pens. How many pens does Ann have?"),
        ChatMessage(role=MessageRole.ASSISTANT, content="The answer is: \\boxed{2}."),
        ChatMessage(role=MessageRole.USER, content=QUESTION),
    ]
    response = llm.chat(messages)
    assert response.message.role == MessageRole.ASSISTANT
    assert response.message.content == ANSWER_TEXT
    assert response.additional_kwargs["answer"] == "7"
    assert response.raw["usage"]["completion_tokens"] == response.raw["result"].output_tokens
    assert backend.requests[0].prompt == chat_prompt(
        ("system", "Be exact."),
        ("user", "Ann has 2 pens. How many pens does Ann have?"),
        ("assistant", "The answer is: \\boxed{2}."),
        ("user", QUESTION),
    )


def test_chat_maps_roles_to_the_template_roles(llm: MFSLLM, backend: ScriptedBackend) -> None:
    llm.chat([
        ChatMessage(role=MessageRole.DEVELOPER, content="Be exact."),
        ChatMessage(role=MessageRole.TOOL, content="7", additional_kwargs={"name": "calculator"}),
        ChatMessage(role=MessageRole.USER, content=QUESTION),
    ])
    assert backend.requests[0].prompt == chat_prompt(
        ("system", "Be exact."), ("user", "Tool result (calculator): 7"), ("user", QUESTION)
    )


def test_chat_refuses_non_text_content(llm: MFSLLM, backend: ScriptedBackend) -> None:
    message = ChatMessage(role=MessageRole.USER, blocks=[TextBlock(text="Look:"), ImageBlock(image=b"GIF89a")])
    with pytest.raises(ValueError, match="message 0 .*'image'"):
        llm.chat([message])
    assert backend.calls == []


def test_chat_in_raw_format_joins_messages_with_messages_to_prompt(backend: ScriptedBackend) -> None:
    def join(messages: Sequence[ChatMessage]) -> str:
        return "\n".join(f"{m.role.value}: {m.content}" for m in messages) + "\n" + PREFIX

    llm = MFSLLM(engine=make_engine(backend), model_kwargs={"prompt_format": "raw"}, messages_to_prompt=join)
    response = llm.chat([ChatMessage(role=MessageRole.USER, content=QUESTION)])
    assert response.message.content == ANSWER_TEXT
    assert backend.requests[0].prompt == f"user: {QUESTION}\n{PREFIX}"


def test_stream_chat_deltas_join_to_the_message(llm: MFSLLM) -> None:
    chunks = list(llm.stream_chat([ChatMessage(role=MessageRole.USER, content=QUESTION)]))
    assert "".join(c.delta for c in chunks) == chunks[-1].message.content == ANSWER_TEXT
    assert all(c.message.role == MessageRole.ASSISTANT for c in chunks)


# --- async ---------------------------------------------------------------------------------
async def test_async_entry_points_match_the_sync_ones(llm: MFSLLM) -> None:
    messages = [ChatMessage(role=MessageRole.USER, content=QUESTION)]
    assert (await llm.acomplete(QUESTION)).text == ANSWER_TEXT
    assert (await llm.achat(messages)).message.content == ANSWER_TEXT
    deltas = [c.delta async for c in await llm.astream_complete(QUESTION)]
    assert deltas == list(stream_chunks(ANSWER_TEXT))
    chat_chunks = [c async for c in await llm.astream_chat(messages)]
    answer = [c for c in chat_chunks if "thinking_delta" not in c.additional_kwargs]
    assert [c.delta for c in answer] == deltas
    # Before the answer, the search: one thinking chunk per step and one at the stop.
    thinking = chat_chunks[: len(chat_chunks) - len(answer)]
    assert [c.delta for c in thinking] == [""] * len(thinking) and len(thinking) >= 2
    assert thinking[-1].additional_kwargs["thinking_delta"].startswith("[stop: ")


class _GatedBackend(ScriptedBackend):
    """Samples only once ``gate`` is set; fails after ``timeout`` seconds without it."""

    def __init__(self, gate: threading.Event, timeout: float = 10.0) -> None:
        super().__init__(solve)
        self.gate, self.timeout = gate, timeout

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        if not self.gate.wait(self.timeout):
            msg = "the event loop did not run while the decode waited for it"
            raise TimeoutError(msg)
        return super().generate(requests)


async def _consume(output: object) -> str:
    """The final text of an awaited async entry point's output (a response or a stream)."""
    if hasattr(output, "__aiter__"):
        chunks = [chunk async for chunk in output]  # type: ignore[attr-defined]
        output = chunks[-1]
    return output.message.content if hasattr(output, "message") else output.text  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["acomplete", "astream_complete", "achat", "astream_chat"])
async def test_async_calls_leave_the_event_loop_free(name: str) -> None:
    # The model may sample only after this coroutine, on the event loop, opens the gate:
    # an entry point that blocked the loop until its decode finished would never let it.
    gate = threading.Event()
    llm = MFSLLM(engine=make_engine(_GatedBackend(gate)))
    argument: object = [ChatMessage(role=MessageRole.USER, content=QUESTION)] if "chat" in name else QUESTION
    task = asyncio.ensure_future(getattr(llm, name)(argument))
    await asyncio.sleep(0)  # the call starts and suspends
    gate.set()
    assert await _consume(await task) == ANSWER_TEXT


def test_bad_prompts_and_stops_fail_before_decoding(llm: MFSLLM, backend: ScriptedBackend) -> None:
    with pytest.raises(TypeError, match="must be a string"):
        llm.complete(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty or whitespace"):
        llm.complete("   ")
    with pytest.raises(TypeError, match="list of strings"):
        llm.complete(QUESTION, stop="\n")
    with pytest.raises(pydantic.ValidationError, match="num_rollouts"):
        llm.complete(QUESTION, num_rollouts=0)
    assert backend.calls == []
