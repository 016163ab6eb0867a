"""Framework-neutral pieces the LangChain and LlamaIndex adapters share.

Everything an adapter does beyond its framework's types lives here, once: cutting output at
stop sequences, splitting a finished text into stream chunks, and turning a
:class:`DecodeResult` into usage counts and metadata.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from mfs_core.types import DecodeResult

__all__ = ["apply_stop", "result_metadata", "stream_chunks", "token_usage", "trace_summary"]


def apply_stop(text: str, stop: Sequence[str] | None) -> str:
    """``text`` cut before the earliest of the ``stop`` sequences (unchanged if none occurs).

    Raises:
        TypeError: ``stop`` is a bare string or holds a non-string (the message shows it).
    """
    if not stop:
        return text
    if isinstance(stop, str):
        msg = f"stop must be a list of strings, got the string {stop!r}"
        raise TypeError(msg)
    cut = len(text)
    for sequence in stop:
        if not isinstance(sequence, str):
            msg = f"stop sequences must be strings, got {sequence!r}"
            raise TypeError(msg)
        if sequence:
            index = text.find(sequence)
            if index != -1:
                cut = min(cut, index)
    return text[:cut]


def stream_chunks(text: str) -> Iterator[str]:
    """Split a finished text into stream chunks: each line, and the words within it.

    MFS chooses the whole answer before anything is streamed; the chunks only let a UI
    show it progressively. ``"".join(stream_chunks(t)) == t``.
    """
    start = 0
    for i, char in enumerate(text):
        if char in " \n" and i + 1 > start:
            yield text[start : i + 1]
            start = i + 1
    if start < len(text):
        yield text[start:]


def token_usage(result: DecodeResult) -> dict[str, int]:
    """``{"prompt_tokens", "completion_tokens", "total_tokens"}`` of one decode (tokens)."""
    return {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.output_tokens,
        "total_tokens": result.prompt_tokens + result.output_tokens,
    }


def trace_summary(result: DecodeResult) -> list[dict[str, Any]]:
    """Per step: candidates sampled, pruned, selected, ``max V`` and whether it converged."""
    return [
        {
            "step": step.step,
            "candidates": len(step.candidates),
            "pruned": step.num_pruned,
            "selected": sum(c.selected for c in step.candidates),
            "max_step_value": step.max_step_value,
            "converged": step.converged,
        }
        for step in result.steps
    ]


def result_metadata(result: DecodeResult) -> dict[str, Any]:
    """What adapters attach to a generation: answer, vote share, stop reason, steps, FLOPs.

    Keys: ``answer``, ``vote_share`` (0-1), ``stop_reason``, ``num_steps``, ``flops``
    (6·n·P), ``output_tokens`` (tokens), ``method``, ``wall_seconds`` and ``trace``
    (:func:`trace_summary`).
    """
    return {
        "answer": result.answer,
        "vote_share": result.vote_share,
        "stop_reason": result.stop_reason,
        "num_steps": len(result.steps),
        "flops": result.flops,
        "output_tokens": result.output_tokens,
        "method": result.method,
        "wall_seconds": result.wall_seconds,
        "trace": trace_summary(result),
    }
