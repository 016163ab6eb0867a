"""The arithmetic of ``testbed.gsm8k_bed`` (a real model's GSM8K test bed) on hand-made samples."""

import json

import pytest

from experiments.testbed.foresight_separation import Sample
from experiments.testbed.gsm8k_bed import format_summary, load_samples, main, sc_curve, summarise


def _sample(question: int, answer: str | None, right: bool, logprob: float, first: str = "a") -> Sample:
    return Sample(question, right, answer, first, [logprob, logprob], [1.0, 2.0])


def test_sc_curve_votes_over_the_first_k_samples_ties_to_the_higher_quality():
    # question 0: 5 (right, F -1), 7 (-0.5), 7 (-0.6), 5 (-0.2): k=1 right; k=2 a 1-1 tie goes to 7 (-0.5 > -1):
    # wrong; k=4 a 2-2 tie, 5's best F -0.2 beats 7's -0.5: right.
    q0 = [_sample(0, "5", True, -1.0), _sample(0, "7", False, -0.5), _sample(0, "7", False, -0.6),
          _sample(0, "5", True, -0.2)]
    # question 1: None, 3 (right), 3, 4 -> k=1 no answer (wrong), k=2 right, k=4 right.
    q1 = [_sample(1, None, False, -0.1), _sample(1, "3", True, -0.9), _sample(1, "3", True, -0.8),
          _sample(1, "4", False, -0.3)]
    samples = q0 + q1
    qualities = [s.logprobs[0] for s in samples]
    assert sc_curve(samples, qualities, ks=(1, 2, 4, 8)) == {1: 1, 2: 1, 4: 2}


def test_summarise_counts_accuracy_diversity_and_separation():
    samples = [_sample(0, "5", True, -0.1, "x"), _sample(0, "6", False, -0.9, "y"),
               _sample(1, "2", True, -0.2, "z"), _sample(1, "2", True, -0.3, "z")]
    stats = summarise(samples, resamples=50)
    assert stats["questions"] == 2 and stats["samples"] == 4
    assert stats["sample_accuracy"][0] == pytest.approx(0.75) and stats["sample_accuracy"][3] == 3
    assert stats["sc"][1][3] == 2 and stats["sc"][2][3] == 2  # q0 at k=2: tie, F -0.1 wins -> right
    assert stats["diverse_first_steps"][3] == 1
    sep = stats["separation"]
    assert sep["mixed_questions"] == 1
    assert sep["candidates"]["mean_logprob"]["within_auroc"] == pytest.approx(1.0)


def test_main_summarises_saved_samples_without_decoding(tmp_path, capsys):
    out = tmp_path / "bed.json"
    rows = [
        {"run": "greedy:release", "question": 0, "samples": [{**_sample(0, "5", True, -0.1).__dict__, "finish_reason": "stop"}]},
        {"run": "greedy:none", "question": 0, "samples": [{**_sample(0, "4", False, -0.1).__dict__, "finish_reason": "stop"}]},
        {"run": "T=0.7", "question": 0, "samples": [_sample(0, "5", True, -0.1).__dict__, _sample(0, "6", False, -0.5).__dict__]},
    ]
    out.with_suffix(".samples.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n{torn")
    assert set(load_samples(out.with_suffix(".samples.jsonl"))) == {"greedy:release", "greedy:none", "T=0.7"}
    summary = main(["--no-decode", "--json", str(out), "--resamples", "20"])
    assert summary["greedy"]["release"][3:] == [1, 1] and summary["greedy"]["none"][3:] == [0, 1]
    assert summary["temperatures"]["T=0.7"]["sc"][2][3] == 1
    assert json.loads(out.read_text())["k"] == 16
    printed = capsys.readouterr().out
    assert "| release | 1/1 |" in printed and "| T=0.7 | 50.0 |" in printed
    assert format_summary(summary) in printed


def test_main_refuses_held_out_questions():
    with pytest.raises(SystemExit):
        main(["--limit", "201", "--no-decode"])
