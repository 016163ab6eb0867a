"""How well the foresight quality F separates right from wrong answers in an ``mfs bench`` run.

A test-bed statistic (by rule measured before any decoder is judged on the bed), read
from the records of a finished ``mfs bench`` run that includes ``sc``: every self-consistency
sample carries its extracted answer (``sample_predictions``) and its quality
(``sample_qualities``: F of the completion, its mean token log-prob in nats, MFS_SPEC.md eq. 7),
so the AUROC of F for right against wrong samples needs no new decoding. Printed:

* pooled AUROC over every sample, and the mean within-question AUROC over the questions whose
  samples hold both right and wrong answers (the comparison a search makes), each with a 95%
  bootstrap interval over questions;
* greedy (``cot``) accuracy and self-consistency at k = 1 and at the run's k (majority of the
  first k samples, ties to the first answer to reach the count), the bed's other statistics.

An AUROC near 0.5 means F orders right and wrong answers no better than a coin, so no decoder
that ranks paths by F (φ-Decoding, MFS) can gain over voting on that bed.

Usage::

    python -m experiments.testbed.bench_separation bench-results/qwen/table-arc-c
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments.testbed.foresight_separation import auroc, within_question_aurocs

__all__ = ["majority", "separation_from_records"]


def majority(answers: Sequence[str | None]) -> str | None:
    """The most frequent non-None answer; a tie goes to the answer that reached the count first.

    Returns:
        The answer, or None when every answer is None.
    """
    counts: Counter[str] = Counter()
    best, best_count = None, 0
    for answer in answers:
        if answer is None:
            continue
        counts[answer] += 1
        if counts[answer] > best_count:
            best, best_count = answer, counts[answer]
    return best


def separation_from_records(records: Sequence[dict[str, Any]], resamples: int = 2000,
                            seed: int = 0) -> dict[str, Any]:
    """F's AUROC (pooled, within-question) with 95% bootstrap intervals over questions, and the
    accuracies of greedy and SC, from the ``cot`` and ``sc`` records of one ``mfs bench`` run.

    Raises:
        ValueError: no ``sc`` record with ``sample_predictions`` and ``sample_qualities``.
    """
    sc = [r for r in records if r.get("method") == "sc" and r.get("sample_predictions") and r.get("sample_qualities")]
    if not sc:
        msg = "no sc record with sample_predictions and sample_qualities: run mfs bench with --methods ...,sc"
        raise ValueError(msg)
    labels, scores, groups = [], [], []
    for r in sc:
        for answer, quality in zip(r["sample_predictions"], r["sample_qualities"]):
            labels.append(answer is not None and str(answer) == str(r["target"]))
            scores.append(float(quality))
            groups.append(int(r["index"]))
    within = within_question_aurocs(labels, scores, groups)
    rng = np.random.default_rng(seed)
    questions = sorted({g for g in groups})
    by_question = {q: [i for i, g in enumerate(groups) if g == q] for q in questions}
    pooled_draws, within_draws = [], []
    for _ in range(resamples):
        pick = rng.choice(len(questions), size=len(questions), replace=True)
        rows = [i for j in pick for i in by_question[questions[j]]]
        pooled_draws.append(auroc([labels[i] for i in rows], [scores[i] for i in rows]))
        values = [within[questions[j]] for j in pick if questions[j] in within]
        within_draws.append(float(np.mean(values)) if values else math.nan)

    def interval(draws: list[float]) -> tuple[float, float]:
        kept = [d for d in draws if not math.isnan(d)]
        return (float(np.percentile(kept, 2.5)), float(np.percentile(kept, 97.5))) if kept else (math.nan, math.nan)

    k = min(len(r["sample_predictions"]) for r in sc)
    asked = {r["index"] for r in sc}
    cot = [r for r in records if r.get("method") == "cot" and r["index"] in asked]
    return {
        "questions": len(sc), "samples": len(labels), "right_samples": sum(labels), "k": k,
        "pooled_auroc": auroc(labels, scores), "pooled_ci": interval(pooled_draws),
        "within_auroc": float(np.mean(list(within.values()))) if within else math.nan,
        "within_ci": interval(within_draws), "within_questions": len(within),
        "greedy_correct": sum(bool(r["correct"]) for r in cot), "greedy_questions": len(cot),
        "sc1_correct": sum(str(r["sample_predictions"][0]) == str(r["target"]) for r in sc),
        "sck_correct": sum(str(majority(r["sample_predictions"][:k])) == str(r["target"]) for r in sc),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Print the statistics of the run in ``run_dir`` (its ``records.jsonl``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="output directory of an mfs bench run with sc")
    args = parser.parse_args(argv)
    records = [json.loads(line) for line in (args.run_dir / "records.jsonl").read_text().splitlines() if line.strip()]
    result = separation_from_records(records)
    print(f"{result['questions']} questions, {result['samples']} sc samples ({result['right_samples']} right), k = {result['k']}")
    print(f"F (mean log-prob) AUROC, right vs wrong samples: pooled {result['pooled_auroc']:.3f} "
          f"({result['pooled_ci'][0]:.3f}-{result['pooled_ci'][1]:.3f}); within-question {result['within_auroc']:.3f} "
          f"({result['within_ci'][0]:.3f}-{result['within_ci'][1]:.3f}) over {result['within_questions']} questions")
    print(f"greedy {result['greedy_correct']}/{result['greedy_questions']}; sc k=1 {result['sc1_correct']}/{result['questions']}; "
          f"sc k={result['k']} (majority, first to the count wins ties) {result['sck_correct']}/{result['questions']}")
    return result


if __name__ == "__main__":
    main()
