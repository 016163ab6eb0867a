"""φ-Decoding (Xu et al., ACL 2025) as its release runs it, on the MFS coroutine protocol.

Follows ``phi_decoding.py`` of ``xufangzhi/phi-Decoding`` (MFS_SPEC.md, "φ-Decoding, as its
release runs it"). Per step t, with M = ``step_beam_size`` and N = ``num_rollouts``:

1. M×N one-step candidates (stop at the step delimiter or the end marker); a candidate's
   score is its mean raw log-prob per token.
2. Width pruning over all M×N scores: keep ``score > μ - σ_rate·σ``; if fewer than M are
   kept, top up to M by drawing without replacement from the rest with weights
   ``softmax(score / 0.1)``.
3. One foresight rollout per kept candidate; its quality ``F`` is its mean log-prob per
   token, its advantage ``F - F(parent beam)`` (0 for the root).
4. The rollouts are clustered (TF-IDF + k-means, 3 clusters); M beams are drawn without
   replacement with weights ``(softmax(cluster_size_ratio) + softmax(advantage / 0.1)) / 2``
   (the first softmax runs over the candidates' own cluster ratios). When clustering is not
   possible (fewer rollouts than clusters, no words) the weights are ``softmax(adv / 0.1)``.
5. Depth pruning: from step ``min_depth`` (4) on, stop when the largest cluster holds
   ``>= 0.69`` of the rollouts or every rollout is the same text. As in the release, the
   step that triggers the stop is discarded: the final completions start from the beams
   chosen the step before.

After the last step each open beam is completed by a fresh sample (the release does not
reuse the rollouts), and one completion is chosen: the larger of 2 TF-IDF/k-means clusters
of the non-empty final segments, then a draw by ``softmax(advantage / 0.1)`` inside it
(``softmax(adv / 0.1)`` over all when fewer than M are non-empty, ``softmax(-adv / 0.1)``
when all are empty).

**Finished steps.** The release treats a step that ends at the end marker like any other:
the beam gets a step delimiter and sampling goes on past the answer, which a model that
does not emit the end marker again at once turns into extra answer lines (the demo model
does: 10% instead of 85% on its held-out set). By default (``close_finished``) such a step
closes its beam: the candidate gets an empty rollout with ``F`` = its step's log-prob (what
the release sees when the model ends at once, at no token cost), and a closed beam is
carried through later steps as an always-kept candidate with advantage 0, is not completed
again, and is judged in the final choice by its last step. Deliberation ends when every
beam is closed. ``PhiConfig(close_finished=False)`` (method ``"phi-release"``) runs the
release as is.

Other differences from the release, on purpose: step and rollout temperature are both
``settings.temperature`` (the release samples steps at 0.6 and rollouts at vLLM's default
1.0), so φ and MFS run at one temperature; a rollout is prompted with the step and the
step delimiter (the release's prompt drops the trailing whitespace with ``rstrip``); the
clustering fallback keeps each beam's rollout quality as its value (the release indexes the
first-stage scores with rollout indices there) and the "all rollouts identical" test always
looks at the rollouts; k-means is seeded from ``settings.seed``.
"""

from __future__ import annotations

import warnings
from collections.abc import Generator, Sequence
from dataclasses import dataclass

import numpy as np

from mfs_core.answers import AnswerExtractor, extract_answer
from mfs_core.decoders.common import (
    Decoder,
    TokenTally,
    ask_for_answers,
    decode_rng,
    report_step,
    request_seed,
    sample_steps,
)
from mfs_core.martingale import selection_weights
from mfs_core.settings import MFSSettings
from mfs_core.types import Candidate, Continuation, DecodeResult, GenerationRequest, StepTrace

__all__ = [
    "PhiConfig",
    "cluster_labels",
    "decode_phi",
    "phi_selection_weights",
    "phi_width_prune",
]


@dataclass(frozen=True)
class PhiConfig:
    """The release's constants that ``MFSSettings`` has no field for (its CLI defaults).

    Attributes:
        sigma_rate: σ_rate of the width-pruning threshold ``μ - σ_rate·σ`` (std devs).
        num_clusters: k-means clusters of the rollouts at each step.
        depth_threshold: largest-cluster share that stops deliberation (0-1).
        min_depth: steps done before depth pruning may stop (``least_foresight_num``).
        final_clusters: k-means clusters when the final completion is chosen.
        close_finished: a step that ends the answer (end marker or EOS) closes its beam
            (see the module docstring); False runs the release as is, which keeps
            sampling after the end marker.
    """

    sigma_rate: float = 1.0
    num_clusters: int = 3
    depth_threshold: float = 0.69
    min_depth: int = 4
    final_clusters: int = 2
    close_finished: bool = True


