"""Fixtures of the vLLM tests: a real vLLM engine (CPU build or CUDA) on the demo model.

These tests run wherever ``import vllm`` works: in CI on vLLM's CPU build (``.ci/run``
installs it), on a GPU machine with the CUDA build. Each engine start costs 35-50 s on 2
CPU cores, so the in-process engine is shared by the session and the two ``vllm serve``
replicas start together.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

vllm = pytest.importorskip("vllm", reason="needs vLLM (CPU build or CUDA); .ci/run installs the CPU build")

from mfs_core.backends.transformers import TransformersBackend  # noqa: E402
from mfs_core.backends.vllm import VLLMBackend  # noqa: E402
from mfs_core.vllm_server import VLLMServer  # noqa: E402
from mfs_core.settings import MFSSettings  # noqa: E402

# float32 everywhere, so that greedy decodes can be compared with the transformers backend; 1 GiB
# of KV cache holds far more than these tests' rounds (the demo model: 4 layers, 2,048 tokens).
VLLM_SETTINGS = MFSSettings(backend="vllm", dtype="float32", kv_cache_gib=1.0, scheduling="lockstep")
EAGER = {"enforce_eager": True}
"""``vllm_kwargs`` of the engines whose tests are about a start, a death or an exit, not about the kernels: vLLM runs
the model without torch.compile, which saves about 20 of an engine start's 50 s on 2 CPU cores (vLLM 0.32's CPU
build never loads its compile cache, so every start compiles again). The shared engine, the continuous engine and
the ``vllm serve`` replicas keep the library's default (compiled), since their tests compare decodes."""


def on_gpu() -> bool:
    """Whether the installed vLLM drives a GPU (else its CPU build)."""
    from vllm.platforms import current_platform

    return not current_platform.is_cpu()


@pytest.fixture(scope="session")
def vllm_backend() -> Iterator[VLLMBackend]:
    """One in-process ``vllm.LLM`` on the demo model (float32), closed at the end of the session."""
    backend = VLLMBackend.from_settings(VLLM_SETTINGS)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def reference_backend() -> TransformersBackend:
    """The transformers backend on the device vLLM uses, float32."""
    return TransformersBackend.from_settings(MFSSettings(device="cuda" if on_gpu() else "cpu", dtype="float32"))


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="session")
def vllm_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[VLLMServer]]:
    """Two ``vllm serve`` replicas of the demo model on loopback, started together (bounded
    wait), stopped by PID at the end; their logs are in the test's temporary folder."""
    folder: Path = tmp_path_factory.mktemp("vllm-serve")
    servers = [VLLMServer(VLLM_SETTINGS, port=free_port(), log_path=folder / f"replica{i}.log",
                          startup_timeout=400.0)
               for i in range(2)]
    try:
        for server in servers:
            server.launch()
        for server in servers:
            server.wait_ready()
        yield servers
    finally:
        for server in servers:
            server.stop()
