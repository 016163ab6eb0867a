"""Voting rules replayed on recorded SC samples (experiments/benchmarks/vote_replay.py) decide as the live decoders
do on the same samples, and the replay of plain SC gives back every kept SC record's answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import experiments.variants  # noqa: F401  (registers the rule candidates)
from experiments.benchmarks.vote_replay import ReplayExhausted, replay_record, replay_records
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from tests.scripted import ScriptedBackend, continuation

END = "<end_of_reasoning>"
KEPT = Path(__file__).resolve().parents[1] / "records" / "qwen2.5-coder-0.5b" / "gsm8k-test-200-299" / "records.jsonl"
METHODS = ("sc", "esc", "sc-anytime", "sc-quality-vote", "sc-rules", "esc-anytime", "esc-quality-vote", "esc-rules")
SETTINGS = MFSSettings(prompt_format="raw", num_samples=16, answer_trigger=None)

# (answer, mean log-prob per token): a split vote where the quality weights favour the minority, a vote that the
# anytime-valid stop certifies after three rounds, and one with unanswered samples (None)
SEQUENCES = {
    "split": [("8", -0.05), ("7", -0.6), ("7", -0.7), ("8", -0.04)] * 2 + [("7", -0.5), ("9", -0.3)] * 4,
    "settles": [("7", -0.2), ("5", -0.3), ("7", -0.2), ("7", -0.25)] + [("7", -0.2)] * 12,
    "unanswered": [(None, -0.9), ("3", -0.4), ("3", -0.5), (None, -0.8)] * 4,
}


def _live(method: str, sequence: list[tuple[str | None, float]]):
    """``method`` decoded live on a backend that hands out ``sequence`` in order, a request at a time."""
    texts = iter(sequence)

    def script(request):
        return [continuation("I cannot tell." if answer is None else f"The answer is: \\boxed{{{answer}}}.",
                             mean_logprob=quality, stop_reason=END)
                for answer, quality in (next(texts) for _ in range(request.n))]

    return MFSEngine(ScriptedBackend(script), SETTINGS).decode_prompts(["Q"], method=method)[0]


def _sc_record(sequence: list[tuple[str | None, float]], tokens: float = 1600.0) -> dict:
    return {"method": "sc", "decoder": "sc", "index": 0, "id": "0", "target": "7", "error": None,
            "sample_predictions": [answer for answer, _ in sequence],
            "sample_qualities": [quality for _, quality in sequence], "output_tokens": tokens, "prompt_tokens": 9,
            "flops": 32.0}


@pytest.mark.parametrize("name", sorted(SEQUENCES))
@pytest.mark.parametrize("method", METHODS)
def test_a_replay_decides_as_the_live_decoder_on_the_same_samples(method: str, name: str) -> None:
    sequence = SEQUENCES[name]
    live = _live(method, sequence)
    replayed = replay_record(_sc_record(sequence), method, SETTINGS, "gsm")
    assert (replayed["prediction"], replayed["completions"], replayed["stop_reason"]) == (
        live.answer, len(live.completions), live.stop_reason)


def test_the_rules_differ_where_they_should_and_tokens_scale_with_the_samples_used() -> None:
    split, settles = _sc_record(SEQUENCES["split"]), _sc_record(SEQUENCES["settles"])
    # split: 7 is drawn 8 times, 8 four times, 9 four times; weighted by exp(5 (F - max F)) the four 8s
    # (F -0.05, -0.04: weights 0.95 and 1, 3.9 in all) outweigh the eight 7s (F -0.5 to -0.7: 0.6 in all) and
    # the four 9s (1.1)
    assert replay_record(split, "sc", SETTINGS, "gsm")["prediction"] == "7"
    assert replay_record(split, "sc-quality-vote", SETTINGS, "gsm")["prediction"] == "8"
    # settles, rounds of 4 at α = 0.1: 7, the first answer drawn, needs E >= 1 · 2 / 0.1 = 20 against the 5;
    # after two rounds E(6, 1) = 4.41, after three (eleven 7s, one 5) E(10, 1) = 30.9: certified at 12 samples
    anytime = replay_record(settles, "sc-anytime", SETTINGS, "gsm")
    assert (anytime["prediction"], anytime["completions"], anytime["stop_reason"]) == ("7", 12, "answer_certified")
    assert anytime["output_tokens"] == pytest.approx(1600.0 * 12 / 16) and anytime["flops"] == pytest.approx(24.0)
    assert anytime["correct"] and anytime["replayed_from"] == "sc"


def test_a_replay_that_needs_more_samples_than_the_record_holds_is_refused() -> None:
    with pytest.raises(ReplayExhausted, match="asked for sample 16 of question 0, but the record holds 4"):
        replay_record(_sc_record(SEQUENCES["settles"][:4]), "sc", SETTINGS, "gsm")
    with pytest.raises(ValueError, match="has no samples to replay"):
        replay_record({**_sc_record([]), "sample_predictions": []}, "sc", SETTINGS, "gsm")


def test_replaying_plain_sc_gives_back_every_kept_sc_answer() -> None:
    records = [json.loads(line) for line in KEPT.read_text(encoding="utf-8").splitlines() if line.strip()]
    kept = {r["index"]: r for r in records if r["method"] == "sc"}
    replayed = replay_records(records, ["sc"], SETTINGS, "gsm")
    assert len(replayed) == len(kept) == 100
    assert all(r["prediction"] == kept[r["index"]]["prediction"] and r["correct"] == kept[r["index"]]["correct"]
               for r in replayed)
    assert sum(r["output_tokens"] for r in replayed) == pytest.approx(sum(r["output_tokens"] for r in kept.values()))
