"""The transformers backend on a CUDA device, with the bundled demo model.

Marked ``gpu`` and skipped where torch sees no CUDA device (CI), so they run only on a GPU
machine: ``pytest -m gpu tests/gpu`` (``scripts/gpu_check.sh``). The CPU references are
computed here, by the CPU engine of ``tests/conftest.py``, never hard-coded. The whole file
takes a few seconds on a GPU (the demo model has 1.9M parameters).
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from mfs_core import MFSEngine, MFSSettings  # noqa: E402
from mfs_core.backends.transformers import TransformersBackend  # noqa: E402
from mfs_core.types import GenerationRequest, TriggeredChoice  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda.is_available() is False)"),
]

from tests.conftest import SMALL_SEARCH  # noqa: E402 - the CPU engine's search, so both decode alike
from tests.demo_questions import QUESTIONS  # noqa: E402 - the demo questions the CPU tests decode


@pytest.fixture(scope="module")
def cuda_engine():
    """The demo model on CUDA in float32, with the CPU engine's small search."""
    return MFSEngine.from_settings(MFSSettings(device="cuda", dtype="float32", **SMALL_SEARCH))


@pytest.fixture(scope="module")
def cuda_backend(cuda_engine):
    return cuda_engine.backend


def _forward_logprobs(backend, prompt: str, token_ids) -> torch.Tensor:
    """log_softmax of one separate forward pass of prompt + continuation, on the model's device."""
    prompt_ids = backend.encode_prompt(prompt)
    ids = torch.tensor([prompt_ids + list(token_ids)], device=backend.model.device)
    with torch.inference_mode():
        logits = backend.model(input_ids=ids).logits[0].float()
    return torch.log_softmax(logits, dim=-1), len(prompt_ids)


def _forward_logprob_sum(backend, prompt: str, token_ids) -> float:
    logprobs, start = _forward_logprobs(backend, prompt, token_ids)
    positions = range(start - 1, start + len(token_ids) - 1)
    return float(sum(logprobs[p, t] for p, t in zip(positions, token_ids)))


# --- (a) loading on CUDA -------------------------------------------------------------------
def test_the_demo_model_loads_on_cuda(cuda_backend, demo_backend):
    assert isinstance(cuda_backend, TransformersBackend)
    assert cuda_backend.model.device.type == "cuda"
    params = list(cuda_backend.model.parameters())
    assert params and all(p.device.type == "cuda" for p in params)
    assert all(b.device.type == "cuda" for b in cuda_backend.model.buffers())  # rotary inv_freq and the like
    assert {p.dtype for p in params} == {torch.float32}
    assert cuda_backend.num_parameters == demo_backend.num_parameters
    assert cuda_backend.context_window == demo_backend.context_window


def test_device_auto_resolves_to_cuda_and_shares_the_cuda_backend():
    auto = MFSEngine.from_settings(MFSSettings(device="auto", dtype="auto", **SMALL_SEARCH))
    explicit = MFSEngine.from_settings(MFSSettings(device="cuda", dtype="auto", **SMALL_SEARCH))
    assert auto.backend.model.device.type == "cuda"
    assert auto.backend is explicit.backend  # "auto" and the device it means share one model


# --- (b) greedy CoT on CUDA = on CPU ---------------------------------------------------------
def test_greedy_cot_on_cuda_writes_what_the_cpu_writes(cuda_engine, demo_engine):
    cpu = demo_engine.decode(QUESTIONS, method="cot")
    gpu = cuda_engine.decode(QUESTIONS, method="cot")
    for c, g in zip(cpu, gpu):
        assert g.method == c.method == "cot"
        assert (g.text, g.answer, g.stop_reason) == (c.text, c.answer, c.stop_reason)
        assert (g.prompt_tokens, g.output_tokens) == (c.prompt_tokens, c.output_tokens)
        assert g.flops == pytest.approx(c.flops)
        assert g.output_tokens > 0 and g.answer is not None


