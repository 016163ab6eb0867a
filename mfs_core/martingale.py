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
    "AnytimeLead",
    "WidthPruning",
    "anytime_lead",
    "converged",
    "deficits",
    "effective_counts",
    "foresight_quality",
    "lead_evalue",
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


def lead_evalue(leader: float, rival: float) -> float:
    """The e-value that an answer is ahead of a rival, from ``leader`` and ``rival`` draws of them.

    Among the draws that gave one of the two answers, let ``q`` be the chance of the first.
    Against the null ``q <= 1/2`` (the rival is at least as likely), this is the likelihood ratio of
    those draws mixed over a uniform prior on the alternative ``q in [1/2, 1]``:
    ``E(x, y) = 2 * int_{1/2}^1 (2q)^x (2(1-q))^y dq = 2^(x+y+1) B(x+1, y+1) P(Q > 1/2)`` with
    ``Q ~ Beta(x+1, y+1)``, i.e. ``2^(x+y+1) B(x+1, y+1)`` times :func:`lead_probability` of
    ``[x, y]`` when ``x >= y``. Each draw of either answer multiplies a fixed-``q`` ratio by ``2q`` or
    ``2(1-q)``, whose expectation is ``1 + (2q - 1)(p_leader - p_rival) <= 1`` under the null for every
    ``q >= 1/2``: the mixture is a nonnegative supermartingale that starts at 1, so by Ville's
    inequality it ever reaches ``1/α`` with probability at most ``α`` (a test-supermartingale,
    Ramdas et al., 2023, "Game-theoretic statistics and safe anytime-valid inference"). It grows with
    ``leader`` and falls with ``rival``.

    Examples (hand-computed): ``E(0, 0) = 1``; ``E(1, 0) = 4 · (1/2) · (3/4) = 3/2``;
    ``E(x, 0) = (2^(x+1) - 1) / (x + 1)``, so ``E(7, 0) = 255/8`` and ``E(8, 0) = 511/9``;
    ``E(2, 1) = 16 · B(3, 2) · P(Bin(4, 1/2) <= 2) = 16 · (1/12) · (11/16) = 11/12``.

    Args:
        leader: draws of the answer tested, >= 0 (independent draws; not integers only for a
            caller that scales counts, for which the guarantee is not claimed).
        rival: draws of the rival answer, >= 0.

    Returns:
        ``E(leader, rival)`` > 0 (dimensionless).

    Raises:
        ValueError: a negative count.
    """
    if leader < 0 or rival < 0:
        msg = f"draw counts must be >= 0, got leader={leader}, rival={rival}"
        raise ValueError(msg)
    x, y = float(leader), float(rival)
    if x.is_integer() and y.is_integer():  # P(Q > 1/2) = P(Bin(x + y + 1, 1/2) <= x), exactly
        n = int(x + y) + 1
        upper = sum(math.comb(n, j) for j in range(int(x) + 1)) / 2**n
    else:
        upper = _regularized_beta(0.5, y + 1.0, x + 1.0)
    log_beta = math.lgamma(x + 1.0) + math.lgamma(y + 1.0) - math.lgamma(x + y + 2.0)
    return math.exp((x + y + 1.0) * math.log(2.0) + log_beta + math.log(upper))


@dataclass(frozen=True)
class AnytimeLead:
    """Outcome of :func:`anytime_lead`.

    Attributes:
        index: position (in first-appearance order) of the answer nearest to certification, the
            certified one when ``certified``; -1 when no answer was drawn.
        e_value: its :func:`lead_evalue` against the most frequent other answer, its first draw left out.
        threshold: what that e-value must reach: ``j (j + 1) / α`` for the ``j``-th answer to appear.
        certified: ``e_value >= threshold``.
    """

    index: int
    e_value: float
    threshold: float
    certified: bool


def anytime_lead(counts: Sequence[float], alpha: float) -> AnytimeLead:
    """An anytime-valid stop on the answers drawn so far: is one of them certified as the most likely?

    ``counts[j-1]`` is how many draws gave the ``j``-th distinct answer to appear (first-appearance
    order; draws that state no answer are left out). Answer ``j`` is certified when
    ``lead_evalue(counts[j-1] - 1, max of the other counts) >= j (j + 1) / α``; the one nearest to its
    threshold (largest ratio, the first on ties) is returned.

    Guarantee. Let the draws be answers sampled one after another (several at once is fine), and let
    ``m`` be an answer that, at every draw and given every draw before it, is at least as likely as
    each other answer (for independent, identically distributed answers, as self-consistency and ESC
    draw them: any mode of the answer distribution). Then, whatever the number of draws and however
    the caller decides when to look and when to stop (optional stopping), the probability that an
    answer other than ``m`` is ever certified is at most ``α``. Proof: for the ``j``-th answer ``A_j``,
    fixed at its first draw, the :func:`lead_evalue` of ``A_j`` against ``m`` over the draws after that
    one is a test-supermartingale; so is ``S = sum_j E_j / (j (j + 1))`` (weights summing to 1; ``E_j``
    = 1 when ``A_j = m``). ``lead_evalue`` falls with its rival's count, and the most frequent other
    answer has at least ``m``'s draws, so certifying ``A_j != m`` means ``S >= 1/α``, which by Ville's
    inequality happens with probability at most ``α``. What it does not say: that the certified answer
    is right (only that it is the most likely answer of the sampler), nor anything for draws that are
    not independent given the past: copies of a path that share one foresight rollout are one draw
    (a rollout counts once however many survivors share it, unlike the copies-weighted counts of
    :func:`effective_counts`), and a reused rollout remainder is no new draw.

    Cost: one answer drawn every time certifies once ``(2^x - 1) / x >= 2/α`` (``x`` draws):
    9 draws at ``α = 0.05``, 8 at 0.1, 6 at 0.2 and 0.3, 5 at 0.5.

    Example: ``anytime_lead([9], 0.05)``: ``E(8, 0) = 511/9 = 56.8 >= 2/0.05 = 40``, certified;
    ``anytime_lead([8], 0.05)``: ``E(7, 0) = 31.9 < 40``, not yet; ``anytime_lead([1, 6], 0.5)``:
    the second answer's ``E(5, 1) = 2^7 B(6, 2) P(Bin(7, 1/2) <= 5) = 128 · (1/42) · (120/128) = 20/7``
    against ``2 · 3 / 0.5 = 12``, not certified.

    Args:
        counts: draws per distinct answer in first-appearance order, shape (K,), each >= 1 (integers
            for the guarantee).
        alpha: the level α in (0, 1): the most probability of ever certifying a non-mode.

    Returns:
        The :class:`AnytimeLead`.

    Raises:
        ValueError: ``alpha`` outside (0, 1), or a count below 1.
    """
    if not 0.0 < alpha < 1.0:
        msg = f"alpha must be in (0, 1), got {alpha}"
        raise ValueError(msg)
    if any(c < 1 for c in counts):
        msg = f"each answer drawn must count at least 1 draw, got {list(counts)}"
        raise ValueError(msg)
    best = AnytimeLead(index=-1, e_value=1.0, threshold=math.inf, certified=False)
    for j, count in enumerate(counts, start=1):
        rival = max((c for i, c in enumerate(counts, start=1) if i != j), default=0.0)
        e_value = lead_evalue(count - 1, rival)
        threshold = j * (j + 1) / alpha
        if best.index < 0 or e_value / threshold > best.e_value / best.threshold:
            best = AnytimeLead(index=j - 1, e_value=e_value, threshold=threshold, certified=e_value >= threshold)
    return best
