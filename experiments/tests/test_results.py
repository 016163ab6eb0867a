"""The results page is what the kept records give: regenerated and compared, and its arithmetic on hand-made records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import results
from experiments.results import Section, _pooled, keep, method_table, render, section_records, stale


def test_the_page_the_plot_data_and_readme_are_what_the_records_give() -> None:
    rendered = render()
    assert {results.PAGE, results.README} <= set(rendered.files)
    assert stale(rendered) == [], "run: python -m experiments.results"
    for png in rendered.plots:
        assert png.exists(), png
        assert f"results/{png.name}" in rendered.files[results.PAGE]
    generated = {path.name for path in [*rendered.files, *rendered.plots] if path.parent == results.FIGURES}
    assert {path.name for path in results.FIGURES.iterdir()} == generated  # nothing left over from an older page


def _record(method: str, index: int, correct: bool, tokens: int, **extra: object) -> dict:
    return {"method": method, "decoder": method, "index": index, "id": str(index), "target": 7.0, "correct": correct,
            "prediction": "7" if correct else "8", "output_tokens": tokens, "prompt_tokens": 10, "flops": 6.0 * tokens,
            "elapsed_seconds": 1.0, "generate_seconds": 1.0, "error": None, **extra}


def _sc(method: str, index: int, predictions: list[str], tokens: int) -> dict:
    majority = max(set(predictions), key=predictions.count)
    return _record(method, index, majority == "7", tokens, sc_k=len(predictions), sample_predictions=predictions,
                   sample_qualities=[-0.1] * len(predictions))


def _folder(root: Path, name: str, records: list[dict]) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "config.json").write_text(json.dumps({"kind": "gsm"}), encoding="utf-8")
    (root / name / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def test_a_second_seed_extends_self_consistency_where_both_ran() -> None:
    records = [_sc("sc", 0, ["7", "8"], 20), _sc("sc", 1, ["8", "8"], 30), _sc("sc-seed1", 0, ["7", "7", "8"], 33)]
    pooled = _pooled(records, ("sc-seed1",))
    assert [r["method"] for r in pooled] == ["sc", "sc"]
    assert pooled[0]["sample_predictions"] == ["7", "8", "7", "7", "8"] and pooled[0]["sc_k"] == 5
    assert (pooled[0]["output_tokens"], pooled[0]["flops"]) == (53, 6.0 * 53)
    assert pooled[1] == records[1] and records[0]["sample_predictions"] == ["7", "8"]  # the input is not changed


def test_a_section_table_pairs_each_row_with_sc_at_its_tokens_and_with_greedy(tmp_path: Path) -> None:
    # Four questions. CoT right on 0, 1; the search right on 0, 2, 3 at 40 tokens; SC samples of 10 tokens each.
    cot = [_record("cot", i, i in (0, 1), 10) for i in range(4)]
    search = [_record("mfs", i, i in (0, 2, 3), 40) for i in range(4)]
    sc = [_sc("sc", i, ["7", "8", "8", "8"] if i else ["7", "7", "7", "8"], 40) for i in range(4)]
    _folder(tmp_path, "run", cot + search + sc)
    section = Section(slug="t", title="t", folders=("run",), methods=(("cot", "greedy"), ("mfs", "search")),
                      curves=(("sc", "SC"),))
    records, kind = section_records(section, tmp_path)
    table = method_table(section, records, kind)
    # SC at k = 4 (40 tokens / 10 per sample): right on question 0 only; the search only 2, 3; SC only none.
    # Greedy against SC at k = 1 (first sample: "7" on question 0, "7" on 1..3 too): SC k = 1 right on all four.
    assert table[2] == "| greedy | 2 / 4 | 50.0 (15.0-85.0) | 10 | k = 1: 100.0 · 0 / 2 · 0.500 |  |"
    assert table[3] == "| SC, k = 4 | 1 / 4 | 25.0 (4.6-69.9) | 40 |  | 0 / 1 · 1.000 |"
    assert table[4] == "| search | 3 / 4 | 75.0 (30.1-95.4) | 40 | k = 4: 25.0 · 2 / 0 · 0.500 | 2 / 1 · 1.000 |"


def test_a_row_on_part_of_the_questions_is_paired_with_sc_on_that_part(tmp_path: Path) -> None:
    # SC right on questions 0 and 1 of four (samples of 10 tokens); a second search ran on questions 2 and 3 only
    # and is right on 2. SC at its tokens (k = 4) counts those two questions: 0 of 2 right, not 2 of 4.
    sc = [_sc("sc", i, ["7", "7", "7", "8"] if i < 2 else ["8", "8", "8", "7"], 40) for i in range(4)]
    half = [_record("mfs-half", i, i == 2, 40) for i in (2, 3)]
    _folder(tmp_path, "run", sc + half)
    section = Section(slug="t", title="t", folders=("run",), methods=(("mfs-half", "half"),), curves=(("sc", "SC"),))
    records, kind = section_records(section, tmp_path)
    table = method_table(section, records, kind)
    assert table[2] == "| half | 1 / 2 | 50.0 (9.5-90.5) | 40 | k = 4: 0.0 · 1 / 0 · 1.000 |  |"
    assert table[3] == "| SC, k = 4 | 2 / 4 | 50.0 (15.0-85.0) | 40 |  |  |"


def test_keep_drops_each_answers_text(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _folder(tmp_path, "run", [{**_record("cot", 0, True, 5), "text": "The answer is 7."}])
    assert keep(run, tmp_path / "kept") == 1
    (kept,) = [json.loads(line) for line in (tmp_path / "kept" / "records.jsonl").read_text().splitlines()]
    assert "text" not in kept and kept["output_tokens"] == 5
    assert (tmp_path / "kept" / "config.json").read_text() == (run / "config.json").read_text()


@pytest.mark.parametrize("section", results.SECTIONS, ids=lambda s: s.slug)
def test_every_section_names_folders_that_hold_records_or_runs_not_yet_kept(section: Section) -> None:
    present = [name for name in section.folders if (results.RECORDS / name / "records.jsonl").exists()]
    assert present, section.slug
    labels = {json.loads(line)["method"] for name in present
              for line in (results.RECORDS / name / "records.jsonl").read_text(encoding="utf-8").splitlines()}
    assert {label for label, _ in section.methods[:1]} <= labels


def test_the_bed_counts_pass_at_k_per_run_and_lists_steps_most_searches_reach(tmp_path: Path) -> None:
    from experiments.results_bed import pass_at, step_lines

    answers = tmp_path / "answers.jsonl"
    rows = [{"run": "T=0.5", "question": 0, "samples": [{"right": False}, {"right": True}]},
            {"run": "T=0.5", "question": 1, "samples": [{"right": False}, {"right": False}]},
            {"run": "greedy:none", "question": 0, "samples": [{"right": True}]}]
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert pass_at(answers, "T=0.5") == (1, 2) and pass_at(answers, "greedy:none") == (1, 1)
    step = {"t": 0, "reached": 6, "converged": 1, "scored": 3.5, "max_value": 0.0321, "positive_share": 0.5,
            "advantage": -0.004, "children_value": 0.01}
    lines = step_lines({"steps": [step, {**step, "t": 1, "reached": 4}]})
    assert lines[2:] == ["| 0 | 6 | 1 | 3.50 | +0.032 | 0.50 | -0.004 | +0.010 |"]  # t = 1: fewer than 5 searches
