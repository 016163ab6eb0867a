"""A contract suite for LlamaIndex ``CustomLLM`` implementations, run on ``MFSLLM``.

LlamaIndex ships no standard test suite for LLM integrations (LangChain has
``langchain-tests``), so :class:`CustomLLMContract` writes down what the framework relies
on, read from llama-index-core 0.14 (``llms/callbacks.py``, ``callbacks/token_counting.py``,
``llms/llm.py``, ``settings.py``):

* every entry point (``complete``, ``stream_complete``, ``chat``, ``stream_chat`` and
  their ``a``-prefixed async forms) returns the documented response type;
* streamed chunks carry the cumulative text and a ``delta``, and the deltas join to the
  final text;
* each call opens and closes exactly one ``CBEventType.LLM`` callback event, with the final
  response in the end payload (seen by ``LlamaDebugHandler``);
* each call emits the instrumentation events ``LLM{Completion,Chat}StartEvent``, one
  ``...InProgressEvent`` per streamed chunk and ``...EndEvent`` with the final response;
* ``TokenCountingHandler`` counts the usage the LLM reports in ``raw["usage"]``;
* ``Settings.llm = llm`` makes a query engine built without an ``llm`` answer with it.

A subclass provides the ``llm`` fixture (and may change :attr:`CustomLLMContract.prompt`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mfs_core.call import adapter_arguments
import pytest
from llama_index.core import Document, PromptTemplate, Settings
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload, LlamaDebugHandler, TokenCountingHandler
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
)
from llama_index.core.llms.custom import CustomLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.response_synthesizers import CompactAndRefine
from llama_index.retrievers.bm25 import BM25Retriever

from llamaindex_mfs import MFSLLM
from tests.llamaindex_events import EventRecorder, recording

ENTRY_POINTS = [
    "complete",
    "stream_complete",
    "chat",
    "stream_chat",
    "acomplete",
    "astream_complete",
    "achat",
    "astream_chat",
]



@pytest.fixture
def recorder() -> Iterator[EventRecorder]:
    """An :class:`EventRecorder` on the root dispatcher for the test's duration."""
    with recording() as handler:
        yield handler


@pytest.fixture
def global_settings() -> Iterator[type[Settings]]:
    """``llama_index.core.Settings``, with its LLM and callback manager restored afterwards."""
    saved = (Settings._llm, Settings._callback_manager)
    try:
        yield Settings
    finally:
        Settings._llm, Settings._callback_manager = saved


async def call_entry_point(llm: CustomLLM, name: str, prompt: str) -> tuple[Any, list[Any]]:
    """Call ``llm.<name>`` on ``prompt`` (as one user message for chat); the final response and all chunks."""
    argument: Any = [ChatMessage(role=MessageRole.USER, content=prompt)] if "chat" in name else prompt
    output = getattr(llm, name)(argument)
    if name.startswith("a"):
        output = await output
    if "stream" not in name:
        return output, [output]
    chunks = [chunk async for chunk in output] if name.startswith("a") else list(output)
    assert chunks, f"{name} streamed nothing"
    return chunks[-1], chunks


def response_text(response: CompletionResponse | ChatResponse) -> str:
    """The text of a completion or the content of a chat message."""
    if isinstance(response, ChatResponse):
        return response.message.content or ""
    return response.text


