"""The engine's ``scheduling="continuous"`` design on a scripted async backend (no model).

Each decode runs as a task of its own and awaits only its own requests
(:class:`mfs_core.engine.continuous.ContinuousScheduler`); these tests check the mechanics that the
vLLM tests (``tests/vllm/test_vllm_continuous.py``) cannot isolate: the same results as
lockstep, calls that hold one decode's requests, no decode waiting for another, abandoning,
failures, timeouts and closing.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError

import pytest
from pydantic import ValidationError

from mfs_core import MFSEngine, MFSSettings
from mfs_core.backends._loop import EventLoopThread
from mfs_core.backends.base import AsyncBackend, Backend
from mfs_core.errors import GenerateTimeoutError
from mfs_core.events import StepEvent, StopEvent
from mfs_core.types import Continuation, GenerationRequest
from tests.scripted import ScriptedBackend, synthetic_model

QUESTIONS = [f"question {i}: how many?" for i in range(8)]
SEARCH = dict(prompt_format="raw", step_beam_size=2, num_rollouts=3, max_steps=6, prune_lambda=0.0)
LOCKSTEP = MFSSettings(**SEARCH)
CONTINUOUS = MFSSettings(backend="vllm", scheduling="continuous", **SEARCH)


def question_of(request: GenerationRequest) -> str:
    """The question a request belongs to (its raw prompt starts with it)."""
    return next(q for q in QUESTIONS if request.prompt.startswith(q))


class AsyncScripted:
    """:class:`ScriptedBackend` behind the :class:`AsyncBackend` protocol, on an event loop thread.

    Args:
        inner: the scripted backend that answers.
        delay: seconds an ``agenerate`` call of the given requests waits before answering
            (default: none); ``float("inf")`` waits until cancelled.
        fail: questions whose calls raise ``RuntimeError``.

    Attributes:
        calls: the requests of every ``agenerate`` call, in the order the calls started.
        cancelled: calls cancelled while they waited.
    """

    def __init__(self, inner: ScriptedBackend, *, delay: Callable[[Sequence[GenerationRequest]], float] | None = None,
                 fail: frozenset[str] = frozenset()) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self._delay = delay or (lambda requests: 0.0)
        self._fail = fail
        self._thread = EventLoopThread("test-async-backend")
        self.calls: list[list[GenerationRequest]] = []
        self.cancelled = 0
        self.closed = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._thread.loop

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        self.calls.append(list(requests))
        if any(question_of(r) in self._fail for r in requests):
            msg = f"scripted failure of {question_of(requests[0])!r}"
            raise RuntimeError(msg)
        wait = self._delay(requests)
        try:
            if wait == float("inf"):
                await asyncio.Event().wait()
            elif wait:
                await asyncio.sleep(wait)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return self.inner.generate(requests)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        return self._thread.run(self.agenerate(requests))

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def apply_chat_template(self, messages, tools=None):  # noqa: ANN001, ANN201 - the protocol's signature
        return self.inner.apply_chat_template(messages, tools)

    @property
    def context_window(self) -> int:
        return self.inner.context_window

    @property
    def num_parameters(self) -> int:
        return self.inner.num_parameters

    def close(self) -> None:
        self.closed = True
        self._thread.stop()


@pytest.fixture
def make_engine():
    """``make_engine(**AsyncScripted kwargs)``: a continuous engine on a synthetic model; closed after the test."""
    engines: list[MFSEngine] = []

    def make(**kwargs) -> tuple[MFSEngine, AsyncScripted]:
        backend = AsyncScripted(synthetic_model(), **kwargs)
        engine = MFSEngine(backend, CONTINUOUS)
        engines.append(engine)
        return engine, backend

    yield make
    for engine in engines:
        engine.close()


def comparable(result) -> dict:  # noqa: ANN001
    data = result.to_dict()
    data.pop("wall_seconds")
    return data


def test_the_scripted_backend_is_an_async_backend() -> None:
    backend = AsyncScripted(synthetic_model())
    try:
        assert isinstance(backend, AsyncBackend) and isinstance(backend, Backend)
        assert not isinstance(synthetic_model(), AsyncBackend)
    finally:
        backend.close()


def test_same_results_as_lockstep_with_one_decode_per_call(make_engine) -> None:  # noqa: ANN001
    lockstep_backend = synthetic_model()
    expected = MFSEngine(lockstep_backend, LOCKSTEP).decode(QUESTIONS)
    engine, backend = make_engine()
    results = engine.decode(QUESTIONS)
    assert [comparable(r) for r in results] == [comparable(r) for r in expected]
    # Every call holds the requests of one decode, and together they are lockstep's requests.
    assert all(len({question_of(r) for r in call}) == 1 for call in backend.calls)
    key = lambda r: (r.prompt, r.seed, r.n, r.stop)  # noqa: E731
    assert sorted(map(key, (r for call in backend.calls for r in call))) == sorted(map(key, lockstep_backend.requests))
    assert engine.stats.generate_calls == len(backend.calls) > lockstep_backend.num_calls
    assert engine.stats.decodes == len(QUESTIONS)


def test_a_quick_decode_does_not_wait_for_a_slow_one(make_engine) -> None:  # noqa: ANN001
    slow = QUESTIONS[0]
    engine, _ = make_engine(delay=lambda requests: 0.5 if question_of(requests[0]) == slow else 0.0)
    slow_future = engine.submit_prompts([slow])[0]
    quick_future = engine.submit_prompts([QUESTIONS[1]])[0]  # submitted later, while the slow one waits
    quick = quick_future.result(timeout=30)
    assert not slow_future.done(), "under lockstep the quick decode would have waited for every slow round"
    assert quick.answer is not None
    assert slow_future.result(timeout=60).answer is not None


def test_abandoning_cancels_the_call_in_flight_at_once(make_engine) -> None:  # noqa: ANN001
    stuck = QUESTIONS[2]
    engine, backend = make_engine(delay=lambda requests: float("inf") if question_of(requests[0]) == stuck else 0.0)
    futures = engine.submit_prompts([stuck, QUESTIONS[3]])
    deadline = time.monotonic() + 10
    while not any(question_of(call[0]) == stuck for call in backend.calls) and time.monotonic() < deadline:
        time.sleep(0.01)
    futures[0].abandon("test")
    with pytest.raises(CancelledError):
        futures[0].result(timeout=5)
    assert backend.cancelled == 1
    assert futures[1].result(timeout=30).answer is not None


def test_a_failing_call_fails_its_decode_only(make_engine) -> None:  # noqa: ANN001
    engine, _ = make_engine(fail=frozenset({QUESTIONS[4]}))
    futures = engine.submit_prompts(QUESTIONS[3:6])
    with pytest.raises(RuntimeError, match="scripted failure"):
        futures[1].result(timeout=30)
    assert futures[0].result(timeout=30).answer is not None and futures[2].result(timeout=30).answer is not None


def test_generate_timeout_fails_the_hung_decode_only(make_engine) -> None:  # noqa: ANN001
    engine, backend = make_engine(delay=lambda requests: float("inf") if question_of(requests[0]) == QUESTIONS[5] else 0.0)
    settings = CONTINUOUS.model_copy(update={"generate_timeout": 0.3})
    futures = engine.submit_prompts(QUESTIONS[5:7], settings=settings)
    with pytest.raises(GenerateTimeoutError, match="generate_timeout=0.3"):
        futures[0].result(timeout=10)
    assert futures[1].result(timeout=30).answer is not None
    assert backend.cancelled == 1


def test_events_stream_under_continuous_scheduling(make_engine) -> None:  # noqa: ANN001
    engine, _ = make_engine()
    events = list(engine.stream_prompts(QUESTIONS[:2]))
    stops = [e for e in events if isinstance(e, StopEvent)]
    assert sorted(e.index for e in stops) == [0, 1]
    assert any(isinstance(e, StepEvent) for e in events)
    for stop in stops:  # a decode's steps come before its stop
        assert all(events.index(e) < events.index(stop) for e in events if isinstance(e, StepEvent) and e.index == stop.index)


def test_async_callers_under_continuous_scheduling(make_engine) -> None:  # noqa: ANN001
    engine, _ = make_engine()

    async def main():  # noqa: ANN202
        return await asyncio.gather(*(engine.adecode([q]) for q in QUESTIONS[:4]))

    expected = MFSEngine(synthetic_model(), LOCKSTEP).decode(QUESTIONS[:4])
    assert [comparable(r[0]) for r in asyncio.run(main())] == [comparable(r) for r in expected]


def test_close_fails_running_decodes_and_closes_the_backend() -> None:
    backend = AsyncScripted(synthetic_model(), delay=lambda requests: float("inf"))
    engine = MFSEngine(backend, CONTINUOUS)
    future = engine.submit_prompts([QUESTIONS[0]])[0]
    deadline = time.monotonic() + 10
    while not backend.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    closer = threading.Thread(target=engine.close)
    closer.start()
    closer.join(30)
    assert not closer.is_alive()
    with pytest.raises(RuntimeError, match="closed during this decode"):
        future.result(timeout=5)
    assert backend.closed
    late = engine._scheduler.submit([(x for x in ())])[0]  # a decode submitted after close fails at once
    with pytest.raises(RuntimeError, match="closed before this decode started"):
        late.result(timeout=1)


def test_continuous_needs_an_async_backend_and_the_vllm_backend() -> None:
    with pytest.raises(TypeError, match="scheduling='continuous' needs a backend with agenerate"):
        MFSEngine(synthetic_model(), CONTINUOUS)
    with pytest.raises(ValidationError, match="scheduling='continuous' needs backend='vllm'.*got backend='transformers'"):
        MFSSettings(scheduling="continuous")
    with pytest.raises(ValidationError, match="scheduling"):
        MFSSettings(backend="vllm", scheduling="batched")
    assert MFSSettings().scheduling == "auto" and MFSSettings(backend="vllm").scheduler == "continuous"
