"""The engine's one wait helper (:mod:`mfs_core.engine.waiting`), on hand-driven futures.

Every entry point (``MFSEngine.decode*``, the LangChain and LlamaIndex adapters, the server)
waits through it, so these cases hold for all of them: the caller's timeout is a
``DecodeTimeoutError`` and abandons the decodes; a decode's own ``GenerateTimeoutError`` is
reported as itself, never as the caller's timeout; the first failure (in prompt order) ends
the wait at once and abandons the others; a cancelled waiter or a consumer that stops reading a
stream abandons them too.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import CancelledError

import pytest

from mfs_core.engine import DecodeFuture
from mfs_core.engine.waiting import astream_events, await_results, stream_events, timeout_message, wait_results
from mfs_core.errors import DecodeTimeoutError, GenerateTimeoutError
from mfs_core.events import StopEvent
from mfs_core.streaming import DecodeStream
from mfs_core.types import DecodeResult


def _result(answer: str) -> DecodeResult:
    return DecodeResult(text=answer, answer=answer, vote_share=1.0, stop_reason="converged", prompt_tokens=1,
                        output_tokens=1, flops=6.0)


def _running(count: int) -> list[DecodeFuture]:
    futures = [DecodeFuture() for _ in range(count)]
    for future in futures:
        future.set_running_or_notify_cancel()  # as the scheduler does when it takes a decode up
    return futures


def _later(seconds: float, action) -> None:
    threading.Timer(seconds, action).start()


def test_results_come_in_prompt_order() -> None:
    futures = _running(2)
    _later(0.05, lambda: futures[1].set_result(_result("b")))
    _later(0.1, lambda: futures[0].set_result(_result("a")))
    assert [r.answer for r in wait_results(futures, 5.0)] == ["a", "b"]
    assert asyncio.run(await_results([], None)) == [] and wait_results([], None) == []


def test_the_callers_timeout_abandons_every_decode_and_names_the_count() -> None:
    futures = _running(3)
    futures[0].set_result(_result("a"))
    start = time.monotonic()
    with pytest.raises(DecodeTimeoutError) as caught:
        wait_results(futures, 0.1)
    assert 0.09 <= time.monotonic() - start < 2.0
    assert isinstance(caught.value, TimeoutError)
    assert str(caught.value) == timeout_message(3, 0.1) == \
        "3 MFS decode(s) did not finish within timeout=0.1 s (abandoned: the engine stops them)"
    assert [f.abandoned for f in futures] == [False, True, True]  # the done one is left alone
    assert futures[1].abandon_reason == "the caller's timeout of 0.1 s passed"


@pytest.mark.parametrize("waiter", ["sync", "async"])
def test_a_decodes_own_generate_timeout_is_not_the_callers_timeout(waiter: str) -> None:
    futures = _running(2)
    futures[1].set_exception(GenerateTimeoutError("backend.generate did not return within generate_timeout=1 s"))
    with pytest.raises(GenerateTimeoutError) as caught:
        if waiter == "sync":
            wait_results(futures, 30.0)
        else:
            asyncio.run(await_results(futures, 30.0))
    assert type(caught.value) is GenerateTimeoutError
    assert futures[0].abandoned and futures[0].abandon_reason == "the caller stopped waiting"


@pytest.mark.parametrize("waiter", ["sync", "async"])
def test_the_first_failure_in_prompt_order_ends_the_wait_at_once(waiter: str) -> None:
    futures = _running(3)  # decode 0 never finishes by itself
    _later(0.05, lambda: futures[2].set_exception(ValueError("two")))
    _later(0.05, lambda: futures[1].set_exception(ValueError("one")))
    start = time.monotonic()
    with pytest.raises(ValueError, match="^one$|^two$"):
        if waiter == "sync":
            wait_results(futures, 30.0)
        else:
            asyncio.run(await_results(futures, 30.0))
    assert time.monotonic() - start < 5.0
    assert futures[0].abandoned


def test_both_failed_first_one_in_prompt_order_wins() -> None:
    futures = _running(3)
    futures[2].set_exception(ValueError("two"))
    futures[1].set_exception(KeyError("one"))
    with pytest.raises(KeyError):
        wait_results(futures, 1.0)
    assert futures[0].abandoned


def test_an_abandoned_decode_reads_as_cancelled() -> None:
    futures = _running(1)
    futures[0].abandon("elsewhere")
    futures[0].set_exception(CancelledError("elsewhere"))  # as the scheduler fails an abandoned decode
    with pytest.raises(CancelledError):
        wait_results(futures, 1.0)


def test_cancelling_the_awaiting_task_abandons_the_decodes() -> None:
    futures = _running(2)

    async def main() -> None:
        task = asyncio.ensure_future(await_results(futures, None))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert all(f.abandoned for f in futures)
    assert futures[0].abandon_reason == "the caller stopped waiting"


def _stream(count: int) -> tuple[DecodeStream, list[DecodeFuture]]:
    stream = DecodeStream()
    futures = _running(count)
    stream.attach(futures)
    return stream, futures


def test_a_stream_consumer_that_stops_early_abandons_the_decodes() -> None:
    stream, futures = _stream(2)
    stream.put(StopEvent(index=0, result=_result("a"), elapsed_seconds=0.0))
    events = stream_events(stream, None)
    assert isinstance(next(events), StopEvent)
    events.close()
    assert all(f.abandoned for f in futures)


@pytest.mark.parametrize("waiter", ["sync", "async"])
def test_a_stream_timeout_is_the_callers_timeout(waiter: str) -> None:
    stream, futures = _stream(2)

    async def consume() -> list:
        return [event async for event in astream_events(stream, 0.1)]

    with pytest.raises(DecodeTimeoutError, match=r"^2 MFS decode\(s\) did not finish within timeout=0.1 s"):
        if waiter == "sync":
            list(stream_events(stream, 0.1))
        else:
            asyncio.run(consume())
    assert all(f.abandoned for f in futures)


@pytest.mark.parametrize("waiter", ["sync", "async"])
def test_a_decode_abandoned_before_it_started_ends_its_stream_with_cancelled_error(waiter: str) -> None:
    """A decode still waiting for the round in flight when it is abandoned (a server's drain) has its future
    cancelled, not failed: its stream must still end with ``CancelledError``, not as if it had finished."""
    stream = DecodeStream()
    futures = [DecodeFuture(), DecodeFuture()]
    futures[0].set_running_or_notify_cancel()
    stream.attach(futures)
    futures[1].abandon("the server shut down")  # never taken up: cancelled
    assert futures[1].cancelled()
    futures[0].set_result(_result("a"))

    async def consume() -> list:
        return [event async for event in astream_events(stream, 5.0)]

    with pytest.raises(CancelledError, match="abandoned before it started"):
        if waiter == "sync":
            list(stream_events(stream, 5.0))
        else:
            asyncio.run(consume())
