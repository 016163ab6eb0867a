"""The lockstep scheduler (``MFSSettings.scheduling="lockstep"``, any backend).

Each round it gathers the pending requests of every live decoder (many questions, many
callers, sync or async), makes **one** ``backend.generate`` call, and hands each decoder its
share (DESIGN.md, "Decoders are coroutines; the engine batches them"). One worker thread owns
the backend. A round waits for its longest request; a new decode waits for the round in flight.

Fair share (:attr:`LockstepScheduler.fair_share_tokens` F > 0; ``mfs serve`` sets it): decodes
belong to parties (:func:`~mfs_core.engine.scheduler.share_group`: ``mfs serve`` makes each HTTP
request one; otherwise each decode is its own), and a party's *attained service* is the output
tokens its decodes' calls returned. A call serves only the decodes of parties within F of the
least-served live party, and a party that starts beside running ones enters with 2F fewer than
the least served of them. So a small request that arrives while a large one runs (``n = 8``
decodes at the limits) has its rounds alone for F tokens instead of waiting each round for the
large request's longest rollout, and then shares the calls; nobody starves (the least-served
party is always served). This is least-attained-service scheduling with the newcomer's head
start capped (the cap plays the part of the "counter lift" of Sheng et al. 2024, *Fairness in
Serving Large Language Models*, OSDI, which lifts a new client's counter to the least active
one's). Samples do not change (each request has its own seed); only which call a round goes to.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from concurrent.futures import CancelledError, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeoutError

from mfs_core.backends import Backend
from mfs_core.engine.scheduler import Job, Scheduler, check_outputs
from mfs_core.errors import BackendDeadError, GenerateTimeoutError
from mfs_core.types import Continuation, GenerationRequest

__all__ = ["LockstepScheduler"]

logger = logging.getLogger(__name__)


class LockstepScheduler(Scheduler):
    """Owns a backend and a worker thread that runs decoders in lockstep.

    Failure handling (each case has a test in ``tests/stress``): a round whose batched
    ``generate`` raises, returns malformed output (:func:`check_outputs`) or outlives the
    decodes' ``generate_timeout`` is retried one decode at a time, so only the decode that
    causes it fails, unless the backend is dead (:attr:`dead_reason`): then every live decode
    fails with :class:`~mfs_core.errors.BackendDeadError` at once; an abandoned decode is dropped
    at the next round boundary, and its requests in the round in flight carry its stop event
    (:attr:`~mfs_core.types.GenerationRequest.cancel`),
    so the transformers backend ends their rows within one token step and the HTTP backend cuts
    off their POSTs (the server aborts them); if the
    worker thread itself dies, every decode it held fails with a ``RuntimeError`` and the
    next submission starts a new worker.
    """

    def __init__(self, backend: Backend, fair_share_tokens: int = 0) -> None:
        super().__init__(backend)
        if fair_share_tokens < 0:
            msg = f"fair_share_tokens must be >= 0 (output tokens; 0: every live decode in every call), got {fair_share_tokens}"
            raise ValueError(msg)
        self.fair_share_tokens = fair_share_tokens
        """F of the module docstring's fair share, in output tokens; 0 (default): each call serves every live
        decode (the most batching: what ``mfs bench`` and the adapters want)."""
        self._live: list[Job] = []
        self._service: dict[object, int] = {}  # fair share: output tokens served per live party
        self._worker: threading.Thread | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    @property
    def queued(self) -> int:
        """Decodes submitted and not yet finished (incoming plus live)."""
        with self._cond:
            return len(self._incoming) + len(self._live)

    def _enqueue(self, jobs: list[Job]) -> None:
        """Hand new ``jobs`` to the worker thread (started if none runs)."""
        with self._cond:
            self._incoming.extend(jobs)
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._run, name="mfs-engine", daemon=True)
                self._worker.start()
            self._cond.notify()

    def close(self) -> None:
        """Fail the decodes not yet finished and close the backend (``backend.close()`` if it has one).

        An idle worker thread (no decode in its round) is joined first, for at most 5 s, so it has left
        when this returns; a worker in a round is not waited for (its decodes fail at the next ``generate``).
        """
        with self._cond:
            stranded, self._incoming = self._incoming, []
            self._closed = True  # an idle worker exits now (not after its 30 s wait), letting the backend go
            self._cond.notify_all()
            idle_worker = self._worker if not self._live else None
        if idle_worker is not None and idle_worker is not threading.current_thread():
            # wait (bounded) for the idle worker to leave before the backend goes: at interpreter exit a
            # worker still unwinding beside torch's teardown aborted the process ("terminate called
            # without an active exception", exit 134) on about half of `mfs ask`'s runs
            idle_worker.join(timeout=5.0)
        for job in stranded:
            self._fail(job, RuntimeError("the engine was closed before this decode started"))
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()

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
        if self.fair_share_tokens:  # a new party enters with at most 2F tokens of head start
            live = {job.group for job in self._live}
            self._service = {group: tokens for group, tokens in self._service.items() if group in live}
            entry = max(0, min(self._service.values(), default=0) - 2 * self.fair_share_tokens)
            for job in started:
                self._service.setdefault(job.group, entry)
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

    def _served(self) -> list[Job]:
        """The live decodes the next call serves: all, or (fair share) those of the parties within F tokens of
        the least served."""
        if not self.fair_share_tokens:
            return self._live
        for job in self._live:  # decodes that started before fair share was switched on
            self._service.setdefault(job.group, 0)
        least = min(self._service[job.group] for job in self._live)
        return [job for job in self._live if self._service[job.group] <= least + self.fair_share_tokens]

    def _fail_if_dead(self, cause: BaseException | None = None) -> bool:
        """Fail every live decode with :class:`~mfs_core.errors.BackendDeadError` (from ``cause``, the failed
        call) once the backend is dead (no retry one by one: nothing would answer); True when it did."""
        if self.dead_reason is None:
            return False
        for job in self._live:
            error = BackendDeadError(self.dead_reason, getattr(self.backend, "model_name", None))
            error.__cause__ = cause
            self._fail(job, error)
        self._live = []
        return True

    def _loop(self) -> None:
        while self._take_incoming():
            self._drop_abandoned()
            if not self._live or self._fail_if_dead():
                continue
            live = self._served()
            # each request carries its decode's stop event: a backend that can, stops an abandoned decode mid-call
            batch = [dataclasses.replace(request, cancel=job.future.stopped) for job in live for request in job.pending]
            timeouts = [job.timeout for job in live if job.timeout is not None]
            timeout = min(timeouts) if timeouts else None
            try:
                outputs = self._generate(batch, timeout)
            except Exception as exc:
                if self.dead_error(exc) is not None:  # the backend died: every decode fails, none is retried
                    self._fail_if_dead(exc)
                    continue
                logger.debug("batched generate failed; retrying each decode alone", exc_info=True)
                outputs = None
            still_live = []
            offset = 0
            for job in live:
                count = len(job.pending)
                share = outputs[offset : offset + count] if outputs is not None else None
                offset += count
                if job.future.abandoned:  # its rows may have ended mid-call ("abort"): no decoder sees them
                    self._fail(job, CancelledError(getattr(job.future, "abandon_reason", "abandoned")))
                    continue
                if share is None:  # the batched call failed: this decode alone
                    try:
                        share = self._generate(job.pending, job.timeout)
                    except Exception as exc:
                        self._fail(job, self.dead_error(exc) or exc)
                        continue
                if self.fair_share_tokens:
                    self._service[job.group] += sum(c.num_tokens for continuations in share for c in continuations)
                if self._advance(job, share):
                    still_live.append(job)
            if live is not self._live:  # fair share: the decodes this call did not serve wait for the next
                served = {id(job) for job in live}
                still_live = [job for job in self._live if id(job) not in served] + still_live
            self._live = still_live

