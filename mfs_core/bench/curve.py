"""The accuracy–tokens curve: self-consistency at every k against each search at its own tokens.

One self-consistency run at ``k_max`` samples per question holds self-consistency at every
``k <= k_max``: its first ``k`` samples are exactly what a run at ``k`` would have drawn in
distribution (independent samples at the same temperature), so ``sc@k`` is scored by the
majority of a question's first ``k`` sample answers (ties broken by the highest mean log-prob
per token, then by order, as :func:`mfs_core.answers.majority_vote`). Its output tokens per
question are ``k / k_max`` of the run's (a sample's expected length times ``k``).

Every other method of the run is a point at its own mean output tokens per question, and is
paired (exact McNemar, :func:`mfs_core.bench.report.paired_comparisons`) with self-consistency
at the ``k`` that spends the same tokens (:func:`matched_k`; any k up to the run's).

A run may hold more than one self-consistency method (``sc`` and ``sc-rollout-temperature``,
SC sampled at MFS's rollout temperature): each is a curve of its own, ``<label>@k``; the
searches are paired with the ``sc`` curve (the first SC method when the run has no ``sc``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mfs_core.answers import majority_vote
from mfs_core.bench.plot import headless_pyplot
from mfs_core.bench.report import MethodSummary, PairedComparison, paired_comparisons, summarize
from mfs_core.bench.scoring import is_correct

__all__ = ["CurvePoint", "curve_records", "curve_table", "format_curve", "matched_k", "plot_curve", "sc_ks", "write_curve"]

DEFAULT_KS = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class CurvePoint:
    """One point of the curve and, for a search, its paired test against self-consistency.

    Attributes:
        summary: the method's row (accuracy, 95% Wilson interval, tokens per question).
        sc_label: for a non-SC method, ``sc@k`` at its matched k (None for SC points).
        paired: the exact McNemar comparison with ``sc_label`` (None for SC points).
        sc_summary: the row of ``sc_label`` (accuracy and tokens of the matched SC).
        sc_curve: for a self-consistency point, the SC method it is a point of (``"sc"``); None otherwise.
    """

    summary: MethodSummary
    sc_label: str | None = None
    paired: PairedComparison | None = None
    sc_summary: MethodSummary | None = None
    sc_curve: str | None = None

    @property
    def is_sc(self) -> bool:
        """Whether this is a self-consistency point of a curve."""
        return self.sc_curve is not None


def sc_methods(records: Sequence[dict[str, Any]]) -> list[str]:
    """Labels of the run's self-consistency methods (records with ``sample_predictions``), ``"sc"`` first."""
    labels = list(dict.fromkeys(r["method"] for r in records if "sample_predictions" in r))
    return sorted(labels, key=lambda label: label != "sc")


def sc_ks(records: Sequence[dict[str, Any]], ks: Sequence[int] = DEFAULT_KS, label: str | None = None) -> list[int]:
    """The ``k`` of ``ks`` that the run's self-consistency samples cover (``k <= `` its smallest ``sc_k``);
    ``label``: which SC method (default: ``"sc"``, else the first)."""
    held = [len(r["sample_predictions"]) for r in _sc_samples(records, label)]
    if not held:
        return []
    return [k for k in ks if k <= min(held)]


def _sc_samples(records: Sequence[dict[str, Any]], label: str | None = None) -> list[dict[str, Any]]:
    if label is None:
        labels = sc_methods(records)
        label = labels[0] if labels else "sc"
    return [r for r in records if r["method"] == label and "sample_predictions" in r and r.get("error") is None]


