"""The results page's test-bed sections: how a model behaves before any decoder is compared on it.

Read from the kept summaries of ``experiments/testbed/gsm8k_bed.py`` (greedy, self-consistency at k = 1-16,
pass@k, diversity of first steps, how well a path's foresight quality F separates right from wrong samples)
and of ``experiments/testbed/step_values.py`` (what the default search's steps look like), under
``experiments/records/<model>/gsm8k-bed-*``. Used by :mod:`experiments.results`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["bed_lines", "pass_at", "separation_lines", "step_lines"]

BEDS = (("qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct"), ("qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct"))
SCORES = (("mean_logprob", "F: the rollout's mean log-prob per token (eq. 3)"),
          ("head_logprob@32", "F over a fixed window: the mean log-prob of the first 32 tokens"),
          ("sum_logprob", "the rollout's summed log-prob"),
          ("lowest_group_conf@16", "DeepConf's lowest group confidence, groups of 16 tokens"),
          ("lowest_group_conf@32", "DeepConf's lowest group confidence, groups of 32 tokens"))


def _pct(summary: list[float]) -> str:
    """``[accuracy, low, high, right, (questions)]`` as ``"20.8 (13.9-30.0)"``."""
    return f"{100 * summary[0]:.1f} ({100 * summary[1]:.1f}-{100 * summary[2]:.1f})"


def pass_at(answers_path: Path, run: str) -> tuple[int, int]:
    """``(questions with at least one right sample, questions)`` of one run of the bed's answers file."""
    hit = total = 0
    for line in answers_path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["run"] == run:
            total += 1
            hit += any(sample["right"] for sample in record["samples"])
    return hit, total


def separation_lines(separation: dict[str, Any]) -> list[str]:
    """The AUROC of each score for right against wrong samples, within a question and pooled (95% bootstrap)."""
    lines = ["| score of a sampled answer | AUROC within a question (95% CI) | AUROC pooled (95% CI) |",
             "| --- | --- | --- |"]
    for key, name in SCORES:
        score = separation["candidates"].get(key)
        if score:
            within, pooled = score["within_ci"], score["pooled_ci"]
            lines.append(f"| {name} | {score['within_auroc']:.3f} ({within[0]:.3f}-{within[1]:.3f}) | "
                         f"{score['pooled_auroc']:.3f} ({pooled[0]:.3f}-{pooled[1]:.3f}) |")
    return lines


def step_lines(values: dict[str, Any], min_reached: int = 5) -> list[str]:
    """The default search's step table: how many searches reach step t, stop there, how many candidates are
    scored, the largest and the chosen step values, and the chosen beams' children (nats per token)."""
    lines = ["| step t | searches at t | converged at t | scored candidates | max V (nats) | share V > ε | "
             "chosen beams' advantage | their children's V |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for step in values["steps"]:
        if step["reached"] < min_reached:
            continue
        lines.append(f"| {step['t']} | {step['reached']} | {step['converged']} | {step['scored']:.2f} | "
                     f"{step['max_value']:+.3f} | {step['positive_share']:.2f} | {step['advantage']:+.3f} | "
                     f"{step['children_value']:+.3f} |")
    return lines


def bed_lines(root: Path) -> list[str]:
    """The page's test-bed sections, one per model with kept bed summaries."""
    page: list[str] = []
    for folder, name in BEDS:
        for bed_dir in sorted((root / folder).glob("gsm8k-bed-*")):
            summary_path = bed_dir / "bed-t05.json"
            if not summary_path.exists():
                continue
            bed = json.loads(summary_path.read_text(encoding="utf-8"))
            (temperature, run), = bed["temperatures"].items()
            hit, total = pass_at(bed_dir / "bed-t05.answers.jsonl", temperature)
            greedy = bed["greedy"]["none"]
            page += [f"## The test bed: {name} on GSM8K tuning questions 0-{bed['limit'] - 1}", "",
                     f"Measured before any decoder was compared on this model, {bed['k']} samples per question at "
                     f"{temperature.replace('T=', 'T = ')} (`experiments/testbed/gsm8k_bed.py`).", "",
                     "| measure | value (95% CI) |", "| --- | --- |",
                     f"| greedy CoT accuracy % | {_pct(greedy)}, {greedy[3]} / {greedy[4]} |",
                     f"| one sample's accuracy % | {_pct(run['sample_accuracy'])} |"]
            page += [f"| SC k = {k} accuracy % | {_pct(acc)}, {acc[3]} / {run['questions']} |"
                     for k, acc in run["sc"].items()]
            diverse = run["diverse_first_steps"]
            page += [f"| pass@{bed['k']}: a right answer among the samples | {hit} / {total} |",
                     f"| questions whose first steps differ | {diverse[3] * diverse[0]:.0f} / {diverse[3]} |",
                     f"| questions with right and wrong samples | {run['separation']['mixed_questions']} / "
                     f"{run['separation']['questions']} |", "",
                     *separation_lines(run["separation"]), ""]
            values_path = bed_dir / "step-values.json"
            if values_path.exists():
                values = json.loads(values_path.read_text(encoding="utf-8"))
                reasons = ", ".join(f"{reason} {count}" for reason, count in values["stop_reasons"].items())
                page += [f"### What the default search's steps look like ({values['questions']} tuning questions)", "",
                         f"`mfs` at M = N = 4: {values['correct']} of {values['questions']} right, "
                         f"{values['mean_steps']:.2f} steps per search, stopped by {reasons} "
                         "(`experiments/testbed/step_values.py`). A step is listed while at least 5 searches reach it.",
                         "", *step_lines(values), ""]
    return page
