"""Waiting for decodes, once for every entry point: the engine's ``decode*`` methods, the
LangChain and LlamaIndex adapters and the server.

A caller that stops waiting (its ``timeout`` passed, its task was cancelled, its thread got
``KeyboardInterrupt``, its stream's consumer went away) abandons its decodes, so they stop
costing model calls (:meth:`~mfs_core.engine.DecodeFuture.abandon`: lockstep scheduling drops
them at the next round boundary, continuous scheduling cancels their call in flight). The
rule lives in :func:`_stop_waiting` and :func:`_outcome`; the four drivers (blocking and
async, results and event streams) only wait. The same pattern as
:meth:`mfs_core.backends.openai.OpenAIBackend._attempts`: the logic once, thin sync and async
drivers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager

from mfs_core.errors import DecodeTimeoutError
from mfs_core.events import DecodeEvent
from mfs_core.streaming import DecodeStream
from mfs_core.types import DecodeResult

__all__ = ["abandon", "astream_events", "await_results", "stream_events", "timeout_message", "wait_results"]


def timeout_message(count: int, timeout: float | None) -> str:
    """The message of the :class:`~mfs_core.errors.DecodeTimeoutError` of ``count`` decodes that outlived
    ``timeout`` seconds."""
    return f"{count} MFS decode(s) did not finish within timeout={timeout} s (abandoned: the engine stops them)"


def abandon(futures: Sequence[Future], reason: str) -> None:
    """Abandon every decode of ``futures`` not yet done (``DecodeFuture.abandon``).

    Futures without ``abandon`` (not the engine's) are cancelled instead. Done futures are
    left alone.
    """
    for future in futures:
        if future.done():
            continue
        drop = getattr(future, "abandon", None)
        if drop is not None:
            drop(reason)
        else:
            future.cancel()


@contextmanager
def _stop_waiting(futures: Sequence[Future], timeout: float | None) -> Iterator[None]:
    """Around a wait on ``futures``: the caller's timeout (a :class:`DecodeTimeoutError` from the wait)
    abandons them and raises :class:`DecodeTimeoutError` with :func:`timeout_message`; anything else
    that ends the wait early (cancellation, ``KeyboardInterrupt``, ``GeneratorExit``, a decode's own
    exception) abandons the decodes still running and goes on."""
    try:
        yield
    except DecodeTimeoutError as exc:
        abandon(futures, f"the caller's timeout of {timeout} s passed")
        raise DecodeTimeoutError(timeout_message(len(futures), timeout)) from exc
    except BaseException:
        abandon(futures, "the caller stopped waiting")
        raise


def _outcome(futures: Sequence[Future], timed_out: bool) -> list[DecodeResult]:
    """What a finished wait on ``futures`` gives: their results in order, or the first failure.

    Raises:
        The first failed decode's exception in prompt order (``CancelledError`` for an abandoned
        one), when any done decode failed; else DecodeTimeoutError when ``timed_out``.
    """
    for future in futures:
        if future.done() and (future.cancelled() or future.exception() is not None):
            return [future.result()]  # raises: its exception, or CancelledError
    if timed_out:
        raise DecodeTimeoutError
    return [future.result() for future in futures]


def wait_results(futures: Sequence[Future], timeout: float | None) -> list[DecodeResult]:
    """The results of ``futures`` in order, waiting at most ``timeout`` seconds (None: no limit).

    Returns as soon as every decode is done or one has failed; the others are then abandoned.

    Raises:
        DecodeTimeoutError: ``timeout`` passed first (a ``TimeoutError``; the decodes are abandoned).
        The first failed decode's exception, in prompt order.
    """
    if not futures:
        return []
    with _stop_waiting(futures, timeout):
        _, pending = concurrent.futures.wait(futures, timeout, return_when=concurrent.futures.FIRST_EXCEPTION)
        return _outcome(futures, timed_out=bool(pending))


async def await_results(futures: Sequence[Future], timeout: float | None) -> list[DecodeResult]:
    """Async :func:`wait_results`: never blocks the event loop.

    Cancelling the awaiting task (``asyncio.wait_for``, a LangChain ``with_retry``'s or a
    LlamaIndex workflow's timeout) abandons the decodes too.

    Raises:
        DecodeTimeoutError / the first decode exception, as :func:`wait_results`.
        asyncio.CancelledError: the awaiting task was cancelled.
    """
    if not futures:
        return []
    with _stop_waiting(futures, timeout):
        waiting = [asyncio.wrap_future(future) for future in futures]
        try:
            _, pending = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            for wrapper in waiting:  # the outcome is read from ``futures``: the wrappers are let go quietly
                if wrapper.done() and not wrapper.cancelled():
                    wrapper.exception()
                else:
                    wrapper.cancel()
        return _outcome(futures, timed_out=bool(pending))


def stream_events(stream: DecodeStream, timeout: float | None) -> Iterator[DecodeEvent]:
    """The events of ``stream`` as they come, for at most ``timeout`` seconds in all.

    The decodes are abandoned when the timeout passes and when the consumer stops early
    (closes the generator, or it is garbage-collected unfinished).

    Raises:
        DecodeTimeoutError: ``timeout`` passed first.
        The first decode's exception in prompt order, after the last event.
    """
    with _stop_waiting(stream.futures, timeout):
        yield from stream.events(timeout)


async def astream_events(stream: DecodeStream, timeout: float | None) -> AsyncIterator[DecodeEvent]:
    """Async :func:`stream_events`; a cancelled consumer abandons the decodes too.

    Raises:
        DecodeTimeoutError / the first decode exception, as :func:`stream_events`.
    """
    with _stop_waiting(stream.futures, timeout):
        async for event in stream.aevents(timeout):
            yield event
