"""The martingale math of MFS as pure functions on arrays (MFS_SPEC.md, steps 3-7).

Each function cites the paper equation it implements (Li et al., EACL 2026). Inputs are
sequences of floats in nats; outputs are numpy arrays or floats.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "SCORE_TOLERANCE",
    "WidthPruning",
    "converged",
    "deficits",
    "effective_counts",
    "foresight_quality",
    "lead_probability",
    "order_by_value",
    "select_beams",
    "selection_weights",
    "step_values",
    "width_prune",
]


def foresight_quality(logprob_sum: float, num_tokens: int) -> float:
    """``F_t``: mean log-probability per token of a foresight rollout (eq. 3, log space).

    Args:
        logprob_sum: summed raw log-probabilities of the rollout's tokens (nats).
        num_tokens: rollout length (tokens).

    Returns:
        ``logprob_sum / num_tokens`` in nats per token; 0.0 for an empty rollout.
    """
    return logprob_sum / num_tokens if num_tokens > 0 else 0.0


def step_values(qualities: Sequence[float], baselines: Sequence[float]) -> np.ndarray:
    """Predictable advantage ``V(a_t) = F_t - F_{t-1}`` (eq. 8, Doob decomposition).

    Args:
        qualities: ``F_t`` of each candidate, shape (K,), nats.
        baselines: the matching baseline (the parent's ``F_{t-1}``, or the parent's step
            log-prob for ``baseline="parent_step"``), shape (K,), nats.

    Returns:
        Step values, shape (K,), nats.
    """
    q = np.asarray(qualities, dtype=float)
    b = np.asarray(baselines, dtype=float)
    if q.shape != b.shape:
        msg = f"qualities and baselines differ in shape: {q.shape} != {b.shape}"
        raise ValueError(msg)
    return q - b


def deficits(qualities: Sequence[float]) -> np.ndarray:
    """``D_t^i = F_t^best - F_t^i`` (eq. 9), shape (K,), nats; empty for no candidates."""
    q = np.asarray(qualities, dtype=float)
    return q.max() - q if q.size else q


@dataclass(frozen=True)
class WidthPruning:
    """Outcome of :func:`width_prune`.

    Attributes:
        keep: boolean mask, shape (K,): the candidate survives.
        mean: μ of the scores (nats).
        std: σ of the scores (population, ``ddof=0``, nats).
        threshold: ``μ + λ1·σ`` (nats).
        c_prune: ``F_best - threshold``: a candidate is stopped once its deficit exceeds it
            (eq. 10-11; nats).
    """

    keep: np.ndarray
    mean: float
    std: float
    threshold: float
    c_prune: float


SCORE_TOLERANCE = 1e-6
"""Scores closer than this (nats per token) count as equal in :func:`width_prune`.

