"""``MFSEngine``: one backend, many decoders decoded in lockstep.

Each round the scheduler gathers the pending requests of every live decoder (many
questions, many callers, sync or async), makes **one** ``backend.generate`` call, and hands
each decoder its share (DESIGN.md, "Decoders are coroutines; the engine batches them").
One worker thread owns the backend. Engines built from settings with the same backend
fields share one scheduler, and so one loaded model.

A decoder that fails (bad input, a prompt over the context window) fails alone: its caller
gets the exception, every other decode in the round goes on.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from mfs_core.backends import Backend, create_backend
from mfs_core.decoders import Decoder, get_decoder
from mfs_core.decoders.common import step_sink
from mfs_core.events import EventCallback, StepEvent, StopEvent, committed_prefix
from mfs_core.prompts import render_messages, render_question, validate_question
from mfs_core.settings import MFSSettings
from mfs_core.streaming import DecodeStream
from mfs_core.types import Continuation, DecodeResult, GenerationRequest, StepTrace

__all__ = ["EngineStats", "MFSEngine"]

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


@dataclass
class _Job:
    decoder: Decoder
    future: Future
    started: float = field(default_factory=time.perf_counter)
    pending: list[GenerationRequest] | None = None
    listener: _Listener | None = None


class _Scheduler:
    """Owns a backend and a worker thread that runs decoders in lockstep."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.stats = EngineStats()
        self._incoming: list[_Job] = []
        self._cond = threading.Condition()
        self._worker: threading.Thread | None = None

    def submit(self, decoders: Sequence[Decoder], listeners: Sequence[_Listener | None] | None = None) -> list[Future]:
        listeners = listeners if listeners is not None else [None] * len(decoders)
        jobs = [_Job(decoder=d, future=Future(), listener=listener) for d, listener in zip(decoders, listeners)]
        with self._cond:
            self._incoming.extend(jobs)
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._run, name="mfs-engine", daemon=True)
                self._worker.start()
            self._cond.notify()
        return [job.future for job in jobs]

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

    def _generate(self, requests: list[GenerationRequest]) -> list[list[Continuation]]:
        start = time.perf_counter()
        try:
            return self.backend.generate(requests)
        finally:
            self.stats.generate_calls += 1
            self.stats.generate_seconds += time.perf_counter() - start
            self.stats.requests += len(requests)

    def _run(self) -> None:
        live: list[_Job] = []
        while True:
            with self._cond:
                while not live and not self._incoming:
                    if not self._cond.wait(timeout=30.0) and not self._incoming:
                        self._worker = None
                        return
                incoming, self._incoming = self._incoming, []
            # A future its caller cancelled before the worker took it up is dropped; once
            # running it can no longer be cancelled, so set_result never meets a cancelled one.
            started = [job for job in incoming if job.future.set_running_or_notify_cancel()]
            for job in incoming:
                if job not in started:
                    job.decoder.close()
            live.extend(job for job in started if self._advance(job, None))
            if not live:
                continue
            batch = [request for job in live for request in job.pending]
            try:
                outputs = self._generate(batch)
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
                    try:
                        share = self._generate(job.pending)
                    except Exception as exc:
                        self.stats.decodes += 1
                        job.future.set_exception(exc)
                        job.decoder.close()
                        continue
                if self._advance(job, share):
                    still_live.append(job)
            live = still_live


