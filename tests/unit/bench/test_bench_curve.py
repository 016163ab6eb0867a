"""The accuracy–tokens curve (mfs_core.bench.curve) on hand-made records."""

from __future__ import annotations

import pytest

from tests.bench_records import RECORDS, sc_record
from mfs_core.bench.curve import curve_records, curve_table, format_curve, matched_k, plot_curve, sc_ks, write_curve


def test_sc_at_every_k_is_the_vote_of_the_first_k_samples():
    assert sc_ks(RECORDS) == [1, 2, 4]
    rows = {(r["method"], r["index"]): r for r in curve_records(RECORDS, "demo")}
    assert [rows[("sc@1", i)]["correct"] for i in range(3)] == [True, False, False]
    # k = 2 on q1: "5" and "6" tie at F -0.1; the first one seen wins: wrong. q2: "3" -0.5, "4" -0.1: right.
    assert [rows[("sc@2", i)]["correct"] for i in range(3)] == [True, False, True]
    assert [rows[("sc@4", i)]["correct"] for i in range(3)] == [True, True, True]
    assert rows[("sc@2", 0)]["output_tokens"] == pytest.approx(200.0)
    assert rows[("sc@1", 0)]["flops"] == pytest.approx(6 * 100 * 1000)


def test_each_method_is_paired_with_sc_at_its_own_tokens():
    # mfs spends 200 tokens per question; a sample costs 100: k = 2.
    assert matched_k(200.0, RECORDS) == 2
    assert matched_k(10_000.0, RECORDS) == 4  # clamped to the run's samples
    assert matched_k(1.0, RECORDS) == 1
    points = curve_table(RECORDS, "demo", ["cot", "sc", "mfs"])
    assert [p.summary.method for p in points] == ["sc@1", "sc@2", "sc@4", "mfs"]
    mfs = points[-1]
    assert (mfs.sc_label, mfs.sc_summary.correct) == ("sc@2", 2)
    # mfs right on q0, q1; sc@2 right on q0, q2: one each way
    assert (mfs.paired.only_method, mfs.paired.only_other, mfs.paired.p_value) == (1, 1, 1.0)
    table = format_curve(points)
    assert "| mfs | 66.7 | 20.8-93.9 | 2/3 | 200.0 | sc@2 | 66.7 | 1 | 1 | 1.000 |" in table
    assert "| sc@4 | 100.0 | 43.9-100.0 | 3/3 | 400.0 | | | | | |" in table


def test_curve_files_are_written_only_with_a_curve(tmp_path):
    assert write_curve([r for r in RECORDS if r["method"] != "sc"], "demo", ["mfs"], tmp_path) is None
    assert not (tmp_path / "curve.md").exists()
    table = write_curve(RECORDS, "demo", ["sc", "mfs"], tmp_path, title="t")
    assert (tmp_path / "curve.md").read_text(encoding="utf-8") == table + "\n"
    assert (tmp_path / "accuracy_vs_tokens.png").stat().st_size > 1000


def test_plot_needs_points(tmp_path):
    with pytest.raises(ValueError, match="no points"):
        plot_curve([], tmp_path / "x.png")


def test_a_second_sc_method_is_a_curve_of_its_own_and_searches_pair_with_sc():
    # "sc-cool": the same questions sampled at another temperature; q0 and q1 right at every k, q2 from k = 4.
    cool = [{**sc_record(i, preds, target), "method": "sc-cool", "decoder": "sc-rollout-temperature"}
            for i, (preds, target) in enumerate([(["7", "7", "7", "7"], 7.0), (["6", "6", "5", "6"], 6.0),
                                                 (["3", "4", "4", "4"], 4.0)])]
    records = RECORDS + cool
    assert sc_ks(records, label="sc-cool") == [1, 2, 4]
    points = curve_table(records, "demo", ["sc", "sc-cool", "mfs"])
    assert [(p.summary.method, p.sc_curve) for p in points] == [
        ("sc@1", "sc"), ("sc@2", "sc"), ("sc@4", "sc"), ("sc-cool@1", "sc-cool"), ("sc-cool@2", "sc-cool"),
        ("sc-cool@4", "sc-cool"), ("mfs", None)]
    assert [p.summary.correct for p in points if p.sc_curve == "sc-cool"] == [2, 2, 3]  # q2: k = 2 ties, the first wins
    assert (points[-1].sc_label, points[-1].sc_summary.correct) == ("sc@2", 2)
