"""Arithmetic word problems for the bundled demo model.

Each problem is a short story: a starting quantity followed by one to three events that
add to, take from, or multiply it (so 2-4 numbers and 1-3 operations, plus a start that may
itself be a product, giving 2-4 arithmetic operations in all for most problems). The
solution is written in the MFS paper's answer format: one computation per line, then
``The answer is: \\boxed{N}.<end_of_reasoning>``.

Numbers are kept small (every intermediate result in 0-99) so that a model of a few
million parameters, trained for under an hour on a CPU, learns the task well but not
perfectly (see ``MODEL_CARD.md``).

The generator is pure Python and deterministic for a given ``random.Random``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ASSISTANT_PREFIX",
    "END_MARKER",
    "WordProblem",
    "generate_problem",
    "generate_problems",
    "write_heldout",
]

ASSISTANT_PREFIX = "The reasoning steps are:\n\n"
END_MARKER = "<end_of_reasoning>"

NAMES = [
    "Tom", "Anna", "Ben", "Maria", "Lucas", "Emma", "Omar", "Sofia", "Liam", "Priya",
    "Noah", "Yuki", "Ava", "Mateo", "Zoe", "Ivan", "Chloe", "Ravi", "Mia", "Leo",
    "Grace", "Hugo", "Nina", "Samir", "Lily", "Felix", "Aisha", "Oscar", "Elena", "Jack",
]
# (plural noun, container) pairs; units read as objects ("meters of rope").
OBJECTS = [
    ("apples", "basket"), ("pencils", "box"), ("stickers", "album"), ("marbles", "jar"),
    ("cookies", "tin"), ("books", "shelf"), ("coins", "purse"), ("stamps", "folder"),
    ("eggs", "carton"), ("flowers", "vase"), ("cards", "deck"), ("shells", "bucket"),
    ("candies", "bag"), ("toy cars", "garage"), ("oranges", "crate"), ("balloons", "room"),
    ("dollars", "wallet"), ("meters of rope", "shed"), ("liters of juice", "fridge"),
    ("kilograms of rice", "pantry"), ("pages", "notebook"), ("blocks", "bin"),
    ("beads", "tray"), ("sheep", "field"), ("fish", "pond"), ("chairs", "hall"),
    ("cupcakes", "bakery"), ("tickets", "drawer"), ("buttons", "cup"), ("nuts", "bowl"),
]
PRONOUNS = {"he": "him", "she": "her", "they": "them"}

START_TEMPLATES = [
    "{name} has {a} {obj}.",
    "{name} starts with {a} {obj}.",
    "There are {a} {obj} in the {box}.",
    "At first, {name} collects {a} {obj}.",
    "{name} owns {a} {obj}.",
    "In the morning, the {box} holds {a} {obj}.",
    "{name} counts {a} {obj} in the {box}.",
    "A {box} contains {a} {obj}.",
]
START_PRODUCT_TEMPLATES = [
    "{name} has {a} bags with {b} {obj} in each bag.",
    "There are {a} rows of {obj} with {b} in each row.",
    "{name} buys {a} packs of {obj}, and each pack has {b}.",
    "{name} fills {a} boxes with {b} {obj} each.",
    "Each of {a} friends gives {name} {b} {obj}.",
    "{name} gets {b} {obj} every day for {a} days.",
]
ADD_TEMPLATES = [
    "Then {name} buys {k} more {obj}.",
    "{name} finds {k} more {obj}.",
    "A friend gives {name} {k} {obj}.",
    "Later, {k} more {obj} arrive.",
    "{name} adds {k} {obj} to the {box}.",
    "The next day {name} receives {k} extra {obj}.",
    "Someone puts {k} more {obj} in the {box}.",
    "{name} wins {k} {obj} in a game.",
    "After that, {name} picks up another {k} {obj}.",
]
SUB_TEMPLATES = [
    "Then {name} gives away {k} {obj}.",
    "{name} sells {k} of the {obj}.",
    "{k} {obj} are lost.",
    "{name} uses {k} {obj}.",
    "Later, {k} of the {obj} are taken out of the {box}.",
    "{name} gives {k} {obj} to a neighbor.",
    "Sadly, {k} {obj} break.",
    "After that, {name} removes {k} {obj}.",
    "{name} donates {k} {obj} to the school.",
]
MUL_TEMPLATES = [
    "Then the number of {obj} becomes {k} times as large.",
    "{name} multiplies the {obj} by {k}.",
    "Next, {name} ends up with {k} times as many {obj}.",
    "The {obj} in the {box} grow to {k} times their number.",
    "Each of the {obj} is traded for {k} new ones.",
]
DOUBLE_TEMPLATES = ["Then the number of {obj} doubles.", "{name} doubles the {obj}."]
TRIPLE_TEMPLATES = ["Then the number of {obj} triples.", "{name} triples the {obj}."]
QUESTION_TEMPLATES = [
    "How many {obj} does {name} have now?",
    "How many {obj} are there in the end?",
    "What is the final number of {obj}?",
    "How many {obj} are left?",
    "How many {obj} are there now?",
    "Count the {obj} at the end. How many are there?",
]

MAX_VALUE = 99


@dataclass(frozen=True)
class WordProblem:
    """One generated problem.

    Attributes:
        question: the story and its question, in English.
        solution: the reasoning after the assistant prefix, ending with the end marker.
        answer: the integer answer (0-99).
    """

    question: str
    solution: str
    answer: int


def _render(template: str, **fields: object) -> str:
    text = template.format(**fields)
    return text[0].upper() + text[1:]


def generate_problem(rng: random.Random, num_operations: int | None = None) -> WordProblem:
    """Generate one word problem.

    Args:
        rng: the random source (the only one used).
        num_operations: arithmetic operations in the problem, 2-4; drawn (2: 50%,
            3: 30%, 4: 20%) when None.

    Returns:
        The problem with its line-per-computation solution.

    Raises:
        ValueError: if ``num_operations`` is outside 2-4.
    """
    if num_operations is None:
        num_operations = rng.choices([2, 3, 4], weights=[5, 3, 2])[0]
    if not 2 <= num_operations <= 4:
        msg = f"num_operations must be in 2..4, got {num_operations!r}"
        raise ValueError(msg)
    name = rng.choice(NAMES)
    obj, box = rng.choice(OBJECTS)
    sentences: list[str] = []
    lines: list[str] = []
    ops_left = num_operations
    # A product start uses one operation; keep at least one event after it.
    if rng.random() < 0.35:
        a = rng.randint(2, 9)
        b = rng.randint(2, MAX_VALUE // a if MAX_VALUE // a < 12 else 12)
        value = a * b
        sentences.append(_render(rng.choice(START_PRODUCT_TEMPLATES), name=name, a=a, b=b, obj=obj))
        lines.append(f"{a} * {b} = {value}")
        ops_left -= 1
    else:
        value = rng.randint(2, 40)
        sentences.append(_render(rng.choice(START_TEMPLATES), name=name, a=value, obj=obj, box=box))
        # Plain start: the first event combines two given numbers.
    for _ in range(ops_left):
        choices = ["add", "sub", "mul"]
        weights = [4, 4, 2 if value <= MAX_VALUE // 2 and value > 0 else 0]
        if value < 2:
            weights[1] = 0
        op = rng.choices(choices, weights=weights)[0]
        if op == "add":
            k = rng.randint(2, min(30, MAX_VALUE - value)) if value <= MAX_VALUE - 2 else None
            if k is None:
                op = "sub"
            else:
                sentences.append(_render(rng.choice(ADD_TEMPLATES), name=name, k=k, obj=obj, box=box))
                lines.append(f"{value} + {k} = {value + k}")
                value += k
                continue
        if op == "sub":
            k = rng.randint(1, min(30, value))
            sentences.append(_render(rng.choice(SUB_TEMPLATES), name=name, k=k, obj=obj, box=box))
            lines.append(f"{value} - {k} = {value - k}")
            value -= k
            continue
        k = rng.randint(2, min(5, MAX_VALUE // value))
        if k == 2 and rng.random() < 0.4:
            template = rng.choice(DOUBLE_TEMPLATES)
        elif k == 3 and rng.random() < 0.4:
            template = rng.choice(TRIPLE_TEMPLATES)
        else:
            template = rng.choice(MUL_TEMPLATES)
        sentences.append(_render(template, name=name, k=k, obj=obj, box=box))
        lines.append(f"{value} * {k} = {value * k}")
        value *= k
    sentences.append(_render(rng.choice(QUESTION_TEMPLATES), name=name, obj=obj))
    lines.append(f"The answer is: \\boxed{{{value}}}.{END_MARKER}")
    return WordProblem(question=" ".join(sentences), solution="\n".join(lines), answer=value)


def generate_problems(
    count: int,
    seed: int,
    exclude: set[str] | frozenset[str] = frozenset(),
    *,
    generate: Callable[[random.Random], Any] | None = None,
) -> list[WordProblem]:
    """Generate ``count`` distinct problems whose questions are not in ``exclude``.

    Args:
        count: number of problems.
        seed: seed of the ``random.Random`` used.
        exclude: question texts that must not be produced (e.g. the held-out set).
        generate: the one-problem generator (default :func:`generate_problem`; the v2
            generator passes its own); its problems need a ``question`` attribute.

    Returns:
        ``count`` problems with pairwise distinct questions.
    """
    generate = generate or generate_problem
    rng = random.Random(seed)
    seen: set[str] = set(exclude)
    problems: list[WordProblem] = []
    while len(problems) < count:
        problem = generate(rng)
        if problem.question in seen:
            continue
        seen.add(problem.question)
        problems.append(problem)
    return problems


def write_heldout(path: Path, problems: list[WordProblem]) -> None:
    """Write problems (v1 or v2: anything with ``question`` and ``answer``) in the shape of
    ``shared/data/gsm_test.json``.

    Each record is ``{"input": question, "target": float(answer)}``.
    """
    records = [{"input": p.question, "target": float(p.answer)} for p in problems]
    path.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
