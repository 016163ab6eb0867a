"""What a finished call answers: the text, its tool calls, usage and metadata, in every front end alike.

:class:`Reply` is one decode's answer after the call's finish (:meth:`mfs_core.call.Call.finish`): the
text cut at the stop sequences (with tools rendered, the calls taken out), the parsed calls, and the
:class:`DecodeResult` it came from. The LangChain and LlamaIndex classes and the server turn it into
their own message types; :func:`token_usage`, :func:`result_metadata` and :func:`stream_chunks` are
what they all attach and stream.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mfs_core.tools.parsers import ParsedOutput
from mfs_core.types import DecodeResult

__all__ = ["Reply", "result_metadata", "stream_chunks", "token_usage", "trace_summary"]


@dataclass(frozen=True)
class Reply:
    """One decode's answer to a call.

    Attributes:
        text: the message text: the chosen completion (its tool calls removed when the template
            rendered tools), cut before the first of the call's stop sequences.
        parsed: the chosen completion's tool calls (valid and invalid).
        result: the decode.
        model_name: the backend's model name.
    """

    text: str
    parsed: ParsedOutput
    result: DecodeResult
    model_name: str

    @property
    def usage(self) -> dict[str, int]:
        """``{"prompt_tokens", "completion_tokens", "total_tokens"}`` of the decode (tokens, :func:`token_usage`)."""
        return token_usage(self.result)

    @property
    def metadata(self) -> dict[str, Any]:
        """:func:`result_metadata` of the decode."""
        return result_metadata(self.result)

    @property
    def finish_reason(self) -> str:
        """``"tool_calls"`` when the answer calls a tool, else ``"stop"`` (OpenAI's names)."""
        return "tool_calls" if self.parsed.tool_calls else "stop"

    def chunks(self) -> list[str]:
        """:attr:`text` split for streaming (:func:`stream_chunks`); one empty chunk for an empty text."""
        return list(stream_chunks(self.text)) or [""]


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
    """Per step: candidates sampled, pruned, selected, ``max V`` and whether it converged; for a
    step its decoder noted (ESC's windows, DeepConf's rounds: pruned = discarded or stopped,
    selected = votes, converged = the stop test passed) also its ``note``."""
    return [
        {
            "step": step.step,
            "candidates": len(step.candidates),
            "pruned": step.num_pruned,
            "selected": sum(c.selected for c in step.candidates),
            "max_step_value": step.max_step_value,
            "converged": step.converged,
        } | ({"note": step.note} if step.note else {})
        for step in result.steps
    ]


def result_metadata(result: DecodeResult) -> dict[str, Any]:
    """What the front ends attach to an answer: answer, vote share, stop reason, steps, FLOPs.

    Keys: ``answer`` (with tools: the winning action key), ``vote_share`` (0-1),
    ``votes`` (completed paths per answer or action key, most first), ``stop_reason``,
    ``num_steps``, ``flops`` (6·n·P), ``output_tokens`` (tokens), ``method``,
    ``wall_seconds`` and ``trace`` (:func:`trace_summary`).
    """
    votes = Counter(key for key in result.completion_answers if key is not None)
    return {
        "votes": dict(votes.most_common()),
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
