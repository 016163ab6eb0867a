"""Settings: paper defaults, env vars, and errors that name the field and the value."""

import pytest
from pydantic import ValidationError

from mfs_core import MFSSettings


def test_paper_defaults():
    s = MFSSettings()
    assert (s.step_beam_size, s.num_rollouts, s.prune_lambda, s.temperature) == (8, 8, 0.8, 0.7)
    assert (s.stop_epsilon, s.max_steps, s.min_steps, s.selection_temperature) == (1e-6, 8, 1, 0.1)
    assert s.model == "mfs-demo" and s.assistant_prefix == "The reasoning steps are:\n\n"
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


def test_unknown_field_is_rejected():
    with pytest.raises(ValidationError, match="beam_size"):
        MFSSettings(beam_size=4)
