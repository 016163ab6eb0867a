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
import functools
import inspect
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from mfs_core.answers import AnswerExtractor
from mfs_core.backends import Backend, create_backend
from mfs_core.decoders import Decoder, get_decoder
from mfs_core.prompts import render_messages, render_question, validate_question
from mfs_core.settings import MFSSettings
from mfs_core.types import Continuation, DecodeResult, GenerationRequest

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


@dataclass
class _Job:
    decoder: Decoder
    future: Future
    started: float = field(default_factory=time.perf_counter)
    pending: list[GenerationRequest] | None = None


class _Scheduler:
    """Owns a backend and a worker thread that runs decoders in lockstep."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.stats = EngineStats()
        self._incoming: list[_Job] = []
        self._cond = threading.Condition()
        self._worker: threading.Thread | None = None

    def submit(self, decoders: Sequence[Decoder]) -> list[Future]:
        jobs = [_Job(decoder=d, future=Future()) for d in decoders]
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
            requests = job.decoder.send(outputs) if outputs is not None else next(job.decoder)
        except StopIteration as stop:
            result: DecodeResult = stop.value
            result = replace(
                result,
                flops=6.0 * result.output_tokens * self.backend.num_parameters,
                wall_seconds=time.perf_counter() - job.started,
            )
            self.stats.decodes += 1
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
        answer_key: AnswerExtractor | None = None,
    ) -> list[Future]:
        """Start decoding already-rendered model ``prompts``; one future per prompt.

        Args:
            prompts: rendered model prompts.
            settings: decoder settings (default: the engine's).
            method: registered decoder name.
            answer_key: what the final vote groups completed paths by (default: the
                extracted answer); :class:`mfs_core.tools.ActionVote` votes over actions.

        Raises:
            ValueError / TypeError: an empty prompt list or prompt, an unknown method, or an
                ``answer_key`` for a decoder that takes none (the message names it).
        """
        settings = settings or self.settings
        factory = get_decoder(method)
        if answer_key is not None:
            parameters = inspect.signature(factory).parameters
            if "answer_key" not in parameters and not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
                msg = f"decoder {method!r} cannot vote over actions (it takes no answer_key); use 'mfs', 'sc' or 'cot'"
                raise ValueError(msg)
            factory = functools.partial(factory, answer_key=answer_key)
        if isinstance(prompts, str) or not isinstance(prompts, Sequence):
            msg = f"prompts must be a list of strings, got {type(prompts).__name__}"
            raise TypeError(msg)
        if not prompts:
            msg = "prompts must not be empty, got []"
            raise ValueError(msg)
        for prompt in prompts:
            validate_question(prompt)
        return self._scheduler.submit([factory(prompt, settings) for prompt in prompts])

    def decode_prompts(
        self,
        prompts: Sequence[str],
        *,
        settings: MFSSettings | None = None,
        method: str = "mfs",
        answer_key: AnswerExtractor | None = None,
    ) -> list[DecodeResult]:
        """Decode already-rendered model ``prompts`` together; blocks until all are done.

        ``answer_key``: what the vote groups paths by (see :meth:`submit_prompts`).

        Raises:
            The first exception among the decodes (the others still complete).
        """
        futures = self.submit_prompts(prompts, settings=settings, method=method, answer_key=answer_key)
        return [future.result() for future in futures]

    def decode(
        self, questions: Sequence[str], *, settings: MFSSettings | None = None, method: str = "mfs"
    ) -> list[DecodeResult]:
        """Decode ``questions`` (rendered by ``settings.prompt_format``) in lockstep.

        Args:
            questions: Q questions, each a non-blank string.
            settings: decoder settings for these decodes (default: the engine's).
            method: registered decoder name (``"mfs"``; baselines when installed).

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
        return self.decode_prompts(prompts, settings=settings, method=method)

    async def adecode_prompts(
        self, prompts: Sequence[str], *, settings: MFSSettings | None = None, method: str = "mfs"
    ) -> list[DecodeResult]:
        """Async :meth:`decode_prompts`: awaits the worker without blocking the event loop."""
        futures = self.submit_prompts(prompts, settings=settings, method=method)
        return list(await asyncio.gather(*(asyncio.wrap_future(f) for f in futures)))

    async def adecode(
        self, questions: Sequence[str], *, settings: MFSSettings | None = None, method: str = "mfs"
    ) -> list[DecodeResult]:
        """Async :meth:`decode`."""
        settings = settings or self.settings
        if isinstance(questions, str) or not questions:
            msg = f"questions must be a non-empty list of strings, got {questions!r:.60}"
            raise ValueError(msg)
        prompts = [self.render(q, settings) for q in questions]
        return await self.adecode_prompts(prompts, settings=settings, method=method)
