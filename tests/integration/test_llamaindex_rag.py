"""RAG through a LlamaIndex query engine answered by ``MFSLLM`` (``examples/rag_llamaindex.py``).

The default tests check the pipeline's mechanics on the demo model with small MFS
settings: BM25 retrieves the one relevant sentence without any download, the model is
prompted with exactly one word problem built from it, and the query engine returns what the
LLM answered, normally and streaming. ``test_rag_example_answers_correctly`` (slow) runs the
example itself and needs the trained demo model: it fails on the barely-trained stand-in.
"""

from __future__ import annotations

from mfs_core.call import adapter_arguments
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent, LLMChatStartEvent
from llama_index.core.schema import QueryBundle

from llamaindex_mfs import MFSLLM
from tests.llamaindex_events import EventRecorder, recording

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rag_llamaindex.py"
SMALL = {"step_beam_size": 2, "num_rollouts": 2, "max_steps": 1, "max_step_tokens": 8, "max_answer_tokens": 16, "seed": 0}


@pytest.fixture(scope="module")
def example() -> ModuleType:
    """``examples/rag_llamaindex.py`` imported as a module (its ``main`` is not run)."""
    spec = importlib.util.spec_from_file_location("rag_llamaindex", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["rag_llamaindex"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def chat_events() -> Iterator[EventRecorder]:
    """Records the LLM events of the test."""
    with recording() as handler:
        yield handler


@pytest.fixture
def dispatcher_handlers() -> Iterator[None]:
    """Restore the root dispatcher's event handlers (``main`` adds one)."""
    dispatcher = get_dispatcher()
    saved = list(dispatcher.event_handlers)
    try:
        yield
    finally:
        dispatcher.event_handlers[:] = saved


def test_bm25_retrieves_the_fact_the_question_needs(example: ModuleType) -> None:
    engine = example.build_query_engine(MFSLLM(**adapter_arguments(SMALL)))
    nodes = engine.retrieve(QueryBundle(example.QUESTION))
    assert [n.node.get_content() for n in nodes] == ["Maria has 24 stickers."]
    two = example.build_query_engine(MFSLLM(**adapter_arguments(SMALL)), top_k=2).retrieve(QueryBundle(example.QUESTION))
    assert two[0].node.get_content() == "Maria has 24 stickers." and two[0].score > two[1].score


def test_query_prompts_the_model_with_one_word_problem(example: ModuleType, chat_events: EventRecorder) -> None:
    response = example.build_query_engine(MFSLLM(**adapter_arguments(SMALL))).query(example.QUESTION)
    problem = f"Maria has 24 stickers. {example.QUESTION}"
    assert len(chat_events.of_type(LLMChatStartEvent)) == len(chat_events.of_type(LLMChatEndEvent)) == 1
    [message] = chat_events.of_type(LLMChatStartEvent)[0].messages
    assert (message.role.value, message.content) == ("user", problem)
    answer = chat_events.of_type(LLMChatEndEvent)[0].response
    assert str(response) == (answer.message.content or "Empty Response")
    assert answer.raw["usage"]["completion_tokens"] == answer.raw["result"].output_tokens > 0
    assert response.source_nodes[0].node.get_content() == "Maria has 24 stickers."


def test_streaming_query_streams_the_same_answer(example: ModuleType, chat_events: EventRecorder) -> None:
    llm = MFSLLM(**adapter_arguments(SMALL))
    normal = example.build_query_engine(llm).query(example.QUESTION)
    streaming = example.build_query_engine(llm, streaming=True).query(example.QUESTION)
    deltas = list(streaming.response_gen)
    assert len(chat_events.of_type(LLMChatEndEvent)) == 2
    assert "".join(deltas) == chat_events.of_type(LLMChatEndEvent)[1].response.message.content
    assert chat_events.of_type(LLMChatEndEvent)[0].response.message.content == chat_events.of_type(LLMChatEndEvent)[1].response.message.content
    assert str(normal) == ("".join(deltas) or "Empty Response")
    assert streaming.source_nodes[0].node.get_content() == "Maria has 24 stickers."


@pytest.mark.slow
def test_rag_example_answers_correctly(
    example: ModuleType, capsys: pytest.CaptureFixture[str], dispatcher_handlers: None
) -> None:
    """Demo model answers correctly: 24 stickers from the retrieved document, plus 5, minus 9, is 20."""
    example.main()
    out = capsys.readouterr().out
    assert "retrieved: 'Maria has 24 stickers.'" in out
    assert out.count(f"extracted answer: {example.EXPECTED_ANSWER} (expected {example.EXPECTED_ANSWER})") == 2
