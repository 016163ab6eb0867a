"""Settings: paper defaults, env vars, and errors that name the field and the value."""

import warnings

import pytest
from pydantic import ValidationError

from mfs_core import MFSSettings
from mfs_core.errors import format_validation_error
from mfs_core.settings import UnknownSettingWarning, setting_sources


def test_paper_defaults():
    s = MFSSettings()
    assert (s.step_beam_size, s.num_rollouts, s.prune_lambda, s.temperature) == (8, 8, 0.8, 0.7)
    assert (s.stop_epsilon, s.max_steps, s.min_steps, s.selection_temperature) == (1e-6, 8, 1, 0.1)
    assert s.model == "mfs-demo" and s.assistant_prefix is None  # model-aware: test_prompts.py
    assert (s.selection, s.baseline, s.aggregation) == ("sample", "parent_foresight", "majority")


def test_env_vars_with_prefix(monkeypatch):
    monkeypatch.setenv("MFS_STEP_BEAM_SIZE", "3")
    monkeypatch.setenv("MFS_PRUNE_LAMBDA", "0.5")
    s = MFSSettings()
    assert (s.step_beam_size, s.prune_lambda) == (3, 0.5)
    assert MFSSettings(step_beam_size=5).step_beam_size == 5  # keyword beats env


@pytest.mark.parametrize(
    ("field", "value"),
    [("step_beam_size", 0), ("num_rollouts", 0), ("prune_lambda", -0.1), ("temperature", 0.0), ("temperature", -1.0),
     ("top_p", 1.5), ("max_steps", 0), ("backend", "tpu")],
)
def test_bad_values_name_field_and_value(field, value):
    with pytest.raises(ValidationError) as info:
        MFSSettings(**{field: value})
    text = str(info.value)
    assert field in text and repr(value).strip("'") in text


def test_cross_field_errors():
    with pytest.raises(ValidationError, match=r"min_steps \(5\) must not exceed max_steps \(2\)"):
        MFSSettings(min_steps=5, max_steps=2)
    with pytest.raises(ValidationError, match="model must name a model"):
        MFSSettings(model="  ")


def test_unknown_field_is_rejected_in_one_line_naming_the_closest():
    with pytest.raises(TypeError, match=r"^MFSSettings got an unknown setting 'beam_size' \(did you mean 'step_beam_size'\?\)$"):
        MFSSettings(beam_size=4)
    with pytest.raises(TypeError, match=r"'step_beam' \(did you mean 'step_beam_size'\?\), 'zzz'$"):
        MFSSettings(step_beam=4, zzz=1)


def test_a_dotenv_with_other_keys_is_read_for_mfs_keys_only(tmp_path, monkeypatch):
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-other\nLANGSMITH_TRACING=true\nMFS_NUM_ROLLOUTS=3\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning for keys without the MFS_ prefix
        settings = MFSSettings()
    assert settings.num_rollouts == 3 and settings.step_beam_size == 8


def test_a_misspelled_mfs_key_warns_naming_the_closest_setting(tmp_path, monkeypatch):
    (tmp_path / ".env").write_text("MFS_STEP_BEAM=4\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MFS_NUM_ROLOUTS", "2")
    with pytest.warns(UnknownSettingWarning) as record:
        settings = MFSSettings()
    messages = sorted(str(w.message) for w in record)
    assert messages == [
        "MFS_NUM_ROLOUTS is not an MFS setting and is ignored; did you mean MFS_NUM_ROLLOUTS?",
        "MFS_STEP_BEAM (.env) is not an MFS setting and is ignored; did you mean MFS_STEP_BEAM_SIZE?",
    ]
    assert (settings.step_beam_size, settings.num_rollouts) == (8, 8)  # ignored, not applied
    monkeypatch.setenv("MFS_SEED", "3")
    for name in ("MFS_DATA_DIR", "MFS_TEST_CACHE", "MFS_SERVER_MAX_QUEUE"):  # read elsewhere: no warning
        monkeypatch.setenv(name, str(tmp_path))
    (tmp_path / ".env").unlink()
    monkeypatch.delenv("MFS_NUM_ROLOUTS")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownSettingWarning)
        MFSSettings()
    assert setting_sources() == {"seed": "MFS_SEED"}


def test_api_key_is_a_secret_kept_out_of_repr_and_dumps(monkeypatch):
    key = "sk-FAKE-0123456789"
    settings = MFSSettings(api_key=key)
    assert settings.api_key.get_secret_value() == key
    for text in (repr(settings), str(settings), settings.model_dump_json(), str(settings.model_dump())):
        assert key not in text
    monkeypatch.setenv("MFS_API_KEY", key)
    assert MFSSettings().api_key.get_secret_value() == key
    assert key not in repr(MFSSettings())
    assert MFSSettings(api_key=key).backend_key() == MFSSettings().backend_key()  # keyed by digest
    assert key not in str(MFSSettings().backend_key())


def test_one_line_errors_name_field_value_and_range():
    cases = [
        ({"step_beam_size": 0}, "step_beam_size=0: Input should be greater than or equal to 1; allowed: 1 <= step_beam_size <= 1024"),
        ({"temperature": 0.0}, "temperature=0.0: Input should be greater than 0; allowed: 0.0 < temperature <= 10.0"),
        ({"backend": "tpu"}, "backend='tpu': Input should be 'transformers', 'vllm' or 'openai'"),
        ({"min_steps": 5, "max_steps": 2}, "min_steps (5) must not exceed max_steps (2)"),
    ]
    for values, expected in cases:
        with pytest.raises(ValidationError) as info:
            MFSSettings(**values)
        assert format_validation_error(info.value, MFSSettings) == expected
    with pytest.raises(ValidationError) as info:
        MFSSettings(step_beam_size=0, num_rollouts=2000)
    line = format_validation_error(info.value, MFSSettings, sources={"num_rollouts": "MFS_NUM_ROLLOUTS"})
    assert "\n" not in line and "num_rollouts=2000 (from MFS_NUM_ROLLOUTS): Input should be less than or equal to 1024" in line
