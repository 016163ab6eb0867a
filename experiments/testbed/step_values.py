"""Why MFS stops deliberating when it does: its step values, step by step, on tuning questions.

``python -m experiments.testbed.step_values --dataset gsm8k --limit 16 --json bench-results/qwen/step-values.json``
decodes the first ``--limit`` questions of the tuning split (GSM8K test 0-199, demo held-out 0-199:
the script refuses more, so no held-out question is decoded) with ``mfs`` at the bench's settings
(``M = N = 4``, seed 0, the rest from ``MFSSettings``' environment: model, backend, scheduling,
``max_answer_tokens``), keeps each search's trace in condensed form in ``<json>.traces.jsonl``
(resumed on a rerun) and prints, per deliberation step t:

* ``reached`` searches that sampled a step t, ``converged`` those whose convergence test fired at t
  (``max V <= ε_stop``, MFS_SPEC.md step 7, paper eq. 12);
* ``scored``: candidates with a step value (survivors of the width pruning), mean per search;
* ``max V`` (mean over searches, nats) and the share of scored candidates with ``V > ε_stop``;
* ``advantage``: the selected beams' ``F_t`` minus the mean ``F_t`` of their step's scored
  candidates (nats): how far above its cohort the selection put a beam;
* ``children V``: the mean step value ``F_{t+1} - F_t(parent)`` of those beams' scored children at
  t + 1 (nats; eq. 8 with the paper's baseline).

and one number for the whole run, F's **persistence**: ``1 + β``, with β the least-squares slope of a
child's ``F_{t+1} - F_t(parent)`` on its parent's advantage, pooled over every step and search, with a
95% bootstrap interval over questions. If F were pure noise around a level shared by the cohort,
children would regress fully to the cohort's level (β = -1, persistence 0) and a selected beam's
children would mostly score below it, so ``max V <= ε_stop`` fires early for no reason but
selection on noise (the winner's curse); if F were a lasting property of the path with no noise,
children would keep the parent's advantage (β = 0, persistence 1). Under that simple model
persistence is F's reliability, the share of its variance across a step's candidates that the
path's continuation keeps. With ``reuse_rollouts`` a child's estimate shares its parent's rollout,
which inflates persistence: the bench's default ``mfs`` has it off.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["TUNING_QUESTIONS", "condense", "main", "persistence", "step_table"]

TUNING_QUESTIONS = 200
"""GSM8K test 0-199 and demo held-out 0-199 are the tuning questions."""


MIN_ADVANTAGE_VARIANCE = 1e-8
"""Mean squared advantage (nats²) below which the regression has no slope (advantages of float noise only)."""


def condense(result: Any) -> list[dict[str, Any]]:
    """The fields of an MFS trace this script keeps, one dict per step (it reads all but
    ``selected`` and ``finished``, kept for later analyses of the same traces).

    Args:
        result: a :class:`~mfs_core.types.DecodeResult` of ``mfs`` (its ``steps``).

    Returns:
        Per step ``{"converged", "epsilon", "beam_sources", "candidates": [{"beam", "F", "V",
        "selected", "finished"}]}``; ``F`` and ``V`` in nats, None for a pruned candidate.
    """
    return [{"converged": s.converged, "epsilon": s.stop_epsilon, "beam_sources": list(s.beam_sources),
             "candidates": [{"beam": c.beam_index, "F": c.foresight_quality, "V": c.step_value,
                             "selected": c.selected, "finished": c.finished} for c in s.candidates]}
            for s in result.steps]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _cohort_mean(step: dict[str, Any]) -> float | None:
    return _mean([c["F"] for c in step["candidates"] if c["F"] is not None])


def parent_child_pairs(steps: Sequence[dict[str, Any]]) -> list[tuple[int, float, float]]:
    """``(t, parent advantage, child F - parent F)`` for every scored child of a beam chosen at step t.

    A step t+1 candidate's parent is ``steps[t]["candidates"][steps[t]["beam_sources"][beam]]``;
    the advantage is the parent's F minus the mean F of step t's scored candidates (nats).

    Raises:
        IndexError: a candidate names a beam that ``beam_sources`` does not have.
    """
    pairs = []
    for t in range(len(steps) - 1):
        cohort = _cohort_mean(steps[t])
        sources = steps[t]["beam_sources"]
        for child in steps[t + 1]["candidates"]:
            parent = steps[t]["candidates"][sources[child["beam"]]]
            if child["F"] is None or parent["F"] is None or cohort is None:
                continue
            pairs.append((t, parent["F"] - cohort, child["F"] - parent["F"]))
    return pairs


def step_table(searches: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per step t, the statistics of the module docstring over ``searches`` (condensed traces).

    Returns:
        One dict per step index: ``t``, ``reached``, ``converged``, ``scored`` (mean per search
        reaching t), ``max_value`` (mean over searches with a scored candidate, nats),
        ``positive_share`` (0-1, of all scored candidates), ``advantage`` (mean over the selected
        unfinished beams, nats), ``children_value`` (mean over their scored children at t + 1,
        nats); a mean over nothing is None.
    """
    rows = []
    depth = max((len(s) for s in searches), default=0)
    pairs = [pair for s in searches for pair in parent_child_pairs(s)]
    for t in range(depth):
        steps = [s[t] for s in searches if len(s) > t]
        values = [[c["V"] for c in step["candidates"] if c["V"] is not None] for step in steps]
        pooled = [v for vs, step in zip(values, steps) for v in vs]
        positive = [v > (step["epsilon"] or 0.0) for vs, step in zip(values, steps) for v in vs]
        advantages = []
        for step in steps:
            cohort = _cohort_mean(step)
            advantages += [step["candidates"][i]["F"] - cohort for i in set(step["beam_sources"])
                           if cohort is not None and step["candidates"][i]["F"] is not None]
        children = [delta for (pt, _, delta) in pairs if pt == t]
        rows.append({
            "t": t, "reached": len(steps), "converged": sum(step["converged"] for step in steps),
            "scored": len(pooled) / len(steps), "max_value": _mean([max(vs) for vs in values if vs]),
            "positive_share": _mean([float(p) for p in positive]), "advantage": _mean(advantages),
            "children_value": _mean(children),
        })
    return rows


