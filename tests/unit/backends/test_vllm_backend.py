"""The vLLM adapter against stand-ins of vLLM 0.33.0's objects (no vllm, no GPU, no model).

The stand-ins, in ``tests/vllm_stand_ins.py``, copy vLLM 0.33.0's ``SamplingParams``,
``CompletionOutput``, ``RequestOutput`` and ``LLM.generate`` (commit 4ba787ec9).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from mfs_core.backends import Backend, create_backend
from mfs_core.errors import BackendOutputError, ContextWindowError
from mfs_core.backends import vllm as vllm_module
from mfs_core.backends.vllm import (
    CPU_BLOCK_SIZE, VLLM_SOURCE_VERSION, cpu_has_bfloat16, engine_kwargs,
)
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import GenerationRequest
from tests.vllm_stand_ins import (
    EOS, FakeLLM, StandInCompletionOutput, StandInSamplingParams, eos_outputs, make_backend,
)


def test_source_version_is_cited() -> None:
    assert VLLM_SOURCE_VERSION.startswith("0.33.0")


def test_backend_satisfies_the_protocol() -> None:
    backend, _ = make_backend(num_parameters=123)
    assert isinstance(backend, Backend)
    assert backend.context_window == 4096
    assert backend.num_parameters == 123


def test_one_generate_call_with_one_sampling_params_per_request() -> None:
    backend, llm = make_backend()
    requests = [
        GenerationRequest(prompt="<s>question\n", n=3, max_tokens=64, stop=("\n", "<end>"), temperature=0.7, top_p=0.9, seed=11),
        GenerationRequest(prompt="plain text", n=1, max_tokens=256, stop=("<end>",), temperature=1.3, top_p=1.0, seed=None),
    ]
    backend.generate(requests)
    assert len(llm.calls) == 1
    call = llm.calls[0]
    assert call["use_tqdm"] is False
    assert len(call["prompts"]) == len(call["params"]) == 2
    first, second = call["params"]
    assert (first.n, first.temperature, first.top_p, first.max_tokens, first.stop, first.seed, first.logprobs) == (
        3, 0.7, 0.9, 64, ["\n", "<end>"], 11, 0)
    assert (second.n, second.temperature, second.top_p, second.max_tokens, second.stop, second.seed, second.logprobs) == (
        1, 1.3, 1.0, 256, ["<end>"], None, 0)
    # Nothing else is changed from vLLM's defaults: no top-k, no penalties, stop strings cut from the text.
    defaults = StandInSamplingParams()
    for name in ("top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty",
                 "include_stop_str_in_output", "skip_special_tokens", "ignore_eos", "min_tokens"):
        assert getattr(first, name) == getattr(defaults, name), name


def test_greedy_requests_are_temperature_zero_and_sent_once() -> None:
    backend, llm = make_backend()
    results = backend.generate([GenerationRequest(prompt="q", n=3, temperature=0.7, greedy=True)])
    params = llm.calls[0]["params"][0]
    assert (params.temperature, params.n, params.logprobs) == (0.0, 1, 0)  # vLLM refuses n > 1 when greedy
    assert [c.token_ids for c in results[0]] == [(10, 11, EOS)] * 3


def test_prompts_are_token_ids_without_a_second_bos() -> None:
    backend, llm = make_backend()
    backend.generate([GenerationRequest(prompt="<s>ab"), GenerationRequest(prompt="ab")])
    prompts = llm.calls[0]["prompts"]
    assert prompts[0] == {"prompt_token_ids": [1, 100 + ord("a"), 100 + ord("b")]}  # template's BOS kept, none added
    assert prompts[1] == {"prompt_token_ids": [1, 100 + ord("a"), 100 + ord("b")]}  # BOS added to a raw prompt


def test_max_tokens_is_always_sent_and_clamped_to_the_window() -> None:
    backend, llm = make_backend(FakeLLM(max_model_len=20))
    prompt = "x" * 7  # BOS + 7 tokens = 8 tokens
    backend.generate([GenerationRequest(prompt=prompt, max_tokens=5), GenerationRequest(prompt=prompt, max_tokens=500)])
    assert [p.max_tokens for p in llm.calls[0]["params"]] == [5, 20 - 8]


def test_results_are_mapped_back_in_order() -> None:
    backend, _ = make_backend()
    requests = [GenerationRequest(prompt="a", n=2), GenerationRequest(prompt="bcd", n=3)]
    results = backend.generate(requests)
    assert [len(r) for r in results] == [2, 3]
    assert [[c.text for c in r] for r in results] == [["r0s0", "r0s1"], ["r1s0", "r1s1", "r1s2"]]
    assert results[1][2].token_ids == (12, 13, EOS)
    assert results[1][2].logprob_sum == pytest.approx(-0.5 * 3 - 1)
    assert [c.prompt_tokens for r in results for c in r] == [2, 2, 4, 4, 4]
    assert all(c.finish_reason == "eos" and c.stop_reason is None for r in results for c in r)


def stop_outputs(request_index: int, prompt_ids: list[int], params: StandInSamplingParams) -> list[StandInCompletionOutput]:
    """The four ways vLLM 0.33 finishes a sequence, one per output index."""
    return [
        # A stop string: text cut before it, the token that completed it still in token_ids.
        StandInCompletionOutput(0, "3 + 4 = 7", [51, 52, 53, 54, 55, 56], -1.25, None, finish_reason="stop", stop_reason="\n"),
        # The EOS token: stop_reason None, EOS in token_ids, not in the text.
        StandInCompletionOutput(1, "done", [60, 61, EOS], -2.5, None, finish_reason="stop", stop_reason=None),
        # A stop_token_ids entry (e.g. Llama-3's <|eom_id|> from generation_config): an int stop_reason.
        StandInCompletionOutput(2, "turn", [70, 128008], -0.75, None, finish_reason="stop", stop_reason=128008),
        # max_tokens reached.
        StandInCompletionOutput(3, "abcd", [80, 81, 82, 83], -4.0, None, finish_reason="length", stop_reason=None),
    ]


def test_finish_reasons_and_token_counts() -> None:
    backend, _ = make_backend(FakeLLM(responder=stop_outputs))
    stop, eos, stop_id, length = backend.generate([GenerationRequest(prompt="q", n=4, stop=("\n",))])[0]
    assert (stop.text, stop.finish_reason, stop.stop_reason, stop.num_tokens, stop.logprob_sum) == (
        "3 + 4 = 7", "stop", "\n", 6, -1.25)
    assert (eos.finish_reason, eos.stop_reason, eos.num_tokens, eos.token_ids[-1]) == ("eos", None, 3, EOS)
    assert (stop_id.finish_reason, stop_id.stop_reason, stop_id.num_tokens) == ("eos", None, 2)
    assert (length.finish_reason, length.stop_reason, length.num_tokens, length.mean_logprob) == ("length", None, 4, -1.0)


def test_missing_cumulative_logprob_is_a_clear_error() -> None:
    def no_logprobs(i: int, ids: list[int], params: StandInSamplingParams) -> list[StandInCompletionOutput]:
        return [StandInCompletionOutput(0, "x", [5], None, None, finish_reason="stop", stop_reason=None)]

    backend, _ = make_backend(FakeLLM(responder=no_logprobs))
    with pytest.raises(BackendOutputError, match=r"no cumulative_logprob for request 0.*logprobs"):
        backend.generate([GenerationRequest(prompt="q")])


@pytest.mark.parametrize("reason", ["abort", "error", "repetition", None])
def test_unusable_finish_reasons_raise(reason: str | None) -> None:
    def finished(i: int, ids: list[int], params: StandInSamplingParams) -> list[StandInCompletionOutput]:
        return [StandInCompletionOutput(0, "x", [5], -1.0, None, finish_reason=reason, stop_reason=None)]

    backend, _ = make_backend(FakeLLM(responder=finished))
    with pytest.raises(BackendOutputError, match=f"finish_reason={reason!r}"):
        backend.generate([GenerationRequest(prompt="q")])


def test_wrong_number_of_outputs_raises() -> None:
    def one_short(i: int, ids: list[int], params: StandInSamplingParams) -> list[StandInCompletionOutput]:
        return eos_outputs(i, ids, params)[1:]

    backend, _ = make_backend(FakeLLM(responder=one_short))
    with pytest.raises(BackendOutputError, match="returned 2 outputs for request 0 with n=3"):
        backend.generate([GenerationRequest(prompt="q", n=3)])


def test_prompt_over_the_window_raises_before_calling_vllm() -> None:
    backend, llm = make_backend(FakeLLM(max_model_len=10))
    with pytest.raises(ContextWindowError, match="prompt 1 has 11 tokens.*context window of 10"):
        backend.generate([GenerationRequest(prompt="ok"), GenerationRequest(prompt="y" * 10)])
    assert llm.calls == []


def test_tokenizer_methods_use_the_engine_tokenizer() -> None:
    backend, _ = make_backend()
    assert backend.count_tokens("<s>abc") == 4
    assert backend.apply_chat_template([{"role": "user", "content": "hi"}]) == "<s><|user|>\nhi\n<|assistant|>\n"


@pytest.mark.slow  # imports transformers (seconds on 2 cores)
def test_num_parameters_counted_from_the_hf_config() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=True)
    llm = FakeLLM()
    llm.model_config.hf_config = config
    backend, _ = make_backend(llm)
    expected = sum(p.numel() for p in transformers.LlamaForCausalLM(config).parameters())
    assert backend.num_parameters == expected


def test_num_parameters_unknown_is_zero() -> None:
    backend, _ = make_backend()  # hf_config None: nothing to count
    assert backend.num_parameters == 0


def test_engine_kwargs_pass_settings_through() -> None:
    settings = MFSSettings(backend="vllm", model="meta-llama/Llama-3.1-8B-Instruct", dtype="bfloat16", seed=5,
                           tensor_parallel_size=2, gpu_memory_utilization=0.8, max_model_len=8192,
                           vllm_kwargs={"enforce_eager": True, "quantization": "fp8"})
    assert engine_kwargs(settings) == {
        "model": "meta-llama/Llama-3.1-8B-Instruct", "tensor_parallel_size": 2, "dtype": "bfloat16",
        "gpu_memory_utilization": 0.8, "enable_prefix_caching": True, "seed": 5, "max_model_len": 8192,
        "enforce_eager": True, "quantization": "fp8",
    }
    assert "max_model_len" not in engine_kwargs(MFSSettings(backend="vllm"))
    assert engine_kwargs(MFSSettings(backend="vllm", enable_prefix_caching=False))["enable_prefix_caching"] is False


def test_engine_kwargs_on_vllms_cpu_build() -> None:
    """dtype='auto' is bfloat16 where the CPU computes it natively and float32 elsewhere, a 4 GiB KV cache
    instead of 90% of RAM, 32-token KV blocks (prefix caching reuses whole blocks), and chunked prefill
    off (seeded requests crash vLLM 0.32's CPU runner with it)."""
    cpu = engine_kwargs(MFSSettings(backend="vllm"), cpu=True, cpu_bfloat16=False)
    assert (cpu["dtype"], cpu["kv_cache_memory_bytes"], cpu["enable_chunked_prefill"]) == ("float32", 4 * 2**30, False)
    assert cpu["block_size"] == CPU_BLOCK_SIZE == 32
    assert engine_kwargs(MFSSettings(backend="vllm"), cpu=True, cpu_bfloat16=True)["dtype"] == "bfloat16"
    assert engine_kwargs(MFSSettings(backend="vllm", dtype="float32"), cpu=True, cpu_bfloat16=True)["dtype"] == "float32"
    assert engine_kwargs(MFSSettings(backend="vllm", dtype="bfloat16", kv_cache_gib=0.5), cpu=True)["dtype"] == "bfloat16"
    assert engine_kwargs(MFSSettings(backend="vllm", kv_cache_gib=0.5), cpu=True)["kv_cache_memory_bytes"] == 2**29
    assert engine_kwargs(MFSSettings(backend="vllm", vllm_kwargs={"block_size": 128}), cpu=True)["block_size"] == 128
    gpu = engine_kwargs(MFSSettings(backend="vllm"))
    assert gpu["dtype"] == "auto" and "kv_cache_memory_bytes" not in gpu and "enable_chunked_prefill" not in gpu
    assert "block_size" not in gpu
    assert engine_kwargs(MFSSettings(backend="vllm", kv_cache_gib=2))["kv_cache_memory_bytes"] == 2 * 2**30
    with pytest.raises(ValueError, match="enable_chunked_prefill=True.*CPU Generator does not use offset"):
        engine_kwargs(MFSSettings(backend="vllm", vllm_kwargs={"enable_chunked_prefill": True}), cpu=True)
    assert engine_kwargs(MFSSettings(backend="vllm", vllm_kwargs={"enable_chunked_prefill": True}))["enable_chunked_prefill"]


@pytest.mark.parametrize(("flags", "expected"), [
    ("fpu vme avx512f avx512_bf16 avx512_vnni", True),
    ("fpu vme avx512f amx_bf16 amx_tile", True),
    ("fpu vme avx512f avx512_vnni", False),
    ("fpu vme avx512f avx512_bf16x", False),
])
def test_cpu_has_bfloat16_reads_the_flags_line(flags: str, expected: bool) -> None:
    cpuinfo = f"processor\t: 0\nmodel name\t: some cpu with avx512_bf16 in its name\nflags\t\t: {flags}\n"
    assert cpu_has_bfloat16(cpuinfo) is expected
    assert cpu_has_bfloat16("") is False


def test_kv_cache_gib_range_and_managed_key() -> None:
    with pytest.raises(ValueError, match="kv_cache_gib"):
        MFSSettings(kv_cache_gib=0)
    with pytest.raises(ValueError, match=r"vllm_kwargs must not set \['kv_cache_memory_bytes'\]"):
        MFSSettings(vllm_kwargs={"kv_cache_memory_bytes": 2**30})


def test_server_command_carries_the_engine_kwargs(monkeypatch: pytest.MonkeyPatch) -> None:
    from mfs_core.models import demo_model_path
    from mfs_core.vllm_server import server_command

    monkeypatch.setattr(vllm_module, "cpu_has_bfloat16", lambda: False)
    command = server_command(MFSSettings(backend="vllm", vllm_kwargs={"enforce_eager": True}), port=8011, cpu=True)
    assert command[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert command[3:] == [
        "--model", str(demo_model_path()), "--tensor-parallel-size", "1", "--dtype", "float32",
        "--gpu-memory-utilization", "0.9", "--enable-prefix-caching", "--seed", "0",
        "--kv-cache-memory-bytes", str(4 * 2**30), "--no-enable-chunked-prefill", "--block-size", "32", "--enforce-eager",
        "--served-model-name", "mfs-demo", "--generation-config", "vllm", "--host", "127.0.0.1", "--port", "8011",
    ]


def test_close_shuts_the_engine_core_down_once_and_refuses_generate() -> None:
    backend, llm = make_backend()
    shutdowns = []
    llm.llm_engine = SimpleNamespace(engine_core=SimpleNamespace(shutdown=lambda: shutdowns.append(1)))
    with backend:
        pass
    backend.close()
    assert shutdowns == [1]
    with pytest.raises(RuntimeError, match="closed"):
        backend.generate([GenerationRequest(prompt="x", n=1, max_tokens=1)])


def test_engine_close_closes_the_shared_backend_and_forgets_it() -> None:
    from mfs_core.engine import registry
    from mfs_core.engine.lockstep import LockstepScheduler

    backend, llm = make_backend()
    shutdowns = []
    llm.llm_engine = SimpleNamespace(engine_core=SimpleNamespace(shutdown=lambda: shutdowns.append(1)))
    scheduler = LockstepScheduler(backend)
    key = ("test-close",)
    registry.SCHEDULERS[key] = scheduler
    with MFSEngine(backend, MFSSettings(), _scheduler=scheduler) as engine:
        assert engine.backend is backend
    assert shutdowns == [1] and key not in registry.SCHEDULERS


def test_engine_kwargs_resolve_the_demo_model() -> None:
    from mfs_core.models import demo_model_path

    assert engine_kwargs(MFSSettings(backend="vllm"))["model"] == str(demo_model_path())


def test_engine_kwargs_refuse_processed_logprobs() -> None:
    with pytest.raises(ValueError, match="logprobs_mode='processed_logprobs'.*raw"):
        engine_kwargs(MFSSettings(backend="vllm", vllm_kwargs={"logprobs_mode": "processed_logprobs"}))


def test_vllm_kwargs_may_not_repeat_a_setting() -> None:
    with pytest.raises(ValueError, match=r"vllm_kwargs must not set \['seed', 'tensor_parallel_size'\]"):
        MFSSettings(vllm_kwargs={"tensor_parallel_size": 2, "seed": 1})


def test_engine_settings_change_the_backend_key() -> None:
    base = MFSSettings(backend="vllm")
    for change in ({"tensor_parallel_size": 2}, {"gpu_memory_utilization": 0.5}, {"max_model_len": 1024},
                   {"enable_prefix_caching": False}, {"vllm_kwargs": {"enforce_eager": True}}, {"kv_cache_gib": 2.0}):
        assert MFSSettings(backend="vllm", **change).backend_key() != base.backend_key(), change
    assert MFSSettings(backend="vllm", seed=9).backend_key() == base.backend_key()  # per-request seeds


def test_missing_vllm_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm now raises ImportError
    with pytest.raises(ImportError, match=r'on a CUDA GPU pip install "mfs-decoding\[vllm\]"; on a CPU.*CPU build'):
        create_backend(MFSSettings(backend="vllm"))


def scripted_reasoning(request_index: int, prompt_ids: list[int], params: StandInSamplingParams) -> list[StandInCompletionOutput]:
    """Steps end at "\\n"; rollouts (stopped only by the end marker) give the answer."""
    if "\n" in params.stop:
        return [StandInCompletionOutput(k, "3 + 4 = 7", [40 + k, 41, 42], -0.3 * (k + 1), None,
                                        finish_reason="stop", stop_reason="\n") for k in range(params.n)]
    return [StandInCompletionOutput(k, "The answer is: \\boxed{7}.", [50, 51, 52, 53], -0.2 * (k + 1), None,
                                    finish_reason="stop", stop_reason="<end_of_reasoning>") for k in range(params.n)]


def test_engine_makes_one_llm_generate_call_per_round() -> None:
    backend, llm = make_backend(FakeLLM(responder=scripted_reasoning), num_parameters=1000)
    settings = MFSSettings(backend="vllm", step_beam_size=2, num_rollouts=2, max_steps=2, prompt_format="raw")
    engine = MFSEngine(backend, settings)
    results = engine.decode(["Tom has 3 apples. He buys 4 more. How many now?", "Same again?"])
    assert [r.answer for r in results] == ["7", "7"]
    assert engine.stats.generate_calls == len(llm.calls) >= 2
    assert engine.stats.requests == sum(len(call["prompts"]) for call in llm.calls)
    # Both decodes share every round: each call holds requests of both prompts.
    assert all(len({tuple(p["prompt_token_ids"][:12]) for p in call["prompts"]}) == 2 for call in llm.calls)
    assert results[0].flops == 6.0 * results[0].output_tokens * 1000


@dataclass
class StandInStructuredOutputsParams:
    """vLLM 0.32.0 ``StructuredOutputsParams`` (``vllm/sampling_params.py``) input fields and defaults."""

    json: Any = None
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
    disable_any_whitespace: bool = False
    disable_additional_properties: bool = False
    whitespace_pattern: str | None = None
    structural_tag: str | None = None


TAG = '{"type":"structural_tag","format":{"type":"grammar","grammar":"root ::= \\"{}\\""}}'


def test_a_grammar_request_is_sent_with_its_structural_tag() -> None:
    from mfs_core.types import RequestGrammar

    backend, llm = make_backend(structured_outputs_cls=StandInStructuredOutputsParams)
    grammar = RequestGrammar(structural_tag="{}", prefix="<tool_call>", remote=TAG, in_action=True)
    backend.generate([GenerationRequest(prompt="a", n=2, seed=1, grammar=grammar), GenerationRequest(prompt="b")])
    constrained, free = llm.calls[0]["params"]
    assert constrained.structured_outputs == StandInStructuredOutputsParams(structural_tag=TAG)
    assert (constrained.n, constrained.seed, constrained.logprobs) == (2, 1, 0)
    assert free.structured_outputs is None  # a request without a grammar gets the params it always got


def test_a_grammar_without_a_remote_form_is_sampled_free_and_said_once(caplog: pytest.LogCaptureFixture) -> None:
    from mfs_core.types import RequestGrammar

    backend, llm = make_backend(structured_outputs_cls=StandInStructuredOutputsParams)
    open_value = RequestGrammar(structural_tag=TAG, prefix='{"value": 1', remote=None)  # inside a JSON value
    inside = GenerationRequest(prompt="a", grammar=open_value)
    with caplog.at_level("WARNING", logger="mfs_core.backends.vllm"):
        backend.generate([inside])
        backend.generate([inside])
    assert llm.calls[0]["params"][0].structured_outputs is None
    warned = [r for r in caplog.records if "without the action grammar" in r.getMessage()]
    assert len(warned) == 1 and "VLLMBackend" in warned[0].getMessage()


@dataclass
class StandInLogprob:
    """vLLM 0.33.0 ``Logprob`` (``vllm/logprobs.py``)."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


def top_logprob_outputs(request_index: int, prompt_ids: list[int], params: StandInSamplingParams) -> list[StandInCompletionOutput]:
    """One output whose per-token entries are shaped as vLLM builds them for ``logprobs=3``: the
    sampled token with its vocabulary rank, then ranks 1..3 (k entries when the sampled token is
    among them, k + 1 when not)."""
    entries = [
        {10: StandInLogprob(-0.5, 1), 11: StandInLogprob(-1.0, 2), 12: StandInLogprob(-1.5, 3)},
        {40: StandInLogprob(-4.0, 7), 41: StandInLogprob(-0.25, 1), 42: StandInLogprob(-1.0, 2),
         43: StandInLogprob(-2.75, 3)},
    ]
    return [StandInCompletionOutput(0, "ab", [10, 40], -4.5, entries if params.logprobs else None,
                                    finish_reason="length", stop_reason=None)]


def test_top_logprobs_are_asked_as_logprobs_k_and_become_token_confidences() -> None:
    backend, llm = make_backend(FakeLLM(responder=top_logprob_outputs))
    (cont,), = backend.generate([GenerationRequest(prompt="q", max_tokens=2, top_logprobs=3)])
    assert llm.calls[0]["params"][0].logprobs == 3
    # -(-0.5 - 1.0 - 1.5) / 3 = 1.0; the sampled token of rank 7 is left out: -(-0.25 - 1.0 - 2.75) / 3
    assert cont.token_confidences == pytest.approx((1.0, 4 / 3))
    assert cont.logprob_sum == pytest.approx(-4.5)


def test_missing_top_logprobs_are_an_output_error() -> None:
    def without(request_index: int, prompt_ids: list[int], params: StandInSamplingParams) -> list[StandInCompletionOutput]:
        return [StandInCompletionOutput(0, "ab", [10, 40], -4.5, None, finish_reason="length", stop_reason=None)]

    backend, _ = make_backend(FakeLLM(responder=without))
    with pytest.raises(BackendOutputError, match=r"vLLM returned none of top-3 log-probs for request 0"):
        backend.generate([GenerationRequest(prompt="q", max_tokens=2, top_logprobs=3)])
    plain, llm = make_backend(FakeLLM(responder=without))
    assert plain.generate([GenerationRequest(prompt="q", max_tokens=2)])[0][0].token_confidences == ()
    assert llm.calls[0]["params"][0].logprobs == 0
