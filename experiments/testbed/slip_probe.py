"""Does a demo model notice a slip? Continuations after an injected right or wrong step.

``python -m experiments.testbed.slip_probe [--model PATH] [--limit N] [--checks STYLE]`` takes N
generated problems (:func:`testbed.problems_v2.generate_problems`, seed ``--seed``,
the default 99 is not a training seed), writes each one's reference solution up to a
randomly drawn operation, and ends the prefix with that operation written once right and
once with a slip (:func:`~testbed.problems_v2._slip`, up or down). From each prefix it
samples ``--samples`` continuations at T = 0.7 and prints, with 95% intervals:

* **flagged after a right / wrong step**: share of continuations whose first line (the
  check) says the step is wrong (``wrong`` or ``not`` in it): how often the model's check
  catches a slip, and how often it cries wolf;
* **flagged, by operation**: the same after a wrong step, for ``add``, ``sub`` and ``mul``;
* **AUROC of F**: F of a continuation is its mean raw log-probability per token (the
  foresight quality of MFS_SPEC.md); the AUROC says how well F ranks the right prefixes
  above the wrong ones (1.0: always, 0.5: no better than chance).

The prefix's check lines are written in ``--checks`` style
(:func:`~testbed.problems_v2.check_line`), the form the model was trained on. The
slips are injected, not the model's own: :mod:`testbed.evaluate` measures F on the
model's own steps. Runs through the transformers backend's batched ``generate``; no search
decoder is run.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from experiments.testbed.evaluate import flagged

__all__ = ["flagged", "format_probe", "main", "probe", "slip_prefixes"]


def slip_prefixes(problems: list[Any], rng: random.Random, checks: str) -> list[tuple[str, bool, str]]:
    """``(solution prefix, step is right, operation kind)``, a right and a wrong one per problem.

    Each prefix holds the reference lines (equation, check in ``checks`` style) of the
    operations before a drawn one, then that operation's equation, right or with a slip,
    and a newline.
    """
    from experiments.testbed.problems_v2 import _slip, check_line, equation

    prefixes = []
    for problem in problems:
        ops = problem.operations
        at = rng.randrange(len(ops))
        lines = [text for op in ops[:at] for text in (equation(op), check_line(op, style=checks))]
        wrong = _slip(ops[at], rng)
        prefixes.append(("\n".join([*lines, equation(ops[at])]) + "\n", True, ops[at].kind))
        prefixes.append(("\n".join([*lines, equation(ops[at], result=wrong)]) + "\n", False, ops[at].kind))
    return prefixes


def probe(backend: Any, settings: Any, problems: list[Any], seed: int = 0, checks: str = "v2",
          samples: int = 4, temperature: float = 0.7, max_tokens: int = 200) -> dict[str, Any]:
    """Sample continuations after injected right and wrong steps and summarise them.

    Args:
        backend: a :class:`~mfs_core.backends.transformers.TransformersBackend`.
        settings: the :class:`~mfs_core.settings.MFSSettings` the prompts are rendered with.
        problems: :class:`~testbed.problems_v2.WordProblem` s (at least one).
        seed: draws the operation and the slip (``random.Random(seed)``) and seeds the sampling.
        checks: the check-line style of the prefixes.
        samples: continuations per prefix.
        temperature: sampling temperature (log-probs stay raw).
        max_tokens: most tokens per continuation.

    Returns:
        ``{"flagged_right": (k, n), "flagged_wrong": (k, n), "flagged_wrong_by_kind": {kind:
        (k, n)}, "auroc_f": float, "mean_f_right": float, "mean_f_wrong": float}``; F in
        nats per token.

    Raises:
        ValueError: no problems.
    """
    from sklearn.metrics import roc_auc_score

    from mfs_core.prompts import render_question
    from mfs_core.types import GenerationRequest

    if not problems:
        msg = "probe needs at least one problem, got 0"
        raise ValueError(msg)
    prefixes = slip_prefixes(problems, random.Random(seed), checks)
    requests = [GenerationRequest(render_question(problems[i // 2].question, backend, settings) + prefix, n=samples,
                                  max_tokens=max_tokens, temperature=temperature, seed=seed + i)
                for i, (prefix, _, _) in enumerate(prefixes)]
    outputs = backend.generate(requests)
    counts = {True: [0, 0], False: [0, 0]}
    by_kind: dict[str, list[int]] = {}
    labels, qualities = [], []
    for (_, right, kind), continuations in zip(prefixes, outputs):
        for continuation in continuations:
            flag = flagged(continuation.text)
            counts[right][0] += flag
            counts[right][1] += 1
            if not right:
                tally = by_kind.setdefault(kind, [0, 0])
                tally[0] += flag
                tally[1] += 1
            labels.append(int(right))
            qualities.append(continuation.logprob_sum / max(1, len(continuation.token_ids)))
    right_f = [f for f, label in zip(qualities, labels) if label]
    wrong_f = [f for f, label in zip(qualities, labels) if not label]
    return {
        "flagged_right": tuple(counts[True]),
        "flagged_wrong": tuple(counts[False]),
        "flagged_wrong_by_kind": {kind: tuple(tally) for kind, tally in sorted(by_kind.items())},
        "auroc_f": float(roc_auc_score(labels, qualities)),
        "mean_f_right": sum(right_f) / len(right_f),
        "mean_f_wrong": sum(wrong_f) / len(wrong_f),
    }


def format_probe(summary: dict[str, Any], title: str) -> str:
    """A plain-text table of :func:`probe`'s summary, Wilson intervals on the shares."""
    from experiments.testbed.evaluate import share_row

    rows = [title, f"{'measure':<28} {'share':>7} {'95% CI':>15} {'count':>9}",
            share_row("flagged after a right step", *summary["flagged_right"]),
            share_row("flagged after a wrong step", *summary["flagged_wrong"])]
    rows += [share_row(f"  flagged after a wrong {kind}", *tally) for kind, tally in summary["flagged_wrong_by_kind"].items()]
    rows.append(f"AUROC of F, right vs wrong prefixes: {summary['auroc_f']:.3f} (mean F {summary['mean_f_right']:.4f} "
                f"vs {summary['mean_f_wrong']:.4f} nats/token)")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: probe, print the table, optionally write JSON."""
    from experiments.testbed.evaluate import add_run_arguments, finish_run, load_backend, parse_run_arguments
    from experiments.testbed.problems_v2 import CHECK_STYLES, generate_problems
    from mfs_core.settings import MFSSettings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser, limit=60, limit_help="problems (each gives a right and a wrong prefix)", seed=99)
    parser.add_argument("--checks", choices=CHECK_STYLES, default="v2", help="check-line style of the prefixes")
    parser.add_argument("--samples", type=int, default=4, help="continuations per prefix")
    args = parse_run_arguments(parser, argv)
    backend = load_backend(args.model, args.threads)
    settings = MFSSettings(model=args.model, device="cpu")
    start = time.perf_counter()
    summary = probe(backend, settings, generate_problems(args.limit, seed=args.seed), seed=args.seed,
                    checks=args.checks, samples=args.samples, max_tokens=args.max_tokens)
    finish_run(summary, args.model, start,
               format_probe(summary, f"{args.model}, {args.limit} problems (seed {args.seed}), {args.checks} checks"),
               args.json)
    return summary


if __name__ == "__main__":
    main()
