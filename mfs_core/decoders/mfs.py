"""Martingale Foresight Sampling as a decoder coroutine (MFS_SPEC.md, "One decoding run").

The decoder never calls a model: it yields lists of :class:`GenerationRequest` and is sent
back, for each, the list of continuations (see :mod:`mfs_core.engine`). The math lives in
:mod:`mfs_core.martingale`; this module is the search around it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mfs_core import martingale
from mfs_core.answers import AnswerExtractor, extract_answer
from mfs_core.decoders.common import (
    Decoder,
    TokenTally,
    ask_for_answers,
    decode_rng,
    finish_result,
    report_step,
    request_seed,
    sample_steps,
)
from mfs_core.settings import MFSSettings
from mfs_core.types import Candidate, Continuation, GenerationRequest, StepTrace

__all__ = ["SEARCH_SETTINGS", "STOP_REASONS", "decode_mfs", "foresight_groups", "rollout_remainder"]


STOP_REASONS = {
    "converged": "max V <= ε_stop after min_steps steps (eq. 12)",
    "all_finished": "every candidate of the last step finished (the best of them fill the pool up to M)",
    "finished_pool_full": "the finished pool reached M paths while candidates were still open",
    "max_steps": "max_steps deliberation steps were done",
    "blank_steps": "every candidate of the step stayed blank (whitespace only): the beams are completed as they stand",
    "answer_decided": "the leading answer of the samples seen keeps the lead with posterior probability >= "
    "answer_stop_confidence (Adaptive-Consistency's Beta criterion)",
}
"""The ``stop_reason`` values of an MFS decode and what each means."""

SEARCH_SETTINGS = (
    "step_beam_size", "num_rollouts", "foresight_rollouts", "share_foresight", "reuse_rollouts", "prune_lambda",
    "width_pruning", "stop_epsilon", "min_steps", "max_steps", "early_stopping", "baseline", "selection",
    "max_finished_fraction", "convergence_finish", "aggregation", "temperature", "rollout_temperature", "step_delimiter",
    "convergence_min_paths", "answer_stop_confidence", "vote_rollouts",
)
"""Settings copied into ``DecodeResult.search_settings`` (what the trace depends on)."""


@dataclass(frozen=True)
class _Beam:
    """A partial path ``a_{<t}``: its text, ``F_{t-1}``, the step log-prob that made it, its rollout
    (the continuation sampled from ``prompt + text``: what completes it at the finish, and what
    ``reuse_rollouts`` reads its candidates' futures from).

    ``copies`` > 1 only for the root: the M empty paths of step 1, sampled as one request.
    """

    text: str
    quality: float | None = None
    step_logprob: float | None = None
    rollout: Continuation | None = None
    copies: int = 1


class _SampleVote:
    """Every complete answer the search sampled, in order: foresight rollouts joined with their
    paths (each rollout once, however many survivors share it) and finished candidates.

    What ``vote_rollouts`` puts to the final vote and ``answer_stop_confidence`` reads.
    """

    def __init__(self, key: AnswerExtractor) -> None:
        self.key = key
        self.texts: list[str] = []
        self.qualities: list[float] = []
        self.counts: dict[str, int] = {}

    def add(self, text: str, quality: float) -> None:
        """Record one complete sample and its F (nats per token)."""
        self.texts.append(text)
        self.qualities.append(float(quality))
        answer = self.key(text)
        if answer is not None:
            self.counts[answer] = self.counts.get(answer, 0) + 1

    def lead_probability(self) -> float:
        """:func:`mfs_core.martingale.lead_probability` of the answers seen."""
        return martingale.lead_probability(list(self.counts.values()))


def _is_finished(cont: Continuation, end_marker: str) -> bool:
    """The candidate ends its path: the model's EOS token or the end marker stopped it."""
    return cont.finish_reason == "eos" or cont.stop_reason == end_marker


def foresight_groups(paths: list[str], share: bool) -> list[list[int]]:
    """Survivors that share one foresight estimate, as lists of indices into ``paths``.

    With ``share`` (``share_foresight``), survivors whose path text ``a_{<=t}`` (beam text +
    step text) is the same form one group: ``E[F | a_{<=t}]`` depends on the path only, so one
    estimate from ``foresight_rollouts`` rollouts serves every copy. Without it, every
    survivor is its own group (the paper's rollout per survivor). Groups are ordered by their
    first member; members keep their order.

    Args:
        paths: the path text of each survivor, shape (K,).
        share: group equal paths.

    Returns:
        A partition of ``range(K)``: e.g. ``foresight_groups(["a", "b", "a"], True) == [[0, 2], [1]]``.
    """
    if not share:
        return [[i] for i in range(len(paths))]
    groups: dict[str, list[int]] = {}
    for i, path in enumerate(paths):
        groups.setdefault(path, []).append(i)
    return list(groups.values())


def rollout_remainder(rollout: Continuation | None, step: Continuation, delimiter: str) -> Continuation | None:
    """The rest of a beam's stored rollout after ``step``, when ``step`` is its first step.

    The rollout was sampled from the beam's prefix; when it starts with exactly ``step``'s
    tokens followed by the delimiter, what follows is a sample of the future of
    ``prefix + step + delimiter`` (conditioned on that first step), i.e. a foresight rollout of
    the candidate ``step`` (MFS_SPEC.md step 4), at no new tokens. Its log-prob sum is the
    rollout's minus the step's: the same tokens from the same prefix have the same raw
    log-probs (clamped at 0 against float noise).

    Not reused (None): no rollout; a rollout cut by ``max_tokens`` (``finish_reason ==
    "length"``: a fresh rollout would have had more tokens); a step not ended by the delimiter;
    tokens or text that differ; nothing after the step.

    Args:
        rollout: the parent beam's stored rollout, or None.
        step: the candidate's step continuation (its ``token_ids`` end with the token that
            completed the delimiter; its text excludes the delimiter).
        delimiter: the step delimiter (``settings.step_delimiter``).

    Returns:
        The remainder as a :class:`Continuation` (``prompt_tokens`` 0), or None.
    """
    if rollout is None or rollout.finish_reason == "length" or step.stop_reason != delimiter:
        return None
    k = len(step.token_ids)
    head = step.text + delimiter
    if len(rollout.token_ids) <= k or rollout.token_ids[:k] != step.token_ids or not rollout.text.startswith(head):
        return None
    return Continuation(
        text=rollout.text[len(head):], token_ids=rollout.token_ids[k:],
        logprob_sum=min(0.0, rollout.logprob_sum - step.logprob_sum),
        finish_reason=rollout.finish_reason, stop_reason=rollout.stop_reason, prompt_tokens=0,
    )


def decode_mfs(prompt: str, settings: MFSSettings, answer_key: AnswerExtractor | None = None) -> Decoder:
    """Decode one prompt with MFS; a generator that yields requests and returns the result.

    Steps (MFS_SPEC.md 1-9): sample N candidate steps per beam; finished candidates go to
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
    s = settings
    rng = decode_rng(s, prompt)
    rollout_temperature = s.rollout_temperature if s.rollout_temperature is not None else s.temperature
    tally = TokenTally()
    step_stop = (s.step_delimiter, s.end_marker)
    beams = [_Beam(text="", copies=s.step_beam_size)]
    finished_pool: list[tuple[str, float]] = []  # (path text, F)
    max_finished_per_step = int(np.floor(s.max_finished_fraction * s.step_beam_size + 1e-9))
    trace: list[StepTrace] = []
    stop_reason = "max_steps"
    key = answer_key if answer_key is not None else extract_answer
    samples = _SampleVote(key)  # every complete answer sampled: rollouts (once each) and finished candidates

    for t in range(s.max_steps):
        if trace:  # the previous step is done: tell a listening engine (mfs_core.events)
            report_step(trace[-1], [beam.text for beam in beams])
        # 2. Sample N candidates per beam (the root's M copies are one request, n = M·N).
        requests = [
            GenerationRequest(
                prompt=prompt + beam.text, n=beam.copies * s.num_rollouts, max_tokens=s.max_step_tokens,
                stop=step_stop, temperature=s.temperature, top_p=s.top_p, seed=request_seed(rng),
            )
            for beam in beams
        ]
        outputs = yield from sample_steps(requests, s, rng, tally)  # blank lines continued (MAX_BLANK_LINES)
        candidates = [
            Candidate(beam_index=b, text=c.text, step_logprob=c.mean_logprob, step_tokens=c.num_tokens,
                      finished=_is_finished(c, s.end_marker), parent_quality=beams[b].quality,
                      parent_step_logprob=beams[b].step_logprob)
            for b, conts in enumerate(outputs) for c in conts
        ]
        sampled = {id(cand): c for cand, c in zip(candidates, (c for conts in outputs for c in conts))}
        step = StepTrace(step=t, candidates=candidates, stop_epsilon=s.stop_epsilon)
        trace.append(step)
        # A candidate still blank (whitespace only, open) is no step: recorded as pruned.
        for cand in candidates:
            if not cand.finished and not cand.text.strip():
                cand.pruned = True

        # 6. Finished candidates go to the pool, best step log-prob first: at most ⌊f·M⌋ per
        # step while candidates are open; when every candidate finished, the best up to M.
        finished = [c for c in candidates if c.finished]
        finished = [finished[i] for i in martingale.order_by_value([c.step_logprob for c in finished])]
        for cand in finished:
            samples.add(beams[cand.beam_index].text + cand.text, cand.step_logprob)
        open_cands = [c for c in candidates if not c.finished and not c.pruned]
        slots = s.step_beam_size - len(finished_pool)
        pooled = finished[: min(max_finished_per_step, slots) if open_cands else slots]
        for cand in pooled:
            cand.selected = True
            cand.foresight_quality = cand.step_logprob
            finished_pool.append((beams[cand.beam_index].text + cand.text, cand.step_logprob))
        if not open_cands and not finished:
            stop_reason = "blank_steps"  # the beams (and their rollouts, if any) are completed below
            break
        if not open_cands:
            stop_reason = "all_finished"
            beams = []
            break
        slots = s.step_beam_size - len(finished_pool)
        if slots <= 0:
            stop_reason = "finished_pool_full"
            beams = []
            break

        # 3. Width pruning (optional stopping) over the unfinished candidates.
        scores = [c.step_logprob for c in open_cands]
        if s.width_pruning:
            pruning = martingale.width_prune(scores, s.prune_lambda)
            step.mean_score, step.std_score = pruning.mean, pruning.std
            step.prune_threshold, step.c_prune = pruning.threshold, pruning.c_prune
            keep = pruning.keep
        else:
            keep = np.ones(len(open_cands), dtype=bool)
        for cand, kept in zip(open_cands, keep):
            cand.pruned = not kept
        survivors = [c for c in open_cands if not c.pruned]

        # 4. Foresight: rollouts from each survivor to the end marker; one estimate per
        # distinct path (share_foresight), the parent's rollout reused where it starts with
        # the candidate (reuse_rollouts); new rollouts only for what is still missing.
        groups = foresight_groups([beams[c.beam_index].text + c.text for c in survivors], s.share_foresight)
        group_rollouts: list[list[Continuation]] = []
        reused_sources: set[int] = set()  # a stored rollout serves one candidate (copies of a beam share it)
        for group in groups:
            rollouts = []
            for i in group:
                stored = beams[survivors[i].beam_index].rollout
                if not s.reuse_rollouts or id(stored) in reused_sources or len(rollouts) >= s.foresight_rollouts:
                    continue
                remainder = rollout_remainder(stored, sampled[id(survivors[i])], s.step_delimiter)
                if remainder is not None:
                    rollouts.append(remainder)
                    reused_sources.add(id(stored))
            group_rollouts.append(rollouts)
        reused_counts = [len(rollouts) for rollouts in group_rollouts]
        needs = [(g, s.foresight_rollouts - len(rollouts)) for g, rollouts in enumerate(group_rollouts)
                 if len(rollouts) < s.foresight_rollouts]
        requests = []
        for g, n in needs:
            first = survivors[groups[g][0]]
            requests.append(GenerationRequest(
                prompt=prompt + beams[first.beam_index].text + first.text + s.step_delimiter,
                n=n, max_tokens=s.max_answer_tokens, stop=(s.end_marker,),
                temperature=rollout_temperature, top_p=s.top_p, seed=request_seed(rng),
            ))
        if requests:
            outputs = yield requests
            tally.add(requests, outputs)
            for (g, _), conts in zip(needs, outputs):
                group_rollouts[g].extend(conts)
        for group, rollouts in zip(groups, group_rollouts):
            first = survivors[group[0]]
            path = beams[first.beam_index].text + first.text + s.step_delimiter
            for r in rollouts:
                samples.add(path + r.text, martingale.foresight_quality(r.logprob_sum, r.num_tokens))
        rollout_of: dict[int, Continuation] = {}
        for group, rollouts, reused in zip(groups, group_rollouts, reused_counts):
            quality = float(np.mean([martingale.foresight_quality(r.logprob_sum, r.num_tokens) for r in rollouts]))
            for k, i in enumerate(group):
                cand = survivors[i]
                cand.foresight_quality = quality
                cand.rollout = rollouts[0].text
                cand.foresight_shared = k > 0
                cand.reused_rollouts = 0 if k > 0 else reused
                cand.rollout_tokens = 0 if k > 0 else sum(r.num_tokens for r in rollouts[reused:])
                rollout_of[id(cand)] = rollouts[0]

        # 5. Step values (eq. 8); deficits (eq. 9).
        qualities = [c.foresight_quality for c in survivors]
        if t == 0:
            baselines = [float(np.mean(qualities))] * len(survivors)
        elif s.baseline == "parent_foresight":
            baselines = [c.parent_quality for c in survivors]
        else:
            baselines = [c.parent_step_logprob for c in survivors]
        values = martingale.step_values(qualities, baselines)
        for cand, value, deficit in zip(survivors, values, martingale.deficits(qualities)):
            cand.step_value, cand.deficit = float(value), float(deficit)
        step.max_step_value = float(values.max())

        # 7. Martingale convergence (eq. 12), checked once min_steps steps are behind us. No
        # candidate improved on its parent: discard the step, keep the parent beams.
        converged = (
            s.early_stopping and t >= s.min_steps and len(groups) >= s.convergence_min_paths
            and martingale.converged(step.max_step_value, s.stop_epsilon)
        )
        if converged and s.convergence_finish == "parent_beams":
            step.converged = True
            stop_reason = "converged"
            for cand in pooled:
                cand.selected = False
            del finished_pool[len(finished_pool) - len(pooled):]
            break

        # 6. Select M beams (minus the finished pool) by softmax(V / T), or top-k.
        chosen = martingale.select_beams(
            values.tolist(), slots, s.selection_temperature, rng, top_k=s.selection == "top_k"
        )
        new_beams = []
        position = {id(cand): k for k, cand in enumerate(candidates)}
        for i in chosen:
            cand = survivors[i]
            cand.selected = True
            step.beam_sources.append(position[id(cand)])
            new_beams.append(
                _Beam(text=beams[cand.beam_index].text + cand.text + s.step_delimiter, quality=cand.foresight_quality,
                      step_logprob=cand.step_logprob, rollout=rollout_of[id(cand)])
            )
        beams = new_beams
        if converged:  # convergence_finish="converged_rollouts": the selected candidates' rollouts
            step.converged = True
            stop_reason = "converged"
            break
        # Answer-level stop: the vote over the samples seen is decided (Adaptive-Consistency).
        if (s.early_stopping and s.answer_stop_confidence is not None and t >= s.min_steps
                and samples.lead_probability() >= s.answer_stop_confidence):
            stop_reason = "answer_decided"
            break

    if trace:
        report_step(trace[-1], [beam.text for beam in beams])

    # 8. Finish without extra tokens: a beam's rollout already completes it. The root (a
    # convergence stop at t = 0 with min_steps = 0) has none, and a beam whose rollout is shared
    # with an earlier beam (copies under share_foresight) would repeat that beam's completion:
    # those are sampled to the end, so the vote has one independent completion per beam.
    if s.vote_rollouts and samples.texts:
        completions, qualities = list(samples.texts), list(samples.qualities)
        completions, triggered = yield from ask_for_answers(prompt, completions, s, tally, answer_key)
        return finish_result(
            completions, qualities, settings, tally, stop_reason=stop_reason, steps=trace, method="mfs",
            search_settings={name: getattr(s, name) for name in SEARCH_SETTINGS},
            answer_key=answer_key, triggered=triggered,
        )
    completions = [text for text, _ in finished_pool]
    qualities = [quality for _, quality in finished_pool]
    completion_tokens = 0
    seen_rollouts: set[int] = set()
    own_rollout: dict[int, bool] = {}
    for beam in beams:
        own_rollout[id(beam)] = beam.rollout is not None and id(beam.rollout) not in seen_rollouts
        seen_rollouts.add(id(beam.rollout))
    missing = [beam for beam in beams if not own_rollout[id(beam)]]
    if missing:
        requests = [
            GenerationRequest(prompt=prompt + beam.text, n=beam.copies, max_tokens=s.max_answer_tokens,
                              stop=(s.end_marker,), temperature=rollout_temperature, top_p=s.top_p,
                              seed=request_seed(rng))
            for beam in missing
        ]
        outputs = yield requests
        tally.add(requests, outputs)
        filled = {id(beam): conts for beam, conts in zip(missing, outputs)}
        completion_tokens = sum(c.num_tokens for conts in outputs for c in conts)
    for beam in beams:
        if own_rollout[id(beam)]:
            completions.append(beam.text + beam.rollout.text)
            qualities.append(beam.quality)
        else:
            for cont in filled[id(beam)]:
                completions.append(beam.text + cont.text)
                qualities.append(cont.mean_logprob)
    # A path that states no answer is asked for one (settings.answer_trigger; off by default).
    completions, triggered = yield from ask_for_answers(prompt, completions, s, tally, answer_key)
    return finish_result(
        completions, qualities, settings, tally, stop_reason=stop_reason, steps=trace, method="mfs",
        completion_tokens=completion_tokens, search_settings={name: getattr(s, name) for name in SEARCH_SETTINGS},
        answer_key=answer_key, triggered=triggered,
    )
