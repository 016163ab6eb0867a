"""``mfs ask`` on the demo model: answer, trace, JSON, settings precedence and one-line errors."""

from __future__ import annotations

import json
import logging

import pytest
from typer.testing import CliRunner

import mfs_core.engine
from mfs_core import __version__
from mfs_core.cli import CPU_DEFAULTS, app, resolve_settings
from mfs_core.trace import LEGEND

QUESTION = "Tom has 3 apples. Then Tom buys 4 more apples. How many apples does Tom have now?"
SMALL = ["--step-beam-size", "2", "--num-rollouts", "3", "--seed", "1"]


@pytest.fixture
def restored_logging():
    """``-v`` points the root logger at the runner's stderr; put the handlers back after."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    yield
    root.handlers[:], _ = saved[0], root.setLevel(saved[1])


def test_ask_prints_answer_vote_reasoning_and_trace(demo_backend, restored_logging):
    result = CliRunner().invoke(app, ["-v", "ask", QUESTION, *SMALL, "--max-steps", "3", "--temperature", "0.7"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "answer:" in out and "vote share" in out and "\nvote: " in out
    assert LEGEND in out
    assert "step 0: 6 candidates sampled" in out  # M·N = 2·3 at the first step
    assert "pruned" in out and "stop check: max V = " in out and "ε_stop = 1e-06" in out
    assert "search (M = 2, N = 3, λ1 = 0.8, ε_stop = 1e-06, min_steps = 1, max_steps = 3)" in out
    assert "stop reason:" in out and "FLOPs" in out and "wall time" in out
    # the counts agree: paths kept at the steps + beams completed at the end = the vote's paths
    paths = int(out.split("completed path")[0].rsplit("of ", 1)[1])
    assert f"({paths} completed path" in out.split("\nvote: ")[1].splitlines()[0]
    # -v: what the command did, on stderr only
    assert "setting step_beam_size = 2 (from --step-beam-size)" in result.stderr
    assert "setting max_steps = 3 (from --max-steps)" in result.stderr
    assert "model ready in" in result.stderr and "decoded in" in result.stderr
    assert "setting" not in out


def test_ask_json_is_the_whole_result(demo_backend):
    result = CliRunner().invoke(app, ["ask", QUESTION, *SMALL, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {"text", "answer", "vote_share", "stop_reason", "prompt_tokens", "output_tokens", "flops", "steps"} <= set(data)
    assert data["flops"] == 6 * data["output_tokens"] * demo_backend.num_parameters
    assert len(data["steps"][0]["candidates"]) == 6


def test_settings_precedence_flag_then_environment_then_cpu_defaults(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no .env here
    for name in ("MFS_STEP_BEAM_SIZE", "MFS_NUM_ROLLOUTS", "MFS_NUM_SAMPLES", "MFS_SEED"):
        monkeypatch.delenv(name, raising=False)
    settings, sources = resolve_settings({"seed": None, "step_beam_size": None})
    assert (settings.step_beam_size, settings.num_rollouts, settings.num_samples) == (4, 4, 4) == (
        CPU_DEFAULTS["step_beam_size"], CPU_DEFAULTS["num_rollouts"], CPU_DEFAULTS["num_samples"])
    assert sources == {"step_beam_size": "CPU default", "num_rollouts": "CPU default", "num_samples": "CPU default"}
    monkeypatch.setenv("MFS_STEP_BEAM_SIZE", "6")
    (tmp_path / ".env").write_text("MFS_NUM_ROLLOUTS=5\nOPENAI_API_KEY=sk-other\n")
    settings, sources = resolve_settings({"step_beam_size": None})
    assert (settings.step_beam_size, settings.num_rollouts) == (6, 5)  # the environment beats the CPU defaults
    assert sources["step_beam_size"] == "MFS_STEP_BEAM_SIZE" and sources["num_rollouts"].startswith("MFS_NUM_ROLLOUTS in")
    settings, sources = resolve_settings({"step_beam_size": 3})
    assert settings.step_beam_size == 3 and sources["step_beam_size"] == "--step-beam-size"  # the flag beats both


@pytest.fixture
def no_model_load(monkeypatch):
    """Fail the test if the command gets as far as loading a model."""

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before a cheap check")

    monkeypatch.setattr(mfs_core.engine.MFSEngine, "from_settings", refuse)


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["--step-beam-size", "0"], {}, "error: invalid setting: step_beam_size=0 (from --step-beam-size): Input should be "
         "greater than or equal to 1; allowed: 1 <= step_beam_size <= 1024"),
        ([], {"MFS_STEP_BEAM_SIZE": "0"}, "error: invalid setting: step_beam_size='0' (from MFS_STEP_BEAM_SIZE): Input "
         "should be greater than or equal to 1; allowed: 1 <= step_beam_size <= 1024"),
        (["--temperature", "0"], {}, "error: invalid setting: temperature=0.0 (from --temperature): Input should be "
         "greater than 0; allowed: 0.0 < temperature <= 10.0"),
        (["--prune-lambda", "-1"], {}, "error: invalid setting: prune_lambda=-1.0 (from --prune-lambda): Input should "
         "be greater than or equal to 0; allowed: 0.0 <= prune_lambda"),
        (["--model", "/nonexistent/model-dir"], {}, "error: model '/nonexistent/model-dir' was not found: no such "
         "directory (give a directory with a Hugging Face checkpoint, a .gguf file, a model name in the local Hugging "
         "Face cache, 'mfs-demo', or a packaged model: qwen2.5-coder-0.5b-instruct, qwen2.5-coder-1.5b-instruct, "
         "smollm2-135m-instruct)"),
        (["--model", "/nonexistent/weights.gguf"], {}, "error: model '/nonexistent/weights.gguf' was not found: no "
         "such GGUF file"),
    ],
)
def test_bad_input_is_one_line_before_the_model_loads(no_model_load, monkeypatch, args, env, expected):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["ask", QUESTION, *args])
    assert result.exit_code == 2
    assert result.stderr == expected + "\n"


def test_an_empty_question_is_refused_before_the_model_loads(no_model_load):
    result = CliRunner().invoke(app, ["ask", "   "])
    assert result.exit_code == 2 and result.stderr == "error: QUESTION must not be empty or whitespace only, got '   '\n"


def test_a_misspelled_variable_is_a_one_line_warning(no_model_load, monkeypatch):
    monkeypatch.setenv("MFS_STEP_BEAM", "3")
    result = CliRunner().invoke(app, ["ask", QUESTION, "--num-rollouts", "0"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "warning: MFS_STEP_BEAM is not an MFS setting and is ignored; did you mean MFS_STEP_BEAM_SIZE?",
        "error: invalid setting: num_rollouts=0 (from --num-rollouts): Input should be greater than or equal to 1; "
        "allowed: 1 <= num_rollouts <= 1024",
    ]


def test_version_and_help():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"mfs-decoding {__version__}\n"
    result = CliRunner().invoke(app, ["ask", "--help"], env={"COLUMNS": "250"})
    text = " ".join(result.stdout.split())
    assert "flag, else its MFS_* environment variable or .env entry" in text
    for default in ("MFS_STEP_BEAM_SIZE, else 4", "MFS_NUM_ROLLOUTS, else 4", "MFS_MODEL, else 'mfs-demo'",
                    "MFS_TEMPERATURE, else 0.7", "MFS_MAX_STEPS, else 8", "MFS_SEED, else 0"):
        assert default in text, default
    assert "--temperature" in text and "--max-steps" in text
    assert "{question}" not in text and "settings'," not in text
