"""``MFSEngine``: one backend, many decoders decoded together.

``MFSSettings.scheduling`` picks how (both designs of issue 37, item 3):

* ``"lockstep"`` (default, any backend): each round the scheduler gathers the pending
  requests of every live decoder (many questions, many callers, sync or async), makes
  **one** ``backend.generate`` call, and hands each decoder its share (DESIGN.md, "Decoders
  are coroutines; the engine batches them"). One worker thread owns the backend. A round
  waits for its longest request; a new decode waits for the round in flight.
* ``"continuous"`` (``backend="vllm"``): each decoder runs as a task of its own on the
  backend's event loop and awaits its own requests from vLLM's ``AsyncLLM``
  (:class:`_ContinuousScheduler`, :mod:`mfs_core.backends.vllm_async`); vLLM's scheduler
  batches the requests of all decodes as they come (continuous batching).

Engines built from settings with the same backend fields (``scheduling`` among them) share
one scheduler, and so one loaded model.

A decoder that fails (bad input, a prompt over the context window) fails alone: its caller
gets the exception, every other decode in the round goes on.
"""

from __future__ import annotations

import asyncio
import atexit
import copy
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeoutError
from dataclasses import dataclass, field, replace
from typing import Any

from mfs_core.answers import AnswerExtractor
from mfs_core.backends import Backend, create_backend
from mfs_core.errors import BackendOutputError, GenerateTimeoutError
from mfs_core.decoders import Decoder, get_decoder
from mfs_core.decoders.common import step_sink
from mfs_core.events import EventCallback, StepEvent, StopEvent, committed_prefix
from mfs_core.prompts import render_messages, render_question, validate_question
from mfs_core.settings import MFSSettings
from mfs_core.streaming import DecodeStream
from mfs_core.tools.requests import check_answer_key, shape_requests
from mfs_core.types import Continuation, DecodeResult, GenerationRequest, StepTrace, TriggeredChoice

__all__ = ["DecodeFuture", "EngineStats", "MFSEngine", "check_outputs"]

logger = logging.getLogger(__name__)


@dataclass
class EngineStats:
    """Counters of a scheduler since it started.

    Attributes:
        generate_calls: ``backend.generate`` calls made (retries of a failed round included).
        generate_seconds: wall time inside ``backend.generate`` (seconds).
        requests: generation requests sent.
        decodes: decodes finished (successfully or not).
    """

    generate_calls: int = 0
    generate_seconds: float = 0.0
    requests: int = 0
    decodes: int = 0


class _Listener:
    """Turns one decode's progress into events for a caller's callback (worker thread).

    Counts the tokens of every round handed to the decoder, receives the decoder's finished
    steps (:func:`mfs_core.decoders.common.report_step`) and the result, and calls
    ``callback`` with :class:`StepEvent` / :class:`StopEvent`. A callback that raises is
    logged and ignored: a listener never fails a decode.
    """

    def __init__(self, index: int, callback: EventCallback, delimiter: str) -> None:
        self.index = index
        self.callback = callback
        self.delimiter = delimiter
        self.started = time.perf_counter()
        self.prompt_tokens = 0
        self.output_tokens = 0
        self.committed = ""

    def count(self, outputs: list[list[Continuation]]) -> None:
        for conts in outputs:
            self.prompt_tokens += conts[0].prompt_tokens if conts else 0
            self.output_tokens += sum(c.num_tokens for c in conts)

    def on_step(self, step: StepTrace, beams: Sequence[str]) -> None:
        if beams:
            self.committed = committed_prefix(beams, self.delimiter)
        event = StepEvent(
            index=self.index, step=copy.deepcopy(step), beams=tuple(beams), committed=self.committed,
            prompt_tokens=self.prompt_tokens, output_tokens=self.output_tokens,
            elapsed_seconds=time.perf_counter() - self.started,
        )
        self._emit(event)

    def on_stop(self, result: DecodeResult) -> None:
        self._emit(StopEvent(index=self.index, result=result, elapsed_seconds=time.perf_counter() - self.started))

    def _emit(self, event: StepEvent | StopEvent) -> None:
        try:
            self.callback(event)
        except Exception:  # a listener's bug must not fail the decode or stop the worker
            logger.warning("decode event listener raised; event dropped", exc_info=True)


