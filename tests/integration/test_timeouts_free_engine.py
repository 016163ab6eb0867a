"""An adapter call that times out or is cancelled leaves no decode running in the shared engine.

The backend takes :data:`ROUND_SECONDS` per ``generate`` call and a decode needs
:data:`ROUNDS` rounds (no convergence stop), so a decode runs about 6 s while each call
waits :data:`TIMEOUT` s. A timed-out call that did not cancel its decode would leave it in the
engine: three attempts of ``with_retry`` would leave three decodes running (``queued == 3``).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from mfs_core import MFSEngine, MFSSettings
from tests.scripted import ScriptedBackend, continuation

ROUND_SECONDS = 0.15
ROUNDS = 40
TIMEOUT = 0.5
SETTINGS = MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=ROUNDS, early_stopping=False, seed=0)


class SlowBackend(ScriptedBackend):
    """A scripted model that never finishes a step's answer and takes ROUND_SECONDS per call."""

    def __init__(self) -> None:
        super().__init__(lambda request: [continuation("3 + 4 = 7", mean_logprob=-0.5)] * request.n)

    def generate(self, requests):  # type: ignore[no-untyped-def]
        time.sleep(ROUND_SECONDS)
        return super().generate(requests)


def _settled(engine: MFSEngine, backend: SlowBackend, within: float = 2.0) -> tuple[int, int, int]:
    """(decodes still queued, generate calls then, generate calls 1 s later) once the queue drains or ``within`` passes."""
    deadline = time.monotonic() + within
    while engine._scheduler.queued and time.monotonic() < deadline:
        time.sleep(0.02)
    queued, calls = engine._scheduler.queued, len(backend.calls)
    time.sleep(1.0)
    return queued, calls, len(backend.calls)


def test_langchain_with_retry_leaves_no_extra_decode_running() -> None:
    from langchain_mfs import MFSLLM

    backend = SlowBackend()
    engine = MFSEngine(backend, SETTINGS)
    llm = MFSLLM(engine=engine, timeout=TIMEOUT, step_beam_size=2, num_rollouts=2, max_steps=ROUNDS,
                 model_kwargs={"early_stopping": False})
    retried = llm.with_retry(stop_after_attempt=3, retry_if_exception_type=(TimeoutError,), wait_exponential_jitter=False)
    with pytest.raises(TimeoutError, match=r"abandoned: the engine stops them"):
        retried.invoke("Tom has 3 apples. He buys 4 more. How many apples?")
    queued, calls, later = _settled(engine, backend)
    assert queued == 0  # three attempts, none left running (was 3)
    assert later == calls  # and the model is called no more


async def test_llamaindex_cancelled_and_timed_out_calls_leave_no_decode_running() -> None:
    from llama_index.core.llms import ChatMessage

    from llamaindex_mfs import MFSLLM

    backend = SlowBackend()
    engine = MFSEngine(backend, SETTINGS)
    llm = MFSLLM(engine=engine, step_beam_size=2, num_rollouts=2, max_steps=ROUNDS, model_kwargs={"early_stopping": False})
    messages = [ChatMessage(role="user", content="Tom has 3 apples. He buys 4 more. How many apples?")]
    with pytest.raises(asyncio.TimeoutError):  # the caller's own deadline cancels the awaiting task
        await asyncio.wait_for(llm.achat(messages), TIMEOUT)
    queued, calls, later = await asyncio.to_thread(_settled, engine, backend)
    assert (queued, later) == (0, calls)
    timed = MFSLLM(engine=engine, timeout=TIMEOUT, step_beam_size=2, num_rollouts=2, max_steps=ROUNDS,
                   model_kwargs={"early_stopping": False})
    with pytest.raises(TimeoutError, match="abandoned"):
        timed.complete("Tom has 3 apples. He buys 4 more. How many apples?")
    stream = timed.stream_chat(messages)
    next(iter(stream))  # the first step's thinking, then the consumer walks away
    stream.close()
    queued, calls, later = await asyncio.to_thread(_settled, engine, backend)
    assert (queued, later) == (0, calls)
