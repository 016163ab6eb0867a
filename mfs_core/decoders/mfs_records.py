"""The records MFS's steps pass along (MFS_SPEC.md "One decoding run"): a kept partial path
(:class:`Beam`) and a sampled candidate step (:class:`Draft`), frozen, shared by
:mod:`mfs_core.decoders.mfs_steps` and :mod:`mfs_core.decoders.mfs_foresight`."""

from __future__ import annotations

from dataclasses import dataclass

from mfs_core.types import Continuation

__all__ = ["Beam", "Draft"]


@dataclass(frozen=True)
class Beam:
    """A partial path ``a_{<t}``: its text, ``F_{t-1}``, the step log-prob that made it, and its
    rollout (the continuation sampled from ``prompt + text``: what completes it at the finish,
    and what ``reuse_rollouts`` reads its candidates' futures from).

    ``rollout_key`` names the rollout: ``(step, group)`` of the foresight estimate it came from;
    beams selected from one shared estimate (``share_foresight``) carry the same key, i.e. the
    same rollout. ``copies`` > 1 only for the root: the M empty paths of step 1, one request.
    """

    text: str
    quality: float | None = None
    step_logprob: float | None = None
    rollout: Continuation | None = None
    rollout_key: tuple[int, int] | None = None
    copies: int = 1


@dataclass(frozen=True)
class Draft:
    """One sampled candidate step: its index among the step's candidates, its parent beam (and
    that beam's index), the step continuation, and whether it ends its path (EOS or end marker)."""

    index: int
    beam_index: int
    beam: Beam
    step: Continuation
    finished: bool

    @property
    def step_logprob(self) -> float:
        """Mean log-prob per token of the step (nats): its pruning score and pool rank."""
        return self.step.mean_logprob

    @property
    def path(self) -> str:
        """``a_{<=t}``: the parent beam's text + the step text (no delimiter)."""
        return self.beam.text + self.step.text

    @property
    def blank(self) -> bool:
        """Open and whitespace only: no step (recorded as pruned)."""
        return not self.finished and not self.step.text.strip()
