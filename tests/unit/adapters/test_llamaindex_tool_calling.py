"""``MFSLLM`` as a LlamaIndex ``FunctionCallingLLM`` on a scripted model whose template renders tools.

The script (tests/tool_scripts.py) plays the tool-calling demo model's contract. No model is loaded.
"""

from __future__ import annotations

import re

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.tools import FunctionTool
from pydantic import BaseModel

from llamaindex_mfs import MFSLLM
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.tools import ToolsNotSupportedError
from mfs_core.types import Continuation, GenerationRequest
from tests.scripted import ScriptedBackend, hermes_template
from tests.tool_scripts import calculator_script, follow

SETTINGS = MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


ADD = FunctionTool.from_defaults(fn=add)


def tool_llm(script=calculator_script) -> tuple[MFSLLM, ScriptedBackend]:
    backend = ScriptedBackend(script, chat_template=hermes_template)
    return MFSLLM(engine=MFSEngine(backend, SETTINGS)), backend


def test_is_a_function_calling_llm_only_where_the_template_renders_tools() -> None:
    llm, _ = tool_llm()
    assert isinstance(llm, FunctionCallingLLM)
    assert llm.metadata.is_function_calling_model is True
    plain = MFSLLM(engine=MFSEngine(ScriptedBackend(calculator_script), SETTINGS))  # the demo model's template shape
    assert plain.metadata.is_function_calling_model is False
    with pytest.raises(ToolsNotSupportedError, match="cannot call tools"):
        plain.chat_with_tools([ADD], user_msg="What is 3 plus 4?")


def test_chat_with_tools_returns_tool_selections() -> None:
    llm, backend = tool_llm()
    response = llm.chat_with_tools([ADD], user_msg="What is 3 plus 4?")
    [selection] = llm.get_tool_calls_from_response(response)
    assert (selection.tool_name, selection.tool_kwargs) == ("add", {"a": 3, "b": 4})
    assert selection.tool_id.startswith("call_")
    assert response.message.content == "I add the two numbers with the tool."
    assert response.message.additional_kwargs["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 3, "b": 4}'}
    key = 'call [{"arguments":{"a":3,"b":4},"name":"add"}]'
    assert response.additional_kwargs["answer"] == key and response.additional_kwargs["vote_share"] == 1.0
    assert '"name": "add"' in backend.calls[0][0].prompt


def test_no_tool_call_is_an_error_only_when_asked() -> None:
    llm, _ = tool_llm(lambda request: follow("3 + 4 = 7\nThe answer is: \\boxed{7}.", request))
    response = llm.chat_with_tools([ADD], user_msg="What is 3 plus 4?")
    assert llm.get_tool_calls_from_response(response, error_on_no_tool_call=False) == []
    with pytest.raises(ValueError, match=r"expected at least one tool call, got 0"):
        llm.get_tool_calls_from_response(response)


def test_a_malformed_call_is_reported_not_selected() -> None:
    llm, _ = tool_llm(lambda request: follow('<tool_call>\n{"name": "add", "arguments": {"a": 3\n</tool_call>', request))
    response = llm.chat_with_tools([ADD], user_msg="What is 3 plus 4?")
    assert llm.get_tool_calls_from_response(response, error_on_no_tool_call=False) == []
    [invalid] = response.message.additional_kwargs["invalid_tool_calls"]
    assert invalid["name"] == "add" and "not valid JSON" in invalid["error"]


def test_predict_and_call_runs_the_tool() -> None:
    llm, _ = tool_llm()
    assert llm.predict_and_call([ADD], user_msg="What is 20 plus 22?").response == "42"


def test_tool_history_renders_through_the_template() -> None:
    llm, backend = tool_llm()
    history = [
        ChatMessage(role=MessageRole.USER, content="What is 3 plus 4?"),
        ChatMessage(role=MessageRole.ASSISTANT, blocks=[
            TextBlock(text="I add the two numbers with the tool."),
            ToolCallBlock(tool_call_id="c1", tool_name="add", tool_kwargs={"a": 3, "b": 4}),
        ]),
        ChatMessage(role=MessageRole.TOOL, content="7", additional_kwargs={"tool_call_id": "c1"}),
    ]
    response = llm.chat_with_tools([ADD], chat_history=history)
    assert response.message.content == "The answer is: \\boxed{7}."
    assert ('<|assistant|>\nI add the two numbers with the tool.\n<tool_call>\n{"name": "add", "arguments": {"a": 3, "b": 4}}\n'
            "</tool_call>\n<|tool|>\n7\n<|assistant|>\n") in backend.calls[0][0].prompt


def test_only_the_first_call_is_kept_without_parallel_calls() -> None:
    two = '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>\n<tool_call>\n{"name": "add", "arguments": {"a": 3, "b": 4}}\n</tool_call>'
    llm, _ = tool_llm(lambda request: follow(two, request))
    single = llm.chat_with_tools([ADD], user_msg="Add 1 and 2, and 3 and 4.")
    assert [s.tool_kwargs for s in llm.get_tool_calls_from_response(single)] == [{"a": 1, "b": 2}]
    both = llm.chat_with_tools([ADD], user_msg="Add 1 and 2, and 3 and 4.", allow_parallel_tool_calls=True)
    assert [s.tool_kwargs for s in llm.get_tool_calls_from_response(both)] == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]


