"""``mfs ask`` shows the search live and writes the trace page and figure on the demo model."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from mfs_core.cli import app
from mfs_core.types import DecodeResult

QUESTION = "Tom has 3 apples. Then Tom buys 4 more apples. How many apples does Tom have now?"
SMALL = ["--step-beam-size", "2", "--num-rollouts", "3", "--seed", "1"]


def test_ask_shows_each_step_live_and_writes_the_traces(demo_backend, tmp_path):
    page, figure = tmp_path / "trace.html", tmp_path / "trace.png"
    result = CliRunner().invoke(app, ["ask", QUESTION, *SMALL, "--trace-html", str(page), "--trace-png", str(figure)])
    assert result.exit_code == 0, result.output
    live = [line for line in result.stderr.splitlines() if line.startswith(("step ", "stop: "))]
    assert live[0].startswith("step 0: 6 sampled") and live[-1].startswith("stop: ")
    steps = int(live[-1].split(" after ")[1].split(" step")[0])
    assert len(live) == steps + 1
    assert "question:" in result.stdout and "step 0:" not in result.stdout.split("search (")[0]
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.count('<li class="cand') >= 6
    assert figure.read_bytes()[:4] == b"\x89PNG"


def test_json_mode_stays_quiet_unless_live_is_asked(demo_backend):
    quiet = CliRunner().invoke(app, ["ask", QUESTION, *SMALL, "--json"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    loud = CliRunner().invoke(app, ["ask", QUESTION, *SMALL, "--json", "--live"])
    data = DecodeResult.from_dict(json.loads(loud.stdout))
    assert loud.stderr.count("\nstep ") + loud.stderr.startswith("step ") == len(data.steps)
