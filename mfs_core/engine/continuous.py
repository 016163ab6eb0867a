"""The continuous scheduler (``MFSSettings.scheduling="continuous"``, ``backend="vllm"``).

Each decoder runs as a task of its own on the backend's event loop and awaits its own
requests from vLLM's ``AsyncLLM`` (:mod:`mfs_core.backends.vllm_async`); vLLM's scheduler
batches the requests of all decodes as they come (continuous batching), so no decode waits
for another's longest rollout.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import CancelledError
from typing import Any

from mfs_core.backends import Backend
from mfs_core.engine.scheduler import Job, Scheduler, check_outputs
from mfs_core.errors import BackendDeadError, GenerateTimeoutError
from mfs_core.types import Continuation, GenerationRequest

__all__ = ["ContinuousScheduler"]

logger = logging.getLogger(__name__)


class ContinuousScheduler(Scheduler):
    """Runs each decode as a task of its own on the backend's event loop (``scheduling="continuous"``).

    A decode's task advances its decoder, awaits ``backend.agenerate`` with that decode's
    requests only (:class:`~mfs_core.backends.base.AsyncBackend`), and advances it again when
    they come back, so no decode waits for another's round: vLLM's ``AsyncLLM`` batches the
    requests of all decodes as they arrive (continuous batching). Decoders advance on the
    loop's thread, one at a time (a decoder's step is pure Python between two awaits).

    Failure handling: a call that raises, returns malformed output (:func:`check_outputs`) or
    outlives the decode's ``generate_timeout`` fails that decode only (its calls are its
    own, so there is nothing to retry apart; once the backend is dead, :attr:`dead_reason`, it fails
    with :class:`~mfs_core.errors.BackendDeadError`); an abandoned decode's call in flight is
    cancelled at once (vLLM aborts its requests) and the decode fails with
    ``CancelledError``; :meth:`close` fails the decodes still running with ``RuntimeError``.

    :attr:`stats`: ``generate_calls`` counts ``agenerate`` calls (one per decode round), and
    ``generate_seconds`` sums their wall times, which overlap: it may exceed the elapsed time.
    """

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        if not callable(getattr(backend, "agenerate", None)) or getattr(backend, "loop", None) is None:
            msg = (f"scheduling='continuous' needs a backend with agenerate() and an event loop "
                   f"(AsyncVLLMBackend: backend='vllm'), got {type(backend).__name__}")
            raise TypeError(msg)
        self._loop = backend.loop
        self._jobs: dict[int, Job] = {}  # running decodes by id(job); changed on the loop's thread only
        self._tasks: dict[int, asyncio.Task] = {}
        self._closing = False

    @property
    def queued(self) -> int:
        """Decodes submitted and not yet finished."""
        with self._cond:
            return len(self._jobs) + len(self._incoming)

    def _enqueue(self, jobs: list[Job]) -> None:
        """Start a task per job on the loop (or fail them at once once :meth:`close` began)."""
        with self._cond:
            if self._closing:
                for job in jobs:
                    self._fail(job, RuntimeError("the engine was closed before this decode started"))
                return
            self._incoming.extend(jobs)  # counted in queued until the loop takes them up
        for job in jobs:
            job.future.on_abandon = lambda job=job: self._call_soon(self._cancel_call, job)
        self._call_soon(self._start, jobs)

    def _call_soon(self, callback: Any, *args: Any) -> None:
        """``callback(*args)`` on the loop's thread; ignored once the loop is closed."""
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed: close() has failed every decode already
            logger.debug("the engine's event loop is closed; %s dropped", getattr(callback, "__name__", callback))

    def _start(self, jobs: list[Job]) -> None:
        """Take ``jobs`` up (loop's thread): one task each."""
        with self._cond:
            waiting = {id(job) for job in self._incoming}
            jobs = [job for job in jobs if id(job) in waiting]  # the others were failed by close()
            self._incoming = [job for job in self._incoming if id(job) not in {id(j) for j in jobs}]
            self._jobs.update((id(job), job) for job in jobs)
        for job in jobs:
            self._tasks[id(job)] = self._loop.create_task(self._drive(job), name="mfs-decode")

    def _cancel_call(self, job: Job) -> None:
        """Cancel the ``agenerate`` call of an abandoned ``job`` (loop's thread)."""
        call = getattr(job, "call", None)
        if call is not None and not call.done():
            call.cancel()

    async def _drive(self, job: Job) -> None:
        """Run one decode to its end: advance, await its requests, advance, ..."""
        try:
            if not job.future.set_running_or_notify_cancel():  # its caller cancelled it before it started
                job.decoder.close()
                return
            live = self._advance(job, None)
            while live:
                try:
                    self.check_alive()  # died since: fail at once, no call to a dead engine
                except BackendDeadError as dead:
                    self._fail(job, dead)
                    return
                if job.future.abandoned:
                    self._fail(job, CancelledError(getattr(job.future, "abandon_reason", "abandoned")))
                    return
                job.call = asyncio.ensure_future(self._agenerate(job.pending, job.timeout))
                try:
                    outputs = await job.call
                except asyncio.CancelledError:
                    if not job.future.abandoned:
                        raise  # the engine is closing (close() cancels this task)
                    self._fail(job, CancelledError(getattr(job.future, "abandon_reason", "abandoned")))
                    return
                except Exception as exc:
                    self._fail(job, self.dead_error(exc) or exc)  # vLLM's engine died: BackendDeadError
                    return
                finally:
                    job.call = None
                live = self._advance(job, outputs)
        except asyncio.CancelledError:
            self._fail(job, RuntimeError("the engine was closed during this decode"))
            raise
        except Exception as exc:  # noqa: BLE001 - the scheduler's own bug must not strand the caller
            logger.error("a continuous decode task failed: %r", exc, exc_info=True)
            self._fail(job, RuntimeError(f"the engine failed during this decode: {exc!r}"))
        finally:
            with self._cond:
                self._jobs.pop(id(job), None)
            self._tasks.pop(id(job), None)

    async def _agenerate(self, requests: list[GenerationRequest], timeout: float | None) -> list[list[Continuation]]:
        """``backend.agenerate(requests)``, checked, given up after ``timeout`` seconds (None: no limit)."""
        start = time.perf_counter()
        try:
            try:
                outputs = await asyncio.wait_for(self.backend.agenerate(requests), timeout)
            except asyncio.TimeoutError:
                msg = f"backend.agenerate did not return within generate_timeout={timeout} s ({len(requests)} requests)"
                raise GenerateTimeoutError(msg) from None
            return check_outputs(requests, outputs)
        finally:
            self.stats.generate_calls += 1
            self.stats.generate_seconds += time.perf_counter() - start
            self.stats.requests += len(requests)

    def close(self) -> None:
        """Fail the decodes still running (``RuntimeError``), then close the backend (its loop with it)."""
        with self._cond:
            self._closing = True

        async def cancel_all() -> None:
            tasks = list(self._tasks.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            with self._cond:
                stranded = list(self._jobs.values()) + self._incoming
                self._incoming = []
            for job in stranded:  # tasks cancelled before their first step never ran their handler
                self._fail(job, RuntimeError("the engine was closed during this decode"))

        try:
            if not self._loop.is_closed():
                asyncio.run_coroutine_threadsafe(cancel_all(), self._loop).result(timeout=60.0)
        except Exception:  # noqa: BLE001 - closing goes on: the backend must still stop its processes
            logger.warning("cancelling the running decodes failed", exc_info=True)
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()

