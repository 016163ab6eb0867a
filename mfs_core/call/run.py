"""One call from start to answer: prepare -> submit -> wait or stream -> finish, written once.

:meth:`Caller.open` is the whole logic of a call (its settings, its engine, its prepared prompts);
:class:`Call` submits the decodes and finishes their results into :class:`~mfs_core.call.Reply` s. The
drivers only wait: :meth:`Caller.run` (blocking), :meth:`Caller.arun` (async: preparing, which may load
the model and runs the template, goes to a worker thread; the wait never blocks the event loop),
:meth:`Caller.stream` and :meth:`Caller.astream` (the decode's events as they happen, then the answer).
The same pattern as :mod:`mfs_core.engine.waiting`: the logic once, thin sync and async drivers. A
caller that stops waiting (its ``timeout`` passed, its task was cancelled, its stream was closed)
abandons its decodes (:func:`mfs_core.engine.waiting.abandon`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from mfs_core.call.engines import EngineSource
from mfs_core.call.keywords import CallKeywords, join_stops
from mfs_core.call.prepare import CallInput, PreparedCall, prepare
from mfs_core.call.reply import Reply
from mfs_core.engine import DecodeFuture, MFSEngine
from mfs_core.engine.waiting import abandon, astream_events, await_results, stream_events, wait_results
from mfs_core.events import DecodeEvent, EventCallback, StopEvent
from mfs_core.settings import MFSSettings
from mfs_core.streaming import DecodeStream
from mfs_core.types import DecodeResult

__all__ = ["Call", "CallStream", "Caller"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Call:
    """One call, resolved and prepared: what it decodes, with what, on which engine.

    Attributes:
        engine: the engine that decodes it.
        settings: the call's settings (the front end's, changed by the call's keywords).
        method: the registered decoder.
        prepared: one prepared prompt per prompt of the call (a chat call: one).
        stop: the sequences that cut each answer (the front end's, then the call's).
        timeout: most seconds a driver waits for the decodes (None: no limit).
    """

    engine: MFSEngine
    settings: MFSSettings
    method: str
    prepared: tuple[PreparedCall, ...]
    stop: tuple[str, ...] = ()
    timeout: float | None = None

    def submit(self, on_event: EventCallback | None = None, *, n: int = 1) -> list[DecodeFuture]:
        """Start the decodes; one future per decode, choice ``c`` of prompt ``p`` at index ``p * n + c``.

        Args:
            on_event: called with each decode's events on the engine's worker thread, each event's
                ``index`` the decode's (``p * n + c``); None: no events.
            n: decodes per prompt (OpenAI's ``n``): choice ``c`` decodes with seed ``settings.seed + c``.

        Raises:
            ValueError / TypeError: as :meth:`MFSEngine.submit_prompts` (an unknown method, a vote key
                the decoder cannot take); ``n`` below 1. Decodes started before the error are abandoned.
        """
        if n < 1:
            msg = f"n must be at least 1, got {n}"
            raise ValueError(msg)
        logger.debug("decoding %d prompt(s) x %d with %s: M=%d N=%d seed=%d", len(self.prepared), n, self.method,
                      self.settings.step_beam_size, self.settings.num_rollouts, self.settings.seed)
        prompts = [call.prompt for call in self.prepared]
        keys = [call.answer_key for call in self.prepared]
        choices: list[list[DecodeFuture]] = []
        try:
            for c in range(n):
                settings = self.settings if c == 0 else self.settings.changed(seed=self.settings.seed + c)
                listener = on_event if on_event is None or n == 1 else _relabelled(on_event, n, c)
                choices.append(self.engine.submit_prompts(prompts, settings=settings, method=self.method,
                                                          on_event=listener, answer_key=keys))
        except BaseException:
            abandon([future for futures in choices for future in futures], "the call failed before all its decodes started")
            raise
        return [choices[c][p] for p in range(len(prompts)) for c in range(n)]

    def stream(self, *, n: int = 1) -> DecodeStream:
        """:meth:`submit` with the events delivered to the caller's thread or event loop.

        Raises:
            As :meth:`submit`.
        """
        stream = DecodeStream()
        stream.attach(self.submit(stream.put, n=n))
        return stream

    @property
    def model_name(self) -> str:
        """The engine's model name."""
        return self.engine.backend.model_name

    def finish(self, result: DecodeResult, prompt: int = 0) -> Reply:
        """The answer of prompt ``prompt``'s decode: the chosen completion finished by its prepared call
        (calls parsed and taken out, cut at :attr:`stop`)."""
        text, parsed = self.prepared[prompt].finish(result.text, self.stop)
        return Reply(text, parsed, result, self.model_name)

    def replies(self, results: list[DecodeResult]) -> list[Reply]:
        """:meth:`finish` of each result of a call with one decode per prompt, in order."""
        return [self.finish(result, p) for p, result in enumerate(results)]


@dataclass(frozen=True)
class CallStream:
    """A call whose decodes run and whose events come as they happen.

    Attributes:
        call: the call.
        stream: its decodes' events (one decode per prompt: an event's ``index`` is its prompt's).
    """

    call: Call
    stream: DecodeStream

    def events(self) -> Iterator[DecodeEvent]:
        """The events, blocking between them, for at most the call's timeout in all; closing the
        iterator early abandons the decodes.

        Raises:
            DecodeTimeoutError: the timeout passed first (the decodes are abandoned).
            The first decode's exception, after its last event.
        """
        return stream_events(self.stream, self.call.timeout)

    def aevents(self) -> AsyncIterator[DecodeEvent]:
        """Async :meth:`events`: never blocks the event loop; a cancelled consumer abandons the decodes."""
        return astream_events(self.stream, self.call.timeout)

    def finish(self, event: StopEvent) -> Reply:
        """The answer of the decode that ``event`` ends (:meth:`Call.finish`)."""
        return self.call.finish(event.result, event.index)


@dataclass(frozen=True)
class Caller:
    """What a front end gives each of its calls, and the drivers that make them.

    Attributes:
        engines: where the call's engine comes from (injected, or owned per backend settings).
        settings: the front end's settings; a call's setting keywords change them for that call.
        method: the decoder of a call that names none.
        stop: stop sequences of every call, before the call's own.
        timeout: most seconds a call waits for its decodes (None: no limit).
    """

    engines: EngineSource
    settings: MFSSettings
    method: str = "mfs"
    stop: tuple[str, ...] = ()
    timeout: float | None = None

    def open(self, call_input: CallInput, keywords: CallKeywords) -> Call:
        """Resolve and prepare one call: its settings, its engine (loaded on first use), its prompts.

        Raises:
            ParamNotAccepted: a setting keyword the call's method does not take (:meth:`DecoderSpec.check_params`).
            pydantic.ValidationError: a setting keyword out of range.
            ValueError: the injected engine's backend settings differ from the call's; a bad input.
            TypeError / ToolsNotSupportedError / ContextWindowError: as :func:`mfs_core.call.prepare`.
        """
        method = keywords.method or self.method
        keywords.check_params(method)
        settings = keywords.settings_on(self.settings)
        engine = self.engines.get(settings)
        prepared = tuple(prepare(engine, settings, call_input, keywords))
        return Call(engine, settings, method, prepared, join_stops(self.stop, keywords.stop), self.timeout)

    def run(self, call_input: CallInput, keywords: CallKeywords) -> list[Reply]:
        """Decode the call and wait: one :class:`Reply` per prompt (a chat call: one).

        Raises:
            As :meth:`open`; DecodeTimeoutError (a TimeoutError) past the timeout; the first decode's
            exception (the others are abandoned).
        """
        call = self.open(call_input, keywords)
        return call.replies(wait_results(call.submit(), call.timeout))

    async def arun(self, call_input: CallInput, keywords: CallKeywords) -> list[Reply]:
        """Async :meth:`run`: preparing runs in a worker thread; a cancelled task abandons the decodes."""
        call = await asyncio.to_thread(self.open, call_input, keywords)
        return call.replies(await await_results(call.submit(), call.timeout))

    def stream(self, call_input: CallInput, keywords: CallKeywords) -> CallStream:
        """Start the call's decodes with their events streamed (:class:`CallStream`).

        Raises:
            As :meth:`open`, before any decode starts.
        """
        call = self.open(call_input, keywords)
        return CallStream(call, call.stream())

    async def astream(self, call_input: CallInput, keywords: CallKeywords) -> CallStream:
        """Async :meth:`stream`: preparing and starting run in a worker thread."""
        return await asyncio.to_thread(self.stream, call_input, keywords)


def _relabelled(on_event: EventCallback, n: int, choice: int) -> EventCallback:
    """``on_event`` of the decodes of choice ``choice``: prompt ``p``'s events relabelled ``p * n + choice``."""

    def relabel(event: DecodeEvent) -> None:
        on_event(dataclasses.replace(event, index=event.index * n + choice))

    return relabel
