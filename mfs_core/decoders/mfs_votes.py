"""The answers an MFS search has produced (MFS_SPEC.md step 9 and the answer-level stops), and the
weights of its final vote.

:class:`SampleVote` records every complete answer the search sampled (foresight rollouts joined with
their paths, finished candidates); what ``vote_rollouts`` puts to the final vote, what the Beta stop
(``answer_stop_confidence``) and the anytime-valid stop (``answer_stop_alpha``) read.
:func:`vote_weights` gives the final vote's weights (copies, ``vote_quality_beta``).
"""

from __future__ import annotations

from collections.abc import Sequence

from mfs_core import martingale
from mfs_core.answers import AnswerExtractor, quality_weights
from mfs_core.settings import MFSSettings

__all__ = ["SampleVote", "vote_weights"]


class SampleVote:
    """Every complete answer the search sampled, in order: foresight rollouts joined with their
    paths and finished candidates, each with its vote (``weights``).

    What ``vote_rollouts`` puts to the final vote and the answer stops read; with none of them on
    (``active`` False, the default) nothing is recorded and no answer is extracted. Each sample's
    vote is 1 (``vote_rollouts=True``: a rollout once, however many survivors share it) or,
    ``weighted``, the number of the step's sampled candidates it stands for (a finished candidate 1;
    a rollout the copies of its path over its estimate's rollouts). :attr:`draws` counts each sample
    once, whatever its vote: the independent answers the anytime-valid stop reads.
    """

    def __init__(self, key: AnswerExtractor, active: bool, weighted: bool) -> None:
        self.key = key
        self.active = active
        self.weighted = weighted
        self.texts: list[str] = []
        self.qualities: list[float] = []
        self.weights: list[float] = []
        self.counts: dict[str, float] = {}  # summed votes per answer
        self.draws: dict[str, int] = {}  # samples per answer, in first-appearance order
        self._answered: list[float] = []  # the vote of every sample that states an answer

    @classmethod
    def for_settings(cls, key: AnswerExtractor, s: MFSSettings) -> SampleVote:
        """The record a search under ``s`` keeps: active when a rule reads it (``vote_rollouts``,
        ``answer_stop_confidence``, ``answer_stop_alpha``), weighted with ``vote_rollouts="weighted"``."""
        active = bool(s.vote_rollouts) or s.answer_stop_confidence is not None or s.answer_stop_alpha is not None
        return cls(key, active=active, weighted=s.vote_rollouts == "weighted")

    def add(self, text: str, quality: float, copies: float = 1.0) -> None:
        """Record one complete sample, its F (nats per token) and the candidates it stands for
        (its vote when ``weighted``; otherwise it votes once)."""
        if not self.active:
            return
        weight = float(copies) if self.weighted else 1.0
        self.texts.append(text)
        self.qualities.append(float(quality))
        self.weights.append(weight)
        answer = self.key(text)
        if answer is not None:
            self.counts[answer] = self.counts.get(answer, 0.0) + weight
            self.draws[answer] = self.draws.get(answer, 0) + 1
            self._answered.append(weight)

    def stop_counts(self) -> dict[str, float]:
        """The counts the answer stop's Beta posterior reads: the votes per answer scaled to their
        effective sample size (:func:`mfs_core.martingale.effective_counts`; unweighted: the counts)."""
        return dict(zip(self.counts, martingale.effective_counts(list(self.counts.values()), self._answered)))


def vote_weights(qualities: Sequence[float], copies: Sequence[float] | None, s: MFSSettings) -> list[float] | None:
    """The final vote's weight of each completed path: its ``copies`` (``vote_rollouts="weighted"``; None:
    1 each) times ``exp(β (F - max F))`` with ``β = vote_quality_beta`` (:func:`~mfs_core.answers.quality_weights`).

    Returns:
        The weights, shape (K,), or None (one vote each) when neither applies.
    """
    if s.vote_quality_beta is None:
        return None if copies is None else list(copies)
    by_quality = quality_weights(list(qualities), s.vote_quality_beta)
    return [w * float(c) for w, c in zip(by_quality, copies if copies is not None else [1.0] * len(by_quality))]
