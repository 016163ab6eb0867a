"""Martingale Foresight Sampling as a decoder coroutine (MFS_SPEC.md, "One decoding run").

The decoder never calls a model: it yields lists of :class:`GenerationRequest` and is sent
back, for each, the list of continuations (see :mod:`mfs_core.engine`). The math lives in
:mod:`mfs_core.martingale`; this module is the search around it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mfs_core import martingale
from mfs_core.answers import AnswerExtractor
from mfs_core.decoders.common import Decoder, TokenTally, finish_result, request_seed
from mfs_core.settings import MFSSettings
from mfs_core.types import Candidate, Continuation, GenerationRequest, StepTrace

__all__ = ["decode_mfs"]


@dataclass(frozen=True)
class _Beam:
    """A partial path ``a_{<t}``: its text, ``F_{t-1}`` and the step log-prob that made it."""

    text: str
    quality: float | None = None
    step_logprob: float | None = None
    rollout: str | None = None


def _is_finished(cont: Continuation, end_marker: str) -> bool:
    return cont.finish_reason == "eos" or cont.stop_reason == end_marker or not cont.text.strip()


def decode_mfs(prompt: str, settings: MFSSettings, answer_key: AnswerExtractor | None = None) -> Decoder:
    """Decode one prompt with MFS; a generator that yields requests and returns the result.

    Steps (MFS_SPEC.md 1-9): sample N candidate steps per beam; prune in width by
    ``score >= μ + λ1·σ`` (eq. 10-11); one foresight rollout per survivor gives ``F_t``
    (eq. 3); step value ``V = F_t - F_{t-1}`` (eq. 8); draw M beams by ``softmax(V/T)``
    (Algorithm 1); stop when ``max V <= ε_stop`` (eq. 12), all beams finish, or
    ``max_steps``; join each beam with its rollout and take the majority vote.

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
    rng = np.random.default_rng(s.seed)
    tally = TokenTally()
    step_stop = (s.step_delimiter, s.end_marker)
    beams = [_Beam(text="")]
    finished_pool: list[tuple[str, float]] = []  # (path text, F)
    max_finished_per_step = max(1, int(np.floor(s.max_finished_fraction * s.step_beam_size))) if s.max_finished_fraction > 0 else 0
    trace: list[StepTrace] = []
    stop_reason = "max_steps"

    for t in range(s.max_steps):
        # 2. Sample N candidates per beam (at t = 0 the M empty beams are one request, n = M·N).
        n_first = s.step_beam_size * s.num_rollouts if t == 0 else s.num_rollouts
        requests = [
            GenerationRequest(
                prompt=prompt + beam.text, n=n_first, max_tokens=s.max_step_tokens, stop=step_stop,
                temperature=s.temperature, top_p=s.top_p, seed=request_seed(rng),
            )
            for beam in beams
        ]
        outputs = yield requests
        tally.add(requests, outputs)
        candidates = [
            Candidate(beam_index=b, text=c.text, step_logprob=c.mean_logprob, step_tokens=c.num_tokens,
                      finished=_is_finished(c, s.end_marker))
            for b, conts in enumerate(outputs) for c in conts
        ]
        step = StepTrace(step=t, candidates=candidates, stop_epsilon=s.stop_epsilon)
        trace.append(step)

        # Finished candidates: the release keeps the best ⌊f·M⌋ by step log-prob.
        finished = sorted((c for c in candidates if c.finished), key=lambda c: -c.step_logprob)
        slots = s.step_beam_size - len(finished_pool)
        for cand in finished[: min(max_finished_per_step, slots)]:
            cand.selected = True
            cand.foresight_quality = cand.step_logprob
            finished_pool.append((beams[cand.beam_index].text + cand.text, cand.step_logprob))
        slots = s.step_beam_size - len(finished_pool)
        open_cands = [c for c in candidates if not c.finished]
        if not open_cands or slots <= 0:
            stop_reason = "all_finished"
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

        # 4. Foresight: rollouts from each survivor to the end marker.
        requests = [
            GenerationRequest(
                prompt=prompt + beams[c.beam_index].text + c.text + s.step_delimiter,
                n=s.foresight_rollouts, max_tokens=s.max_answer_tokens, stop=(s.end_marker,),
                temperature=s.temperature, top_p=s.top_p, seed=request_seed(rng),
            )
            for c in survivors
        ]
        outputs = yield requests
        tally.add(requests, outputs)
        rollouts = {}
        for cand, conts in zip(survivors, outputs):
            cand.foresight_quality = float(np.mean([martingale.foresight_quality(r.logprob_sum, r.num_tokens) for r in conts]))
            cand.rollout = conts[0].text
            rollouts[id(cand)] = conts[0].text

        # 5. Step values (eq. 8); deficits (eq. 9).
        qualities = [c.foresight_quality for c in survivors]
        if t == 0:
            baselines = [float(np.mean(qualities))] * len(survivors)
        elif s.baseline == "parent_foresight":
            baselines = [beams[c.beam_index].quality for c in survivors]
        else:
            baselines = [beams[c.beam_index].step_logprob for c in survivors]
        values = martingale.step_values(qualities, baselines)
        for cand, value, deficit in zip(survivors, values, martingale.deficits(qualities)):
            cand.step_value, cand.deficit = float(value), float(deficit)
        step.max_step_value = float(values.max())

        # 6. Select M beams (minus the finished pool) by softmax(V / T), or top-k.
        chosen = martingale.select_beams(
            values.tolist(), slots, s.selection_temperature, rng, top_k=s.selection == "top_k"
        )
        new_beams = []
        for i in chosen:
            cand = survivors[i]
            cand.selected = True
            parent = beams[cand.beam_index]
            new_beams.append(
                _Beam(text=parent.text + cand.text + s.step_delimiter, quality=cand.foresight_quality,
                      step_logprob=cand.step_logprob, rollout=rollouts[id(cand)])
            )
        beams = new_beams

        # 7. Martingale convergence (eq. 12), checked once min_steps steps are behind us.
        if s.early_stopping and t >= s.min_steps and martingale.converged(step.max_step_value, s.stop_epsilon):
            step.converged = True
            stop_reason = "converged"
            break

    # 8. Finish without extra tokens: a beam's rollout already completes it.
    completions = [text for text, _ in finished_pool]
    qualities = [quality for _, quality in finished_pool]
    missing = [beam for beam in beams if beam.rollout is None]
    if missing:
        requests = [
            GenerationRequest(prompt=prompt + beam.text, n=1, max_tokens=s.max_answer_tokens, stop=(s.end_marker,),
                              temperature=s.temperature, top_p=s.top_p, seed=request_seed(rng))
            for beam in missing
        ]
        outputs = yield requests
        tally.add(requests, outputs)
        filled = {id(beam): conts[0] for beam, conts in zip(missing, outputs)}
    for beam in beams:
        if beam.rollout is not None:
            completions.append(beam.text + beam.rollout)
            qualities.append(beam.quality)
        else:
            cont = filled[id(beam)]
            completions.append(beam.text + cont.text)
            qualities.append(cont.mean_logprob)
    return finish_result(
        completions, qualities, settings, tally, stop_reason=stop_reason, steps=trace, method="mfs",
        answer_key=answer_key,
    )
