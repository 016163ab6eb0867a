"""Vote over actions against a single sampled action, on generated tool-use questions.

Each question is an arithmetic word problem with the tools ``add``, ``subtract`` and
``multiply`` (``{"a": int, "b": int}``) bound; the expected first action is the call that
solves it (``add`` / ``multiply`` with the operands in either order, ``subtract`` in order).
Three ways of choosing the first action are compared on the same questions and seeds:

* ``mfs-action-vote``: MFS, the final vote over normalised actions
  (:class:`mfs_core.tools.ActionVote`), as ``ChatMFS.bind_tools`` and the LlamaIndex
  ``MFSLLM`` decode;
* ``mfs-answer-vote``: the same MFS search voting on extracted answers (tool calls have none,
  so the best-``F`` path wins), what the vote did before actions were voted on;
* ``single-sample``: one sampled completion (self-consistency with k = 1).

It prints accuracy with 95% Wilson intervals and mean output tokens per question::

    python -m experiments.benchmarks.tool_vote --questions 60 --step-beam-size 4 --num-rollouts 4 \
        [--tool-choice required] [--no-constrain-tool-names]

With ``--tool-choice required`` every path is a call (the prompt opens it), so the methods
differ only in which call they take; with ``auto`` (the default) a path may answer in text.

It needs a model whose chat template renders tools (the tool-calling demo model); on any
other it exits with status 2 and says so.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import typer

__all__ = ["TOOLS", "ToolQuestion", "action_correct", "generate_questions", "run", "wilson_interval"]

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
    for name, description in (
        ("add", "Add two integers: a + b."),
        ("subtract", "Subtract two integers: a - b."),
        ("multiply", "Multiply two integers: a * b."),
    )
]
"""The tools bound to every question (OpenAI format)."""

_NAMES = ["Tom", "Ann", "Lee", "Maria", "Sam", "Ada", "Omar", "Eve", "Liu", "Nora"]
_ITEMS = ["apples", "stickers", "marbles", "pens", "shells", "cards", "coins", "books"]
_TEMPLATES = {
    "add": "{name} has {a} {item}. {name} buys {b} more {item}. How many {item} does {name} have now?",
    "subtract": "{name} has {a} {item}. {name} gives {b} {item} to a friend. How many {item} does {name} have now?",
    "multiply": "{name} buys {a} boxes of {item}. Each box holds {b} {item}. How many {item} does {name} have?",
}


@dataclass(frozen=True)
class ToolQuestion:
    """A generated question and the call that solves it."""

    question: str
    tool: str
    a: int
    b: int


def generate_questions(count: int, seed: int = 0) -> list[ToolQuestion]:
    """``count`` questions, the three tools in turn, operands drawn with ``seed``.

    Raises:
        ValueError: ``count`` < 1.
    """
    if count < 1:
        msg = f"count must be >= 1, got {count}"
        raise ValueError(msg)
    rng = random.Random(seed)
    questions = []
    for i in range(count):
        tool = list(_TEMPLATES)[i % 3]
        a, b = (rng.randint(2, 12), rng.randint(2, 9)) if tool == "multiply" else (rng.randint(10, 99), rng.randint(2, 9))
        text = _TEMPLATES[tool].format(name=rng.choice(_NAMES), item=rng.choice(_ITEMS), a=a, b=b)
        questions.append(ToolQuestion(text, tool, a, b))
    return questions


def action_correct(question: ToolQuestion, calls: Sequence[Any]) -> bool:
    """True when the first call is the question's tool on its operands (either order for add/multiply)."""
    if not calls:
        return False
    call = calls[0]
    try:
        args = (int(call.arguments["a"]), int(call.arguments["b"]))
    except (KeyError, TypeError, ValueError):
        return False
    if call.name != question.tool:
        return False
    if question.tool == "subtract":
        return args == (question.a, question.b)
    return sorted(args) == sorted((question.a, question.b))


def wilson_interval(correct: int, total: int) -> tuple[float, float]:
    """95% Wilson score interval of ``correct / total`` (scipy's ``binomtest``)."""
    from scipy.stats import binomtest

    interval = binomtest(correct, total).proportion_ci(confidence_level=0.95, method="wilson")
    return float(interval.low), float(interval.high)


METHODS = ("mfs-action-vote", "mfs-answer-vote", "single-sample")


