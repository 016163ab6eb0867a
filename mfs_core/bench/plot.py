"""Accuracy against compute: the plot of a benchmark run (PNG, matplotlib's Agg backend)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mfs_core.bench.report import MethodSummary

__all__ = ["plot_accuracy_vs_flops"]


def plot_accuracy_vs_flops(rows: Sequence[MethodSummary], path: str | Path, title: str = "") -> Path:
    """Draw accuracy (%) against total FLOPs (log scale), one labelled point per method.

    The λ1 sweep's points (labels ``mfs@lambda1=…``) are joined by a line in λ1 order.

    Args:
        rows: the table rows.
        path: the PNG to write (parent directories are created).
        title: the plot title.

    Returns:
        The path written.

    Raises:
        ImportError: matplotlib is missing (``pip install "mfs-decoding[bench]"``).
        ValueError: no rows.
    """
    if not rows:
        msg = "nothing to plot: no method has results"
        raise ValueError(msg)
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        msg = 'plotting needs matplotlib: pip install "mfs-decoding[bench]"'
        raise ImportError(msg) from exc
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    try:
        sweep = sorted((r for r in rows if r.method.startswith("mfs@lambda1=")),
                       key=lambda r: float(r.method.split("=", 1)[1]))
        if len(sweep) > 1:
            ax.plot([max(r.total_flops, 1.0) for r in sweep], [100 * r.accuracy for r in sweep], "-",
                    color="0.6", zorder=1, label="MFS, λ1 sweep")
        for r in rows:
            flops = max(r.total_flops, 1.0)
            ax.scatter([flops], [100 * r.accuracy], zorder=2)
            label = f"{r.method} (k={r.sc_k})" if r.sc_k is not None else r.method
            ax.annotate(label, (flops, 100 * r.accuracy), textcoords="offset points", xytext=(5, 4), fontsize=8)
        accuracies = [100 * r.accuracy for r in rows]
        ax.set_ylim(max(0.0, min(accuracies) - 5.0), min(100.0, max(accuracies) + 5.0) if max(accuracies) < 95 else 101.0)
        ax.set_xscale("log")
        ax.set_xlabel("total FLOPs (6 · output tokens · parameters)")
        ax.set_ylabel("accuracy (%)")
        ax.grid(True, which="both", alpha=0.3)
        if title:
            ax.set_title(title, fontsize=10)
        if len(sweep) > 1:
            ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        fig.savefig(out, format="png")
    finally:
        plt.close(fig)
    return out
