"""Decodes as plain generators of request rounds, for the lockstep scheduler's tests.

:func:`rounds` is a decode that asks for ``count`` rounds of requests with known token counts and
then returns its result, so the service each decode has attained after each backend call is known by
hand.
"""

from __future__ import annotations

from mfs_core.types import DecodeResult, GenerationRequest

__all__ = ["rounds"]


def rounds(name: str, count: int, tokens: int, requests: int = 1):
    """A decode of ``count`` rounds, each ``requests`` requests of ``tokens`` tokens (prompt = ``name``)."""
    for _ in range(count):
        yield [GenerationRequest(prompt=name, n=1, max_tokens=tokens) for _ in range(requests)]
    return DecodeResult(text=name, answer=name, vote_share=1.0, stop_reason="max_steps", prompt_tokens=0,
                        output_tokens=count * tokens * requests, flops=0.0)