class DecodeFuture(Future):
    """The future of one decode (a :class:`concurrent.futures.Future`).

    Once the engine has started a decode it can no longer be cancelled in the
    ``concurrent.futures`` sense; :meth:`abandon` asks the engine to drop it at the end of
    the round in flight instead, so an impatient caller stops costing model calls.
    """

    def __init__(self) -> None:
        super().__init__()
        self.abandoned = False
        self.on_abandon: Callable[[], None] | None = None
        """Called (on the abandoning thread) once the decode is abandoned; the continuous scheduler cancels
        the decode's call in flight with it."""

    def abandon(self, reason: str = "the caller abandoned the decode") -> None:
        """Drop this decode at the next round boundary (``scheduling="continuous"``: at once, its call in
        flight cancelled); its result becomes ``CancelledError``.

        A no-op when the decode is already done. Thread-safe (a flag read by the worker).
        """
        if not self.done():
            self.abandon_reason = reason
            self.abandoned = True
            self.cancel()  # succeeds while the worker has not taken the decode up yet
            if self.on_abandon is not None:
                self.on_abandon()


@dataclass
class _Job:
    decoder: Decoder
    future: DecodeFuture
    timeout: float | None = None
    started: float = field(default_factory=time.perf_counter)
    pending: list[GenerationRequest] | None = None
    listener: _Listener | None = None
    call: asyncio.Future | None = None  # scheduling="continuous": the decode's agenerate call in flight


def check_outputs(requests: Sequence[GenerationRequest], outputs: object) -> list[list[Continuation]]:
    """Check that a backend answered ``requests`` in the shape of the protocol.

    Args:
        requests: the R requests of one ``generate`` call.
        outputs: what the backend returned.

    Returns:
        ``outputs``, unchanged, when it holds R lists with ``requests[r].n`` continuations
        each, every one with a finite ``logprob_sum`` (nats).

    Raises:
        BackendOutputError: the first violation, naming the request and the value.
    """
    if not isinstance(outputs, list) or len(outputs) != len(requests):
        size = len(outputs) if isinstance(outputs, list) else type(outputs).__name__
        msg = f"backend returned {size} results for {len(requests)} requests"
        raise BackendOutputError(msg)
    for index, (request, conts) in enumerate(zip(requests, outputs)):
        if not isinstance(conts, list) or len(conts) != request.n:
            size = len(conts) if isinstance(conts, list) else type(conts).__name__
            msg = f"backend returned {size} continuations for request {index} with n={request.n}"
            raise BackendOutputError(msg)
        for cont in conts:
            if not math.isfinite(cont.logprob_sum):
                msg = (
                    f"backend returned logprob_sum={cont.logprob_sum} for request {index} "
                    f"(a log-probability must be finite, in (-inf, 0] nats)"
                )
                raise BackendOutputError(msg)
    return outputs