def curve_records(records: Sequence[dict[str, Any]], kind: str, ks: Sequence[int] = DEFAULT_KS,
                  label: str | None = None) -> list[dict[str, Any]]:
    """Records of ``<label>@k`` for each ``k`` of ``ks`` that the run covers, made from its self-consistency records.

    Args:
        records: bench records; self-consistency's carry ``sample_predictions`` and
            ``sample_qualities`` (:mod:`mfs_core.bench.runner`).
        kind: the set's scoring kind (``"demo"``, ``"gsm8k"``, ...), for :func:`is_correct`.
        ks: the sample counts wanted (any k up to the run's, not only powers of two).
        label: the SC method (default ``"sc"``, else the run's first SC method).

    Returns:
        One record per (k, question), labelled ``<label>@k``, with ``correct``, ``prediction``,
        ``output_tokens`` (``k / k_max`` of the run's) and ``flops`` scaled the same way.
    """
    out = []
    covered = sc_ks(records, ks, label)
    for record in _sc_samples(records, label):
        predictions, qualities = record["sample_predictions"], record["sample_qualities"]
        k_max = len(predictions)
        for k in covered:
            vote = majority_vote(predictions[:k], qualities[:k])
            share = k / k_max
            out.append({
                "method": f"{record['method']}@{k}", "decoder": record["decoder"], "index": record["index"], "id": record["id"],
                "sc_k": k, "error": None, "prediction": vote.answer,
                "correct": is_correct(kind, vote.answer, record["target"]),
                "output_tokens": record["output_tokens"] * share, "prompt_tokens": record["prompt_tokens"],
                "flops": record["flops"] * share, "elapsed_seconds": 0.0, "generate_seconds": 0.0,
            })
    return out


def matched_k(tokens: float, records: Sequence[dict[str, Any]]) -> int | None:
    """The k at which self-consistency spends ``tokens`` output tokens per question.

    ``round(tokens / (mean output tokens of one sample))``, clamped to ``[1, k_max]`` (the run's
    samples per question); None when the run has no self-consistency samples.
    """
    held = _sc_samples(records)
    if not held:
        return None
    k_max = min(len(r["sample_predictions"]) for r in held)
    per_sample = sum(r["output_tokens"] / len(r["sample_predictions"]) for r in held) / len(held)
    return max(1, min(k_max, round(tokens / per_sample))) if per_sample > 0 else k_max


def curve_table(records: Sequence[dict[str, Any]], kind: str, methods: Sequence[str],
                ks: Sequence[int] = DEFAULT_KS) -> list[CurvePoint]:
    """Every point of the curve: ``sc@k`` for each covered k (and ``<label>@k`` of every other SC
    method of the run), then each of ``methods``, paired with ``sc`` at its matched k (:func:`matched_k`).

    Args:
        records: the run's records.
        kind: the set's scoring kind.
        methods: labels of the other methods to place on the curve (those without records are
            left out; an SC method itself is replaced by its ``<label>@k`` points).
        ks: the self-consistency sample counts of the curve.

    Returns:
        The points, self-consistency first (in k order).
    """
    curves = sc_methods(records)
    points = []
    for curve in curves:
        labels = [f"{curve}@{k}" for k in sc_ks(records, ks, curve)]
        points += [CurvePoint(row, sc_curve=curve) for row in summarize(curve_records(records, kind, ks, curve), labels)]
    for row in summarize(records, [m for m in methods if m not in curves]):
        k = matched_k(row.mean_output_tokens, records)
        if k is None:
            points.append(CurvePoint(row))
            continue
        matched = curve_records(records, kind, [k], curves[0])
        pool = [r for r in records if r["method"] == row.method] + matched
        paired = next(iter(paired_comparisons(pool, row.method)), None)
        sc_row = summarize(matched, [f"{curves[0]}@{k}"])[0]
        points.append(CurvePoint(row, f"{curves[0]}@{k}", paired, sc_row))
    return points


