"""The demo model's word-problem generator: correct arithmetic, checks, slips, variants, format."""

import json
import random
import re

import pytest

from experiments.testbed.problems_v2 import (
    ASSISTANT_PREFIX,
    END_MARKER,
    Operation,
    check_line,
    generate_problem,
    generate_problems,
    write_heldout,
    RECOVERY_WORDINGS,
    write_solution,
)

LINE = re.compile(r"^(\d+) ([+\-*]) (\d+) = (\d+)$")
CHECK = re.compile(r"^Check: (\d+) ([+\-/]) (\d+) = (\d+)(, not (\d+))?$")


def _value(a: str, op: str, b: str) -> int:
    return {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b), "/": int(a) // int(b)}[op]


def test_reference_solutions_compute_correctly_and_end_in_the_paper_format():
    rng = random.Random(7)
    for _ in range(2000):
        problem = generate_problem(rng)
        *lines, last = problem.solution.split("\n")
        assert 3 <= len(problem.operations) <= 5 and len(lines) == 2 * len(problem.operations)
        for line, check, op in zip(lines[::2], lines[1::2], problem.operations):
            a, sym, b, result = LINE.match(line).groups()
            assert _value(a, sym, b) == int(result) == op.result and 0 <= op.result <= 99
            assert check == check_line(op) and CHECK.match(check).group(4) == str(op.left)
        assert problem.operations[-1].result == problem.answer
        assert last == f"The answer is: \\boxed{{{problem.answer}}}.{END_MARKER}"
        assert problem.question == " ".join([*problem.facts, problem.question_sentence])


def test_check_lines_undo_the_step_and_expose_a_wrong_result():
    op = Operation("add", 92, 57, 149)
    assert check_line(op) == "Check: 149 - 57 = 92"
    assert check_line(op, written=152) == "Check: 152 - 57 = 95, not 92"
    assert check_line(Operation("sub", 140, 59, 81), written=91) == "Check: 91 + 59 = 150, not 140"
    assert check_line(Operation("mul", 37, 6, 222), written=228) == "Check: 228 / 6 = 38, not 37"


def test_a_slip_is_untrained_then_exposed_and_redone():
    rng = random.Random(3)
    problem = generate_problem(random.Random(11))
    for _ in range(200):
        lines = write_solution(problem, rng, slip_rate=1.0)
        untrained = [i for i, (_, trained) in enumerate(lines) if not trained]
        assert len(untrained) == 1
        wrong, check, redone = (text for text, _ in lines[untrained[0] : untrained[0] + 3])
        a, sym, b, result = LINE.match(wrong).groups()
        assert _value(a, sym, b) != int(result)
        groups = CHECK.match(check).groups()
        assert groups[0] == result and groups[5] is not None and _value(groups[0], groups[1], groups[2]) == int(groups[3])
        a, sym, b, result = LINE.match(redone).groups()
        assert _value(a, sym, b) == int(result)
        assert lines[-1][0].endswith(f"\\boxed{{{problem.answer}}}.{END_MARKER}")
    assert all(trained for _, trained in write_solution(problem, rng, slip_rate=0.0))
    with pytest.raises(ValueError, match=r"slip_rate must be in \[0, 1\], got 1.5"):
        write_solution(problem, rng, slip_rate=1.5)


def test_compare_checks_copy_the_value_to_give_back_and_a_slip_ends_with_a_drawn_wording():
    op = Operation("add", 92, 57, 149)
    assert check_line(op, style="compare") == "Check: 149 - 57 = 92, was 92"
    assert check_line(op, written=152, style="compare") == "Check: 152 - 57 = 95, was 92: wrong"
    assert check_line(Operation("mul", 37, 6, 222), written=228, style="compare") == "Check: 228 / 6 = 38, was 37: wrong"
    rng = random.Random(4)
    problem = generate_problem(random.Random(11))
    endings = []
    for _ in range(400):
        lines = write_solution(problem, rng, slip_rate=1.0, checks="compare")
        at = next(i for i, (_, trained) in enumerate(lines) if not trained)
        check, redone = lines[at + 1][0], lines[at + 2][0]
        exposing, _, ending = check.partition(". ")
        a, sym, b, result = LINE.match(lines[at][0]).groups()
        assert exposing.startswith(f"Check: {result} ") and exposing.endswith(": wrong")
        assert ending in RECOVERY_WORDINGS
        a, sym, b, result = LINE.match(redone).groups()
        assert _value(a, sym, b) == int(result)
        endings.append(ending)
        # Every other check gives back the value it copies.
        for text, _ in lines:
            if text.startswith("Check") and text != check:
                back, was = re.match(r"^Check: \d+ [-+/] \d+ = (\d+), was (\d+)$", text).groups()
                assert back == was
    assert set(endings) == set(RECOVERY_WORDINGS)  # all twelve drawn in 400 slips
    v2 = write_solution(problem, random.Random(8), slip_rate=1.0)  # the default: the shipped v2 form
    assert all(", was " not in text for text, _ in v2)
    with pytest.raises(ValueError, match="checks must be one of v2, compare, difference, signed, got 'retry'"):
        write_solution(problem, rng, slip_rate=1.0, checks="retry")


