"""Measure the decoding statistics of a model on the demo held-out set, with 95% intervals.

``python -m experiments.testbed.evaluate [--model PATH] [--limit N] [--seed S]`` prints, for the
first N problems of ``mfs_core/demo/heldout.json`` (default model: the bundled ``mfs-demo``):

* **greedy accuracy** (argmax decoding), with a Wilson interval;
* **self-consistency**: majority vote over 16 samples at T = 0.7 (Wilson interval), and
  its gain over greedy (paired bootstrap interval over questions);
* **diverse first steps**: share of questions whose 16 sampled first steps (step 0, the
  first line after the assistant prefix) hold >= 2 distinct texts (Wilson);
* **AUROC of the foresight quality F** for arithmetically right vs wrong steps: a step is
  one line; it is *wrong* when its first equation ``a op b = c`` (op in + - * /) is
  false, *right* when true, and not scored without an equation. F of a step is the mean
  raw log-probability per token of one T = 0.7 rollout from the end of that step to the
  end of the answer (MFS_SPEC.md's foresight quality with one rollout). Steps are taken
  from the first ``--rollout-paths`` of the 16 sampled paths (bootstrap interval over
  questions);
* **mean step value** ``V_t = F_t - F_{t-1}`` (``F_{-1}``: a rollout from the bare prompt)
  over the steps of paths whose final answer is right vs wrong (bootstrap intervals);
* the AUROC of F on computation lines and on check lines apart (a check line whose own
  equation is wrong is a wrong step too);
* **own slips caught**: of the wrong computation lines (not checks) in all 16 sampled paths,
  the share whose next line flags them (``wrong``), upward and downward slips apart (Wilson).

``--start K --limit N --questions PART.json`` evaluates problems K..K+N-1 with the seeds a
run over the whole set gives them and saves the per-question statistics; ``--merge
PART1.json PART2.json ...`` summarizes such slices together (one process per core: the
slices of one run give its table; with ``--start`` a multiple of ``--chunk`` the batches are
the whole run's too).

Everything runs through :class:`~mfs_core.backends.transformers.TransformersBackend`'s
batched ``generate``; no MFS or other search decoder is run. The numbers are properties
of the model, measured before any decoder sees it.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["EQUATION", "QuestionStats", "add_run_arguments", "evaluate", "finish_run", "flagged", "load_backend",
           "load_questions", "main", "own_slips", "parse_run_arguments", "save_questions", "share_row",
           "step_is_right", "wilson_interval"]

EQUATION = re.compile(r"(\d+)\s*([+\-*/])\s*(\d+)\s*=\s*(\d+)")
"""The first ``a op b = c`` of a line."""


def _first_equation(line: str) -> tuple[int, float] | None:
    """``(written result, right result)`` of the first equation of ``line``; None without one."""
    match = EQUATION.search(line)
    if match is None:
        return None
    a, op, b, written = int(match.group(1)), match.group(2), int(match.group(3)), int(match.group(4))
    if op == "+":
        value: float = a + b
    elif op == "-":
        value = a - b
    elif op == "*":
        value = a * b
    else:
        value = a / b if b else math.nan
    return written, value


def step_is_right(line: str) -> bool | None:
    """True/False when the first equation of ``line`` is arithmetically right/wrong; None without one."""
    equation = _first_equation(line)
    return None if equation is None else equation[0] == equation[1]


def wilson_interval(successes: int, total: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a proportion (95% for the default ``z``).

    Raises:
        ValueError: ``total`` < 1 or ``successes`` outside 0..total.
    """
    if total < 1 or not 0 <= successes <= total:
        msg = f"need 0 <= successes <= total and total >= 1, got {successes}/{total}"
        raise ValueError(msg)
    p = successes / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class QuestionStats:
    """What one question contributes (steps: ``(right, F)``; paths: ``(path_right, [V_t])``;
    slips: ``(upward, caught)`` for every wrong computation line of the sampled paths;
    check_steps: for each of ``steps``, whether it is a check line)."""

    greedy_right: bool
    sc_right: bool
    diverse_first_steps: bool
    steps: list[tuple[bool, float]] = field(default_factory=list)
    paths: list[tuple[bool, list[float]]] = field(default_factory=list)
    slips: list[tuple[bool, bool]] = field(default_factory=list)
    check_steps: list[bool] = field(default_factory=list)


def flagged(continuation: str) -> bool:
    """True when the first line of ``continuation`` says the step before it was wrong
    (``wrong`` or ``not`` in it); :mod:`testbed.slip_probe` counts it after injected slips."""
    first = continuation.split("\n", 1)[0]
    return "wrong" in first or "not" in first


