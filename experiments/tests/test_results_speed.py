"""The engine-speed section shows the kept rows measurement as written: a hand-made one."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.results_speed import speed_lines


def test_the_speed_table_shows_each_decode_and_the_ratio_at_its_rows(tmp_path: Path) -> None:
    assert speed_lines(tmp_path) == []
    run = tmp_path / "qwen2.5-coder-0.5b" / "engine-rows-gsm8k-0-15"
    run.mkdir(parents=True)
    rows = [{"method": "mfs M = N = 4", "questions": 16, "rows_mean": 120.4, "rows_peak": 256, "seconds": 300.0,
             "generated_tokens": 45000, "tokens_per_s": 150.0, "errors": 0,
             "vs_sc": {"sc": "sc k = 16", "ratio": 0.94}},
            {"method": "sc k = 16", "questions": 16, "rows_mean": 140.2, "rows_peak": 256, "seconds": 420.5,
             "generated_tokens": 67000, "tokens_per_s": 159.3, "errors": 0}]
    (run / "qwen-speed.json").write_text(json.dumps({"scheduling": "continuous", "dtype": "auto", "rows": rows}))
    lines = speed_lines(tmp_path)
    assert lines[0] == "## Engine speed: Qwen2.5-Coder-0.5B-Instruct, `mfs` against plain batched sampling"
    assert "The first 16 GSM8K questions" in lines[2] and "continuous scheduling" in lines[2]
    assert lines[-3:] == ["| mfs M = N = 4 | 120.4 (256) | 300.0 | 45,000 | 150.0 | 0.94 (÷ sc k = 16) |",
                          "| sc k = 16 | 140.2 (256) | 420.5 | 67,000 | 159.3 |  |", ""]