@dataclass(frozen=True)
class _PhiBeam:
    """A kept path: its text, the quality ``F`` of the rollout that chose it, closed or not."""

    text: str
    value: float = 0.0
    closed: bool = False
    last_step: str = ""


def phi_width_prune(
    scores: Sequence[float], keep_at_least: int, sigma_rate: float, temperature: float, rng: np.random.Generator
) -> tuple[list[int], float, float]:
    """Width pruning with top-up (release ``low_sigma``).

    Args:
        scores: mean log-prob per token of every candidate of the step, shape (K,), nats.
        keep_at_least: M; the kept set is topped up to this size.
        sigma_rate: σ_rate of the threshold ``μ - σ_rate·σ``.
        temperature: T of the top-up weights ``softmax(score / T)``.
        rng: generator of the top-up draw.

    Returns:
        ``(kept, μ, σ)``: kept indices in increasing order, the mean and the population
        standard deviation of ``scores``.
    """
    s = np.asarray(scores, dtype=float)
    mean, std = float(s.mean()), float(s.std())
    kept = [i for i, score in enumerate(s) if score > mean - sigma_rate * std]
    missing = keep_at_least - len(kept)
    rest = [i for i in range(len(s)) if i not in kept]
    if missing > 0 and rest:
        weights = np.maximum(selection_weights(s[rest], temperature), 1e-300)
        drawn = rng.choice(len(rest), size=min(missing, len(rest)), replace=False, p=weights / weights.sum())
        kept.extend(rest[int(j)] for j in drawn)
    return sorted(kept), mean, std


def cluster_labels(texts: Sequence[str], num_clusters: int, seed: int) -> np.ndarray | None:
    """k-means labels of the TF-IDF vectors of ``texts`` (scikit-learn defaults), or None.

    None when clustering is impossible: fewer texts than clusters, or no words to vectorise.
    """
    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.feature_extraction.text import TfidfVectorizer

    if len(texts) < num_clusters:
        return None
    try:
        vectors = TfidfVectorizer().fit_transform(list(texts))
    except ValueError:  # empty vocabulary
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # fewer distinct texts than clusters
        return KMeans(n_clusters=num_clusters, random_state=seed).fit(vectors).labels_


def phi_selection_weights(labels: np.ndarray | None, advantages: Sequence[float], temperature: float) -> np.ndarray:
    """``(softmax(cluster_size_ratio) + softmax(advantage / T)) / 2`` per candidate, shape (K,).

    ``cluster_size_ratio`` of a candidate is the share of candidates in its cluster; with no
    ``labels`` the weights are ``softmax(advantage / T)`` (the release's fallback).
    """
    adv_weights = selection_weights(advantages, temperature)
    if labels is None:
        return adv_weights
    ratios = np.bincount(labels)[labels] / len(labels)
    return (selection_weights(ratios, 1.0) + adv_weights) / 2


def _draw(weights: np.ndarray, k: int, rng: np.random.Generator) -> list[int]:
    """``k`` indices drawn without replacement with ``weights`` (zero weights floored)."""
    w = np.maximum(weights, 1e-300)
    return [int(i) for i in rng.choice(len(w), size=min(k, len(w)), replace=False, p=w / w.sum())]


