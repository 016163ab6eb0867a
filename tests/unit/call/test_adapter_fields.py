"""The adapters keep the settings users turn often as flat fields, every other setting in ``model_kwargs``.

The flat fields (:data:`mfs_core.call.ADAPTER_FIELDS`) are derived from :class:`MFSSettings`
(:func:`mfs_core.call.settings_fields`); these tests compare names, types, defaults and descriptions
field by field, and check that every other setting is reached through ``model_kwargs`` in both
adapters, with one-line errors for a name in the wrong place.
"""

from __future__ import annotations

import pydantic
import pytest
from pydantic import Field

import langchain_mfs
import llamaindex_mfs
from mfs_core.call import ADAPTER_FIELDS, adapter_arguments, settings_fields
from mfs_core.settings import MFSSettings

SETTINGS = MFSSettings.model_fields
OTHERS = [name for name in SETTINGS if name not in ADAPTER_FIELDS]
ADAPTERS = [langchain_mfs.MFSLLM, langchain_mfs.ChatMFS, llamaindex_mfs.MFSLLM]


def _engine():
    from mfs_core.engine import MFSEngine
    from tests.scripted import ScriptedBackend, continuation

    def script(request):
        return [continuation("3 + 4 = 7\nThe answer is: \\boxed{7}.<end_of_reasoning>", mean_logprob=-0.1)] * request.n

    return MFSEngine(ScriptedBackend(script), MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2))


def test_the_flat_fields_are_fourteen_settings_users_turn_often() -> None:
    assert ADAPTER_FIELDS == (
        "model", "backend", "device", "base_urls", "api_key", "seed", "temperature", "top_p", "max_answer_tokens",
        "system_prompt", "step_beam_size", "num_rollouts", "max_steps", "num_samples",
    )
    assert set(ADAPTER_FIELDS) <= set(SETTINGS) and len(OTHERS) == len(SETTINGS) - 14


@pytest.mark.parametrize("cls", [langchain_mfs.MFSLLM, langchain_mfs.ChatMFS])
def test_langchain_flat_fields_are_the_settings_own(cls: type) -> None:
    for name in ADAPTER_FIELDS:
        mine, field = cls.model_fields[name], SETTINGS[name]
        assert mine.annotation == field.annotation, name
        assert mine.get_default(call_default_factory=True) == field.get_default(call_default_factory=True), name
        assert mine.description.startswith(field.description), name
    assert not set(OTHERS) & set(cls.model_fields)  # every other setting is reached through model_kwargs
    assert cls.model_fields["max_answer_tokens"].default == SETTINGS["max_answer_tokens"].default == 512
    assert cls().max_answer_tokens == MFSSettings().max_answer_tokens


def test_llamaindex_flat_fields_are_the_settings_own_left_unset() -> None:
    fields = llamaindex_mfs.MFSLLM.model_fields
    for name in ADAPTER_FIELDS:
        mine, field = fields[name], SETTINGS[name]
        assert mine.annotation == (field.annotation | None), name
        assert mine.default is None, name
        assert mine.description.startswith(field.description), name
        assert f"({field.get_default(call_default_factory=True)!r})" in mine.description, name
    assert not set(OTHERS) & set(fields)
    assert fields["api_key"].exclude is True and SETTINGS["api_key"].repr is False


@pytest.mark.parametrize("cls", ADAPTERS)
def test_model_kwargs_set_the_other_settings(cls: type, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MFS_PRUNE_LAMBDA", "0.25")  # a setting not given still comes from the environment
    model = cls(engine=None if cls is not llamaindex_mfs.MFSLLM else _engine(), step_beam_size=3,
                model_kwargs={"stop_epsilon": 0.2, "min_steps": 1})
    settings = model.settings
    assert (settings.step_beam_size, settings.stop_epsilon, settings.min_steps) == (3, 0.2, 1)
    if cls is not llamaindex_mfs.MFSLLM:
        assert settings.prune_lambda == 0.25
    model.model_kwargs = {**model.model_kwargs, "stop_epsilon": 0.4}  # changed after construction: rebuilt
    assert model.settings.stop_epsilon == 0.4


@pytest.mark.parametrize("cls", ADAPTERS)
def test_a_name_in_the_wrong_place_is_refused_in_one_line(cls: type) -> None:
    name = cls.__name__
    with pytest.raises(TypeError, match=rf"^{name} keeps 'stop_epsilon' out of its flat fields: pass model_kwargs=\{{'stop_epsilon': 0.1\}}$"):
        cls(stop_epsilon=0.1)
    with pytest.raises(TypeError, match=rf"^{name}: pass 'seed' as a field, not in model_kwargs$"):
        cls(model_kwargs={"seed": 1})
    with pytest.raises(TypeError, match=rf"^{name}'s model_kwargs got an unknown setting 'stop_epsiln' \(did you mean 'stop_epsilon'\?\)$"):
        cls(model_kwargs={"stop_epsiln": 1})
    with pytest.raises(pydantic.ValidationError, match=r"stop_epsilon=-1: .*allowed: 0.0 <= stop_epsilon"):
        cls(engine=_engine(), model_kwargs={"stop_epsilon": -1})


def test_a_call_keyword_that_is_no_flat_field_lands_in_the_call_copy_model_kwargs() -> None:
    model = langchain_mfs.ChatMFS(engine=_engine(), model_kwargs={"min_steps": 1})
    changed, rest = model._with_call_settings({"stop_epsilon": 0.3, "seed": 5, "tags": ["x"]})
    assert (changed.seed, changed.model_kwargs, rest) == (5, {"min_steps": 1, "stop_epsilon": 0.3}, {"tags": ["x"]})
    assert (changed.settings.stop_epsilon, changed.settings.seed, model.settings.stop_epsilon) == (0.3, 5, MFSSettings().stop_epsilon)


def test_adapter_arguments_split_a_settings_dict() -> None:
    values = {"step_beam_size": 4, "dtype": "bfloat16", "method": "sc", "model_kwargs": {"min_steps": 2}}
    assert adapter_arguments(values) == {
        "step_beam_size": 4, "method": "sc", "model_kwargs": {"min_steps": 2, "dtype": "bfloat16"},
    }
    assert adapter_arguments({"seed": 1}) == {"seed": 1}


def test_a_setting_added_later_flows_into_the_derived_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    class Later(MFSSettings):
        later_knob: int = Field(default=3, ge=1, description="A setting added after the adapters were written.")

    monkeypatch.setattr("mfs_core.call.settings.MFSSettings", Later)
    monkeypatch.setattr("mfs_core.call.settings.ADAPTER_FIELDS", (*ADAPTER_FIELDS, "later_knob"))
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
