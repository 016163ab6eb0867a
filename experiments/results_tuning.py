"""The results page's tuning section: the pre-registered rules' verdict, from the tuning run's kept records.

Read from ``experiments/records/<model>/gsm8k-tuning-0-199-rules/`` (``records.jsonl`` of the methods decoded
live and ``replayed.jsonl`` of the voting rules replayed on SC's samples, both written by
``experiments/benchmarks/rules_tuning.py``). The numbers and the verdict are computed by that module's own
:func:`~experiments.benchmarks.rules_tuning.tuning_numbers` and
:func:`~experiments.benchmarks.rules_tuning.rules_verdict`, so the page applies the rule as written and nothing
here re-implements it. A model without kept tuning records adds nothing. Used by :mod:`experiments.results`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["TUNING", "tuning_lines", "tuning_records"]

TUNING = (("qwen2.5-coder-0.5b/gsm8k-tuning-0-199-rules", "Qwen2.5-Coder-0.5B-Instruct"),
          ("qwen2.5-coder-1.5b/gsm8k-tuning-0-199-rules", "Qwen2.5-Coder-1.5B-Instruct"))
"""``(records folder under experiments/records, model name shown)`` of each tuning run, in page order."""


def tuning_records(folder: Path) -> tuple[list[dict[str, Any]], str]:
    """``(records, scoring kind)`` of one tuning run: the live records and the replayed ones together.

    Raises:
        FileNotFoundError: ``folder`` has no ``config.json`` or ``records.jsonl`` (``replayed.jsonl`` may be
            absent: a run stopped before its replay).
    """
    kind = json.loads((folder / "config.json").read_text(encoding="utf-8"))["kind"]
    records = []
    for name in ("records.jsonl", "replayed.jsonl"):
        path = folder / name
        if name == "records.jsonl" or path.exists():
            records += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return records, kind


def _points(value: float) -> str:
    """An accuracy difference (0-1) in percentage points, signed: ``+1.5``."""
    return f"{100 * value:+.1f}"


def _outcome(label: str, passed: dict[str, str]) -> str:
    """A candidate's outcome under the rule, ``reference`` for ``mfs`` and ``esc``, else nothing (``cot``)."""
    from experiments.benchmarks.rules_tuning import REFERENCES

    return passed.get(label) or ("reference" if label in REFERENCES.values() else "")


def tuning_lines(root: Path) -> list[str]:
    """The tuning section of every kept tuning run under ``root``: SC's curve, each method's right answers,
    tokens and margin over that curve, each candidate's outcome under the rule with its paired counts, and
    the verdict. Empty when no tuning run is kept; a run with fewer common questions than the rule needs shows
    its table and says that it has no verdict.
    """
    from experiments.benchmarks.report import curve_match
    from experiments.benchmarks.rules_tuning import (
        METHODS,
        MIN_QUESTIONS,
        REFERENCES,
        REPLAYED,
        common_questions,
        rules_verdict,
        tuning_numbers,
    )
    from mfs_core.bench.report import paired_comparisons

    labels = [*METHODS, *REPLAYED]
    lines: list[str] = []
    for name, model in TUNING:
        folder = root / name
        if not (folder / "records.jsonl").exists():
            continue
        records, kind = tuning_records(folder)
        results, sc_points, questions = tuning_numbers(records, kind, labels)
        if not lines:
            lines = ["## Rules chosen on tuning questions (GSM8K test 0-199)", "",
                     ("The rule was written before the run (`experiments/benchmarks/rules_tuning.py`, its docstring): "
                     "a candidate passes when its margin over SC's curve at its own tokens beats its reference's "
                     "by 2 points, it answers no fewer questions than its reference, and it spends at most 1.1 "
                     "times SC's tokens at k = 16. The voting rules are replayed on SC's 16 samples of each "
                     "question. These questions are for tuning and are never reported as held out."), ""]
        lines += [f"### {model}", "", "| SC T = 0.7, k | output tokens / question | accuracy % |", "| --- | --- | --- |"]
        lines += [f"| {k} | {tokens:,.0f} | {100 * accuracy:.1f} |"
                  for k, (tokens, accuracy) in zip((1, 2, 4, 8, 16), sc_points, strict=False)]
        lines.append("")
        if questions < MIN_QUESTIONS or not sc_points:
            lines += [f"No verdict: {questions} questions decoded by every method, the rule needs {MIN_QUESTIONS}.", ""]
            continue
        verdict = rules_verdict(results, questions, sc_points)
        common = common_questions(records, labels)
        shared = [r for r in records if r["index"] in common and r.get("error") is None]
        lines += [("| method | reference | right | output tokens / question | margin over SC's curve (points) | "
                  "SC at its tokens: k, only it / only SC, p | against its reference: only it / only the reference, p | "
                  "under the rule |"), "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for label, (correct, tokens) in results.items():
            reference = REFERENCES.get(label)
            match = curve_match(shared, kind, label, tokens, "sc")
            versus_sc = (f"k = {match[0]}: {match[2].only_method} / {match[2].only_other}, {match[2].p_value:.3f}"
                         if match else "")
            versus_reference = ""
            if reference is not None:
                pool = [r for r in shared if r["method"] in (label, reference)]
                for pair in paired_comparisons(pool, label):
                    versus_reference = f"{pair.only_method} / {pair.only_other}, {pair.p_value:.3f}"
            shown_reference = reference or ("SC's curve" if label in REFERENCES else "")
            lines.append(f"| {label} | {shown_reference} | {correct} / {questions} | {tokens:,.0f} | "
                         f"{_points(verdict.margins[label])} | {versus_sc} | {versus_reference} | "
                         f"{_outcome(label, verdict.passed)} |")
        lines += ["", (f"MFS rule kept: {verdict.mfs_winner or 'none, the default `mfs` stays'}. "
                  f"Voting rule kept: {verdict.vote_winner or 'none'}."), ""]
    return lines
