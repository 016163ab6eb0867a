"""The research variants of experiments/variants.py: registered by name through the public registry, each the
library's decoder under its overrides."""

from __future__ import annotations

import pytest

from experiments.variants import VARIANTS
from mfs_core.decoders import DECODERS, decoder_spec
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from tests.scripted import ScriptedBackend, continuation

END = "<end_of_reasoning>"


def test_every_variant_is_registered_by_its_name_beside_the_library_methods() -> None:
    names = [spec.name for spec in VARIANTS]
    assert len(names) == len(set(names)) == 14
    assert {"mfs", "cot", "sc", "esc", "deepconf", "phi", "mfs-paper"} | set(names) == set(DECODERS)
    assert all(decoder_spec(spec.name) is spec for spec in VARIANTS)
    assert dict(decoder_spec("mfs-no-stop").overrides) == {"early_stopping": False}
    assert decoder_spec("sc-rollout-temperature").samples and decoder_spec("phi-release").final == "select"


@pytest.mark.parametrize(("rollout_temperature", "sampled_at"), [(0.4, 0.4), (None, 0.6)])
def test_sc_rollout_temperature_samples_at_mfs_rollout_temperature(rollout_temperature, sampled_at) -> None:
    texts = [("The answer is: \\boxed{7}.", -0.2), ("The answer is: \\boxed{8}.", -0.1), ("The answer is: \\boxed{7}.", -0.3)]
    backend = ScriptedBackend([[continuation(t, mean_logprob=q, stop_reason=END) for t, q in texts]])
    settings = MFSSettings(step_beam_size=3, temperature=0.6, rollout_temperature=rollout_temperature)
    result = MFSEngine(backend, settings).decode_prompts(["Q"], method="sc-rollout-temperature")[0]
    (request,) = backend.requests
    assert (request.n, request.temperature, request.greedy) == (3, sampled_at, False)
    assert result.method == "sc-rollout-temperature" and result.stop_reason == "sampled"
    assert result.answer == "7" and result.vote_share == pytest.approx(2 / 3)