# --- backend-level checks on CUDA (tests/integration/test_transformers_backend.py's, on the GPU) --
def test_cuda_logprob_sums_match_a_separate_forward_pass_and_the_cpu(cuda_backend, demo_backend, cuda_engine):
    prompt = cuda_engine.render(QUESTIONS[0])
    request = GenerationRequest(prompt=prompt, n=4, max_tokens=40, stop=("<end_of_reasoning>",), temperature=0.7, seed=3)
    conts = cuda_backend.generate([request])[0]
    assert len(conts) == 4
    for cont in conts:
        assert cont.num_tokens == len(cont.token_ids) > 0
        assert cont.prompt_tokens == len(cuda_backend.encode_prompt(prompt))
        assert math.isfinite(cont.logprob_sum)
        assert cont.logprob_sum == pytest.approx(_forward_logprob_sum(cuda_backend, prompt, cont.token_ids), abs=1e-3)
        assert cont.logprob_sum == pytest.approx(_forward_logprob_sum(demo_backend, prompt, cont.token_ids), abs=1e-3)


def test_cuda_samples_are_seeded_and_batch_independent(cuda_backend, cuda_engine):
    short = GenerationRequest(prompt=cuda_engine.render(QUESTIONS[0]), n=3, max_tokens=30, stop=("\n",), temperature=0.7, seed=11)
    long = GenerationRequest(prompt=cuda_engine.render(QUESTIONS[3]), n=2, max_tokens=30, temperature=0.7, seed=12)
    alone = cuda_backend.generate([short])[0]
    again = cuda_backend.generate([short])[0]
    batched = cuda_backend.generate([long, short])[1]
    assert [c.token_ids for c in alone] == [c.token_ids for c in again]
    assert [c.token_ids for c in alone] == [c.token_ids for c in batched]
    for a, b in zip(alone, batched):
        assert a.text == b.text
        assert a.logprob_sum == pytest.approx(b.logprob_sum, abs=1e-3)


def test_cuda_shared_prefix_prefill_samples_what_the_plain_prefill_samples(cuda_backend, cuda_engine):
    shared = TransformersBackend(cuda_backend.model, cuda_backend.tokenizer, "mfs-demo")
    from mfs_core.backends.hf_prefill import PrefillPlanner

    plain = TransformersBackend(cuda_backend.model, cuda_backend.tokenizer, "mfs-demo",
                                prefill=PrefillPlanner(cuda_backend.model, cuda_backend.tokenizer.pad_token_id, share=False))
    q, other = cuda_engine.render(QUESTIONS[0]), cuda_engine.render(QUESTIONS[2])
    requests = [
        GenerationRequest(prompt=q, n=4, max_tokens=40, stop=("\n", "<end_of_reasoning>"), temperature=0.8, seed=1),
        GenerationRequest(prompt=q + "Tom has 3", n=3, max_tokens=40, stop=("\n",), temperature=0.8, seed=2),
        GenerationRequest(prompt=q + "Tom has 3 apples.", n=2, max_tokens=40, stop=("<end_of_reasoning>",), seed=3),
        GenerationRequest(prompt=other, n=3, max_tokens=40, stop=("\n",), top_p=0.9, seed=5),
        GenerationRequest(prompt=other + "Zoe", n=1, max_tokens=40, greedy=True),
    ]
    new, old = shared.generate(requests), plain.generate(requests)
    for conts_new, conts_old in zip(new, old):
        assert [c.token_ids for c in conts_new] == [c.token_ids for c in conts_old]
        for a, b in zip(conts_new, conts_old):
            assert (a.text, a.finish_reason, a.stop_reason) == (b.text, b.finish_reason, b.stop_reason)
            assert a.logprob_sum == pytest.approx(b.logprob_sum, abs=1e-3)
    assert shared.prefill_stats.prefilled_tokens < plain.prefill_stats.prefilled_tokens


def test_cuda_top_logprobs_and_triggered_choices(cuda_backend, cuda_engine):
    prompt = cuda_engine.render(QUESTIONS[0])
    asked = GenerationRequest(prompt=prompt, n=2, max_tokens=12, temperature=0.7, seed=4, top_logprobs=5)
    conts = cuda_backend.generate([asked])[0]
    for cont in conts:
        logprobs, start = _forward_logprobs(cuda_backend, prompt, cont.token_ids)
        top = torch.topk(logprobs, 5, dim=-1).values
        expected = [-float(top[p].mean()) for p in range(start - 1, start + len(cont.token_ids) - 1)]
        assert cont.token_confidences == pytest.approx(expected, abs=1e-3)
    choice = TriggeredChoice("The reasoning steps are:\n\n", ("4 + 3 = 7", "3 + 4 = 7"))
    sampled, [best] = cuda_backend.generate([
        GenerationRequest(prompt, n=6, max_tokens=12, temperature=1.0, seed=2, triggered_choice=choice),
        GenerationRequest(prompt, n=1, max_tokens=12, greedy=True, triggered_choice=choice),
    ])
    assert all(c.text.startswith(("4 + 3 = 7", "3 + 4 = 7")) for c in [*sampled, best])


