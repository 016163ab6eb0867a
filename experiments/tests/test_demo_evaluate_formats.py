"""``python -m experiments.testbed.evaluate_formats`` on the bundled demo model: what it counts."""

from __future__ import annotations

import random

from experiments.testbed.evaluate_formats import _draw, _expected_call, evaluate_formats, format_summary
from experiments.testbed.formats import tool_example


def test_the_expected_first_action_is_the_targets_call_or_none():
    rng = random.Random(11)
    seen = set()
    for _ in range(60):
        conversation = tool_example(rng, first_turn_share=1.0)
        expected = _expected_call(conversation)
        target = "\n".join(line for line, _ in conversation.target)
        if expected is None:
            assert "<tool_call>" not in target
        else:
            assert expected["name"] in {t["function"]["name"] for t in conversation.tools}
            assert f'"name": "{expected["name"]}"' in target
        seen.add(expected is None)
    assert seen == {True, False}  # both cases occur


def test_the_draw_is_seeded_and_cut_where_each_measure_needs():
    drawn = _draw(seed=7, limit=4)
    assert [c.messages for c in _draw(seed=7, limit=4)["rag"]] == [c.messages for c in drawn["rag"]]
    assert all(c.messages[-1]["role"] == "user" for c in drawn["first"])
    assert all(c.messages[-1]["role"] == "tool" for c in drawn["answer"])


def test_evaluate_formats_counts_every_conversation_on_the_demo_model(demo_backend):
    summary = evaluate_formats(demo_backend, demo_backend.tokenizer, seed=3, limit=2, max_tokens=80)
    assert summary["rag"][1] == summary["first_action"][1] == summary["tool_answer"][1] == 2
    assert sum(total for _, total in summary["rag_by_style"].values()) == 2
    assert sum(right for right, _ in summary["rag_by_style"].values()) == summary["rag"][0]
    assert summary["tool_name"][1] <= 2 and all(0 <= summary[k][0] <= summary[k][1] for k in ("rag", "tool_name"))
    table = format_summary(summary, "demo")
    assert table.splitlines()[0] == "demo" and "answer from tool result" in table