_SCHEDULERS: dict[tuple, _Scheduler] = {}
_SCHEDULERS_LOCK = threading.Lock()


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
        self._scheduler = _scheduler if _scheduler is not None else _Scheduler(backend)

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
                scheduler = _Scheduler(create_backend(base))
                _SCHEDULERS[key] = scheduler
        return cls(scheduler.backend, base, _scheduler=scheduler)

    @property
    def backend(self) -> Backend:
        """The backend this engine decodes with."""
        return self._scheduler.backend

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

    def render_messages(self, messages: Sequence[dict[str, str]], settings: MFSSettings | None = None) -> str:
        """The model prompt for chat ``messages`` (see :func:`mfs_core.prompts.render_messages`)."""
        return render_messages(messages, self.backend, settings or self.settings)

    def submit_prompts(
        self,
        prompts: Sequence[str],
        *,
        settings: MFSSettings | None = None,
        method: str = "mfs",
        on_event: EventCallback | None = None,
    ) -> list[Future]:
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

        Raises:
            ValueError / TypeError: an empty prompt list or prompt, an unknown method.
        """
        settings = settings or self.settings
        factory = get_decoder(method)
        if isinstance(prompts, str) or not isinstance(prompts, Sequence):
            msg = f"prompts must be a list of strings, got {type(prompts).__name__}"
            raise TypeError(msg)
        if not prompts:
            msg = "prompts must not be empty, got []"
            raise ValueError(msg)
        for prompt in prompts:
            validate_question(prompt)
        listeners = None
        if on_event is not None:
            listeners = [_Listener(i, on_event, settings.step_delimiter) for i in range(len(prompts))]
        return self._scheduler.submit([factory(prompt, settings) for prompt in prompts], listeners)

    def stream_prompts(
        self, prompts: Sequence[str], *, settings: MFSSettings | None = None, method: str = "mfs"
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
        stream.attach(self.submit_prompts(prompts, settings=settings, method=method, on_event=stream.put))
        return stream

    def decode_prompts(
        self,
        prompts: Sequence[str],
        *,
        settings: MFSSettings | None = None,
        method: str = "mfs",
        on_event: EventCallback | None = None,
    ) -> list[DecodeResult]:
        """Decode already-rendered model ``prompts`` together; blocks until all are done.

        Args:
            prompts: P rendered model prompts.
            settings: decoder settings (default: the engine's).
            method: registered decoder name.
            on_event: called on **this** thread with every decode event as it happens
                (:mod:`mfs_core.events`; ``event.index`` is the prompt's position).

        Raises:
            The first exception among the decodes (the others still complete).
        """
        if on_event is None:
            futures = self.submit_prompts(prompts, settings=settings, method=method)
            return [future.result() for future in futures]
        stream = self.stream_prompts(prompts, settings=settings, method=method)
        events = iter(stream)
        while True:
            try:
                event = next(events)
            except StopIteration:
                break
            except Exception:  # a failed decode: results() raises it, as without events
                break
            on_event(event)
        return stream.results()

    def decode(
        self,
        questions: Sequence[str],
        *,
        settings: MFSSettings | None = None,
        method: str = "mfs",
        on_event: EventCallback | None = None,
    ) -> list[DecodeResult]:
        """Decode ``questions`` (rendered by ``settings.prompt_format``) in lockstep.

        Args:
            questions: Q questions, each a non-blank string.
            settings: decoder settings for these decodes (default: the engine's).
            method: registered decoder name (``"mfs"``; baselines when installed).
            on_event: called on this thread with each decode event as it happens
                (:class:`~mfs_core.events.StepEvent` per finished step, then
                :class:`~mfs_core.events.StopEvent`); None (default) costs nothing.

        Returns:
            Q results, in order, each with ``flops = 6·output_tokens·num_parameters``.

        Raises:
            ValueError / TypeError: an empty list or question (naming it), an unknown method,
                a prompt over the context window.
        """
        settings = settings or self.settings
        if isinstance(questions, str):
            msg = f"questions must be a list of strings, got a single string {questions!r:.60}"
            raise TypeError(msg)
        if not questions:
            msg = "questions must not be empty, got []"
            raise ValueError(msg)
        prompts = [self.render(q, settings) for q in questions]
        return self.decode_prompts(prompts, settings=settings, method=method, on_event=on_event)

    async def adecode_prompts(
        self,
        prompts: Sequence[str],
        *,
        settings: MFSSettings | None = None,
        method: str = "mfs",
        on_event: EventCallback | None = None,
    ) -> list[DecodeResult]:
        """Async :meth:`decode_prompts`: awaits the worker without blocking the event loop.

        ``on_event`` (if given) is called on this event loop's thread with every event.
        """
        if on_event is None:
            futures = self.submit_prompts(prompts, settings=settings, method=method)
            return list(await asyncio.gather(*(asyncio.wrap_future(f) for f in futures)))
        stream = self.stream_prompts(prompts, settings=settings, method=method)
        events = stream.aevents()
        while True:
            try:
                event = await events.__anext__()
            except StopAsyncIteration:
                break
            except Exception:  # a failed decode: results() raises it, as without events
                break
            on_event(event)
        return stream.results()

    async def adecode(
        self,
        questions: Sequence[str],
        *,
        settings: MFSSettings | None = None,
        method: str = "mfs",
        on_event: EventCallback | None = None,
    ) -> list[DecodeResult]:
        """Async :meth:`decode` (``on_event`` runs on the event loop's thread)."""
        settings = settings or self.settings
        if isinstance(questions, str) or not questions:
            msg = f"questions must be a non-empty list of strings, got {questions!r:.60}"
            raise ValueError(msg)
        prompts = [self.render(q, settings) for q in questions]
        return await self.adecode_prompts(prompts, settings=settings, method=method, on_event=on_event)
