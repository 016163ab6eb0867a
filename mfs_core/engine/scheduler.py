"""What both schedulers share: the base :class:`Scheduler`, what it holds per decode (its future, its
event listener, its job record), the check of a backend's answer, and the counters every scheduler keeps.

Shared by the lockstep (:mod:`mfs_core.engine.lockstep`) and the continuous
(:mod:`mfs_core.engine.continuous`) schedulers.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace

from mfs_core.backends import Backend
from mfs_core.decoders import Decoder
from mfs_core.decoders.common import step_sink
from mfs_core.errors import BackendDeadError, BackendOutputError
from mfs_core.events import EventCallback, StepEvent, StopEvent, committed_prefix
from mfs_core.types import Continuation, DecodeResult, GenerationRequest, StepTrace

__all__ = ["DecodeFuture", "EngineStats", "Scheduler", "backend_dead_reason", "check_outputs", "share_group"]

logger = logging.getLogger(__name__)

_SHARE_GROUP: contextvars.ContextVar[object | None] = contextvars.ContextVar("mfs_share_group", default=None)


@contextlib.contextmanager
def share_group(key: object) -> Iterator[None]:
    """Decodes submitted inside this block count as one party for the lockstep scheduler's fair share
    (:attr:`~mfs_core.engine.lockstep.LockstepScheduler.fair_share_tokens`): their attained service is
    summed, so a request of ``n`` decodes gets the share of one request, not of ``n`` (``mfs serve``
    groups each HTTP request's decodes). Outside any block each decode is its own party.

    Args:
        key: any hashable value naming the party (e.g. a request id); decodes with equal keys share.
    """
    token = _SHARE_GROUP.set(key)
    try:
        yield
    finally:
        _SHARE_GROUP.reset(token)


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


class Listener:
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
        self.stopped = threading.Event()
        """Set by :meth:`abandon`; the lockstep scheduler puts it on the decode's requests
        (:attr:`~mfs_core.types.GenerationRequest.cancel`), so a backend that can stop mid-call does."""
        self.on_abandon: Callable[[], None] | None = None
        """Called (on the abandoning thread) once the decode is abandoned; the continuous scheduler cancels
        the decode's call in flight with it."""

    def abandon(self, reason: str = "the caller abandoned the decode") -> None:
        """Drop this decode at the next round boundary (``scheduling="continuous"``: at once, its call in
        flight cancelled; under lockstep the transformers backend ends its rows of the round in flight
        within one token step and the HTTP backend cuts off its POSTs in flight); its result becomes ``CancelledError``.

        A no-op when the decode is already done. Thread-safe (a flag read by the worker).
        """
        if not self.done():
            self.abandon_reason = reason
            self.abandoned = True
            self.stopped.set()
            self.cancel()  # succeeds while the worker has not taken the decode up yet
            if self.on_abandon is not None:
                self.on_abandon()


@dataclass
class Job:
    """One submitted decode as a scheduler holds it: the decoder (a generator of request batches), the
    caller's future, the ``generate_timeout`` of its calls (seconds), when it started, the requests it waits
    on, its listener, the party it shares with (:func:`share_group`; by default the job itself) and
    (continuous scheduling) its ``agenerate`` call in flight."""

    decoder: Decoder
    future: DecodeFuture
    timeout: float | None = None
    started: float = field(default_factory=time.perf_counter)
    pending: list[GenerationRequest] | None = None
    listener: Listener | None = None
    group: object = None
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


def backend_dead_reason(backend: object) -> str | None:
    """Why ``backend`` can no longer serve, for good (its ``dead_reason``: one line), or None.

    A backend may expose ``dead_reason`` (vLLM: its engine core died or it was closed; transformers:
    a fatal device error); one without it is taken as alive.
    """
    reason = getattr(backend, "dead_reason", None)
    return reason if isinstance(reason, str) and reason else None


class Scheduler:
    """What both schedulers share: the backend, the counters, the decodes submitted and not yet
    taken up, the count of open engines, and how a decoder is advanced, finished or failed.

    Subclasses start the submitted jobs (:meth:`_enqueue`), report :attr:`queued` and
    :meth:`close` the backend.
    """

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.stats = EngineStats()
        self._incoming: list[Job] = []
        self._cond = threading.Condition()
        self.engines = 0
        """Open engines on this scheduler, counted in and out by :mod:`mfs_core.engine.registry` under its lock."""
        self._dead: str | None = None

    @property
    def dead_reason(self) -> str | None:
        """Why this scheduler's backend can no longer serve (one line), or None while it can.

        Set once a backend call failed with the backend dead (:meth:`dead_error`), or read from the
        backend's own ``dead_reason`` (:func:`backend_dead_reason`); it never goes back to None.
        """
        return self._dead or backend_dead_reason(self.backend)

    def check_alive(self) -> None:
        """Raise at once when the backend is dead.

        Raises:
            BackendDeadError: :attr:`dead_reason` is set (the message says how to get a new backend).
        """
        reason = self.dead_reason
        if reason is not None:
            raise BackendDeadError(reason, getattr(self.backend, "model_name", None))

    def dead_error(self, exc: BaseException) -> BackendDeadError | None:
        """The :class:`BackendDeadError` that the failed backend call's ``exc`` stands for, or None while the
        backend is alive (``exc`` is then the decode's own failure). Records the death for :attr:`dead_reason`."""
        if isinstance(exc, BackendDeadError):
            self._dead = self._dead or exc.reason
            return exc
        reason = self.dead_reason
        if reason is None:
            return None
        self._dead = reason
        error = BackendDeadError(reason, getattr(self.backend, "model_name", None))
        error.__cause__ = exc
        return error

    @property
    def queued(self) -> int:
        """Decodes submitted and not yet finished."""
        raise NotImplementedError

    def submit(
        self,
        decoders: Sequence[Decoder],
        listeners: Sequence[Listener | None] | None = None,
        timeout: float | None = None,
    ) -> list[DecodeFuture]:
        listeners = listeners if listeners is not None else [None] * len(decoders)
        group = _SHARE_GROUP.get()
        jobs = [
            Job(decoder=d, future=DecodeFuture(), listener=listener, timeout=timeout)
            for d, listener in zip(decoders, listeners)
        ]
        for job in jobs:
            job.group = ("share_group", group) if group is not None else ("job", id(job))
        self._enqueue(jobs)
        return [job.future for job in jobs]

    def _enqueue(self, jobs: list[Job]) -> None:
        """Start ``jobs`` (the subclass's way)."""
        raise NotImplementedError

    def close(self) -> None:
        """Fail the decodes not yet finished and close the backend."""
        raise NotImplementedError

    def _fail(self, job: Job, exc: BaseException) -> None:
        self.stats.decodes += 1
        if not job.future.done():
            job.future.set_exception(exc)
        job.decoder.close()

    def _advance(self, job: Job, outputs: list[list[Continuation]] | None) -> bool:
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
