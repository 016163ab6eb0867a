"""An asyncio event loop that runs in a thread of its own.

The continuous scheduler (``MFSSettings.scheduling="continuous"``) drives every decode as a
task on the event loop of its backend (:class:`mfs_core.backends.base.AsyncBackend`); vLLM's
``AsyncLLM`` must live on one event loop too (its output handler is a task of the loop it
was started on). Callers on other threads reach the loop through :meth:`EventLoopThread.run`
or ``asyncio.run_coroutine_threadsafe(coro, thread.loop)``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["EventLoopThread"]

T = TypeVar("T")


class EventLoopThread:
    """A new event loop, run forever by a daemon thread named ``name`` (started at construction).

    Attributes:
        loop: the loop; schedule work on it only from other threads with the ``*_threadsafe`` calls.
    """

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._started.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._started.set)
        self.loop.run_forever()

    @property
    def alive(self) -> bool:
        """Whether the loop still runs (False once :meth:`stop` has been called)."""
        return self._thread.is_alive() and not self.loop.is_closed()

    def in_loop(self) -> bool:
        """Whether the calling thread is the loop's own thread."""
        return threading.current_thread() is self._thread

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result (at most ``timeout`` seconds; None: no limit).

        Raises:
            RuntimeError: called on the loop's own thread (it would wait for itself), or the
                loop is stopped.
            TimeoutError: ``timeout`` passed (the coroutine is cancelled).
            Whatever ``coro`` raises.
        """
        if self.in_loop():
            coro.close()
            msg = "EventLoopThread.run was called on the loop's own thread; await the coroutine there instead"
            raise RuntimeError(msg)
        if not self.alive:
            coro.close()
            msg = f"the event loop of thread {self._thread.name!r} is stopped"
            raise RuntimeError(msg)
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop and wait at most ``timeout`` seconds for its thread; idempotent.

        Tasks still pending on the loop are left unfinished (close what runs there first).
        """
        if self.loop.is_closed():
            return
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            if not self.in_loop():
                self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()
