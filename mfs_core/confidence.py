"""DeepConf's confidence measures, as pure functions on lists of numbers.

Deep Think with Confidence (Fu et al., 2025, arXiv 2508.15260, "DeepConf"), section 2, and the
authors' code (``facebookresearch/deepconf`` at commit ``675529d``; ``deepconf/utils.py``,
``deepconf/processors.py``, ``deepconf/wrapper.py``, line numbers below are of that commit):

* token confidence ``C_i = -(1/k) sum_{j<=k} log P_i(j)``, minus the mean of the ``k`` largest
  raw log-probs at position ``i`` (paper eq. 2; ``processors.py:29-34``, k = 20): high when the
  model puts its mass on few tokens;
* group confidence, the mean of ``C`` over a window of ``w`` consecutive tokens, sliding one
  token at a time (paper eq. 4; ``utils.py:53-62`` ``compute_least_grouped``);
* a trace's score, its lowest group confidence (paper eq. 6; ``utils.py:301`` ``min_conf``);
* the stopping threshold, a percentile of the warm-up traces' scores that keeps the top
  ``keep`` fraction of them (``wrapper.py:208``: ``np.percentile(min_confs, 100 - percentile)``).

Where the library departs from the code: no rounding (``utils.py:49,61`` round confidences and
group means to 3 decimals for storage; the early-stop processor, ``processors.py:34``, does not);
``token_confidence`` averages exactly the top ``k`` (``utils.py:48`` averages every entry of
vLLM's log-prob dict, which holds ``k + 1`` when the sampled token is outside the top ``k``; the
processor takes exactly ``k``). Units: log-probabilities and confidences in nats, windows and
positions in tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = [
    "first_group_below", "group_confidences", "lowest_group_mean", "stopping_threshold", "token_confidence",
    "trace_score",
]


def token_confidence(top_logprobs: Sequence[float]) -> float:
    """DeepConf's token confidence ``-(1/k) sum_j log P(j)`` of the ``k`` given log-probs (nats).

    Paper eq. 2; ``deepconf/processors.py:29-34`` (``-log(topk(softmax(logits))).sum() / k``).
    The caller passes the top ``k`` raw (temperature-1) log-probs of one position; fewer when
    the vocabulary (or a server) has fewer.

    Args:
        top_logprobs: the log-probs (nats, each <= 0), any order.

    Returns:
        The confidence (nats, >= 0 for log-probs <= 0).

    Raises:
        ValueError: ``top_logprobs`` is empty.
    """
    if not top_logprobs:
        msg = "token_confidence needs at least one log-prob, got none"
        raise ValueError(msg)
    return -sum(top_logprobs) / len(top_logprobs)


def group_confidences(confidences: Sequence[float], window: int) -> list[float]:
    """The mean of ``confidences`` over every window of ``window`` consecutive tokens (paper eq. 4).

    ``deepconf/utils.py:53-62`` (``compute_least_grouped``) without its rounding: with ``n >=
    window`` tokens, the ``n - window + 1`` sliding means; with fewer, one group, the mean of all;
    with none, no group.

    Args:
        confidences: token confidences (nats), one per token.
        window: tokens per group, >= 1.

    Returns:
        The group confidences (nats), in order.

    Raises:
        ValueError: ``window`` < 1.
    """
    if window < 1:
        msg = f"window must be >= 1, got {window}"
        raise ValueError(msg)
    values = [float(c) for c in confidences]
    if not values:
        return []
    if len(values) < window:
        return [sum(values) / len(values)]
    sums = np.convolve(np.asarray(values), np.ones(window), mode="valid")
    return [float(s) / window for s in sums]


def lowest_group_mean(values: Sequence[float], window: int) -> float:
    """The lowest mean of ``values`` over a sliding window of ``window`` consecutive entries
    (DeepConf's lowest group confidence, paper eq. 6); the mean of all when there are fewer; NaN
    when empty.

    Raises:
        ValueError: ``window`` < 1.
    """
    groups = group_confidences(values, window)
    return min(groups) if groups else math.nan


def trace_score(confidences: Sequence[float], window: int) -> float:
    """A trace's score: its lowest group confidence (nats); 0.0 for a trace of no tokens.

    ``deepconf/utils.py:290,301``: a trace without log-probs has the one group ``[0]``, so its
    ``min_conf`` is 0, the lowest any trace can score (a confidence is >= 0).

    Args:
        confidences: the trace's token confidences (nats).
        window: tokens per group, >= 1.

    Returns:
        ``lowest_group_mean(confidences, window)``, or 0.0 when ``confidences`` is empty.
    """
    groups = group_confidences(confidences, window)
    return min(groups) if groups else 0.0


def first_group_below(confidences: Sequence[float], window: int, threshold: float, start: int = 0) -> int | None:
    """Where a trace generated online would be stopped: the end of its first full window whose
    mean confidence is below ``threshold``.

    ``deepconf/processors.py:43-51``: after each token the processor keeps the last ``window``
    token confidences and stops the trace once the window is full and their mean is below the
    threshold; a trace shorter than the window is never stopped online (``wrapper.py:250-252``
    still discards it afterwards when its score is below the threshold).

    Args:
        confidences: the token confidences so far (nats).
        window: tokens per group, >= 1.
        threshold: the stopping threshold ``s`` (nats).
        start: tokens already checked: only windows that end after the first ``start`` tokens
            are tested (a caller that checks after each chunk passes the previous length).

    Returns:
        The number of tokens at which the first such window ends (``window <= n <= len``), or
        None when no full window ending after ``start`` is below ``threshold``.

    Raises:
        ValueError: ``window`` < 1.
    """
    if window < 1:
        msg = f"window must be >= 1, got {window}"
        raise ValueError(msg)
    if len(confidences) < window:
        return None
    groups = group_confidences(confidences, window)  # groups[i] ends at token i + window
    for end in range(max(start + 1, window), len(confidences) + 1):
        if groups[end - window] < threshold:
            return end
    return None


def stopping_threshold(scores: Sequence[float], keep: float) -> float:
    """The threshold ``s`` that keeps the top ``keep`` fraction of the warm-up traces' scores.

    ``deepconf/wrapper.py:208``: ``np.percentile(min_confs, 100 - confidence_percentile)``, with
    ``keep = confidence_percentile / 100`` (numpy's default linear interpolation). DeepConf-low
    keeps the top 10% (``keep = 0.1``: the 90th percentile), DeepConf-high the top 90%
    (``keep = 0.9``: the 10th percentile). A trace scoring at or above ``s`` is kept
    (``wrapper.py:313``); online, a later trace stops once a group falls below it.

    Args:
        scores: the warm-up traces' scores (nats), at least one.
        keep: the fraction of them to keep, in (0, 1].

    Returns:
        The threshold (nats), between the lowest and the highest score.

    Raises:
        ValueError: no scores, or ``keep`` outside (0, 1].
    """
    if not scores:
        msg = "stopping_threshold needs at least one warm-up score, got none"
        raise ValueError(msg)
    if not 0 < keep <= 1:
        msg = f"keep must be in (0, 1], got {keep}"
        raise ValueError(msg)
    return float(np.percentile(np.asarray(scores, dtype=float), 100.0 * (1.0 - keep)))