Identical candidates (common once a model is trained) get log-probs that differ in the last
float bits depending on their row in the batch and on the backend; without a tolerance their
σ is ~1e-8 instead of 0 and about half of them would be pruned by rounding noise alone.
"""


def width_prune(scores: Sequence[float], prune_lambda: float) -> WidthPruning:
    """Optional-stopping width pruning (eq. 10-11).

    A candidate survives iff ``score >= μ + λ1·σ`` (up to :data:`SCORE_TOLERANCE`, so that
    candidates tied but for float noise survive or fall together); the best-scoring
    candidate always survives, and so does every candidate tied with it within
    :data:`SCORE_TOLERANCE` (``width_prune([0, 0, -1], 0.8)`` keeps both zeros). Equivalently, candidate i is stopped once ``D^i > c_prune``
    with ``c_prune = score_best - (μ + λ1·σ)``.

    Args:
        scores: step log-probability (mean per token, nats) of each unfinished candidate,
            shape (K,), K >= 1.
        prune_lambda: λ1 >= 0, in standard deviations.

    Returns:
        The :class:`WidthPruning` with the keep mask.

    Raises:
        ValueError: no scores, or ``prune_lambda`` < 0.
    """
    s = np.asarray(scores, dtype=float)
    if s.size == 0:
        msg = "width_prune needs at least one score, got 0"
        raise ValueError(msg)
    if prune_lambda < 0:
        msg = f"prune_lambda must be >= 0, got {prune_lambda}"
        raise ValueError(msg)
    mean = float(s.mean())
    std = float(s.std())
    threshold = mean + prune_lambda * std
    keep = (s >= threshold - SCORE_TOLERANCE) | (s >= s.max() - SCORE_TOLERANCE)
    return WidthPruning(keep=keep, mean=mean, std=std, threshold=threshold, c_prune=float(s.max()) - threshold)


def selection_weights(values: Sequence[float], temperature: float) -> np.ndarray:
    """``softmax(V / T)`` (Algorithm 1; φ-Decoding's T = 0.1), shape (K,), sums to 1."""
    if temperature <= 0:
        msg = f"selection temperature must be > 0, got {temperature}"
        raise ValueError(msg)
    v = np.asarray(values, dtype=float) / temperature
    v = v - v.max()
    w = np.exp(v)
    return w / w.sum()


def order_by_value(values: Sequence[float]) -> list[int]:
    """Indices by decreasing value, values within :data:`SCORE_TOLERANCE` of each other by index.

    Identical candidates (the same step text) get values equal up to float noise that
    depends on the batch a request ran in (~1e-7 nats on CPU); ordering them by that noise
    would make the beams' order, and so the rest of the search, depend on the batch.

    Args:
        values: shape (K,), nats.

    Returns:
        A permutation of ``range(K)``.
    """
    order = sorted(range(len(values)), key=lambda i: -values[i])
    ranked: list[int] = []
    tied: list[int] = []
    for i in order:
        if tied and values[tied[0]] - values[i] > SCORE_TOLERANCE:
            ranked += sorted(tied)
            tied = []
        tied.append(i)
    return ranked + sorted(tied)


def select_beams(
    values: Sequence[float], k: int, temperature: float, rng: np.random.Generator | None, top_k: bool = False
) -> list[int]:
    """Indices of the ``k`` candidates kept as beams.

    Args:
        values: step values, shape (K,), nats.
        k: beams to keep; all K are kept when ``k >= K``.
        temperature: selection temperature T of ``softmax(V / T)``.
        rng: numpy generator for the draw (unused with ``top_k``).
        top_k: the release's rule, the k largest values (ties by index).

    Returns:
        Selected indices, in selection order (all kept or top-k: :func:`order_by_value`).
    """
    n = len(values)
    if k >= n or top_k:
        return order_by_value(values)[:k]
    if rng is None:
        msg = "select_beams needs an rng when top_k is False"
        raise ValueError(msg)
    weights = selection_weights(values, temperature)
    # Zero-weight candidates cannot be drawn by numpy without replacement; give them a floor.
    weights = np.maximum(weights, 1e-300)
    weights = weights / weights.sum()
    return [int(i) for i in rng.choice(n, size=k, replace=False, p=weights)]


def converged(max_step_value: float, stop_epsilon: float) -> bool:
    """Martingale convergence test (eq. 12): ``max V <= ε_stop``."""
    return max_step_value <= stop_epsilon


def lead_probability(counts: Sequence[float]) -> float:
    """Posterior probability that the leading answer keeps the lead (Adaptive-Consistency's stop).

    With ``v1 >= v2`` the two largest vote counts among the answers seen so far, and a uniform
    prior on the share ``p`` of the leader among the two, ``p | votes ~ Beta(v1 + 1, v2 + 1)``;
    this returns ``P(p > 1/2)`` (Aggarwal et al., 2023, "Let's Sample Step by Step:
    Adaptive-Consistency", the Beta stopping criterion). As more samples arrive, this is the
    conditional expectation of the event "the leader wins the final vote" given the samples
    seen: a Doob martingale over the rollouts, which converges to 0 or 1.

    Computed exactly for integer counts: ``I_{1/2}(a, b) = P(Bin(a + b - 1, 1/2) >= a)``, so
    ``P(p > 1/2) = P(Bin(v1 + v2 + 1, 1/2) <= v1)``. Counts that are not integers (the weighted
    vote's :func:`effective_counts`) go through the regularized incomplete beta function
    ``I_{1/2}(v2 + 1, v1 + 1)`` (Lentz's continued fraction, relative error below 1e-12).

    Example: ``lead_probability([4, 0]) == 31/32``; ``lead_probability([1, 1]) == 0.5``;
    ``lead_probability([1.5, 0]) == 1 - 2**-2.5`` (``Beta(2.5, 1)``); no votes give 0.5.

    Args:
        counts: vote counts per distinct answer, any order, shape (K,), each >= 0.

    Returns:
        A probability in [0.5, 1).

    Raises:
        ValueError: a negative count.
    """
    ordered = sorted((float(c) for c in counts), reverse=True)
    if ordered and ordered[-1] < 0:
        msg = f"vote counts must be >= 0, got {list(counts)}"
        raise ValueError(msg)
    leader = ordered[0] if ordered else 0.0
    runner_up = ordered[1] if len(ordered) > 1 else 0.0
    if leader.is_integer() and runner_up.is_integer():
        v1, n = int(leader), int(leader + runner_up) + 1
        return sum(math.comb(n, j) for j in range(v1 + 1)) / 2**n
    return _regularized_beta(0.5, runner_up + 1.0, leader + 1.0)


def _regularized_beta(x: float, a: float, b: float) -> float:
    """``I_x(a, b)``, the regularized incomplete beta function, for ``0 < x < 1`` and ``a, b > 0``.

    The continued fraction of Press et al., *Numerical Recipes* (3rd ed., §6.4, ``betacf``),
    evaluated by the modified Lentz method, on the side of ``x`` where it converges fast
    (``I_x(a, b) = 1 - I_{1-x}(b, a)``).
    """
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _regularized_beta(1.0 - x, b, a)
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 1000):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return math.exp(log_front) * fraction / a


def effective_counts(counts: Sequence[float], weights: Sequence[float]) -> list[float]:
    """Weighted vote counts scaled to Kish's effective sample size, for :func:`lead_probability`.

    A weighted vote (``MFSSettings.vote_rollouts="weighted"``) gives each foresight rollout the
    number of sampled candidates whose path it completes; its answer shares ``w_a / W`` estimate
    the answer distribution as a vote over those candidates would. But the copies of one path
    share one rollout: the answers seen are ``len(weights)`` independent draws, not ``W``. The
    weighted share's variance is that of ``n_eff = W**2 / sum(w**2)`` independent draws (Kish,
    1965), so the Beta posterior reads counts ``n_eff · w_a / W = w_a · W / sum(w**2)``: the
    plain counts when every weight is 1, one vote's worth when one rollout carries all the weight.

    Example: answers ``1, 2, 2`` with weights ``3, 1, 1``: ``W = 5``, ``sum(w**2) = 11``, counts
    ``[3, 2]`` become ``[15/11, 10/11]``.

    Args:
        counts: summed weight per distinct answer, shape (K,).
        weights: the weight of every answered sample (what ``counts`` sums), shape (S,), each >= 0.

    Returns:
        The scaled counts, shape (K,); all 0 when the weights are.
    """
    total = float(sum(weights))
    squares = float(sum(w * w for w in weights))
    scale = total / squares if squares > 0 else 0.0
    return [float(c) * scale for c in counts]
