"""Width pruning treats candidates tied but for float noise as tied (martingale.SCORE_TOLERANCE).

Found through the HTTP backend: two identical step candidates got step log-probs
-0.18234002128 and -0.18234003618 in one batched call (their rows differ in rounding), so
σ was 7e-9 instead of 0 and one of the two was pruned; served one request per call they
were exactly equal and both survived, and the decodes diverged.
"""

from __future__ import annotations

import numpy as np

from mfs_core.martingale import SCORE_TOLERANCE, width_prune


def test_noisy_duplicates_survive_together() -> None:
    exact = width_prune([-0.18234002, -0.18234002], 0.8)
    noisy = width_prune([-0.18234002128519933, -0.18234003618636052], 0.8)
    assert exact.keep.tolist() == noisy.keep.tolist() == [True, True]


def test_noisy_duplicates_are_pruned_together() -> None:
    scores = [-0.1, -0.5, -0.5 + 3e-8, -0.5 - 3e-8]
    result = width_prune(scores, 0.8)
    assert result.keep.tolist() == [True, False, False, False]
    assert result.threshold > -0.5 + SCORE_TOLERANCE


def test_real_differences_still_decide() -> None:
    scores = np.array([-0.2, -0.2 + 1e-3, -0.3])
    result = width_prune(scores, 0.0)  # threshold = mean = -0.2333
    assert result.keep.tolist() == [True, True, False]
    assert width_prune([-1.0, -1.0 + 2 * SCORE_TOLERANCE], 1.0).keep.tolist() == [False, True]
