"""The demo model's word-problem generator: correct arithmetic, varied wording, format."""

import json
import random
import re

import pytest

from experiments.testbed.problems import ASSISTANT_PREFIX, END_MARKER, generate_problem, generate_problems, write_heldout

LINE = re.compile(r"^(\d+) ([+\-*]) (\d+) = (\d+)$")


def test_solutions_compute_correctly_and_end_in_the_paper_format():
    rng = random.Random(7)
    for _ in range(2000):
        problem = generate_problem(rng)
        *lines, last = problem.solution.split("\n")
        assert 2 <= len(lines) <= 4
        for line in lines:
            a, op, b, result = LINE.match(line).groups()
            assert eval(f"{a} {op} {b}") == int(result)  # noqa: S307 - digits and one operator
            assert 0 <= int(result) <= 99
        assert int(LINE.match(lines[-1]).group(4)) == problem.answer
        assert last == f"The answer is: \\boxed{{{problem.answer}}}.{END_MARKER}"


def test_wording_varies():
    problems = generate_problems(1000, seed=3)
    # Sentence shapes with numbers, names and objects masked.
    shapes = set()
    for p in problems:
        for sentence in re.split(r"(?<=[.?]) ", p.question):
            shapes.add(re.sub(r"\d+", "N", sentence))
    assert len(shapes) > 200
    first_words = {p.question.split()[0] for p in problems}
    assert len(first_words) >= 20
    assert len({p.question for p in problems}) == 1000


def test_exclusion_and_heldout_shape(tmp_path):
    heldout = generate_problems(50, seed=1)
    excluded = {p.question for p in heldout}
    train = generate_problems(500, seed=1, exclude=excluded)
    assert not excluded & {p.question for p in train}
    path = tmp_path / "heldout.json"
    write_heldout(path, heldout)
    records = json.loads(path.read_text())
    assert records[0] == {"input": heldout[0].question, "target": float(heldout[0].answer)}


def test_operation_count_is_validated():
    with pytest.raises(ValueError, match="num_operations must be in 2..4, got 5"):
        generate_problem(random.Random(0), num_operations=5)
    assert ASSISTANT_PREFIX == "The reasoning steps are:\n\n"
