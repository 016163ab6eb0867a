"""Qwen2.5-Coder-0.5B-Instruct on CPU: convert time, output tokens/s, greedy GSM8K.

* ``convert``: joining the six parts (with the SHA-256 check) and converting the GGUF file to
  the float32 safetensors folder, in a fresh temporary cache (seconds).
* ``speed``: greedy decoding (``method="cot"``) through the engine on the transformers backend
  (``--backend vllm``: vLLM's CPU build) of the first GSM8K questions, 1 row and ``--rows`` rows
  at once, ``--speed-tokens`` output tokens at most: output tokens per wall second.
* ``gsm8k``: greedy decoding of the first ``--questions`` GSM8K questions with the model's own
  chat template and Qwen's math system prompt ("Please reason step by step, and put your final
  answer within \\boxed{}."), ``--max-answer-tokens`` at most; accuracy and the share of
  answers the extraction reads (95% Wilson intervals).
* ``greedy``: greedy CoT (``mfs bench``'s ``cot``, its prompts: the release's system prompt of
  GSM8K and ARC-C; on the demo held-out problems Qwen's math system prompt above, since the demo
  set has none) on the first ``--questions`` questions of each of ``--datasets``, through
  :func:`mfs_core.bench.runner.run_bench` with one engine (records under ``--runs-dir``, resumable),
  and the task whose greedy accuracy is nearest 50%.
* ``mfs``: one GSM8K question decoded by MFS at M = N = 2 and M = N = 4: wall seconds, output
  tokens, and vLLM's prefix-cache hit rate over the decode (``--backend vllm`` only; vLLM's
  ``prefix_cache_hits`` / ``prefix_cache_queries`` counters, in tokens).
* ``batch``: the first ``--batch-questions`` GSM8K questions decoded by MFS together (``mfs bench``'s
  ``mfs`` through :func:`~mfs_core.bench.runner.run_bench`, all in flight at once, M = N =
  ``--batch-width``), under the engine's ``--scheduling`` (lockstep against continuous):
  wall seconds, seconds per question, output tokens, the prefix-cache hit rate and each answer.
* ``rows``: the engine's output tokens per second under MFS against plain batched sampling at about the same
  rows in flight. The first ``--rows-questions`` GSM8K questions are decoded together by ``mfs`` at M = N =
  ``--batch-width`` and by ``sc`` at each k of ``--rows-ks`` (every sample of every question submitted at once),
  through :func:`~mfs_core.bench.runner.run_bench` with all questions in flight. For each decode: vLLM's
  generated tokens (its ``vllm:generation_tokens`` counter) per wall second, and the rows in flight (its
  ``vllm:num_requests_running`` gauge, read every 0.25 s: mean and peak); then each ``mfs`` row's tok/s divided by
  plain sampling's at the same mean rows, interpolated between the ``sc`` decodes (``--backend vllm`` only).
* ``--compare A.json B.json``: no decoding; how many greedy GSM8K answers (the ``greedy`` part's
  records) and texts two runs share, and each run's accuracy (bfloat16 against float32).

``--dtype`` and ``--scheduling`` are the engine's settings (``auto``: the library's rule for the
machine); ``--block-size`` is vLLM's KV-cache block (tokens; default: the library's).

Usage (niced, on 2 cores)::

    nice -n 15 python experiments/benchmarks/qwen_speed.py --parts convert,speed,gsm8k --questions 100 \\
        --data-dir ../shared/data --out bench-results/qwen-speed.json
    # the rows part, alone on the machine (its timings are the point); kept for the results page:
    VLLM_CPU_KVCACHE_SPACE=6 python experiments/benchmarks/qwen_speed.py --parts rows --backend vllm \\
        --scheduling continuous --batch-width 4 --rows-questions 16 --rows-ks 1,4,16 --data-dir ../shared/data \\
        --runs-dir bench-results/rows --out experiments/records/qwen2.5-coder-0.5b/engine-rows-gsm8k-0-15/qwen-speed.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mfs_core import MFSEngine, MFSSettings
from mfs_core.bench.datasets import load_dataset
from mfs_core.bench.report import wilson_interval
from mfs_core.bench.runner import parse_methods, run_bench, score_result
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


def measure_greedy(engine: MFSEngine, datasets: list[str], questions: int, data_dir: Path | None,
                   runs_dir: Path) -> dict[str, Any]:
    """Greedy CoT accuracy (95% Wilson interval), parse rate and output tokens per question per set.

    The demo set is decoded with :data:`SYSTEM` as its system prompt; the paper sets with the
    release's own (``mfs_core.bench.prompts``), as ``mfs bench`` renders them.
    """
    table: dict[str, Any] = {}
    for name in datasets:
        data = load_dataset(name, data_dir=data_dir, limit=questions)
        settings = engine.settings.model_copy(update={"system_prompt": SYSTEM if data.kind == "demo" else None})
        start = time.perf_counter()
        records = run_bench(engine, data, parse_methods("cot"), runs_dir / f"greedy-{name}", settings=settings,
                            concurrency=32)
        n = len(records)
        correct = sum(bool(r["correct"]) for r in records)
        parsed = sum(r.get("prediction") is not None for r in records)
        table[name] = {"questions": n, "correct": correct, "accuracy_ci": wilson_interval(correct, n),
                       "parsed": parsed, "parsed_ci": wilson_interval(parsed, n),
                       "tokens_per_question": round(sum(r["output_tokens"] for r in records) / n, 1),
                       "seconds": round(time.perf_counter() - start, 1)}
        print(name, table[name], flush=True)
    table["nearest_50"] = min(datasets, key=lambda d: abs(table[d]["correct"] / table[d]["questions"] - 0.5))
    return table


def _prefix_counters(engine: MFSEngine) -> dict[str, float]:
    """vLLM's prefix-cache counters (tokens) of this process, from its Prometheus registry (both the
    ``LLM`` and the ``AsyncLLM`` backend register them there; empty on other backends)."""
    if getattr(engine.backend, "llm", None) is None:
        return {}
    from vllm.v1.metrics.reader import get_metrics_snapshot

    return {m.name: float(m.value) for m in get_metrics_snapshot()
            if m.name in ("vllm:prefix_cache_hits", "vllm:prefix_cache_queries")}


def measure_mfs(engine: MFSEngine, question: str, widths: tuple[int, ...] = (2, 4)) -> list[dict[str, Any]]:
    """Wall seconds, output tokens and prefix-cache hit rate of one MFS decode at each M = N of ``widths``."""
    rows = []
    for width in widths:
        settings = engine.settings.model_copy(update={"step_beam_size": width, "num_rollouts": width})
        before = _prefix_counters(engine)
        start = time.perf_counter()
        result = engine.decode_prompts(_prompts(engine, [question]), settings=settings, method="mfs")[0]
        seconds = time.perf_counter() - start
        after = _prefix_counters(engine)
        row: dict[str, Any] = {"M=N": width, "seconds": round(seconds, 1), "output_tokens": result.output_tokens,
                               "steps": len(result.steps), "answer": result.answer}
        queries = after.get("vllm:prefix_cache_queries", 0.0) - before.get("vllm:prefix_cache_queries", 0.0)
        if queries:
            hits = after["vllm:prefix_cache_hits"] - before["vllm:prefix_cache_hits"]
            row["prefix_cache_hit_rate"] = round(hits / queries, 3)
        rows.append(row)
        print(row, flush=True)
    return rows


def measure_batch(engine: MFSEngine, questions: int, width: int, data_dir: Path | None,
                  runs_dir: Path) -> dict[str, Any]:
    """Wall seconds of ``questions`` GSM8K questions decoded by MFS together (M = N = ``width``).

    Every question is in flight at once (``concurrency=questions``); the records go to a fresh
    ``runs_dir`` (an existing one is refused, so a rerun never resumes and times nothing).
    """
    if runs_dir.exists():
        msg = f"{runs_dir} exists: the batch part times a fresh run, remove it first"
        raise ValueError(msg)
    data = load_dataset("gsm8k", data_dir=data_dir, limit=questions)
    settings = engine.settings.model_copy(update={"step_beam_size": width, "num_rollouts": width})
    before = _prefix_counters(engine)
    start = time.perf_counter()
    records = run_bench(engine, data, parse_methods("mfs"), runs_dir, settings=settings, concurrency=questions,
                        warmup=False)
    seconds = time.perf_counter() - start
    after = _prefix_counters(engine)
    row: dict[str, Any] = {"scheduling": engine.settings.scheduling, "questions": len(records), "M=N": width,
                           "seconds": round(seconds, 1), "seconds_per_question": round(seconds / len(records), 1),
                           "output_tokens": sum(r["output_tokens"] for r in records),
                           "correct": sum(bool(r["correct"]) for r in records),
                           "answers": [r.get("prediction") for r in records]}
    queries = after.get("vllm:prefix_cache_queries", 0.0) - before.get("vllm:prefix_cache_queries", 0.0)
    if queries:
        row["prefix_cache_hit_rate"] = round((after["vllm:prefix_cache_hits"] - before["vllm:prefix_cache_hits"])
                                             / queries, 3)
    print(row, flush=True)
    return row


class _RowSampler:
    """Reads vLLM's ``vllm:num_requests_running`` gauge (rows in flight, summed over engines) every ``interval``
    seconds on a thread, between ``start()`` and ``stop()``; ``mean`` and ``peak`` of the readings."""

    def __init__(self, interval: float = 0.25) -> None:
        import threading

        self.interval, self.readings = interval, []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from vllm.v1.metrics.reader import get_metrics_snapshot

        while not self._done.wait(self.interval):
            self.readings.append(sum(float(m.value) for m in get_metrics_snapshot()
                                     if m.name == "vllm:num_requests_running"))

    def start(self) -> _RowSampler:
        self._thread.start()
        return self

    def stop(self) -> tuple[float, float]:
        """``(mean, peak)`` rows in flight over the readings (0, 0 with none)."""
        self._done.set()
        self._thread.join()
        return (sum(self.readings) / len(self.readings), max(self.readings)) if self.readings else (0.0, 0.0)


def _generated_tokens() -> float:
    """vLLM's generated-token counter of this process (every engine's, summed)."""
    from vllm.v1.metrics.reader import get_metrics_snapshot

    return sum(float(m.value) for m in get_metrics_snapshot() if m.name == "vllm:generation_tokens")


def plain_at_rows(rows: float, plain: Sequence[tuple[float, float]]) -> float:
    """Plain sampling's tokens/s at ``rows`` rows in flight: linear in log rows between the two measured
    ``(mean rows, tokens/s)`` points around it, the nearest point's beyond them.

    Example: points (12, 76.4) and (47, 149.7); at 29.5 rows the weight is ln(29.5 / 12) / ln(47 / 12) = 0.659,
    so 76.4 + 0.659 x 73.3 = 124.7 tokens/s.

    Raises:
        ValueError: no point, or a point with rows <= 0.
    """
    points = sorted(plain)
    if not points or points[0][0] <= 0:
        raise ValueError(f"need plain-sampling points with rows > 0, got {points}")
    if rows <= points[0][0]:
        return points[0][1]
    for (r0, t0), (r1, t1) in zip(points, points[1:]):
        if rows <= r1:
            weight = math.log(rows / r0) / math.log(r1 / r0) if r1 > r0 else 1.0
            return t0 + weight * (t1 - t0)
    return points[-1][1]


def measure_rows(engine: MFSEngine, questions: int, width: int, ks: tuple[int, ...], data_dir: Path | None,
                 runs_dir: Path) -> list[dict[str, Any]]:
    """The engine's generated tokens per wall second under ``mfs`` (M = N = ``width``) and under ``sc`` at each
    k of ``ks``, on the same ``questions`` GSM8K questions all in flight, with the rows each keeps in flight.

    Returns:
        One row per decode: ``method``, ``rows_mean`` / ``rows_peak`` (requests running in vLLM), ``seconds``
        (wall), ``generated_tokens`` (vLLM's counter), ``tokens_per_s``. The printed table adds, for each ``mfs``
        row, plain sampling's tok/s at its mean rows (:func:`plain_at_rows` over the ``sc`` rows) and the ratio.

    Raises:
        ValueError: ``runs_dir`` exists (a rerun would resume and time nothing), or the engine is not on vLLM.
    """
    if getattr(engine.backend, "llm", None) is None:
        raise ValueError(f"the rows part reads vLLM's metrics; the engine's backend is {engine.settings.backend!r}")
    if runs_dir.exists():
        raise ValueError(f"{runs_dir} exists: the rows part times fresh runs, remove it first")
    data = load_dataset("gsm8k", data_dir=data_dir, limit=questions)
    plan = [(f"mfs M = N = {width}", "mfs", {"step_beam_size": width, "num_rollouts": width}, 16)]
    plan += [(f"sc k = {k}", "sc", {}, k) for k in ks]
    rows: list[dict[str, Any]] = []
    for name, method, update, sc_k in plan:
        settings = engine.settings.model_copy(update=update)
        sampler, tokens_before, start = _RowSampler().start(), _generated_tokens(), time.perf_counter()
        records = run_bench(engine, data, parse_methods(method), runs_dir / name.replace(" ", ""), settings=settings,
                            concurrency=questions, sc_k=sc_k, warmup=False)
        seconds = time.perf_counter() - start
        mean, peak = sampler.stop()
        generated = _generated_tokens() - tokens_before
        row = {"method": name, "questions": len(records), "rows_mean": round(mean, 1), "rows_peak": round(peak),
               "seconds": round(seconds, 1), "generated_tokens": round(generated),
               "tokens_per_s": round(generated / seconds, 1), "errors": sum(r.get("error") is not None for r in records)}
        rows.append(row)
        print(row, flush=True)
    plain = [(row["rows_mean"], row["tokens_per_s"]) for row in rows if row["method"].startswith("sc")]
    print("| decode | rows in flight, mean (peak) | wall s | generated tokens | tok/s | plain sampling at its rows, tok/s | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        at_rows = ""
        if row["method"].startswith("mfs") and plain:
            expected = plain_at_rows(row["rows_mean"], plain)
            at_rows = f"{expected:.1f} | {row['tokens_per_s'] / expected:.2f}"
        print(f"| {row['method']} | {row['rows_mean']:.1f} ({row['rows_peak']}) | {row['seconds']:.1f} | "
              f"{row['generated_tokens']:,} | {row['tokens_per_s']:.1f} | {at_rows or ' | '} |", flush=True)
    return rows


def compare_greedy(first: Path, second: Path) -> dict[str, Any]:
    """Agreement of two runs' greedy GSM8K records (``greedy`` part, ``--runs-dir``/greedy-gsm8k).

    Returns:
        Questions in both, how many share the prediction and the whole text, how many are right
        in both / only the first / only the second, and each run's right count (95% Wilson interval).
    """
    def records(run: Path) -> dict[int, dict[str, Any]]:
        lines = (run / "greedy-gsm8k" / "records.jsonl").read_text().splitlines()
        return {r["index"]: r for r in map(json.loads, lines) if r["method"] == "cot" and r.get("error") is None}

    a, b = records(first), records(second)
    both = sorted(set(a) & set(b))
    right_a = sum(bool(a[i]["correct"]) for i in both)
    right_b = sum(bool(b[i]["correct"]) for i in both)
    return {"questions": len(both),
            "same_prediction": sum(a[i].get("prediction") == b[i].get("prediction") for i in both),
            "same_text": sum(a[i].get("text") == b[i].get("text") for i in both),
            "right_in_both": sum(bool(a[i]["correct"] and b[i]["correct"]) for i in both),
            "right_only_first": sum(bool(a[i]["correct"] and not b[i]["correct"]) for i in both),
            "right_only_second": sum(bool(b[i]["correct"] and not a[i]["correct"]) for i in both),
            str(first): {"correct": right_a, "accuracy_ci": wilson_interval(right_a, len(both))},
            str(second): {"correct": right_b, "accuracy_ci": wilson_interval(right_b, len(both))}}


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
    parser.add_argument("--block-size", type=int, default=None,
                        help="vLLM KV-cache block size in tokens (its CPU default: 128); prefix caching reuses whole blocks only")
    parser.add_argument("--datasets", default="gsm8k,arc-c,demo", help="sets of the greedy part")
    parser.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    parser.add_argument("--scheduling", default="lockstep", choices=["lockstep", "continuous"])
    parser.add_argument("--widths", default="2,4", help="M = N of the mfs part, comma-separated")
    parser.add_argument("--batch-questions", type=int, default=12, help="GSM8K questions of the batch part")
    parser.add_argument("--batch-width", type=int, default=2, help="M = N of the batch part")
    parser.add_argument("--rows-questions", type=int, default=16, help="GSM8K questions of the rows part")
    parser.add_argument("--rows-ks", default="1,4,16", help="SC's k of the rows part, comma-separated")
    parser.add_argument("--compare", type=Path, nargs=2, default=None, metavar=("RUNS_A", "RUNS_B"),
                        help="compare the greedy GSM8K records of two --runs-dir folders, decode nothing")
    parser.add_argument("--runs-dir", type=Path, default=Path("bench-results/qwen"), help="records of the greedy part")
    parser.add_argument("--out", type=Path, default=Path("bench-results/qwen-speed.json"))
    args = parser.parse_args()
    if args.compare:
        print(json.dumps(compare_greedy(*args.compare), indent=1))
        return
    parts = set(args.parts.split(","))
    out: dict[str, Any] = {"model": MODEL, "backend": args.backend, "dtype": args.dtype,
                           "scheduling": args.scheduling, "block_size": args.block_size}

    def save() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1))

    if "convert" in parts:
        out["convert"] = measure_convert()
        print(out["convert"], flush=True)
        save()
    vllm_kwargs: dict[str, Any] = ({"disable_log_stats": False}
                                   if args.backend == "vllm" and parts & {"mfs", "batch", "rows"} else {})
    if args.block_size:
        vllm_kwargs["block_size"] = args.block_size
    extra = {"vllm_kwargs": vllm_kwargs} if vllm_kwargs else {}
    settings = MFSSettings(model=MODEL, backend=args.backend, device="cpu", max_answer_tokens=args.max_answer_tokens,
                           assistant_prefix="", seed=0, dtype=args.dtype, scheduling=args.scheduling, **extra)
    with MFSEngine.from_settings(settings) as engine:
        if args.backend == "vllm":  # where vLLM's CPU worker ran (the library binds a 1-2 CPU machine's CPUs)
            out["omp_binding"] = os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "auto")
        if "speed" in parts:
            questions = [e.question for e in load_dataset("gsm8k", data_dir=args.data_dir, limit=args.rows).examples]
            out["speed"] = [measure_speed(engine, questions, rows, args.speed_tokens) for rows in (1, args.rows)]
            print(out["speed"], flush=True)
            save()
        if "gsm8k" in parts:
            out["gsm8k"] = measure_gsm8k(engine, args.questions, args.data_dir, args.batch)
            print({k: v for k, v in out["gsm8k"].items() if k != "rows"}, flush=True)
            save()
        if "greedy" in parts:
            out["greedy"] = measure_greedy(engine, args.datasets.split(","), args.questions, args.data_dir,
                                           args.runs_dir)
            save()
        if "mfs" in parts:
            question = load_dataset("gsm8k", data_dir=args.data_dir, limit=1).examples[0].question
            out["mfs"] = measure_mfs(engine, question, tuple(int(w) for w in args.widths.split(",")))
            save()
        if "batch" in parts:
            out["batch"] = measure_batch(engine, args.batch_questions, args.batch_width, args.data_dir,
                                         args.runs_dir / f"batch-{args.scheduling}-{args.dtype}")
            save()
        if "rows" in parts:
            out["rows"] = measure_rows(engine, args.rows_questions, args.batch_width,
                                       tuple(int(k) for k in args.rows_ks.split(",")), args.data_dir,
                                       args.runs_dir / f"rows-{args.scheduling}-{args.dtype}")
            save()


if __name__ == "__main__":
    main()
