"""The vLLM backend on a real engine over the demo model (needs vllm and a CUDA GPU).

Skipped cleanly where vllm is not installed or CUDA is missing. Written against vLLM 0.33.0
(commit 4ba787ec9). Samples cannot be compared token for token with the transformers
backend (different samplers), so these tests check what the adapter promises: the
accounting of tokens and log-probs is the transformers backend's, stop strings and EOS
are mapped the same way, and MFS runs end to end with one ``LLM.generate`` call per round.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.gpu]

vllm = pytest.importorskip("vllm")
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from mfs_core.backends.transformers import TransformersBackend  # noqa: E402
from mfs_core.backends.vllm import VLLMBackend  # noqa: E402
from mfs_core.engine import MFSEngine  # noqa: E402
from mfs_core.settings import MFSSettings  # noqa: E402
from mfs_core.types import GenerationRequest  # noqa: E402

QUESTION = "Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?"
SETTINGS = MFSSettings(backend="vllm", gpu_memory_utilization=0.3, max_model_len=512, dtype="float32",
                       vllm_kwargs={"enforce_eager": True}, step_beam_size=2, num_rollouts=2, max_steps=2,
                       max_step_tokens=16, max_answer_tokens=64)


@pytest.fixture(scope="module")
def vllm_backend() -> VLLMBackend:
    return VLLMBackend.from_settings(SETTINGS)


@pytest.fixture(scope="module")
def reference() -> TransformersBackend:
    return TransformersBackend.from_settings(MFSSettings(device="cuda", dtype="float32"))


def test_generate_counts_tokens_like_the_transformers_backend(vllm_backend: VLLMBackend, reference: TransformersBackend) -> None:
    prompt = vllm_backend.apply_chat_template([{"role": "user", "content": QUESTION}]) + SETTINGS.assistant_prefix
    assert prompt == reference.apply_chat_template([{"role": "user", "content": QUESTION}]) + SETTINGS.assistant_prefix
    requests = [GenerationRequest(prompt=prompt, n=8, max_tokens=32, stop=("\n", "<end_of_reasoning>"), temperature=1.0, seed=s)
                for s in range(4)]
    outputs = vllm_backend.generate(requests)
    assert [len(o) for o in outputs] == [8] * 4
    tokenizer = reference.tokenizer
    prompt_ids = reference.encode_prompt(prompt)
    for conts in outputs:
        for cont in conts:
            assert cont.prompt_tokens == len(prompt_ids)
            decoded = tokenizer.decode(cont.token_ids, skip_special_tokens=True)
            if cont.finish_reason == "stop":
                # The token completing the stop string is kept; the text is cut before the stop string.
                assert cont.stop_reason in ("\n", "<end_of_reasoning>")
                assert decoded.startswith(cont.text) and cont.stop_reason in decoded[len(cont.text):]
            elif cont.finish_reason == "eos":
                assert cont.token_ids[-1] in reference._eos_ids and decoded == cont.text
            else:
                assert cont.num_tokens == 32
            # logprob_sum is the raw log-prob of exactly token_ids: recompute it by teacher forcing.
            ids = torch.tensor([prompt_ids + list(cont.token_ids)], device=reference.model.device)
            with torch.inference_mode():
                logits = reference.model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
            expected = torch.log_softmax(logits, -1).gather(1, ids[0, len(prompt_ids):].unsqueeze(1)).sum().item()
            assert cont.logprob_sum == pytest.approx(expected, abs=1e-2 * max(1, cont.num_tokens))


def test_same_seed_same_samples(vllm_backend: VLLMBackend) -> None:
    request = GenerationRequest(prompt="<s><|user|>\nHi\n<|assistant|>\n", n=4, max_tokens=16, temperature=0.7, seed=7)
    first = vllm_backend.generate([request])[0]
    second = vllm_backend.generate([request, GenerationRequest(prompt="other", n=2, seed=1)])[0]
    assert [c.token_ids for c in first] == [c.token_ids for c in second]


def test_mfs_runs_with_one_generate_call_per_round(vllm_backend: VLLMBackend) -> None:
    engine = MFSEngine(vllm_backend, SETTINGS)
    results = engine.decode([QUESTION, "Sam has 5 pens. He gives away 2 pens. How many pens does Sam have now?"])
    assert len(results) == 2
    assert all(r.output_tokens > 0 and r.flops == 6.0 * r.output_tokens * vllm_backend.num_parameters for r in results)
    assert vllm_backend.num_parameters == sum(p.numel() for p in TransformersBackend.from_settings(MFSSettings()).model.parameters())
    assert engine.stats.generate_calls <= 2 * SETTINGS.max_steps + 1
