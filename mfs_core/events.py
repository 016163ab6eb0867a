"""What a decode reports while it runs: one :class:`StepEvent` per finished step, then a
:class:`StopEvent` with the result.

The engine emits these (see :meth:`mfs_core.engine.MFSEngine.stream_prompt` and the
``on_event`` argument of its decode methods); the adapters turn them into reasoning blocks
(LangChain), thinking blocks (LlamaIndex) and the ``mfs ask`` live view. The text helpers
here (:func:`committed_prefix`, :func:`step_summary`, :func:`stop_summary`) are the one
place those views are written, so every front end shows the search the same way.

Units: log-probabilities and step values in nats, token counts in tokens, times in seconds.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Union

from mfs_core.trace import scored_summary
from mfs_core.types import Candidate, DecodeResult, StepTrace

__all__ = [
    "DecodeEvent",
    "EventCallback",
    "StepEvent",
    "StopEvent",
    "committed_prefix",
    "step_summary",
    "stop_summary",
]


@dataclass(frozen=True)
class StepEvent:
    """One deliberation step of one decode has finished (its last round came back).

    Attributes:
        index: position of the decode's prompt in the call that started it (0 for a single
            prompt).
        step: the step's trace (a copy: candidates sampled, pruned ones, each scored
            candidate's ``F`` (``foresight_quality``) and ``V`` (``step_value``), the
            selected beams, ``max V`` and ``ε_stop``).
        beams: texts of the live beams after the step (the partial paths the next step
            extends), in beam order; empty once every beam finished.
        committed: the reasoning every live beam shares, cut at a step boundary
            (:func:`committed_prefix`); it only grows during a decode.
        prompt_tokens: prompt tokens of every request so far (tokens).
        output_tokens: tokens generated so far over every request, candidates and
            foresight rollouts (tokens).
        elapsed_seconds: wall time since the engine started this decode (seconds).
    """

    index: int
    step: StepTrace
    beams: tuple[str, ...]
    committed: str
    prompt_tokens: int
    output_tokens: int
    elapsed_seconds: float

    @property
    def num_candidates(self) -> int:
        """Candidates sampled at this step (``M·N`` at most)."""
        return len(self.step.candidates)

    @property
    def num_finished(self) -> int:
        """Candidates that closed their answer at this step."""
        return sum(c.finished for c in self.step.candidates)

    @property
    def num_pruned(self) -> int:
        """Candidates removed by width pruning (no foresight rollout)."""
        return self.step.num_pruned

    @property
    def scored(self) -> list[Candidate]:
        """The survivors that were rolled out and have a step value ``V``."""
        return [c for c in self.step.candidates if c.step_value is not None]

    @property
    def selected(self) -> list[Candidate]:
        """Candidates kept for the next step (new beams and finished paths)."""
        return [c for c in self.step.candidates if c.selected]

    @property
    def max_step_value(self) -> float | None:
        """``max V`` over the scored candidates (nats), None if none was scored."""
        return self.step.max_step_value

    @property
    def stop_epsilon(self) -> float | None:
        """``ε_stop`` the convergence test compares ``max V`` against (nats)."""
        return self.step.stop_epsilon

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary: counts, ``max V`` vs ``ε_stop``, tokens, survivors with F and V.

        Keys: ``index``, ``step``, ``candidates``, ``finished``, ``pruned``, ``scored``,
        ``beams`` (live beams), ``max_step_value``, ``stop_epsilon``, ``converged``,
        ``prompt_tokens``, ``output_tokens``, ``elapsed_seconds``, ``committed``,
        ``survivors`` (each ``text``, ``F``, ``V``, ``selected``) and, for a step its decoder
        noted (ESC, DeepConf), ``note``.
        """
        return {
            "index": self.index,
            "step": self.step.step,
            "candidates": self.num_candidates,
            "finished": self.num_finished,
            "pruned": self.num_pruned,
            "scored": len(self.scored),
            "beams": len(self.beams),
            "max_step_value": self.max_step_value,
            "stop_epsilon": self.stop_epsilon,
            "converged": self.step.converged,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "elapsed_seconds": self.elapsed_seconds,
            "committed": self.committed,
            "survivors": [
                {"text": c.text, "F": c.foresight_quality, "V": c.step_value, "selected": c.selected}
                for c in self.scored
            ],
        } | ({"note": self.step.note} if self.step.note else {})


