"""LangChain streaming shows the search: reasoning chunks per step, then the answer; custom events."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableLambda

from langchain_mfs import ChatMFS, MFSLLM
from mfs_core.engine import MFSEngine
from mfs_core.events import StepEvent, StopEvent
from mfs_core.streaming import ReasoningText
from tests.engine_decodes import SETTINGS
from tests.three_step_model import synthetic_model

QUESTION = "question 3: how many?"


def _untimed(reasoning: str) -> str:
    """Reasoning text without the stop line's wall time (it differs between runs)."""
    return re.sub(r"; \d+\.\d\d s\]", "; _ s]", reasoning)


def _expected() -> tuple[list[Any], str]:
    """The events of the same decode on a fresh engine, and their reasoning text."""
    engine = MFSEngine(synthetic_model(), SETTINGS)
    events = list(engine.stream_prompts([engine.render_messages([{"role": "user", "content": QUESTION}])]))
    reasoning = ReasoningText()
    return events, "".join(reasoning.delta(e) for e in events)


def test_chat_stream_yields_one_reasoning_chunk_per_step_then_the_answer():
    events, reasoning = _expected()
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert len(steps) >= 2, "the scenario should take several steps"
    chat = ChatMFS(engine=MFSEngine(synthetic_model(), SETTINGS))
    chunks = list(chat.stream(QUESTION))
    thinking = chunks[: len(steps) + 1]
    answer = chunks[len(steps) + 1 :]
    assert all(c.content == "" and c.additional_kwargs["reasoning_content"] for c in thinking)
    assert all("reasoning_content" not in c.additional_kwargs and c.content for c in answer)
    assert [c.content_blocks[0]["type"] for c in thinking] == ["reasoning"] * len(thinking)
    assert thinking[0].additional_kwargs["reasoning_content"].startswith("[step 0: ")
    assert thinking[-1].additional_kwargs["reasoning_content"].startswith("[stop: ")
    full = chunks[0]
    for chunk in chunks[1:]:
        full = full + chunk
    assert full.content == events[-1].result.text
    assert _untimed(full.additional_kwargs["reasoning_content"]) == _untimed(reasoning)
    assert [block["type"] for block in full.content_blocks] == ["reasoning", "text"]
    assert full.content_blocks[0]["reasoning"] == full.additional_kwargs["reasoning_content"]
    assert answer[-1].chunk_position == "last" and answer[-1].usage_metadata["output_tokens"] == events[-1].result.output_tokens


def test_output_version_v1_puts_the_reasoning_blocks_in_content():
    chat = ChatMFS(engine=MFSEngine(synthetic_model(), SETTINGS), output_version="v1")
    chunks = list(chat.stream(QUESTION))
    assert chunks[0].content[0]["type"] == "reasoning" and chunks[0].content[0]["reasoning"].startswith("[step 0: ")
    full = chunks[0]
    for chunk in chunks[1:]:
        full = full + chunk
    assert [block["type"] for block in full.content] == ["reasoning", "text"]


class _Recorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.custom: list[tuple[str, dict[str, Any], Any]] = []
        self.runs: list[Any] = []

    def on_chat_model_start(self, *args: Any, run_id: Any, **kwargs: Any) -> None:
        self.runs.append(run_id)

    def on_llm_start(self, *args: Any, run_id: Any, **kwargs: Any) -> None:
        self.runs.append(run_id)

    def on_custom_event(self, name: str, data: Any, *, run_id: Any, **kwargs: Any) -> None:
        self.custom.append((name, data, run_id))


def test_step_events_reach_callback_handlers_on_the_model_run():
    events, _ = _expected()
    for model in (ChatMFS(engine=MFSEngine(synthetic_model(), SETTINGS)), MFSLLM(engine=MFSEngine(synthetic_model(), SETTINGS))):
        recorder = _Recorder()
        text = "".join(c if isinstance(c, str) else c.content for c in model.stream(QUESTION, config={"callbacks": [recorder]}))
        if isinstance(model, ChatMFS):
            assert text == events[-1].result.text
            assert [name for name, _, _ in recorder.custom] == ["mfs_step"] * (len(events) - 1) + ["mfs_stop"]
            assert [data for _, data, _ in recorder.custom] == [e.to_dict() | {"elapsed_seconds": data["elapsed_seconds"]}
                                                                 for e, (_, data, _) in zip(events, recorder.custom)]
        else:  # a raw completion prompt: other steps, the same kinds of events
            assert recorder.custom[-1][0] == "mfs_stop" and recorder.custom[-1][1]["answer"] is not None
            assert {name for name, _, _ in recorder.custom[:-1]} == {"mfs_step"}
        assert {run for _, _, run in recorder.custom} == set(recorder.runs)


def test_astream_events_carries_the_steps_as_custom_events_alone_and_in_a_chain():
    chat = ChatMFS(engine=MFSEngine(synthetic_model(), SETTINGS))

    async def kinds(runnable):
        out = []
        async for event in runnable.astream_events(QUESTION, version="v2"):
            if event["event"] in ("on_custom_event", "on_chat_model_start"):
                out.append((event["event"], event["name"], event["run_id"]))
        return out

    events, _ = _expected()
    for runnable in (chat, RunnableLambda(lambda x: x) | chat):
        seen = asyncio.run(kinds(runnable))
        (start, _, run_id), *custom = seen
        assert start == "on_chat_model_start"
        assert [name for _, name, _ in custom] == ["mfs_step"] * (len(events) - 1) + ["mfs_stop"]
        assert {run for _, _, run in custom} == {run_id}


def test_chat_astream_yields_the_same_chunks_as_stream():
    chat = ChatMFS(engine=MFSEngine(synthetic_model(), SETTINGS))

    async def collect():
        return [chunk async for chunk in chat.astream(QUESTION)]

    async_chunks = asyncio.run(collect())
    sync_chunks = list(ChatMFS(engine=MFSEngine(synthetic_model(), SETTINGS)).stream(QUESTION))

    def strip(chunk):
        return chunk.content, _untimed(chunk.additional_kwargs.get("reasoning_content", ""))

    assert [strip(c) for c in async_chunks] == [strip(c) for c in sync_chunks]
    assert isinstance(_expected()[0][-1], StopEvent)
