"""``ChatMFS``: LangChain's standard unit tests, and its rendering, metadata, streaming and
bad input on a scripted backend. No model is loaded."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_tests.integration_tests import ChatModelIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests

from langchain_mfs import ChatMFS
from langchain_mfs.chat_models import to_chat_dicts
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import Continuation, GenerationRequest
from tests.scripted import ScriptedBackend, continuation, hermes_template

ANSWER = "2 + 2 = 4\nThe answer is: \\boxed{4}."
SETTINGS = MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2)


class TestChatMFSStandard(ChatModelUnitTests):
    """LangChain's standard unit tests (``langchain_tests.unit_tests.ChatModelUnitTests``)."""

    @property
    def chat_model_class(self) -> type[ChatMFS]:
        return ChatMFS

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"step_beam_size": 2, "num_rollouts": 2, "max_steps": 2}

    @property
    def standard_chat_model_params(self) -> dict[str, Any]:
        # The suite's defaults add temperature=0, api_key and max_retries. MFS samples, so
        # temperature must be > 0 (MFSSettings rejects 0; reproducibility comes from `seed`);
        # a local model has no API key and no remote call to retry. ChatMFS rejects unknown
        # fields rather than ignoring them, so those three are left out here.
        return {"max_tokens": 100, "timeout": 60, "stop": []}

    @property
    def init_from_env_params(self) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        return (
            {"MFS_STEP_BEAM_SIZE": "3", "MFS_MODEL": "/models/a-local-model", "MFS_TEMPERATURE": "0.5"},
            {"num_rollouts": 2},
            {"step_beam_size": 3, "model": "/models/a-local-model", "temperature": 0.5, "num_rollouts": 2},
        )

    # The demo model's chat template does not render tools: bind_tools raises
    # ToolsNotSupportedError on it, and the default structured output is function calling.
    # TestChatMFSStandardWithToolTemplate runs these tests on a template that renders tools.
    @property
    def has_tool_calling(self) -> bool:
        return False

    @property
    def has_structured_output(self) -> bool:
        return False

    @property
    def supports_model_override(self) -> bool:
        return True


class TestChatMFSStandardWithToolTemplate(TestChatMFSStandard):
    """The standard unit tests again, on a scripted model whose template renders tools:
    ``bind_tools`` (every tool form, ``tool_choice="any"``) and ``with_structured_output``
    (pydantic, TypedDict and JSON schemas; ``function_calling``, ``json_schema``, ``json_mode``;
    ``strict`` None / False / True) build."""

    @property
    def chat_model_params(self) -> dict[str, Any]:
        backend = ScriptedBackend(answer_script, chat_template=hermes_template)
        return {"engine": MFSEngine(backend, SETTINGS)}

    @property
    def init_from_env_params(self) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        return ({}, {}, {})  # an injected engine's settings fill the fields, not MFS_* variables

    @property
    def has_tool_calling(self) -> bool:
        return True

    @property
    def has_structured_output(self) -> bool:
        return True


def answer_script(request: GenerationRequest) -> list[Continuation]:
    """Every candidate step is the whole answer, ended by EOS: a decode takes one round."""
    return [continuation(ANSWER, mean_logprob=-0.3, finish_reason="eos")] * request.n


class TestChatMFSStandardOnAScriptedBackend(ChatModelIntegrationTests):
    """LangChain's standard integration tests on a scripted backend.

    The LangChain side (invoke, stream and stream events v3, batch, usage, stop, message
    histories) checked in a second, independent of what a checkpoint generates; the same
    suite runs on the demo model in ``tests/integration/test_langchain_standard.py``.
    """

    @property
    def chat_model_class(self) -> type[ChatMFS]:
        return ChatMFS

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"engine": MFSEngine(ScriptedBackend(answer_script), SETTINGS)}

    @property
    def supports_model_override(self) -> bool:
        # A per-call `model` loads that model; tested on the demo model (integration suite).
        return False

    # The scripted template has the demo model's shape, which does not render tools.
    @property
    def has_tool_calling(self) -> bool:
        return False

    @property
    def has_structured_output(self) -> bool:
        return False


@pytest.fixture
def backend() -> ScriptedBackend:
    return ScriptedBackend(answer_script)


