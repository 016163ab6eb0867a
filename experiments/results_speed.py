"""The results page's engine-speed section: output tokens/s under MFS against plain batched sampling.

Read from the kept output of ``experiments/benchmarks/qwen_speed.py --parts rows`` (its ``--out`` JSON, key
``rows``) under ``experiments/records/<model>/engine-rows-*/qwen-speed.json``. Each decode's generated tokens
and rows in flight are vLLM's own counters, read by the benchmark; nothing here measures. A model without a
kept measurement adds nothing. Used by :mod:`experiments.results`.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["SPEEDS", "TARGET", "speed_lines"]

SPEEDS = (("qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct"),)
"""``(records folder under experiments/records, model name shown)``."""
TARGET = 0.8
"""The issue's target: MFS's engine tok/s at least this share of plain batched sampling's at its rows."""


def speed_lines(root: Path) -> list[str]:
    """One table per kept measurement: each decode's rows in flight (mean and peak), wall seconds, generated
    tokens and tokens/s, and each MFS row's ratio to plain sampling (``sc``) at the nearest mean rows, against
    :data:`TARGET`. Empty when nothing is kept.

    Raises:
        KeyError: a kept JSON without a ``rows`` list (not the rows part's output).
    """
    lines: list[str] = []
    for folder, name in SPEEDS:
        for run_dir in sorted((root / folder).glob("engine-rows-*")):
            path = run_dir / "qwen-speed.json"
            if not path.exists():
                continue
            out = json.loads(path.read_text(encoding="utf-8"))
            rows = out["rows"]
            questions = rows[0]["questions"] if rows else 0
            lines += [f"## Engine speed: {name}, `mfs` against plain batched sampling", "",
                      (f"The first {questions} GSM8K questions decoded together by each method (vLLM's CPU build, "
                       f"{out.get('scheduling', '?')} scheduling, dtype {out.get('dtype', '?')}), one decode after "
                       "another on one engine: vLLM's generated tokens per wall second, and the requests it ran at "
                       "once (its running-requests gauge, read every 0.25 s). Plain sampling is `sc`, every sample "
                       "of every question submitted at once; each `mfs` row is divided by the plain decode whose "
                       f"mean rows are nearest its own (target: at least {TARGET}). From "
                       f"`experiments/benchmarks/qwen_speed.py --parts rows`."), "",
                      "| decode | rows in flight, mean (peak) | wall s | generated tokens | tokens / s | "
                      "÷ plain sampling at its rows |", "| --- | --- | --- | --- | --- | --- |"]
            for row in rows:
                ratio = (f"{row['vs_sc']['ratio']:.2f} (÷ {row['vs_sc']['sc']})" if "vs_sc" in row else "")
                lines.append(f"| {row['method']} | {row['rows_mean']:.1f} ({row['rows_peak']}) | {row['seconds']:.1f} | "
                             f"{row['generated_tokens']:,} | {row['tokens_per_s']:.1f} | {ratio} |")
            lines.append("")
    return lines
