"""``mfs ask --method esc|deepconf`` on the demo model: the method's trace and settings, and a bad name refused."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import mfs_core.engine
from mfs_core.cli import app
from mfs_core.trace import SAMPLES_LEGEND

QUESTION = "Tom has 3 apples. Then Tom buys 4 more apples. How many apples does Tom have now?"


@pytest.fixture
def small(monkeypatch):
    for name, value in {"MFS_ESC_WINDOW": "2", "MFS_ESC_MAX_SAMPLES": "4", "MFS_DEEPCONF_WARMUP": "2",
                        "MFS_DEEPCONF_MAX_TRACES": "4", "MFS_MAX_ANSWER_TOKENS": "160"}.items():
        monkeypatch.setenv(name, value)


def test_ask_with_esc_prints_its_windows(demo_backend, small):
    result = CliRunner().invoke(app, ["ask", QUESTION, "--method", "esc", "--seed", "1", "--no-live"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "search (ESC: windows of w = 2, at most 4 samples, T = 0.7):" in out
    assert SAMPLES_LEGEND in out and "step 0: window 1: 2 sampled, answers " in out
    assert "reasoning (the sample the vote chose):" in out and "stop reason: " in out


def test_ask_with_deepconf_as_json(demo_backend, small):
    result = CliRunner().invoke(app, ["ask", QUESTION, "--method", "deepconf", "--seed", "1", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["method"] == "deepconf" and data["stop_reason"] in ("consensus", "max_traces")
    assert data["steps"][0]["note"].startswith("warm-up: 2 traces scored ")
    assert data["search_settings"]["deepconf_warmup"] == 2
    assert len(data["completion_weights"]) == len(data["completions"]) >= 1


def test_an_unknown_method_is_refused_before_the_model_loads(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before a cheap check")

    monkeypatch.setattr(mfs_core.engine.MFSEngine, "from_settings", refuse)
    result = CliRunner().invoke(app, ["ask", QUESTION, "--method", "deep-conf"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: unknown decoding method 'deep-conf'; known: [")
    assert "'deepconf'" in result.stderr and result.stderr.count("\n") == 1
