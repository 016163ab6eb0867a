"""DeepConf's confidence measures (mfs_core.confidence), against numbers worked out by hand."""

from __future__ import annotations

import math

import pytest

from mfs_core.confidence import (
    first_group_below, group_confidences, lowest_group_mean, stopping_threshold, token_confidence, trace_score,
)


def test_token_confidence_is_minus_the_mean_of_the_given_top_logprobs() -> None:
    # -(-0.1 - 2.0 - 3.9) / 3 = 6.0 / 3
    assert token_confidence([-0.1, -2.0, -3.9]) == pytest.approx(2.0)
    assert token_confidence([-0.5]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="at least one log-prob"):
        token_confidence([])


def test_group_confidences_slide_a_full_window_or_make_one_short_group() -> None:
    # windows of 2 over [1, 2, 3, 0, 5]: (1+2)/2, (2+3)/2, (3+0)/2, (0+5)/2
    assert group_confidences([1, 2, 3, 0, 5], 2) == pytest.approx([1.5, 2.5, 1.5, 2.5])
    assert group_confidences([1, 2, 3, 0, 5], 5) == pytest.approx([2.2])
    assert group_confidences([1, 2, 3, 0, 5], 10) == pytest.approx([2.2])  # shorter than the window: one group
    assert group_confidences([], 4) == []
    with pytest.raises(ValueError, match="window must be >= 1"):
        group_confidences([1.0], 0)


def test_a_trace_scores_its_lowest_group() -> None:
    assert trace_score([3, 1, 3], 2) == pytest.approx(2.0)  # groups 2, 2
    assert trace_score([4, 4, 2, 4], 2) == pytest.approx(3.0)  # groups 4, 3, 3
    assert trace_score([4], 2) == pytest.approx(4.0)  # one short group
    assert trace_score([], 2) == 0.0  # deepconf/utils.py:290: no log-probs, the group [0]
    assert lowest_group_mean([1, 2, 3, 0, 5], 3) == pytest.approx(5 / 3)  # (2+3+0)/3
    assert math.isnan(lowest_group_mean([], 8))


def test_the_online_stop_is_the_end_of_the_first_full_window_under_the_threshold() -> None:
    # windows of 2 over [3, 3, 2, 1] end at 2, 3, 4 with means 3, 2.5, 1.5: only the last is < 2.5
    assert first_group_below([3, 3, 2, 1], 2, 2.5) == 4
    assert first_group_below([3, 3, 2, 1], 2, 2.6) == 3  # 2.5 < 2.6 already
    assert first_group_below([3, 3, 2, 1], 2, 2.5, start=2) == 4  # windows ending after token 2
    assert first_group_below([3, 3, 2, 1], 2, 2.5, start=4) is None  # checked already
    assert first_group_below([3, 3], 2, 2.5) is None
    assert first_group_below([1.0], 2, 2.5) is None  # shorter than a group: never stopped online
    assert first_group_below([0.5, 4], 2, 2.5) == 2  # (0.5 + 4) / 2 = 2.25


def test_the_threshold_is_numpys_percentile_that_keeps_the_top_fraction() -> None:
    scores = [2.0, 3.0, 1.0, 4.0]  # sorted 1, 2, 3, 4; numpy interpolates linearly
    assert stopping_threshold(scores, 0.9) == pytest.approx(1.3)  # 10th percentile: 1 + 0.3 · (2 - 1)
    assert stopping_threshold(scores, 0.1) == pytest.approx(3.7)  # 90th percentile: 3 + 0.7 · (4 - 3)
    assert stopping_threshold(scores, 0.5) == pytest.approx(2.5)
    assert stopping_threshold(scores, 1.0) == pytest.approx(1.0)  # keep all: the lowest score
    assert stopping_threshold([1.7], 0.1) == pytest.approx(1.7)
    with pytest.raises(ValueError, match="keep must be in"):
        stopping_threshold(scores, 0.0)
    with pytest.raises(ValueError, match="at least one warm-up score"):
        stopping_threshold([], 0.5)
