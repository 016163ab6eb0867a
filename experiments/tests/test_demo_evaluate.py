"""Statistics of ``testbed.evaluate``: step labels, Wilson intervals, AUROC and step values."""

import math

import pytest

from experiments.testbed.evaluate import QuestionStats, format_table, step_is_right, summarize, wilson_interval


def test_a_step_is_labelled_by_its_first_equation():
    assert step_is_right("149 - 57 = 92") is True
    assert step_is_right("Check: 152 - 57 = 95, not 92") is True  # the check itself computes right
    assert step_is_right("57 + 92 = 148") is False
    assert step_is_right("228 / 6 = 38") is True and step_is_right("7 / 2 = 3") is False
    assert step_is_right("12 * 4 = 48") is True
    assert step_is_right("Start: 23") is None and step_is_right("The answer is: \\boxed{5}.") is None


def test_wilson_interval_matches_hand_computation():
    # 8/10, z = 1.96: centre (0.8 + 0.19207) / 1.38415, half-width 1.96 * sqrt(0.016 + 0.00096) / 1.38415.
    lo, hi = wilson_interval(8, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)
    assert wilson_interval(0, 5) == (0.0, pytest.approx(3.8415 / 8.8415, abs=1e-4))
    with pytest.raises(ValueError, match="need 0 <= successes <= total and total >= 1, got 3/2"):
        wilson_interval(3, 2)


def test_summary_counts_and_separates():
    # Two questions: right steps have F -0.1 / -0.2, wrong steps -0.5 / -0.15 (AUROC 3/4).
    results = [
        QuestionStats(greedy_right=True, sc_right=True, diverse_first_steps=True,
                      steps=[(True, -0.1), (False, -0.5)], paths=[(True, [0.2, 0.4]), (False, [-0.6])]),
        QuestionStats(greedy_right=False, sc_right=True, diverse_first_steps=False,
                      steps=[(True, -0.2), (False, -0.15)], paths=[(True, [0.0])]),
    ]
    summary = summarize(results, resamples=50)
    assert summary["greedy"][0] == 0.5 and summary["sc16"][0] == 1.0 and summary["sc_gain"][0] == 0.5
    assert summary["diverse_first_steps"][0] == 0.5
    assert summary["auroc_f"][0] == pytest.approx(0.75)
    assert summary["v_right_paths"][0] == pytest.approx(0.2) and summary["v_wrong_paths"][0] == pytest.approx(-0.6)
    assert summary["v_difference"][0] == pytest.approx(0.8)
    assert (summary["scored_steps"], summary["wrong_steps"], summary["right_paths"], summary["wrong_paths"]) == (4, 2, 2, 1)
    table = format_table(summary, "toy")
    assert "| greedy accuracy | 50.0% |" in table and "| AUROC of F, right vs wrong steps | 0.750 |" in table
    assert not math.isnan(summary["auroc_f"][1])


def test_saved_slices_merge_into_the_summary_of_the_whole_run(tmp_path, capsys):
    from experiments.testbed.evaluate import load_questions, main, save_questions

    first = [QuestionStats(True, True, True, steps=[(True, -0.1), (False, -0.5)], paths=[(True, [0.2, 0.4])])]
    second = [QuestionStats(False, True, False, steps=[(True, -0.2), (False, -0.15)], paths=[(False, [-0.6])])]
    save_questions(first, tmp_path / "a.json")
    save_questions(second, tmp_path / "b.json")
    assert load_questions(tmp_path / "b.json") == second
    merged = main(["--merge", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    whole = summarize(first + second)
    assert merged["auroc_f"][0] == pytest.approx(0.75) == whole["auroc_f"][0]
    # V: right paths (0.2 + 0.4) / 2 = 0.3, wrong paths -0.6: 0.3 - (-0.6) = 0.9.
    assert merged["greedy"] == whole["greedy"] and merged["v_difference"][0] == pytest.approx(0.9)
    assert "| greedy accuracy | 50.0% |" in capsys.readouterr().out


def test_merge_of_a_file_that_is_not_per_question_statistics_is_a_one_line_error(tmp_path, capsys):
    from experiments.testbed.evaluate import main

    (tmp_path / "summary.json").write_text('{"questions": 2}', encoding="utf-8")
    with pytest.raises(SystemExit):
        main(["--merge", str(tmp_path / "summary.json")])
    assert "does not hold per-question statistics (written by --questions)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--start", "-1"])
    assert "--start must be >= 0, got -1" in capsys.readouterr().err


def test_own_slips_are_wrong_computation_lines_with_their_direction_and_whether_the_next_line_flags_them():
    from experiments.testbed.evaluate import own_slips

    text = ("92 + 57 = 148\n"  # downward (149), caught by the next line
            "Check: 148 - 57 = 91, 92 - 91 = 1: wrong. Redo the step.\n"
            "92 + 57 = 149\nCheck: 149 - 57 = 92, 92 - 92 = 0\n"
            "149 - 40 = 110\n"  # upward (109), confirmed
            "Check: 110 + 40 = 149, 149 - 149 = 0\n"  # a wrong check: not a slip
            "3 * 37 = 112\n"  # upward (111), last line: nothing after it flags it
            )
    assert own_slips(text) == [(False, True), (True, False), (True, False)]
    results = [QuestionStats(True, True, True, slips=own_slips(text))]
    summary = summarize(results, resamples=10)
    assert (summary["slips"], summary["upward_slips"]) == (3, 2)
    assert summary["slips_caught"][0] == pytest.approx(1 / 3)
    assert summary["upward_slips_caught"][0] == 0.0 and summary["downward_slips_caught"][0] == 1.0
    assert "| own slips the next line flags as wrong | 33.3% |" in format_table(summary, "toy")


def test_auroc_of_f_on_computation_and_check_lines_apart():
    # Computations: right F -0.1, wrong -0.3 (AUROC 1); checks: right -0.2, wrong -0.05 (AUROC 0);
    # all four: pairs (right > wrong) -0.1 > -0.3, -0.1 < -0.05, -0.2 > -0.3, -0.2 < -0.05: 2 of 4.
    results = [QuestionStats(True, True, True, steps=[(True, -0.1), (False, -0.3), (True, -0.2), (False, -0.05)],
                             check_steps=[False, False, True, True])]
    summary = summarize(results, resamples=10)
    assert summary["auroc_f"][0] == pytest.approx(0.5)
    assert summary["auroc_f_computations"][0] == 1.0 and summary["auroc_f_checks"][0] == 0.0
    assert summary["wrong_check_steps"] == 1
    assert "(2 wrong, 1 of them check lines)" in format_table(summary, "toy")
