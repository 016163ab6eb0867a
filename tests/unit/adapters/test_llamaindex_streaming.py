"""LlamaIndex streaming shows the search: ThinkingBlock / thinking_delta per step, dispatcher events."""

from __future__ import annotations

import asyncio

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ThinkingBlock
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler

from llamaindex_mfs import MFSLLM
from llamaindex_mfs.events import MFSStepEvent, MFSStopEvent
from mfs_core.engine import MFSEngine
from tests.engine_decodes import SETTINGS
from tests.three_step_model import synthetic_model

MESSAGES = [ChatMessage(role=MessageRole.USER, content="question 3: how many?")]


class _Events(BaseEventHandler):
    """Keeps the MFS instrumentation events."""

    events: list = []

    @classmethod
    def class_name(cls) -> str:
        return "_Events"

    def handle(self, event, **kwargs) -> None:
        if isinstance(event, (MFSStepEvent, MFSStopEvent)):
            self.events.append(event)


def _recording(call):
    handler = _Events(events=[])
    root = get_dispatcher()
    root.add_event_handler(handler)
    try:
        out = call()
    finally:
        root.event_handlers.remove(handler)
    return out, handler.events


def test_stream_chat_thinks_per_step_then_answers_and_dispatches_each_step():
    llm = MFSLLM(engine=MFSEngine(synthetic_model(), SETTINGS))
    chunks, events = _recording(lambda: list(llm.stream_chat(MESSAGES)))
    result = chunks[-1].raw["result"]
    n = len(result.steps)
    assert n >= 2
    thinking, answer = chunks[: n + 1], chunks[n + 1 :]
    # Thinking chunks: a ThinkingBlock with the search so far, empty text, the new part in thinking_delta.
    so_far = ""
    for chunk in thinking:
        blocks = chunk.message.blocks
        assert [type(b) for b in blocks] == [ThinkingBlock, TextBlock] and chunk.delta == "" and chunk.message.content == ""
        so_far += chunk.additional_kwargs["thinking_delta"]
        assert blocks[0].content == so_far
    deltas = [c.additional_kwargs["thinking_delta"] for c in thinking]
    assert [d[:8] for d in deltas[:-1]] == [f"[step {t}:" for t in range(n)]
    assert deltas[-1].startswith(f"[stop: {result.stop_reason} after ")
    # The committed reasoning (every beam took "step k" lines) shows between the step lines.
    assert "\nstep " in so_far
    # Answer chunks: the whole thinking kept, the text cumulative.
    assert all(c.message.blocks[0].content == so_far and "thinking_delta" not in c.additional_kwargs for c in answer)
    assert "".join(c.delta for c in answer) == answer[-1].message.content == result.text
    # Dispatcher: one MFSStepEvent per step, in order, then one MFSStopEvent.
    assert [type(e) for e in events] == [MFSStepEvent] * n + [MFSStopEvent]
    assert [e.step for e in events[:n]] == list(range(n))
    assert events[0].summary == thinking[0].additional_kwargs["thinking_delta"].split("\n")[0][1:-1]
    assert events[-1].data["answer"] == result.answer == "7"


def test_stream_complete_answers_as_before_and_dispatches_the_steps():
    llm = MFSLLM(engine=MFSEngine(synthetic_model(), SETTINGS))
    chunks, events = _recording(lambda: list(llm.stream_complete("question 3: how many?")))
    assert all(c.delta for c in chunks) and chunks[-1].text == chunks[-1].raw["result"].text
    assert [type(e) for e in events] == [MFSStepEvent] * len(chunks[-1].raw["result"].steps) + [MFSStopEvent]


def test_astream_chat_matches_stream_chat():
    async def collect():
        llm = MFSLLM(engine=MFSEngine(synthetic_model(), SETTINGS))
        return [chunk async for chunk in await llm.astream_chat(MESSAGES)]

    async_chunks, events = _recording(lambda: asyncio.run(collect()))
    sync_chunks = list(MFSLLM(engine=MFSEngine(synthetic_model(), SETTINGS)).stream_chat(MESSAGES))
    assert [c.delta for c in async_chunks] == [c.delta for c in sync_chunks]
    assert [c.additional_kwargs.get("thinking_delta", "")[:8] for c in async_chunks] == [
        c.additional_kwargs.get("thinking_delta", "")[:8] for c in sync_chunks
    ]
    assert [type(e) for e in events] == [MFSStepEvent] * len(sync_chunks[-1].raw["result"].steps) + [MFSStopEvent]
