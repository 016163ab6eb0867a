"""``mfs ask`` on a newcomer's own model: server URLs, tokenizer and key flags, one-line errors."""

from __future__ import annotations

import logging
import time

import pytest
from typer.testing import CliRunner

from mfs_core.cli import app, resolve_settings

QUESTION = "Tom has 3 apples. Then Tom buys 4 more apples. How many apples does Tom have now?"


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no .env
    for name in ("MFS_BACKEND", "MFS_BASE_URLS", "MFS_API_KEY", "MFS_TOKENIZER"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_a_base_url_without_a_backend_selects_the_http_backend(clean_env):
    settings, sources = resolve_settings({"base_urls": ["http://127.0.0.1:9/v1"], "backend": None})
    assert (settings.backend, sources["backend"]) == ("openai", "--base-url")
    clean_env.setenv("MFS_BASE_URLS", "http://127.0.0.1:9/v1")
    settings, sources = resolve_settings({})
    assert (settings.backend, sources["backend"]) == ("openai", "MFS_BASE_URLS")
    clean_env.setenv("MFS_BACKEND", "transformers")  # a backend named: the variable's URL is left alone
    assert resolve_settings({})[0].backend == "transformers"


def test_a_base_url_with_another_backend_is_refused(clean_env):
    result = CliRunner().invoke(app, ["ask", QUESTION, "--base-url", "http://127.0.0.1:9/v1", "--backend", "vllm"])
    assert result.exit_code == 2
    assert result.stderr == ("error: --base-url is the server of --backend openai, but the backend is 'vllm' (from "
                             "--backend): drop --base-url or use --backend openai\n")


def test_tokenizer_device_dtype_and_api_key_flags(clean_env):
    settings, sources = resolve_settings({"tokenizer": "smollm2-135m-instruct", "api_key": "sk-secret-1", "device": "cpu",
                                          "dtype": "float32", "base_urls": ["http://127.0.0.1:9/v1"]})
    assert (settings.tokenizer, settings.device, settings.dtype) == ("smollm2-135m-instruct", "cpu", "float32")
    assert settings.api_key.get_secret_value() == "sk-secret-1" and "sk-secret-1" not in repr(settings)
    assert sources["api_key"] == "--api-key"
    clean_env.setenv("MFS_API_KEY", "sk-from-env")
    settings, sources = resolve_settings({})
    assert settings.api_key.get_secret_value() == "sk-from-env" and sources["api_key"] == "MFS_API_KEY"


def test_a_bad_dtype_is_one_line(clean_env):
    result = CliRunner().invoke(app, ["ask", QUESTION, "--dtype", "float8"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: invalid setting: dtype='float8' (from --dtype)")
    assert len(result.stderr.splitlines()) == 1


@pytest.fixture
def restored_logging():
    """``-v`` points the root logger at the runner's stderr; put the handlers back after."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    yield
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


@pytest.mark.enable_socket
def test_a_dead_server_fails_fast_with_a_hint_and_never_echoes_the_key(clean_env, restored_logging):
    from mfs_core.backends.openai import OpenAIBackend
    from mfs_core.errors import ServerUnreachableError
    from mfs_core.types import GenerationRequest

    with OpenAIBackend(["http://127.0.0.1:9/v1"], "m", context_window=4096, max_retries=3) as backend:
        start = time.monotonic()
        with pytest.raises(ServerUnreachableError, match="is the server running"):
            backend.generate([GenerationRequest(prompt="2 + 3 =", n=2, max_tokens=4, seed=1)])
        assert time.monotonic() - start < 1.0  # no retries: 4 attempts with backoff took 3.5 s and more
    clean_env.setenv("MFS_API_KEY", "sk-never-printed")
    result = CliRunner().invoke(app, ["-v", "ask", QUESTION, "--base-url", "http://127.0.0.1:9/v1", "--no-live"])
    assert result.exit_code == 2
    assert "error: nothing answers at http://127.0.0.1:9/v1 (ConnectError" in result.stderr
    assert "is the server running" in result.stderr
    assert "sk-never-printed" not in result.output + result.stderr
    assert "setting api_key = '**********' (from MFS_API_KEY)" in result.stderr


def test_a_model_missing_locally_says_how_to_allow_a_download(clean_env, restored_logging):
    clean_env.setenv("HF_HUB_OFFLINE", "1")
    result = CliRunner().invoke(app, ["ask", QUESTION, "--model", "Qwen/Qwen2.5-0.5B-Instruct", "--no-live"])
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert line.startswith("error: model 'Qwen/Qwen2.5-0.5B-Instruct' was not found on this machine")
    assert "mfs never downloads unless HF_HUB_OFFLINE=0 is set" in line
    assert "a .gguf file" in line and "smollm2-135m-instruct" in line and "\n" not in line
