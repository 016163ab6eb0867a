"""``MFSEngine``, the engine's public face: settings, the shared backend, and the entry points that
start decodes and wait for them (:mod:`mfs_core.engine.waiting`).

The scheduling (:mod:`~mfs_core.engine.lockstep`, :mod:`~mfs_core.engine.continuous`) and the
sharing of backends between engines (:mod:`~mfs_core.engine.registry`) live beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mfs_core.answers import AnswerExtractor
from mfs_core.backends import Backend
from mfs_core.backends.base import AsyncBackend
from mfs_core.decoders import get_decoder
from mfs_core.engine import registry
from mfs_core.engine.scheduler import DecodeFuture, EngineStats, Listener, Scheduler
from mfs_core.engine.waiting import astream_events, await_results, stream_events, wait_results
from mfs_core.events import EventCallback
from mfs_core.prompts import render_messages, render_question, validate_question
from mfs_core.settings import MFSSettings
from mfs_core.streaming import DecodeStream
from mfs_core.engine.requests import check_answer_key, shape_requests
from mfs_core.types import DecodeResult, TriggeredChoice

__all__ = ["MFSEngine"]


class MFSEngine:
    """The decoding engine: owns (or shares) one backend and decodes many prompts together.

    Build it with :meth:`from_settings` (backends are shared between engines whose
    settings have the same backend fields) or inject a backend directly.

    Example:
        >>> engine = MFSEngine.from_settings(MFSSettings(step_beam_size=4))  # doctest: +SKIP
        >>> engine.decode(["Tom has 3 apples. He buys 4 more. How many now?"])[0].answer  # doctest: +SKIP
        '7'
    """

    def __init__(self, backend: Backend, settings: MFSSettings | None = None, *, _scheduler: Scheduler | None = None) -> None:
        """Wrap ``backend`` with default decoder ``settings`` (``MFSSettings()`` if None).

        ``scheduling="auto"`` (the default) runs continuous batching when ``settings.backend`` is vLLM and
        ``backend`` can (an :class:`~mfs_core.backends.base.AsyncBackend`), lockstep otherwise.

        Raises:
            TypeError: ``scheduling="continuous"`` with a backend that is not an
                :class:`~mfs_core.backends.base.AsyncBackend`.
        """
        self.settings = settings if settings is not None else MFSSettings()
        scheduling = self.settings.scheduler
        if self.settings.scheduling == "auto" and not isinstance(backend, AsyncBackend):
            scheduling = "lockstep"  # "auto" on a backend handed in that has no continuous design (a sync vLLM.LLM)
        self._scheduler = _scheduler if _scheduler is not None else registry.make_scheduler(backend, scheduling)
        self._closed = False
        registry.count_in(self._scheduler)

    @classmethod
    def from_settings(cls, settings: MFSSettings | None = None, **overrides: Any) -> MFSEngine:
        """An engine for ``settings`` (plus keyword overrides), sharing a loaded backend.

        Raises:
            pydantic.ValidationError: a bad setting (the message names it).
            OSError / ImportError: the model or the backend's dependencies are missing.
        """
        base = settings if settings is not None else MFSSettings()
        if overrides:
            base = base.changed(**overrides)
        with registry.LOCK:  # the engine counts itself in before a close elsewhere can end the scheduler
            scheduler = registry.shared_scheduler(base)
            return cls(scheduler.backend, base, _scheduler=scheduler)

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
        with registry.LOCK:
            if self._closed:
                return
            self._closed = True
        registry.count_out(self._scheduler)

    @property
    def dead_reason(self) -> str | None:
        """Why this engine's backend can no longer serve (one line: vLLM's engine core died, a fatal device
        error, the backend was closed), or None while it can. Once set, every call raises
        :class:`~mfs_core.errors.BackendDeadError`; build a new engine with :meth:`from_settings`."""
        return self._scheduler.dead_reason

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called on this engine."""
        return self._closed

    def __enter__(self) -> MFSEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def scheduler(self) -> Scheduler:
        """The scheduler that batches this engine's decodes (shared by the engines of the same backend settings:
        a setting changed on it, e.g. ``LockstepScheduler.fair_share_tokens``, holds for all of them)."""
        return self._scheduler

    @property
    def stats(self) -> EngineStats:
        """Counters of the (possibly shared) scheduler."""
        return self._scheduler.stats

    def with_settings(self, **overrides: Any) -> MFSEngine:
        """A new engine on the same backend and scheduler with some settings changed."""
        settings = self.settings.changed(**overrides)
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
                (a decoder whose spec has ``final="select"``; the message names it).
            BackendDeadError: the backend died (:attr:`dead_reason`); decodes in flight when it
                died fail with it too.
        """
        self._scheduler.check_alive()
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
            check_answer_key(method, key)
        for prompt in prompts:
            validate_question(prompt)
        listeners = None
        if on_event is not None:
            listeners = [Listener(i, on_event, settings.step_delimiter) for i in range(len(prompts))]
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
                costing model calls) and :class:`~mfs_core.errors.DecodeTimeoutError` (a
                ``TimeoutError``) is raised (:mod:`mfs_core.engine.waiting`).
            answer_key: what the vote groups paths by (see :meth:`submit_prompts`).
            triggered_choice: a constraint on every request (see :meth:`submit_prompts`).

        Raises:
            ValueError / TypeError: as :meth:`submit_prompts`, before anything is decoded.
            DecodeTimeoutError: ``timeout`` passed first (a ``TimeoutError``).
            The first failed decode's exception, in prompt order (the others are abandoned).
        """
        start = dict(settings=settings, method=method, answer_key=answer_key, triggered_choice=triggered_choice)
        if on_event is None:
            return wait_results(self.submit_prompts(prompts, **start), timeout)
        stream = self.stream_prompts(prompts, **start)
        for event in stream_events(stream, timeout):
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
            DecodeTimeoutError: ``timeout`` passed first (a ``TimeoutError``).
            The first failed decode's exception, in prompt order (the others are abandoned).
        """
        start = dict(settings=settings, method=method, answer_key=answer_key, triggered_choice=triggered_choice)
        if on_event is None:
            return await await_results(self.submit_prompts(prompts, **start), timeout)
        stream = self.stream_prompts(prompts, **start)
        async for event in astream_events(stream, timeout):
            on_event(event)
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
        """Decode ``questions`` (rendered by ``settings.prompt_format``) together, blocking until all are done.

        They share the engine's backend calls with every other decode in flight (lockstep
        scheduling: one batched ``generate`` per round; continuous: vLLM batches as requests come).

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
            DecodeTimeoutError: ``timeout`` passed first (a ``TimeoutError``).
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
