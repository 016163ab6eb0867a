"""vLLM's CPU build on a 1-2 CPU machine gets every CPU for its model; a user's binding and larger machines are left alone."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import pytest

from mfs_core import MFSSettings
from mfs_core.backends import vllm as vllm_backend
from mfs_core.backends import vllm_threads
from mfs_core.backends.vllm_threads import (
    OMP_BIND_VARIABLE,
    bind_cpu_threads,
    cpu_thread_environment,
    omp_binding,
)
from tests.vllm_stand_ins import FakeLLM, StandInSamplingParams


def test_the_binding_lists_a_small_machines_cpus_and_nothing_else() -> None:
    assert omp_binding({1, 0}, {}) == "0,1"
    assert omp_binding({3}, {"PATH": "/bin"}) == "3"
    assert omp_binding({0, 1, 2}, {}) is None  # vLLM's own binding reserves one core of three or more
    assert omp_binding({0, 1}, {OMP_BIND_VARIABLE: "auto"}) is None  # the user's value stands
    assert omp_binding(set(), {}) is None


@pytest.fixture
def two_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_threads, "_process_cpus", lambda: {0, 1})
    monkeypatch.setenv(OMP_BIND_VARIABLE, "recorded")  # so the teardown restores the environment the test found
    monkeypatch.delenv(OMP_BIND_VARIABLE)


def test_binding_sets_the_variable_once_and_keeps_a_users_value(two_cpus: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cpu_thread_environment() == {OMP_BIND_VARIABLE: "0,1"}
    assert bind_cpu_threads() == "0,1" and os.environ[OMP_BIND_VARIABLE] == "0,1"
    assert bind_cpu_threads() is None and cpu_thread_environment() == {}  # already set: nothing changes
    monkeypatch.setenv(OMP_BIND_VARIABLE, "0")
    assert bind_cpu_threads() is None and os.environ[OMP_BIND_VARIABLE] == "0"


def _fake_vllm(seen: dict[str, Any]) -> SimpleNamespace:
    def start_llm(**kwargs: Any) -> FakeLLM:
        seen["binding"] = os.environ.get(OMP_BIND_VARIABLE)  # what the engine's processes would inherit
        return FakeLLM()

    return SimpleNamespace(LLM=start_llm, SamplingParams=StandInSamplingParams)


@pytest.mark.parametrize(("cpu", "expected"), [(True, "0,1"), (False, None)])
def test_an_engine_starts_with_both_cpus_bound_only_on_vllms_cpu_build(
        two_cpus: None, monkeypatch: pytest.MonkeyPatch, cpu: bool, expected: str | None) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(vllm_backend, "_import_vllm", lambda: _fake_vllm(seen))
    monkeypatch.setattr(vllm_backend, "_on_cpu", lambda: cpu)
    monkeypatch.setattr(vllm_backend, "cpu_has_bfloat16", lambda: True)
    monkeypatch.setattr(vllm_backend, "_child_processes", list)
    vllm_backend.VLLMBackend.from_settings(MFSSettings.from_values({"backend": "vllm"}))
    assert seen["binding"] == expected
