"""experiments/benchmarks/report.py: the ad-hoc report of bench records, read from hand-made records."""

from __future__ import annotations

import json

import pytest

from experiments.benchmarks import report
from tests.bench_records import RECORDS, method_record, sc_record


def _run(tmp_path, records):
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    (tmp_path / "config.json").write_text(json.dumps({"kind": "demo"}), encoding="utf-8")
    return tmp_path


def _folders(tmp_path, *names):
    """One empty run folder per name under ``tmp_path``."""
    folders = [tmp_path / name for name in names]
    for folder in folders:
        folder.mkdir()
    return folders


def test_each_search_is_paired_with_every_sc_curve_at_its_tokens(tmp_path):
    module = report
    # a cooler SC run: right on q0 and q1 at every k, q2 from k = 4; phi: 1000 tokens/q on q0, q1
    cool = [{**sc_record(i, preds, target), "method": "sc-rollout-temperature", "decoder": "sc-rollout-temperature"}
            for i, (preds, target) in enumerate([(["7"] * 4, 7.0), (["6", "6", "5", "6"], 6.0),
                                                 (["3", "4", "4", "4"], 4.0)])]
    phi = [method_record("phi", 0, False, 1000.0), method_record("phi", 1, True, 1000.0)]
    records, kind = module.load_run(_run(tmp_path, RECORDS + cool + phi))
    text = module.report(records, kind)
    # mfs: 200 tok/q = k 2 on both curves; sc@2 right on q0, q2; the cool curve's k = 2 on q0, q1
    # (mfs is right on q0, q1): 1 / 1 against sc, 0 / 0 against the cooler SC; 600 tokens = 3.6e6 FLOPs at 1,000
    # parameters; FLOPs per question 200 / 1000 of phi's.
    assert ("| mfs | 66.7 | 20.8-93.9 | 2/3 | 200 | 3.600e+06 | 0.20 | k = 2: 66.7% · 1 / 1 · p = 1.000 | "
            "k = 2: 66.7% · 0 / 0 · p = 1.000 | 2.00 | converged 3 |") in text
    assert "| sc-rollout-temperature@4 | 100.0 | 43.9-100.0 | 3/3 | 400 |" in text
    assert "- phi: 1 / 0, p = 1.000" in text  # on the two questions phi ran (mfs right on q0, phi not)
    module.main([str(tmp_path), "--title", "t"])
    assert (tmp_path / "accuracy_vs_tokens.png").stat().st_size > 1000


def test_the_flops_ratio_is_over_the_questions_phi_ran(tmp_path):
    module = report
    # phi on q1 only, 1,000 tokens; mfs spent 150, 250, 200 tokens on q0-q2: on q1 a quarter of phi's FLOPs,
    # where its mean over all three questions (200) would say 0.20
    records, kind = module.load_run(_run(tmp_path, RECORDS + [method_record("phi", 1, True, 1000.0)]))
    text = module.report(records, kind)
    assert "| mfs | 66.7 | 20.8-93.9 | 2/3 | 200 | 3.600e+06 | 0.25 |" in text
    assert "| phi | 100.0 | 20.7-100.0 | 1/1 | 1,000 | 6.000e+06 | 1.00 |" in text


def test_runs_at_two_offsets_pool_into_one_report(tmp_path):
    module = report
    first, second = _folders(tmp_path, "200", "300")
    # questions 0-2 in one folder; questions 3, 4 in the other: mfs right on 3, cot right on 3 and 4
    _run(first, RECORDS + [method_record("cot", i, i == 0, 100.0) for i in range(3)])
    _run(second, [method_record("mfs", 3, True, 300.0), method_record("mfs", 4, False, 300.0),
                  method_record("cot", 3, True, 100.0), method_record("cot", 4, True, 100.0)])
    records, kind = module.load_run(first, second)
    assert kind == "demo" and len(records) == len(RECORDS) + 7
    text = module.report(records, kind)
    # mfs over five questions: right on 0, 1, 3 = 3/5 at (150 + 250 + 200 + 300 + 300) / 5 = 240 tok/q;
    # against cot (right on 0, 3, 4): only mfs q1, only cot q4 -> 1 / 1
    assert "| mfs | 60.0 | 23.1-88.2 | 3/5 | 240 |" in text
    assert "- cot: 1 / 1, p = 1.000" in text
    module.main([str(first), str(second), "--plot", str(tmp_path / "pooled.png")])
    assert (tmp_path / "pooled.png").stat().st_size > 1000
    # without --plot a pooled report draws nothing, so neither folder's own plot is overwritten
    module.main([str(first), str(second)])
    assert not (first / "accuracy_vs_tokens.png").exists() and not (second / "accuracy_vs_tokens.png").exists()


