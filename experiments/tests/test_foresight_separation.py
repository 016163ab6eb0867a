"""The math of ``testbed.foresight_separation`` on inputs small enough to compute by hand."""

import math

import pytest

from experiments.testbed.foresight_separation import (
    CANDIDATES,
    Sample,
    auroc,
    candidate_scores,
    decoding_statistics,
    filtered_vote_right,
    format_table,
    head_mean,
    lowest_group_mean,
    main,
    separation,
    tail_mean,
    token_confidence,
    within_question_aurocs,
)


def test_token_confidence_is_minus_the_mean_top_logprob():
    assert token_confidence([-0.1, -2.0, -3.9]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="at least one log-prob"):
        token_confidence([])


def test_lowest_group_mean_slides_a_window():
    # windows of 2 over 1, 2, 3, 0, 5: means 1.5, 2.5, 1.5, 2.5 -> 1.5; of 3: 2, 5/3, 8/3 -> 5/3.
    assert lowest_group_mean([1, 2, 3, 0, 5], 2) == pytest.approx(1.5)
    assert lowest_group_mean([1, 2, 3, 0, 5], 3) == pytest.approx(5 / 3)
    assert lowest_group_mean([1, 2, 3, 0, 5], 10) == pytest.approx(2.2)  # shorter than the window: one group
    assert lowest_group_mean([4, -1], 1) == -1
    assert math.isnan(lowest_group_mean([], 8))
    with pytest.raises(ValueError, match="window must be >= 1, got 0"):
        lowest_group_mean([1.0], 0)


def test_tail_mean_reads_the_last_tokens():
    assert tail_mean([1, 2, 3, 4], 2) == pytest.approx(3.5)
    assert tail_mean([1, 2, 3, 4], 10) == pytest.approx(2.5)
    assert math.isnan(tail_mean([], 4))
    with pytest.raises(ValueError, match="tail must be >= 1, got 0"):
        tail_mean([1.0], 0)


def test_auroc_counts_ordered_pairs_and_ties_half():
    # right 0.9, 0.4 against wrong 0.1, 0.6: pairs won 1, 1, 1, 0 -> 3/4.
    assert auroc([True, False, True, False], [0.9, 0.1, 0.4, 0.6]) == pytest.approx(0.75)
    assert auroc([True, False], [0.5, 0.5]) == pytest.approx(0.5)
    assert math.isnan(auroc([True, True], [0.1, 0.2]))


def test_within_question_auroc_averages_questions_with_both_classes():
    # question 0: 1.0; question 1: the right answer scores below both wrong ones, 0.0; question 2: all right.
    labels = [True, False, True, False, False, True, True]
    scores = [1.0, 0.0, 0.0, 1.0, 0.5, 0.3, 0.2]
    groups = [0, 0, 1, 1, 1, 2, 2]
    assert within_question_aurocs(labels, scores, groups) == {0: 1.0, 1: 0.0}
    assert within_question_aurocs([True], [0.0], [0]) == {}


def test_filtered_vote_keeps_the_top_scored_answers():
    answers = ["5", "5", "7", "7", "7", None]
    rights = [True, True, False, False, False, False]
    # all six: "7" wins 3-2; the top 3 by score are the two "5"s and one "7".
    assert filtered_vote_right(answers, rights, [0.9, 0.8, 0.7, 0.1, 0.0, 1.0], keep=6) is False
    assert filtered_vote_right(answers, rights, [0.9, 0.8, 0.7, 0.1, 0.0, 0.5], keep=3) is True
    # a 1-1 tie goes to the answer with the higher score
    assert filtered_vote_right(["5", "7"], [True, False], [0.2, 0.3], keep=2) is False
    assert filtered_vote_right([None], [False], [0.0], keep=1) is False


def _samples() -> list[Sample]:
    # Per question: a right answer of 4 tokens at -0.2 (mean -0.2, sum -0.8) and a wrong one of
    # 10 tokens at -0.1 (mean -0.1, sum -1.0); every token confidence 1.0.
    out = []
    for q in (0, 1):
        out.append(Sample(q, True, "5", "a", [-0.2] * 4, [1.0] * 4))
        out.append(Sample(q, False, "7", "b" if q == 0 else "a", [-0.1] * 10, [1.0] * 10))
    return out