def format_curve(points: Sequence[CurvePoint]) -> str:
    """The curve as a Markdown table: accuracy, 95% interval, output tokens per question, and
    for each search self-consistency at its matched k with the paired counts and exact McNemar p."""
    lines = [
        "| method | accuracy % | 95% CI | correct | out tokens/q | SC at its tokens | SC accuracy % | only method | only SC "
        "| McNemar p |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in points:
        r = p.summary
        ci = f"{100 * r.accuracy_low:.1f}-{100 * r.accuracy_high:.1f}"
        head = f"| {r.method} | {100 * r.accuracy:.1f} | {ci} | {r.correct}/{r.questions} | {r.mean_output_tokens:.1f}"
        if p.paired is None or p.sc_summary is None:
            lines.append(head + " | | | | | |")
        else:
            lines.append(head + f" | {p.sc_label} | {100 * p.sc_summary.accuracy:.1f} | {p.paired.only_method} | "
                         f"{p.paired.only_other} | {p.paired.p_value:.3f} |")
    return "\n".join(lines)


def plot_curve(points: Sequence[CurvePoint], path: str | Path, title: str = "") -> Path:
    """Accuracy (%) against output tokens per question (log scale): SC's curve as a line, each
    search as a point, all with 95% Wilson intervals.

    Raises:
        ImportError: matplotlib is missing (``pip install "mfs-decoding[bench]"``).
        ValueError: no points.
    """
    if not points:
        msg = "nothing to plot: the curve has no points"
        raise ValueError(msg)
    plt = headless_pyplot()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8.0, 4.6), dpi=120)
    try:
        def bar(row: MethodSummary) -> tuple[float, list[list[float]]]:
            acc = 100 * row.accuracy
            return acc, [[acc - 100 * row.accuracy_low], [100 * row.accuracy_high - acc]]

        curves = list(dict.fromkeys(p.sc_curve for p in points if p.is_sc))
        for shade, style, curve in zip(("0.4", "0.65", "0.8"), ("-o", "--s", ":^"), curves):
            sc = [p.summary for p in points if p.sc_curve == curve]
            xs = [r.mean_output_tokens for r in sc]
            ys = [100 * r.accuracy for r in sc]
            name = "self-consistency" if curve == "sc" else curve
            ax.plot(xs, ys, style, color=shade,
                    label=f"{name}, k = " + ", ".join(r.method.rsplit("@", 1)[1] for r in sc))
            for r in sc:
                acc, err = bar(r)
                ax.errorbar([r.mean_output_tokens], [acc], yerr=err, fmt="none", color=shade, capsize=2)
        colors = plt.get_cmap("tab10")
        markers = "sD^vP*Xh<>"
        for i, p in enumerate(q for q in points if not q.is_sc):
            r = p.summary
            acc, err = bar(r)
            ax.errorbar([r.mean_output_tokens], [acc], yerr=err, fmt=markers[(i + i // 10) % len(markers)], color=colors(i % 10),
                        markersize=7, capsize=3, label=f"{r.method}: {acc:.1f}%, {r.mean_output_tokens:,.0f} tok/q")
        ax.set_xscale("log")
        ax.set_xlabel("output tokens per question (log scale)")
        ax.set_ylabel("accuracy (%), 95% interval")
        ax.grid(True, which="both", alpha=0.3)
        if title:
            ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)
        fig.savefig(out, bbox_inches="tight")
    finally:
        plt.close(fig)
    return out


def write_curve(records: Sequence[dict[str, Any]], kind: str, methods: Sequence[str], out_dir: str | Path,
                title: str = "", plot: bool = True) -> str | None:
    """Write ``curve.md`` (and ``accuracy_vs_tokens.png``) into ``out_dir`` when the run holds
    self-consistency samples for at least two values of k; return the table, else None."""
    points = curve_table(records, kind, methods)
    if sum(p.is_sc for p in points) < 2:
        return None
    table = format_curve(points)
    out = Path(out_dir)
    (out / "curve.md").write_text(table + "\n", encoding="utf-8")
    if plot:
        plot_curve(points, out / "accuracy_vs_tokens.png", title=title)
    return table
