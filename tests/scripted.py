"""A scripted backend for tests: continuations and log-probs chosen by the test.

:class:`ScriptedBackend` implements the whole :class:`mfs_core.backends.base.Backend`
protocol without a model. Each request of a ``generate`` call is answered either by a
function of the request or by the next entry of a queue, and every call is recorded so a
test can count calls and inspect the requests a decoder made.

Example::

    backend = ScriptedBackend(lambda request: [continuation("3 + 4 = 7", mean_logprob=-0.5)] * request.n)
    engine = MFSEngine(backend, MFSSettings(step_beam_size=2, num_rollouts=2))

Token counts are whitespace tokens unless a test passes ``count_tokens`` or gives
``num_tokens`` / ``token_ids`` explicitly.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections import deque
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any

from mfs_core.settings import DEMO_MODEL
from mfs_core.types import Continuation, DecodeResult, FinishReason, GenerationRequest

__all__ = ["ScriptedBackend", "continuation", "drive", "hermes_template", "synthetic_model", "whitespace_tokens"]

END = "<end_of_reasoning>"

Script = Callable[[GenerationRequest], Sequence[Continuation]]


def whitespace_tokens(text: str) -> int:
    """Token count of ``text`` as whitespace-separated words."""
    return len(text.split())


def continuation(
    text: str,
    *,
    mean_logprob: float | None = None,
    logprobs: Sequence[float] | None = None,
    num_tokens: int | None = None,
    finish_reason: FinishReason = "stop",
    stop_reason: str | None = None,
    prompt_tokens: int = 0,
    confidences: Sequence[float] | None = None,
) -> Continuation:
    """Build a :class:`Continuation` from the numbers a test cares about.

    Args:
        text: the continuation text (already cut before its stop string).
        mean_logprob: mean log-prob per token (nats); ``logprob_sum = mean · num_tokens``.
        logprobs: per-token log-probs (nats); fixes ``num_tokens = len(logprobs)``.
            Give at most one of ``mean_logprob`` / ``logprobs``; neither means 0.0.
        num_tokens: tokens sampled (default: whitespace words of ``text``, at least 1).
        finish_reason: ``"stop"``, ``"eos"`` or ``"length"``.
        stop_reason: the stop string that ended the text (only with ``"stop"``).
        prompt_tokens: prompt tokens (0: the backend fills in its own count).
        confidences: per-token DeepConf confidences (nats; ``Continuation.token_confidences``,
            what a backend reports for a request with ``top_logprobs``); fixes ``num_tokens``
            as ``logprobs`` does. None: none reported.

    Returns:
        The continuation; ``token_ids`` are ``0 .. num_tokens-1``.

    Raises:
        ValueError: both ``mean_logprob`` and ``logprobs`` given, or ``num_tokens``
            disagrees with ``len(logprobs)`` or ``len(confidences)``.
    """
    if confidences is not None:
        if num_tokens is not None and num_tokens != len(confidences):
            msg = f"num_tokens={num_tokens} but {len(confidences)} confidences were given"
            raise ValueError(msg)
        num_tokens = len(confidences)
    if mean_logprob is not None and logprobs is not None:
        msg = "give mean_logprob or logprobs, not both"
        raise ValueError(msg)
    if logprobs is not None:
        if num_tokens is not None and num_tokens != len(logprobs):
            msg = f"num_tokens={num_tokens} but {len(logprobs)} logprobs were given"
            raise ValueError(msg)
        num_tokens = len(logprobs)
        logprob_sum = float(sum(logprobs))
    else:
        if num_tokens is None:
            num_tokens = max(1, whitespace_tokens(text))
        logprob_sum = float(mean_logprob or 0.0) * num_tokens
    return Continuation(
        text=text,
        token_ids=tuple(range(num_tokens)),
        logprob_sum=logprob_sum,
        finish_reason=finish_reason,
        stop_reason=stop_reason,
        prompt_tokens=prompt_tokens,
        token_confidences=tuple(float(c) for c in confidences) if confidences is not None else (),
    )


def _default_chat_template(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None) -> str:
    """The demo model's template shape: ``<s><|role|>\\ncontent\\n...<|assistant|>\\n``; ignores tools."""
    parts = ["<s>"]
    for message in messages:
        parts.append(f"<|{message['role']}|>\n{message['content']}\n")
    parts.append("<|assistant|>\n")
    return "".join(parts)


def hermes_template(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None) -> str:
    """A tool-rendering template of the Hermes / Qwen 2.5 shape, in the demo model's roles.

    With tools, a system turn lists them (one JSON per line) and asks for
    ``<tool_call>{"name", "arguments"}</tool_call>``; an assistant message's ``tool_calls``
    (Hugging Face format) are written as such blocks; ``tool`` messages keep their role.
    """
    parts = ["<s>"]
    if tools:
        listed = "\n".join(json.dumps(tool, sort_keys=True) for tool in tools)
        parts.append(
            "<|system|>\nYou may call tools:\n<tools>\n" + listed + "\n</tools>\n"
            'Call one as <tool_call>\n{"name": <name>, "arguments": <args>}\n</tool_call>\n'
        )
    for message in messages:
        content = message.get("content") or ""
        for call in message.get("tool_calls") or []:
            function = call["function"]
            body = json.dumps({"name": function["name"], "arguments": function["arguments"]})
            content += f"\n<tool_call>\n{body}\n</tool_call>"
        parts.append(f"<|{message['role']}|>\n{content}\n")
    parts.append("<|assistant|>\n")
    return "".join(parts)