def test_methods_keeps_only_the_named_ones_and_refuses_an_unknown_label(tmp_path, capsys):
    module = report
    folder = _run(tmp_path, RECORDS + [method_record("cot", i, i == 0, 100.0) for i in range(3)])
    module.main([str(folder), "--methods", "mfs,cot", "--plot", str(tmp_path / "kept.png")])
    text = capsys.readouterr().out
    # cot right on q0 of three at 100 tok/q; no SC left, so no SC column and no curve points
    assert "| cot | 33.3 | 6.1-79.2 | 1/3 | 100 |" in text and "| mfs | 66.7 |" in text
    assert "| sc@" not in text and "at its tokens" not in text and "- cot: 1 / 0, p = 1.000" in text
    # a well-formed table: header, separator and rows with the same nine columns, no empty SC column
    table = text.split("\n\n")[0].splitlines()
    assert [line.count("|") for line in table] == [10] * 4 and "|  | mean steps" not in table[0]
    assert "SC curve point" not in text
    with pytest.raises(SystemExit):
        module.main([str(folder), "--methods", "mfs,esc"])
    assert "--methods esc: not in the records (they hold" in capsys.readouterr().err


def test_pooling_refuses_different_kinds_and_a_question_answered_twice(tmp_path):
    module = report
    first, second = _folders(tmp_path, "a", "b")
    _run(first, RECORDS)
    _run(second, [method_record("mfs", 2, True, 100.0)])
    with pytest.raises(ValueError, match="method 'mfs' answered question 2 in both"):
        module.load_run(first, second)
    (second / "config.json").write_text(json.dumps({"kind": "gsm"}), encoding="utf-8")
    (second / "records.jsonl").write_text(json.dumps(method_record("mfs", 9, True, 100.0)) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="different scoring kinds"):
        module.load_run(first, second)
    with pytest.raises(ValueError, match="given twice"):
        module.load_run(first, first)


def test_questions_of_keeps_the_questions_one_method_ran_and_versus_pairs_it(tmp_path, capsys):
    module = report
    # phi on q0 (wrong) and q1 (right) only, 1,000 tokens each; mfs right on q0 and q1, wrong on q2
    folder = _run(tmp_path, RECORDS + [method_record("phi", 0, False, 1000.0), method_record("phi", 1, True, 1000.0)])
    module.main([str(folder), "--questions-of", "phi", "--versus", "phi"])
    text = capsys.readouterr().out
    # mfs on q0, q1 only: 2/2 at (150 + 250) / 2 = 200 tok/q; FLOPs per question 200 / 1000 of phi's, paired
    assert "| mfs | 100.0 | 34.2-100.0 | 2/2 | 200 | 2.400e+06 | 0.20 |" in text
    assert "| phi | 50.0 | 9.5-90.5 | 1/2 | 1,000 | 1.200e+07 | 1.00 |" in text
    assert "`phi` question by question" in text and "- mfs: 0 / 1, p = 1.000" in text
    assert "| sc@4 | 100.0 | 34.2-100.0 | 2/2 | 400 |" in text  # SC's curve on q0, q1 too
    assert not (folder / "accuracy_vs_tokens.png").exists()  # a subset's plot is drawn only with --plot
    with pytest.raises(SystemExit):
        module.main([str(folder), "--questions-of", "esc"])
    assert "--questions-of esc: no records of that method" in capsys.readouterr().err
