"""The vLLM backend on a real vLLM engine over the demo model (CPU build in CI, or CUDA).

Written against vLLM 0.33.0 (commit 4ba787ec9), run in CI on vLLM's CPU build 0.32.0. What
the adapter promises: the accounting of tokens and log-probs is the transformers backend's,
stop strings and EOS are mapped the same way, greedy decodes equal the transformers
backend's at float32, a seed fixes the samples whatever else is in the batch, MFS runs with
one ``LLM.generate`` call per round, a seeded round larger than vLLM's batch token budget
runs with the default settings (on CPU it used to kill the engine: ``CPU Generator does not
use offset``), and closing the engine leaves no child process.
"""

from __future__ import annotations

import json

import psutil
import pytest
import torch
from tests.vllm.conftest import VLLM_SETTINGS

from mfs_core.backends.transformers import TransformersBackend
from mfs_core.backends.vllm import VLLMBackend
from mfs_core.backends.vllm_async import AsyncVLLMBackend
from mfs_core.bench.datasets import demo_heldout_path
from mfs_core.engine import MFSEngine
from mfs_core.settings import DEMO_ASSISTANT_PREFIX, MFSSettings
from mfs_core.types import GenerationRequest

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.enable_socket]

QUESTION = "Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?"
HELDOUT = [example["input"] for example in json.loads(demo_heldout_path().read_text())]


def test_generate_counts_tokens_like_the_transformers_backend(
    vllm_backend: VLLMBackend, reference_backend: TransformersBackend
) -> None:
    prompt = vllm_backend.apply_chat_template([{"role": "user", "content": QUESTION}]) + DEMO_ASSISTANT_PREFIX
    assert prompt == reference_backend.apply_chat_template([{"role": "user", "content": QUESTION}]) + DEMO_ASSISTANT_PREFIX
    requests = [GenerationRequest(prompt=prompt, n=8, max_tokens=32, stop=("\n", "<end_of_reasoning>"), temperature=1.0, seed=s)
                for s in range(4)]
    outputs = vllm_backend.generate(requests)
    assert [len(o) for o in outputs] == [8] * 4
    tokenizer = reference_backend.tokenizer
    prompt_ids = reference_backend.encode_prompt(prompt)
    reasons = set()
    for conts in outputs:
        for cont in conts:
            reasons.add(cont.finish_reason)
            assert cont.prompt_tokens == len(prompt_ids)
            decoded = tokenizer.decode(cont.token_ids, skip_special_tokens=True)
            if cont.finish_reason == "stop":
                # The token completing the stop string is kept; the text is cut before the stop string.
                assert cont.stop_reason in ("\n", "<end_of_reasoning>")
                assert decoded.startswith(cont.text) and cont.stop_reason in decoded[len(cont.text):]
            elif cont.finish_reason == "eos":
                assert cont.token_ids[-1] in reference_backend._eos_ids and decoded == cont.text
            else:
                assert cont.num_tokens == 32
            # logprob_sum is the raw log-prob of exactly token_ids: recompute it by teacher forcing.
            ids = torch.tensor([prompt_ids + list(cont.token_ids)], device=reference_backend.model.device)
            with torch.inference_mode():
                logits = reference_backend.model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
            expected = torch.log_softmax(logits, -1).gather(1, ids[0, len(prompt_ids):].unsqueeze(1)).sum().item()
            assert cont.logprob_sum == pytest.approx(expected, abs=1e-3 * max(1, cont.num_tokens))
    assert "stop" in reasons  # the demo model's first step ends at a newline


def test_cot_equals_the_transformers_backend_at_float32(
    vllm_backend: VLLMBackend, reference_backend: TransformersBackend
) -> None:
    settings = MFSSettings(max_answer_tokens=384)
    questions = HELDOUT[:6]
    here = MFSEngine(vllm_backend, settings).decode(questions, method="cot")
    there = MFSEngine(reference_backend, settings).decode(questions, method="cot")
    for a, b in zip(here, there):
        assert (a.text, a.answer, a.prompt_tokens, a.output_tokens, a.stop_reason) == (
            b.text, b.answer, b.prompt_tokens, b.output_tokens, b.stop_reason)
        assert a.completion_qualities == pytest.approx(b.completion_qualities, abs=1e-4)