def test_difference_checks_subtract_what_the_check_gives_back_and_slips_go_down():
    op = Operation("add", 92, 57, 149)
    assert check_line(op, style="difference") == "Check: 149 - 57 = 92, 92 - 92 = 0"
    assert check_line(op, written=147, style="difference") == "Check: 147 - 57 = 90, 92 - 90 = 2: wrong"
    assert check_line(Operation("mul", 37, 6, 222), written=216, style="difference") == (
        "Check: 216 / 6 = 36, 37 - 36 = 1: wrong")
    rng = random.Random(6)
    for problem in generate_problems(50, seed=12):
        lines = write_solution(problem, rng, slip_rate=1.0, checks="difference")
        at = next(i for i, (_, trained) in enumerate(lines) if not trained)
        exposing, _, ending = lines[at + 1][0].partition(". ")
        difference = int(re.search(r"= (\d+): wrong$", exposing).group(1))
        assert difference >= 1 and ending in RECOVERY_WORDINGS  # a downward slip: the difference is positive
        for text, _ in lines[at + 2 :]:
            if text.startswith("Check"):
                assert text.endswith(" = 0")


def test_signed_checks_write_difference_lines_and_slips_go_both_ways():
    assert check_line(Operation("add", 92, 57, 149), written=151, style="signed") == (
        "Check: 151 - 57 = 94, 92 - 94 = -2: wrong")
    rng = random.Random(6)
    differences = []
    for problem in generate_problems(80, seed=12):
        lines = write_solution(problem, rng, slip_rate=1.0, checks="signed")
        at = next(i for i, (_, trained) in enumerate(lines) if not trained)
        exposing, _, ending = lines[at + 1][0].partition(". ")
        differences.append(int(re.search(r"= (-?\d+): wrong$", exposing).group(1)))
        assert ending in RECOVERY_WORDINGS and re.search(r", (\d+) - \1 = 0$", lines[at + 3][0])
    assert 0 not in differences and min(differences) < 0 < max(differences)


def test_first_lines_vary_across_sampled_solutions():
    rng = random.Random(5)
    problems = generate_problems(100, seed=9)
    varied = sum(len({write_solution(p, rng)[0][0] for _ in range(16)}) >= 2 for p in problems)
    assert varied >= 90


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
    with pytest.raises(ValueError, match=r"num_operations must be in 1..7, got 8"):
        generate_problem(random.Random(0), num_operations=8)
    with pytest.raises(ValueError, match=r"operation_weights keys must be in 1..7 with weights >= 0, got 9"):
        generate_problem(random.Random(0), operation_weights={3: 1, 9: 1})
    with pytest.raises(ValueError, match=r"weights >= 0, got 4"):
        generate_problem(random.Random(0), operation_weights={3: 1, 4: -1})
    assert len(generate_problem(random.Random(0), num_operations=1).operations) == 1
    assert ASSISTANT_PREFIX == "The reasoning steps are:\n\n"


def test_operation_weights_set_problem_lengths_and_keep_every_total_in_range():
    # v2's default (3: 40%, 4: 40%, 5: 20%) reproduces the shipped held-out set's first question.
    first = generate_problems(1, seed=20260521)[0]
    assert generate_problems(1, seed=20260521, operation_weights={3: 4, 4: 4, 5: 2})[0] == first
    problems = generate_problems(400, seed=3, operation_weights={6: 1, 7: 1})
    lengths = [len(p.operations) for p in problems]
    assert set(lengths) == {6, 7} and 150 < lengths.count(6) < 250
    for problem in problems:
        assert all(0 <= op.result <= 99 for op in problem.operations)
        assert problem.solution.count("\nCheck: ") == len(problem.operations)
        assert problem.answer == problem.operations[-1].result


def test_a_larger_number_range_keeps_totals_and_amounts_in_bounds():
    problems = generate_problems(300, seed=5, max_value=199, max_amount=60)
    assert max(p.answer for p in problems) > 99  # the range is used, not only allowed
    for problem in problems:
        for op in problem.operations:
            assert 0 <= op.result <= 199
            if op.kind in ("add", "sub") and op is not problem.operations[0]:
                assert 2 <= op.right <= 60
    with pytest.raises(ValueError, match=r"max_value must be in 9..999 and max_amount in 2..max_value // 2, got 199 and 150"):
        generate_problem(random.Random(0), max_value=199, max_amount=150)