async def test_a_function_agent_calls_the_tool_reads_the_result_and_answers() -> None:
    llm, _ = tool_llm()
    agent = FunctionAgent(tools=[ADD], llm=llm, system_prompt="Use the tools.")
    handler = agent.run(user_msg="What is 3 plus 4?")
    calls = []
    async for event in handler.stream_events():
        if type(event).__name__ == "ToolCallResult":
            calls.append((event.tool_name, event.tool_kwargs, event.tool_output.content))
    response = await handler
    assert calls == [("add", {"a": 3, "b": 4}, "7")]
    assert str(response) == "The answer is: \\boxed{7}."


class Sum(BaseModel):
    """The sum of two numbers."""

    total: int


def test_structured_predict_goes_through_function_calling() -> None:
    from llama_index.core.prompts import PromptTemplate

    def call_sum(request: GenerationRequest) -> list[Continuation]:
        a, b = re.findall(r"\d+", request.prompt.split("<|user|>")[-1])[:2]
        return follow(f'{a} + {b}\n<tool_call>\n{{"name": "Sum", "arguments": {{"total": {int(a) + int(b)}}}}}\n</tool_call>', request)

    llm, backend = tool_llm(call_sum)
    assert llm.structured_predict(Sum, PromptTemplate("What is {a} plus {b}?"), a=3, b=4) == Sum(total=7)
    assert '"name": "Sum"' in backend.calls[0][0].prompt


def test_structured_predict_without_tools_votes_over_json() -> None:
    from llama_index.core.prompts import PromptTemplate

    backend = ScriptedBackend(lambda request: follow('3 + 4 = 7\n{"total": 7}', request))  # the demo model's template shape
    llm = MFSLLM(engine=MFSEngine(backend, SETTINGS))
    assert not llm.metadata.is_function_calling_model
    result = llm.structured_predict(Sum, PromptTemplate("What is {a} plus {b}?"), a=3, b=4)
    assert result == Sum(total=7)
    system = backend.calls[0][0].prompt.split("<|user|>")[0]
    assert "Answer with a single JSON object that conforms to this JSON schema" in system and '"total"' in system


async def test_predict_and_call_without_tool_rendering_is_the_clear_error() -> None:
    # LlamaIndex's fallback for such a model is a ReAct agent that 0.14 cannot build (no formatter).
    plain = MFSLLM(engine=MFSEngine(ScriptedBackend(calculator_script), SETTINGS))
    with pytest.raises(ToolsNotSupportedError, match="cannot call tools"):
        plain.predict_and_call([ADD], user_msg="What is 20 plus 22?")
    with pytest.raises(ToolsNotSupportedError, match="cannot call tools"):
        await plain.apredict_and_call([ADD], user_msg="What is 20 plus 22?")
