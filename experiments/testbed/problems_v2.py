"""Arithmetic word problems and their written solutions for the v2 demo model (train_v2.py).

Each problem is a short story: a starting quantity (a number, or a product "N bags with
M in each") followed by events that add to, take from, or multiply it, then a question:
3-5 arithmetic operations in all (40% three, 40% four, 20% five: :data:`OPERATION_WEIGHTS`;
``operation_weights`` draws other lengths, up to :data:`MAX_OPERATIONS`), every intermediate
result in 0-99 (additions and subtractions of 2-30, multiplications by 2-5; a product start
is 2-9 times 2-12), the first demo model's number range with one to three more operations.
The v2 model is trained from the v1 weights (``train_v2 --init-from``), so it starts out
knowing this arithmetic; the longer problems and the check lines are what it learns, and
what makes greedy decoding err (see ``MODEL_CARD.md``). The tool-call examples also use 1-2
operation problems.

A solution is written one line per step, after the assistant prefix
``The reasoning steps are:\\n\\n`` (see :func:`write_solution`)::

    Start: 23
    23 * 4 = 92
    Check: 92 / 4 = 23
    92 + 57 = 149
    Check: 149 - 57 = 92
    The answer is: \\boxed{149}.<end_of_reasoning>

* Several valid texts per step: an optional first line restating the start, and ``a + b``
  or ``b + a`` (``a * b`` or ``b * a``) for the commutative operations, so sampled
  solutions differ from their first line on.
* After every computation a check line undoes it with the inverse operation. After a
  right step the check restates the previous total (predictable); after a wrong step it
  computes a new number and says so (``Check: 152 - 57 = 95, not 92``), then the step is
  redone. A known share of training solutions holds one such slip: the wrong line is
  masked out of the loss (the model never learns to make it), the check and the
  correction are trained, so a slip in the model's own text makes what follows less
  predictable, which is what the foresight quality F of a step measures.
* ``checks="compare"`` (v3): the check line also copies the value it should give back
  and compares: ``Check: 149 - 57 = 92, was 92`` after a right step,
  ``Check: 152 - 57 = 95, was 92: wrong. Redo the step.`` after a slip, the verdict next
  to the two numbers it compares (the v2 form ``, not 92`` asks the model to compare a
  number with one on the line above before writing anything). The wrong check ends with
  one of :data:`RECOVERY_WORDINGS`, drawn uniformly: after a right step the future text
  is fixed, after a slip it holds a verdict that only the check's own arithmetic predicts
  and one of twelve wordings (ln 12 = 2.5 nats), so a rollout after a wrong step is less
  probable per token than one after a right step, as real LLMs' continuations are less
  certain after their wrong steps.

The generator is pure Python and deterministic for a given ``random.Random``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = [
    "ASSISTANT_PREFIX",
    "END_MARKER",
    "MAX_AMOUNT",
    "MAX_OPERATIONS",
    "MAX_VALUE",
    "OPERATION_WEIGHTS",
    "Operation",
    "CHECK_STYLES",
    "RECOVERY_WORDINGS",
    "SHIPPED_PROBLEMS",
    "WordProblem",
    "answer_line",
    "check_line",
    "generate_problem",
    "generate_problems",
    "write_heldout",
    "write_solution",
]

ASSISTANT_PREFIX = "The reasoning steps are:\n\n"
END_MARKER = "<end_of_reasoning>"

# The wording (names, objects, sentence templates) is the first demo model's.
from experiments.testbed import problems as problems_v1  # noqa: E402
from experiments.testbed.problems import (  # noqa: E402
    write_heldout,
    NAMES,
    OBJECTS,
    START_TEMPLATES,
    START_PRODUCT_TEMPLATES,
    ADD_TEMPLATES,
    SUB_TEMPLATES,
    MUL_TEMPLATES,
    DOUBLE_TEMPLATES,
    TRIPLE_TEMPLATES,
    QUESTION_TEMPLATES,
)

RECOVERY_WORDINGS = [
    "Redo the step.", "Wait, that step is wrong.", "So the line above is wrong.", "Fix it:",
    "Let me redo it.", "That was a slip, try again.", "Correct it:", "Mistake, do it again:",
    "Recompute:", "Again:", "Oops, once more:", "The line above is off; redo:",
]
"""What an exposing check line ends with under ``checks="compare"`` (drawn uniformly)."""
CHECK_STYLES = ("v2", "compare", "difference", "signed")
"""Check-line styles (:func:`check_line`); ``"signed"`` writes ``"difference"`` lines, with
slips drawn both ways (:func:`write_solution`)."""
WORDED_STYLES = ("compare", "difference", "signed")
"""The styles whose exposing check ends with one of :data:`RECOVERY_WORDINGS`."""

RESTATE_TEMPLATES = ["Start: {a}", "At first there are {a} {obj}.", "Start with {a} {obj}."]

MAX_VALUE = 99
MAX_OPERATIONS = 7
OPERATION_WEIGHTS = {3: 4, 4: 4, 5: 2}
"""Operations per problem and their relative weights when none is given: the v2 model's
data and held-out set (3-5 operations). ``train_v2 --operations`` draws others (v3: up to 6)."""
SHIPPED_PROBLEMS = {"operation_weights": {3: 1, 4: 2, 5: 3, 6: 4}, "max_value": 199, "max_amount": 60}
"""The shipped (v3) demo model's plain and RAG problems and its held-out set
(``heldout.json``): 3-6 operations (10/20/30/40%), totals up to 199, amounts up to 60, i.e.
``train_v2 --operations 3=1,4=2,5=3,6=4 --max-value 199 --max-amount 60``; the keyword
arguments of :func:`generate_problems`."""
MAX_AMOUNT = 30
SYMBOLS = {"add": "+", "sub": "-", "mul": "*"}
INVERSE = {"add": "-", "sub": "+", "mul": "/"}


@dataclass(frozen=True)
class Operation:
    """One arithmetic step of a problem: ``left op right = result``.

    Attributes:
        kind: ``"add"``, ``"sub"`` or ``"mul"``.
        left: the running total before the step (or the first factor of a product start).
        right: the amount the event adds, takes away or multiplies by.
        result: the running total after the step.
    """

    kind: str
    left: int
    right: int
    result: int


@dataclass(frozen=True)
class WordProblem:
    """One generated problem.

    Attributes:
        question: the story and its question, in English.
        solution: a reference solution (no slip, canonical operand order, no restated
            start) after the assistant prefix, ending with the end marker.
        answer: the integer answer (0-99).
        facts: the story's sentences (the question without its final question sentence).
        question_sentence: the final question sentence.
        operations: the arithmetic steps, in story order.
        name: the person of the story.
        obj: the plural noun counted.
        start: the starting quantity when the story starts with a plain number, else None.
    """

    question: str
    solution: str
    answer: int
    facts: tuple[str, ...] = ()
    question_sentence: str = ""
    operations: tuple[Operation, ...] = ()
    name: str = ""
    obj: str = ""
    start: int | None = None


def _render(template: str, **fields: object) -> str:
    text = template.format(**fields)
    return text[0].upper() + text[1:]


def generate_problem(
    rng: random.Random, num_operations: int | None = None, operation_weights: dict[int, float] | None = None,
    max_value: int = MAX_VALUE, max_amount: int = MAX_AMOUNT,
) -> WordProblem:
    """Generate one word problem.

    Args:
        rng: the random source (the only one used).
        num_operations: arithmetic operations in the problem, 1-:data:`MAX_OPERATIONS`;
            drawn from ``operation_weights`` when None.
        operation_weights: relative weight of each number of operations (default
            :data:`OPERATION_WEIGHTS`, v2's 3: 40%, 4: 40%, 5: 20%).
        max_value: the largest running total (v2: 99); a plain start is drawn from
            5-``60 * max_value // 99``, multiplications apply to totals up to ``max_value // 2``.
        max_amount: the largest amount added or taken away (v2: 30).

    Returns:
        The problem with its reference solution.

    Raises:
        ValueError: if ``num_operations`` (or a key of ``operation_weights``) is outside
            1-:data:`MAX_OPERATIONS`, a weight is negative, or ``max_value`` / ``max_amount``
            are outside 9-999 / 2-``max_value // 2``.
    """
    if not (9 <= max_value <= 999 and 2 <= max_amount <= max_value // 2):
        msg = f"max_value must be in 9..999 and max_amount in 2..max_value // 2, got {max_value!r} and {max_amount!r}"
        raise ValueError(msg)
    if num_operations is None:
        weights = operation_weights or OPERATION_WEIGHTS
        bad = [k for k, w in weights.items() if not 1 <= k <= MAX_OPERATIONS or w < 0]
        if bad:
            msg = f"operation_weights keys must be in 1..{MAX_OPERATIONS} with weights >= 0, got {bad[0]!r}"
            raise ValueError(msg)
        num_operations = rng.choices(list(weights), weights=list(weights.values()))[0]
    if not 1 <= num_operations <= MAX_OPERATIONS:
        msg = f"num_operations must be in 1..{MAX_OPERATIONS}, got {num_operations!r}"
        raise ValueError(msg)
    name = rng.choice(NAMES)
    obj, box = rng.choice(OBJECTS)
    sentences: list[str] = []
    operations: list[Operation] = []
    ops_left = num_operations
    start: int | None = None
    if num_operations >= 2 and rng.random() < 0.35:
        a = rng.randint(2, 9)
        b = rng.randint(2, min(12, max_value // a))
        value = a * b
        sentences.append(_render(rng.choice(START_PRODUCT_TEMPLATES), name=name, a=a, b=b, obj=obj))
        operations.append(Operation("mul", a, b, value))
        ops_left -= 1
    else:
        value = start = rng.randint(5, 60 * max_value // 99)
        sentences.append(_render(rng.choice(START_TEMPLATES), name=name, a=value, obj=obj, box=box))
    for _ in range(ops_left):
        weights = [4, 4 if value >= 4 else 0, 2 if 2 <= value <= max_value // 2 else 0]
        if value > max_value - 2:
            weights[0] = 0
        kind = rng.choices(["add", "sub", "mul"], weights=weights)[0]
        if kind == "add":
            k = rng.randint(2, min(max_amount, max_value - value))
            sentences.append(_render(rng.choice(ADD_TEMPLATES), name=name, k=k, obj=obj, box=box))
            operations.append(Operation("add", value, k, value + k))
            value += k
        elif kind == "sub":
            k = rng.randint(2, min(max_amount, value - 1))
            sentences.append(_render(rng.choice(SUB_TEMPLATES), name=name, k=k, obj=obj, box=box))
            operations.append(Operation("sub", value, k, value - k))
            value -= k
        else:
            k = rng.randint(2, min(5, max_value // value))
            if k == 2 and rng.random() < 0.4:
                template = rng.choice(DOUBLE_TEMPLATES)
            elif k == 3 and rng.random() < 0.4:
                template = rng.choice(TRIPLE_TEMPLATES)
            else:
                template = rng.choice(MUL_TEMPLATES)
            sentences.append(_render(template, name=name, k=k, obj=obj, box=box))
            operations.append(Operation("mul", value, k, value * k))
            value *= k
    question_sentence = _render(rng.choice(QUESTION_TEMPLATES), name=name, obj=obj)
    problem = WordProblem(
        question=" ".join([*sentences, question_sentence]), solution="", answer=value, facts=tuple(sentences),
        question_sentence=question_sentence, operations=tuple(operations), name=name, obj=obj, start=start,
    )
    lines = write_solution(problem, random.Random(0), slip_rate=0.0, variants=False)
    return WordProblem(**{**problem.__dict__, "solution": "\n".join(text for text, _ in lines)})


def equation(op: Operation, swap: bool = False, result: int | None = None) -> str:
    """The text ``left op right = result`` (``right op left`` when ``swap``)."""
    a, b = (op.right, op.left) if swap else (op.left, op.right)
    return f"{a} {SYMBOLS[op.kind]} {b} = {op.result if result is None else result}"


def check_line(op: Operation, written: int | None = None, style: str = "v2") -> str:
    """The check after ``op`` was written with result ``written`` (default: right).

    The inverse operation applied to the written result. ``style="v2"``:
    ``Check: 149 - 57 = 92`` when it gives back the previous total, else
    ``Check: 152 - 57 = 95, not 92``. ``style="compare"``: ``Check: 149 - 57 = 92, was 92``,
    else ``Check: 152 - 57 = 95, was 92: wrong`` (the caller may append a wording).
    ``style="difference"`` or ``"signed"``: ``Check: 149 - 57 = 92, 92 - 92 = 0``, else
    ``Check: 147 - 57 = 90, 92 - 90 = 2: wrong``; after an upward slip the difference is
    negative (``92 - 94 = -2: wrong``).

    Raises:
        ValueError: ``style`` not one of :data:`CHECK_STYLES`.
    """
    if style not in CHECK_STYLES:
        msg = f"checks must be one of {', '.join(CHECK_STYLES)}, got {style!r}"
        raise ValueError(msg)
    written = op.result if written is None else written
    if op.kind == "add":
        back = written - op.right
    elif op.kind == "sub":
        back = written + op.right
    else:
        back = written // op.right
    text = f"Check: {written} {INVERSE[op.kind]} {op.right} = {back}"
    if style == "compare":
        return f"{text}, was {op.left}" + ("" if back == op.left else ": wrong")
    if style in ("difference", "signed"):
        return f"{text}, {op.left} - {back} = {op.left - back}" + ("" if back == op.left else ": wrong")
    return text if back == op.left else f"{text}, not {op.left}"


def answer_line(answer: int) -> str:
    """``The answer is: \\boxed{N}.<end_of_reasoning>``."""
    return f"The answer is: \\boxed{{{answer}}}.{END_MARKER}"


def _slip(op: Operation, rng: random.Random, downward: bool = False) -> int:
    """A wrong result for ``op`` that a careless reasoner might write (never the right one);
    ``downward``: only results below the right one (a check then gives back less than the
    previous total)."""
    if op.kind == "mul":
        candidates = [op.result - op.right] if downward else [op.result + op.right, op.result - op.right]
    else:
        candidates = [op.result + d for d in ((-1, -10, -2) if downward else (1, -1, 10, -10, 2, -2))]
    candidates = [c for c in candidates if c >= 0 and c != op.result
                  and (op.kind != "add" or c - op.right >= 0)]
    return rng.choice(candidates)


def write_solution(
    problem: WordProblem, rng: random.Random, slip_rate: float = 0.0, variants: bool = True,
    checks: str = "v2",
) -> list[tuple[str, bool]]:
    """Write a solution of ``problem`` line by line, with each line's loss flag.

    Args:
        problem: the problem.
        rng: the random source for the variants and the slip.
        slip_rate: probability that the solution holds one wrong computation (0-1); the
            wrong line is followed by a check that exposes it and the redone step.
        variants: draw a restated start and operand orders; False writes the canonical
            reference solution.
        checks: the check lines' form (:func:`check_line`): ``"v2"``, the shipped v2
            model's data; ``"compare"``, ``"difference"`` (v3's data: slips drawn
            downward only, so the difference is positive) and ``"signed"`` (slips both
            ways, negative differences after upward ones), whose exposing check also ends
            with one of :data:`RECOVERY_WORDINGS`.

    Returns:
        ``(line, trained)`` pairs: ``trained`` is False only for the wrong line, which
        must not be learned.

    Raises:
        ValueError: ``slip_rate`` outside 0-1, or ``checks`` not one of :data:`CHECK_STYLES`.
    """
    if not 0.0 <= slip_rate <= 1.0:
        msg = f"slip_rate must be in [0, 1], got {slip_rate!r}"
        raise ValueError(msg)
    if checks not in CHECK_STYLES:
        msg = f"checks must be one of {', '.join(CHECK_STYLES)}, got {checks!r}"
        raise ValueError(msg)
    lines: list[tuple[str, bool]] = []
    slip_at = rng.randrange(len(problem.operations)) if variants and rng.random() < slip_rate else -1
    if variants and problem.start is not None and rng.random() < 0.3:
        lines.append((_render(rng.choice(RESTATE_TEMPLATES), a=problem.start, obj=problem.obj), True))
    for i, op in enumerate(problem.operations):
        swap = variants and op.kind != "sub" and rng.random() < 0.5
        if i == slip_at:
            wrong = _slip(op, rng, downward=checks == "difference")  # "signed": both ways
            lines.append((equation(op, swap, wrong), False))
            check = check_line(op, wrong, checks)
            if checks in WORDED_STYLES:
                check = f"{check}. {rng.choice(RECOVERY_WORDINGS)}"
            lines.append((check, True))
            swap = variants and op.kind != "sub" and rng.random() < 0.5
        lines.append((equation(op, swap), True))
        lines.append((check_line(op, style=checks), True))
    lines.append((answer_line(problem.answer), True))
    return lines


def generate_problems(
    count: int, seed: int, exclude: set[str] | frozenset[str] = frozenset(),
    operation_weights: dict[int, float] | None = None, max_value: int = MAX_VALUE, max_amount: int = MAX_AMOUNT,
) -> list[WordProblem]:
    """``count`` distinct v2 problems whose questions are not in ``exclude`` (seeded by ``seed``),
    their lengths drawn from ``operation_weights`` (default :data:`OPERATION_WEIGHTS`), their
    numbers bounded by ``max_value`` and ``max_amount`` (:func:`generate_problem`).

    The loop of :func:`testbed.problems.generate_problems` with this module's
    :func:`generate_problem`; :func:`write_heldout` is v1's too.
    """
    return problems_v1.generate_problems(
        count, seed, exclude,
        generate=lambda rng: generate_problem(rng, operation_weights=operation_weights, max_value=max_value,
                                              max_amount=max_amount))
