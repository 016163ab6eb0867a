"""Martingale Foresight Sampling as a decoder coroutine (MFS_SPEC.md, "One decoding run").

The decoder never calls a model: it yields lists of :class:`GenerationRequest` and is sent
back, for each, the list of continuations (see :mod:`mfs_core.engine`). The math lives in
:mod:`mfs_core.martingale`, the steps of the search in :mod:`mfs_core.decoders.mfs_steps`
(one function each); this module is the loop that runs them.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import numpy as np

from mfs_core.answers import AnswerExtractor, extract_answer
from mfs_core.decoders.common import (
    Decoder,
    TokenTally,
    ask_for_answers,
    decode_rng,
    finish_result,
    report_step,
    sample_steps,
)
from mfs_core.decoders.mfs_foresight import (
    Estimate,
    estimates_by_survivor,
    foresight_groups,
    foresight_requests,
    reused_remainders,
    rollout_remainder,
    sample_windowed,
)
from mfs_core.decoders.mfs_steps import (
    Beam,
    Draft,
    admit_finished,
    answer_certified,
    answer_decided,
    completion_requests,
    is_converged,
    join_completions,
    next_beams,
    own_rollouts,
    prune_width,
    sample_requests,
    sampled_drafts,
    select_survivors,
    step_trace,
    step_values,
)
from mfs_core.decoders.mfs_votes import SampleVote, vote_weights
from mfs_core.settings import MFSSettings
from mfs_core.types import Continuation, GenerationRequest, StepTrace

__all__ = ["SEARCH_SETTINGS", "STOP_REASONS", "decode_mfs", "foresight_groups", "rollout_remainder"]


STOP_REASONS = {
    "converged": "max V <= ε_stop after min_steps steps (eq. 12)",
    "all_finished": "every candidate of the last step finished (the best of them fill the pool up to M)",
    "finished_pool_full": "the finished pool reached M paths while candidates were still open",
    "max_steps": "max_steps deliberation steps were done",
    "blank_steps": "every candidate of the step stayed blank (whitespace only): the beams are completed as they stand",
    "answer_decided": "the leading answer of the samples seen keeps the lead with posterior probability >= "
    "answer_stop_confidence (Adaptive-Consistency's Beta criterion)",
    "answer_certified": "an answer of the samples seen is certified as the most likely at level answer_stop_alpha "
    "(an anytime-valid e-process, martingale.anytime_lead)",
}
"""The ``stop_reason`` values of an MFS decode and what each means."""

SEARCH_SETTINGS = (
    "step_beam_size", "num_rollouts", "foresight_rollouts", "share_foresight", "reuse_rollouts", "prune_lambda",
    "width_pruning", "stop_epsilon", "min_steps", "max_steps", "early_stopping", "baseline", "selection",
    "max_finished_fraction", "convergence_finish", "aggregation", "temperature", "rollout_temperature", "step_delimiter",
    "convergence_min_paths", "answer_stop_confidence", "vote_rollouts", "foresight_window", "answer_stop_alpha",
    "convergence_stop", "vote_quality_beta",
)
"""Settings copied into ``DecodeResult.search_settings`` (what the trace depends on)."""



@dataclass(frozen=True)
class _StepOutcome:
    """What one deliberation step returns to the loop: its trace, the beams after it, the paths
    it adds to the finished pool (path text, F), and the stop it decided (None: go on)."""

    trace: StepTrace
    beams: list[Beam]
    pooled: list[tuple[str, float]]
    stop_reason: str | None


def decode_mfs(prompt: str, settings: MFSSettings, answer_key: AnswerExtractor | None = None) -> Decoder:
    """Decode one prompt with MFS; a generator that yields requests and returns the result.

    Steps (MFS_SPEC.md 1-9, each a function of :mod:`mfs_core.decoders.mfs_steps`): sample N
    candidate steps per beam; finished candidates go to
    the finished pool (at most ⌊f·M⌋ per step while candidates are open; the best M by step
    log-prob when all of a step's candidates finished); prune the open ones in width by
    ``score >= μ + λ1·σ`` (eq. 10-11; ties with the best survive); ``foresight_rollouts``
    rollouts per distinct surviving path give ``F_t`` (eq. 3; copies share the estimate with
    ``share_foresight``, and the rest of the parent's rollout counts as one where it starts
    with the candidate, ``reuse_rollouts``; both off: one per survivor, the paper's); step
    value ``V = F_t - F_{t-1}`` (eq. 8); stop when
    ``max V <= ε_stop`` after ``min_steps`` (eq. 12: the step's candidates are discarded and
    the parent beams kept, with ``convergence_finish="parent_beams"``), when every candidate
    finished, when the pool holds M paths, or after ``max_steps``; else draw M beams by
    ``softmax(V/T)`` (Algorithm 1). Each kept path is joined with the rollout it already
    has (no generate call after the stop) and the answers are put to the majority vote.

    The rules aimed at the measured failures, all off by default: ``foresight_window`` scores a rollout by its first W tokens
    (:func:`~mfs_core.decoders.mfs_foresight.sample_windowed`); ``answer_stop_alpha`` stops once an
    answer of the rollouts and finished candidates seen is certified at level α
    (:func:`~mfs_core.martingale.anytime_lead`, ``stop_reason="answer_certified"``), beside eq. 12 or,
    with ``convergence_stop=False``, in its place; ``vote_quality_beta`` weights each vote by ``exp(β F)``.

    The decode's random stream is seeded from ``(settings.seed, prompt)``
    (:func:`~mfs_core.decoders.common.decode_rng`): reproducible, and independent across
    the prompts of a batch. ``stop_reason`` is one of :data:`STOP_REASONS`.

    Args:
        prompt: the rendered model prompt (chat template + assistant prefix, or raw).
        settings: decoder settings (M, N, λ1, ε_stop, ...).
        answer_key: what the final vote groups paths by (default: the extracted answer);
            :class:`mfs_core.tools.ActionVote` votes over tool calls and answers.

    Yields:
        Lists of generation requests; expects the matching continuations sent back.

    Returns:
        The :class:`DecodeResult` (``flops`` left 0 for the engine to fill).
    """
    rng = decode_rng(settings, prompt)
    tally = TokenTally()
    beams = [Beam(text="", copies=settings.step_beam_size)]  # 1. M copies of the empty path
    pool: list[tuple[str, float]] = []  # the finished pool: (path text, F)
    trace: list[StepTrace] = []
    stop_reason = "max_steps"
    # Every complete answer sampled: rollouts (once each) and finished candidates.
    samples = SampleVote.for_settings(answer_key if answer_key is not None else extract_answer, settings)
    for t in range(settings.max_steps):
        if trace:  # the previous step is done: tell a listening engine (mfs_core.events)
            report_step(trace[-1], [beam.text for beam in beams])
        outcome = yield from _deliberate(prompt, t, beams, len(pool), settings, rng, tally, samples)
        trace.append(outcome.trace)
        pool.extend(outcome.pooled)
        beams = outcome.beams
        if outcome.stop_reason is not None:
            stop_reason = outcome.stop_reason
            break
    if trace:
        report_step(trace[-1], [beam.text for beam in beams])
    return (yield from _finish(prompt, beams, pool, samples, settings, rng, tally, answer_key, stop_reason, trace))


def _deliberate(
    prompt: str, t: int, beams: list[Beam], pool_size: int, s: MFSSettings, rng: np.random.Generator,
    tally: TokenTally, samples: SampleVote,
) -> Generator[list[GenerationRequest], list[list[Continuation]], _StepOutcome]:
    """One deliberation step t (MFS_SPEC.md steps 2-7): sample, pool, prune, foresight, value,
    stop test, select. Finished candidates and foresight rollouts are added to ``samples``."""
    # 2. Sample N candidates per beam (blank lines continued: MAX_BLANK_LINES).
    outputs = yield from sample_steps(sample_requests(prompt, beams, s, rng), s, rng, tally)
    drafts = sampled_drafts(beams, outputs, s.end_marker)
    # 6. (pool part) Finished candidates enter the pool; a blank, full or finished step stops.
    admission = admit_finished(drafts, pool_size, s)
    for draft in admission.finished:
        samples.add(draft.path, draft.step_logprob)
    pooled = [(draft.path, draft.step_logprob) for draft in admission.pooled]
    if admission.stop_reason is not None:  # blank_steps keeps the beams; the others complete the pool
        kept = beams if admission.stop_reason == "blank_steps" else []
        return _StepOutcome(step_trace(t, drafts, s, pooled=admission.pooled), kept, pooled, admission.stop_reason)
    # 3. Width pruning over the open candidates.
    keep, pruning = prune_width([draft.step_logprob for draft in admission.open], s)
    survivors = [draft for draft, k in zip(admission.open, keep) if k]
    width_pruned = {draft.index for draft, k in zip(admission.open, keep) if not k}
    # 4. Foresight: one estimate per group of survivors.
    estimates = yield from _foresight(prompt, t, survivors, s, rng, tally)
    for est in estimates:  # each new rollout stands for its share of the copies of its path
        path = survivors[est.members[0]].path + s.step_delimiter
        for r, quality in list(zip(est.rollouts, est.qualities))[est.reused:]:  # a reused remainder was seen already
            samples.add(path + r.text, quality, copies=len(est.members) / len(est.rollouts))
    estimate_of = estimates_by_survivor(estimates, len(survivors))
    # 5. Step values (eq. 8) and deficits (eq. 9); 7. the convergence test (eq. 12).
    values, deficits = step_values(t, [est.quality for est in estimate_of], survivors, s.baseline)
    converged = is_converged(t, float(values.max()), len(estimates), s)
    scored = {"pooled": admission.pooled, "width_pruned": width_pruned, "pruning": pruning, "survivors": survivors,
              "estimate_of": estimate_of, "values": values, "deficits": deficits, "converged": converged}
    if converged and s.convergence_finish == "parent_beams":  # discard the step: keep the parent beams
        return _StepOutcome(step_trace(t, drafts, s, pool_kept=False, **scored), beams, [], "converged")
    # 6. Select the beams that fill the pool up to M, by softmax(V / T) or top-k.
    slots = s.step_beam_size - pool_size - len(pooled)
    chosen = select_survivors(values.tolist(), slots, s, rng)
    stop = ("converged" if converged else "answer_decided" if answer_decided(t, samples.stop_counts(), s)
            else "answer_certified" if answer_certified(t, samples.draws, s) else None)
    return _StepOutcome(step_trace(t, drafts, s, chosen=chosen, **scored),
                        next_beams(survivors, chosen, estimate_of, s.step_delimiter), pooled, stop)


def _foresight(
    prompt: str, t: int, survivors: list[Draft], s: MFSSettings, rng: np.random.Generator, tally: TokenTally,
) -> Generator[list[GenerationRequest], list[list[Continuation]], list[Estimate]]:
    """Step 4: ``foresight_rollouts`` rollouts per distinct path (``share_foresight``), the parent's
    rollout remainder first (``reuse_rollouts``); new rollouts only for what is still missing."""
    groups = foresight_groups([draft.path for draft in survivors], s.share_foresight)
    reused = reused_remainders(groups, survivors, s)
    missing = [max(0, s.foresight_rollouts - len(rollouts)) for rollouts in reused]
    paths = [survivors[group[0]].path for group in groups]
    requests = foresight_requests(prompt, paths, missing, s, rng)
    fresh: list[list[Continuation]] = []
    scores: list[list[float]] = []
    if requests:  # foresight_window: the first W tokens give F, the rest is sampled on (one more round)
        fresh, scores = yield from sample_windowed(requests, s, rng, tally)
    fills, windows = iter(fresh), iter(scores)
    return [
        Estimate(members=tuple(group), rollouts=tuple(rollouts) + (tuple(next(fills)) if n else ()),
                 reused=len(rollouts), key=(t, g),
                 scores=tuple(next(windows)) if n and s.foresight_window is not None else ())
        for g, (group, rollouts, n) in enumerate(zip(groups, reused, missing))
    ]


def _finish(
    prompt: str, beams: list[Beam], pool: list[tuple[str, float]], samples: SampleVote, s: MFSSettings,
    rng: np.random.Generator, tally: TokenTally, answer_key: AnswerExtractor | None, stop_reason: str,
    trace: list[StepTrace],
) -> Decoder:
    """Steps 8-9: complete the kept paths without extra tokens where a rollout already completes
    them (``vote_rollouts``: every sample seen instead, each with its vote when ``"weighted"``) and
    put their answers to the vote (each weighted by ``exp(β F)`` with ``vote_quality_beta``).

    A beam with no rollout (the root, after a convergence stop at t = 0 with min_steps = 0) or
    whose rollout an earlier beam already has (copies under share_foresight) is sampled to the
    end, so the vote has one independent completion per beam. A path that states no answer is
    asked for one (settings.answer_trigger; off by default).
    """
    completion_tokens = 0
    copies: list[float] | None = None  # one vote per completion unless the vote is weighted
    if s.vote_rollouts and samples.texts:
        completions, qualities = list(samples.texts), list(samples.qualities)
        copies = list(samples.weights) if samples.weighted else None
    else:
        own = own_rollouts(beams)
        missing = [beam for beam, has_own in zip(beams, own) if not has_own]
        filled: list[list[Continuation]] = []
        scores: list[list[float]] | None = None
        if missing:
            requests = completion_requests(prompt, missing, s, rng)
            filled, scores = yield from sample_windowed(requests, s, rng, tally)
            completion_tokens = sum(c.num_tokens for conts in filled for c in conts)
        completions, qualities = join_completions(pool, beams, own, filled, scores)
    weights = vote_weights(qualities, copies, s)  # copies, times exp(β (F - max F)) with vote_quality_beta
    completions, triggered = yield from ask_for_answers(prompt, completions, s, tally, answer_key)
    return finish_result(
        completions, qualities, s, tally, stop_reason=stop_reason, steps=trace, method="mfs",
        completion_tokens=completion_tokens, search_settings={name: getattr(s, name) for name in SEARCH_SETTINGS},
        answer_key=answer_key, triggered=triggered, weights=weights,
    )
