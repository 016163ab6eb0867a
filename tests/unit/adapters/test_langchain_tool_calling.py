"""``ChatMFS`` tool calling and structured output on a scripted model whose template renders tools.

The script (tests/tool_scripts.py) plays the tool-calling demo model's contract. No model is loaded.
"""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import pytest
from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from langchain_mfs import ChatMFS
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.tools import ToolsNotSupportedError
from mfs_core.types import Continuation, GenerationRequest
from tests.scripted import ScriptedBackend, continuation, hermes_template
from tests.tool_scripts import STEP_STOP, calculator_script, follow

SETTINGS = MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def tool_chat(script=calculator_script, **fields: Any) -> tuple[ChatMFS, ScriptedBackend]:
    backend = ScriptedBackend(script, chat_template=hermes_template)
    return ChatMFS(engine=MFSEngine(backend, SETTINGS), **fields), backend


def test_bind_tools_renders_the_tools_and_returns_tool_calls() -> None:
    chat, backend = tool_chat()
    message = chat.bind_tools([add, multiply]).invoke("What is 3 plus 4?")
    assert message.tool_calls == [{"name": "add", "args": {"a": 3, "b": 4}, "id": message.tool_calls[0]["id"], "type": "tool_call"}]
    assert message.invalid_tool_calls == []
    assert message.content == "I add the two numbers with the tool."
    assert message.response_metadata["finish_reason"] == "tool_calls"
    prompt = backend.calls[0][0].prompt
    assert '"name": "add"' in prompt and '"name": "multiply"' in prompt and "<tools>" in prompt
    assert prompt.endswith("<|user|>\nWhat is 3 plus 4?\n<|assistant|>\nThe reasoning steps are:\n\n")


def test_the_vote_runs_over_actions_and_its_counts_are_in_the_metadata() -> None:
    chat, _ = tool_chat()
    info = chat.bind_tools([add]).invoke("What is 3 plus 4?").response_metadata
    key = 'call [{"arguments":{"a":3,"b":4},"name":"add"}]'
    assert info["answer"] == key and info["vote_share"] == 1.0
    assert list(info["votes"]) == [key] and info["votes"][key] == SETTINGS.step_beam_size  # M paths, one action
    assert info["trace"][0]["candidates"] == SETTINGS.step_beam_size * SETTINGS.num_rollouts


def test_tools_may_be_passed_per_call() -> None:
    chat, _ = tool_chat()
    message = chat.invoke("What is 5 plus 6?", tools=[add])
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [("add", {"a": 5, "b": 6})]


def test_a_tool_result_in_the_history_renders_natively_and_the_model_answers() -> None:
    chat, backend = tool_chat()
    history = [
        HumanMessage("What is 3 plus 4?"),
        AIMessage("I add the two numbers with the tool.", tool_calls=[{"name": "add", "args": {"a": 3, "b": 4}, "id": "c1"}]),
        ToolMessage("7", tool_call_id="c1"),
    ]
    message = chat.bind_tools([add]).invoke(history)
    assert message.tool_calls == [] and message.content == "The answer is: \\boxed{7}."
    assert message.response_metadata["finish_reason"] == "stop"
    prompt = backend.calls[0][0].prompt
    assert ('<|assistant|>\nI add the two numbers with the tool.\n<tool_call>\n{"name": "add", "arguments": {"a": 3, "b": 4}}\n'
            "</tool_call>\n<|tool|>\n7\n<|assistant|>\nThe reasoning steps are:\n\n") in prompt


def test_malformed_calls_are_invalid_tool_calls() -> None:
    def broken(request: GenerationRequest) -> list[Continuation]:
        return [continuation('<tool_call>\n{"name": "add", "arguments": {"a": 3,\n</tool_call>', finish_reason="eos")] * request.n

    chat, _ = tool_chat(broken)
    message = chat.bind_tools([add]).invoke("What is 3 plus 4?")
    assert message.tool_calls == []
    [invalid] = message.invalid_tool_calls
    assert invalid["name"] == "add" and "not valid JSON" in invalid["error"]


def test_tool_choice_none_omits_the_tools_and_parses_nothing() -> None:
    chat, backend = tool_chat()
    message = chat.bind_tools([add], tool_choice="none").invoke("What is 3 plus 4?")
    assert "<tools>" not in backend.calls[0][0].prompt
    assert message.tool_calls == [] and "<tool_call>" in message.content


