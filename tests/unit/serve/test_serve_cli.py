"""``mfs serve``'s flags: bad values fail in one line before any model loads; MFS_SERVER_* is read; the vLLM
scheduling rule of the settings that ``mfs serve`` and ``mfs bench`` follow."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mfs_core.cli import app


@pytest.mark.parametrize(("argv", "env", "needle"), [
    (["--port", "99999"], {}, "port=99999 (from --port): Input should be less than or equal to 65535; allowed: 0 <= port <= 65535"),
    ([], {"MFS_SERVER_QUEUE_SIZE": "0"}, "queue_size='0' (from MFS_SERVER_QUEUE_SIZE): Input should be greater than or equal to 1"),
    (["--step-beam-size", "0"], {}, "step_beam_size=0 (from --step-beam-size): Input should be greater than or equal to 1"),
    (["--model", "./no/such/dir"], {}, "model './no/such/dir' was not found"),
    (["--scheduling", "continuous"], {}, "scheduling='continuous' needs backend='vllm'"),
    (["--scheduling", "batched", "--backend", "vllm"], {}, "scheduling='batched' (from --scheduling)"),
])
def test_bad_flags_fail_in_one_line_before_loading(argv, env, needle, monkeypatch) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["serve", *argv])
    assert result.exit_code == 2
    assert needle in result.output and result.output.count("\n") == 1, result.output


def test_server_variables_are_not_reported_as_unknown_settings(monkeypatch) -> None:
    import warnings

    from mfs_core.settings import MFSSettings, UnknownSettingWarning

    monkeypatch.setenv("MFS_SERVER_API_KEY", "sk-x")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownSettingWarning)
        MFSSettings()


def test_the_server_key_is_a_secret(monkeypatch) -> None:
    from mfs_core.serve import ServerSettings

    monkeypatch.setenv("MFS_SERVER_API_KEY", "sk-secret-value")
    config = ServerSettings()
    assert config.api_key.get_secret_value() == "sk-secret-value"
    assert "sk-secret-value" not in repr(config) and "sk-secret-value" not in str(config.model_dump())


def test_the_library_runs_vllm_with_continuous_batching_unless_scheduling_was_chosen() -> None:
    from mfs_core.settings import MFSSettings

    vllm = MFSSettings.from_values({"backend": "vllm"})
    assert (vllm.scheduling, vllm.scheduler) == ("auto", "continuous")
    assert MFSSettings.from_values({"backend": "vllm", "scheduling": "lockstep"}).scheduler == "lockstep"  # chosen: kept
    hf = MFSSettings.from_values({"backend": "transformers"})
    assert (hf.scheduling, hf.scheduler) == ("auto", "lockstep")  # continuous needs vLLM
    assert vllm.backend_settings == MFSSettings.from_values({"backend": "vllm", "scheduling": "continuous"}).backend_settings
    assert vllm.backend_settings != MFSSettings.from_values({"backend": "vllm", "scheduling": "lockstep"}).backend_settings


@pytest.mark.parametrize(("flags", "env", "expected"), [
    (["--backend", "vllm"], {}, "continuous"),
    (["--backend", "vllm", "--scheduling", "lockstep"], {}, "lockstep"),
    (["--backend", "vllm"], {"MFS_SCHEDULING": "lockstep"}, "lockstep"),
    (["--backend", "transformers"], {}, "lockstep"),
])
def test_bench_runs_vllm_with_continuous_batching_unless_scheduling_was_chosen(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, flags: list[str], env: dict[str, str], expected: str,
) -> None:
    """``mfs bench`` follows the settings' rule (12 Qwen GSM8K questions: 155 s continuous, 342 s lockstep);
    the engine is stopped before it loads a model."""
    from typer.testing import CliRunner

    from mfs_core.cli import app
    from mfs_core.engine import MFSEngine

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    seen = []

    def refuse(settings: object = None, **_: object) -> None:
        seen.append(settings)
        raise ValueError("stopped before loading a model")

    monkeypatch.setattr(MFSEngine, "from_settings", staticmethod(refuse))
    result = CliRunner().invoke(app, ["bench", "--dataset", "demo", "--limit", "1", "--methods", "cot",
                                      "--out", str(tmp_path / "run"), "--no-progress", *flags])
    assert result.exit_code == 2 and "stopped before loading a model" in result.output
    assert seen[0].scheduler == expected