def run(engine: Any, questions: Sequence[ToolQuestion], settings: Any,
        tool_choice: str = "auto") -> dict[str, list[dict[str, Any]]]:
    """Decode every question by each method; per method, one record per question.

    Args:
        engine: an :class:`mfs_core.MFSEngine` over a model whose template renders tools.
        questions: the questions.
        settings: the :class:`mfs_core.MFSSettings` of the MFS searches.
        tool_choice: ``"auto"`` (the model decides whether to call) or ``"required"`` (the
            prompt ends with the opening of a call, :meth:`~mfs_core.tools.ToolRequest.forced_opening`,
            so every path calls a tool and the methods differ in which call they pick).

    Returns:
        ``{method: [{"question", "expected", "calls", "correct", "output_tokens", "vote_share"}]}``.

    Raises:
        ToolsNotSupportedError: the model's template does not render tools.
    """
    from mfs_core.tools import ActionVote
    from mfs_core.call import render_chat
    from mfs_core.tools.plan import plan_call

    plan = plan_call(engine.backend, settings, tools=TOOLS, tool_choice=tool_choice)
    prompts = [render_chat(engine, settings, plan, [{"role": "user", "content": q.question}]) for q in questions]
    single = settings.changed(num_samples=1)
    # the same constraints, the plain answer vote (no request: the vote reads the extracted answer)
    answer_vote = ActionVote(plan.vote.parser, None, opening=plan.vote.opening,
                             triggered_choice=plan.vote.triggered_choice, action_grammar=plan.vote.action_grammar)
    runs = {
        "mfs-action-vote": engine.decode_prompts(prompts, settings=settings, answer_key=plan.vote),
        "mfs-answer-vote": engine.decode_prompts(prompts, settings=settings, answer_key=answer_vote),
        "single-sample": engine.decode_prompts(prompts, settings=single, method="sc", answer_key=plan.vote),
    }
    records: dict[str, list[dict[str, Any]]] = {}
    for method, results in runs.items():
        records[method] = []
        for question, result in zip(questions, results):
            calls = plan.parse(result.text).tool_calls
            records[method].append({
                "question": question.question,
                "expected": f"{question.tool}({question.a}, {question.b})",
                "calls": [{"name": c.name, "arguments": c.arguments} for c in calls],
                "correct": action_correct(question, calls),
                "output_tokens": result.output_tokens,
                "vote_share": result.vote_share,
            })
    return records


def main(
    questions: Annotated[int, typer.Option(min=1, help="Generated tool-use questions.")] = 60,
    seed: Annotated[int, typer.Option(help="Seed of the questions and of the decodes.")] = 0,
    model: Annotated[str, typer.Option(help="Model name or path (default: the bundled demo model).")] = "mfs-demo",
    device: Annotated[str, typer.Option(help="Torch device.")] = "auto",
    step_beam_size: Annotated[int, typer.Option(min=1, help="M.")] = 4,
    num_rollouts: Annotated[int, typer.Option(min=1, help="N.")] = 4,
    max_steps: Annotated[int, typer.Option(min=1, help="Most foresight steps.")] = 6,
    tool_choice: Annotated[str, typer.Option(help="'auto' (the model decides) or 'required' (every path calls).")] = "auto",
    constrain_tool_names: Annotated[bool, typer.Option(
        help="Keep the names of the calls to the bound tools (the constrain_tool_names setting).")] = True,
    constrain_actions: Annotated[bool, typer.Option(
        help="Sample calls under a grammar from the tools' schemas (the constrain_actions setting).")] = True,
    out: Annotated[str | None, typer.Option(help="Write the per-question records as JSON here.")] = None,
) -> None:
    """Print action accuracy (95% Wilson intervals) of the vote over actions against a single sample."""
    from rich.console import Console
    from rich.table import Table

    from mfs_core import MFSEngine, MFSSettings
    from mfs_core.backends._hf import quiet_transformers
    from mfs_core.tools import ToolsNotSupportedError

    if tool_choice not in ("auto", "required"):
        Console(stderr=True).print(f"--tool-choice must be 'auto' or 'required', got {tool_choice!r}")
        raise typer.Exit(2)
    quiet_transformers()
    settings = MFSSettings(model=model, device=device, seed=seed, step_beam_size=step_beam_size,
                           num_rollouts=num_rollouts, max_steps=max_steps, constrain_tool_names=constrain_tool_names,
                           constrain_actions=constrain_actions)
    engine = MFSEngine.from_settings(settings)
    try:
        records = run(engine, generate_questions(questions, seed), settings, tool_choice=tool_choice)
    except ToolsNotSupportedError as exc:
        Console(stderr=True).print(f"[red]{exc}[/red]\nThis benchmark needs a model that calls tools (the tool-calling demo model).")
        raise typer.Exit(2) from exc
    table = Table(title=f"First action on {questions} tool-use questions (tool_choice={tool_choice}, "
                        f"{'calls under the grammar' if constrain_actions else 'names kept to the tools' if constrain_tool_names else 'names free'}, "
                        f"M={step_beam_size}, N={num_rollouts}, seed={seed})")
    for column in ("method", "accuracy", "95% interval", "correct", "mean output tokens"):
        table.add_column(column)
    for method, rows in records.items():
        correct = sum(r["correct"] for r in rows)
        low, high = wilson_interval(correct, len(rows))
        tokens = sum(r["output_tokens"] for r in rows) / len(rows)
        table.add_row(method, f"{correct / len(rows):.1%}", f"[{low:.1%}, {high:.1%}]", f"{correct}/{len(rows)}", f"{tokens:.0f}")
    Console().print(table)
    if out:
        with open(out, "w", encoding="utf-8") as handle:
            json.dump(records, handle, indent=1)


if __name__ == "__main__":
    typer.run(main)
