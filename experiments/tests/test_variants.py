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
    assert len(names) == len(set(names)) == 25
    assert {"mfs", "cot", "sc", "esc", "deepconf", "phi", "mfs-paper"} | set(names) == set(DECODERS)
    assert all(decoder_spec(spec.name) is spec for spec in VARIANTS)
    assert dict(decoder_spec("mfs-no-stop").overrides) == {"early_stopping": False}
    assert decoder_spec("sc-rollout-temperature").samples and decoder_spec("phi-release").final == "select"


@pytest.mark.parametrize(("rollout_temperature", "sampled_at"), [(0.4, 0.4), (None, 0.6)])
def test_sc_rollout_temperature_samples_at_mfs_rollout_temperature(rollout_temperature, sampled_at) -> None:
    texts = [("The answer is: \\boxed{7}.", -0.2), ("The answer is: \\boxed{8}.", -0.1), ("The answer is: \\boxed{7}.", -0.3)]
    backend = ScriptedBackend([[continuation(t, mean_logprob=q, stop_reason=END) for t, q in texts]])
    settings = MFSSettings(num_samples=3, temperature=0.6, rollout_temperature=rollout_temperature)
    result = MFSEngine(backend, settings).decode_prompts(["Q"], method="sc-rollout-temperature")[0]
    (request,) = backend.requests
    assert (request.n, request.temperature, request.greedy) == (3, sampled_at, False)
    assert result.method == "sc-rollout-temperature" and result.stop_reason == "sampled"
    assert result.answer == "7" and result.vote_share == pytest.approx(2 / 3)


def test_the_rule_variants_set_one_value_each_and_run():
    from experiments.variants import RULE_VALUES

    assert RULE_VALUES == {"foresight_window": 32, "answer_stop_alpha": 0.1, "vote_quality_beta": 5.0,
                           "sc_round_size": 4, "sc_k": 16}
    assert dict(decoder_spec("mfs-anytime-stop").overrides) == {"answer_stop_alpha": 0.1, "convergence_stop": False}
    sc_rules = decoder_spec("sc-rules")
    assert not sc_rules.samples and dict(sc_rules.overrides)["num_samples"] == 16  # a point, not an SC curve
    assert sc_rules.worst_case_tokens(MFSSettings(max_answer_tokens=10)) == 160
    # one answer every time: rounds of 4, E(3, 0) = 15/4 < 20 = 2/0.1, E(7, 0) = 255/8 >= 20: two rounds
    backend = ScriptedBackend(lambda r: [continuation("The answer is: \\boxed{7}.", mean_logprob=-0.1,
                                                      stop_reason=END)] * r.n)
    result = MFSEngine(backend, MFSSettings(prompt_format="raw")).decode_prompts(["Q"], method="sc-rules")[0]
    assert [r.n for r in backend.requests] == [4, 4]
    assert (result.method, result.stop_reason, result.answer, result.completion_weights) == (
        "sc-rules", "answer_certified", "7", [1.0] * 8)
    esc = MFSEngine(backend, MFSSettings(prompt_format="raw")).decode_prompts(["Q"], method="esc-anytime")[0]
    assert (esc.stop_reason, len(esc.completions)) == ("answer_certified", 8)