def decode_phi(
    prompt: str, settings: MFSSettings, config: PhiConfig | None = None, answer_key: AnswerExtractor | None = None
) -> Decoder:
    """Decode one prompt with φ-Decoding (see the module docstring for the algorithm).

    Args:
        prompt: the rendered model prompt (chat template + assistant prefix, or raw).
        settings: M (``step_beam_size``), N (``num_rollouts``), ``max_steps`` (the release's
            ``num_foresight``), ``temperature``, ``top_p``, ``selection_temperature`` (the
            release's 0.1), ``max_step_tokens``, ``max_answer_tokens``, ``step_delimiter``,
            ``end_marker``, ``seed``.
        config: the release's other constants (default :class:`PhiConfig`).
        answer_key: what the completions' answers are read by (default: the extracted
            answer); φ chooses its final completion by its own rule, not by a vote, so the key
            only names the answers and says which paths the answer trigger asks (a
            multiple-choice :class:`~mfs_core.answers.OptionAnswer`).

    Yields:
        Lists of generation requests; expects the matching continuations sent back.

    Returns:
        The :class:`DecodeResult` (``method="phi"``, ``flops`` left 0 for the engine).
    """
    s, c = settings, config or PhiConfig()
    rng = decode_rng(s, prompt)
    tally = TokenTally()
    delim, end = s.step_delimiter, s.end_marker
    beams = [_PhiBeam("")] * s.step_beam_size
    trace: list[StepTrace] = []
    stop_reason = "max_steps"
    for t in range(s.max_steps):
        open_beams = [b for b, beam in enumerate(beams) if not beam.closed]
        if not open_beams:
            stop_reason = "all_finished"
            break
        if trace:  # the previous step is done: tell a listening engine (mfs_core.events)
            report_step(trace[-1], [beam.text for beam in beams if not beam.closed])
        requests = _phi_requests(prompt, [beams[b].text for b in open_beams], s.num_rollouts, s.max_step_tokens,
                                 (delim, end), s, rng)
        outputs = yield from sample_steps(requests, s, rng, tally)  # blank lines continued, then stripped
        sampled = [
            Candidate(beam_index=b, text=cont.text.strip(), step_logprob=cont.mean_logprob, step_tokens=cont.num_tokens,
                      finished=c.close_finished and (cont.finish_reason == "eos" or cont.stop_reason == end))
            for b, conts in zip(open_beams, outputs) for cont in conts
        ]
        carried = [Candidate(beam_index=b, text="", step_logprob=beam.value, step_tokens=0, finished=True)
                   for b, beam in enumerate(beams) if beam.closed]
        kept, mean, std = phi_width_prune([x.step_logprob for x in sampled], s.step_beam_size - len(carried),
                                          c.sigma_rate, s.selection_temperature, rng)
        step = StepTrace(step=t, candidates=sampled + carried, mean_score=mean, std_score=std,
                         prune_threshold=mean - c.sigma_rate * std)
        trace.append(step)
        for i, cand in enumerate(sampled):
            cand.pruned = i not in kept
        survivors = [sampled[i] for i in kept] + carried
        advantages = yield from _phi_foresight(prompt, beams, survivors, s, rng, tally)
        step.max_step_value = float(max(advantages))

        texts = [x.rollout for x in survivors]
        labels = cluster_labels(texts, c.num_clusters, request_seed(rng))
        chosen = _draw(phi_selection_weights(labels, advantages, s.selection_temperature), s.step_beam_size, rng)
        new_beams = [beams[survivors[i].beam_index] if i >= len(kept) else _extended(beams, survivors[i], delim)
                     for i in chosen]  # a carried (closed) beam stays as it is
        if all(beam.closed for beam in new_beams):
            for i in chosen:
                survivors[i].selected = True
            beams, stop_reason = new_beams, "all_finished"
            break
        largest = float(np.bincount(labels).max() / len(labels)) if labels is not None else 0.0
        if t >= c.min_depth and (len(set(texts)) == 1 or largest >= c.depth_threshold):
            step.converged = True
            stop_reason = "identical_rollouts" if len(set(texts)) == 1 else "cluster_converged"
            break  # the release discards this step's selection
        for i in chosen:
            survivors[i].selected = True
        beams = new_beams

    if trace:
        report_step(trace[-1], [beam.text for beam in beams if not beam.closed])
    return (yield from _phi_finish(prompt, beams, s, c, rng, tally, answer_key, stop_reason, trace))


def _phi_requests(
    prompt: str, paths: list[str], n: int, max_tokens: int, stop: tuple[str, ...], s: MFSSettings,
    rng: np.random.Generator,
) -> list[GenerationRequest]:
    """One request of ``n`` samples from ``prompt + path`` per path, at ``settings.temperature``; one
    seed drawn per request, in order."""
    return [GenerationRequest(prompt=prompt + p, n=n, max_tokens=max_tokens, stop=stop, temperature=s.temperature,
                              top_p=s.top_p, seed=request_seed(rng)) for p in paths]


def _extended(beams: list[_PhiBeam], x: Candidate, delim: str) -> _PhiBeam:
    """The beam a chosen candidate makes: its parent's text + its step (+ the delimiter if open)."""
    return _PhiBeam(beams[x.beam_index].text + x.text + ("" if x.finished else delim), x.foresight_quality,
                    x.finished, x.text)