@pytest.fixture
def chat(backend: ScriptedBackend) -> ChatMFS:
    return ChatMFS(engine=MFSEngine(backend, SETTINGS))


# --- rendering ----------------------------------------------------------------------------------
def test_messages_render_with_the_chat_template(chat: ChatMFS, backend: ScriptedBackend) -> None:
    chat.invoke([SystemMessage("Be brief."), HumanMessage("What is 2 + 2?")])
    assert backend.calls[0][0].prompt == (
        "<s><|system|>\nBe brief.\n<|user|>\nWhat is 2 + 2?\n<|assistant|>\nThe reasoning steps are:\n\n"
    )


def test_roles_tool_calls_and_text_blocks_map_to_template_messages() -> None:
    messages = [
        SystemMessage("Be brief."),
        HumanMessage([{"type": "text", "text": "What is "}, "2 + 2?"], name="ann"),
        AIMessage("", tool_calls=[{"name": "add", "args": {"b": 2, "a": 2}, "id": "c1"}]),
        ToolMessage("4", tool_call_id="c1", name="add"),
        FunctionMessage("4", name="add"),
        AIMessage([{"type": "reasoning", "reasoning": "hidden"}, {"type": "text", "text": "It is 4."}]),
        ChatMessage("Thanks.", role="user"),
    ]
    assert to_chat_dicts(messages) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "add", "arguments": {"b": 2, "a": 2}, "id": "c1"}]},
        {"role": "tool", "content": "4", "name": "add", "tool_call_id": "c1"},
        {"role": "tool", "content": "4", "name": "add"},
        {"role": "assistant", "content": "It is 4."},
        {"role": "user", "content": "Thanks."},
    ]


def test_tool_turns_render_as_text_where_the_template_has_no_tools(chat: ChatMFS, backend: ScriptedBackend) -> None:
    chat.invoke([
        HumanMessage("What is 2 + 2?"),
        AIMessage("", tool_calls=[{"name": "add", "args": {"b": 2, "a": 2}, "id": "c1"}]),
        ToolMessage("4", tool_call_id="c1"),  # no name: taken from the call it answers
    ])
    assert backend.calls[0][0].prompt == (
        "<s><|user|>\nWhat is 2 + 2?\n<|assistant|>\nCalled tool add with {\"a\": 2, \"b\": 2}\n"
        "<|user|>\nTool result (add): 4\n<|assistant|>\nThe reasoning steps are:\n\n"
    )