def forced_call_script(request: GenerationRequest) -> list[Continuation]:
    """A model that continues the forced opening the prompt ends with: the tool's name when
    only ``{"name": "`` is given, then the question's two numbers as ``a`` and ``b``."""
    a, b = re.findall(r"\d+", request.prompt.split("<|user|>")[-1])[:2]
    arguments = f'"a": {a}, "b": {b}}}}}\n</tool_call>'
    if request.prompt.endswith('"arguments": {'):
        text = arguments
    elif request.prompt.endswith('"arguments": '):  # the opening under constrain_actions stops before the value
        text = "{" + arguments
    else:
        assert request.prompt.endswith('<tool_call>\n{"name": "'), request.prompt[-60:]
        text = 'add", "arguments": {' + arguments
    if request.stop == STEP_STOP:
        text = text.split("\n")[0]
    return [continuation(text, mean_logprob=-0.3, finish_reason="eos")] * request.n


def test_a_forced_tool_is_the_only_one_rendered_and_every_path_opens_a_call_to_it() -> None:
    chat, backend = tool_chat(forced_call_script)
    message = chat.bind_tools([add, multiply], tool_choice="multiply").invoke("What is 3 plus 4?")
    prompt = backend.calls[0][0].prompt
    assert '"name": "add"' not in prompt and '"name": "multiply"' in prompt.split("<|user|>")[0]
    # under the action grammar (constrain_actions, default) the opening stops before the
    # arguments' value, where the grammar's JSON starts, and the request continues the call
    assert prompt.endswith('The reasoning steps are:\n\n<tool_call>\n{"name": "multiply", "arguments": ')
    grammar = backend.calls[0][0].grammar
    assert grammar.in_action and grammar.prefix == '<tool_call>\n{"name": "multiply", "arguments": '
    assert '"begin":"<tool_call>\\n{\\"name\\": \\"add\\"' not in grammar.structural_tag  # only the forced tool
    assert '"begin":"<tool_call>\\n{\\"name\\": \\"multiply\\"' in grammar.structural_tag
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [("multiply", {"a": 3, "b": 4})]
    assert message.invalid_tool_calls == [] and message.response_metadata["vote_share"] == 1.0


def test_tool_choice_any_opens_a_call_and_the_model_names_the_tool() -> None:
    chat, backend = tool_chat(forced_call_script)
    message = chat.bind_tools([add, multiply], tool_choice="any").invoke("Hello! 3 and 4")
    assert backend.calls[0][0].prompt.endswith('<|assistant|>\nThe reasoning steps are:\n\n<tool_call>\n{"name": "')
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [("add", {"a": 3, "b": 4})]


def test_bad_tool_choice_fails_at_bind_time() -> None:
    chat, _ = tool_chat()
    with pytest.raises(ValueError, match=r"tool_choice 'divide' is not allowed"):
        chat.bind_tools([add], tool_choice="divide")


def test_streaming_carries_the_tool_calls_in_the_last_chunk() -> None:
    chat, _ = tool_chat()
    chunks = list(chat.bind_tools([add]).stream("What is 3 plus 4?"))
    total = chunks[0]
    for chunk in chunks[1:]:
        total += chunk
    assert [(c["name"], c["args"]) for c in total.tool_calls] == [("add", {"a": 3, "b": 4})]
    assert total.content == "I add the two numbers with the tool."


async def test_async_calls_parse_tool_calls_too() -> None:
    chat, _ = tool_chat()
    message = await chat.bind_tools([add]).ainvoke("What is 3 plus 4?")
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [("add", {"a": 3, "b": 4})]


def test_a_template_without_tools_fails_at_bind_time_pointing_to_the_reasoning_tool() -> None:
    chat = ChatMFS(engine=MFSEngine(ScriptedBackend(calculator_script), SETTINGS))  # the demo model's template shape
    with pytest.raises(ToolsNotSupportedError, match=r"cannot call tools: .* langchain_mfs\.MFSReasoningTool"):
        chat.bind_tools([add])
    with pytest.raises(NotImplementedError, match="cannot call tools"):
        chat.invoke("What is 3 plus 4?", tools=[add])


def test_agents_on_a_model_without_tools_fail_with_the_clear_error() -> None:
    agents = pytest.importorskip("langchain.agents")
    prebuilt = pytest.importorskip("langgraph.prebuilt")
    chat = ChatMFS(engine=MFSEngine(ScriptedBackend(calculator_script), SETTINGS))
    # LangGraph's create_react_agent binds the tools when the agent is built: the error comes then.
    with warnings.catch_warnings(), pytest.raises(ToolsNotSupportedError, match="MFSReasoningTool"):
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of create_agent
        prebuilt.create_react_agent(chat, tools=[add])
    # langchain's create_agent binds them on each model call: the first call raises it.
    agent = agents.create_agent(chat, tools=[add])
    with pytest.raises(ToolsNotSupportedError, match="MFSReasoningTool"):
        agent.invoke({"messages": [HumanMessage("What is 3 plus 4?")]})