def test_same_seed_same_samples_whatever_the_batch(vllm_backend: VLLMBackend) -> None:
    prompt = vllm_backend.apply_chat_template([{"role": "user", "content": QUESTION}]) + DEMO_ASSISTANT_PREFIX
    request = GenerationRequest(prompt=prompt, n=4, max_tokens=24, temperature=0.7, seed=7)
    first = vllm_backend.generate([request])[0]
    second = vllm_backend.generate([GenerationRequest(prompt=HELDOUT[0], n=3, max_tokens=24, seed=1), request])[1]
    assert [c.token_ids for c in first] == [c.token_ids for c in second]
    assert [c.logprob_sum for c in first] == pytest.approx([c.logprob_sum for c in second], abs=1e-5)
    other_seed = vllm_backend.generate([GenerationRequest(prompt=prompt, n=4, max_tokens=24, temperature=0.7, seed=8)])[0]
    assert [c.token_ids for c in other_seed] != [c.token_ids for c in first]


def test_mfs_makes_one_generate_call_per_round(vllm_backend: VLLMBackend) -> None:
    calls = []
    generate = vllm_backend.llm.generate

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(len(args[0]))
        return generate(*args, **kwargs)

    vllm_backend.llm.generate = counted
    try:
        engine = MFSEngine(vllm_backend, MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=3))
        results = engine.decode([QUESTION, HELDOUT[1]])
    finally:
        del vllm_backend.llm.generate
    assert all(r.output_tokens > 0 for r in results)
    assert all(r.flops == 6.0 * r.output_tokens * vllm_backend.num_parameters for r in results)
    assert vllm_backend.num_parameters == sum(p.numel() for p in TransformersBackend.from_settings(MFSSettings()).model.parameters())
    # One LLM.generate per engine round: the rounds of both decodes share a call.
    assert len(calls) == engine.stats.generate_calls
    rounds = max(len(r.steps) for r in results)
    assert rounds <= len(calls) <= 2 * rounds + 2


def test_seeded_round_over_the_batch_token_budget_with_default_settings() -> None:
    """5 questions at M = N = 4: the first round alone asks for 5 x 16 seeded samples, more prompt
    tokens than ``max_num_batched_tokens``. With vLLM's defaults on CPU (chunked prefill on) it
    raised ``CPU Generator does not use offset`` and killed the engine. The default scheduling
    ('auto') gives vLLM's ``AsyncLLM``, which takes all five questions' first rounds at once. Closing
    the engine (``with``) stops every process vLLM started."""
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    settings = MFSSettings(backend="vllm", step_beam_size=4, num_rollouts=4, seed=0)
    with MFSEngine.from_settings(settings) as engine:
        backend = engine.backend
        assert isinstance(backend, AsyncVLLMBackend)
        started = {child.pid for child in psutil.Process().children(recursive=True)} - before
        assert started, "vLLM runs its engine core in a child process"
        budget = backend.llm.vllm_config.scheduler_config.max_num_batched_tokens
        questions = HELDOUT[:5]
        first_round = sum(16 * backend.count_tokens(engine.render(q)) for q in questions)
        assert first_round > budget
        results = engine.decode(questions)
    assert all(r.answer is not None and r.output_tokens > 0 for r in results)
    with pytest.raises(RuntimeError, match="closed"):
        backend.generate([GenerationRequest(prompt="x", n=1, max_tokens=1)])
    left = [pid for pid in started if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert left == []


def test_mfs_ask_with_the_vllm_backend_prints_an_answer() -> None:
    """README's first command with ``--backend vllm``, in a process of its own that must exit by itself."""
    import subprocess
    import sys

    question = "Grace has 7 bags with 9 cards in each bag. Sadly, 6 cards break. How many cards are there now?"
    done = subprocess.run([sys.executable, "-m", "mfs_core.cli", "ask", question, "--backend", "vllm", "--no-live",
                           "--max-steps", "2"], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == f"question: {question}"
    assert lines[1].startswith("answer: ") and "of 4 completed paths" in lines[1]
    assert "stop reason: " in done.stdout
