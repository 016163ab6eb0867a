"""Fresh held-out sets for the v3 demo model, each made once and shipped beside
``heldout.json``: ``mfs_core/demo/heldout_fresh.json`` (seed 20261126, dataset ``demo-fresh``;
measured once, after the first tuning fixed the defaults) and ``mfs_core/demo/heldout_fresh2.json``
(seed 20261127, dataset ``demo-fresh2``; for the measurement after the second tuning, no decoder
run on it before).

The v3 generator and options of the shipped held-out set (:data:`testbed.problems_v2.SHIPPED_PROBLEMS`:
3-6 operations, totals up to 199, amounts up to 60) with a new seed, excluding every question of
the v1, v2 and v3 held-out sets (regenerated from their seed, and read from ``heldout.json``) and
of every other shipped held-out file (``heldout_fresh*.json`` but the one written).

Overlap with the training data: the training runs drew their problems on the fly from the same
generator (``testbed.train_v2.make_batch``, never stored), excluding only those held-out sets, so
the fresh questions cannot be checked against a training file. What can be measured is how often
the generator repeats a question: ``--collision-sample`` draws that many more problems with
another seed and counts repeated questions among them, which bounds the chance that a fresh
question was also drawn in training (``training problems x repeats / pairs``, printed).

Run from the repository root::

    python -m experiments.testbed.fresh_heldout --out mfs_core/demo/heldout_fresh.json
    python -m experiments.testbed.fresh_heldout --seed 20261127 --out mfs_core/demo/heldout_fresh2.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from experiments.testbed import problems as problems_v1
from experiments.testbed.problems_v2 import SHIPPED_PROBLEMS, WordProblem, generate_problems, write_heldout
from experiments.testbed.train_v2 import HELDOUT_SEED, HELDOUT_SIZE

FRESH_SEED = 20261126
FRESH2_SEED = 20261127
FRESH_SIZE = 500
SHIPPED_HELDOUT = Path(__file__).resolve().parents[2] / "mfs_core" / "demo" / "heldout.json"


def earlier_heldout_questions(written: Path | None = None) -> frozenset[str]:
    """Every question of the v1, v2 and v3 held-out sets (the shipped file and their generators)
    and of the shipped fresh sets (``heldout_fresh*.json`` beside it), but ``written``'s."""
    shipped = {row["input"] for row in json.loads(SHIPPED_HELDOUT.read_text(encoding="utf-8"))}
    for path in sorted(SHIPPED_HELDOUT.parent.glob("heldout_fresh*.json")):
        if written is None or path.resolve() != written.resolve():
            shipped |= {row["input"] for row in json.loads(path.read_text(encoding="utf-8"))}
    v3 = {p.question for p in generate_problems(HELDOUT_SIZE, seed=HELDOUT_SEED, **SHIPPED_PROBLEMS)}
    v2 = {p.question for p in generate_problems(HELDOUT_SIZE, seed=HELDOUT_SEED)}
    v1 = {p.question for p in problems_v1.generate_problems(HELDOUT_SIZE, seed=HELDOUT_SEED)}
    return frozenset(shipped | v3 | v2 | v1)


def fresh_problems(size: int, seed: int, written: Path | None = None) -> list[WordProblem]:
    """The fresh set of ``size`` questions drawn with ``seed``, none among :func:`earlier_heldout_questions`.

    Raises:
        AssertionError: a repeated question or one of the earlier sets (the generator's exclusion failed).
    """
    earlier = earlier_heldout_questions(written)
    fresh = generate_problems(size, seed=seed, exclude=earlier, **SHIPPED_PROBLEMS)
    questions = [p.question for p in fresh]
    assert len(set(questions)) == len(questions) and not set(questions) & earlier
    return fresh


def repeat_rate(sample: int, seed: int) -> tuple[int, int]:
    """``(repeated questions, pairs)`` among ``sample`` problems drawn with repeats allowed."""
    import random

    from experiments.testbed.problems_v2 import generate_problem

    rng = random.Random(seed)
    seen: dict[str, int] = {}
    for _ in range(sample):
        question = generate_problem(rng, **SHIPPED_PROBLEMS).question
        seen[question] = seen.get(question, 0) + 1
    repeats = sum(c * (c - 1) // 2 for c in seen.values())
    return repeats, sample * (sample - 1) // 2


def main(argv: list[str] | None = None) -> None:
    """Write the fresh set and print its overlap checks."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--size", type=int, default=FRESH_SIZE)
    parser.add_argument("--seed", type=int, default=FRESH_SEED)
    parser.add_argument("--collision-sample", type=int, default=200_000)
    parser.add_argument("--training-problems", type=int, default=400_000,
                        help="an upper bound on the problems the v3 training runs drew (for the printed bound)")
    args = parser.parse_args(argv)
    earlier = earlier_heldout_questions(args.out)
    fresh = fresh_problems(args.size, args.seed, args.out)
    write_heldout(args.out, fresh)
    print(f"{len(fresh)} questions (seed {args.seed}) -> {args.out}; none of the {len(earlier)} earlier held-out "
          f"questions among them")
    if args.collision_sample:
        repeats, pairs = repeat_rate(args.collision_sample, args.seed + 1)
        rate = max(repeats, 3) / pairs  # with no repeat seen: the rule of three's 95% upper bound
        print(f"generator repeats: {repeats} repeated pairs among {args.collision_sample:,} draws "
              f"(rate <= {rate:.2e} per pair, 95%); expected fresh questions also drawn in training "
              f"<= {args.size} x {args.training_problems:,} x rate = {args.size * args.training_problems * rate:.2f}")


if __name__ == "__main__":
    main()