def own_slips(text: str) -> list[tuple[bool, bool]]:
    """``(upward, caught)`` for each line of ``text`` that is not a check and whose first
    equation is wrong: ``upward`` when the written result exceeds the right one, ``caught``
    when the next line says so (:func:`flagged`)."""
    lines = _lines(text)
    slips = []
    for t, line in enumerate(lines):
        equation = _first_equation(line)
        if line.startswith("Check") or equation is None or equation[0] == equation[1]:
            continue
        written, value = equation
        slips.append((written > value, t + 1 < len(lines) and flagged(lines[t + 1])))
    return slips


def _lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


def _mean_logprob(continuation: Any) -> float:
    return continuation.logprob_sum / max(1, len(continuation.token_ids))


def evaluate(backend: Any, prompts: list[str], targets: list[float], seed: int, samples: int = 16,
             temperature: float = 0.7, rollout_paths: int = 4, max_tokens: int = 384,
             chunk: int = 8, progress: bool = True, first_index: int = 0) -> list[QuestionStats]:
    """The per-question statistics of ``prompts`` (rendered prompts, assistant prefix included).

    Args:
        backend: a :class:`~mfs_core.backends.transformers.TransformersBackend`.
        prompts: model prompts.
        targets: gold numeric answers.
        seed: base seed; question i samples with seed ``seed + first_index + i`` and its
            rollouts with seeds derived from it.
        samples: sampled paths per question (16).
        temperature: sampling temperature of the paths and rollouts (0.7).
        rollout_paths: sampled paths per question whose steps get rollouts (F, V).
        max_tokens: token budget of every path and rollout.
        chunk: questions per batched ``generate`` call.
        progress: print one line per chunk.
        first_index: position of ``prompts[0]`` in the whole held-out set, so that a run over
            a slice (``--start``) samples exactly what a run over the whole set does.

    Returns:
        One :class:`QuestionStats` per prompt.
    """
    from mfs_core.answers import majority_vote
    from mfs_core.bench.scoring import extract_prediction, is_correct
    from mfs_core.types import GenerationRequest

    def right(text: str, target: float) -> bool:
        return is_correct("demo", extract_prediction("demo", text), target)

    results: list[QuestionStats] = []
    start = time.perf_counter()
    for lo in range(0, len(prompts), chunk):
        block = list(range(lo, min(lo + chunk, len(prompts))))
        requests = []
        for i in block:
            requests.append(GenerationRequest(prompts[i], n=1, max_tokens=max_tokens, greedy=True))
            requests.append(GenerationRequest(prompts[i], n=samples, max_tokens=max_tokens,
                                              temperature=temperature, seed=seed + first_index + i))
        outputs = backend.generate(requests)
        # Rollouts: one from the bare prompt and one after every non-final line of the first paths.
        rollout_requests: list[GenerationRequest] = []
        index: list[tuple[int, int, int]] = []  # (question, path, line) ; path -1 = bare prompt
        for q, i in enumerate(block):
            paths = outputs[2 * q + 1]
            rollout_requests.append(GenerationRequest(
                prompts[i], n=1, max_tokens=max_tokens, temperature=temperature,
                seed=seed + 1_000_003 * (first_index + i + 1)))
            index.append((i, -1, -1))
            for p, path in enumerate(paths[:rollout_paths]):
                lines = path.text.split("\n")
                for t in range(len(lines) - 1):
                    if not lines[t].strip():
                        continue
                    prefix = "\n".join(lines[: t + 1]) + "\n"
                    rollout_requests.append(GenerationRequest(
                        prompts[i] + prefix, n=1, max_tokens=max_tokens, temperature=temperature,
                        seed=seed + 1_000_003 * (first_index + i + 1) + 1009 * (p + 1) + t + 1))
                    index.append((i, p, t))
        rollouts = backend.generate(rollout_requests) if rollout_requests else []
        foresight: dict[tuple[int, int, int], float] = {
            key: _mean_logprob(out[0]) for key, out in zip(index, rollouts)
        }
        for q, i in enumerate(block):
            greedy = outputs[2 * q][0].text
            paths = outputs[2 * q + 1]
            texts = [c.text for c in paths]
            vote = majority_vote([extract_prediction("demo", t) for t in texts], [0.0] * len(texts))
            sc_right = vote.answer is not None and is_correct("demo", vote.answer, targets[i])
            first_steps = {(_lines(t) or [""])[0] for t in texts}
            stats = QuestionStats(greedy_right=right(greedy, targets[i]), sc_right=sc_right,
                                  diverse_first_steps=len(first_steps) >= 2)
            stats.slips = [slip for t in texts for slip in own_slips(t)]
            for p, path in enumerate(paths[:rollout_paths]):
                lines = path.text.split("\n")
                previous = foresight[(i, -1, -1)]
                values = []
                for t in range(len(lines) - 1):
                    if (i, p, t) not in foresight:
                        continue
                    f = foresight[(i, p, t)]
                    values.append(f - previous)
                    previous = f
                    label = step_is_right(lines[t])
                    if label is not None:
                        stats.steps.append((label, f))
                        stats.check_steps.append(lines[t].startswith("Check"))
                stats.paths.append((right(path.text, targets[i]), values))
            results.append(stats)
        if progress:
            done = len(results)
            greedy_acc = sum(r.greedy_right for r in results) / done
            sc_acc = sum(r.sc_right for r in results) / done
            print(f"  {done}/{len(prompts)} questions, {time.perf_counter() - start:.0f} s: "
                  f"greedy {greedy_acc:.3f}, SC {sc_acc:.3f}", flush=True)
    return results