def _slope(pairs: Sequence[tuple[int, float, float]]) -> float | None:
    xs, ys = [p[1] for p in pairs], [p[2] for p in pairs]
    mx, my = _mean(xs), _mean(ys)
    if mx is None or my is None:
        return None
    sxx = sum((x - mx) ** 2 for x in xs)
    # Advantages that do not vary (every beam a copy of one path: F shared) leave no slope to fit.
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > MIN_ADVANTAGE_VARIANCE * len(xs) else None


def persistence(searches: Sequence[Sequence[dict[str, Any]]], resamples: int = 2000,
                seed: int = 0) -> dict[str, Any]:
    """F's persistence ``1 + β`` (module docstring) with a 95% bootstrap interval over searches.

    Args:
        searches: condensed traces, one per question.
        resamples: bootstrap resamples of the questions (with replacement).
        seed: the resampling's seed.

    Returns:
        ``{"pairs", "persistence", "low", "high"}``: the pooled parent-child pairs, ``1 + β`` and
        its 2.5 and 97.5 percentiles (None where the advantages do not vary).
    """
    import numpy as np

    per_search = [parent_child_pairs(s) for s in searches]
    pooled = [p for pairs in per_search for p in pairs]
    slope = _slope(pooled)
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(resamples if per_search else 0):
        picks = rng.integers(0, len(per_search), len(per_search))
        b = _slope([p for i in picks for p in per_search[i]])
        if b is not None:
            boot.append(1.0 + b)
    low, high = (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))) if boot else (None, None)
    return {"pairs": len(pooled), "persistence": None if slope is None else 1.0 + slope, "low": low, "high": high}


def format_table(rows: Iterable[dict[str, Any]]) -> str:
    """``step_table``'s rows as a markdown table (nats to 3 decimals)."""
    def cell(value: float | None, digits: int = 3) -> str:
        return "" if value is None else f"{value:.{digits}f}"

    lines = ["| t | reached | converged | scored | max V | V > ε | advantage | children V |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['t']} | {r['reached']} | {r['converged']} | {r['scored']:.2f} | {cell(r['max_value'])} | "
                     f"{cell(r['positive_share'], 2)} | {cell(r['advantage'])} | {cell(r['children_value'])} |")
    return "\n".join(lines)


