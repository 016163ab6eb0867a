"""Qwen2.5-Coder-1.5B-Instruct from the package index on the transformers backend: loading with the
hash checks, one greedy answer, a tool call under the defaults through ``ChatMFS.bind_tools``, and a
LangChain agent's round trip (the call, the tool's result back to the model, the model's next turns).

The engine runs in bfloat16 (``dtype="bfloat16"``: 3.6 GB of weights, against 7.1 GB in float32,
which a 2-core test machine shared with a vLLM benchmark cannot hold); the converted checkpoint
itself is float32. Marked ``qwen_1_5b`` and ``slow``; skips without the ``[qwen-1-5b]`` packages.
"""

from __future__ import annotations

import gc
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.qwen_1_5b.conftest import QUESTION, QWEN_1_5B, add, multiply, parts_installed

if not parts_installed():
    pytest.skip('needs pip install "mfs-decoding[qwen-1-5b]"', allow_module_level=True)

from mfs_core.call import adapter_arguments
from mfs_core import MFSSettings
from mfs_core.models import PACKAGED_MODELS
from tests.packaged_models import packaged_engine, spy_prompts

pytestmark = [pytest.mark.qwen_1_5b, pytest.mark.slow]

SETTINGS = {"device": "cpu", "dtype": "bfloat16", "seed": 0}


@pytest.fixture(scope="module")
def engine(qwen_1_5b_cache: Path) -> Iterator[Any]:
    """An :class:`~mfs_core.MFSEngine` on the model (transformers, CPU, bfloat16), closed after this module."""
    with packaged_engine(QWEN_1_5B, qwen_1_5b_cache, dtype="bfloat16") as opened:
        yield opened
    gc.collect()


def test_the_parts_are_joined_checked_and_converted_to_a_float32_checkpoint(engine: Any) -> None:
    import torch

    from mfs_core.tools import renders_tools

    backend = engine.backend
    assert backend.num_parameters == 1_777_088_000  # the GGUF file keeps a separate output matrix
    assert {p.dtype for p in backend.model.parameters()} == {torch.bfloat16}
    folder = Path(backend.model.name_or_path)
    assert folder.name.startswith("qwen2.5-coder-1.5b-instruct-cc324af070c2-")
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert shards == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    assert index["metadata"]["total_size"] == 4 * 1_777_088_000  # float32 on disk
    config = json.loads((folder / "config.json").read_text())
    assert config["num_hidden_layers"] == 28 and config["model_type"] == "qwen2" and "quantization_config" not in config
    spec = PACKAGED_MODELS[QWEN_1_5B]
    joined = folder.parent / "parts" / f"{QWEN_1_5B}-{spec.sha256[:12]}.gguf"
    digest = hashlib.sha256()
    with joined.open("rb") as handle:
        assert handle.read(4) == b"GGUF"
        handle.seek(0)
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    assert joined.stat().st_size == spec.size and digest.hexdigest() == spec.sha256
    assert renders_tools(backend)  # Qwen's template renders tools (Hermes <tool_call>)
    prompt = backend.apply_chat_template([{"role": "user", "content": "What is 2 + 3?"}])
    assert prompt.endswith("<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n")


def test_a_greedy_answer(engine: Any) -> None:
    """256 tokens at most: in bfloat16 on transformers the greedy text was still at "4. Perform the
    addition: 3 + 4" after 128 tokens (vLLM's bfloat16 answer stated 7 after 103)."""
    settings = MFSSettings(model=QWEN_1_5B, max_answer_tokens=256, **SETTINGS)
    result = engine.decode([QUESTION], settings=settings, method="cot")[0]
    print(repr(result.text), result.answer, result.output_tokens)
    assert result.answer == "7"
    assert 0 < result.output_tokens <= 256


def test_bound_tools_under_the_defaults_give_a_tool_call(engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``bind_tools([multiply]).invoke(...)`` as a new user writes it, greedy (``cot``)."""
    from langchain_core.tools import tool

    from langchain_mfs import ChatMFS

    prompts = spy_prompts(engine, monkeypatch)
    chat = ChatMFS(engine=engine, model=QWEN_1_5B, method="cot", max_answer_tokens=48, **adapter_arguments(SETTINGS))
    reply = chat.bind_tools([tool(multiply)]).invoke("What is 23 times 17? Use the multiply tool.")
    print(repr(reply.content), reply.tool_calls)
    assert prompts[0].endswith("<|im_start|>assistant\n")  # the template's generation prompt, no prefix
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("multiply", {"a": 23, "b": 17})]


AGENT_QUESTION = "A baker makes 23 trays of 17 cookies each. How many cookies is that?"
TOOL_RESPONSE = "<|im_start|>user\n<tool_response>\n391\n</tool_response><|im_end|>\n<|im_start|>assistant\n"


def test_a_langchain_agent_gets_the_tool_result_back_and_calls_again_instead_of_answering(
        engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``create_agent`` with ``add`` and ``multiply`` on the 0.5B's agent question, greedy (``cot``, 64 tokens a
    turn, seed 0), as tests/qwen/test_qwen.py runs the 0.5B: the first turn calls ``multiply(23, 17)`` and the
    result, 391, goes back to the model as Qwen's ``<tool_response>``; the model does not answer with it but calls
    ``add(23, 17)``, then ``multiply(23, 17)`` again, until the agent's recursion limit (6 steps) ends the run
    (the 0.5B writes its call again as text instead of answering)."""
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.errors import GraphRecursionError

    from langchain_mfs import ChatMFS

    prompts = spy_prompts(engine, monkeypatch)
    chat = ChatMFS(engine=engine, model=QWEN_1_5B, method="cot", max_answer_tokens=64, **adapter_arguments(SETTINGS))
    agent = create_agent(chat, tools=[tool(add), tool(multiply)])
    messages: list[Any] = []
    with pytest.raises(GraphRecursionError):
        for state in agent.stream({"messages": [HumanMessage(AGENT_QUESTION)]}, {"recursion_limit": 6},
                                  stream_mode="values"):
            messages = state["messages"]
    for message in messages:
        print(f"[{message.type}] {message.content!r} {getattr(message, 'tool_calls', '') or ''}")
    calls = [(c["name"], c["args"]) for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert calls == [("multiply", {"a": 23, "b": 17}), ("add", {"a": 23, "b": 17}), ("multiply", {"a": 23, "b": 17})]
    assert all(m.content == "" for m in messages if isinstance(m, AIMessage))  # no turn answers in text
    assert [(m.status, m.content) for m in messages if isinstance(m, ToolMessage)] == [
        ("success", "391"), ("success", "40"), ("success", "391")]
    assert len(prompts) == 3 and prompts[1].endswith(TOOL_RESPONSE)  # the result went back to the model
