"""``mfs ask`` on the demo model: answer, trace, JSON, and clear errors."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from mfs_core.cli import app

QUESTION = "Tom has 3 apples. Then Tom buys 4 more apples. How many apples does Tom have now?"
SMALL = ["--step-beam-size", "2", "--num-rollouts", "3", "--seed", "1"]


def test_ask_prints_answer_and_trace(demo_backend):
    result = CliRunner().invoke(app, ["ask", QUESTION, *SMALL])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "answer:" in out and "vote share" in out
    assert "step 0: 6 candidates sampled" in out  # M·N = 2·3 at the first step
    assert "pruned" in out and "ε_stop = 1e-06" in out
    assert "stop reason:" in out and "FLOPs" in out and "wall time" in out


def test_ask_json_is_the_whole_result(demo_backend):
    result = CliRunner().invoke(app, ["ask", QUESTION, *SMALL, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert {"text", "answer", "vote_share", "stop_reason", "prompt_tokens", "output_tokens", "flops", "steps"} <= set(data)
    assert data["flops"] == 6 * data["output_tokens"] * demo_backend.num_parameters
    assert len(data["steps"][0]["candidates"]) == 6


def test_ask_rejects_bad_settings_and_unknown_models():
    result = CliRunner().invoke(app, ["ask", QUESTION, "--step-beam-size", "0"])
    assert result.exit_code == 2 and "step_beam_size" in result.output and "0" in result.output
    result = CliRunner().invoke(app, ["ask", QUESTION, "--prune-lambda", "-1"])
    assert result.exit_code == 2 and "prune_lambda" in result.output
    result = CliRunner().invoke(app, ["ask", QUESTION, "--model", "/nonexistent/model-dir"])
    assert result.exit_code == 2 and "'/nonexistent/model-dir' was not found" in result.output
    result = CliRunner().invoke(app, ["ask", "   "])
    assert result.exit_code == 2 and "must not be empty" in result.output
