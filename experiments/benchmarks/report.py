"""Ad-hoc tables from finished bench runs' records: no decoding, only reading (the results page is
:mod:`experiments.results`).

Reads ``records.jsonl`` and ``config.json`` of an ``mfs bench`` / ``experiments/benchmarks/mfs_rules.py``
output directory and prints, in Markdown:

* one row per method: accuracy with its 95% Wilson interval, output tokens per question,
  total FLOPs and FLOPs per question relative to φ's (the method's FLOPs per question on the questions
  φ ran over φ's, so the ratio is paired when φ ran only part of the set), mean steps and stop reasons;
  for every method that is not self-consistency, SC at the k that spends its tokens
  (:func:`mfs_core.bench.curve.matched_k`) on each SC curve of the run (``sc``, and
  ``sc-rollout-temperature`` when it ran), with the paired counts and the exact McNemar p;
* the SC curves' points (k = 1, 2, 4, ...), from the same records;
* ``mfs`` (or ``--versus``'s method) against every other method, question by question (exact McNemar).

``--questions-of phi`` keeps only the questions φ ran (φ is the slowest method: a run may hold it on
part of the set), so every row, the FLOPs ratio to φ's and the pairs are over the same questions.

It also writes the accuracy-tokens plot (:func:`mfs_core.bench.curve.plot_curve`) with every SC
curve (pooled folders: only with ``--plot``). Several output directories of the same dataset (e.g.
questions 200-299 and 300-399 run apart) are pooled: their records are read as one run, each method
over every question it ran, and pairs are formed on the questions both methods ran. Usage::

    R=experiments/records/qwen2.5-coder-0.5b
    python -m experiments.benchmarks.report $R/gsm8k-test-200-299 $R/gsm8k-test-300-399 --methods cot,sc,mfs,esc
    python -m experiments.benchmarks.report $R/gsm8k-test-200-299 --questions-of phi --versus phi
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from mfs_core.bench.curve import curve_records, curve_table, matched_k, plot_curve, sc_methods
from mfs_core.bench.report import MethodSummary, PairedComparison, paired_comparisons, summarize


def load_run(*out_dirs: Path) -> tuple[list[dict[str, Any]], str]:
    """``(records, scoring kind)`` of one bench output directory, or of several pooled.

    Args:
        out_dirs: one or more output directories of the same dataset; their records are concatenated
            (records are keyed by the question's dataset index, so runs at different ``--offset`` do
            not collide).

    Raises:
        FileNotFoundError: no ``records.jsonl`` or ``config.json`` in one of them.
        ValueError: no directory given, one given twice, or their scoring kinds differ (e.g. ``gsm`` and
            ``demo``).
        ValueError: the same method has a record of the same question in two directories.
    """
    if not out_dirs:
        raise ValueError("load_run needs at least one output directory")
    records: list[dict[str, Any]] = []
    kinds = {}
    seen: dict[tuple[str, int], Path] = {}
    for out_dir in out_dirs:
        if out_dir in kinds:
            raise ValueError(f"output directory {out_dir} given twice")
        kinds[out_dir] = json.loads((out_dir / "config.json").read_text(encoding="utf-8"))["kind"]
        for line in (out_dir / "records.jsonl").read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            key = (record["method"], record["index"])
            if key in seen and seen[key] != out_dir:
                raise ValueError(f"method {key[0]!r} answered question {key[1]} in both {seen[key]} and {out_dir}")
            seen[key] = out_dir
            records.append(record)
    if len(set(kinds.values())) > 1:
        raise ValueError(f"cannot pool runs of different scoring kinds: {kinds}")
    return records, next(iter(kinds.values()))


def _p(value: float) -> str:
    return "< 0.001" if value < 0.001 else f"= {value:.3f}"


def curve_match(records: list[dict[str, Any]], kind: str, method: str, tokens: float,
                curve: str) -> tuple[int, MethodSummary, PairedComparison] | None:
    """``(k, SC's row at k, the paired test)``: SC of ``curve`` at the k spending ``method``'s ``tokens``
    output tokens per question (:func:`mfs_core.bench.curve.matched_k`), paired question by question
    (exact McNemar, :func:`mfs_core.bench.report.paired_comparisons`); None when ``curve`` has no samples.
    SC is taken on the questions ``method`` has records of, so its row and the paired test count the same
    questions (a method run on part of the set is compared with SC on that part)."""
    asked = {r["index"] for r in records if r["method"] == method}
    held = [r for r in records if r["method"] == curve and r["index"] in asked]
    k = matched_k(tokens, held)
    if k is None:
        return None
    matched = curve_records(held, kind, [k], curve)
    pool = [r for r in records if r["method"] == method] + matched
    paired = next(iter(paired_comparisons(pool, method)))
    return k, summarize(matched, [f"{curve}@{k}"])[0], paired


def versus_curve(records: list[dict[str, Any]], kind: str, method: str, tokens: float, curve: str) -> str:
    """``"k = 8: 68.2% · 48 / 42 · p = 0.598"``: :func:`curve_match` as a table cell ("" without SC samples)."""
    match = curve_match(records, kind, method, tokens, curve)
    if match is None:
        return ""
    k, sc_row, paired = match
    return (f"k = {k}: {100 * sc_row.accuracy:.1f}% · {paired.only_method} / {paired.only_other} · "
            f"p {_p(paired.p_value)}")


def questions_of(records: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    """Every method's records of the questions ``method`` has a record of (e.g. φ's part of the set), in order."""
    asked = {r["index"] for r in records if r["method"] == method}
    return [r for r in records if r["index"] in asked]


def report(records: list[dict[str, Any]], kind: str, paired_with: str = "mfs") -> str:
    """The Markdown tables described in the module docstring; ``paired_with`` is paired with every other method."""
    curves = sc_methods(records)
    labels = list(dict.fromkeys(r["method"] for r in records))
    phi_records = questions_of(records, "phi")  # the FLOPs ratio is over the questions φ ran, paired
    phi = summarize(phi_records, ["phi"]) if phi_records else []
    phi_flops = phi[0].total_flops / phi[0].questions if phi else None
    header = (["method", "accuracy %", "95% CI", "correct", "out tokens/q", "total FLOPs", "FLOPs/q ÷ φ's"]
              + [f"{c} at its tokens: acc · only it / only SC · McNemar" for c in curves]
              + ["mean steps", "stop reasons"])  # one column per SC curve, none without one
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for row in summarize(records, [m for m in labels if m not in curves]):
        mine = [r for r in records if r["method"] == row.method and r.get("error") is None]
        steps = [r["steps"] for r in mine if r.get("steps") is not None]
        reasons = Counter(r["stop_reason"] for r in mine if r.get("stop_reason"))
        on_phis = [r for r in phi_records if r["method"] == row.method and r.get("error") is None]
        ratio = (f"{sum(r['flops'] for r in on_phis) / len(on_phis) / phi_flops:.2f}" if phi_flops and on_phis
                 else "")
        versus = [versus_curve(records, kind, row.method, row.mean_output_tokens, c) for c in curves]
        mean_steps = f"{sum(steps) / len(steps):.2f}" if steps and row.method not in ("cot",) else ""
        interval = f"{100 * row.accuracy_low:.1f}-{100 * row.accuracy_high:.1f}"
        cells = ([row.method, f"{100 * row.accuracy:.1f}", interval, f"{row.correct}/{row.questions}",
                  f"{row.mean_output_tokens:,.0f}", f"{row.total_flops:.3e}", ratio]
                 + versus + [mean_steps, ", ".join(f"{k} {v}" for k, v in reasons.most_common())])
        lines.append("| " + " | ".join(cells) + " |")
    if curves:
        lines += ["", "| SC curve point | accuracy % | 95% CI | correct | out tokens/q |",
                  "| --- | --- | --- | --- | --- |"]
    for point in curve_table(records, kind, curves):
        if point.is_sc:
            r = point.summary
            lines.append(f"| {r.method} | {100 * r.accuracy:.1f} | {100 * r.accuracy_low:.1f}-{100 * r.accuracy_high:.1f} "
                         f"| {r.correct}/{r.questions} | {r.mean_output_tokens:,.0f} |")
    if any(r["method"] == paired_with for r in records):
        lines += ["", f"`{paired_with}` question by question against every other method (only `{paired_with}` / "
                  "only the other, exact McNemar p, on the questions both ran):", ""]
        lines += [f"- {c.other}: {c.only_method} / {c.only_other}, p {_p(c.p_value)}"
                  for c in paired_comparisons(records, paired_with)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Print the report of a run directory (or of several pooled) and write its accuracy-tokens plot.

    The plot goes to ``--plot``; without it, a single folder's plot is written beside its records
    (``OUT/accuracy_vs_tokens.png``, as the bench writes it) and pooled folders get none, so a pooled
    report never overwrites one folder's own plot.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, nargs="+", help="the run's output directory, or several pooled")
    parser.add_argument("--title", default="", help="the plot's title")
    parser.add_argument("--plot", type=Path, default=None,
                        help="plot path (default: OUT/accuracy_vs_tokens.png for one folder; none when pooled)")
    parser.add_argument("--methods", default="", help="comma-separated method labels to keep (default: every "
                        "method of the run), e.g. those that ran on every pooled folder")
    parser.add_argument("--questions-of", default="", help="keep only the questions this method has a record of "
                        "(e.g. phi, run on part of the set), so every row is over the same questions")
    parser.add_argument("--versus", default="mfs", help="the method paired with every other, question by question")
    args = parser.parse_args(argv)
    records, kind = load_run(*args.out)
    if args.methods:
        kept = [label.strip() for label in args.methods.split(",") if label.strip()]
        present = list(dict.fromkeys(r["method"] for r in records))
        unknown = [label for label in kept if label not in present]
        if unknown:
            parser.error(f"--methods {','.join(unknown)}: not in the records (they hold {', '.join(present)})")
        records = [r for r in records if r["method"] in kept]
    if args.questions_of:
        if not any(r["method"] == args.questions_of for r in records):
            parser.error(f"--questions-of {args.questions_of}: no records of that method")
        records = questions_of(records, args.questions_of)
    print(report(records, kind, paired_with=args.versus))
    labels = list(dict.fromkeys(r["method"] for r in records))
    if args.plot is None and (len(args.out) > 1 or args.questions_of):  # never overwrite one folder's own plot
        print("\n(pooled folders or a subset of questions: no plot drawn; pass --plot PATH for one)")
        return
    plot_curve(curve_table(records, kind, labels), args.plot or args.out[0] / "accuracy_vs_tokens.png", title=args.title)


if __name__ == "__main__":
    main()
