"""Tune the added search rules on tuning questions, against self-consistency's curve.

Each variant is MFS with some of the new rules switched on (``MFSSettings`` fields:
``convergence_min_paths``, ``vote_rollouts``, ``answer_stop_confidence``), run side by side with
greedy CoT and self-consistency at ``--sc-k`` samples (which gives SC at every smaller k, see
:mod:`mfs_core.bench.curve`) on one engine, one model and the same questions. The rule kept is
the variant with the largest *margin over SC*: its accuracy minus SC's accuracy interpolated
(linearly in log tokens) at its output tokens per question; ties go to fewer tokens. That
criterion is fixed here, before any run.

Run from the repository root (the demo held-out set's tuning questions are 0-199)::

    python experiments/benchmarks/mfs_rules.py --limit 200 --out bench-results/rules-tuning

Second tuning: the multiplicity-weighted rollout vote (pre-registered 2026-11-26, before its
first run; :func:`tuning_verdict` implements it)
-------------------------------------------------------------------------------------------

The first criterion above picked a rule that was 3 points less accurate than the default on the
tuning questions and lost 22 questions net on the fresh held-out set (docs/benchmarks.md). For
the weighted rollout vote (``vote_rollouts="weighted"``: each shared foresight rollout's answer
counts with the number of the step's sampled candidates whose path it stands for) the rule is
fixed here, before any run:

* Candidates: the default ``mfs`` (the vote over the kept beams, one foresight estimate per distinct path),
  ``mfs-weighted-vote`` (``vote_rollouts="weighted"``) and ``mfs-weighted-answer-stop``
  (``vote_rollouts="weighted"``, ``answer_stop_confidence=0.95``; the stop's Beta posterior reads
  the weighted counts scaled to Kish's effective sample size).
* One run, the setup of the first tuning run's ``config.json``: demo held-out questions 0-199,
  vLLM's CPU backend, M = N = 4, seed 0, the other settings at their defaults, SC at k <= 32 from
  one run at k = 32 (SC at k is scored from the first k samples)::

      mfs bench --dataset demo --backend vllm --limit 200 --step-beam-size 4 --num-rollouts 4 \\
          --methods mfs,mfs-weighted-vote,mfs-weighted-answer-stop,sc --sc-k 32 --concurrency 16 \\
          --out /tmp/work/runs/tuning2

* SC's curve: its accuracy at k = 1, 2, 4, 8, 16, 32 against its output tokens per question,
  linear in log tokens between those points (:func:`sc_interpolated`). A method's *margin* is its
  accuracy minus SC's curve at its own output tokens per question.
* A variant replaces the default only if (a) it answers at least as many tuning questions right
  as the default AND (b) its margin is strictly larger than the default's. If both variants
  pass, the one with the larger margin (equal margins: fewer tokens per question). Otherwise the
  default stays. Intervals, paired counts and McNemar p are reported; they do not enter the rule.
* The verdict is a recommendation to the lead engineer, who decides on the default; the next
  measurement is on a held-out set no decoder has seen (``demo-fresh2``).

Third tuning: the rollout temperature (written 2026-11-26 10:00 UTC, after the first batch
below and before the second)
-------------------------------------------------------------------------------------------

The test bed's statistics say where the accuracy is lost: a sample at T = 0.7 is right 49.6% of
the time and greedy 66.5% (slips in the arithmetic), and F separates right from wrong samples
(within-question AUROC 0.83). MFS samples its *candidates* to explore, but its foresight rollouts
and final completions are only there to estimate a path's value and to answer, and at T = 0.7
they re-introduce the slips the search just pruned. ``rollout_temperature`` (an existing setting,
None = ``temperature``) cools them. Exploratory runs on the tuning questions 0-199, same setup as
above, each ``--method 'label:mfs:field=value'``:

* first batch (seen before this was written): ``rollout_temperature`` 0.3 and 0.5, and each
  with ``aggregation="best_quality"``; SC at T = 0.5 and 0.3 (k <= 16, runs of their own).
* second batch: ``rollout_temperature`` 0.4 and 0.6; 0.5 with ``convergence_min_paths=2`` (and
  with the answer stop); ``temperature=0.5`` for candidates and rollouts alike.

The rule for the default, fixed before the second batch's results: among the
``rollout_temperature`` values measured with every other setting at its default, keep the one
with the most correct tuning answers at no more than 1.05x the default's output tokens per
question (equal counts: the larger temperature, the smaller change); it replaces the default
only with at least 3 more correct answers than the default's 145 and with SC's curves (T = 0.7,
0.5, 0.3) no higher at its tokens. Deeper searches (``convergence_min_paths=2``) are points of
MFS's own curve, not candidates for the default. The held-out measurement is then one run on
``demo-fresh2``, which no decoder has seen.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from mfs_core.bench.curve import curve_table, format_curve, plot_curve
from mfs_core.bench.datasets import load_dataset
from mfs_core.bench.drain import drain_on_sigterm
from mfs_core.bench.report import format_table, summarize
from mfs_core.bench.runner import BenchMethod, parse_method, run_bench
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings

import experiments.variants  # noqa: F401  (registers the research variants by name)

NEW_RULES_OFF = {"convergence_min_paths": 1, "vote_rollouts": False, "answer_stop_confidence": None}
VARIANTS: dict[str, dict[str, object]] = {
    "mfs-shared": {},  # the default: one foresight estimate per distinct path, no new rule
    "mfs+min-paths": {"convergence_min_paths": 2},
    "mfs+vote-rollouts": {"vote_rollouts": True},
    "mfs+min-paths+vote-rollouts": {"convergence_min_paths": 2, "vote_rollouts": True},
    "mfs+vote-rollouts+answer-stop": {"vote_rollouts": True, "answer_stop_confidence": 0.95},
    "mfs+all": {"convergence_min_paths": 2, "vote_rollouts": True, "answer_stop_confidence": 0.95},
}
"""The variants measured, each as the fields it changes from :data:`NEW_RULES_OFF`."""


def sc_interpolated(tokens: float, sc_points: list[tuple[float, float]]) -> float:
    """SC's accuracy at ``tokens`` output tokens per question, linear in log tokens between the
    measured ``(tokens, accuracy)`` points (clamped at the ends)."""
    points = sorted(sc_points)
    if tokens <= points[0][0]:
        return points[0][1]
    for (t0, a0), (t1, a1) in zip(points, points[1:]):
        if tokens <= t1:
            w = (math.log(tokens) - math.log(t0)) / (math.log(t1) - math.log(t0))
            return a0 + w * (a1 - a0)
    return points[-1][1]


def tuning_verdict(default: tuple[int, float], variants: dict[str, tuple[int, float]], questions: int,
                   sc_points: list[tuple[float, float]]) -> tuple[str, dict[str, float]]:
    """The second tuning's pre-registered rule (module docstring): which method the default should be.

    A variant passes iff it has at least the default's correct answers and a strictly larger
    margin over SC's curve (accuracy minus :func:`sc_interpolated` at its tokens); of those that
    pass, the largest margin wins, equal margins by fewer tokens; none passing keeps ``"mfs"``.

    Example: default ``(145, 1856.0)``, variant ``"v": (146, 1300.0)`` on 200 questions with
    SC ``[(908, 0.63), (1815, 0.73)]``: SC at 1,300 tokens is 0.6818, the variant's margin
    0.73 - 0.6818 = +0.048 beats the default's 0.725 - 0.73 = -0.005, so ``"v"`` is returned.

    Args:
        default: ``(correct, output tokens per question)`` of the default ``mfs``.
        variants: the same per variant name, on the same questions.
        questions: tuning questions scored (>= 1).
        sc_points: SC's ``(output tokens per question, accuracy 0-1)`` points of the same run.

    Returns:
        ``(name, margins)``: the name kept (``"mfs"`` or a variant) and every method's margin (0-1).

    Raises:
        ValueError: ``questions`` < 1, or no SC point.
    """
    if questions < 1 or not sc_points:
        msg = f"need questions >= 1 and SC points, got {questions} questions and {len(sc_points)} SC points"
        raise ValueError(msg)
    margins = {name: correct / questions - sc_interpolated(tokens, sc_points)
               for name, (correct, tokens) in {"mfs": default, **variants}.items()}
    passing = [(margins[name], -tokens, name) for name, (correct, tokens) in variants.items()
               if correct >= default[0] and margins[name] > margins["mfs"]]
    return (max(passing)[2] if passing else "mfs"), margins


def main(argv: list[str] | None = None) -> None:
    """Run the variants, print the results table, the curve and each variant's margin over SC."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="demo")
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--backend", default="vllm")
    parser.add_argument("--sc-k", type=int, default=32)
    parser.add_argument("--step-beam-size", type=int, default=4)
    parser.add_argument("--num-rollouts", type=int, default=4)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated names of VARIANTS")
    parser.add_argument("--extra-methods", default="cot,sc", help="registered decoders run beside (cot, sc, mfs-paper)")
    parser.add_argument("--method", action="append", default=[], type=parse_method,
                        help="an extra method, 'label:decoder:field=value;field=value' (repeatable)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--split", default="tuning", help="the plot title's name of the questions (tuning, held out)")
    args = parser.parse_args(argv)

    settings = MFSSettings(backend=args.backend, step_beam_size=args.step_beam_size, num_rollouts=args.num_rollouts,
                           seed=0)
    data = load_dataset(args.dataset, offset=args.offset, limit=args.limit)
    methods = [BenchMethod(label=m, decoder=m) for m in args.extra_methods.split(",") if m]
    methods += args.method
    for name in filter(None, args.variants.split(",")):
        overrides = {**NEW_RULES_OFF, "share_foresight": True, "reuse_rollouts": False, **VARIANTS[name]}
        methods.append(BenchMethod(label=name, decoder="mfs", overrides=tuple(sorted(overrides.items()))))
    engine = MFSEngine.from_settings(settings)
    try:
        from tqdm.auto import tqdm

        with drain_on_sigterm() as stop:  # kill PID: the questions in flight finish, then it stops (resumable)
            records = run_bench(engine, data, methods, args.out, settings=settings, sc_k=args.sc_k,
                                concurrency=args.concurrency, progress=lambda **kw: tqdm(unit="q", **kw), stop=stop)
    finally:
        engine.close()
    labels = [m.label for m in methods]
    print(format_table(summarize(records, labels)))
    points = curve_table(records, data.kind, labels)
    table = format_curve(points)
    print(table)
    (args.out / "curve.md").write_text(table + "\n", encoding="utf-8")
    plot_curve(points, args.out / "accuracy_vs_tokens.png", title=f"{data.name} {args.offset}-"
               f"{args.offset + len(data.examples) - 1}, {args.split}")
    sc_points = [(p.summary.mean_output_tokens, p.summary.accuracy) for p in points if p.sc_curve == "sc"]
    if not sc_points:  # this invocation ran no plain SC (e.g. only sc-rollout-temperature): no margins
        return
    print("\nmargin over SC at equal tokens (accuracy minus SC interpolated in log tokens):")
    margins = []
    for p in points:
        if p.is_sc:
            continue
        r = p.summary
        margin = r.accuracy - sc_interpolated(r.mean_output_tokens, sc_points)
        steps = [rec["steps"] for rec in records if rec["method"] == r.method and rec.get("steps") is not None]
        reasons: dict[str, int] = {}
        for rec in records:
            if rec["method"] == r.method and rec.get("stop_reason"):
                reasons[rec["stop_reason"]] = reasons.get(rec["stop_reason"], 0) + 1
        mean_steps = sum(steps) / len(steps) if steps else float("nan")
        margins.append((margin, -r.mean_output_tokens, r.method))
        print(f"  {r.method}: {100 * r.accuracy:.1f}% at {r.mean_output_tokens:,.0f} tok/q, margin "
              f"{100 * margin:+.1f} points; mean steps {mean_steps:.2f}; stops {reasons}")
    best = max((m for m in margins if m[2] in VARIANTS), default=None)
    if best is not None:
        print(f"kept by the criterion: {best[2]} (margin {100 * best[0]:+.1f} points)")


if __name__ == "__main__":
    main()
