"""Paired comparison of two bench methods (exact McNemar), with hand-computed counts and p-values."""

from __future__ import annotations

import pytest

from mfs_core.bench.report import format_paired, paired_comparisons


def _records(method, correct, start=0):
    return [{"method": method, "index": start + i, "correct": c} for i, c in enumerate(correct)]


def test_discordant_pairs_and_the_exact_p_value():
    records = _records("mfs", [1, 1, 0, 1, 0]) + _records("phi", [0, 1, 1, 0, 0])
    (phi,) = paired_comparisons(records)
    assert (phi.other, phi.questions, phi.only_method, phi.only_other) == ("phi", 5, 2, 1)
    assert phi.p_value == pytest.approx(1.0)  # 2 of 3 discordant pairs: P(|X - 1.5| >= 0.5) = 1
    records = _records("mfs", [1] * 6 + [0] * 4) + _records("sc", [0] * 6 + [0] * 4)
    (sc,) = paired_comparisons(records)
    assert (sc.only_method, sc.only_other) == (6, 0)
    assert sc.p_value == pytest.approx(2 / 64)  # two-sided: 2 · 0.5^6


def test_only_questions_both_decoded_are_paired_and_ties_give_p_1():
    records = _records("mfs", [1, 0, 1]) + _records("cot", [1, 0, 1, 0], start=1)  # shares indices 1 and 2
    (cot,) = paired_comparisons(records)
    assert (cot.questions, cot.only_method, cot.only_other, cot.p_value) == (2, 1, 1, 1.0)
    assert paired_comparisons(_records("cot", [1]), "mfs") == []
    same = paired_comparisons(_records("mfs", [1, 0]) + _records("phi", [1, 0]))
    assert same[0].p_value == 1.0 and same[0].only_method == same[0].only_other == 0
    assert format_paired(same) == "mfs vs phi: only mfs 0, only phi 0, exact McNemar p = 1.000 (2 questions)"
