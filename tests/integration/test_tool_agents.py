"""Agents on the tool-calling demo model: a tool call, the tool's result, and the answer.

Skipped (``requires_tool_model``) until the bundled demo model's chat template renders tools;
they run by themselves once the tool-calling demo model is merged. Each test prints its
transcript (``pytest -s`` shows it). The same loops run on a scripted model in
tests/unit/adapters/test_langchain_tool_calling.py and tests/unit/adapters/test_llamaindex_tool_calling.py.
"""

from __future__ import annotations

import pytest

from mfs_core.answers import extract_answer
from tests.tool_model import requires_tool_model

pytestmark = [requires_tool_model, pytest.mark.slow]

# Left to decide (tool_choice="auto"), the demo model (v2, v3) opens a call but names the arithmetic
# tools it was trained on rather than the schema's ("calc", "add_numbers"); the engine keeps
# the name to the bound tools (the constrain_tool_names setting, TriggeredChoice), and the
# model writes the operands and answers from the result.

# CPU-sized search; device="cpu" shares the session's loaded demo model (tests/conftest.py).
SETTINGS = {"device": "cpu", "step_beam_size": 2, "num_rollouts": 2, "max_steps": 4, "max_answer_tokens": 64}
QUESTION = "Tom has 12 apples. He buys 30 more apples. How many apples does Tom have now?"


def add(a: int, b: int) -> int:
    """Add two integers and return the sum."""
    return a + b


def multiply(a: int, b: int) -> int:
    """Multiply two integers and return the product."""
    return a * b


def test_a_langchain_create_agent_calls_the_calculator_and_answers() -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool

    from langchain_mfs import ChatMFS

    agent = create_agent(ChatMFS(**SETTINGS), tools=[tool(add), tool(multiply)])
    state = agent.invoke({"messages": [HumanMessage(QUESTION)]}, {"recursion_limit": 8})
    for message in state["messages"]:
        print(f"[{message.type}] {message.content!r} {getattr(message, 'tool_calls', '') or ''}")
    calls = [call for m in state["messages"] if isinstance(m, AIMessage) for call in m.tool_calls]
    results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert calls and calls[0]["name"] in ("add", "multiply")
    assert results and results[0].status == "success"
    final = state["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert final.response_metadata["vote_share"] > 0
    assert extract_answer(final.content) == results[-1].content  # it answers from the tool's result


def test_the_vote_runs_over_actions_on_the_first_turn() -> None:
    from langchain_core.tools import tool

    from langchain_mfs import ChatMFS

    message = ChatMFS(**SETTINGS).bind_tools([tool(add), tool(multiply)]).invoke(QUESTION)
    print(message.tool_calls, message.response_metadata["votes"])
    assert message.tool_calls, message.content
    meta = message.response_metadata
    assert meta["answer"].startswith("call [")
    # the winner's share of the completed paths (at most M of them; a malformed call does not vote)
    completed = len(message.response_metadata["trace"]) and SETTINGS["step_beam_size"]
    assert meta["votes"][meta["answer"]] >= 1 and meta["votes"][meta["answer"]] / completed <= meta["vote_share"] + 1e-9


async def test_a_llamaindex_function_agent_calls_the_calculator_and_answers() -> None:
    from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
    from llama_index.core.tools import FunctionTool

    from llamaindex_mfs import MFSLLM

    llm = MFSLLM(**SETTINGS)
    assert llm.metadata.is_function_calling_model
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(fn=add), FunctionTool.from_defaults(fn=multiply)], llm=llm)
    handler = agent.run(user_msg=QUESTION)
    results = []
    async for event in handler.stream_events():
        if isinstance(event, ToolCallResult):
            print(f"[tool] {event.tool_name}({event.tool_kwargs}) -> {event.tool_output.content}")
            results.append(event.tool_output.content)
    response = await handler
    print(f"[answer] {response}")
    assert results
    assert extract_answer(str(response)) == results[-1]


def test_structured_output_by_function_calling() -> None:
    from pydantic import BaseModel

    from langchain_mfs import ChatMFS

    class add_numbers(BaseModel):  # noqa: N801 - a tool name in the model's own style
        """Add two integers."""

        a: int
        b: int

    out = ChatMFS(**SETTINGS).with_structured_output(add_numbers, include_raw=True).invoke(QUESTION)
    print(out)
    assert out["parsing_error"] is None
    assert {out["parsed"].a, out["parsed"].b} == {12, 30}


def test_a_forced_call_round_trip_through_chatmfs() -> None:
    """tool_choice names the tool: the call is opened in the prompt, the model writes the
    operands; the tool's result goes back as a ToolMessage and the model answers from it."""
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool

    from langchain_mfs import ChatMFS

    chat = ChatMFS(**SETTINGS)
    tools = [tool(add), tool(multiply)]
    first = chat.bind_tools(tools, tool_choice="add").invoke(QUESTION)
    [call] = first.tool_calls
    assert (call["name"], call["args"]) == ("add", {"a": 12, "b": 30})
    result = ToolMessage(str(add(**call["args"])), tool_call_id=call["id"])
    final = chat.bind_tools(tools).invoke([HumanMessage(QUESTION), first, result])
    print(first.tool_calls, "->", result.content, "->", repr(final.content))
    assert not final.tool_calls and extract_answer(final.content) == "42"


def test_a_required_call_round_trip_through_the_llamaindex_llm() -> None:
    """tool_required with one tool opens the call to it; the result turn is answered."""
    from llama_index.core.llms import ChatMessage
    from llama_index.core.tools import FunctionTool

    from llamaindex_mfs import MFSLLM

    llm = MFSLLM(**SETTINGS)
    tools = [FunctionTool.from_defaults(fn=add)]
    response = llm.chat_with_tools(tools, user_msg=QUESTION, tool_required=True)
    [selection] = llm.get_tool_calls_from_response(response)
    assert (selection.tool_name, selection.tool_kwargs) == ("add", {"a": 12, "b": 30})
    output = tools[0].call(**selection.tool_kwargs)
    history = [
        ChatMessage(role="user", content=QUESTION),
        response.message,
        ChatMessage(role="tool", content=str(output), additional_kwargs={"tool_call_id": selection.tool_id, "name": "add"}),
    ]
    final = llm.chat_with_tools(tools, chat_history=history)
    print(selection, "->", output, "->", repr(final.message.content))
    assert llm.get_tool_calls_from_response(final, error_on_no_tool_call=False) == []
    assert extract_answer(final.message.content) == "42"


def test_without_the_name_constraint_the_model_names_a_tool_it_was_not_given() -> None:
    """The same first turn with ``constrain_tool_names=False`` (and no action grammar): the
    model writes a name of its training ("calc"), which is not bound, so the call is invalid
    rather than taken."""
    from langchain_core.tools import tool

    from langchain_mfs import ChatMFS

    message = ChatMFS(**SETTINGS, model_kwargs={"constrain_tool_names": False, "constrain_actions": False}).bind_tools([tool(add), tool(multiply)]).invoke(QUESTION)
    print(message.invalid_tool_calls)
    assert not message.tool_calls
    assert message.invalid_tool_calls and message.invalid_tool_calls[0]["name"] not in ("add", "multiply")