def test_candidate_scores_of_one_sample():
    s = Sample(0, True, "5", "a", [-1.0, 0.0, -3.0], [2.0, 4.0, 0.0])
    scores = candidate_scores(s)
    assert set(scores) == set(CANDIDATES)
    assert scores["mean_logprob"] == pytest.approx(-4 / 3) and scores["sum_logprob"] == pytest.approx(-4.0)
    assert scores["lowest_group_conf@8"] == pytest.approx(2.0)  # 3 tokens: one group
    assert scores["tail_logprob@16"] == pytest.approx(-4 / 3) and scores["mean_conf"] == pytest.approx(2.0)
    assert scores["head_logprob@32"] == pytest.approx(-4 / 3)  # 3 tokens: all of them


def test_the_fixed_window_reads_the_first_tokens_and_stays_outside_the_rule():
    assert head_mean([-1.0, -3.0, -0.5, -0.5], 2) == pytest.approx(-2.0)
    assert head_mean([-1.0], 32) == pytest.approx(-1.0) and math.isnan(head_mean([], 32))
    with pytest.raises(ValueError, match="head must be >= 1, got 0"):
        head_mean([-1.0], 0)
    # A 40-token right answer whose first 32 tokens are at -0.1 and last 8 at -2.0 (mean -0.48), against a
    # 40-token wrong answer at -0.3 throughout: the window ranks right above wrong (AUROC 1), the mean does not.
    samples = [Sample(q, True, "5", "a", [-0.1] * 32 + [-2.0] * 8, [1.0] * 40) for q in range(3)]
    samples += [Sample(q, False, "7", "b", [-0.3] * 40, [1.0] * 40) for q in range(3)]
    rows = separation(samples, resamples=50)["candidates"]
    assert rows["head_logprob@32"]["within_auroc"] == 1.0 and rows["mean_logprob"]["within_auroc"] == 0.0
    assert rows["head_logprob@32"]["passes"] is False  # reported, never chosen


def test_separation_and_the_preregistered_rule():
    result = separation(_samples(), resamples=50)
    rows = result["candidates"]
    assert (result["questions"], result["mixed_questions"], result["samples"], result["right_samples"]) == (2, 2, 4, 2)
    # mean log-prob ranks the wrong answer first (AUROC 0); the sum ranks the right one first (1).
    assert rows["mean_logprob"]["within_auroc"] == 0.0 and rows["mean_logprob"]["pooled_auroc"] == 0.0
    assert rows["sum_logprob"]["within_auroc"] == 1.0 and rows["sum_logprob"]["within_minus_mean_logprob"] == 1.0
    assert rows["sum_logprob"]["difference_ci"] == (1.0, 1.0)
    # equal confidences tie: AUROC 1/2, +0.5 over the mean log-prob, which passes too.
    assert rows["mean_conf"]["within_auroc"] == 0.5
    assert rows["tail_logprob@16"]["within_auroc"] == 0.0 and not rows["tail_logprob@16"]["passes"]
    assert not rows["mean_logprob"]["passes"]
    assert set(result["passing"]) == {"sum_logprob", "mean_conf", "lowest_group_conf@8", "lowest_group_conf@16",
                                      "lowest_group_conf@32", "tail_conf@16", "tail_conf@32"}
    assert result["chosen"] == "sum_logprob"
    # the vote over the top half (1 of 2) by F: the sum keeps both right answers, the mean neither.
    assert rows["sum_logprob"]["filtered_vote_correct"] == 2 and rows["mean_logprob"]["filtered_vote_correct"] == 0
    assert "chosen sum_logprob" in format_table(result)


def test_decoding_statistics():
    stats = decoding_statistics(_samples(), greedy=[True, False])
    # a 1-1 vote per question goes to the higher mean log-prob, the wrong "7"; first steps differ only in q 0.
    assert stats["greedy"][0] == 0.5 and stats["greedy"][3] == 1
    assert stats["self_consistency"][3] == 0 and stats["diverse_first_steps"][3] == 1


def test_main_refuses_questions_past_the_tuning_split(capsys):
    with pytest.raises(SystemExit):
        main(["--limit", "201"])
    assert "--limit must be in 1..200" in capsys.readouterr().err
