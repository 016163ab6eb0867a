"""testbed.bench_separation: F's AUROC and the bed's accuracies from mfs bench records, by hand."""

from __future__ import annotations

import math

import pytest

from experiments.testbed.bench_separation import majority, separation_from_records


def test_majority_takes_the_answer_that_reached_the_count_first() -> None:
    assert majority(["B", "C", "C", "B"]) == "C"  # C reaches 2 first
    assert majority([None, "A", None]) == "A"
    assert majority([None, None]) is None


def _records() -> list[dict]:
    return [
        # question 0: right samples ("A") have the higher F -> within-question AUROC 1
        {"method": "sc", "index": 0, "target": "A", "sample_predictions": ["A", "B", "A"],
         "sample_qualities": [-0.1, -0.9, -0.2]},
        # question 1: the right sample has the lowest F -> AUROC 0
        {"method": "sc", "index": 1, "target": "C", "sample_predictions": ["D", "C", "D"],
         "sample_qualities": [-0.3, -0.8, -0.4]},
        {"method": "cot", "index": 0, "correct": True}, {"method": "cot", "index": 1, "correct": False},
        {"method": "cot", "index": 7, "correct": True},  # not among the sc questions: not counted
    ]


def test_separation_counts_by_hand() -> None:
    result = separation_from_records(_records(), resamples=50)
    assert (result["questions"], result["samples"], result["right_samples"], result["k"]) == (2, 6, 3, 3)
    assert result["within_auroc"] == pytest.approx(0.5)  # mean of 1 and 0
    # pooled: right F = -0.1, -0.2, -0.8; wrong F = -0.9, -0.3, -0.4; pairs right > wrong: 3 + 3 + 1 of 9
    assert result["pooled_auroc"] == pytest.approx(7 / 9)
    assert (result["greedy_correct"], result["greedy_questions"]) == (1, 2)
    assert (result["sc1_correct"], result["sck_correct"]) == (1, 1)  # k=1: A, D; k=3: A, D
    low, high = result["within_ci"]
    assert 0.0 <= low <= 0.5 <= high <= 1.0 and not math.isnan(low)


def test_a_run_without_sc_samples_is_one_line() -> None:
    with pytest.raises(ValueError, match="no sc record"):
        separation_from_records([{"method": "cot", "index": 0, "correct": True}])