def _auroc(steps: list[tuple[bool, float]]) -> float:
    from sklearn.metrics import roc_auc_score

    labels = [int(r) for r, _ in steps]
    if len(set(labels)) < 2:
        return math.nan
    return float(roc_auc_score(labels, [f for _, f in steps]))


def _steps_of_kind(results: list[QuestionStats], check: bool) -> list[tuple[bool, float]]:
    return [step for r in results for step, is_check in zip(r.steps, r.check_steps) if is_check == check]


def _path_values(results: list[QuestionStats], want: bool) -> list[float]:
    return [v for r in results for ok, values in r.paths if ok == want for v in values]


def summarize(results: list[QuestionStats], seed: int = 0, resamples: int = 1000) -> dict[str, Any]:
    """Point estimates and 95% intervals (Wilson for proportions; bootstrap over questions otherwise)."""
    import numpy as np

    n = len(results)
    greedy = sum(r.greedy_right for r in results)
    sc = sum(r.sc_right for r in results)
    diverse = sum(r.diverse_first_steps for r in results)
    steps = [s for r in results for s in r.steps]
    wrong_steps = sum(1 for ok, _ in steps if not ok)
    rng = np.random.default_rng(seed)
    boot: dict[str, list[float]] = {"gain": [], "auroc": [], "v_right": [], "v_wrong": [], "v_diff": [],
                                    "auroc_computations": [], "auroc_checks": []}
    for _ in range(resamples):
        sample = [results[j] for j in rng.integers(0, n, n)]
        boot["gain"].append((sum(r.sc_right for r in sample) - sum(r.greedy_right for r in sample)) / n)
        boot["auroc"].append(_auroc([s for r in sample for s in r.steps]))
        boot["auroc_computations"].append(_auroc(_steps_of_kind(sample, check=False)))
        boot["auroc_checks"].append(_auroc(_steps_of_kind(sample, check=True)))
        right_v, wrong_v = _path_values(sample, True), _path_values(sample, False)
        vr = float(np.mean(right_v)) if right_v else math.nan
        vw = float(np.mean(wrong_v)) if wrong_v else math.nan
        boot["v_right"].append(vr)
        boot["v_wrong"].append(vw)
        boot["v_diff"].append(vr - vw)

    def interval(key: str) -> tuple[float, float]:
        values = np.array([v for v in boot[key] if not math.isnan(v)])
        if values.size == 0:
            return (math.nan, math.nan)
        return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))

    def caught(want: set[bool]) -> tuple[float, float, float]:
        slips = [c for r in results for up, c in r.slips if up in want]
        if not slips:
            return (math.nan, math.nan, math.nan)
        return (sum(slips) / len(slips), *wilson_interval(sum(slips), len(slips)))

    right_v, wrong_v = _path_values(results, True), _path_values(results, False)
    v_right = float(np.mean(right_v)) if right_v else math.nan
    v_wrong = float(np.mean(wrong_v)) if wrong_v else math.nan
    return {
        "questions": n,
        "greedy": (greedy / n, *wilson_interval(greedy, n)),
        "sc16": (sc / n, *wilson_interval(sc, n)),
        "sc_gain": ((sc - greedy) / n, *interval("gain")),
        "diverse_first_steps": (diverse / n, *wilson_interval(diverse, n)),
        "auroc_f": (_auroc(steps), *interval("auroc")),
        "auroc_f_computations": (_auroc(_steps_of_kind(results, check=False)), *interval("auroc_computations")),
        "auroc_f_checks": (_auroc(_steps_of_kind(results, check=True)), *interval("auroc_checks")),
        "wrong_check_steps": sum(1 for r in results for (ok, _), c in zip(r.steps, r.check_steps) if c and not ok),
        "scored_steps": len(steps),
        "wrong_steps": wrong_steps,
        "v_right_paths": (v_right, *interval("v_right")),
        "v_wrong_paths": (v_wrong, *interval("v_wrong")),
        "v_difference": (v_right - v_wrong, *interval("v_diff")),
        "slips": sum(len(r.slips) for r in results),
        "upward_slips": sum(up for r in results for up, _ in r.slips),
        "slips_caught": caught({True, False}),
        "upward_slips_caught": caught({True}),
        "downward_slips_caught": caught({False}),
        "right_paths": sum(1 for r in results for ok, _ in r.paths if ok),
        "wrong_paths": sum(1 for r in results for ok, _ in r.paths if not ok),
    }


