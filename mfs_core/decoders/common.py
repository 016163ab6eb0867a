"""What every decoder shares: the coroutine type, token accounting, seeds, aggregation."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from mfs_core.answers import AnswerExtractor, extract_answer, majority_vote
from mfs_core.settings import MFSSettings
from mfs_core.types import Continuation, DecodeResult, GenerationRequest, RequestGrammar, StepTrace

logger = logging.getLogger(__name__)
_warned_no_grammar = False  # the missing-xgrammar warning of the answer trigger is logged once

__all__ = [
    "MAX_BLANK_LINES", "Decoder", "ask_for_answers", "StepSink", "TokenTally", "decode_rng", "finish_result", "is_blank_step",
    "prompt_key", "report_step", "request_seed", "sample_steps", "step_sink", "vote_summary",
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


def vote_summary(answers: Sequence[str | None], weights: Sequence[float] | None = None) -> str:
    """The answers of some samples counted, most votes first, for a trace note.

    Example:
        ``vote_summary(["7", "12", "7", None])`` is ``"7 ×2, 12 ×1, (no answer) ×1"``; with
        ``weights=[1.5, 0.5, 1.0, 0.25]`` it is ``"7 ×2 (2.500), 12 ×1 (0.500), (no answer) ×1 (0.250)"``.
    """
    counts: dict[str | None, list[float]] = {}
    for i, answer in enumerate(answers):
        counts.setdefault(answer, []).append(weights[i] if weights is not None else 1.0)
    order = sorted(counts, key=lambda a: (a is None, -sum(counts[a]), -len(counts[a])))
    parts = []
    for answer in order:
        part = f"{'(no answer)' if answer is None else answer} ×{len(counts[answer])}"
        parts.append(part + (f" ({sum(counts[answer]):.3f})" if weights is not None else ""))
    return ", ".join(parts) if parts else "(none)"


def request_seed(rng: np.random.Generator) -> int:
    """A fresh request seed in [0, 2**31) drawn from the decoder's generator."""
    return int(rng.integers(0, 2**31 - 1))


MAX_BLANK_LINES = 4
"""Most blank lines in a row a step may start with before :func:`sample_steps` stops continuing it."""


def is_blank_step(cont: Continuation, end_marker: str) -> bool:
    """Whether ``cont`` is a blank line: whitespace only, ended by a stop string other than the end marker.

    A model that separates its steps by blank lines (``1. ...\n\n2. ...``) stops a step at the
    first ``\n`` and writes the blank line as the next "step": whitespace ended by the step
    delimiter. It neither is a step nor ends the path (EOS or the end marker do; a
    continuation cut by ``max_tokens`` is not blank).
    """
    return not cont.text.strip() and cont.finish_reason == "stop" and cont.stop_reason != end_marker


def _joined(first: Continuation, delimiter: str, rest: Continuation) -> Continuation:
    """``first`` (a blank line), the delimiter that ended it, then ``rest``: one continuation.

    Text ``first.text + delimiter + rest.text``; tokens, log-prob sums and token confidences
    add; the finish and stop reasons are ``rest``'s; the prompt tokens ``first``'s (the step's prompt).
    """
    return Continuation(
        text=first.text + delimiter + rest.text, token_ids=first.token_ids + rest.token_ids,
        logprob_sum=first.logprob_sum + rest.logprob_sum, finish_reason=rest.finish_reason,
        stop_reason=rest.stop_reason, prompt_tokens=first.prompt_tokens,
        token_confidences=first.token_confidences + rest.token_confidences,
    )


def sample_steps(
    requests: Sequence[GenerationRequest], settings: MFSSettings, rng: np.random.Generator, tally: "TokenTally"
) -> Generator[list[GenerationRequest], list[list[Continuation]], list[list[Continuation]]]:
    """Sample one step per continuation of ``requests``, continuing past blank lines.

    Yields ``requests`` (counted in ``tally``); every continuation that is a blank line
    (:func:`is_blank_step`) is sampled again from after it (``prompt + text + delimiter``,
    one sample, a fresh seed from ``rng``, the tokens it has left of ``max_tokens``), up to
    :data:`MAX_BLANK_LINES` times, and joined to what follows (:func:`_joined`): the step's
    text then starts with the blank line (``"\n2. ..."``), its log-prob is the mean over all its
    tokens, and the beam keeps the model's own layout. A step still blank after that (or with
    no tokens left) comes back blank; the decoder does not keep it as a step.
    Each extra round is one more yield, made only when some continuation was blank.

    Args:
        requests: the step requests (stop strings include ``settings.step_delimiter``).
        settings: gives ``step_delimiter`` and ``end_marker``.
        rng: the decode's generator (seeds of the extra requests).
        tally: token totals, updated with every round.

    Returns:
        The continuations, ``len(requests)`` lists of ``request.n`` each.
    """
    delim, end = settings.step_delimiter, settings.end_marker
    outputs = yield list(requests)
    tally.add(requests, outputs)
    outputs = [list(conts) for conts in outputs]
    for _ in range(MAX_BLANK_LINES):
        blank = [
            (r, k) for r, conts in enumerate(outputs) for k, cont in enumerate(conts)
            if is_blank_step(cont, end) and cont.num_tokens < requests[r].max_tokens
        ]
        if not blank:
            break
        again = [
            dataclasses.replace(
                requests[r], prompt=requests[r].prompt + outputs[r][k].text + delim, n=1, seed=request_seed(rng),
                max_tokens=requests[r].max_tokens - outputs[r][k].num_tokens,
            )
            for r, k in blank
        ]
        more = yield again
        tally.add(again, more)
        for (r, k), conts in zip(blank, more):
            outputs[r][k] = _joined(outputs[r][k], delim, conts[0])
    return outputs