@pytest.mark.parametrize(
    "message",
    [
        HumanMessage([{"type": "image", "base64": "AAAA", "mime_type": "image/png"}]),
        HumanMessage([{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]),
        HumanMessage([{"type": "reasoning", "reasoning": "a user does not send reasoning"}]),
    ],
)
def test_non_text_content_is_a_clear_error(chat: ChatMFS, backend: ScriptedBackend, message: HumanMessage) -> None:
    with pytest.raises(ValueError, match=r"ChatMFS renders text only: message 1 \(human\) holds a '\w+' content block"):
        chat.invoke([SystemMessage("Be brief."), message])
    assert backend.num_calls == 0


def test_unknown_role_and_empty_conversation(chat: ChatMFS) -> None:
    with pytest.raises(ValueError, match="unknown chat role 'critic'"):
        chat.invoke([ChatMessage("Hm.", role="critic")])
    with pytest.raises(ValueError, match="the messages hold no text"):
        chat.invoke([HumanMessage("   ")])
    with pytest.raises(ValueError, match="the messages hold no text"):
        chat.invoke([])


def test_a_bad_conversation_in_a_batch_fails_alone(chat: ChatMFS) -> None:
    image = HumanMessage([{"type": "image", "base64": "AAAA", "mime_type": "image/png"}])
    results = chat.batch(["What is 2 + 2?", [image], "   ", "And 3 + 1?"], return_exceptions=True)
    assert [type(result).__name__ for result in results] == ["AIMessage", "ValueError", "ValueError", "AIMessage"]
    assert results[0].content == results[3].content == ANSWER


# --- results ------------------------------------------------------------------------------------
def test_ai_message_has_usage_and_metadata(chat: ChatMFS, backend: ScriptedBackend) -> None:
    message = chat.invoke("What is 2 + 2?")
    (request,) = backend.calls[0]
    prompt_tokens = backend.count_tokens(request.prompt)
    output_tokens = request.n * len(ANSWER.split())
    assert message.content == ANSWER
    assert message.usage_metadata == {
        "input_tokens": prompt_tokens,
        "output_tokens": output_tokens,
        "total_tokens": prompt_tokens + output_tokens,
    }
    meta = message.response_metadata
    assert (meta["model_name"], meta["answer"], meta["vote_share"], meta["stop_reason"]) == ("mfs-demo", "4", 1.0, "all_finished")
    assert (meta["num_steps"], meta["flops"]) == (1, 6 * output_tokens * backend.num_parameters)


def test_stream_ends_with_a_last_chunk_that_carries_usage(chat: ChatMFS) -> None:
    chunks = list(chat.stream("What is 2 + 2?"))
    assert all(isinstance(chunk, AIMessageChunk) for chunk in chunks)
    assert [chunk.chunk_position for chunk in chunks] == [None] * (len(chunks) - 1) + ["last"]
    assert [chunk.usage_metadata is not None for chunk in chunks] == [False] * (len(chunks) - 1) + [True]
    full = chunks[0]
    for chunk in chunks[1:]:
        full = full + chunk
    assert full.content == ANSWER
    assert full.usage_metadata == chat.invoke("What is 2 + 2?").usage_metadata
    assert full.response_metadata["model_name"] == "mfs-demo"


def test_streaming_true_fires_a_callback_per_chunk(backend: ScriptedBackend) -> None:
    class Recorder(BaseCallbackHandler):
        def __init__(self) -> None:
            self.tokens: list[str] = []
            self.reasoning: list[str] = []

        def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
            self.tokens.append(token)
            self.reasoning.append(kwargs["chunk"].message.additional_kwargs.get("reasoning_content", ""))

    recorder = Recorder()
    chat = ChatMFS(engine=MFSEngine(backend, SETTINGS), streaming=True)
    message = chat.invoke("What is 2 + 2?", config={"callbacks": [recorder]})
    assert message.content == ANSWER
    assert "".join(recorder.tokens) == ANSWER
    # One reasoning chunk per step (one here: every candidate finishes) and one at the stop,
    # then one chunk per word of the answer.
    assert recorder.tokens[:2] == ["", ""]
    assert recorder.reasoning[0].startswith("[step 0: 4 sampled, 4 finished")
    assert recorder.reasoning[1].startswith("[stop: all_finished after 1 step; answer 4")
    assert len(recorder.tokens) == 2 + len(ANSWER.replace("\n", " ").split())
    assert message.additional_kwargs["reasoning_content"] == "".join(recorder.reasoning)


async def test_astream_and_stop(chat: ChatMFS) -> None:
    chunks = [chunk async for chunk in chat.astream("What is 2 + 2?", stop=["="])]
    assert "".join(chunk.content for chunk in chunks) == "2 + 2 "
    assert chunks[-1].chunk_position == "last"
    stopped = ChatMFS(engine=chat.engine, stop=["\n"])
    assert (await stopped.ainvoke("What is 2 + 2?")).content == "2 + 2 = 4"


def test_get_num_tokens_from_messages_counts_the_rendered_prompt(chat: ChatMFS, backend: ScriptedBackend) -> None:
    messages = [HumanMessage("What is 2 + 2?")]
    chat.invoke(messages)
    assert chat.get_num_tokens_from_messages(messages) == backend.count_tokens(backend.calls[0][0].prompt)
    with pytest.raises(NotImplementedError, match="cannot call tools: its chat template renders the same prompt"):
        chat.get_num_tokens_from_messages(messages, tools=[{"name": "add"}])


def test_ls_params_report_the_call_model() -> None:
    params = ChatMFS(max_tokens=10, stop=["x"])._get_ls_params(model="other-model")
    assert params == {
        "ls_provider": "mfs",
        "ls_model_type": "chat",
        "ls_model_name": "other-model",
        "ls_temperature": 0.7,
        "ls_max_tokens": 10,
        "ls_stop": ["x"],
    }
