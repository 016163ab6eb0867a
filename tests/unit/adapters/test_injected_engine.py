"""An engine handed to an adapter is used for calls with its backend settings, and refused
otherwise with one line naming the differing fields: never a second model load."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import ChatMessage

import langchain_mfs
import llamaindex_mfs
import mfs_core.engine.registry
from mfs_core.call import engine_for
from mfs_core.engine import MFSEngine
from mfs_core.settings import BACKEND_FIELDS, BackendSettings, MFSSettings
from tests.scripted import ScriptedBackend, continuation

SETTINGS = MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2)


def _answer(request):
    return [continuation("3 + 4 = 7\nThe answer is: \\boxed{7}.<end_of_reasoning>", mean_logprob=-0.1)] * request.n


@pytest.fixture
def engine() -> MFSEngine:
    return MFSEngine(ScriptedBackend(_answer), SETTINGS)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[MFSSettings]:
    """Every model load (``create_backend``) the test makes; the test fails on the first."""
    made: list[MFSSettings] = []

    def create_backend(settings: MFSSettings) -> ScriptedBackend:
        made.append(settings)
        raise AssertionError(f"a second model was loaded for {settings.backend_settings}")

    monkeypatch.setattr(mfs_core.engine.registry, "create_backend", create_backend)
    return made


@pytest.mark.parametrize("cls", [langchain_mfs.ChatMFS, langchain_mfs.MFSLLM, llamaindex_mfs.MFSLLM])
def test_a_differing_backend_field_is_refused_at_construction(cls, engine: MFSEngine, loads: list) -> None:
    with pytest.raises(ValueError) as caught:
        cls(engine=engine, model_kwargs={"max_retries": 5})
    message = str(caught.value)
    assert "\n" not in message
    assert message == (
        f"{cls.__name__}(engine=...): the engine's backend settings differ from this model's in max_retries "
        "(engine: 3; here: 5); build the engine with them (MFSEngine.from_settings) or leave them out"
    )
    assert loads == []


@pytest.mark.parametrize("cls", [langchain_mfs.ChatMFS, langchain_mfs.MFSLLM])
def test_a_langchain_call_that_changes_a_backend_field_is_refused(cls, engine: MFSEngine, loads: list) -> None:
    llm = cls(engine=engine)
    assert llm.invoke("Tom has 3 apples. He buys 4 more. How many now?", seed=1)
    with pytest.raises(ValueError, match=r"differ from this model's in model, request_timeout \(engine: 'mfs-demo', 600.0; here: 'other', 5.0\)"):
        llm.invoke("Tom has 3 apples.", model="other", request_timeout=5.0)
    assert loads == []


def test_a_llamaindex_call_that_changes_a_backend_field_is_refused(engine: MFSEngine, loads: list) -> None:
    llm = llamaindex_mfs.MFSLLM(engine=engine)
    assert llm.chat([ChatMessage(role="user", content="Tom has 3 apples.")], seed=1).message.content
    with pytest.raises(ValueError, match=r"in base_urls \(engine: \[\]; here: \['http://x:1/v1'\]\)"):
        llm.complete("Tom has 3 apples.", base_urls=["http://x:1/v1"])
    with pytest.raises(ValueError, match=r"in api_key \(engine: None; here: '\*\*\*\*\*\*\*\*\*\*'\)") as caught:
        llamaindex_mfs.MFSLLM(engine=engine, api_key="sk-secret")
    assert "sk-secret" not in str(caught.value)
    assert loads == []


def test_equal_backend_settings_use_the_engine(engine: MFSEngine, loads: list) -> None:
    same = MFSSettings(step_beam_size=4, seed=3, max_retries=3)
    assert engine_for(same, engine) is engine
    for cls in (langchain_mfs.ChatMFS, langchain_mfs.MFSLLM, llamaindex_mfs.MFSLLM):
        assert cls(engine=engine, model="mfs-demo", model_kwargs={"max_retries": 3}).engine is engine


def test_backend_settings_list_what_backend_key_listed() -> None:
    assert BACKEND_FIELDS == (
        "backend", "model", "device", "dtype", "batch_size", "base_urls", "api_key", "request_timeout",
        "max_retries", "server_n", "replica_routing", "tokenizer", "num_parameters", "tensor_parallel_size",
        "gpu_memory_utilization", "kv_cache_gib", "max_model_len", "enable_prefix_caching", "vllm_kwargs",
        "scheduling",
    )
    settings = MFSSettings(base_urls=["http://a:1/v1"], api_key="sk-zzz", vllm_kwargs={"enforce_eager": True})
    backend = settings.backend_settings
    assert isinstance(backend, BackendSettings)
    assert {name: getattr(backend, name) for name in BACKEND_FIELDS} == {name: getattr(settings, name) for name in BACKEND_FIELDS}
    assert hash(backend) == hash(MFSSettings(base_urls=["http://a:1/v1"], api_key="sk-zzz", vllm_kwargs={"enforce_eager": True}).backend_settings)
    assert backend != MFSSettings(base_urls=["http://a:1/v1"], api_key="other").backend_settings
    assert {backend: 1}[settings.backend_settings] == 1
    with pytest.raises(Exception, match="frozen"):
        backend.model = "x"
    assert "sk-zzz" not in repr(backend) and "sk-zzz" not in str(settings.backend_key())


def test_auto_device_equals_the_device_it_resolves_to() -> None:
    from mfs_core.backend_identity import resolve_device

    auto = MFSSettings(device="auto").backend_settings
    assert auto == MFSSettings(device=resolve_device("auto")).backend_settings
    assert MFSSettings(backend="openai", device="cuda:3").backend_settings == MFSSettings(backend="openai").backend_settings
    assert auto.differences(MFSSettings(dtype="float16", batch_size=4).backend_settings) == ["dtype", "batch_size"]