def format_table(summary: dict[str, Any], title: str) -> str:
    """A Markdown table of :func:`summarize`'s output."""
    rows = [
        ("greedy accuracy", "greedy", True),
        ("self-consistency, 16 samples at T = 0.7", "sc16", True),
        ("SC16 minus greedy (points)", "sc_gain", True),
        ("questions whose 16 first steps hold >= 2 texts", "diverse_first_steps", True),
        ("AUROC of F, right vs wrong steps", "auroc_f", False),
        ("  computation lines only", "auroc_f_computations", False),
        ("  check lines only", "auroc_f_checks", False),
        ("mean step value V, right paths", "v_right_paths", False),
        ("mean step value V, wrong paths", "v_wrong_paths", False),
        ("V right minus V wrong", "v_difference", False),
        ("own slips the next line flags as wrong", "slips_caught", True),
        ("  upward slips (result too large)", "upward_slips_caught", True),
        ("  downward slips", "downward_slips_caught", True),
    ]
    lines = [f"{title} ({summary['questions']} held-out questions)", "",
             "| statistic | value | 95% interval |", "| --- | --- | --- |"]
    for label, key, percent in rows:
        value, lo, hi = summary[key]
        if percent:
            lines.append(f"| {label} | {100 * value:.1f}% | {100 * lo:.1f} to {100 * hi:.1f} |")
        else:
            lines.append(f"| {label} | {value:.3f} | {lo:.3f} to {hi:.3f} |")
    lines.append("")
    lines.append(f"Scored steps: {summary['scored_steps']} ({summary['wrong_steps']} wrong, "
                 f"{summary['wrong_check_steps']} of them check lines); rollout paths: "
                 f"{summary['right_paths']} right, {summary['wrong_paths']} wrong; own slips (wrong computation "
                 f"lines of the sampled paths): {summary['slips']} ({summary['upward_slips']} upward).")
    return "\n".join(lines)


def add_run_arguments(parser: argparse.ArgumentParser, limit: int, limit_help: str, seed: int,
                      max_tokens: int = 200) -> None:
    """The options the demo evaluation scripts share: ``--model``, ``--limit``, ``--seed``,
    ``--chunk``, ``--threads``, ``--json`` and ``--max-tokens`` (token budget of every sample)."""
    parser.add_argument("--model", default="mfs-demo", help="model directory or 'mfs-demo' (the bundled model)")
    parser.add_argument("--limit", type=int, default=limit, help=limit_help)
    parser.add_argument("--seed", type=int, default=seed)
    parser.add_argument("--chunk", type=int, default=8, help="prompts per batched generate call")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--json", type=Path, default=None, help="also write the summary here")
    parser.add_argument("--max-tokens", type=int, default=max_tokens, help="most tokens of every sample")


