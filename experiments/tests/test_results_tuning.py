"""The tuning section applies the pre-registered rule to kept records: hand-made runs, hand-computed verdicts."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.results import keep
from experiments.results_tuning import TUNING, tuning_lines


def _record(method: str, index: int, correct: bool, tokens: float, **extra: object) -> dict:
    return {"method": method, "decoder": method, "index": index, "id": str(index), "target": 7.0, "correct": correct,
            "prediction": "7" if correct else "8", "output_tokens": tokens, "prompt_tokens": 10, "flops": 6.0 * tokens,
            "elapsed_seconds": 1.0, "generate_seconds": 1.0, "error": None, **extra}


def _run(root: Path, questions: int, error_at: int | None = None) -> Path:
    """A tuning run on ``questions`` questions. SC's 16 samples (100 tokens each) agree within a question and are
    right on questions 0-59, so its curve is flat at 60 right from k = 1 (100 tokens) to 16 (1,600). Each method
    is right on questions 0 to its count - 1, at a fixed number of tokens; ``mfs`` fails with an error on
    ``error_at``, which every method answers wrong."""
    live = [_record("sc", i, i < 60, 1600.0, sc_k=16, sample_predictions=["7" if i < 60 else "8"] * 16,
                    sample_qualities=[-0.1] * 16) for i in range(questions)]
    for method, right, tokens in (("cot", 50, 100), ("mfs", 60, 1000), ("mfs-rules", 65, 1000),
                                  ("mfs-window", 63, 900)):
        live += [_record(method, i, i < right, tokens) for i in range(questions)]
    if error_at is not None:
        live = [{**r, "error": "RuntimeError: engine died"} if (r["method"], r["index"]) == ("mfs", error_at) else r
                for r in live]
    replayed = [_record(method, i, i < right, tokens) for method, right, tokens in
                (("esc", 60, 500), ("esc-rules", 66, 2000), ("sc-quality-vote", 65, 1600)) for i in range(questions)]
    run = root / "run"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"kind": "gsm"}), encoding="utf-8")
    (run / "records.jsonl").write_text("".join(json.dumps({**r, "text": "..."}) + "\n" for r in live), encoding="utf-8")
    (run / "replayed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in replayed), encoding="utf-8")
    return run


def test_the_tuning_table_applies_the_written_rule_to_the_kept_records(tmp_path: Path) -> None:
    run = _run(tmp_path, 200, error_at=199)
    kept = tmp_path / "records" / TUNING[0][0]
    assert keep(run, kept) == 200 * 5 + 200 * 3  # the live records and the replayed ones, texts dropped
    assert "text" not in json.loads((kept / "records.jsonl").read_text().splitlines()[0])
    lines = tuning_lines(tmp_path / "records")
    # 199 common questions (mfs's error drops 199). SC's curve is flat at 60 / 199, so a margin is (right - 60) / 199.
    assert "| 16 | 1,600 | 30.2 |" in lines and "| 1 | 100 | 30.2 |" in lines
    rows = {line.split(" | ")[0][2:]: line for line in lines if line.startswith("| ") and "/ 199" in line}
    assert rows["cot"] == "| cot |  | 50 / 199 | 100 | -5.0 | k = 1: 0 / 10, 0.002 |  |  |"
    assert rows["mfs"] == "| mfs |  | 60 / 199 | 1,000 | +0.0 | k = 10: 0 / 0, 1.000 |  | reference |"
    # +5 / 199 = +2.5 points >= 0 + 2, 65 >= 60, 1,000 <= 1,760 tokens: passes. 5 discordant, all its: p = 2 / 32.
    assert rows["mfs-rules"] == ("| mfs-rules | mfs | 65 / 199 | 1,000 | +2.5 | k = 10: 5 / 0, 0.062 | 5 / 0, 0.062 | "
                                 "passes |")
    assert rows["mfs-window"].endswith("| margin +0.0151 < reference +0.0000 + 0.02 |")  # 3 / 199
    assert rows["esc-rules"].endswith("| 2000 tokens/question > 1760 (1.1x SC at its largest k) |")
    assert rows["sc-quality-vote"].startswith("| sc-quality-vote | SC's curve | 65 / 199 | 1,600 | +2.5 |")
    assert rows["sc-quality-vote"].endswith("| passes |")
    assert "MFS rule kept: mfs-rules. Voting rule kept: sc-quality-vote." in lines


def test_a_run_short_of_the_rules_questions_has_no_verdict_and_no_run_adds_nothing(tmp_path: Path) -> None:
    assert tuning_lines(tmp_path / "records") == []
    keep(_run(tmp_path, 20), tmp_path / "records" / TUNING[0][0])
    lines = tuning_lines(tmp_path / "records")
    assert "No verdict: 20 questions decoded by every method, the rule needs 190." in lines
    assert not any(line.startswith("MFS rule kept") for line in lines)
