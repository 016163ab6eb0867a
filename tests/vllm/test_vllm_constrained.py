"""Grammar-constrained actions on real vLLM: in-process and through ``vllm serve`` (demo model).

Every forced tool call (``tool_choice="required"``) and every structured output (json_schema
``{"value": integer}``) of 50 generated questions (the first 10 through ``vllm serve``) must parse
and validate when sampled under its grammar (``constrain_actions``), built as the adapters build them
(:func:`experiments.benchmarks.constrained.run_actions`). The last test pins what vLLM reports as
log-probs under a grammar: renormalised over the tokens the grammar allows (the bitmask is
applied to the logits before the sampler computes its "raw" log-probs), so above the raw ones.
"""

from __future__ import annotations

import pytest
import torch
from bounded import within

from mfs_core.backends.openai import OpenAIBackend
from mfs_core.backends.transformers import TransformersBackend
from mfs_core.backends.vllm import VLLMBackend
from mfs_core.vllm_server import VLLMServer
from experiments.benchmarks.constrained import FORCED_CALL, STRUCTURED_OUTPUT, run_actions
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import GenerationRequest, RequestGrammar

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.enable_socket]

SETTINGS = MFSSettings(step_beam_size=2, num_rollouts=2, seed=0)
COUNT = 50
SERVED = 10
"""Questions through ``vllm serve``: the same grammars reach it as JSON (50 there took 4 minutes of CI's 30)."""


@pytest.fixture(scope="module")
def http_engine(vllm_servers: list[VLLMServer]) -> MFSEngine:
    """The HTTP backend on the first ``vllm serve`` replica."""
    settings = MFSSettings(backend="openai", base_urls=[vllm_servers[0].url], max_retries=3)
    return MFSEngine(OpenAIBackend.from_settings(settings), SETTINGS)


@pytest.mark.parametrize("kind", [FORCED_CALL, STRUCTURED_OUTPUT])
def test_every_constrained_action_validates_in_process(vllm_backend: VLLMBackend, kind: str) -> None:
    run = run_actions(MFSEngine(vllm_backend, SETTINGS), SETTINGS, kind, constrained=True, count=COUNT)
    assert (run.valid, run.total) == (COUNT, COUNT), run.invalid[:3]


@pytest.mark.parametrize("kind", [FORCED_CALL, STRUCTURED_OUTPUT])
def test_every_constrained_action_validates_through_vllm_serve(http_engine: MFSEngine, kind: str) -> None:
    run = within(600, lambda: run_actions(http_engine, SETTINGS, kind, constrained=True, count=SERVED))
    assert (run.valid, run.total) == (SERVED, SERVED), run.invalid[:3]


def test_log_probs_under_a_grammar_are_renormalised_not_raw(
    vllm_backend: VLLMBackend, reference_backend: TransformersBackend
) -> None:
    forced = '{"type":"structural_tag","format":{"type":"const_string","value":"<tool_call>"}}'
    prompt = vllm_backend.apply_chat_template([{"role": "user", "content": "Tom has 3 apples."}])
    grammar = RequestGrammar(structural_tag=forced, remote=forced)
    request = GenerationRequest(prompt=prompt, max_tokens=16, greedy=True, grammar=grammar)
    [[cont]] = vllm_backend.generate([request])
    assert cont.text == "<tool_call>" and cont.finish_reason == "eos"
    ids = reference_backend.encode_prompt(prompt)
    tokens = torch.tensor([ids + list(cont.token_ids)], device=reference_backend.model.device)
    with torch.inference_mode():
        logits = reference_backend.model(input_ids=tokens).logits[0, len(ids) - 1:-1].float()
    sampled = tokens[0, len(ids):].unsqueeze(1)
    raw = torch.log_softmax(logits, -1).gather(1, sampled).sum().item()
    # The same grammar's mask (the transformers backend's xgrammar matcher), then log-softmax:
    # what vLLM reports, token by token.
    import xgrammar as xgr

    matcher = reference_backend.masker.matcher(grammar)
    bitmask = xgr.allocate_token_bitmask(1, logits.shape[-1])
    renormalised = 0.0
    for position, token in enumerate(cont.token_ids):
        row = logits[position:position + 1].clone()
        matcher.fill_next_token_bitmask(bitmask, 0)
        xgr.apply_token_bitmask_inplace(row, bitmask)
        renormalised += torch.log_softmax(row, -1)[0, token].item()
        assert matcher.accept_token(token)
    assert cont.logprob_sum == pytest.approx(renormalised, abs=1e-3 * cont.num_tokens)
    assert cont.logprob_sum > raw + 1.0  # far above the raw log-prob of the same tokens


def test_the_answer_triggers_choice_of_labels_is_honoured(vllm_backend: VLLMBackend, http_engine: MFSEngine) -> None:
    """A multiple-choice answer trigger's grammar (:func:`~mfs_core.grammar.choice_grammar`):
    whatever the demo model would write, both vLLM paths write exactly one label, then stop."""
    from mfs_core.grammar import choice_grammar

    labels = (" A", " B", " C", " D")
    prompt = vllm_backend.apply_chat_template([{"role": "user", "content": "Tom has 3 apples."}]) + "The answer is:"
    request = GenerationRequest(prompt=prompt, max_tokens=16, greedy=True, grammar=choice_grammar(labels))
    for backend in (vllm_backend, http_engine.backend):
        [[cont]] = backend.generate([request])
        assert cont.text in labels and cont.finish_reason in ("eos", "stop"), (type(backend).__name__, cont)