class ScriptedBackend:
    """A :class:`~mfs_core.backends.base.Backend` whose continuations the test scripts.

    Args:
        script: either a function ``request -> continuations`` (called once per request,
            must return exactly ``request.n`` continuations), or an iterable of such lists
            consumed in order, one entry per request across all calls.
        count_tokens: tokenizer stand-in (default: whitespace words).
        chat_template: function rendering chat messages and, as a second argument when
            given, tools (default: the demo model's shape, which ignores tools;
            :func:`hermes_template` renders them); None makes :meth:`apply_chat_template`
            return None (a model without template).
        context_window: tokens the fake model accepts.
        num_parameters: parameter count used for FLOPs (6·n·P).
        model_name: name reported in results; by default the demo model's (it plays the demo
            model, whose default assistant prefix is the φ release's:
            :func:`mfs_core.prompts.assistant_prefix`).

    Attributes:
        calls: the requests of every ``generate`` call, in call order.
    """

    def __init__(
        self,
        script: Script | Iterable[Sequence[Continuation]],
        *,
        count_tokens: Callable[[str], int] = whitespace_tokens,
        chat_template: Callable[..., str] | None = _default_chat_template,
        context_window: int = 4096,
        num_parameters: int = 1000,
        model_name: str = DEMO_MODEL,
    ) -> None:
        if callable(script):
            self._script: Script | None = script
            self._queue: deque[Sequence[Continuation]] | None = None
        else:
            self._script = None
            self._queue = deque(script)
        self._count_tokens = count_tokens
        self._chat_template = chat_template
        self._context_window = context_window
        self._num_parameters = num_parameters
        self.model_name = model_name
        self.calls: list[list[GenerationRequest]] = []

    # --- what tests inspect ------------------------------------------------------------
    @property
    def requests(self) -> list[GenerationRequest]:
        """Every request received, over all calls, in order."""
        return [request for call in self.calls for request in call]

    @property
    def num_calls(self) -> int:
        """``generate`` calls made so far."""
        return len(self.calls)

    @property
    def remaining(self) -> int:
        """Queue entries not consumed yet (0 for a function script)."""
        return len(self._queue) if self._queue is not None else 0

    # --- Backend protocol --------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        """Answer each request from the script; records the call first.

        Raises:
            RuntimeError: the queue ran out (the message names the request).
            ValueError: the script gave a different number of continuations than ``n``.
        """
        requests = list(requests)
        self.calls.append(requests)
        results = []
        for request in requests:
            if self._script is not None:
                conts = list(self._script(request))
            else:
                if not self._queue:
                    msg = f"scripted queue exhausted at request {request.prompt[-60:]!r} (n={request.n})"
                    raise RuntimeError(msg)
                conts = list(self._queue.popleft())
            if len(conts) != request.n:
                msg = f"script gave {len(conts)} continuations for a request with n={request.n}"
                raise ValueError(msg)
            prompt_tokens = self._count_tokens(request.prompt)
            results.append(
                [c if c.prompt_tokens else dataclasses.replace(c, prompt_tokens=prompt_tokens) for c in conts]
            )
        return results

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the scripted tokenizer."""
        return self._count_tokens(text)

    def apply_chat_template(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None
    ) -> str | None:
        """The scripted chat template with the generation prompt (and ``tools``), or None without one."""
        if self._chat_template is None:
            return None
        if tools is None:
            return self._chat_template(list(messages))
        return self._chat_template(list(messages), list(tools))

    @property
    def context_window(self) -> int:
        """Most tokens the fake model accepts."""
        return self._context_window

    @property
    def num_parameters(self) -> int:
        """Parameter count for the FLOPs estimate."""
        return self._num_parameters


def drive(
    decoder: Generator[list[GenerationRequest], list[list[Continuation]], DecodeResult], backend: ScriptedBackend
) -> DecodeResult:
    """Run one decoder coroutine to the end against ``backend``, one ``generate`` call per yield.

    Unlike the engine, this sets neither ``flops`` nor ``wall_seconds``; use it to call a
    decoder with arguments the registry signature does not carry.
    """
    try:
        requests = next(decoder)
        while True:
            requests = decoder.send(backend.generate(requests))
    except StopIteration as stop:
        return stop.value


def _unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from the parts (a stand-in for a model's randomness)."""
    return zlib.crc32(repr(parts).encode()) / 2**32


def synthetic_model(**kwargs) -> ScriptedBackend:
    """A scripted 'model' whose outputs depend only on the request (prompt, seed, sample).

    Step requests answer a short step (or the final answer once the path has 3 lines);
    rollouts answer a number derived from the prompt. Different questions take different
    numbers of steps, so decodes end at different rounds.
    """

    def script(request):
        conts = []
        for i in range(request.n):
            u = _unit(request.prompt, request.seed, i)
            lp = -0.05 - u
            if request.stop == (END,):
                answer = int(_unit(request.prompt) * 3)
                conts.append(continuation(f"The answer is: \\boxed{{{answer}}}.", logprobs=[lp] * 3, stop_reason=END))
            elif request.prompt.count("\n") >= 2 + int(_unit(request.prompt.split("\n")[0]) * 4):
                conts.append(continuation("The answer is: \\boxed{9}.", logprobs=[lp] * 2, stop_reason=END))
            else:
                conts.append(continuation(f"x{int(u * 5)}", logprobs=[lp] * 2, stop_reason="\n"))
        return conts

    return ScriptedBackend(script, **kwargs)
