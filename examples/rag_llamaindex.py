"""RAG with LlamaIndex and MFS: retrieve a fact, then reason over it with foresight.

Run ``python examples/rag_llamaindex.py``. Everything is local: the documents below, a BM25
retriever (``llama-index-retrievers-bm25``, no embedding model) and the bundled demo model.

The demo model understands short arithmetic word problems in its chat format, so the
documents are story sentences and the query engine's prompt template puts the retrieved
sentence in front of the question: the model sees one word problem, e.g. "Maria has 24
stickers. Then Maria buys 5 more stickers. Maria gives 9 stickers to a neighbor. How many
stickers does Maria have now?". The answer needs the number from the retrieved document
(24), an addition and a subtraction (24 + 5 = 29, 29 - 9 = 20): the demo model was trained
on 2-4 operations, and a one-operation question is outside what it learned.

The query is answered twice, once normally and once streaming.
"""

from __future__ import annotations

from typing import Any

from llama_index.core import Document, PromptTemplate
from llama_index.core.callbacks import CallbackManager, TokenCountingHandler
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.response_synthesizers import CompactAndRefine
from llama_index.retrievers.bm25 import BM25Retriever

from llamaindex_mfs import MFSLLM
from mfs_core.answers import extract_answer

__all__ = [
    "DOCUMENTS",
    "EXPECTED_ANSWER",
    "LLM_SETTINGS",
    "QA_TEMPLATE",
    "QUESTION",
    "REFINE_TEMPLATE",
    "RESPONSE_PADDING",
    "LastAnswer",
    "build_query_engine",
    "main",
]

DOCUMENTS = [
    "Maria has 24 stickers.",
    "Tom has 13 marbles.",
    "Anna has 31 shells.",
    "Omar has 8 coins.",
    "Lily has 17 pencils.",
]
"""Story sentences, one fact each; only one of them answers :data:`QUESTION`."""

QUESTION = "Then Maria buys 5 more stickers. Maria gives 9 stickers to a neighbor. How many stickers does Maria have now?"
EXPECTED_ANSWER = "20"

QA_TEMPLATE = PromptTemplate("{context_str} {query_str}")
"""The retrieved sentence, then the question: one word problem for the demo model."""

REFINE_TEMPLATE = PromptTemplate("{context_msg} {query_str}")
"""Kept as short as the QA template so the prompt budget of a 512-token model holds (the first demo model's window);
with one retrieved chunk the refine step never runs."""

RESPONSE_PADDING = 8
"""Tokens kept free beside the answer budget (``num_output``) when chunks are packed.
LlamaIndex's default, 500, would fill a 512-token window (the first demo model's)."""

LLM_SETTINGS: dict[str, Any] = {"step_beam_size": 4, "num_rollouts": 4, "seed": 0}
"""MFS settings of the example: M = N = 4 (the CPU size of ``mfs ask``), seed 0."""


class LastAnswer(BaseEventHandler):
    """An instrumentation handler that keeps the MFS metadata of the last LLM chat answer."""

    metadata: dict[str, Any] = {}

    @classmethod
    def class_name(cls) -> str:
        """Name of the handler."""
        return "LastAnswer"

    def handle(self, event: Any, **kwargs: Any) -> None:
        """Record ``additional_kwargs`` (answer, vote share, trace) of each chat end event."""
        if isinstance(event, LLMChatEndEvent) and event.response is not None:
            self.metadata = dict(event.response.additional_kwargs)


def build_query_engine(
    llm: MFSLLM | None = None, *, streaming: bool = False, top_k: int = 1
) -> RetrieverQueryEngine:
    """A query engine over :data:`DOCUMENTS`: BM25 retrieval of ``top_k`` sentences, then ``llm``.

    The response synthesizer is built here rather than by ``RetrieverQueryEngine.from_args``
    because its padding (:data:`RESPONSE_PADDING`) must fit the demo model's context
    window, and so that the LLM keeps its own callback manager.

    Args:
        llm: the MFS LLM that answers; None uses ``llama_index.core.Settings.llm``.
        streaming: return a ``StreamingResponse`` whose ``response_gen`` yields text deltas.
        top_k: sentences retrieved (1: the prompt is exactly one word problem).

    Returns:
        A ``RetrieverQueryEngine`` with the word-problem templates.
    """
    nodes = [Document(text=text) for text in DOCUMENTS]
    retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=top_k)
    synthesizer = CompactAndRefine(
        llm=llm,
        text_qa_template=QA_TEMPLATE,
        refine_template=REFINE_TEMPLATE,
        response_padding_size=RESPONSE_PADDING,
        streaming=streaming,
    )
    return RetrieverQueryEngine(retriever=retriever, response_synthesizer=synthesizer)


def main() -> None:
    """Answer :data:`QUESTION` over :data:`DOCUMENTS`, normally and streaming, and print both."""
    counter = TokenCountingHandler()
    llm = MFSLLM(**LLM_SETTINGS, callback_manager=CallbackManager([counter]))
    last = LastAnswer()
    get_dispatcher().add_event_handler(last)

    print(f"question: {QUESTION}")
    response = build_query_engine(llm).query(QUESTION)
    retrieved = response.source_nodes[0].node.get_content()
    print(f"retrieved: {retrieved!r} (BM25 score {response.source_nodes[0].score:.3f})")
    print(f"word problem: {QA_TEMPLATE.format(context_str=retrieved, query_str=QUESTION)!r}")
    print("answer (query):")
    for line in str(response).splitlines():
        print(f"   {line}")
    print(
        f"extracted answer: {extract_answer(str(response))} (expected {EXPECTED_ANSWER}); "
        f"vote share {last.metadata['vote_share']:.0%}; steps {last.metadata['num_steps']}; "
        f"stop reason {last.metadata['stop_reason']}"
    )
    print(f"tokens: {counter.prompt_llm_token_count} prompt, {counter.completion_llm_token_count} completion")

    print("answer (streaming query):")
    streaming = build_query_engine(llm, streaming=True).query(QUESTION)
    text = ""
    for delta in streaming.response_gen:
        text += delta
        print(delta, end="", flush=True)
    print()
    print(f"extracted answer: {extract_answer(text)} (expected {EXPECTED_ANSWER})")


if __name__ == "__main__":
    main()
