"""How well candidate foresight qualities F separate right from wrong sampled answers.

``python -m experiments.testbed.foresight_separation [--limit 200] [--json PATH]`` samples, for each of the
first ``--limit`` demo held-out questions (``mfs_core/demo/heldout.json``; the tuning
questions are 0-199, and this script refuses to go past them), ``k = 8`` complete answers at the
decoders' temperature (0.7, top-p 1, at most 512 tokens, stopped at the end marker, each
question seeded as :func:`~mfs_core.decoders.baselines.decode_self_consistency` seeds it, with
``--seed 0``), through vLLM's CPU backend with the top-20 raw log-probs of every sampled token
(``SamplingParams(logprobs=20)``; raw, before temperature, as MFS_SPEC.md's F). Each answer is
scored right or wrong against the target (:mod:`mfs_core.bench.scoring`, kind ``demo``; an
answer without a number is wrong). For each candidate F it reports the AUROC of "F ranks right
answers above wrong ones" (``sklearn.metrics.roc_auc_score``), pooled over every answer and
averaged within questions that have both right and wrong answers, with 95% bootstrap
intervals over questions, and the within-question difference against today's F.

Candidate qualities, all computed on the whole sampled answer (every sampled token, the one
that completes the end marker included, as :class:`~mfs_core.types.Continuation` counts them):

* ``mean_logprob``: mean raw log-prob per token, today's F (MFS_SPEC.md, paper eq. 3);
* ``sum_logprob``: their sum;
* ``lowest_group_conf@w`` (w = 8, 16, 32): DeepConf's lowest group confidence (Fu et al., 2025,
  arXiv 2508.15260, eq. 1-4): token confidence ``C_i = -(1/k) sum_{j<=k} log P_i(j)`` over the
  ``k = 20`` most likely tokens at position i; group confidence = mean of ``C`` over a sliding
  window of ``w`` tokens; the lowest over the answer (an answer shorter than ``w`` is one
  group). DeepConf uses w = 2048 on traces of thousands of tokens; our answers are about 230
  tokens, so the windows were chosen shorter, before any run;
* ``lowest_group_logprob@w`` (w = 8, 16, 32): the same with the sampled token's log-prob as the
  token confidence (all that :class:`~mfs_core.types.Continuation`'s backends could report
  per token without top-k log-probs);
* ``tail_conf@t``, ``tail_logprob@t`` (t = 16, 32): the mean token confidence / sampled log-prob
  over the last ``t`` tokens (DeepConf's tail confidence);
* ``mean_conf``: the mean token confidence over the answer (DeepConf's average trace
  confidence);
* ``head_logprob@32``: the mean sampled log-prob over the first 32 tokens (all when fewer): F over a
  fixed-length window, as the ``foresight_window`` rule (W = 32, ``experiments/variants.py``) reads a
  rollout, here at t = 0. Added 2026-12-07 so the bed reports F over a whole rollout and over a fixed
  window side by side; it is not one of the twelve candidates the rule below was fixed for.

Also the test bed's decoding statistics on the same questions (as :mod:`testbed.evaluate`
reports them with 16 samples through transformers): greedy accuracy (one greedy answer per
question), self-consistency over the 8 samples (majority vote, ties to the highest mean
log-prob, as the ``sc`` decoder), the share of questions whose 8 first steps hold >= 2 texts,
and, per candidate, the accuracy of DeepConf's offline filter: the majority vote over the 4 of
the 8 answers with the highest F (ties to the highest F).

Rule fixed before the first run (2026-11-26), for a foresight quality other than the mean log-prob
--------------------------------------------------------------------------------------------------

A candidate F *separates clearly better* than ``mean_logprob`` iff its mean within-question
AUROC is at least 0.03 higher AND the 95% paired bootstrap interval of that difference (2,000
resamples of the questions that have both right and wrong answers, seed 0) excludes 0. Twelve
candidates are measured against it; no multiplicity correction is applied beyond reporting every one.
Only if some candidate passes is it built as an ablation setting of the foresight quality and
run on the tuning questions under ``experiments/benchmarks/mfs_rules.py``'s rule (replace the default only
if it answers at least as many questions right and has the larger margin over SC's curve); if
several pass, the one with the largest difference. If none passes, F stays the mean log-prob
and no decoder uses another.

Caveat: MFS's F is the quality of a foresight rollout *from a candidate step*; here F is
measured on complete answers sampled from the prompt, which is the case t = 0 (every rollout is
such an answer continued from a partial path). Nothing here runs a search decoder.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experiments.testbed.evaluate import _lines, wilson_interval
from mfs_core.confidence import (  # one implementation: the deepconf decoder's
    lowest_group_mean,
    token_confidence,
)

__all__ = ["CANDIDATES", "TOP_K", "TUNING_QUESTIONS", "Sample", "auroc", "candidate_scores",
           "decoding_statistics", "filtered_vote_right", "format_table", "head_mean", "lowest_group_mean", "main",
           "separation", "tail_mean", "token_confidence", "within_question_aurocs"]

TOP_K = 20
"""Top log-probs per token for DeepConf's token confidence (vLLM's default ``max_logprobs``)."""

TUNING_QUESTIONS = 200
"""The tuning split: demo held-out questions 0-199; the script never reads past it."""

WINDOWS = (8, 16, 32)
TAILS = (16, 32)
HEAD = 32
"""Tokens of the fixed window of ``head_logprob`` (the ``foresight_window`` rule's W)."""
REPORTED_ONLY = (f"head_logprob@{HEAD}",)
"""Scores reported beside the candidates but outside the rule (they never pass)."""
THRESHOLD = 0.03
"""Pre-registered: least within-question AUROC gain over ``mean_logprob`` that counts as clear."""


@dataclass
class Sample:
    """One sampled answer: whether it is right, its per-token sampled log-probs and token
    confidences (nats; one entry per sampled token), its extracted answer and first step."""

    question: int
    right: bool
    answer: str | None
    first_step: str
    logprobs: list[float]
    confidences: list[float]


def _end_mean(values: Sequence[float], count: int, name: str, *, last: bool) -> float:
    """The mean of the first or last ``count`` entries of ``values`` (all when fewer); NaN when empty."""
    if count < 1:
        msg = f"{name} must be >= 1, got {count}"
        raise ValueError(msg)
    part = list(values)[-count:] if last else list(values)[:count]
    return sum(part) / len(part) if part else math.nan


def tail_mean(values: Sequence[float], tail: int) -> float:
    """The mean of the last ``tail`` entries of ``values`` (all when fewer); NaN when empty.

    Raises:
        ValueError: ``tail`` < 1.
    """
    return _end_mean(values, tail, "tail", last=True)


def head_mean(values: Sequence[float], head: int) -> float:
    """The mean of the first ``head`` entries of ``values`` (all when fewer); NaN when empty.

    Raises:
        ValueError: ``head`` < 1.
    """
    return _end_mean(values, head, "head", last=False)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _candidates() -> dict[str, Callable[[Sample], float]]:
    table: dict[str, Callable[[Sample], float]] = {
        "mean_logprob": lambda s: _mean(s.logprobs),
        "sum_logprob": lambda s: sum(s.logprobs),
    }
    for w in WINDOWS:
        table[f"lowest_group_conf@{w}"] = lambda s, w=w: lowest_group_mean(s.confidences, w)
    for w in WINDOWS:
        table[f"lowest_group_logprob@{w}"] = lambda s, w=w: lowest_group_mean(s.logprobs, w)
    for t in TAILS:
        table[f"tail_conf@{t}"] = lambda s, t=t: tail_mean(s.confidences, t)
    for t in TAILS:
        table[f"tail_logprob@{t}"] = lambda s, t=t: tail_mean(s.logprobs, t)
    table["mean_conf"] = lambda s: _mean(s.confidences)
    table[f"head_logprob@{HEAD}"] = lambda s: head_mean(s.logprobs, HEAD)
    return table


CANDIDATES = _candidates()
"""Candidate foresight qualities by name; higher means "more likely right"."""


def candidate_scores(sample: Sample) -> dict[str, float]:
    """Every candidate F of one sample."""
    return {name: f(sample) for name, f in CANDIDATES.items()}


def auroc(labels: Sequence[bool], scores: Sequence[float]) -> float:
    """``roc_auc_score`` of ``scores`` for ``labels`` (ties count one half); NaN with one class only."""
    from sklearn.metrics import roc_auc_score

    if len(set(labels)) < 2:
        return math.nan
    return float(roc_auc_score([int(x) for x in labels], scores))


def within_question_aurocs(
    labels: Sequence[bool], scores: Sequence[float], groups: Sequence[int]
) -> dict[int, float]:
    """The AUROC within each group (question) that has both right and wrong answers, by group;
    their mean is the within-question AUROC."""
    by_group: dict[int, tuple[list[bool], list[float]]] = {}
    for label, score, group in zip(labels, scores, groups):
        ls, ss = by_group.setdefault(group, ([], []))
        ls.append(bool(label))
        ss.append(score)
    return {g: auroc(ls, ss) for g, (ls, ss) in by_group.items() if len(set(ls)) == 2}


def filtered_vote_right(answers: Sequence[str | None], rights: Sequence[bool], scores: Sequence[float],
                        keep: int) -> bool:
    """Whether the majority vote over the ``keep`` answers with the highest score (DeepConf's
    offline filter; ties of the vote go to the highest score) is right."""
    order = sorted(range(len(answers)), key=lambda i: -scores[i])[:keep]
    counts: dict[str, tuple[int, float, bool]] = {}
    for i in order:
        if answers[i] is None:
            continue
        n, best, right = counts.get(answers[i], (0, -math.inf, rights[i]))
        counts[answers[i]] = (n + 1, max(best, scores[i]), right)
    if not counts:
        return False
    return max(counts.values(), key=lambda v: (v[0], v[1]))[2]


def separation(samples: Sequence[Sample], resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Pooled and within-question AUROC of every candidate with 95% bootstrap intervals over
    questions, the paired within-question difference against ``mean_logprob`` and the
    pre-registered verdict (module docstring)."""
    import numpy as np

    questions = sorted({s.question for s in samples})
    by_q = {q: [s for s in samples if s.question == q] for q in questions}
    scores = {q: [candidate_scores(s) for s in by_q[q]] for q in questions}
    mixed = [q for q in questions if len({s.right for s in by_q[q]}) == 2]

    # Within-question AUROCs do not change under resampling: bootstrap their means.
    flat = [(s.right, q) for q in questions for s in by_q[q]]
    per_q = {name: within_question_aurocs([r for r, _ in flat], [x[name] for q in questions for x in scores[q]],
                                          [q for _, q in flat]) for name in CANDIDATES}

    labels = {q: np.array([s.right for s in by_q[q]]) for q in questions}
    values_of = {name: {q: np.array([x[name] for x in scores[q]]) for q in questions} for name in CANDIDATES}

    def pooled(qs: Sequence[int], name: str) -> float:
        return auroc(np.concatenate([labels[q] for q in qs]), np.concatenate([values_of[name][q] for q in qs]))

    rng = np.random.default_rng(seed)
    mixed_draws = rng.integers(0, len(mixed), (resamples, len(mixed))) if mixed else np.zeros((0, 0), int)
    all_draws = [[questions[j] for j in rng.integers(0, len(questions), len(questions))] for _ in range(resamples)]

    def ci(values: Sequence[float]) -> tuple[float, float]:
        arr = np.array([v for v in values if not math.isnan(v)])
        return (float(np.percentile(arr, 2.5)), float(np.percentile(arr, 97.5))) if arr.size else (math.nan, math.nan)

    base_values = np.array([per_q["mean_logprob"][q] for q in mixed])
    base = float(base_values.mean()) if mixed else math.nan
    rows = {}
    for name in CANDIDATES:
        values = np.array([per_q[name][q] for q in mixed])
        within = float(values.mean()) if mixed else math.nan
        draws = values[mixed_draws].mean(axis=1) if mixed else np.array([])
        diff_draws = (values - base_values)[mixed_draws].mean(axis=1) if mixed else np.array([])
        diff = within - base
        diff_ci = ci(list(diff_draws))
        rows[name] = {
            "pooled_auroc": pooled(questions, name), "pooled_ci": ci([pooled(d, name) for d in all_draws]),
            "within_auroc": within, "within_ci": ci(list(draws)),
            "within_minus_mean_logprob": diff, "difference_ci": diff_ci,
            "passes": name not in ("mean_logprob", *REPORTED_ONLY) and diff >= THRESHOLD and diff_ci[0] > 0,
            "filtered_vote_correct": sum(
                filtered_vote_right([s.answer for s in by_q[q]], [s.right for s in by_q[q]],
                                    [x[name] for x in scores[q]], keep=max(1, len(by_q[q]) // 2))
                for q in questions),
        }
    passing = [n for n, r in rows.items() if r["passes"]]
    best = max(passing, key=lambda n: rows[n]["within_minus_mean_logprob"]) if passing else None
    return {"questions": len(questions), "mixed_questions": len(mixed), "samples": len(samples),
            "right_samples": sum(s.right for s in samples), "candidates": rows, "passing": passing,
            "chosen": best, "threshold": THRESHOLD, "resamples": resamples}


def _sample_logprobs(completion: Any) -> tuple[list[float], list[float]]:
    """Per-token sampled log-probs and DeepConf token confidences of one vLLM ``CompletionOutput``."""
    lps, confs = [], []
    for token, entry in zip(completion.token_ids, completion.logprobs):
        lps.append(float(entry[token].logprob))
        top = sorted((lp.logprob for lp in entry.values() if lp.rank is not None and lp.rank <= TOP_K), reverse=True)
        confs.append(token_confidence(top[:TOP_K]))
    return lps, confs


def sample(limit: int, seed: int, k: int, chunk: int = 25) -> tuple[list[Sample], list[bool]]:
    """Sample ``k`` answers (and one greedy answer) for each of the first ``limit`` questions."""
    from mfs_core.backends import _hf
    from mfs_core.backends.vllm import VLLMBackend
    from mfs_core.bench.datasets import demo_heldout_path
    from mfs_core.bench.scoring import extract_prediction, is_correct
    from mfs_core.decoders.common import decode_rng, request_seed
    from mfs_core.prompts import render_question
    from mfs_core.settings import MFSSettings

    settings = MFSSettings(model="mfs-demo", backend="vllm", seed=seed)
    backend = VLLMBackend.from_settings(settings)
    try:
        import vllm

        records = json.loads(demo_heldout_path().read_text(encoding="utf-8"))[:limit]
        samples: list[Sample] = []
        greedy: list[bool] = []
        start = time.perf_counter()
        for lo in range(0, len(records), chunk):
            block = records[lo: lo + chunk]
            prompts, params = [], []
            for record in block:
                prompt = render_question(record["input"], backend, settings)
                ids = {"prompt_token_ids": _hf.encode_prompt(backend.llm.get_tokenizer(), prompt)}
                common = {"max_tokens": settings.max_answer_tokens, "stop": [settings.end_marker], "logprobs": TOP_K}
                prompts += [ids, ids]
                params.append(vllm.SamplingParams(n=k, temperature=settings.temperature, top_p=settings.top_p,
                                                  seed=request_seed(decode_rng(settings, prompt)), **common))
                params.append(vllm.SamplingParams(n=1, temperature=0.0, **common))
            outputs = backend.llm.generate(prompts, params, use_tqdm=False)
            for j, record in enumerate(block):
                q, target = lo + j, float(record["target"])
                sampled, greedy_out = outputs[2 * j], outputs[2 * j + 1]
                for completion in sorted(sampled.outputs, key=lambda c: c.index):
                    answer = extract_prediction("demo", completion.text)
                    lps, confs = _sample_logprobs(completion)
                    samples.append(Sample(q, is_correct("demo", answer, target), answer,
                                          (_lines(completion.text) or [""])[0], lps, confs))
                text = greedy_out.outputs[0].text
                greedy.append(is_correct("demo", extract_prediction("demo", text), target))
            print(f"  {lo + len(block)}/{len(records)} questions, {time.perf_counter() - start:.0f} s", flush=True)
        return samples, greedy
    finally:
        backend.close()


def decoding_statistics(samples: Sequence[Sample], greedy: Sequence[bool]) -> dict[str, Any]:
    """Greedy accuracy, self-consistency over the samples, diverse first steps (Wilson intervals)."""
    from mfs_core.answers import majority_vote

    questions = sorted({s.question for s in samples})
    sc = diverse = 0
    for q in questions:
        group = [s for s in samples if s.question == q]
        vote = majority_vote([s.answer for s in group], [_mean(s.logprobs) for s in group])
        sc += any(s.right for s in group if s.answer is not None and s.answer == vote.answer)
        diverse += len({s.first_step for s in group}) >= 2
    n = len(questions)
    counts = (("greedy", sum(greedy)), ("self_consistency", sc), ("diverse_first_steps", diverse))
    return {name: [count / n, *wilson_interval(count, n), count] for name, count in counts}


def format_table(result: dict[str, Any]) -> str:
    """One Markdown table of :func:`separation`'s output (and the decoding statistics, if present)."""
    n = result["questions"]
    lines = [f"{n} questions, {result['samples']} sampled answers ({result['right_samples']} right); "
             f"{result['mixed_questions']} questions have both right and wrong answers", "",
             "| F | pooled AUROC | 95% CI | within-question AUROC | 95% CI | minus mean_logprob | 95% CI | "
             f"passes | vote of top half by F (of {n}) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in result["candidates"].items():
        lines.append(f"| {name} | {r['pooled_auroc']:.3f} | {r['pooled_ci'][0]:.3f}-{r['pooled_ci'][1]:.3f} | "
                     f"{r['within_auroc']:.3f} | {r['within_ci'][0]:.3f}-{r['within_ci'][1]:.3f} | "
                     f"{r['within_minus_mean_logprob']:+.3f} | "
                     f"{r['difference_ci'][0]:+.3f} to {r['difference_ci'][1]:+.3f} | "
                     f"{'yes' if r['passes'] else 'no'} | {r['filtered_vote_correct']} |")
    stats = result.get("decoding")
    if stats:
        lines.append("")
        for label, key in (("greedy accuracy", "greedy"), ("self-consistency over the samples", "self_consistency"),
                           ("questions whose first steps hold >= 2 texts", "diverse_first_steps")):
            p, lo, hi, count = stats[key]
            lines.append(f"{label}: {100 * p:.1f}% ({100 * lo:.1f}-{100 * hi:.1f}), {count}/{n}")
    lines.append("")
    lines.append(f"verdict (within-question gain >= {result['threshold']} and its 95% CI above 0): "
                 + (f"{', '.join(result['passing'])} pass; chosen {result['chosen']}" if result["passing"]
                    else "no candidate passes; F stays the mean log-prob"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: sample, measure, print the table, write the JSON (samples included)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=TUNING_QUESTIONS, help="first N tuning questions (<= 200)")
    parser.add_argument("--k", type=int, default=8, help="sampled answers per question")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    parser.add_argument("--json", type=Path, default=Path("bench-results/foresight-separation.json"))
    parser.add_argument("--from-json", type=Path, default=None, help="recompute from the samples of an earlier run")
    args = parser.parse_args(argv)
    if not 1 <= args.limit <= TUNING_QUESTIONS:
        parser.error(f"--limit must be in 1..{TUNING_QUESTIONS} (the tuning questions), got {args.limit}")
    if args.k < 2:
        parser.error(f"--k must be >= 2, got {args.k}")
    start = time.perf_counter()
    if args.from_json is not None:
        saved = json.loads(args.from_json.read_text(encoding="utf-8"))
        samples = [Sample(**s) for s in saved["samples"]]
        greedy = saved["greedy"]
    else:
        samples, greedy = sample(args.limit, args.seed, args.k)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"greedy": greedy, "samples": [asdict(s) for s in samples]}) + "\n",
                             encoding="utf-8")
    result = separation(samples, resamples=args.resamples, seed=args.seed)
    result["decoding"] = decoding_statistics(samples, greedy)
    result.update(k=args.k, seed=args.seed, top_k=TOP_K, seconds=round(time.perf_counter() - start, 1))
    print(format_table(result))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({**result, "greedy": greedy, "samples": [asdict(s) for s in samples]}) + "\n",
                         encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
