"""Each method's own parameters (:mod:`mfs_core.decoders.params`): which settings a call may set for which
method, checked in LangChain, LlamaIndex, the call layer and ``mfs bench`` alike. A scripted model, no weights."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from langchain_mfs import ChatMFS
from llamaindex_mfs import MFSLLM as LlamaIndexLLM
from mfs_core.backend_identity import BACKEND_FIELDS
from mfs_core.decoders import (
    COMMON_PARAMS, DECODER_SPECS, DecoderSpec, MethodParams, ParamNotAccepted, decoder_spec, method_params,
    register_decoder,
)
from mfs_core.decoders.baselines import decode_self_consistency
from mfs_core.decoders.params import CoTParams, DeepConfParams, ESCParams, MFSParams, PhiParams, SCParams
from mfs_core.engine import MFSEngine
from mfs_core.errors import MFSError
from mfs_core.settings import MFSSettings
from tests.scripted import ScriptedBackend, continuation

ANSWER = "3 + 4 = 7\nThe answer is: \\boxed{7}."
LIBRARY = {"mfs": MFSParams, "cot": CoTParams, "sc": SCParams, "esc": ESCParams, "deepconf": DeepConfParams,
           "phi": PhiParams, "mfs-paper": MFSParams}


def _engine() -> tuple[ScriptedBackend, MFSEngine]:
    backend = ScriptedBackend(lambda r: [continuation(ANSWER, mean_logprob=-0.1, finish_reason="eos")] * r.n)
    return backend, MFSEngine(backend, MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2, num_samples=2))


def test_every_setting_is_load_time_or_some_methods_parameter() -> None:
    per_call = set(COMMON_PARAMS).union(*(params.method_fields for params in LIBRARY.values()))
    assert per_call | set(BACKEND_FIELDS) == set(MFSSettings.model_fields)
    assert not per_call & set(BACKEND_FIELDS)
    assert {name: DECODER_SPECS[name].params for name in LIBRARY} == LIBRARY


def test_each_method_takes_its_own_fields_with_the_settings_ranges_and_defaults() -> None:
    assert SCParams.method_fields == ("num_samples", "sc_round_size", "aggregation", "vote_quality_beta",
                                      "answer_stop_alpha")
    assert CoTParams.method_fields == () and set(CoTParams.model_fields) == set(COMMON_PARAMS)
    assert "step_beam_size" in MFSParams.model_fields and "num_samples" not in MFSParams.model_fields
    assert "num_samples" not in PhiParams.model_fields and "esc_window" in ESCParams.model_fields
    assert SCParams().num_samples == MFSSettings().num_samples == 8
    assert SCParams.model_fields["num_samples"].description == MFSSettings.model_fields["num_samples"].description
    assert SCParams.check({"num_samples": 4, "seed": 3, "temperature": None}, method="sc") == {"num_samples": 4,
                                                                                              "seed": 3}
    with pytest.raises(ValidationError, match=r"^num_samples=0: .*allowed: 1 <= num_samples <= 4096$") as caught:
        SCParams.check({"num_samples": 0}, method="sc")
    assert isinstance(caught.value, MFSError) and "\n" not in str(caught.value)
    with pytest.raises(ParamNotAccepted, match=r"^method 'sc' does not take 'num_rollouts', 'step_beam_size'; its "
                                               r"parameters: num_samples, sc_round_size, aggregation, ") as refused:
        decoder_spec("sc").check_params({"step_beam_size": 2, "num_rollouts": 2, "seed": 1})
    assert refused.value.names == ("num_rollouts", "step_beam_size") and isinstance(refused.value, ValueError)
    with pytest.raises(ValueError, match=r"not per-call MFSSettings fields: \['backend', 'beam'\]"):
        method_params("Bad", ("beam", "backend"), "no")


def test_load_time_settings_are_no_methods_and_a_decoder_without_params_takes_any_setting() -> None:
    # the engine source decides on a call's load-time settings (LangChain's per-call model override)
    assert decoder_spec("cot").check_params({"model": "x", "seed": 2}) == {"model": "x", "seed": 2}
    spec = DecoderSpec("sc-own", decode_self_consistency, samples=True)
    assert spec.check_params({"num_rollouts": 3, "model": "x"}) == {"num_rollouts": 3, "model": "x"}


def test_self_consistency_samples_num_samples_whatever_m_is() -> None:
    backend, engine = _engine()
    [result] = engine.decode_prompts(["Q"], method="sc", settings=engine.settings.changed(step_beam_size=5))
    assert [request.n for request in backend.requests] == [2] and len(result.completions) == 2


def test_langchain_and_llamaindex_check_a_calls_parameters_against_its_method() -> None:
    backend, engine = _engine()
    chat = ChatMFS(engine=engine)
    assert chat.invoke("What is 3 plus 4?", method="sc", num_samples=3).content == ANSWER
    assert backend.requests[-1].n == 3
    with pytest.raises(ParamNotAccepted, match=r"^method 'sc' does not take 'step_beam_size'; its parameters: "):
        chat.invoke("What is 3 plus 4?", method="sc", step_beam_size=3)
    llm = LlamaIndexLLM(engine=engine, method="cot")
    with pytest.raises(ParamNotAccepted, match=r"^method 'cot' does not take 'num_samples'; its parameters: none, "):
        llm.complete("What is 3 plus 4?", num_samples=3)
    assert llm.complete("What is 3 plus 4?", method="sc", num_samples=4).text == ANSWER
    assert backend.requests[-1].n == 4
    calls = len(backend.requests)
    with pytest.raises(ValidationError, match=r"^num_samples=0: "):
        chat.invoke("What is 3 plus 4?", method="sc", num_samples=0)
    assert len(backend.requests) == calls  # refused before anything decodes


def test_a_registered_variant_declares_its_params() -> None:
    params = method_params("SCWideParams", SCParams.method_fields, "SC at k = 12.")
    spec = register_decoder(DecoderSpec("sc-wide-test", decode_self_consistency, samples=True, params=params,
                                        overrides={"num_samples": 12}))
    try:
        assert issubclass(spec.params, MethodParams) and spec.check_params({"seed": 1}) == {"seed": 1}
        with pytest.raises(ParamNotAccepted, match="^method 'sc-wide-test' does not take 'max_steps'"):
            spec.check_params({"max_steps": 2})
        assert spec.worst_case_tokens(MFSSettings(max_answer_tokens=10)) == 12 * 10
    finally:
        from mfs_core.decoders.registry import _REGISTRY

        del _REGISTRY["sc-wide-test"]