def test_a_create_agent_loop_calls_the_tool_and_answers() -> None:
    create_agent = pytest.importorskip("langchain.agents").create_agent
    chat, _ = tool_chat()
    state = create_agent(chat, tools=[add]).invoke({"messages": [HumanMessage("What is 3 plus 4?")]})
    kinds = [(m.type, m.content if m.type != "ai" else (m.content, [c["name"] for c in m.tool_calls])) for m in state["messages"]]
    assert kinds == [
        ("human", "What is 3 plus 4?"),
        ("ai", ("I add the two numbers with the tool.", ["add"])),
        ("tool", "7"),
        ("ai", ("The answer is: \\boxed{7}.", [])),
    ]


# --- structured output -------------------------------------------------------------------------
class Sum(BaseModel):
    """The sum of two numbers."""

    total: int = Field(description="the sum")


class SumDict(TypedDict):
    """The sum of two numbers."""

    total: int


SUM_SCHEMA = {"title": "Sum", "description": "The sum.", "type": "object",
              "properties": {"total": {"type": "integer"}}, "required": ["total"]}


def sum_call_script(request: GenerationRequest) -> list[Continuation]:
    """Calls the one tool the prompt lists (the schema's name) with ``total = 7``."""
    name = re.search(r'"name": "(\w+)"', request.prompt.split("<tools>")[1]).group(1)
    return follow(f'3 + 4 = 7\n<tool_call>\n{{"name": "{name}", "arguments": {{"total": 7}}}}\n</tool_call>', request)


def json_script(request: GenerationRequest) -> list[Continuation]:
    return follow('3 + 4 = 7\n{"total": 7}', request)


@pytest.mark.parametrize(("schema", "expected"), [(Sum, Sum(total=7)), (SumDict, {"total": 7}), (SUM_SCHEMA, {"total": 7})])
def test_function_calling_structured_output(schema: Any, expected: Any) -> None:
    chat, backend = tool_chat(sum_call_script)
    assert chat.with_structured_output(schema).invoke("What is 3 plus 4?") == expected
    assert '"properties": {"total"' in backend.calls[0][0].prompt  # the schema is the tool


@pytest.mark.parametrize("method", ["json_schema", "json_mode"])
@pytest.mark.parametrize(("schema", "expected"), [(Sum, Sum(total=7)), (SumDict, {"total": 7}), (SUM_SCHEMA, {"total": 7})])
def test_json_structured_output_through_the_prompt(method: str, schema: Any, expected: Any) -> None:
    chat = ChatMFS(engine=MFSEngine(ScriptedBackend(json_script), SETTINGS))  # no tools needed
    backend = chat.engine.backend
    assert chat.with_structured_output(schema, method=method).invoke("What is 3 plus 4?") == expected
    system = backend.calls[0][0].prompt.split("<|user|>")[0]
    assert "Answer with a single JSON object" in system
    assert ('"total"' in system) == (method == "json_schema")


def test_json_mode_without_a_schema_returns_the_object() -> None:
    chat = ChatMFS(engine=MFSEngine(ScriptedBackend(json_script), SETTINGS))
    assert chat.with_structured_output(None, method="json_mode").invoke("What is 3 plus 4?") == {"total": 7}


def test_invalid_structured_output_raises_or_is_returned_with_include_raw() -> None:
    def wrong(request: GenerationRequest) -> list[Continuation]:
        return [continuation('{"total": "seven"}', finish_reason="eos")] * request.n

    chat = ChatMFS(engine=MFSEngine(ScriptedBackend(wrong), SETTINGS))
    with pytest.raises(OutputParserException, match="does not match the schema"):
        chat.with_structured_output(SumDict, method="json_schema").invoke("What is 3 plus 4?")
    out = chat.with_structured_output(Sum, method="json_schema", include_raw=True).invoke("What is 3 plus 4?")
    assert out["parsed"] is None and isinstance(out["parsing_error"], OutputParserException)
    assert out["raw"].content == '{"total": "seven"}'


def test_include_raw_with_function_calling() -> None:
    chat, _ = tool_chat(sum_call_script)
    out = chat.with_structured_output(Sum, include_raw=True).invoke("What is 3 plus 4?")
    assert out["parsed"] == Sum(total=7) and out["parsing_error"] is None
    assert out["raw"].tool_calls[0]["args"] == {"total": 7}


def test_structured_output_argument_errors() -> None:
    chat, _ = tool_chat()
    with pytest.raises(ValueError, match="method must be 'function_calling', 'json_schema' or 'json_mode', got 'xml'"):
        chat.with_structured_output(Sum, method="xml")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="method='json_schema' needs a schema"):
        chat.with_structured_output(None, method="json_schema")
    no_tools = ChatMFS(engine=MFSEngine(ScriptedBackend(json_script), SETTINGS))
    with pytest.raises(ToolsNotSupportedError):
        no_tools.with_structured_output(Sum)  # function calling needs a template with tools
