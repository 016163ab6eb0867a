"""The steps of one MFS decoding run (MFS_SPEC.md, "One decoding run"), one function each.

:func:`mfs_core.decoders.mfs.decode_mfs` is the loop that calls them; what it passes from step
to step is plain data (the frozen :class:`Beam`, :class:`Draft` and
:class:`~mfs_core.decoders.mfs_foresight.Estimate`; step 4 lives in :mod:`~mfs_core.decoders.mfs_foresight`), and
the trace of a step is built once, by :func:`step_trace`, from what the steps returned.
Everything here is pure except the request builders, which draw seeds from the decode's rng
in the order the requests are sent.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mfs_core import martingale
from mfs_core.decoders.common import request_seed
from mfs_core.decoders.mfs_foresight import Estimate, rollout_cap
from mfs_core.decoders.mfs_records import Beam, Draft
from mfs_core.settings import MFSSettings
from mfs_core.types import Candidate, Continuation, GenerationRequest, StepTrace

__all__ = [
    "Admission", "Beam", "Draft", "admit_finished", "answer_certified", "answer_decided", "completion_requests",
    "is_converged",
    "join_completions", "next_beams", "own_rollouts", "prune_width", "sample_requests", "sampled_drafts",
    "select_survivors", "step_trace", "step_values",
]


@dataclass(frozen=True)
class Admission:
    """Step 6's finished pool, decided before pruning (:func:`admit_finished`).

    Attributes:
        finished: the finished drafts, best step log-prob first.
        pooled: those that enter the finished pool now (a prefix of ``finished``).
        open: the open, non-blank drafts (what width pruning scores), in sampling order.
        stop_reason: ``"blank_steps"``, ``"all_finished"``, ``"finished_pool_full"`` or None.
    """

    finished: tuple[Draft, ...]
    pooled: tuple[Draft, ...]
    open: tuple[Draft, ...]
    stop_reason: str | None


def sample_requests(prompt: str, beams: Sequence[Beam], s: MFSSettings, rng: np.random.Generator) -> list[GenerationRequest]:
    """Step 2's requests: N next steps per beam (the root's M copies as one request, n = M·N),
    each stopped at the step delimiter or the end marker; one seed drawn per beam, in order."""
    return [
        GenerationRequest(
            prompt=prompt + beam.text, n=beam.copies * s.num_rollouts, max_tokens=s.max_step_tokens,
            stop=(s.step_delimiter, s.end_marker), temperature=s.temperature, top_p=s.top_p, seed=request_seed(rng),
        )
        for beam in beams
    ]


def sampled_drafts(beams: Sequence[Beam], outputs: Sequence[Sequence[Continuation]], end_marker: str) -> list[Draft]:
    """Step 2's candidates: ``outputs[b]`` are beam b's continuations; numbered in order.

    A candidate is finished when the model's EOS token or ``end_marker`` stopped it.
    """
    pairs = [(b, c) for b, conts in enumerate(outputs) for c in conts]
    return [
        Draft(index=i, beam_index=b, beam=beams[b], step=c, finished=c.finish_reason == "eos" or c.stop_reason == end_marker)
        for i, (b, c) in enumerate(pairs)
    ]


def admit_finished(drafts: Sequence[Draft], pool_size: int, s: MFSSettings) -> Admission:
    """Step 6's finished pool and the stops it decides (step 7).

    Finished drafts are ranked by step log-prob (:func:`mfs_core.martingale.order_by_value`);
    while open drafts remain, at most ``⌊max_finished_fraction·M⌋`` of them enter the pool (and
    no more than the ``M - pool_size`` free places); when none remain, the best of them fill
    the free places. Stops: no open and no finished draft (``"blank_steps"``), no open draft
    (``"all_finished"``), the pool full with drafts still open (``"finished_pool_full"``).

    Args:
        drafts: the step's candidates.
        pool_size: paths already in the finished pool (< M).
        s: settings (``step_beam_size`` M, ``max_finished_fraction``).
    """
    finished = [d for d in drafts if d.finished]
    finished = [finished[i] for i in martingale.order_by_value([d.step_logprob for d in finished])]
    open_drafts = [d for d in drafts if not d.finished and not d.blank]
    per_step = int(np.floor(s.max_finished_fraction * s.step_beam_size + 1e-9))
    slots = s.step_beam_size - pool_size
    pooled = finished[: min(per_step, slots) if open_drafts else slots]
    stop = None
    if not open_drafts:
        stop = "all_finished" if finished else "blank_steps"
    elif slots - len(pooled) <= 0:
        stop = "finished_pool_full"
    return Admission(tuple(finished), tuple(pooled), tuple(open_drafts), stop)


def prune_width(scores: Sequence[float], s: MFSSettings) -> tuple[list[bool], martingale.WidthPruning | None]:
    """Step 3: which open candidates survive ``score >= μ + λ1·σ`` (eq. 10-11), and the
    pruning statistics; every one survives (statistics None) without ``width_pruning``."""
    if not s.width_pruning:
        return [True] * len(scores), None
    pruning = martingale.width_prune(scores, s.prune_lambda)
    return [bool(k) for k in pruning.keep], pruning


def step_values(t: int, qualities: Sequence[float], survivors: Sequence[Draft], baseline: str) -> tuple[np.ndarray, np.ndarray]:
    """Step 5: step values ``V = F_t - baseline`` (eq. 8) and deficits (eq. 9), shape (K,), nats.

    The baseline is, at t = 0, the mean ``F_0`` of the survivors; later the parent beam's
    ``F_{t-1}`` (``"parent_foresight"``) or its last step log-prob (``"parent_step"``).
    """
    if t == 0:
        baselines = [float(np.mean(qualities))] * len(survivors)
    elif baseline == "parent_foresight":
        baselines = [d.beam.quality for d in survivors]
    else:
        baselines = [d.beam.step_logprob for d in survivors]
    return martingale.step_values(qualities, baselines), martingale.deficits(qualities)


def is_converged(t: int, max_value: float, estimates: int, s: MFSSettings) -> bool:
    """Step 7, martingale convergence (eq. 12): ``max V <= ε_stop``, tested with ``early_stopping`` and
    ``convergence_stop`` from step ``min_steps`` on, over at least ``convergence_min_paths`` distinct estimates."""
    return (
        s.early_stopping and s.convergence_stop and t >= s.min_steps and estimates >= s.convergence_min_paths
        and martingale.converged(max_value, s.stop_epsilon)
    )


def answer_decided(t: int, counts: Mapping[str, float], s: MFSSettings) -> bool:
    """The answer-level stop: with ``early_stopping`` and ``answer_stop_confidence`` set, from step
    ``min_steps`` on, the leader of the answer ``counts`` seen (votes per answer; a weighted vote's
    scaled to their effective sample size, :func:`mfs_core.martingale.effective_counts`) keeps the
    lead with posterior probability >= ``answer_stop_confidence`` (:func:`mfs_core.martingale.lead_probability`)."""
    return (
        s.early_stopping and s.answer_stop_confidence is not None and t >= s.min_steps
        and martingale.lead_probability(list(counts.values())) >= s.answer_stop_confidence
    )


def answer_certified(t: int, draws: Mapping[str, float], s: MFSSettings) -> bool:
    """The anytime-valid answer stop: with ``early_stopping`` and ``answer_stop_alpha`` set, from step
    ``min_steps`` on, an answer of the ``draws`` seen (draws per answer in first-appearance order, each
    distinct rollout and finished candidate once) is certified as the most likely at level α
    (:func:`mfs_core.martingale.anytime_lead`; its guarantee holds at whatever step the search stops)."""
    return (
        s.early_stopping and s.answer_stop_alpha is not None and t >= s.min_steps
        and martingale.anytime_lead(list(draws.values()), s.answer_stop_alpha).certified
    )


def select_survivors(values: Sequence[float], slots: int, s: MFSSettings, rng: np.random.Generator) -> list[int]:
    """Step 6: indices of the ``slots`` survivors kept as beams, drawn without replacement by
    ``softmax(V / selection_temperature)`` from ``rng`` (Algorithm 1), or the top ``slots`` by V
    with ``selection="top_k"``; all of them, best first, when ``slots`` >= their number."""
    return martingale.select_beams(values, slots, s.selection_temperature, rng, top_k=s.selection == "top_k")


def next_beams(
    survivors: Sequence[Draft], chosen: Sequence[int], estimate_of: Sequence[Estimate], delimiter: str
) -> list[Beam]:
    """Step 6's new beams, in selection order: each chosen survivor's path + delimiter, with its
    ``F_t``, step log-prob and its estimate's first rollout (``estimate_of[i]``: survivor i's)."""
    return [
        Beam(text=survivors[i].path + delimiter, quality=estimate_of[i].quality, step_logprob=survivors[i].step_logprob,
             rollout=estimate_of[i].rollouts[0], rollout_key=estimate_of[i].key)
        for i in chosen
    ]


def step_trace(
    t: int, drafts: Sequence[Draft], s: MFSSettings, *, pooled: Collection[Draft] = (), pool_kept: bool = True,
    width_pruned: Collection[int] = (), pruning: martingale.WidthPruning | None = None,
    survivors: Sequence[Draft] = (), estimate_of: Sequence[Estimate] = (),
    values: Sequence[float] = (), deficits: Sequence[float] = (), chosen: Sequence[int] = (), converged: bool = False,
) -> StepTrace:
    """The trace of step t, each :class:`Candidate` built once from what the steps returned.

    Args:
        t: the step index.
        drafts: the step's candidates (their order is the trace's).
        s: settings (``stop_epsilon`` is recorded).
        pooled: drafts that entered the finished pool (selected, ``F`` = step log-prob).
        pool_kept: False when a convergence stop discarded the step (pooled not selected).
        width_pruned: indices (``Draft.index``) removed by width pruning.
        pruning: the width-pruning statistics, or None.
        survivors, estimate_of, values, deficits: the survivors, each one's estimate, V and D.
        chosen: indices into ``survivors`` selected as beams, in beam order.
        converged: the convergence test fired.
    """
    pooled_ids = {d.index for d in pooled}
    scored = {d.index: k for k, d in enumerate(survivors)}
    selected = {survivors[i].index for i in chosen}
    candidates = []
    for d in drafts:
        fields = {}
        if d.index in pooled_ids:
            fields = {"foresight_quality": d.step_logprob, "selected": pool_kept}
        elif d.index in scored:
            k = scored[d.index]
            est = estimate_of[k]
            first = est.members[0] == k
            fields = {
                "foresight_quality": est.quality, "rollout": est.rollouts[0].text, "foresight_shared": not first,
                "reused_rollouts": est.reused if first else 0, "rollout_tokens": est.new_tokens if first else 0,
                "step_value": float(values[k]), "deficit": float(deficits[k]), "selected": d.index in selected,
            }
        candidates.append(Candidate(
            beam_index=d.beam_index, text=d.step.text, step_logprob=d.step_logprob, step_tokens=d.step.num_tokens,
            finished=d.finished, pruned=d.blank or d.index in width_pruned, parent_quality=d.beam.quality,
            parent_step_logprob=d.beam.step_logprob, **fields,
        ))
    return StepTrace(
        step=t, candidates=candidates, stop_epsilon=s.stop_epsilon,
        mean_score=None if pruning is None else pruning.mean, std_score=None if pruning is None else pruning.std,
        prune_threshold=None if pruning is None else pruning.threshold,
        c_prune=None if pruning is None else pruning.c_prune,
        max_step_value=float(np.max(values)) if len(values) else None, converged=converged,
        beam_sources=[survivors[i].index for i in chosen],
    )


def own_rollouts(beams: Sequence[Beam]) -> list[bool]:
    """Step 8: whether each beam is completed by its own rollout: it has one, and no earlier beam
    has the same (copies selected from one shared estimate); the others are sampled to the end."""
    seen: set[tuple[int, int] | None] = set()
    own = []
    for beam in beams:
        own.append(beam.rollout is not None and beam.rollout_key not in seen)
        seen.add(beam.rollout_key)
    return own


def completion_requests(prompt: str, beams: Sequence[Beam], s: MFSSettings, rng: np.random.Generator) -> list[GenerationRequest]:
    """Step 8's requests for beams without their own rollout: ``copies`` samples of each to the end
    marker (the first ``foresight_window`` tokens when set: :func:`~mfs_core.decoders.mfs_foresight.sample_windowed`
    samples the rest); one seed drawn per beam, in order."""
    return [
        GenerationRequest(prompt=prompt + beam.text, n=beam.copies, max_tokens=rollout_cap(s),
                          stop=(s.end_marker,), temperature=s.rollout_sampling_temperature, top_p=s.top_p,
                          seed=request_seed(rng))
        for beam in beams
    ]


def join_completions(
    pool: Sequence[tuple[str, float]], beams: Sequence[Beam], own: Sequence[bool],
    filled: Sequence[Sequence[Continuation]], scores: Sequence[Sequence[float]] | None = None,
) -> tuple[list[str], list[float]]:
    """Step 8's completed paths and their ``F``: the finished pool, then each beam joined with its
    own rollout (``F`` = the beam's) or with its sampled completions (``filled``, one list per beam
    without its own rollout, in order; ``F`` = their ``scores``, by default their mean log-prob)."""
    completions = [text for text, _ in pool]
    qualities = [quality for _, quality in pool]
    fills = iter(filled)
    fill_scores = iter(scores) if scores is not None else None
    for beam, has_own in zip(beams, own):
        if has_own:
            completions.append(beam.text + beam.rollout.text)
            qualities.append(beam.quality)
            continue
        conts = next(fills)
        cont_scores = next(fill_scores) if fill_scores is not None else [c.mean_logprob for c in conts]
        for cont, score in zip(conts, cont_scores):
            completions.append(beam.text + cont.text)
            qualities.append(score)
    return completions, qualities
