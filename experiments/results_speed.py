"""The results page's engine-speed section: output tokens/s under MFS against plain batched sampling.

Read from the kept output of ``experiments/benchmarks/qwen_speed.py --parts rows`` (its ``--out`` JSON, key
``rows``) under ``experiments/records/<model>/engine-rows-*/qwen-speed.json``. Each decode's generated tokens
and rows in flight are vLLM's own counters, read by the benchmark; nothing here measures. A model without a
kept measurement adds nothing. Used by :mod:`experiments.results`.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["BINDINGS", "SPEEDS", "TARGET", "binding_lines", "speed_lines"]

SPEEDS = (("qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct"),)
"""``(records folder under experiments/records, model name shown)``."""
BINDINGS = "qwen2.5-coder-0.5b/vllm-cpu-binding"
"""Folder of the thread-binding A/B: ``pairs.json`` (which runs pair, which ran first, which count) and each run's
``qwen_speed.py --parts speed,batch`` JSON."""
TARGET = 0.8
"""The issue's target: MFS's engine tok/s at least this share of plain batched sampling's at its rows."""


def speed_lines(root: Path) -> list[str]:
    """One table per kept measurement: each decode's rows in flight (mean and peak), wall seconds, generated
    tokens and tokens/s; for each MFS row, plain sampling's tokens/s at its mean rows
    (:func:`~experiments.benchmarks.qwen_speed.plain_at_rows` over the ``sc`` decodes) and the ratio, against
    :data:`TARGET`. Empty when nothing is kept.

    Raises:
        KeyError: a kept JSON without a ``rows`` list (not the rows part's output).
    """
    from experiments.benchmarks.qwen_speed import plain_at_rows

    lines: list[str] = []
    for folder, name in SPEEDS:
        for run_dir in sorted((root / folder).glob("engine-rows-*")):
            path = run_dir / "qwen-speed.json"
            if not path.exists():
                continue
            out = json.loads(path.read_text(encoding="utf-8"))
            rows = out["rows"]
            questions = rows[0]["questions"] if rows else 0
            binding = out.get("omp_binding", "not recorded")
            plain = [(row["rows_mean"], row["tokens_per_s"]) for row in rows if row["method"].startswith("sc")]
            where = "vLLM's own thread binding" if binding == "auto" else f"the worker bound to CPUs {binding}"
            lines += [f"## Engine speed: {name}, `mfs` against plain batched sampling ({where})", "",
                      (f"The first {questions} GSM8K questions decoded together by each method (vLLM's CPU build, "
                       f"{out.get('scheduling', '?')} scheduling, dtype {out.get('dtype', '?')}, "
                       f"`VLLM_CPU_OMP_THREADS_BIND={binding}`), one decode after another on one engine: vLLM's "
                       "generated tokens per wall second, and the requests it ran at once (its running-requests "
                       "gauge, read every 0.25 s). Plain sampling is `sc`, every sample of every question submitted "
                       "at once; each `mfs` row is compared with plain sampling at its mean rows, linear in log rows "
                       f"between the plain decodes around it (target: a ratio of at least {TARGET}). From "
                       "`experiments/benchmarks/qwen_speed.py --parts rows`."), "",
                      ("| decode | rows in flight, mean (peak) | wall s | generated tokens | tokens / s | "
                      "plain sampling at its rows, tokens / s | ratio |"), "| --- | --- | --- | --- | --- | --- | --- |"]
            for row in rows:
                at_rows = " | "
                if row["method"].startswith("mfs") and plain:
                    expected = plain_at_rows(row["rows_mean"], plain)
                    at_rows = f"{expected:.1f} | {row['tokens_per_s'] / expected:.2f}"
                lines.append(f"| {row['method']} | {row['rows_mean']:.1f} ({row['rows_peak']}) | {row['seconds']:.1f} | "
                             f"{row['generated_tokens']:,} | {row['tokens_per_s']:.1f} | {at_rows} |")
            lines.append("")
    return lines


def binding_lines(root: Path) -> list[str]:
    """The thread-binding A/B, pair by pair: greedy tokens/s at 1 and 32 rows and the 12 MFS decodes' tokens/s
    (output tokens / wall seconds), with vLLM's CPU worker on both CPUs against vLLM's own binding, and the ratio.
    Empty when the folder is not kept.
    """
    folder = root / BINDINGS
    if not (folder / "pairs.json").exists():
        return []
    lines = ["## vLLM's CPU worker on both CPUs against vLLM's own thread binding", "",
             ("Qwen2.5-Coder-0.5B-Instruct, vLLM's CPU build in bfloat16, continuous scheduling, 2 CPUs: "
              "`experiments/benchmarks/qwen_speed.py --parts speed,batch` with `VLLM_CPU_OMP_THREADS_BIND=0-1` and "
              "with `auto`, one right after the other in each pair. Compare within a pair: the machine's speed drifted "
              "upward from pair to pair, which favours the run that went second. A pair not counted says why."), "",
             "| pair | ran first | greedy, 1 row: tokens / s, both / vLLM's | greedy, 32 rows | ratio | "
             "12 MFS decodes (M = N = 2): tokens / s | ratio | counted |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for pair in json.loads((folder / "pairs.json").read_text(encoding="utf-8")):
        both, default = (json.loads((folder / f"{pair[k]}.json").read_text(encoding="utf-8")) for k in ("both", "default"))
        one, rows = ((both["speed"][i]["tokens_per_s"], default["speed"][i]["tokens_per_s"]) for i in (0, 1))
        mfs = [run["batch"]["output_tokens"] / run["batch"]["seconds"] for run in (both, default)]
        first = "both CPUs" if pair["first"] == "both" else "vLLM's binding"
        lines.append(f"| {pair['pair']} | {first} | {one[0]:.1f} / {one[1]:.1f} | {rows[0]:.1f} / {rows[1]:.1f} | "
                     f"{rows[0] / rows[1]:.2f} | {mfs[0]:.1f} / {mfs[1]:.1f} | {mfs[0] / mfs[1]:.2f} | "
                     f"{'yes' if pair['counted'] else 'no: ' + pair['why']} |")
    return [*lines, ""]