class CustomLLMContract:
    """What LlamaIndex relies on from an LLM; subclass and provide the ``llm`` fixture."""

    prompt = "Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?"

    @pytest.fixture
    def llm(self) -> CustomLLM:
        """The LLM under test (a fresh instance per test)."""
        raise NotImplementedError

    def test_metadata(self, llm: CustomLLM) -> None:
        metadata = llm.metadata
        assert isinstance(metadata, LLMMetadata)
        assert 0 < metadata.num_output < metadata.context_window
        assert isinstance(metadata.model_name, str) and metadata.model_name
        assert llm.to_payload()["class_name"] == llm.class_name()

    @pytest.mark.parametrize("name", ENTRY_POINTS)
    async def test_entry_point(self, llm: CustomLLM, name: str, recorder: EventRecorder) -> None:
        debug, counter = LlamaDebugHandler(), TokenCountingHandler()
        llm.callback_manager = CallbackManager([debug, counter])
        final, chunks = await call_entry_point(llm, name, self.prompt)

        # response types; streamed deltas join to the cumulative, final text
        is_chat = "chat" in name
        assert all(isinstance(c, ChatResponse if is_chat else CompletionResponse) for c in chunks)
        if is_chat:
            assert all(c.message.role == MessageRole.ASSISTANT for c in chunks)
        text = response_text(final)
        assert isinstance(text, str)
        if "stream" in name:
            joined = ""
            for chunk in chunks:
                assert isinstance(chunk.delta, str)
                joined += chunk.delta
                assert response_text(chunk) == joined
            assert joined == text

        # one LLM callback event, closed with the final response
        pairs = debug.get_event_pairs(CBEventType.LLM)
        assert len(pairs) == 1
        start, end = pairs[0]
        assert (start.event_type, end.event_type) == (CBEventType.LLM, CBEventType.LLM)
        assert end.payload[EventPayload.RESPONSE if is_chat else EventPayload.COMPLETION] is final

        # instrumentation: start, one in-progress event per streamed chunk, end
        kind = "Chat" if is_chat else "Completion"
        expected = [f"LLM{kind}StartEvent"]
        if "stream" in name:
            expected += [f"LLM{kind}InProgressEvent"] * len(chunks)
        expected.append(f"LLM{kind}EndEvent")
        assert [type(e).__name__ for e in recorder.events] == expected
        assert recorder.events[0].model_dict["class_name"] == llm.class_name()
        assert recorder.events[-1].response is final
        assert len({e.span_id for e in recorder.events}) == 1

        # TokenCountingHandler counts the usage the LLM reports
        usage = final.raw["usage"]
        assert len(counter.llm_token_counts) == 1
        assert counter.prompt_llm_token_count == usage["prompt_tokens"] > 0
        assert counter.completion_llm_token_count == usage["completion_tokens"] > 0

    def test_settings_llm_answers_a_query_engine_built_without_llm(
        self, llm: CustomLLM, global_settings: type[Settings], recorder: EventRecorder
    ) -> None:
        global_settings.llm = llm
        documents = [Document(text="Tom has 3 apples."), Document(text="Ann has 5 pears.")]
        retriever = BM25Retriever.from_defaults(nodes=documents, similarity_top_k=1)
        synthesizer = CompactAndRefine(  # no llm: Settings.llm
            text_qa_template=PromptTemplate("{context_str} {query_str}"),
            refine_template=PromptTemplate("{context_msg} {query_str}"),
            response_padding_size=8,
        )
        engine = RetrieverQueryEngine(retriever=retriever, response_synthesizer=synthesizer)
        response = engine.query("Then Tom buys 4 more apples. How many apples does Tom have now?")
        starts = [e for e in recorder.events if isinstance(e, (LLMChatStartEvent, LLMCompletionStartEvent))]
        assert len(starts) == 1
        assert starts[0].model_dict["class_name"] == llm.class_name()
        ends = [e for e in recorder.events if isinstance(e, (LLMChatEndEvent, LLMCompletionEndEvent))]
        assert str(response) == (response_text(ends[0].response) or "Empty Response")
        assert response.source_nodes[0].node.get_content() == "Tom has 3 apples."


SMALL = {"step_beam_size": 2, "num_rollouts": 2, "max_steps": 1, "max_step_tokens": 8, "max_answer_tokens": 16, "seed": 0}
"""MFS settings small enough for a decode of the demo model to take well under a second."""


class TestMFSLLMContract(CustomLLMContract):
    """The contract on :class:`MFSLLM` with the bundled demo model."""

    @pytest.fixture
    def llm(self) -> MFSLLM:
        return MFSLLM(**adapter_arguments(SMALL))
