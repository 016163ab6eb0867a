"""``MFSLLM`` and ``ChatMFS`` on the bundled demo model: lockstep batches, concurrent async
calls, the shared model, the model's tokenizer. Mechanics only (call counts, ordering,
token counts), which hold for any checkpoint."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest

from langchain_mfs import ChatMFS, MFSLLM
from mfs_core.types import Continuation, GenerationRequest

# device="cpu" as tests/conftest.py's demo fixtures: the same backend fields, one loaded model.
FAST_SETTINGS = {"device": "cpu", "step_beam_size": 2, "num_rollouts": 2, "max_steps": 2, "max_answer_tokens": 48}
QUESTIONS = [
    f"{name} has {a} apples. {name} buys {b} more apples. How many apples does {name} have now?"
    for name, a, b in [("Tom", 3, 4), ("Ann", 5, 2), ("Bob", 7, 6), ("Eve", 2, 9), ("Kim", 8, 1), ("Lee", 4, 4),
                       ("Max", 6, 3), ("Sam", 9, 5), ("Ada", 1, 7), ("Ben", 3, 8), ("Cy", 5, 5), ("Dan", 2, 6),
                       ("Fay", 7, 2), ("Gus", 4, 9), ("Hal", 6, 6), ("Ivy", 8, 3)]
]


@pytest.fixture(scope="module")
def llm() -> MFSLLM:
    llm = MFSLLM(**FAST_SETTINGS)
    llm.invoke("Warm up: 1 + 1?")  # load the demo model outside the timed tests
    return llm


@pytest.fixture
def calls(llm: MFSLLM, monkeypatch: pytest.MonkeyPatch) -> list[list[GenerationRequest]]:
    """The requests of every ``backend.generate`` call made during the test.

    ``calls.probe`` (a function, or None) is read as each call starts and ends; the pairs
    are in ``calls.probed``.
    """
    backend = llm.engine.backend
    original = backend.generate
    recorded = RecordedCalls()

    def generate(requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        recorded.append(list(requests))
        start = recorded.probe() if recorded.probe else 0
        try:
            return original(requests)
        finally:
            if recorded.probe:
                recorded.probed.append((start, recorded.probe()))

    monkeypatch.setattr(backend, "generate", generate)
    return recorded


class RecordedCalls(list):
    """The requests of each backend call, plus what ``probe`` read around each call."""

    def __init__(self) -> None:
        super().__init__()
        self.probe: Callable[[], int] | None = None
        self.probed: list[tuple[int, int]] = []


def rounds_by_question(calls: list[list[GenerationRequest]], questions: Sequence[str]) -> dict[str, list[int]]:
    """For each question, the indexes of the calls that carried one of its requests."""
    return {q: [i for i, call in enumerate(calls) if any(q in request.prompt for request in call)] for q in questions}


def test_batch_of_8_costs_one_backend_call_per_decoding_round(llm: MFSLLM, calls: list) -> None:
    questions = QUESTIONS[:8]
    texts = llm.batch(questions)
    assert len(texts) == 8
    rounds = rounds_by_question(calls, questions)
    # Lockstep: a decode that needs r rounds takes part in exactly the first r calls, and
    # the batch makes as many calls as its longest decode has rounds, not one per prompt.
    for question, indexes in rounds.items():
        assert indexes == list(range(len(indexes))), question
    assert len(calls) == max(len(indexes) for indexes in rounds.values())
    assert sum(len(indexes) for indexes in rounds.values()) >= 8 * 2 > len(calls)  # each decode: 2+ rounds


async def test_16_concurrent_ainvokes_are_decoded_together_and_the_loop_stays_responsive(
    llm: MFSLLM, calls: RecordedCalls
) -> None:
    ticks = 0
    done = asyncio.Event()

    async def tick() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0.005)
            ticks += 1

    calls.probe = lambda: ticks
    ticker = asyncio.create_task(tick())
    texts = await asyncio.gather(*(llm.ainvoke(question) for question in QUESTIONS))
    done.set()
    await ticker

    assert len(texts) == 16 and all(isinstance(text, str) for text in texts)
    rounds = rounds_by_question(calls, QUESTIONS)
    sequential_calls = sum(len(indexes) for indexes in rounds.values())  # 16 invokes one after another
    assert all(indexes for indexes in rounds.values())
    assert len(calls) <= sequential_calls / 4
    assert max(len(call) for call in calls) >= 16  # one round carried a request of every decode
    # The model ran in the engine's worker thread: the event loop kept ticking during the
    # backend calls (a decode on the loop's thread would freeze it through every call).
    ticked_during = [end > start for start, end in calls.probed]
    assert sum(ticked_during) >= len(ticked_during) / 2


def test_instances_with_the_same_backend_settings_share_one_loaded_model(llm: MFSLLM) -> None:
    other = MFSLLM(device="cpu", step_beam_size=3, num_rollouts=1, seed=7)
    chat = ChatMFS(**FAST_SETTINGS)
    assert other.engine.backend is llm.engine.backend is chat.engine.backend


def test_get_num_tokens_uses_the_demo_tokenizer(llm: MFSLLM) -> None:
    tokenizer = llm.engine.backend.tokenizer
    text = "Tom has 3 apples. He buys 14 more apples."
    assert llm.get_num_tokens(text) == len(tokenizer(text, add_special_tokens=False)["input_ids"])
    assert llm.get_num_tokens("12345") == 5  # the demo tokenizer splits digits one per token


def test_stream_yields_the_text_invoke_returns(llm: MFSLLM) -> None:
    question = QUESTIONS[0]
    assert "".join(llm.stream(question)) == llm.invoke(question)  # same seed, same decode


def test_chat_batch_decodes_conversations_together(calls: list) -> None:
    chat = ChatMFS(**FAST_SETTINGS)
    messages = chat.batch(QUESTIONS[:4])
    assert len(messages) == 4
    rounds = rounds_by_question(calls, QUESTIONS[:4])
    assert len(calls) < sum(len(indexes) for indexes in rounds.values())
