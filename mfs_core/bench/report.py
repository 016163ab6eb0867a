"""The results table of a benchmark run: one row per method, written as text, JSON and CSV.

Columns (DESIGN.md, "What is measured"): accuracy with its 95% Wilson score interval
(``scipy.stats.binomtest``), mean output tokens per question, total
FLOPs ``6 · n_output_tokens · n_parameters`` (Kaplan et al., as the paper's Table 1), wall
time, questions per second, and the share of wall time spent outside ``backend.generate``
(engine overhead: scheduling, decoder logic, φ-Decoding's clustering, tokenisation).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "MethodSummary",
    "PairedComparison",
    "format_paired",
    "format_table",
    "paired_comparisons",
    "summarize",
    "token_ratio",
    "wilson_interval",
    "write_csv",
    "write_json",
]


@dataclass(frozen=True)
class MethodSummary:
    """One row of the results table.

    Attributes:
        method: method label.
        questions: questions decoded.
        correct: questions answered correctly.
        accuracy: ``correct / questions`` (0-1; a failed decode counts as wrong).
        mean_output_tokens: output tokens per question (tokens).
        mean_prompt_tokens: prompt tokens per question, every request counted (tokens).
        total_flops: sum of ``6 · output_tokens · num_parameters`` (FLOPs).
        wall_seconds: wall time of the method's decodes (seconds).
        questions_per_second: ``questions / wall_seconds``.
        engine_overhead: share of ``wall_seconds`` spent outside ``backend.generate`` (0-1).
        errors: decodes that raised.
        sc_k: self-consistency's samples per question (None for other methods).
        accuracy_low: lower end of the 95% Wilson score interval of ``accuracy`` (0-1).
        accuracy_high: upper end of the same interval (0-1).
    """

    method: str
    questions: int
    correct: int
    accuracy: float
    mean_output_tokens: float
    mean_prompt_tokens: float
    total_flops: float
    wall_seconds: float
    questions_per_second: float
    engine_overhead: float
    errors: int
    sc_k: int | None = None
    accuracy_low: float = float("nan")
    accuracy_high: float = float("nan")


def summarize(records: Sequence[dict[str, Any]], methods: Sequence[str]) -> list[MethodSummary]:
    """One :class:`MethodSummary` per method label, in the order of ``methods``.

    Methods without records are left out.
    """
    rows = []
    for label in methods:
        mine = [r for r in records if r["method"] == label]
        if not mine:
            continue
        n = len(mine)
        wall = sum(r["elapsed_seconds"] for r in mine)
        generate = sum(r["generate_seconds"] for r in mine)
        ks = sorted({r["sc_k"] for r in mine if r.get("sc_k") is not None})
        correct = sum(bool(r["correct"]) for r in mine)
        low, high = wilson_interval(correct, n)
        rows.append(MethodSummary(
            method=label, questions=n, correct=sum(bool(r["correct"]) for r in mine),
            accuracy=sum(bool(r["correct"]) for r in mine) / n,
            mean_output_tokens=sum(r["output_tokens"] for r in mine) / n,
            mean_prompt_tokens=sum(r["prompt_tokens"] for r in mine) / n,
            total_flops=float(sum(r["flops"] for r in mine)), wall_seconds=wall,
            questions_per_second=n / wall if wall > 0 else float("nan"),
            engine_overhead=max(0.0, 1.0 - generate / wall) if wall > 0 else float("nan"),
            errors=sum(r.get("error") is not None for r in mine), sc_k=ks[-1] if ks else None,
            accuracy_low=low, accuracy_high=high,
        ))
    return rows


def wilson_interval(correct: int, questions: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of ``correct / questions`` (``scipy.stats.binomtest``), as (low, high) in 0-1.

    Raises:
        ValueError: ``questions`` < 1 or ``correct`` outside ``[0, questions]``.
    """
    if questions < 1 or not 0 <= correct <= questions:
        msg = f"need 0 <= correct <= questions and questions >= 1, got {correct}/{questions}"
        raise ValueError(msg)
    from scipy.stats import binomtest

    ci = binomtest(correct, questions).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


