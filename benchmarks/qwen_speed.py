"""Qwen2.5-Coder-0.5B-Instruct on CPU: convert time, output tokens/s, greedy GSM8K (issue 38, item 2).

* ``convert``: joining the six parts (with the SHA-256 check) and converting the GGUF file to
  the float32 safetensors folder, in a fresh temporary cache (seconds).
* ``speed``: greedy decoding (``method="cot"``) through the engine on the transformers backend
  (``--backend vllm``: vLLM's CPU build) of the first GSM8K questions, 1 row and ``--rows`` rows
  at once, ``--speed-tokens`` output tokens at most: output tokens per wall second.
* ``gsm8k``: greedy decoding of the first ``--questions`` GSM8K questions with the model's own
  chat template and Qwen's math system prompt ("Please reason step by step, and put your final
  answer within \\boxed{}."), ``--max-answer-tokens`` at most; accuracy and the share of
  answers the extraction reads (95% Wilson intervals).

Usage (niced, on 2 cores)::

    nice -n 15 python benchmarks/qwen_speed.py --parts convert,speed,gsm8k --questions 100 \\
        --data-dir ../shared/data --out bench-results/qwen-speed.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from mfs_core import MFSEngine, MFSSettings
from mfs_core.bench.datasets import load_dataset
from mfs_core.bench.report import wilson_interval
from mfs_core.bench.runner import score_result
from mfs_core.models import PACKAGED_MODELS, assemble_parts, convert_gguf

MODEL = "qwen2.5-coder-0.5b-instruct"
SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


def measure_convert() -> dict[str, float]:
    """Seconds to join and check the parts, and to convert them, in a fresh cache."""
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        gguf = assemble_parts(MODEL, PACKAGED_MODELS[MODEL], Path(cache))
        joined = time.perf_counter()
        convert_gguf(gguf, Path(cache))
        done = time.perf_counter()
    return {"join_and_check_s": round(joined - start, 1), "convert_s": round(done - joined, 1)}


def _prompts(engine: MFSEngine, questions: list[str]) -> list[str]:
    return [engine.backend.apply_chat_template([{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}])
            for q in questions]


def measure_speed(engine: MFSEngine, questions: list[str], rows: int, tokens: int) -> dict[str, float]:
    """Greedy output tokens per second with ``rows`` prompts decoded together."""
    settings = engine.settings.model_copy(update={"max_answer_tokens": tokens})
    prompts = _prompts(engine, questions[:rows])
    start = time.perf_counter()
    results = engine.decode_prompts(prompts, settings=settings, method="cot")
    seconds = time.perf_counter() - start
    output = sum(r.output_tokens for r in results)
    return {"rows": rows, "output_tokens": output, "seconds": round(seconds, 1), "tokens_per_s": round(output / seconds, 2)}


def measure_gsm8k(engine: MFSEngine, questions: int, data_dir: Path | None, batch: int) -> dict[str, Any]:
    """Greedy accuracy and parse rate on the first ``questions`` GSM8K questions."""
    data = load_dataset("gsm8k", data_dir=data_dir, limit=questions)
    correct = parsed = tokens = 0
    rows = []
    start = time.perf_counter()
    for first in range(0, len(data.examples), batch):
        chunk = data.examples[first:first + batch]
        results = engine.decode_prompts(_prompts(engine, [e.question for e in chunk]), method="cot")
        for example, result in zip(chunk, results):
            _, right = score_result(data.kind, result, example.target, engine.settings, "cot", example.question)
            correct += right
            parsed += result.answer is not None
            tokens += result.output_tokens
            rows.append({"target": example.target, "answer": result.answer, "right": bool(right),
                         "output_tokens": result.output_tokens, "text": result.text[-400:]})
        print(f"{len(rows)}/{len(data.examples)}: {correct} right, {parsed} parsed, "
              f"{time.perf_counter() - start:.0f} s", flush=True)
    n = len(rows)
    return {"questions": n, "correct": correct, "accuracy_ci": wilson_interval(correct, n), "parsed": parsed,
            "parsed_ci": wilson_interval(parsed, n), "tokens_per_question": tokens / n,
            "seconds": round(time.perf_counter() - start, 1), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="convert,speed,gsm8k")
    parser.add_argument("--backend", default="transformers")
    parser.add_argument("--rows", type=int, default=32, help="rows of the batched speed measurement")
    parser.add_argument("--speed-tokens", type=int, default=64)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--batch", type=int, default=16, help="GSM8K questions decoded together")
    parser.add_argument("--max-answer-tokens", type=int, default=400)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("bench-results/qwen-speed.json"))
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    out: dict[str, Any] = {"model": MODEL, "backend": args.backend}

    def save() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1))

    if "convert" in parts:
        out["convert"] = measure_convert()
        print(out["convert"], flush=True)
        save()
    settings = MFSSettings(model=MODEL, backend=args.backend, device="cpu", max_answer_tokens=args.max_answer_tokens,
                           assistant_prefix="", seed=0)
    with MFSEngine.from_settings(settings) as engine:
        if "speed" in parts:
            questions = [e.question for e in load_dataset("gsm8k", data_dir=args.data_dir, limit=args.rows).examples]
            out["speed"] = [measure_speed(engine, questions, rows, args.speed_tokens) for rows in (1, args.rows)]
            print(out["speed"], flush=True)
            save()
        if "gsm8k" in parts:
            out["gsm8k"] = measure_gsm8k(engine, args.questions, args.data_dir, args.batch)
            print({k: v for k, v in out["gsm8k"].items() if k != "rows"}, flush=True)
            save()


if __name__ == "__main__":
    main()
