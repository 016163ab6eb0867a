"""Accuracy against compute: the plot of a benchmark run (PNG, matplotlib's Agg backend)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from mfs_core.bench.report import MethodSummary

__all__ = ["headless_pyplot", "plot_accuracy_vs_flops"]


_MARKERS = "osD^vP*Xhp<>"


def headless_pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend (files only, no display).

    Raises:
        ImportError: matplotlib is missing; the message names ``pip install "mfs-decoding[bench]"``.
    """
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        msg = 'plotting needs matplotlib: pip install "mfs-decoding[bench]"'
        raise ImportError(msg) from exc
    return plt


def plot_accuracy_vs_flops(rows: Sequence[MethodSummary], path: str | Path, title: str = "") -> Path:
    """Draw accuracy (%) against total FLOPs (log scale), one point per method.

    Each method has its own colour and marker and is named in a legend outside the axes
    (so no label can cover another, however close the points); a vertical bar shows the
    95% Wilson interval of its accuracy. The λ1 sweep's points (labels ``mfs@lambda1=…``)
    are joined by a line in λ1 order.

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
    plt = headless_pyplot()
    from matplotlib.ticker import NullFormatter

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8.0, 4.4), dpi=120)
    try:
        sweep = sorted((r for r in rows if r.method.startswith("mfs@lambda1=")),
                       key=lambda r: float(r.method.split("=", 1)[1]))
        if len(sweep) > 1:
            ax.plot([max(r.total_flops, 1.0) for r in sweep], [100 * r.accuracy for r in sweep], "-",
                    color="0.6", zorder=1, label="MFS, λ1 sweep")
        colors = plt.get_cmap("tab10")
        lows, highs = [], []
        for i, r in enumerate(rows):
            flops = max(r.total_flops, 1.0)
            acc = 100 * r.accuracy
            low = 100 * r.accuracy_low if r.accuracy_low == r.accuracy_low else acc
            high = 100 * r.accuracy_high if r.accuracy_high == r.accuracy_high else acc
            lows.append(low)
            highs.append(high)
            label = f"{r.method} (k={r.sc_k})" if r.sc_k is not None else r.method
            label += f": {acc:.1f}%, n={r.questions}"
            ax.errorbar([flops], [acc], yerr=[[acc - low], [high - acc]], fmt=_MARKERS[i % len(_MARKERS)],
                        color=colors(i % 10), markersize=7, capsize=3, zorder=2, label=label)
        ax.set_ylim(max(0.0, min(lows) - 3.0), min(101.0, max(highs) + 3.0))
        ax.set_xscale("log")
        # Label the decades only: matplotlib labels minor ticks too when a log axis spans
        # less than a few decades, and those labels ("2×10^11 3×10^11 ...") run together.
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("total FLOPs (6 · output tokens · parameters)")
        ax.set_ylabel("accuracy (%), 95% interval")
        ax.grid(True, which="both", alpha=0.3)
        if title:
            ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)
        fig.tight_layout()
        fig.savefig(out, format="png")
    finally:
        plt.close(fig)
    return out
