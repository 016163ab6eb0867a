"""Tests of the adapter helpers in :mod:`mfs_core.call` that build settings, pick the
engine and render chat messages (no model is loaded)."""

from __future__ import annotations

import pydantic
import pytest

from mfs_core.call import chat_message, engine_for, settings_from_fields
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from tests.scripted import ScriptedBackend, continuation


def _engine(**settings: object) -> MFSEngine:
    backend = ScriptedBackend(lambda request: [continuation("x")] * request.n)
    return MFSEngine(backend, MFSSettings(**settings))


# --- settings_from_fields -------------------------------------------------------------------
def test_settings_from_fields_reads_environment_for_fields_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MFS_STEP_BEAM_SIZE", "3")
    monkeypatch.setenv("MFS_NUM_ROLLOUTS", "5")
    settings = settings_from_fields({"num_rollouts": 2, "max_steps": None})
    assert settings.step_beam_size == 3  # from the environment
    assert settings.num_rollouts == 2  # given wins over the environment
    assert settings.max_steps == MFSSettings.model_fields["max_steps"].default  # None: not set


def test_settings_from_fields_changes_a_copy_of_base(monkeypatch: pytest.MonkeyPatch) -> None:
    base = MFSSettings(step_beam_size=4, seed=11)
    monkeypatch.setenv("MFS_SEED", "99")  # a base is complete: the environment no longer applies
    settings = settings_from_fields({"step_beam_size": 2}, base=base)
    assert (settings.step_beam_size, settings.seed) == (2, 11)
    assert base.step_beam_size == 4
    assert settings_from_fields({}, base=base) is base
    assert settings_from_fields({"seed": None}, base=base) is base


def test_settings_from_fields_names_unknown_fields() -> None:
    with pytest.raises(ValueError, match=r"not MFSSettings fields: \['step_beam_sise'\]"):
        settings_from_fields({"step_beam_sise": 4})


def test_settings_from_fields_names_a_bad_value() -> None:
    with pytest.raises(pydantic.ValidationError, match="step_beam_size"):
        settings_from_fields({"step_beam_size": 0})
    with pytest.raises(pydantic.ValidationError, match="min_steps"):
        settings_from_fields({"min_steps": 5}, base=MFSSettings(max_steps=2))


# --- engine_for -----------------------------------------------------------------------------
def test_engine_for_uses_the_injected_engine_for_the_same_model() -> None:
    engine = _engine(step_beam_size=4)
    assert engine_for(MFSSettings(step_beam_size=2, num_rollouts=3), engine) is engine


def test_engine_for_another_model_refuses_the_injected_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[MFSSettings] = []
    shared = _engine()

    def from_settings(cls: type[MFSEngine], settings: MFSSettings | None = None, **overrides: object) -> MFSEngine:
        built.append(settings)
        return shared

    monkeypatch.setattr(MFSEngine, "from_settings", classmethod(from_settings))
    other = MFSSettings(model="/models/other")
    with pytest.raises(ValueError, match=r"^engine_for\(engine=...\): .* in model \(engine: 'mfs-demo'; here: '/models/other'\)"):
        engine_for(other, _engine())
    assert built == []  # never a second model behind the caller's back
    assert engine_for(other) is shared
    assert built == [other]


# --- chat_message ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("role", "expected"),
    [
        ("system", "system"),
        ("developer", "system"),
        ("human", "user"),
        ("user", "user"),
        ("User", "user"),
        ("ai", "assistant"),
        ("assistant", "assistant"),
        ("model", "assistant"),
        ("chatbot", "assistant"),
    ],
)
def test_chat_message_normalises_roles(role: str, expected: str) -> None:
    assert chat_message(role, "hi") == {"role": expected, "content": "hi"}


def test_chat_message_keeps_tool_results_and_tool_calls_for_the_renderer() -> None:
    assert chat_message("tool", "7", name="calculator", tool_call_id="c1") == {
        "role": "tool", "content": "7", "name": "calculator", "tool_call_id": "c1"
    }
    assert chat_message("function", "7") == {"role": "tool", "content": "7"}
    calls = [{"name": "add", "arguments": {"a": 3, "b": 4}, "id": "c1"}]
    assert chat_message("ai", "", tool_calls=calls) == {"role": "assistant", "content": "", "tool_calls": calls}
    assert chat_message("user", "hi", name="ann") == {"role": "user", "content": "hi"}  # a speaker's name is dropped


def test_chat_message_rejects_unknown_roles_and_non_text() -> None:
    with pytest.raises(ValueError, match="unknown chat role 'critic'"):
        chat_message("critic", "hi")
    with pytest.raises(TypeError, match="content must be a string, got list"):
        chat_message("user", [{"type": "image"}])  # type: ignore[arg-type]