class _Scheduler:
    """Owns a backend and a worker thread that runs decoders in lockstep.

    Failure handling (each case has a test in ``tests/stress``): a round whose batched
    ``generate`` raises, returns malformed output (:func:`check_outputs`) or outlives the
    decodes' ``generate_timeout`` is retried one decode at a time, so only the decode that
    causes it fails; an abandoned decode is dropped at the next round boundary; if the
    worker thread itself dies, every decode it held fails with a ``RuntimeError`` and the
    next submission starts a new worker.
    """

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.stats = EngineStats()
        self._incoming: list[_Job] = []
        self._live: list[_Job] = []
        self._cond = threading.Condition()
        self._worker: threading.Thread | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False
        self.engines = 0
        """Open engines on this scheduler (:class:`MFSEngine` counts itself in and out); guarded by ``_SCHEDULERS_LOCK``."""

    @property
    def queued(self) -> int:
        """Decodes submitted and not yet finished (incoming plus live)."""
        with self._cond:
            return len(self._incoming) + len(self._live)

    def submit(
        self,
        decoders: Sequence[Decoder],
        listeners: Sequence[_Listener | None] | None = None,
        timeout: float | None = None,
    ) -> list[DecodeFuture]:
        listeners = listeners if listeners is not None else [None] * len(decoders)
        jobs = [
            _Job(decoder=d, future=DecodeFuture(), listener=listener, timeout=timeout)
            for d, listener in zip(decoders, listeners)
        ]
        self._enqueue(jobs)
        return [job.future for job in jobs]

    def _enqueue(self, jobs: list[_Job]) -> None:
        """Hand new ``jobs`` to the worker thread (started if none runs)."""
        with self._cond:
            self._incoming.extend(jobs)
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._run, name="mfs-engine", daemon=True)
                self._worker.start()
            self._cond.notify()

    def close(self) -> None:
        """Fail the decodes not yet finished and close the backend (``backend.close()`` if it has one)."""
        with self._cond:
            stranded, self._incoming = self._incoming, []
            self._closed = True  # an idle worker exits now (not after its 30 s wait), letting the backend go
            self._cond.notify_all()
        for job in stranded:
            self._fail(job, RuntimeError("the engine was closed before this decode started"))
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()

    def _fail(self, job: _Job, exc: BaseException) -> None:
        self.stats.decodes += 1
        if not job.future.done():
            job.future.set_exception(exc)
        job.decoder.close()

    def _advance(self, job: _Job, outputs: list[list[Continuation]] | None) -> bool:
        """Send ``outputs`` (None: start) to the job; True while it still runs."""
        try:
            if job.listener is None:
                requests = job.decoder.send(outputs) if outputs is not None else next(job.decoder)
            else:
                job.listener.count(outputs or [])
                with step_sink(job.listener.on_step):
                    requests = job.decoder.send(outputs) if outputs is not None else next(job.decoder)
        except StopIteration as stop:
            result: DecodeResult = stop.value
            result = replace(
                result,
                flops=6.0 * result.output_tokens * self.backend.num_parameters,
                num_parameters=self.backend.num_parameters,
                wall_seconds=time.perf_counter() - job.started,
            )
            self.stats.decodes += 1
            if job.listener is not None:
                job.listener.on_stop(result)
            job.future.set_result(result)
            return False
        except Exception as exc:  # a bad decode fails alone
            self.stats.decodes += 1
            job.future.set_exception(exc)
            return False
        if not requests:
            job.pending = []
            return self._advance(job, [])
        job.pending = list(requests)
        return True

    def _call_backend(self, requests: list[GenerationRequest], timeout: float | None) -> list[list[Continuation]]:
        """``backend.generate(requests)``, given up after ``timeout`` seconds (None: no limit)."""
        if timeout is None:
            return self.backend.generate(requests)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mfs-generate")
        call = self._executor.submit(self.backend.generate, requests)
        try:
            return call.result(timeout=timeout)
        except FuturesTimeoutError:
            # The hung call keeps its thread; later rounds get a fresh one.
            self._executor.shutdown(wait=False)
            self._executor = None
            msg = f"backend.generate did not return within generate_timeout={timeout} s ({len(requests)} requests)"
            raise GenerateTimeoutError(msg) from None

    def _generate(self, requests: list[GenerationRequest], timeout: float | None = None) -> list[list[Continuation]]:
        start = time.perf_counter()
        try:
            return check_outputs(requests, self._call_backend(requests, timeout))
        finally:
            self.stats.generate_calls += 1
            self.stats.generate_seconds += time.perf_counter() - start
            self.stats.requests += len(requests)

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - the worker must never strand a caller
            logger.error("the engine worker died: %r", exc, exc_info=True)
            with self._cond:
                stranded, self._live = self._live, []
                stranded += self._incoming
                self._incoming = []
                self._worker = None
            for job in stranded:
                error = RuntimeError(f"the engine worker died during this decode: {exc!r}")
                try:
                    self._fail(job, error)
                except Exception:  # noqa: BLE001 - a closing decoder must not stop the others
                    logger.debug("closing a stranded decoder failed", exc_info=True)

    def _take_incoming(self) -> bool:
        """Move new submissions into the live set; False when the worker should exit."""
        with self._cond:
            while not self._live and not self._incoming:
                if self._closed or (not self._cond.wait(timeout=30.0) and not self._incoming):
                    self._worker = None
                    return False
            incoming, self._incoming = self._incoming, []
        # A future its caller cancelled before the worker took it up is dropped; once
        # running it can no longer be cancelled, so set_result never meets a cancelled one.
        started = [job for job in incoming if job.future.set_running_or_notify_cancel()]
        for job in incoming:
            if job not in started:
                job.decoder.close()
        for job in started:
            if self._advance(job, None):
                self._live.append(job)
        return True

    def _drop_abandoned(self) -> None:
        kept = []
        for job in self._live:
            if job.future.abandoned:
                self._fail(job, CancelledError(getattr(job.future, "abandon_reason", "abandoned")))
            else:
                kept.append(job)
        self._live = kept

    def _loop(self) -> None:
        while self._take_incoming():
            self._drop_abandoned()
            live = self._live
            if not live:
                continue
            batch = [request for job in live for request in job.pending]
            timeouts = [job.timeout for job in live if job.timeout is not None]
            timeout = min(timeouts) if timeouts else None
            try:
                outputs = self._generate(batch, timeout)
            except Exception:
                logger.debug("batched generate failed; retrying each decode alone", exc_info=True)
                outputs = None
            still_live = []
            offset = 0
            for job in live:
                count = len(job.pending)
                if outputs is not None:
                    share = outputs[offset : offset + count]
                    offset += count
                else:
                    if job.future.abandoned:
                        self._fail(job, CancelledError(getattr(job.future, "abandon_reason", "abandoned")))
                        continue
                    try:
                        share = self._generate(job.pending, job.timeout)
                    except Exception as exc:
                        self._fail(job, exc)
                        continue
                if self._advance(job, share):
                    still_live.append(job)
            self._live = still_live


