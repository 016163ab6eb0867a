"""Measure how a demo model reads RAG prompts and calls tools, greedily, with 95% intervals.

``python -m experiments.testbed.evaluate_formats [--model PATH] [--limit N] [--seed S]`` draws N
conversations of each kind from :mod:`testbed.formats` (the generators the model is
trained on, seeded with ``--seed``; the default seed 4242 is not a training seed) and
prints, with Wilson intervals:

* **RAG answer**: the greedy answer of a RAG prompt (facts among 0-3 distractor
  documents, the five prompt styles of :func:`~testbed.formats.rag_example`) equals
  the problem's answer; per style too;
* **first action**: on a tool conversation cut at its first assistant turn, the greedy
  completion takes the right action: the expected call (same tool name and arguments, parsed
  by :func:`~mfs_core.tools.parsers.parse_hermes`) or, when no given tool fits the first
  operation, no call;
* **tool name**: of those first turns that expect a call, the completion calls a tool of
  the schema with the expected name (arguments not compared);
* **answer from tool result**: on a conversation cut after its last ``<tool_response>``,
  the greedy answer equals the problem's answer.

Runs through :class:`~mfs_core.backends.transformers.TransformersBackend`'s batched greedy
``generate``; prompts are rendered as the model is trained
(:func:`testbed.train_v2.render_prompt`). No search decoder is run: these are
properties of the model. The conversations are drawn from the
training generators, so they are in the training distribution (not a held-out set).
"""

from __future__ import annotations

import argparse
import random
import time
from collections import defaultdict
from typing import Any

__all__ = ["evaluate_formats", "format_summary", "main"]


def _draw(seed: int, limit: int) -> dict[str, list[Any]]:
    """``limit`` RAG conversations, first tool turns and answer tool turns (seeded)."""
    from experiments.testbed.formats import rag_example, tool_example
    from experiments.testbed.problems_v2 import generate_problem

    rng = random.Random(seed)
    rag = [rag_example(generate_problem(rng), rng, slip_rate=0.0) for _ in range(limit)]
    first = [tool_example(rng, first_turn_share=1.0) for _ in range(limit)]
    answers: list[Any] = []
    while len(answers) < limit:
        conversation = tool_example(rng)
        if conversation.messages[-1]["role"] == "tool":
            answers.append(conversation)
    return {"rag": rag, "first": first, "answer": answers}


def _expected_call(conversation: Any) -> dict[str, Any] | None:
    from mfs_core.tools.parsers import parse_hermes

    calls = parse_hermes("\n".join(line for line, _ in conversation.target)).tool_calls
    return {"name": calls[0].name, "arguments": calls[0].arguments} if calls else None


def evaluate_formats(backend: Any, tokenizer: Any, seed: int = 4242, limit: int = 60, max_tokens: int = 200,
                     chunk: int = 8) -> dict[str, Any]:
    """Greedy RAG and tool-use results of the model behind ``backend``.

    Args:
        backend: a :class:`~mfs_core.backends.transformers.TransformersBackend`.
        tokenizer: its tokenizer (renders the conversations).
        seed: seed of the drawn conversations.
        limit: conversations of each kind (RAG, first tool turn, answer tool turn).
        max_tokens: greedy budget per completion (tokens).
        chunk: prompts per batched ``generate`` call.

    Returns:
        ``{"rag": [right, total], "rag_by_style": {style: [right, total]},
        "first_action": [...], "tool_name": [...], "tool_answer": [...], "examples": {...}}``
        (counts of conversations), plus one example completion per kind.
    """
    from mfs_core.answers import extract_answer
    from experiments.testbed.train_v2 import render_prompt
    from mfs_core.tools.parsers import parse_hermes
    from mfs_core.types import GenerationRequest

    drawn = _draw(seed, limit)
    counts: dict[str, list[int]] = {k: [0, 0] for k in ("rag", "first_action", "tool_name", "tool_answer")}
    by_style: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    examples: dict[str, str] = {}
    for kind, conversations in drawn.items():
        prompts = [render_prompt(tokenizer, c) for c in conversations]
        texts: list[str] = []
        for lo in range(0, len(prompts), chunk):
            requests = [GenerationRequest(p, n=1, max_tokens=max_tokens, greedy=True) for p in prompts[lo:lo + chunk]]
            texts += [result[0].text for result in backend.generate(requests)]
        examples[kind] = texts[0]
        for conversation, text in zip(conversations, texts):
            if kind == "rag":
                gold = extract_answer("\n".join(line for line, _ in conversation.target))
                right = extract_answer(text) == gold
                counts["rag"][0] += right
                counts["rag"][1] += 1
                by_style[conversation.meta["style"]][0] += right
                by_style[conversation.meta["style"]][1] += 1
            elif kind == "first":
                expected = _expected_call(conversation)
                calls = parse_hermes(text).tool_calls
                got = {"name": calls[0].name, "arguments": calls[0].arguments} if calls else None
                counts["first_action"][0] += got == expected
                counts["first_action"][1] += 1
                if expected is not None:
                    counts["tool_name"][0] += got is not None and got["name"] == expected["name"]
                    counts["tool_name"][1] += 1
            else:
                counts["tool_answer"][0] += extract_answer(text) == str(conversation.meta["answer"])
                counts["tool_answer"][1] += 1
    return {**counts, "rag_by_style": dict(by_style), "examples": examples}


def format_summary(summary: dict[str, Any], title: str) -> str:
    """A plain-text table: one row per measure with its share, 95% Wilson interval and counts."""
    from experiments.testbed.evaluate import share_row

    rows = [f"{title}", f"{'measure':<28} {'share':>7} {'95% CI':>15} {'count':>9}"]
    names = [("rag", "RAG answer")] + [(f"rag:{s}", f"  RAG, {s}") for s in sorted(summary["rag_by_style"])] + [
        ("first_action", "first action"), ("tool_name", "tool name (calls)"), ("tool_answer", "answer from tool result")]
    for key, label in names:
        right, total = summary["rag_by_style"][key[4:]] if key.startswith("rag:") else summary[key]
        rows.append(share_row(label, right, total))
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: evaluate, print the table, optionally write JSON."""
    from experiments.testbed.evaluate import add_run_arguments, finish_run, load_backend, parse_run_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser, limit=60, limit_help="conversations of each kind", seed=4242)
    args = parse_run_arguments(parser, argv)
    backend = load_backend(args.model, args.threads)
    start = time.perf_counter()
    summary = evaluate_formats(backend, backend.tokenizer, seed=args.seed, limit=args.limit,
                               max_tokens=args.max_tokens, chunk=args.chunk)
    finish_run(summary, args.model, start,
               format_summary(summary, f"{args.model}, seed {args.seed}, {args.limit} conversations of each kind"), args.json)
    return summary


if __name__ == "__main__":
    main()