def _phi_foresight(
    prompt: str, beams: list[_PhiBeam], survivors: list[Candidate], s: MFSSettings, rng: np.random.Generator,
    tally: TokenTally,
) -> Generator[list[GenerationRequest], list[list[Continuation]], list[float]]:
    """Step 3: one rollout per surviving open candidate (a finished one ends here: an empty rollout
    and ``F`` = its step log-prob); records rollout, ``F`` and advantage on each survivor and
    returns the advantages, in survivor order."""
    rolling = [i for i, x in enumerate(survivors) if not x.finished]
    requests = _phi_requests(prompt, [beams[survivors[i].beam_index].text + survivors[i].text + s.step_delimiter
                                      for i in rolling], 1, s.max_answer_tokens, (s.end_marker,), s, rng)
    outputs = (yield requests) if requests else []
    tally.add(requests, outputs)
    rollouts = {i: conts[0] for i, conts in zip(rolling, outputs)}
    for i, x in enumerate(survivors):
        roll = rollouts.get(i)
        x.rollout = roll.text.strip() if roll is not None else ""
        x.foresight_quality = roll.mean_logprob if roll is not None else x.step_logprob
        x.step_value = x.foresight_quality - beams[x.beam_index].value
    return [x.step_value for x in survivors]


def _phi_finish(
    prompt: str, beams: list[_PhiBeam], s: MFSSettings, c: PhiConfig, rng: np.random.Generator, tally: TokenTally,
    answer_key: AnswerExtractor | None, stop_reason: str, trace: list[StepTrace],
) -> Decoder:
    """Complete the open beams (a closed beam is already complete) and choose one completion."""
    open_beams = [b for b, beam in enumerate(beams) if not beam.closed]
    requests = _phi_requests(prompt, [beams[b].text for b in open_beams], 1, s.max_answer_tokens, (s.end_marker,),
                             s, rng)
    outputs = (yield requests) if requests else []
    tally.add(requests, outputs)
    finals = {b: conts[0] for b, conts in zip(open_beams, outputs)}
    responses, qualities, completions = [], [], []
    for b, beam in enumerate(beams):
        if b in finals:
            response = finals[b].text.strip()
            responses.append(response)
            qualities.append(finals[b].mean_logprob)
            completions.append(beam.text + response)
        else:  # judged by its last step, the answer line
            responses.append(beam.last_step)
            qualities.append(beam.value)
            completions.append(beam.text)
    advantages = [q - beam.value for q, beam in zip(qualities, beams)]
    index = _choose_final(responses, advantages, s, c, rng)
    # A path that states no answer is asked for one (settings.answer_trigger; off by default).
    completions, triggered = yield from ask_for_answers(prompt, completions, s, tally, answer_key)
    key = answer_key if answer_key is not None else extract_answer
    answers = [key(text) for text in completions]
    answer = answers[index]
    share = sum(a == answer for a in answers) / len(answers) if answer is not None else 0.0
    return DecodeResult(
        text=completions[index], answer=answer, vote_share=share, stop_reason=stop_reason,
        prompt_tokens=tally.prompt_tokens, output_tokens=tally.output_tokens, flops=0.0, steps=trace,
        completions=completions, completion_answers=answers, completion_qualities=qualities, method="phi",
        completion_triggered=triggered,
    )


def _choose_final(
    responses: list[str], advantages: list[float], s: MFSSettings, c: PhiConfig, rng: np.random.Generator
) -> int:
    """Index of the final completion by the release's ``select_response`` (cluster strategy)."""
    valid = [i for i, r in enumerate(responses) if r]
    if not valid:
        return _draw(selection_weights([-a for a in advantages], s.selection_temperature), 1, rng)[0]
    labels = cluster_labels([responses[i] for i in valid], c.final_clusters, request_seed(rng)) \
        if len(valid) >= s.step_beam_size else None
    if labels is None:
        return _draw(selection_weights(advantages, s.selection_temperature), 1, rng)[0]
    sizes = np.bincount(labels, minlength=c.final_clusters)
    biggest = int(np.flatnonzero(sizes == sizes.max())[-1])  # the release prefers the later cluster on ties
    members = [valid[j] for j in range(len(valid)) if labels[j] == biggest]
    pick = _draw(selection_weights([advantages[i] for i in members], s.selection_temperature), 1, rng)[0]
    return members[pick]