def _done(path: Path) -> dict[int, dict[str, Any]]:
    rows = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a torn last line
                continue
            rows[row["question"]] = row
    return rows


def decode(args: argparse.Namespace, traces_path: Path) -> None:
    """Decode the questions not in ``traces_path`` yet with ``mfs``, ``--chunk`` at a time, appending."""
    from mfs_core.bench.datasets import load_dataset
    from mfs_core.bench.prompts import render_example
    from mfs_core.bench.runner import score_result
    from mfs_core.bench.scoring import answer_key
    from mfs_core.engine import MFSEngine
    from mfs_core.settings import MFSSettings

    overrides = {"backend": args.backend} if args.backend else {}
    settings = MFSSettings(step_beam_size=args.step_beam_size, num_rollouts=args.num_rollouts, seed=args.seed,
                           **overrides)
    data = load_dataset(args.dataset, data_dir=args.data_dir, limit=args.limit)
    done = _done(traces_path)
    todo = [e for e in data.examples if e.index not in done]
    if not todo:
        return
    start = time.perf_counter()
    with MFSEngine.from_settings(settings) as engine, traces_path.open("a", encoding="utf-8") as out:
        for lo in range(0, len(todo), args.chunk):
            block = todo[lo: lo + args.chunk]
            results = engine.decode_prompts([render_example(e, engine.backend, settings) for e in block],
                                            method="mfs", answer_key=[answer_key(data.kind, e.question) for e in block])
            for example, result in zip(block, results):
                _, correct = score_result(data.kind, result, example.target, settings, "mfs", example.question)
                out.write(json.dumps({"question": example.index, "correct": correct,
                                      "stop_reason": result.stop_reason, "output_tokens": result.output_tokens,
                                      "steps": condense(result)}) + "\n")
            out.flush()
            print(f"{lo + len(block)}/{len(todo)} questions, {time.perf_counter() - start:.0f} s", flush=True)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: decode (resumable), then print and save the per-step table and F's persistence."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="gsm8k", help="gsm8k or demo (their tuning questions)")
    parser.add_argument("--limit", type=int, default=16, help=f"first N questions (<= {TUNING_QUESTIONS})")
    parser.add_argument("--backend", default=None, help="MFSSettings.backend (default: the settings' own)")
    parser.add_argument("--step-beam-size", type=int, default=4)
    parser.add_argument("--num-rollouts", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk", type=int, default=16, help="questions decoded together")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=Path("bench-results/step-values.json"))
    parser.add_argument("--no-decode", action="store_true", help="summarise the saved traces only")
    args = parser.parse_args(argv)
    if args.dataset not in ("gsm8k", "demo"):
        parser.error(f"--dataset must be gsm8k or demo (the splits with tuning questions), got {args.dataset!r}")
    if not 1 <= args.limit <= TUNING_QUESTIONS:
        parser.error(f"--limit must be in 1..{TUNING_QUESTIONS} (the tuning questions), got {args.limit}")
    traces_path = args.json.with_suffix(".traces.jsonl")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    if not args.no_decode:
        decode(args, traces_path)
    rows = [r for q, r in sorted(_done(traces_path).items()) if q < args.limit]
    searches = [r["steps"] for r in rows]
    table = step_table(searches)
    summary = {"dataset": args.dataset, "questions": len(rows), "correct": sum(r["correct"] for r in rows),
               "stop_reasons": {k: sum(r["stop_reason"] == k for r in rows) for k in sorted({r["stop_reason"] for r in rows})},
               "mean_steps": _mean([len(s) for s in searches]), "steps": table,
               "persistence": persistence(searches, resamples=args.resamples, seed=args.seed)}
    p = summary["persistence"]
    print(format_table(table))
    print(f"{summary['questions']} questions, {summary['correct']} right, mean steps {summary['mean_steps']}, "
          f"stops {summary['stop_reasons']}")
    if p["persistence"] is not None:
        interval = f" ({p['low']:.2f}-{p['high']:.2f})" if p["low"] is not None else ""
        print(f"F's persistence from parent to child: {p['persistence']:.2f}{interval} over {p['pairs']} pairs")
    args.json.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


if __name__ == "__main__":
    main()
