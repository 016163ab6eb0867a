"""The martingale math against hand-computed numbers (paper eq. 3, 8-12)."""

import math

import numpy as np
import pytest

from mfs_core import martingale


def test_foresight_quality_is_mean_logprob_per_token():
    assert martingale.foresight_quality(-6.0, 4) == -1.5
    assert martingale.foresight_quality(0.0, 0) == 0.0


def test_step_values_subtract_the_baseline():
    values = martingale.step_values([-0.5, -1.0, -0.2], [-1.0, -1.0, -0.1])
    np.testing.assert_allclose(values, [0.5, 0.0, -0.1])


def test_step_values_reject_mismatched_shapes():
    with pytest.raises(ValueError, match="differ in shape"):
        martingale.step_values([1.0, 2.0], [1.0])


def test_deficits_are_distance_to_the_best():
    np.testing.assert_allclose(martingale.deficits([-1.0, -0.25, -2.0]), [0.75, 0.0, 1.75])


def test_width_prune_keeps_scores_at_or_above_mu_plus_lambda_sigma():
    # scores -1, -2, -3, -4: μ = -2.5, σ = sqrt(1.25) = 1.1180; λ1 = 0.8 -> threshold -1.6056
    pruning = martingale.width_prune([-1.0, -2.0, -3.0, -4.0], 0.8)
    assert pruning.mean == pytest.approx(-2.5)
    assert pruning.std == pytest.approx(math.sqrt(1.25))
    assert pruning.threshold == pytest.approx(-2.5 + 0.8 * math.sqrt(1.25))
    assert pruning.keep.tolist() == [True, False, False, False]
    assert pruning.c_prune == pytest.approx(-1.0 - pruning.threshold)
    # λ1 = 0: everything at or above the mean survives.
    assert martingale.width_prune([-1.0, -2.0, -3.0, -4.0], 0.0).keep.tolist() == [True, True, False, False]


def test_width_prune_always_keeps_the_best():
    # Equal scores: σ = 0, threshold = μ, all survive; a huge λ1 still keeps the best.
    assert martingale.width_prune([-1.0, -1.0], 0.8).keep.tolist() == [True, True]
    assert martingale.width_prune([-3.0, -1.0, -2.0], 100.0).keep.tolist() == [False, True, False]


def test_width_prune_rejects_bad_input():
    with pytest.raises(ValueError, match="at least one score"):
        martingale.width_prune([], 0.8)
    with pytest.raises(ValueError, match="prune_lambda must be >= 0, got -0.1"):
        martingale.width_prune([-1.0], -0.1)


def test_selection_weights_are_softmax_over_temperature():
    # V = (0.1, 0.0), T = 0.1 -> softmax(1, 0) = (e/(e+1), 1/(e+1))
    weights = martingale.selection_weights([0.1, 0.0], 0.1)
    e = math.e
    np.testing.assert_allclose(weights, [e / (e + 1), 1 / (e + 1)])
    with pytest.raises(ValueError, match="temperature must be > 0, got 0"):
        martingale.selection_weights([0.1], 0)


def test_select_beams_top_k_and_sampling():
    values = [0.3, -0.2, 0.5, 0.1]
    assert martingale.select_beams(values, 2, 0.1, None, top_k=True) == [2, 0]
    assert martingale.select_beams(values, 9, 0.1, None) == [2, 0, 3, 1]
    chosen = martingale.select_beams(values, 2, 0.1, np.random.default_rng(0))
    assert len(set(chosen)) == 2 and set(chosen) <= {0, 1, 2, 3}
    # With T -> small the draw concentrates on the top values: over many draws index 2 is
    # always chosen and index 1 (V 0.7 below the best, weight e^-70) never.
    counts = np.zeros(4)
    rng = np.random.default_rng(1)
    for _ in range(200):
        for i in martingale.select_beams(values, 2, 0.01, rng):
            counts[i] += 1
    assert counts[2] == 200 and counts[1] == 0


def test_select_beams_draw_frequencies_follow_the_weights():
    # Two of three without replacement; weights softmax((0, 0, ln 2)/1) = (1/4, 1/4, 1/2).
    # P(index 2 in the pair) = 1 - P(pair is {0,1}) = 1 - 2 * (1/4 * (1/4)/(3/4)) = 5/6.
    rng = np.random.default_rng(2)
    hits = sum(2 in martingale.select_beams([0.0, 0.0, math.log(2)], 2, 1.0, rng) for _ in range(6000))
    assert hits / 6000 == pytest.approx(5 / 6, abs=0.02)


def test_converged_at_epsilon():
    assert martingale.converged(1e-6, 1e-6)
    assert martingale.converged(-0.3, 1e-6)
    assert not martingale.converged(2e-6, 1e-6)


def test_width_prune_keeps_every_candidate_tied_with_the_best():
    # scores 0, 0, -1: μ = -1/3, σ = sqrt(((1/3)² + (1/3)² + (2/3)²) / 3) = sqrt(2/9) = 0.47140;
    # λ1 = 0.8 -> threshold = -1/3 + 0.8·0.47140 = 0.04379 > 0: by the threshold alone no
    # candidate survives; the best always does, and both zeros are the best.
    pruning = martingale.width_prune([0.0, 0.0, -1.0], 0.8)
    assert pruning.mean == pytest.approx(-1 / 3)
    assert pruning.std == pytest.approx(math.sqrt(2 / 9))
    assert pruning.threshold == pytest.approx(-1 / 3 + 0.8 * math.sqrt(2 / 9))
    assert pruning.threshold == pytest.approx(0.043791, abs=1e-6)
    assert pruning.keep.tolist() == [True, True, False]
    # The order does not matter, and a tie within SCORE_TOLERANCE counts.
    assert martingale.width_prune([-1.0, 0.0, -5e-7], 0.8).keep.tolist() == [False, True, True]


def test_values_within_the_tolerance_are_ordered_by_index() -> None:
    from mfs_core.martingale import SCORE_TOLERANCE, order_by_value

    noise = SCORE_TOLERANCE / 10  # what batch composition does to identical candidates on a CPU
    assert order_by_value([0.1, 0.5 + noise, 0.5, 0.3]) == [1, 2, 3, 0]
    assert order_by_value([0.1, 0.5, 0.5 + noise, 0.3]) == [1, 2, 3, 0]  # the noise does not reorder the tie
    assert order_by_value([0.5, 0.5 + 2 * SCORE_TOLERANCE]) == [1, 0]  # a real difference does
    # select_beams keeps every candidate (k >= K) or the top k (top_k) in that order
    assert martingale.select_beams([0.2, 0.2 + noise, 0.9], 3, 0.1, None) == [2, 0, 1]
    assert martingale.select_beams([0.2 + noise, 0.2, 0.9], 2, 0.1, None, top_k=True) == [2, 0]