@dataclass(frozen=True)
class PairedComparison:
    """Two methods on the questions both decoded (McNemar's paired test).

    Attributes:
        method: the method compared (e.g. ``"mfs"``).
        other: the method it is compared with.
        questions: questions both methods decoded (paired by question index).
        only_method: questions ``method`` got right and ``other`` wrong.
        only_other: questions ``other`` got right and ``method`` wrong.
        p_value: exact two-sided McNemar p: a binomial test of ``only_method`` out of the
            discordant pairs at 1/2 (``scipy.stats.binomtest``); 1.0 with no discordant pair.
    """

    method: str
    other: str
    questions: int
    only_method: int
    only_other: int
    p_value: float


def paired_comparisons(records: Sequence[dict[str, Any]], method: str = "mfs") -> list[PairedComparison]:
    """``method`` against every other method of ``records``, question by question.

    Args:
        records: bench records (``method``, ``index``, ``correct`` each).
        method: the label compared with the others.

    Returns:
        One :class:`PairedComparison` per other method, in the order the records first name
        them; empty when ``method`` has no records. E.g. right/wrong ``mfs`` (1, 1, 0) against
        ``phi`` (1, 0, 1): ``only_method = 1``, ``only_other = 1``, ``p_value = 1.0``.
    """
    from scipy.stats import binomtest

    by_method: dict[str, dict[int, bool]] = {}
    for record in records:
        by_method.setdefault(record["method"], {})[record["index"]] = bool(record["correct"])
    mine = by_method.get(method)
    if not mine:
        return []
    out = []
    for other, theirs in by_method.items():
        if other == method:
            continue
        shared = mine.keys() & theirs.keys()
        only_method = sum(mine[i] and not theirs[i] for i in shared)
        only_other = sum(theirs[i] and not mine[i] for i in shared)
        discordant = only_method + only_other
        p_value = float(binomtest(only_method, discordant, 0.5).pvalue) if discordant else 1.0
        out.append(PairedComparison(method, other, len(shared), only_method, only_other, p_value))
    return out


def format_paired(comparisons: Sequence[PairedComparison]) -> str:
    """One line per comparison: ``mfs vs phi: only mfs 13, only phi 5, exact McNemar p = 0.096 (100 questions)``."""
    return "\n".join(
        f"{c.method} vs {c.other}: only {c.method} {c.only_method}, only {c.other} {c.only_other}, "
        f"exact McNemar p = {c.p_value:.3f} ({c.questions} questions)"
        for c in comparisons
    )


def token_ratio(rows: Sequence[MethodSummary], method: str = "mfs", unit: str = "cot") -> float | None:
    """Mean output tokens of ``method`` over those of ``unit`` (how many CoT answers one MFS decode costs)."""
    by = {r.method: r for r in rows}
    if method in by and unit in by and by[unit].mean_output_tokens > 0:
        return by[method].mean_output_tokens / by[unit].mean_output_tokens
    return None


def format_table(rows: Sequence[MethodSummary]) -> str:
    """A Markdown table of the rows (also readable as plain text)."""
    header = ["method", "accuracy %", "95% CI", "correct", "out tokens/q", "total FLOPs", "wall s", "q/s", "overhead %"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    for r in rows:
        label = f"{r.method} (k={r.sc_k})" if r.sc_k is not None else r.method
        if r.errors:
            label += f" [{r.errors} failed]"
        cells = [label, f"{100 * r.accuracy:.1f}", f"{100 * r.accuracy_low:.1f}-{100 * r.accuracy_high:.1f}",
                 f"{r.correct}/{r.questions}", f"{r.mean_output_tokens:.1f}",
                 f"{r.total_flops:.3e}", f"{r.wall_seconds:.1f}", f"{r.questions_per_second:.3f}",
                 f"{100 * r.engine_overhead:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_json(rows: Sequence[MethodSummary], path: str | Path, meta: dict[str, Any] | None = None) -> None:
    """Write ``{"meta": ..., "methods": [row, ...]}`` to ``path``."""
    payload = {"meta": meta or {}, "methods": [asdict(r) for r in rows]}
    Path(path).write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")


def write_csv(rows: Sequence[MethodSummary], path: str | Path) -> None:
    """Write the rows as CSV, one column per :class:`MethodSummary` field."""
    fields = list(MethodSummary.__dataclass_fields__)
    with Path(path).open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for r in rows:
            writer.writerow(asdict(r))
