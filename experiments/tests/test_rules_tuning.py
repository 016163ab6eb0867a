"""The pre-registered decision rule (experiments/benchmarks/rules_tuning.py) on hand-made numbers.

SC's curve in every case: ``[(300, 0.20), (4800, 0.36)]`` on 200 questions, linear in log tokens, so SC at
600 tokens is 0.20 + 0.16 · ln 2 / ln 16 = 0.24 and at 1,200 tokens 0.20 + 0.16 · ln 4 / ln 16 = 0.28.
"""

from __future__ import annotations

import pytest

from experiments.benchmarks.rules_tuning import (
    METHODS, MFS_CANDIDATES, REFERENCES, REPLAYED, VOTE_CANDIDATES, rules_verdict, tuning_numbers,
)
from experiments.variants import VARIANTS

SC = [(300.0, 0.20), (4800.0, 0.36)]


def test_the_candidates_are_registered_variants_with_their_references():
    assert set(MFS_CANDIDATES) | set(VOTE_CANDIDATES) <= {spec.name for spec in VARIANTS}
    assert REFERENCES["mfs-rules"] == "mfs" and REFERENCES["sc-anytime"] is None and REFERENCES["esc-rules"] == "esc"
    # decoded live or replayed on SC's samples, each once: every candidate and every reference
    assert not set(METHODS) & set(REPLAYED)
    assert set(MFS_CANDIDATES) | set(VOTE_CANDIDATES) | {r for r in REFERENCES.values() if r} <= set(METHODS) | set(REPLAYED)
    assert "sc" in METHODS and set(REPLAYED) == {"esc", *VOTE_CANDIDATES}


def test_an_mfs_rule_wins_with_two_points_more_margin_and_no_fewer_right():
    verdict = rules_verdict({"mfs": (56, 1200.0), "mfs-rules": (62, 1200.0), "mfs-window": (59, 1200.0)}, 200, SC)
    assert verdict.margins["mfs"] == pytest.approx(0.0)  # 0.28 - 0.28
    assert verdict.margins["mfs-rules"] == pytest.approx(0.03)  # 0.31 - 0.28 >= 0 + 0.02
    assert verdict.margins["mfs-window"] == pytest.approx(0.015)  # 0.295 - 0.28 < 0.02
    assert (verdict.mfs_winner, verdict.vote_winner) == ("mfs-rules", None)
    assert verdict.passed["mfs-rules"] == "passes"
    assert verdict.passed["mfs-window"].startswith("margin +0.0150 < reference +0.0000")
    assert verdict.passed["mfs-quality-vote"] == "no records"


def test_fewer_tokens_at_the_same_accuracy_is_a_larger_margin_but_fewer_right_answers_lose():
    # mfs-anytime-stop: 57 right at 600 tokens: 0.285 - 0.24 = +0.045 (passes); mfs-quality-vote: 55 right
    # at 300 tokens: 0.275 - 0.20 = +0.075, but 55 < the default's 56
    verdict = rules_verdict({"mfs": (56, 1200.0), "mfs-anytime-stop": (57, 600.0), "mfs-quality-vote": (55, 300.0)},
                            200, SC)
    assert verdict.mfs_winner == "mfs-anytime-stop"
    assert verdict.passed["mfs-quality-vote"] == "55 right < mfs's 56"


def test_nothing_passing_keeps_the_default():
    verdict = rules_verdict({"mfs": (56, 1200.0), "mfs-window": (59, 1200.0)}, 200, SC)
    assert (verdict.mfs_winner, verdict.vote_winner) == (None, None)
    alone = rules_verdict({"mfs-window": (80, 1200.0)}, 200, SC)
    assert alone.passed["mfs-window"] == "no records of its reference mfs"


def test_voting_rules_against_sc_and_esc():
    results = {
        "esc": (60, 1200.0),  # 0.30 - 0.28 = +0.02
        "esc-anytime": (65, 600.0),  # 0.325 - 0.24 = +0.085 >= 0.02 + 0.02, 65 >= 60: passes
        "esc-rules": (59, 300.0),  # +0.095, but 59 < esc's 60
        "sc-quality-vote": (70, 4800.0),  # 0.35 - 0.36 = -0.01 < 0 + 0.02
        "sc-rules": (80, 5400.0),  # 0.40 - 0.36 (flat beyond k = 16) = +0.04, but 5400 > 1.1 · 4800 = 5280
        "sc-anytime": (66, 1200.0),  # 0.33 - 0.28 = +0.05: passes, less than esc-anytime's +0.085
    }
    verdict = rules_verdict(results, 200, SC)
    assert verdict.vote_winner == "esc-anytime" and verdict.mfs_winner is None
    assert verdict.margins["esc-anytime"] == pytest.approx(0.085)
    assert verdict.passed["esc-rules"] == "59 right < esc's 60"
    assert verdict.passed["sc-quality-vote"].startswith("margin -0.0100 < reference +0.0000")
    assert verdict.passed["sc-rules"] == "5400 tokens/question > 5280 (1.1x SC at its largest k)"
    assert verdict.passed["sc-anytime"] == "passes"


def test_the_verdict_refuses_a_run_without_questions_or_sc():
    with pytest.raises(ValueError, match="need questions >= 1 and SC points"):
        rules_verdict({"mfs": (1, 1.0)}, 0, SC)
    with pytest.raises(ValueError, match="need questions >= 1 and SC points"):
        rules_verdict({"mfs": (1, 1.0)}, 10, [])


def _record(method, index, correct, tokens, **extra):
    return {"method": method, "decoder": method, "index": index, "id": str(index), "target": extra.pop("target", "7"),
            "error": extra.pop("error", None), "correct": correct, "output_tokens": tokens, "prompt_tokens": 10,
            "flops": 0.0, **extra}


def test_tuning_numbers_read_the_questions_every_method_decoded():
    records = [
        # SC, k = 2: q0 (target 7) samples 7 (F -0.1), 8 (-0.5): right at k = 1 and 2 (the tie goes to F);
        # q1 (target 3) samples 4 (-0.1), 3 (-0.2): wrong at both k. Tokens 100 and 200 for both samples.
        _record("sc", 0, True, 100, sample_predictions=["7", "8"], sample_qualities=[-0.1, -0.5]),
        _record("sc", 1, False, 200, target="3", sample_predictions=["4", "3"], sample_qualities=[-0.1, -0.2]),
        _record("sc", 2, True, 100, sample_predictions=["7", "7"], sample_qualities=[-0.1, -0.1]),
        _record("mfs", 0, True, 100), _record("mfs", 1, False, 300), _record("mfs", 2, True, 50),
        _record("mfs-window", 0, True, 120), _record("mfs-window", 1, True, 80),
        _record("mfs-window", 2, False, 0, error="RuntimeError: boom"),  # q2 is left out for every method
    ]
    results, sc_points, questions = tuning_numbers(records, "gsm", ["sc", "mfs", "mfs-window"], ks=(1, 2))
    assert questions == 2
    assert results == {"mfs": (1, 200.0), "mfs-window": (2, 100.0)}
    # k = 1: half of each record's tokens, (50 + 100) / 2 = 75, 1 of 2 right; k = 2: 150, 1 of 2
    assert sc_points == [(75.0, 0.5), (150.0, 0.5)]