class _ContinuousScheduler(_Scheduler):
    """Runs each decode as a task of its own on the backend's event loop (``scheduling="continuous"``).

    A decode's task advances its decoder, awaits ``backend.agenerate`` with that decode's
    requests only (:class:`~mfs_core.backends.base.AsyncBackend`), and advances it again when
    they come back, so no decode waits for another's round: vLLM's ``AsyncLLM`` batches the
    requests of all decodes as they arrive (continuous batching). Decoders advance on the
    loop's thread, one at a time (a decoder's step is pure Python between two awaits).

    Failure handling: a call that raises, returns malformed output (:func:`check_outputs`) or
    outlives the decode's ``generate_timeout`` fails that decode only (its calls are its
    own, so there is nothing to retry apart); an abandoned decode's call in flight is
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
        self._jobs: dict[int, _Job] = {}  # running decodes by id(job); changed on the loop's thread only
        self._tasks: dict[int, asyncio.Task] = {}
        self._closing = False

    @property
    def queued(self) -> int:
        """Decodes submitted and not yet finished."""
        with self._cond:
            return len(self._jobs) + len(self._incoming)

    def _enqueue(self, jobs: list[_Job]) -> None:
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

    def _start(self, jobs: list[_Job]) -> None:
        """Take ``jobs`` up (loop's thread): one task each."""
        with self._cond:
            waiting = {id(job) for job in self._incoming}
            jobs = [job for job in jobs if id(job) in waiting]  # the others were failed by close()
            self._incoming = [job for job in self._incoming if id(job) not in {id(j) for j in jobs}]
            self._jobs.update((id(job), job) for job in jobs)
        for job in jobs:
            self._tasks[id(job)] = self._loop.create_task(self._drive(job), name="mfs-decode")

    def _cancel_call(self, job: _Job) -> None:
        """Cancel the ``agenerate`` call of an abandoned ``job`` (loop's thread)."""
        call = getattr(job, "call", None)
        if call is not None and not call.done():
            call.cancel()

    async def _drive(self, job: _Job) -> None:
        """Run one decode to its end: advance, await its requests, advance, ..."""
        try:
            if not job.future.set_running_or_notify_cancel():  # its caller cancelled it before it started
                job.decoder.close()
                return
            live = self._advance(job, None)
            while live:
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
                    self._fail(job, exc)
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


def _make_scheduler(backend: Backend, scheduling: str) -> _Scheduler:
    """The scheduler of ``backend`` for ``MFSSettings.scheduling`` (``"lockstep"`` or ``"continuous"``).

    Raises:
        TypeError: ``"continuous"`` with a backend that is not an
            :class:`~mfs_core.backends.base.AsyncBackend`.
    """
    return _ContinuousScheduler(backend) if scheduling == "continuous" else _Scheduler(backend)


_SCHEDULERS: dict[tuple, _Scheduler] = {}
_SCHEDULERS_LOCK = threading.RLock()  # re-entered by MFSEngine.__init__ inside from_settings


def _close_shared_at_exit() -> None:
    """At interpreter exit, close every shared backend still open (its engines were never closed).

    Registered again after each shared backend is made (:meth:`MFSEngine.from_settings`), so it
    runs before the exit hooks of what the backend imported (atexit runs the last registered
    first): vLLM's engine-core process is a non-daemon ``multiprocessing.Process``, which
    ``multiprocessing``'s own exit hook would otherwise wait for forever.
    """
    with _SCHEDULERS_LOCK:
        schedulers = list(_SCHEDULERS.values())
        _SCHEDULERS.clear()
    for scheduler in schedulers:
        try:
            scheduler.close()
        except Exception:  # noqa: BLE001 - the others must still close
            logger.warning("closing a backend at exit failed", exc_info=True)


class MFSEngine:
    """The decoding engine: owns (or shares) one backend and decodes many prompts together.

    Build it with :meth:`from_settings` (backends are shared between engines whose
    settings have the same backend fields) or inject a backend directly.

    Example:
        >>> engine = MFSEngine.from_settings(MFSSettings(step_beam_size=4))  # doctest: +SKIP
        >>> engine.decode(["Tom has 3 apples. He buys 4 more. How many now?"])[0].answer  # doctest: +SKIP
        '7'
    """

    def __init__(self, backend: Backend, settings: MFSSettings | None = None, *, _scheduler: _Scheduler | None = None) -> None:
        """Wrap ``backend`` with default decoder ``settings`` (``MFSSettings()`` if None)."""
        self.settings = settings if settings is not None else MFSSettings()
        self._scheduler = _scheduler if _scheduler is not None else _make_scheduler(backend, self.settings.scheduling)
        self._closed = False
        with _SCHEDULERS_LOCK:
            self._scheduler.engines += 1

    @classmethod
    def from_settings(cls, settings: MFSSettings | None = None, **overrides: Any) -> MFSEngine:
        """An engine for ``settings`` (plus keyword overrides), sharing a loaded backend.

        Raises:
            pydantic.ValidationError: a bad setting (the message names it).
            OSError / ImportError: the model or the backend's dependencies are missing.
        """
        base = settings if settings is not None else MFSSettings()
        if overrides:
            base = MFSSettings(**{**base.model_dump(), **overrides})
        key = base.backend_key()
        with _SCHEDULERS_LOCK:
            scheduler = _SCHEDULERS.get(key)
            if scheduler is None:
                scheduler = _make_scheduler(create_backend(base), base.scheduling)
                _SCHEDULERS[key] = scheduler
                atexit.unregister(_close_shared_at_exit)  # to the end of the list: it runs first at exit
                atexit.register(_close_shared_at_exit)
            return cls(scheduler.backend, base, _scheduler=scheduler)  # counted in before a close can end it

    @property
    def backend(self) -> Backend:
        """The backend this engine decodes with."""
        return self._scheduler.backend

    def close(self) -> None:
        """Close this engine; the backend closes with the last open engine that shares it.

        Engines made by :meth:`from_settings` with equal backend settings (and by
        :meth:`with_settings`) share one backend and scheduler, counted per open engine: the
        backend is closed (vLLM: its engine-core and worker processes stop; HTTP: its
        connections) when the last of them closes, and the next :meth:`from_settings` then
        loads the model again. Closing twice is a no-op. At that last close, decodes
        submitted and not yet started fail with ``RuntimeError``; a decode in its round fails
        when the closed backend refuses its next ``generate``. Also ``with
        MFSEngine.from_settings(...) as engine:``.
        """
        with _SCHEDULERS_LOCK:
            if self._closed:
                return
            self._closed = True
            self._scheduler.engines -= 1
            if self._scheduler.engines > 0:
                return
            for key, scheduler in list(_SCHEDULERS.items()):
                if scheduler is self._scheduler:
                    del _SCHEDULERS[key]
        self._scheduler.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called on this engine."""
        return self._closed

    def __enter__(self) -> MFSEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def stats(self) -> EngineStats:
        """Counters of the (possibly shared) scheduler."""
        return self._scheduler.stats

    def with_settings(self, **overrides: Any) -> MFSEngine:
        """A new engine on the same backend and scheduler with some settings changed."""
        settings = MFSSettings(**{**self.settings.model_dump(), **overrides})
        return MFSEngine(self.backend, settings, _scheduler=self._scheduler)

    def render(self, question: str, settings: MFSSettings | None = None) -> str:
        """The model prompt for ``question`` (see :func:`mfs_core.prompts.render_question`)."""
        return render_question(question, self.backend, settings or self.settings)

    def render_messages(
        self,
        messages: Sequence[dict[str, Any]],
        settings: MFSSettings | None = None,
        *,
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> str:
        """The model prompt for chat ``messages`` and ``tools`` (see :func:`mfs_core.prompts.render_messages`)."""
        return render_messages(messages, self.backend, settings or self.settings, tools=tools)

    def submit_prompts(
        self,
        prompts: Sequence[str],
        *,
        settings: MFSSettings | None = None,
        method: str = "mfs",
        on_event: EventCallback | None = None,
        answer_key: AnswerExtractor | Sequence[AnswerExtractor | None] | None = None,
        triggered_choice: TriggeredChoice | None = None,
    ) -> list[DecodeFuture]:
        """Start decoding already-rendered model ``prompts``; one future per prompt.

        Args:
            prompts: P rendered model prompts.
            settings: decoder settings (default: the engine's).
            method: registered decoder name.
            on_event: called with each decode's :class:`~mfs_core.events.StepEvent` after
                every finished step and its :class:`~mfs_core.events.StopEvent` before its
                future completes, **on the engine's worker thread**: it must be quick and
                thread-safe (see :meth:`stream_prompts` for delivery to your own thread or
                event loop). None (default) costs nothing. Events never change the
                batching: the same backend calls, the same results.
            answer_key: what the final vote groups completed paths by (default: the
                extracted answer); :class:`mfs_core.tools.ActionVote` votes over actions,
                :class:`mfs_core.answers.OptionAnswer` over a multiple-choice question's
                options (and keeps the answer trigger to its labels; φ takes only this one).
                One key for every prompt, or a list of P keys (None: the default), one per prompt.
            triggered_choice: a constraint added to every generation request of these
                decodes (:class:`~mfs_core.types.TriggeredChoice`); default: the
                ``answer_key``'s ``triggered_choice`` attribute when it has one (an
                :class:`~mfs_core.tools.ActionVote` keeping tool names to the tools given).

            Each decode's ``backend.generate`` calls are bounded by
            ``settings.generate_timeout`` (seconds; None: no limit).

        Raises:
            ValueError / TypeError: an empty prompt list or prompt, an unknown method, a list
                of answer keys whose length is not P, an ``answer_key`` for a decoder that
                takes none, or an action vote for φ
                (:data:`~mfs_core.decoders.SELECTING_DECODERS`; the message names it).
        """
        settings = settings or self.settings
        factory = get_decoder(method)
        if isinstance(prompts, str) or not isinstance(prompts, Sequence):
            msg = f"prompts must be a list of strings, got {type(prompts).__name__}"
            raise TypeError(msg)
        if not prompts:
            msg = "prompts must not be empty, got []"
            raise ValueError(msg)
        keys = list(answer_key) if isinstance(answer_key, (list, tuple)) else [answer_key] * len(prompts)
        if len(keys) != len(prompts):
            msg = f"answer_key must be one key or one per prompt ({len(prompts)}), got {len(keys)}"
            raise ValueError(msg)
        for key in keys:
            check_answer_key(method, factory, key)
        for prompt in prompts:
            validate_question(prompt)
        listeners = None
        if on_event is not None:
            listeners = [_Listener(i, on_event, settings.step_delimiter) for i in range(len(prompts))]
        decoders = []
        for prompt, key in zip(prompts, keys):
            decoder = factory(prompt, settings) if key is None else factory(prompt, settings, answer_key=key)
            decoders.append(shape_requests(decoder, prompt, key, triggered_choice))  # tool names, action grammars
        return self._scheduler.submit(decoders, listeners, timeout=settings.generate_timeout)

    def stream_prompts(
        self,
        prompts: Sequence[str],
        *,
        settings: MFSSettings | None = None,
        method: str = "mfs",
        answer_key: AnswerExtractor | Sequence[AnswerExtractor | None] | None = None,
        triggered_choice: TriggeredChoice | None = None,
    ) -> DecodeStream:
        """Start decoding ``prompts`` and return their events as they happen.

        The decodes start at the call. Iterate the returned stream on any thread
        (``for event in stream``) or event loop (``async for event in stream.aevents()``):
        per decode a :class:`~mfs_core.events.StepEvent` after each finished step, then a
        :class:`~mfs_core.events.StopEvent` holding the result; ``stream.results()`` gives
        the results in prompt order.

        Example:
            >>> for event in engine.stream_prompts([engine.render("2 + 3 = ?")]):  # doctest: +SKIP
            ...     print(event)

        Raises:
            ValueError / TypeError: as :meth:`submit_prompts`. Iterating raises the first
                decode's exception after the last event.
        """
        stream = DecodeStream()
        stream.attach(
            self.submit_prompts(prompts, settings=settings, method=method, on_event=stream.put, answer_key=answer_key,
                                triggered_choice=triggered_choice)
        )
        return stream

    def decode_prompts(
        self,
        prompts: Sequence[str],
        *,
        settings: MFSSettings | None = None,
        method: str = "mfs",
        on_event: EventCallback | None = None,
        timeout: float | None = None,
        answer_key: AnswerExtractor | Sequence[AnswerExtractor | None] | None = None,
        triggered_choice: TriggeredChoice | None = None,
    ) -> list[DecodeResult]:
        """Decode already-rendered model ``prompts`` together; blocks until all are done.

        Args:
            prompts: P rendered model prompts.
            settings: decoder settings (default: the engine's).
            method: registered decoder name.
            on_event: called on **this** thread with every decode event as it happens
                (:mod:`mfs_core.events`; ``event.index`` is the prompt's position).
            timeout: most seconds to wait for all P results (None: no limit). On expiry
                the decodes are abandoned (dropped at the next round boundary, so they stop
                costing model calls) and ``TimeoutError`` is raised.
            answer_key: what the vote groups paths by (see :meth:`submit_prompts`).
            triggered_choice: a constraint on every request (see :meth:`submit_prompts`).

        Raises:
            ValueError / TypeError: as :meth:`submit_prompts`, before anything is decoded.
            TimeoutError: ``timeout`` passed first.
            The first exception among the decodes (the others still complete).
        """
        start = dict(settings=settings, method=method, answer_key=answer_key, triggered_choice=triggered_choice)
        if on_event is None:
            futures = self.submit_prompts(prompts, **start)
            deadline = None if timeout is None else time.monotonic() + timeout
            try:
                return [
                    future.result(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
                    for future in futures
                ]
            except FuturesTimeoutError:
                _abandon(futures, f"the caller's timeout of {timeout} s passed")
                raise TimeoutError(_timeout_message(len(futures), timeout)) from None
        stream = self.stream_prompts(prompts, **start)
        events = stream.events(timeout)
        while True:
            try:
                event = next(events)
            except StopIteration:
                break
            except TimeoutError:
                stream.abandon(f"the caller's timeout of {timeout} s passed")
                raise TimeoutError(_timeout_message(len(stream.futures), timeout)) from None
            except Exception:  # a failed decode: results() raises it, as without events
                break
            on_event(event)
        return stream.results()

    async def adecode_prompts(
        self,
        prompts: Sequence[str],
        *,
        settings: MFSSettings | None = None,
        method: str = "mfs",
        on_event: EventCallback | None = None,
        timeout: float | None = None,
        answer_key: AnswerExtractor | Sequence[AnswerExtractor | None] | None = None,
        triggered_choice: TriggeredChoice | None = None,
    ) -> list[DecodeResult]:
        """Async :meth:`decode_prompts`, with the same arguments and errors: awaits the worker
        without blocking the event loop.

        ``on_event`` (if given) is called on this event loop's thread with every event.
        Cancelling the awaiting task (``task.cancel()``, ``asyncio.wait_for``) abandons the
        decodes, as ``timeout`` does: the engine drops them at the next round boundary.

        Raises:
            ValueError / TypeError: as :meth:`submit_prompts`, before anything is decoded.
            TimeoutError: ``timeout`` passed first.
            The first exception among the decodes (the others still complete).
        """
        start = dict(settings=settings, method=method, answer_key=answer_key, triggered_choice=triggered_choice)
        if on_event is None:
            futures = self.submit_prompts(prompts, **start)
            try:
                return list(await asyncio.wait_for(asyncio.gather(*(asyncio.wrap_future(f) for f in futures)), timeout))
            except asyncio.TimeoutError:
                _abandon(futures, f"the caller's timeout of {timeout} s passed")
                raise TimeoutError(_timeout_message(len(futures), timeout)) from None
            except BaseException:
                _abandon(futures, "the awaiting task was cancelled or failed")
                raise
        stream = self.stream_prompts(prompts, **start)
        events = stream.aevents(timeout)
        try:
            while True:
                try:
                    event = await events.__anext__()
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    stream.abandon(f"the caller's timeout of {timeout} s passed")
                    raise TimeoutError(_timeout_message(len(stream.futures), timeout)) from None
                except Exception:  # a failed decode: results() raises it, as without events
                    break
                on_event(event)
        except BaseException:
            stream.abandon("the awaiting task was cancelled or failed")
            raise
        return stream.results()

    def decode(
        self,
        questions: Sequence[str],
        *,
        settings: MFSSettings | None = None,
        method: str = "mfs",
        on_event: EventCallback | None = None,
        timeout: float | None = None,
        answer_key: AnswerExtractor | Sequence[AnswerExtractor | None] | None = None,
        triggered_choice: TriggeredChoice | None = None,
    ) -> list[DecodeResult]:
        """Decode ``questions`` (rendered by ``settings.prompt_format``) in lockstep.

        Args:
            questions: Q questions, each a non-blank string.
            settings: decoder settings for these decodes (default: the engine's).
            method: registered decoder name (``"mfs"``; baselines when installed).
            on_event: called on this thread with each decode event as it happens
                (:class:`~mfs_core.events.StepEvent` per finished step, then
                :class:`~mfs_core.events.StopEvent`); None (default) costs nothing.
            timeout: most seconds to wait (None: no limit); see :meth:`decode_prompts`.
            answer_key, triggered_choice: see :meth:`submit_prompts`.

        Returns:
            Q results, in order, each with ``flops = 6·output_tokens·num_parameters``.

        Raises:
            TypeError: ``questions`` is a single string, or not a list.
            ValueError: an empty list or a blank question (naming it), an unknown method, a
                prompt over the context window.
            TimeoutError: ``timeout`` passed first.
        """
        settings = settings or self.settings
        return self.decode_prompts(self._render_questions(questions, settings), settings=settings, method=method,
                                   on_event=on_event, timeout=timeout, answer_key=answer_key,
                                   triggered_choice=triggered_choice)

    async def adecode(
        self,
        questions: Sequence[str],
        *,
        settings: MFSSettings | None = None,
        method: str = "mfs",
        on_event: EventCallback | None = None,
        timeout: float | None = None,
        answer_key: AnswerExtractor | Sequence[AnswerExtractor | None] | None = None,
        triggered_choice: TriggeredChoice | None = None,
    ) -> list[DecodeResult]:
        """Async :meth:`decode`, with the same arguments and errors (``on_event`` runs on the event loop's thread)."""
        settings = settings or self.settings
        return await self.adecode_prompts(self._render_questions(questions, settings), settings=settings, method=method,
                                          on_event=on_event, timeout=timeout, answer_key=answer_key,
                                          triggered_choice=triggered_choice)

    def _render_questions(self, questions: Sequence[str], settings: MFSSettings) -> list[str]:
        """The model prompts of ``questions`` (:meth:`render`), for :meth:`decode` and :meth:`adecode`.

        Raises:
            TypeError: a single string, or not a list.
            ValueError: an empty list, or a blank question (naming it).
        """
        if isinstance(questions, str) or not isinstance(questions, Sequence):
            shown = f"a single string {questions!r:.60}" if isinstance(questions, str) else type(questions).__name__
            msg = f"questions must be a list of strings, got {shown}"
            raise TypeError(msg)
        if not questions:
            msg = "questions must not be empty, got []"
            raise ValueError(msg)
        return [self.render(q, settings) for q in questions]


def _timeout_message(count: int, timeout: float | None) -> str:
    """The ``TimeoutError`` message of ``count`` decodes that outlived ``timeout`` seconds."""
    return f"{count} decode(s) did not finish within timeout={timeout} s"


def _abandon(futures: Sequence[DecodeFuture], reason: str) -> None:
    """Abandon every decode of ``futures`` (done ones are left alone, :meth:`DecodeFuture.abandon`)."""
    for future in futures:
        future.abandon(reason)
