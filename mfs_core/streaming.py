"""Delivering decode events from the engine's worker thread, and writing them as reasoning.

:class:`DecodeStream` is the hand-over: the worker thread puts events in, the caller reads
them on its own thread (blocking iteration) or event loop (``async for``), then gets the
results. :class:`ReasoningText` turns one decode's events into the reasoning text that the
LangChain (``reasoning`` content blocks) and LlamaIndex (``ThinkingBlock``) adapters stream
while the search runs: per step a summary line and the newly committed reasoning.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import CancelledError, Future
from typing import Any

from mfs_core.errors import DecodeTimeoutError
from mfs_core.events import DecodeEvent, StopEvent, step_summary, stop_summary
from mfs_core.types import DecodeResult

__all__ = ["DecodeStream", "ReasoningText"]

_DONE = object()


class DecodeStream:
    """The events of one call's decodes as they happen, then their results.

    Iterate it (``for event in stream``, or :meth:`events` with a timeout) on any thread,
    or ``async for event in stream.aevents()`` on an event loop: the engine's worker thread
    only appends under a lock and wakes the reader (``loop.call_soon_threadsafe`` for an
    event loop), so events reach the reader's thread or loop in the order the engine made
    them. Iteration ends after the last decode of the call finished; it then raises the
    first decode's exception if any failed (other decodes still complete).

    Built by :meth:`mfs_core.engine.MFSEngine.stream_prompts`; not reusable (each event is
    read once).
    """

    def __init__(self) -> None:
        """An empty stream; the engine attaches its futures with :meth:`attach`."""
        self._cond = threading.Condition()
        self._items: deque[Any] = deque()
        self._futures: list[Future] = []
        self._pending = 0
        self._waker: Callable[[], None] | None = None

    # --- the producer side (the engine) ----------------------------------------------------
    def put(self, event: DecodeEvent) -> None:
        """Append ``event`` and wake the reader; called on the engine's worker thread."""
        with self._cond:
            self._items.append(event)
            self._cond.notify_all()
            waker = self._waker
        if waker is not None:
            waker()

    def attach(self, futures: Sequence[Future]) -> None:
        """Follow ``futures`` (one per decode); iteration ends once all are done."""
        with self._cond:
            self._futures = list(futures)
            self._pending = len(self._futures)
            if not self._futures:
                self._items.append(_DONE)
        for future in self._futures:
            future.add_done_callback(self._done)

    def _done(self, _: Future) -> None:
        with self._cond:
            self._pending -= 1
            if self._pending == 0:
                self._items.append(_DONE)
                self._cond.notify_all()
            waker = self._waker
        if waker is not None:
            waker()

    # --- the consumer side ---------------------------------------------------------------
    @property
    def futures(self) -> list[Future]:
        """One future per decode, in prompt order."""
        return list(self._futures)

    def abandon(self, reason: str = "the stream's consumer abandoned it") -> None:
        """Abandon every decode of the stream that is not done (see ``DecodeFuture.abandon``)."""
        for future in self._futures:
            abandon = getattr(future, "abandon", None)
            if abandon is not None:
                abandon(reason)

    def results(self) -> list[DecodeResult]:
        """The results, in prompt order (blocks until every decode is done).

        Raises:
            The first exception among the decodes.
        """
        return [future.result() for future in self._futures]

    def __iter__(self) -> Iterator[DecodeEvent]:
        """:meth:`events` without a timeout."""
        return self.events()

    def events(self, timeout: float | None = None) -> Iterator[DecodeEvent]:
        """Yield the events as the engine makes them, blocking between them.

        Args:
            timeout: most seconds the whole iteration may take; None waits without limit.

        Raises:
            DecodeTimeoutError: the decodes did not finish within ``timeout`` (a ``TimeoutError``; they still run).
            The first exception among the decodes, after the last event.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._cond:
                while not self._items:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        msg = f"decode did not finish within timeout={timeout} s (it still runs in the engine)"
                        raise DecodeTimeoutError(msg)
                    self._cond.wait(remaining)
                item = self._items.popleft()
            if item is _DONE:
                self._raise_first_error()
                return
            yield item

    async def aevents(self, timeout: float | None = None) -> AsyncIterator[DecodeEvent]:
        """Async :meth:`events`: awaits the worker without blocking the event loop.

        Raises:
            TimeoutError / the first decode exception, as :meth:`events`.
        """
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(ready.set)
            except RuntimeError:  # the loop closed while the decode ran
                pass

        with self._cond:
            self._waker = wake
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            with self._cond:
                item = self._items.popleft() if self._items else None
                if item is None:
                    ready.clear()
            if item is None:
                remaining = None if deadline is None else deadline - loop.time()
                try:
                    if remaining is not None and remaining <= 0:
                        raise asyncio.TimeoutError
                    await asyncio.wait_for(ready.wait(), remaining)
                except asyncio.TimeoutError as exc:
                    msg = f"decode did not finish within timeout={timeout} s (it still runs in the engine)"
                    raise DecodeTimeoutError(msg) from exc
                continue
            if item is _DONE:
                self._raise_first_error()
                return
            yield item

    def _raise_first_error(self) -> None:
        """Raise the first failed decode's exception; a decode abandoned before the engine took it up (its
        future cancelled) fails with ``CancelledError`` as one abandoned later does, not silently."""
        for future in self._futures:
            if future.cancelled():
                raise CancelledError("the decode was abandoned before it started")
            if future.exception() is not None:
                raise future.exception()  # type: ignore[misc]


class ReasoningText:
    """One decode's events written as reasoning text, delta by delta.

    For each :class:`StepEvent`: the line ``[step t: ...]`` (:func:`step_summary`), then the
    reasoning that became committed at that step (the part of
    :attr:`StepEvent.committed` not shown yet). For the :class:`StopEvent`: the line
    ``[stop: ...]`` (:func:`stop_summary`). ``text`` is everything so far, the deltas joined.

    Example:
        >>> reasoning = ReasoningText()  # doctest: +SKIP
        >>> for event in engine.stream_prompts([prompt]):  # doctest: +SKIP
        ...     print(reasoning.delta(event), end="")
    """

    def __init__(self) -> None:
        """Start with no text shown."""
        self.text = ""
        self._committed = ""

    def delta(self, event: DecodeEvent) -> str:
        """The reasoning text ``event`` adds (never empty)."""
        if isinstance(event, StopEvent):
            piece = f"[{stop_summary(event)}]\n"
        else:
            piece = f"[{step_summary(event)}]\n"
            committed = event.committed
            if len(committed) > len(self._committed) and committed.startswith(self._committed):
                piece += committed[len(self._committed) :]
                self._committed = committed
        self.text += piece
        return piece