def ask_for_answers(
    prompt: str, completions: Sequence[str], settings: MFSSettings, tally: "TokenTally",
    answer_key: AnswerExtractor | None = None,
) -> Generator[list[GenerationRequest], list[list[Continuation]], tuple[list[str], list[bool]]]:
    """Read an answer from each completed path that states none, after ``settings.answer_trigger``.

    Kojima et al. (2022)'s answer trigger: a path whose answer cannot be read (a pretrained
    model that loops to ``max_answer_tokens`` or stops without a conclusion) gets
    ``answer_trigger`` appended and up to ``answer_trigger_tokens`` greedy tokens, stopped at
    the step delimiter or the end marker, in one round for all such paths. Greedy, so the
    decode's random stream is untouched: the search is the same with the trigger on or off.

    What counts as stating an answer is :func:`~mfs_core.answers.extract_answer`, or the
    ``answer_key`` when it has ``answer_choices`` (a multiple-choice question's
    :class:`~mfs_core.answers.OptionAnswer`): a path that chooses no option is asked, and
    after the trigger the model may write only one of the labels (``" A"``, ...; a grammar,
    :func:`~mfs_core.grammar.choice_grammar`, sampled free with a warning when
    ``xgrammar`` is missing). With the trigger off (None), with any other ``answer_key``
    (tools bound: the vote is over actions) or when every path states an answer, no request
    is made.

    Args:
        prompt: the rendered model prompt the paths continue.
        completions: the completed paths' texts (after the prompt).
        settings: gives ``answer_trigger``, ``answer_trigger_tokens``, ``step_delimiter``, ``end_marker``.
        tally: token totals, updated with the round.
        answer_key: the decode's answer key; None: the plain answer vote.

    Returns:
        ``(texts, triggered)``: the paths, each triggered one followed by the trigger and what
        the model wrote after it; for each path whether it was triggered (empty list when the
        trigger is off).
    """
    texts = list(completions)
    choices = getattr(answer_key, "answer_choices", None) if answer_key is not None else None
    if settings.answer_trigger is None or (answer_key is not None and not choices):
        return texts, []
    key = answer_key if answer_key is not None else extract_answer
    todo = [i for i, text in enumerate(texts) if key(text) is None]
    triggered = [i in todo for i in range(len(texts))]
    if not todo:
        return texts, triggered
    grammar = _choice_grammar(settings.answer_trigger, choices) if choices else None
    requests = [
        GenerationRequest(
            prompt=prompt + texts[i] + settings.answer_trigger, n=1, max_tokens=settings.answer_trigger_tokens,
            stop=(settings.step_delimiter, settings.end_marker), temperature=settings.temperature,
            top_p=settings.top_p, seed=settings.seed, greedy=True, grammar=grammar,
        )
        for i in todo
    ]
    outputs = yield requests
    tally.add(requests, outputs)
    for i, conts in zip(todo, outputs):
        texts[i] = texts[i] + settings.answer_trigger + conts[0].text
    return texts, triggered


def _choice_grammar(trigger: str, labels: Sequence[str]) -> RequestGrammar | None:
    """The grammar of an option label after ``trigger`` (a space first unless the trigger ends
    in whitespace), or None, logged once, when ``xgrammar`` is not installed."""
    from mfs_core.grammar import choice_grammar, grammar_available

    if not grammar_available():
        global _warned_no_grammar
        if not _warned_no_grammar:
            _warned_no_grammar = True
            logger.warning("the answer trigger samples the option label unconstrained: "
                           "pip install 'mfs-decoding[grammar]' to keep it to the question's labels")
        return None
    space = "" if trigger[-1:].isspace() else " "
    return choice_grammar([space + label for label in labels])



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
    triggered: Sequence[bool] = (),
    weights: Sequence[float] | None = None,
) -> DecodeResult:
    """Aggregate completed paths into a :class:`DecodeResult` (MFS_SPEC.md step 9).

    ``majority``: the most common extracted answer, ties broken by the highest ``F``; the
    text is that answer's best path (with no answer anywhere: the best-``F`` non-blank path). ``best_quality``: the path with the highest ``F``;
    its vote share is the share of paths that agree with its answer.
    ``completion_tokens``, ``search_settings`` and ``triggered`` (:func:`ask_for_answers`) are
    copied into the result.

    ``answer_key`` replaces :func:`~mfs_core.answers.extract_answer` as what paths are
    grouped by (None: no vote); with tools bound it is the normalised action of
    :class:`mfs_core.tools.ActionVote`, so the vote runs over actions.

    ``weights``: each completion's vote (None: 1 each; MFS's ``vote_rollouts="weighted"``),
    used by both aggregations' shares and copied into ``completion_weights``.
    """
    key = answer_key if answer_key is not None else extract_answer
    answers = [key(text) for text in completions]
    vote = majority_vote(answers, qualities, weights)
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
        votes = list(weights) if weights is not None else [1.0] * len(answers)
        agree = sum(w for a, w in zip(answers, votes) if a == answer)
        share = agree / sum(votes) if answer is not None and sum(votes) > 0 else 0.0
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
        completion_triggered=list(triggered),
        completion_weights=[float(w) for w in weights] if weights is not None else [],
    )
