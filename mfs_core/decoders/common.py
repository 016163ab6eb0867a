"""What every decoder shares: the coroutine type, token accounting, seeds, aggregation."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from mfs_core.answers import AnswerExtractor, extract_answer, majority_vote
from mfs_core.settings import MFSSettings
from mfs_core.types import Continuation, DecodeResult, GenerationRequest, StepTrace

__all__ = [
    "Decoder", "StepSink", "TokenTally", "decode_rng", "finish_result", "prompt_key", "report_step", "request_seed",
    "step_sink",
]

Decoder = Generator[list[GenerationRequest], list[list[Continuation]], DecodeResult]
"""A decoder coroutine: yields request lists, is sent their continuations, returns the result."""


def prompt_key(prompt: str) -> int:
    """A stable 64-bit key of ``prompt``: the first 8 bytes of its SHA-256 (not Python's salted ``hash``)."""
    return int.from_bytes(hashlib.sha256(prompt.encode("utf-8")).digest()[:8], "big")


def decode_rng(settings: MFSSettings, prompt: str) -> np.random.Generator:
    """The random generator of one decode, seeded from ``(settings.seed, prompt)``.

    The same seed and prompt give the same stream in any run, alone or in any batch; two
    prompts of one batch draw independent streams (numpy ``SeedSequence`` of both numbers).
    """
    return np.random.default_rng([settings.seed % 2**64, prompt_key(prompt)])
StepSink = Callable[[StepTrace, Sequence[str]], None]
"""Receives a finished step's trace and the live beam texts after it."""

_STEP_SINK: ContextVar[StepSink | None] = ContextVar("mfs_step_sink", default=None)


def report_step(step: StepTrace, beams: Sequence[str]) -> None:
    """Hand a finished step to whoever listens to the running decode; a no-op otherwise.

    A decoder calls it once per step, after the step's last round (selection and the
    convergence test done). The engine listens through :func:`step_sink` while it advances
    a decoder whose caller asked for events (:mod:`mfs_core.events`).

    Args:
        step: the finished step's trace (the listener copies what it keeps).
        beams: texts of the live beams after the step, in beam order.
    """
    sink = _STEP_SINK.get()
    if sink is not None:
        sink(step, beams)


@contextmanager
def step_sink(sink: StepSink) -> Iterator[None]:
    """Route :func:`report_step` calls made inside the block (on this thread) to ``sink``."""
    token = _STEP_SINK.set(sink)
    try:
        yield
    finally:
        _STEP_SINK.reset(token)


def request_seed(rng: np.random.Generator) -> int:
    """A fresh request seed in [0, 2**31) drawn from the decoder's generator."""
    return int(rng.integers(0, 2**31 - 1))


@dataclass
class TokenTally:
    """Running totals of a decode: prompt tokens (once per request) and output tokens."""

    prompt_tokens: int = 0
    output_tokens: int = 0

    def add(self, requests: Sequence[GenerationRequest], outputs: Sequence[Sequence[Continuation]]) -> None:
        """Count one round's requests and their continuations.

        Raises:
            ValueError: the backend returned a different number of lists or continuations
                than requested.
        """
        if len(outputs) != len(requests):
            msg = f"backend returned {len(outputs)} outputs for {len(requests)} requests"
            raise ValueError(msg)
        for request, conts in zip(requests, outputs):
            if len(conts) != request.n:
                msg = f"backend returned {len(conts)} continuations for n={request.n}"
                raise ValueError(msg)
            self.prompt_tokens += conts[0].prompt_tokens if conts else 0
            self.output_tokens += sum(c.num_tokens for c in conts)


def finish_result(
    completions: Sequence[str],
    qualities: Sequence[float],
    settings: MFSSettings,
    tally: TokenTally,
    *,
    stop_reason: str,
    steps: list[StepTrace],
    method: str,
    completion_tokens: int = 0,
    search_settings: dict[str, Any] | None = None,
    answer_key: AnswerExtractor | None = None,
) -> DecodeResult:
    """Aggregate completed paths into a :class:`DecodeResult` (MFS_SPEC.md step 9).

    ``majority``: the most common extracted answer, ties broken by the highest ``F``; the
    text is that answer's best path (with no answer anywhere: the best-``F`` non-blank path). ``best_quality``: the path with the highest ``F``;
    its vote share is the share of paths that agree with its answer.
    ``completion_tokens`` and ``search_settings`` are copied into the result.

    ``answer_key`` replaces :func:`~mfs_core.answers.extract_answer` as what paths are
    grouped by (None: no vote); with tools bound it is the normalised action of
    :class:`mfs_core.tools.ActionVote`, so the vote runs over actions.
    """
    key = answer_key if answer_key is not None else extract_answer
    answers = [key(text) for text in completions]
    vote = majority_vote(answers, qualities)
    index = vote.index
    if vote.answer is None:
        # No path states an answer: the best-F path, preferring one with text.
        nonblank = [i for i, text in enumerate(completions) if text.strip()]
        if nonblank:
            index = max(nonblank, key=lambda i: qualities[i])
    answer, share = vote.answer, vote.vote_share
    if settings.aggregation == "best_quality":
        index = int(np.argmax(qualities))
        answer = answers[index]
        share = sum(a == answer for a in answers) / len(answers) if answer is not None else 0.0
    return DecodeResult(
        text=completions[index],
        answer=answer,
        vote_share=share,
        stop_reason=stop_reason,
        prompt_tokens=tally.prompt_tokens,
        output_tokens=tally.output_tokens,
        flops=0.0,
        steps=steps,
        completions=list(completions),
        completion_answers=answers,
        completion_qualities=[float(q) for q in qualities],
        method=method,
        completion_tokens=completion_tokens,
        search_settings=dict(search_settings or {}),
    )