@dataclass(frozen=True)
class StopEvent:
    """A decode has finished; the last event of every successful decode.

    Attributes:
        index: position of the decode's prompt in the call that started it.
        result: the decode's result (``flops`` and ``wall_seconds`` filled in).
        elapsed_seconds: wall time since the engine started this decode (seconds).
    """

    index: int
    result: DecodeResult
    elapsed_seconds: float

    @property
    def stop_reason(self) -> str:
        """Why deliberation ended (``"converged"``, ``"all_finished"``, ``"max_steps"``...)."""
        return self.result.stop_reason

    @property
    def answer(self) -> str | None:
        """The voted answer, or None."""
        return self.result.answer

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary: ``index``, ``stop_reason``, ``answer``, ``vote_share``,
        ``num_steps``, ``prompt_tokens``, ``output_tokens``, ``elapsed_seconds``."""
        return {
            "index": self.index,
            "stop_reason": self.stop_reason,
            "answer": self.answer,
            "vote_share": self.result.vote_share,
            "num_steps": len(self.result.steps),
            "prompt_tokens": self.result.prompt_tokens,
            "output_tokens": self.result.output_tokens,
            "elapsed_seconds": self.elapsed_seconds,
        }


DecodeEvent = Union[StepEvent, StopEvent]
"""An event of a decode: a finished step, or the stop."""

EventCallback = Callable[[DecodeEvent], None]
"""A listener of decode events."""


def committed_prefix(beams: Sequence[str], delimiter: str) -> str:
    """The reasoning all ``beams`` share, cut after the last whole step.

    Every beam is a sequence of steps each ending with ``delimiter``; the longest common
    prefix of the beams is cut after its last ``delimiter``, so a step counts as committed
    only when every live beam took exactly it.

    Args:
        beams: beam texts; empty gives "".
        delimiter: the step delimiter (``MFSSettings.step_delimiter``).

    Returns:
        The committed text (ending with ``delimiter``), or "".

    Example:
        >>> committed_prefix(["A.\\nB.\\n", "A.\\nBe.\\n"], "\\n")
        'A.\\n'
    """
    if not beams:
        return ""
    shared = os.path.commonprefix(list(beams))
    cut = shared.rfind(delimiter)
    return shared[: cut + len(delimiter)] if cut >= 0 else ""


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def step_summary(event: StepEvent) -> str:
    """One line that says what a step did, e.g.
    ``step 1: 16 sampled, 2 finished, 7 pruned, 7 rolled out, 4 beams; max V +0.084 > ε_stop 0; 412 tokens``.

    ``max V`` is compared with ``ε_stop`` (eq. 12): ``<=`` means the convergence test passes.
    A step with its decoder's ``note`` (ESC's windows, DeepConf's rounds) is summarised by it:
    ``step 0: window 1: 4 sampled, answers 7 ×4; unanimous: stop; 412 tokens``.
    """
    if event.step.note:
        return f"step {event.step.step}: {event.step.note}; {_plural(event.output_tokens, 'token')}"
    parts = [f"{event.num_candidates} sampled"]
    if event.num_finished:
        parts.append(f"{event.num_finished} finished")
    parts += [f"{event.num_pruned} pruned", scored_summary(event.scored), _plural(len(event.beams), "beam")]
    line = f"step {event.step.step}: " + ", ".join(parts)
    value, epsilon = event.max_step_value, event.stop_epsilon
    if value is not None and epsilon is not None:
        verdict = "<=" if value <= epsilon else ">"
        line += f"; max V {value:+.3f} {verdict} ε_stop {epsilon:g}"
    if event.step.converged:
        line += " (converged)"
    return f"{line}; {_plural(event.output_tokens, 'token')}"


def stop_summary(event: StopEvent) -> str:
    """One line that says how a decode ended, e.g.
    ``stop: converged after 3 steps; answer 7 (3 of 4 paths, 75%); 812 tokens; 0.41 s``."""
    result = event.result
    paths = len(result.completions)
    votes = sum(a == result.answer for a in result.completion_answers) if result.answer is not None else 0
    answer = f"answer {result.answer} ({votes} of {paths} paths, {result.vote_share:.0%})" if result.answer is not None else "no answer"
    return (
        f"stop: {result.stop_reason} after {_plural(len(result.steps), 'step')}; {answer}; "
        f"{_plural(result.output_tokens, 'token')}; {event.elapsed_seconds:.2f} s"
    )
