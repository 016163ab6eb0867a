"""Each setting is declared once: the adapters' fields are MFSSettings' own.

The LangChain and LlamaIndex classes derive every settings field from :class:`MFSSettings`
(:func:`mfs_core.call.settings_fields`); these tests compare names, types, defaults and
descriptions field by field, so a setting added to MFSSettings appears in both adapters.
"""

from __future__ import annotations

import pydantic
import pytest
from pydantic import Field

import langchain_mfs
import llamaindex_mfs
from mfs_core.call import settings_fields
from mfs_core.settings import MFSSettings

SETTINGS = MFSSettings.model_fields


@pytest.mark.parametrize("cls", [langchain_mfs.MFSLLM, langchain_mfs.ChatMFS])
def test_langchain_fields_are_the_settings_fields(cls: type) -> None:
    for name, field in SETTINGS.items():
        mine = cls.model_fields[name]
        assert mine.annotation == field.annotation, name
        assert mine.get_default(call_default_factory=True) == field.get_default(call_default_factory=True), name
        assert mine.description.startswith(field.description), name
    assert cls.model_fields["max_answer_tokens"].default == SETTINGS["max_answer_tokens"].default == 512
    assert cls().max_answer_tokens == MFSSettings().max_answer_tokens


def test_llamaindex_fields_are_the_settings_fields_left_unset() -> None:
    fields = llamaindex_mfs.MFSLLM.model_fields
    for name, field in SETTINGS.items():
        mine = fields[name]
        assert mine.annotation == (field.annotation | None), name
        assert mine.default is None, name
        assert mine.description.startswith(field.description), name
        assert f"({field.get_default(call_default_factory=True)!r})" in mine.description, name
    assert fields["api_key"].exclude is True and SETTINGS["api_key"].repr is False


def test_a_setting_added_later_flows_into_the_derived_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    class Later(MFSSettings):
        later_knob: int = Field(default=3, ge=1, description="A setting added after the adapters were written.")

    monkeypatch.setattr("mfs_core.call.settings.MFSSettings", Later)
    derived = pydantic.create_model("Derived", **settings_fields())
    optional = pydantic.create_model("Optional", **settings_fields(optional=True))
    assert derived().later_knob == 3
    assert optional.model_fields["later_knob"].annotation == (int | None)
    assert optional.model_fields["later_knob"].description.startswith("A setting added after")


def test_a_call_builds_its_settings_without_reading_the_environment_or_env_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from llama_index.core.base.llms.types import ChatMessage

    import mfs_core.settings
    from mfs_core.engine import MFSEngine
    from tests.scripted import ScriptedBackend, continuation

    def script(request):
        return [continuation("3 + 4 = 7\nThe answer is: \\boxed{7}.<end_of_reasoning>", mean_logprob=-0.1)] * request.n

    engine = MFSEngine(ScriptedBackend(script), MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2))
    models = [langchain_mfs.ChatMFS(engine=engine), langchain_mfs.MFSLLM(engine=engine), llamaindex_mfs.MFSLLM(engine=engine)]

    def no_io(*args: object, **kwargs: object) -> None:
        raise AssertionError("a call read the environment or the .env file")

    monkeypatch.setattr(mfs_core.settings.BaseSettings, "_settings_build_values", no_io)
    monkeypatch.setattr(mfs_core.settings, "environment_sources", no_io)
    for model in models[:2]:
        assert model.invoke("Tom has 3 apples.", seed=4, num_rollouts=3)
    assert models[2].chat([ChatMessage(role="user", content="Tom has 3 apples.")], seed=4, num_rollouts=3).message.content


@pytest.mark.parametrize("cls", [langchain_mfs.MFSLLM, langchain_mfs.ChatMFS, llamaindex_mfs.MFSLLM])
def test_a_call_resolves_its_settings_once(cls: type, monkeypatch: pytest.MonkeyPatch) -> None:
    from llama_index.core.base.llms.types import ChatMessage

    from mfs_core.engine import MFSEngine
    from tests.scripted import ScriptedBackend, continuation

    def script(request):
        return [continuation("3 + 4 = 7\nThe answer is: \\boxed{7}.<end_of_reasoning>", mean_logprob=-0.1)] * request.n

    model = cls(engine=MFSEngine(ScriptedBackend(script), MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2)))
    model.settings  # the instance's own settings are resolved at construction or first use
    built: list[dict] = []
    real = MFSSettings.from_values.__func__

    def counted(klass: type, values: dict) -> MFSSettings:
        built.append(dict(values))
        return real(klass, values)

    monkeypatch.setattr(MFSSettings, "from_values", classmethod(counted))
    if cls is llamaindex_mfs.MFSLLM:
        model.chat([ChatMessage(role="user", content="Tom has 3 apples.")], seed=4, num_rollouts=3)
    else:
        model.invoke("Tom has 3 apples.", seed=4, num_rollouts=3)
    assert len(built) == 1 and (built[0]["seed"], built[0]["num_rollouts"]) == (4, 3)
