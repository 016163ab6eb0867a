"""Voting rules replayed on a self-consistency run's kept samples, by the library's own decoders.

A voting method (``sc``, ``esc`` and their rules: the anytime-valid stop, the quality-weighted vote) reads
nothing of a sample but its answer, its mean log-prob per token and its length. Given one SC run's samples of
a question in the order they were drawn, each such method is therefore a function of that sequence: this
module drives the registered decoder (:func:`mfs_core.decoders.get_decoder`, the code a live run calls) and
answers each request it makes with the next recorded samples, so the rule applied is the library's, not a
copy of it. As SC's curve does (:func:`mfs_core.bench.curve.curve_records`), a replay stands for a live run at
the same temperature (independent samples, the same distribution) and pairs every rule with SC on the same
draws; a sample's output tokens are the run's mean per sample (``output_tokens / len(sample_predictions)``).

Example: an SC record of 16 samples whose first eight answers are all ``"7"`` replays ``sc-anytime`` (rounds of
4, α = 0.1) as ``"7"`` after 8 samples, at 8/16 of the record's output tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mfs_core.bench.scoring import is_correct
from mfs_core.decoders import get_decoder
from mfs_core.settings import MFSSettings
from mfs_core.types import Continuation, GenerationRequest

__all__ = ["ReplayExhausted", "replay_record", "replay_records"]


class ReplayExhausted(ValueError):
    """The replayed decoder asked for more samples than the record holds (e.g. ``num_samples`` above the run's k)."""


def _recorded_answer(text: str) -> str | None:
    """The answer key of a replay: a replayed sample's text is its recorded answer ("" for none)."""
    return text or None


def replay_record(record: dict[str, Any], method: str, settings: MFSSettings, kind: str) -> dict[str, Any]:
    """One question's record of ``method``, decoded from an SC record's samples.

    Args:
        record: an SC bench record with ``sample_predictions`` (answers, None for none) and
            ``sample_qualities`` (mean log-prob per token, nats) in sampling order, ``output_tokens``,
            ``target``, ``index``.
        method: a registered voting decoder (``"sc"``, ``"esc"``, ``"sc-anytime"``, ...), under its overrides.
        settings: the run's settings (``num_samples``, ``esc_window``, ``esc_max_samples``, ... as the live run).
        kind: the data set's scoring kind (``"gsm"``), for :func:`~mfs_core.bench.scoring.is_correct`.

    Returns:
        A bench-style record: ``method``, ``index``, ``id``, ``target``, ``prediction``, ``correct``,
        ``completions`` (samples used), ``output_tokens`` (samples used times the record's tokens per sample),
        ``stop_reason``, ``error`` None, ``replayed_from`` (the SC record's method).

    Raises:
        ReplayExhausted: the decoder asked for more samples than the record holds.
        ValueError: the record has no samples, or ``method`` is not registered.
    """
    answers, qualities = record.get("sample_predictions"), record.get("sample_qualities")
    if not answers or qualities is None or len(answers) != len(qualities):
        msg = f"record {record.get('index')!r} of {record.get('method')!r} has no samples to replay"
        raise ValueError(msg)
    samples = [Continuation(text=answer or "", token_ids=(0,), logprob_sum=float(quality), finish_reason="stop")
               for answer, quality in zip(answers, qualities, strict=True)]
    used = 0
    decoder = get_decoder(method)(str(record.get("id", record["index"])), settings,
                                     answer_key=_recorded_answer)

    def answer(requests: list[GenerationRequest]) -> list[list[Continuation]]:
        nonlocal used
        outputs = []
        for request in requests:
            if used + request.n > len(samples):
                msg = (f"{method} asked for sample {used + request.n} of question {record['index']}, "
                       f"but the record holds {len(samples)}")
                raise ReplayExhausted(msg)
            outputs.append(samples[used:used + request.n])
            used += request.n
        return outputs

    try:
        requests = next(decoder)
        while True:
            requests = decoder.send(answer(requests))
    except StopIteration as stop:
        result = stop.value
    per_sample = record["output_tokens"] / len(samples)
    return {
        "method": method, "decoder": method, "index": record["index"], "id": record.get("id", str(record["index"])),
        "target": record["target"], "error": None, "prediction": result.answer,
        "correct": is_correct(kind, result.answer, record["target"]), "completions": used,
        "output_tokens": used * per_sample, "prompt_tokens": record.get("prompt_tokens", 0),
        "flops": record.get("flops", 0.0) * used / len(samples), "stop_reason": result.stop_reason,
        "elapsed_seconds": 0.0, "generate_seconds": 0.0, "replayed_from": record["method"],
    }


def replay_records(records: Sequence[dict[str, Any]], methods: Sequence[str], settings: MFSSettings, kind: str,
                   source: str = "sc") -> list[dict[str, Any]]:
    """Every method of ``methods`` replayed on each error-free ``source`` record (one record per method and question).

    Raises:
        ReplayExhausted: a method asked for more samples than a record holds.
    """
    held = [r for r in records if r["method"] == source and r.get("error") is None and r.get("sample_predictions")]
    return [replay_record(record, method, settings, kind) for method in methods for record in held]
