"""The arithmetic of ``testbed.step_values`` (why MFS converges when it does) on hand-made traces."""

import json

import pytest

from mfs_core.types import Candidate, DecodeResult, StepTrace
from experiments.testbed.step_values import condense, main, parent_child_pairs, persistence, step_table


def _cand(beam, f, v, selected=False):
    return {"beam": beam, "F": f, "V": v, "selected": selected, "finished": False}


# Search A: step 0 keeps candidates 0 (F -1.0) and 2 (F -0.6) as beams 0 and 1; the scored cohort's mean F is
# (-1.0 - 1.4 - 0.6) / 3 = -1.0, so their advantages are 0.0 and 0.4. At step 1 beam 0's child scores -1.1
# (-0.1 below its parent), beam 1's -0.9 (-0.3 below): max V -0.1 <= ε, converged.
SEARCH_A = [
    {"converged": False, "epsilon": 1e-6, "beam_sources": [0, 2],
     "candidates": [_cand(0, -1.0, 0.2, True), _cand(0, -1.4, -0.2), _cand(0, -0.6, 0.6, True), _cand(0, None, None)]},
    {"converged": True, "epsilon": 1e-6, "beam_sources": [],
     "candidates": [_cand(0, -1.1, -0.1), _cand(1, -0.9, -0.3), _cand(1, None, None)]},
]
# Search B: one step (max_steps = 1): cohort mean -1.5, the kept candidate 1 is 0.5 above it; no children.
SEARCH_B = [{"converged": False, "epsilon": 1e-6, "beam_sources": [1],
             "candidates": [_cand(0, -2.0, 0.0), _cand(0, -1.0, 1.0, True)]}]


def test_children_are_found_through_beam_sources():
    assert parent_child_pairs(SEARCH_A) == [(0, pytest.approx(0.0), pytest.approx(-0.1)),
                                            (0, pytest.approx(0.4), pytest.approx(-0.3))]
    assert parent_child_pairs(SEARCH_B) == []


def test_step_table_by_hand():
    t0, t1 = step_table([SEARCH_A, SEARCH_B])
    assert (t0["t"], t0["reached"], t0["converged"]) == (0, 2, 0)
    assert t0["scored"] == pytest.approx(2.5)  # 3 scored in A, 2 in B
    assert t0["max_value"] == pytest.approx(0.8)  # mean of 0.6 and 1.0
    assert t0["positive_share"] == pytest.approx(0.6)  # 0.2, 0.6, 1.0 of five exceed ε (0.0 does not)
    assert t0["advantage"] == pytest.approx(0.3)  # mean of 0.0, 0.4 (A) and 0.5 (B)
    assert t0["children_value"] == pytest.approx(-0.2)  # mean of -0.1 and -0.3
    assert (t1["reached"], t1["converged"], t1["scored"]) == (1, 1, 2.0)
    assert t1["max_value"] == pytest.approx(-0.1) and t1["positive_share"] == 0.0
    assert t1["advantage"] is None and t1["children_value"] is None


def test_persistence_is_one_plus_the_regression_slope():
    # Pairs (0.0, -0.1), (0.4, -0.3): slope -0.2 / 0.4 = -0.5, persistence 0.5. Every resample that holds A
    # gives the same two pairs; those of B alone have no slope and are skipped.
    p = persistence([SEARCH_A, SEARCH_B], resamples=200)
    assert p["pairs"] == 2
    assert p["persistence"] == pytest.approx(0.5)
    assert p["low"] == pytest.approx(0.5) and p["high"] == pytest.approx(0.5)
    assert persistence([SEARCH_B], resamples=10) == {"pairs": 0, "persistence": None, "low": None, "high": None}


def test_condense_reads_a_decode_results_trace():
    step = StepTrace(step=0, candidates=[Candidate(beam_index=0, text="a", step_logprob=-0.5, step_tokens=2,
                                                   foresight_quality=-0.7, step_value=0.1, selected=True),
                                         Candidate(beam_index=0, text="b", step_logprob=-2.0, step_tokens=2,
                                                   pruned=True)],
                     stop_epsilon=1e-6, beam_sources=[0])
    result = DecodeResult(text="a", answer=None, vote_share=0.0, stop_reason="max_steps", prompt_tokens=1,
                          output_tokens=4, flops=0.0, steps=[step])
    assert condense(result) == [{"converged": False, "epsilon": 1e-6, "beam_sources": [0], "candidates": [
        {"beam": 0, "F": -0.7, "V": 0.1, "selected": True, "finished": False},
        {"beam": 0, "F": None, "V": None, "selected": False, "finished": False}]}]


def test_main_summarises_saved_traces_and_refuses_held_out_questions(tmp_path, capsys):
    out = tmp_path / "sv.json"
    rows = [{"question": 0, "correct": True, "stop_reason": "converged", "output_tokens": 9, "steps": SEARCH_A},
            {"question": 1, "correct": False, "stop_reason": "max_steps", "output_tokens": 5, "steps": SEARCH_B}]
    out.with_suffix(".traces.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"torn', "utf-8")
    summary = main(["--limit", "2", "--no-decode", "--resamples", "50", "--json", str(out)])
    assert summary["questions"] == 2 and summary["correct"] == 1 and summary["mean_steps"] == 1.5
    assert summary["stop_reasons"] == {"converged": 1, "max_steps": 1}
    assert summary["persistence"]["persistence"] == pytest.approx(0.5)
    assert json.loads(out.read_text())["steps"][0]["advantage"] == pytest.approx(0.3)
    assert "F's persistence from parent to child: 0.50 (0.50-0.50) over 2 pairs" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--limit", "201", "--no-decode", "--json", str(out)])