def parse_run_arguments(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse ``argv`` with ``parser`` (built with :func:`add_run_arguments`); exits with a
    one-line usage error when ``--limit`` is below 1."""
    args = parser.parse_args(argv)
    if args.limit < 1:
        parser.error(f"--limit must be >= 1, got {args.limit}")
    return args


def share_row(label: str, right: int, total: int, width: int = 28) -> str:
    """One plain-text table row: ``label``, the share in percent, its 95% Wilson interval and
    ``right/total`` (``-`` for the share and interval when ``total`` is 0)."""
    if total == 0:
        return f"{label:<{width}} {'-':>7} {'-':>15} {'0/0':>9}"
    lo, hi = wilson_interval(right, total)
    return f"{label:<{width}} {100 * right / total:>6.1f}% {f'{100 * lo:.1f}-{100 * hi:.1f}':>15} {f'{right}/{total}':>9}"


def load_backend(model: str, threads: int) -> Any:
    """A CPU :class:`~mfs_core.backends.transformers.TransformersBackend` for ``model``
    (``threads`` torch threads; 0: torch's default), with transformers' warnings quieted."""
    import torch

    from mfs_core.backends._hf import quiet_transformers
    from mfs_core.backends.transformers import TransformersBackend
    from mfs_core.settings import MFSSettings

    if threads:
        torch.set_num_threads(threads)
    quiet_transformers()
    return TransformersBackend.from_settings(MFSSettings(model=model, device="cpu"))


def finish_run(summary: dict[str, Any], model: str, start: float, table: str, json_path: Path | None) -> None:
    """Record the model and wall time in ``summary``, print ``table`` and the time, write the JSON."""
    summary["model"] = model
    summary["seconds"] = round(time.perf_counter() - start, 1)
    print(table)
    print(f"wall time: {summary['seconds']} s")
    if json_path is not None:
        json_path.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")


def save_questions(results: list[QuestionStats], path: Path) -> None:
    """Write per-question statistics as JSON (a list of :class:`QuestionStats` fields), for
    :func:`load_questions` and ``--merge``."""
    from dataclasses import asdict

    path.write_text(json.dumps([asdict(r) for r in results]) + "\n", encoding="utf-8")


def load_questions(path: Path) -> list[QuestionStats]:
    """Read what :func:`save_questions` wrote.

    Raises:
        OSError: ``path`` cannot be read; ValueError: it is not such a JSON list.
    """
    rows = json.loads(path.read_text(encoding="utf-8"))
    try:
        return [QuestionStats(bool(r["greedy_right"]), bool(r["sc_right"]), bool(r["diverse_first_steps"]),
                              [(bool(ok), float(f)) for ok, f in r["steps"]],
                              [(bool(ok), [float(v) for v in values]) for ok, values in r["paths"]],
                              [(bool(up), bool(c)) for up, c in r.get("slips", [])],
                              [bool(c) for c in r.get("check_steps", [])]) for r in rows]
    except (KeyError, TypeError, ValueError) as error:
        msg = f"{path} does not hold per-question statistics (written by --questions): {error}"
        raise ValueError(msg) from None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: evaluate (or ``--merge`` saved slices), print the table, optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser, limit=500, limit_help="first N held-out problems", seed=0, max_tokens=384)
    parser.add_argument("--heldout", type=Path, default=None, help="held-out JSON (default: mfs_core/demo/heldout.json)")
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--rollout-paths", type=int, default=4)
    parser.add_argument("--start", type=int, default=0,
                        help="first problem of the slice (0-based); seeds are those of a run over the whole set")
    parser.add_argument("--questions", type=Path, default=None, help="also write the per-question statistics here")
    parser.add_argument("--merge", type=Path, nargs="+", default=None,
                        help="summarize per-question files of slices (--questions) instead of running a model")
    args = parse_run_arguments(parser, argv)
    if args.start < 0:
        parser.error(f"--start must be >= 0, got {args.start}")
    start = time.perf_counter()
    if args.merge:
        try:
            results = [r for path in args.merge for r in load_questions(path)]
        except (OSError, ValueError) as error:
            parser.error(str(error))
        summary = summarize(results, seed=args.seed)
        title = f"{' + '.join(str(p) for p in args.merge)}, seed {args.seed}"
        finish_run(summary, args.model, start, format_table(summary, title), args.json)
        return summary

    from mfs_core.bench.datasets import demo_heldout_path
    from mfs_core.prompts import render_question
    from mfs_core.settings import MFSSettings

    backend = load_backend(args.model, args.threads)
    settings = MFSSettings(model=args.model, device="cpu")
    records = json.loads((args.heldout or demo_heldout_path()).read_text(encoding="utf-8"))
    records = records[args.start : args.start + args.limit]
    if not records:
        parser.error(f"--start {args.start} is past the end of the held-out set")
    prompts = [render_question(r["input"], backend, settings) for r in records]
    targets = [float(r["target"]) for r in records]
    start = time.perf_counter()
    results = evaluate(backend, prompts, targets, seed=args.seed, samples=args.samples,
                       temperature=args.temperature, rollout_paths=args.rollout_paths,
                       max_tokens=args.max_tokens, chunk=args.chunk, first_index=args.start)
    if args.questions is not None:
        save_questions(results, args.questions)
    summary = summarize(results, seed=args.seed)
    finish_run(summary, args.model, start, format_table(summary, f"{args.model}, seed {args.seed}"), args.json)
    return summary


if __name__ == "__main__":
    main()