# --- (c) a seeded MFS decode on CUDA ---------------------------------------------------------
def test_seeded_mfs_decode_on_cuda_answers_with_consistent_counts(cuda_engine):
    seeded = cuda_engine.with_settings(seed=7)
    assert seeded.backend is cuda_engine.backend
    first = seeded.decode(QUESTIONS[:2])
    second = seeded.decode(QUESTIONS[:2])
    params = cuda_engine.backend.num_parameters
    for a, b in zip(first, second):
        assert a.method == "mfs"
        assert a.answer is not None and a.text
        assert a.prompt_tokens > 0 and a.output_tokens > 0
        assert a.completion_tokens <= a.output_tokens
        assert a.num_parameters in (None, params)
        assert a.flops == pytest.approx(6.0 * a.output_tokens * params)
        assert a.steps and len(a.steps[0].candidates) > 0
        assert 0 < a.vote_share <= 1
        # same seed on the same device: the same search
        assert (a.text, a.answer, a.output_tokens, a.prompt_tokens) == (b.text, b.answer, b.output_tokens, b.prompt_tokens)
        assert [c.text for c in a.steps[0].candidates] == [c.text for c in b.steps[0].candidates]


# --- (d) dtypes on CUDA ----------------------------------------------------------------------
def test_dtype_auto_on_cuda_keeps_the_checkpoint_dtype():
    # TransformersBackend.from_settings: dtype 'auto' is forced to float32 on CPU only; on CUDA
    # transformers gets dtype="auto", the checkpoint's dtype (config.json: "dtype": "float32").
    engine = MFSEngine.from_settings(MFSSettings(device="cuda", dtype="auto", **SMALL_SEARCH))
    model = engine.backend.model
    checkpoint = getattr(model.config, "dtype", None) or model.config.torch_dtype
    checkpoint = getattr(torch, checkpoint) if isinstance(checkpoint, str) else checkpoint
    assert checkpoint == torch.float32
    assert {p.dtype for p in model.parameters()} == {checkpoint}
    assert model.device.type == "cuda"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_on_cuda_decodes(dtype, cuda_engine):
    engine = MFSEngine.from_settings(MFSSettings(device="cuda", dtype=dtype, **SMALL_SEARCH))
    backend = engine.backend
    assert backend is not cuda_engine.backend
    assert {p.dtype for p in backend.model.parameters()} == {getattr(torch, dtype)}
    assert backend.model.device.type == "cuda"
    half = engine.decode(QUESTIONS, method="cot")
    full = cuda_engine.decode(QUESTIONS, method="cot")
    for h in half:
        assert h.output_tokens > 0 and h.text and h.answer is not None
        assert math.isfinite(h.flops)
    # a 2M-parameter model in half precision mostly writes what float32 writes
    assert sum(h.answer == f.answer for h, f in zip(half, full)) >= len(QUESTIONS) // 2
    # its reported log-probs are float32 log_softmax of its own logits: finite, <= 0, close to a forward pass
    prompt = engine.render(QUESTIONS[0])
    conts = backend.generate([GenerationRequest(prompt=prompt, n=2, max_tokens=30, temperature=0.7, seed=1, top_logprobs=3)])[0]
    for cont in conts:
        assert math.isfinite(cont.logprob_sum) and cont.logprob_sum <= 0
        assert all(math.isfinite(c) and c >= 0 for c in cont.token_confidences)
        assert cont.logprob_sum == pytest.approx(_forward_logprob_sum(backend, prompt, cont.token_ids), abs=0.1 * cont.num_tokens)
    result = engine.with_settings(seed=3).decode([QUESTIONS[0]])[0]
    assert result.answer is not None and result.output_tokens > 0
