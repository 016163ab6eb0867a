"""Baselines on the MFS coroutine protocol: greedy chain-of-thought and self-consistency.

Both yield :class:`GenerationRequest` lists and return the same :class:`DecodeResult` as
MFS, so the benchmark measures every method on one engine. :func:`with_overrides` makes a
decoder that runs another with some settings changed; the MFS ablations of the paper
(``mfs-no-stop``, ``mfs-no-prune``) are MFS under it, not copies of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from mfs_core.answers import AnswerExtractor, extract_answer, first_seen_counts, quality_weights
from mfs_core.decoders.common import Decoder, TokenTally, ask_for_answers, decode_rng, finish_result, request_seed
from mfs_core.martingale import anytime_lead
from mfs_core.settings import MFSSettings
from mfs_core.types import DecodeResult, GenerationRequest

__all__ = ["decode_cot", "decode_self_consistency", "with_overrides"]


def decode_cot(prompt: str, settings: MFSSettings, answer_key: AnswerExtractor | None = None) -> Decoder:
    """Greedy chain-of-thought: one argmax completion to the end marker.

    One request, ``n = 1``, ``greedy=True`` (vLLM's ``temperature=0``), at most
    ``settings.max_answer_tokens`` tokens, stopped at ``settings.end_marker``. The
    completion's quality is its mean raw log-prob per token (nats).

    Args:
        prompt: the rendered model prompt.
        settings: uses ``max_answer_tokens``, ``end_marker``, ``top_p``, ``temperature``
            (recorded on the request, unused by greedy decoding).
        answer_key: what the answer is read by (default: the extracted answer).

    Yields:
        One list with one request (and one more when ``settings.answer_trigger`` asks for
        the answer: :func:`~mfs_core.decoders.common.ask_for_answers`).

    Returns:
        The :class:`DecodeResult`, ``stop_reason="greedy"``, ``method="cot"``.
    """
    request = GenerationRequest(
        prompt=prompt, n=1, max_tokens=settings.max_answer_tokens, stop=(settings.end_marker,),
        temperature=settings.temperature, top_p=settings.top_p, seed=settings.seed, greedy=True,
    )
    tally = TokenTally()
    outputs = yield [request]
    tally.add([request], outputs)
    cont = outputs[0][0]
    texts, triggered = yield from ask_for_answers(prompt, [cont.text], settings, tally, answer_key)
    return finish_result(
        texts, [cont.mean_logprob], settings, tally, stop_reason="greedy", steps=[], method="cot",
        answer_key=answer_key, triggered=triggered,
    )


def decode_self_consistency(
    prompt: str, settings: MFSSettings, answer_key: AnswerExtractor | None = None
) -> Decoder:
    """Self-consistency (Wang et al., 2023): k sampled completions, majority vote.

    ``k = settings.num_samples`` (``mfs bench --sc-k`` sets it). One request, ``n = k``, sampled at
    ``settings.temperature`` and ``settings.top_p``, seeded from ``(settings.seed, prompt)``; the answer is
    the majority of the extracted answers, ties broken by the highest mean log-prob per token
    (``settings.aggregation`` applies as for MFS).

    With ``sc_round_size`` the k samples are drawn in rounds of that many (one request each, its
    own seed from the decode's rng; the first round's is the one-request seed), and with
    ``answer_stop_alpha`` the anytime-valid stop (:func:`~mfs_core.martingale.anytime_lead`, every
    sample one draw) is tested after each round: once an answer is certified, sampling stops
    (``stop_reason="answer_certified"``). With ``vote_quality_beta`` each sample's vote is
    ``exp(β (F - max F))`` (:func:`~mfs_core.answers.quality_weights`, F its mean log-prob per token).

    Args:
        prompt: the rendered model prompt.
        settings: uses ``num_samples`` (k), ``temperature``, ``top_p``, ``seed``,
            ``max_answer_tokens``, ``end_marker``, ``aggregation``, ``sc_round_size``,
            ``answer_stop_alpha``, ``vote_quality_beta``.
        answer_key: what the vote groups paths by (default: the extracted answer).

    Yields:
        One list with one request per round (one round for ``k`` continuations by default).

    Returns:
        The :class:`DecodeResult`, ``stop_reason="sampled"`` (or ``"answer_certified"``), ``method="sc"``.
    """
    rng = decode_rng(settings, prompt)
    key = answer_key if answer_key is not None else extract_answer
    k = settings.num_samples
    tally = TokenTally()
    texts: list[str] = []
    qualities: list[float] = []
    triggered: list[bool] = []
    stop_reason = "sampled"
    while len(texts) < k:
        request = GenerationRequest(
            prompt=prompt, n=min(settings.sc_round_size or k, k - len(texts)), max_tokens=settings.max_answer_tokens,
            stop=(settings.end_marker,), temperature=settings.temperature, top_p=settings.top_p, seed=request_seed(rng),
        )
        outputs = yield [request]
        tally.add([request], outputs)
        conts = outputs[0]
        window, asked = yield from ask_for_answers(prompt, [c.text for c in conts], settings, tally, answer_key)
        texts += window
        qualities += [c.mean_logprob for c in conts]
        triggered += asked
        if settings.answer_stop_alpha is not None and anytime_lead(
                list(first_seen_counts([key(text) for text in texts]).values()), settings.answer_stop_alpha).certified:
            stop_reason = "answer_certified"
            break
    weights = quality_weights(qualities, settings.vote_quality_beta) if settings.vote_quality_beta is not None else None
    return finish_result(
        texts, qualities, settings, tally,
        stop_reason=stop_reason, steps=[], method="sc", answer_key=answer_key, triggered=triggered, weights=weights,
    )


def with_overrides(
    factory: Callable[[str, MFSSettings], Decoder], method: str, **overrides: Any
) -> Callable[[str, MFSSettings], Decoder]:
    """A decoder that runs ``factory`` with ``overrides`` applied to its settings.

    Example:
        ``with_overrides(decode_mfs, "mfs-no-stop", early_stopping=False)`` is the paper's
        "w/o stopping" ablation: MFS itself, the convergence stop switched off.

    Args:
        factory: the decoder to run.
        method: the name written to ``DecodeResult.method``.
        **overrides: ``MFSSettings`` fields and their values.

    Returns:
        A decoder factory with the shared signature ``(prompt, settings)``; further keyword
        arguments (``answer_key``) go to ``factory``.

    Raises:
        ValueError: an override names no ``MFSSettings`` field (raised here, at definition).
    """
    unknown = sorted(set(overrides) - set(MFSSettings.model_fields))
    if unknown:
        msg = f"unknown MFSSettings fields in overrides of {method!r}: {unknown}"
        raise ValueError(msg)

    def decode(prompt: str, settings: MFSSettings, **kwargs: Any) -> Decoder:
        changed = settings.changed(**overrides)  # validated, no .env read per decode
        result: DecodeResult = yield from factory(prompt, changed, **kwargs)
        return dataclasses.replace(result, method=method)

    decode.__name__ = f"decode_{method.replace('-', '_')}"
    decode.__doc__ = f"{factory.__name__} with settings overridden by {overrides!r} (method {method!r})."
    return decode
