"""The paper's figure 2 for one decode: per step, each candidate's deficit against ``c_prune``
(``mfs ask --trace-png``; PNG through matplotlib's Agg backend).

Width pruning (eq. 10-11) stops candidate i at step t once its deficit
``D = s_best − s_i`` exceeds ``c_prune(t) = s_best − (μ + λ1·σ)``, where ``s`` is the score
pruning ranks by (the step's mean log-prob per token, nats) over the step's unfinished
candidates. The top panel draws every unfinished candidate's ``D`` at its step, pruned ones
as red crosses, survivors as circles (filled when selected as a beam), and ``c_prune`` as a
bar per step; the bottom panel draws ``max V`` per step against ``ε_stop`` (eq. 12).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mfs_core.types import DecodeResult

__all__ = ["plot_deficits", "step_deficits"]


def step_deficits(result: DecodeResult) -> list[tuple[int, list[float], list[bool], list[bool], float | None]]:
    """Per step with pruning data: ``(t, deficits, pruned, selected, c_prune)``.

    ``deficits[i] = s_best − s_i`` (nats/token) over the step's unfinished candidates, in
    trace order; ``c_prune`` is None when width pruning was off.
    """
    rows = []
    for step in result.steps:
        open_cands = [c for c in step.candidates if not c.finished]
        if not open_cands:
            continue
        scores = np.array([c.step_logprob for c in open_cands], dtype=float)
        deficits = (scores.max() - scores).tolist()
        rows.append(
            (step.step, deficits, [c.pruned for c in open_cands], [c.selected for c in open_cands], step.c_prune)
        )
    return rows


def plot_deficits(result: DecodeResult, path: str | Path, *, title: str = "") -> Path:
    """Draw the deficits against ``c_prune`` per step, and ``max V`` against ``ε_stop``.

    Args:
        result: a decode with a trace (MFS; φ-Decoding traces have no ``c_prune``).
        path: the PNG to write (parent directories are created).
        title: the figure title (default: the answer and stop reason).

    Returns:
        The path written.

    Raises:
        ImportError: matplotlib is missing (``pip install "mfs-decoding[bench]"``).
        ValueError: the result has no step with unfinished candidates to draw.
    """
    rows = step_deficits(result)
    if not rows:
        msg = f"nothing to plot: the decode ({result.method}, {len(result.steps)} steps) has no unfinished candidates"
        raise ValueError(msg)
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        msg = 'plotting needs matplotlib: pip install "mfs-decoding[bench]"'
        raise ImportError(msg) from exc

    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(max(6.0, 1.1 * len(result.steps) + 3), 6.4), sharex=True, gridspec_kw={"height_ratios": [3, 1.3]}
    )
    rng = np.random.default_rng(0)  # horizontal jitter only, so points of one step do not overlap
    labelled = set()

    def label(name: str) -> str | None:
        if name in labelled:
            return None
        labelled.add(name)
        return name

    for t, deficits, pruned, selected, c_prune in rows:
        d = np.asarray(deficits)
        x = t + rng.uniform(-0.22, 0.22, size=d.size)
        p = np.asarray(pruned)
        s = np.asarray(selected)
        kept = ~p & ~s
        top.scatter(x[p], d[p], marker="x", color="#c62828", s=36, label=label("pruned (D > c_prune)"), zorder=3)
        top.scatter(x[kept], d[kept], marker="o", facecolors="none", edgecolors="#1565c0", s=36,
                    label=label("survived, rolled out"), zorder=3)
        top.scatter(x[s], d[s], marker="o", color="#2e7d32", s=40, label=label("selected as a beam"), zorder=4)
        if c_prune is not None:
            top.hlines(c_prune, t - 0.35, t + 0.35, colors="black", linewidth=2, label=label("c_prune(t)"), zorder=2)
    top.set_ylabel("deficit D = s_best − s  (nats/token)")
    top.grid(alpha=0.3)
    top.legend(loc="upper right", fontsize=8, framealpha=0.9)
    top.set_title(title or f"MFS width pruning: answer {result.answer}, stopped by {result.stop_reason}", fontsize=11)

    steps = [s for s in result.steps if s.max_step_value is not None]
    if steps:
        ts = [s.step for s in steps]
        bottom.plot(ts, [s.max_step_value for s in steps], marker="o", color="#6a1b9a", label="max V")
        epsilon = next((s.stop_epsilon for s in steps if s.stop_epsilon is not None), None)
        if epsilon is not None:
            bottom.axhline(epsilon, color="black", linestyle="--", linewidth=1, label="ε_stop")
        for s in steps:
            if s.converged:
                bottom.annotate("converged", (s.step, s.max_step_value), textcoords="offset points", xytext=(6, 6),
                                fontsize=8, color="#2e7d32")
        bottom.legend(loc="upper right", fontsize=8)
    bottom.set_ylabel("max V (nats)")
    bottom.set_xlabel("step t")
    bottom.grid(alpha=0.3)
    bottom.set_xticks([s.step for s in result.steps])
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130)
    plt.close(fig)
    return out
