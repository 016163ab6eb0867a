"""The engine-speed section shows the kept rows measurement as written: a hand-made one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.results_speed import speed_lines


def test_the_speed_table_shows_each_decode_and_the_ratio_at_its_rows(tmp_path: Path) -> None:
    assert speed_lines(tmp_path) == []
    run = tmp_path / "qwen2.5-coder-0.5b" / "engine-rows-gsm8k-0-15"
    run.mkdir(parents=True)
    rows = [{"method": "mfs M = N = 4", "questions": 16, "rows_mean": 29.5, "rows_peak": 256, "seconds": 300.0,
             "generated_tokens": 45000, "tokens_per_s": 100.0, "errors": 0},
            {"method": "sc k = 1", "questions": 16, "rows_mean": 12.0, "rows_peak": 16, "seconds": 60.0,
             "generated_tokens": 4584, "tokens_per_s": 76.4, "errors": 0},
            {"method": "sc k = 4", "questions": 16, "rows_mean": 47.0, "rows_peak": 64, "seconds": 116.4,
             "generated_tokens": 17425, "tokens_per_s": 149.7, "errors": 0}]
    (run / "qwen-speed.json").write_text(json.dumps({"scheduling": "continuous", "dtype": "auto", "omp_binding": "0,1",
                                                     "rows": rows}))
    lines = speed_lines(tmp_path)
    assert lines[0] == ("## Engine speed: Qwen2.5-Coder-0.5B-Instruct, `mfs` against plain batched sampling "
                        "(the worker bound to CPUs 0,1)")
    assert "The first 16 GSM8K questions" in lines[2] and "`VLLM_CPU_OMP_THREADS_BIND=0,1`" in lines[2]
    # MFS's 29.5 mean rows lie between plain sampling's 12 and 47: weight ln(29.5 / 12) / ln(47 / 12) = 0.6587,
    # so plain sampling gives 76.4 + 0.6587 x 73.3 = 124.7 tokens/s there, and 100.0 / 124.7 = 0.80.
    assert lines[-4:] == ["| mfs M = N = 4 | 29.5 (256) | 300.0 | 45,000 | 100.0 | 124.7 | 0.80 |",
                          "| sc k = 1 | 12.0 (16) | 60.0 | 4,584 | 76.4 |  |  |",
                          "| sc k = 4 | 47.0 (64) | 116.4 | 17,425 | 149.7 |  |  |", ""]


def test_plain_sampling_is_read_at_a_rows_count_in_log_rows_and_held_beyond_the_points() -> None:
    from experiments.benchmarks.qwen_speed import plain_at_rows

    points = [(47.0, 149.7), (12.0, 76.4), (188.0, 212.9)]  # any order
    assert plain_at_rows(94.0, points) == pytest.approx(149.7 + 0.5 * (212.9 - 149.7))  # halfway in log rows
    assert plain_at_rows(5.0, points) == 76.4 and plain_at_rows(400.0, points) == 212.9
    with pytest.raises(ValueError, match="rows > 0"):
        plain_at_rows(10.0, [])


def test_the_binding_table_pairs_the_runs_and_says_which_do_not_count(tmp_path: Path) -> None:
    from experiments.results_speed import BINDINGS, binding_lines

    assert binding_lines(tmp_path) == []
    folder = tmp_path / BINDINGS
    folder.mkdir(parents=True)

    def run(name: str, one: float, rows: float, tokens: int, seconds: float) -> None:
        speed = [{"rows": 1, "tokens_per_s": one}, {"rows": 32, "tokens_per_s": rows}]
        (folder / f"{name}.json").write_text(json.dumps({"speed": speed, "batch": {"output_tokens": tokens,
                                                                                    "seconds": seconds}}))

    run("both", 12.0, 200.0, 10000, 100.0)
    run("default", 8.0, 160.0, 9000, 120.0)
    (folder / "pairs.json").write_text(json.dumps([{"pair": 1, "first": "both", "both": "both", "default": "default",
                                                    "counted": False, "why": "a stray worker"}]))
    # 200 / 160 = 1.25 at 32 rows; MFS 10,000 / 100 = 100.0 against 9,000 / 120 = 75.0 tokens/s: 1.33.
    assert binding_lines(tmp_path)[-2] == ("| 1 | both CPUs | 12.0 / 8.0 | 200.0 / 160.0 | 1.25 | 100.0 / 75.0 | 1.33 | "
                                           "no: a stray worker |")
