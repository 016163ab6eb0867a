"""Stand-ins of vLLM 0.33.0's objects, to test the vLLM adapter without vllm, a GPU or a model.

The stand-ins copy, from vLLM 0.33.0 (commit 4ba787ec9):

* ``SamplingParams`` (``vllm/sampling_params.py``): every public input field, in order, with
  its default; unknown keyword arguments raise ``TypeError`` as the msgspec struct does.
* ``CompletionOutput`` (``vllm/outputs.py``): the dataclass fields, in order.
* ``RequestOutput`` (``vllm/outputs.py``): the ``__init__`` signature.
* ``LLM.generate`` (``vllm/entrypoints/llm.py``): ``(prompts, sampling_params=None, *,
  use_tqdm=True, lora_request=None, priority=None, tokenization_kwargs=None,
  mm_processor_kwargs=None) -> list[RequestOutput]``, and ``LLM.get_tokenizer()``.

:func:`make_backend` builds a :class:`mfs_core.backends.vllm.VLLMBackend` over a :class:`FakeLLM`
(a character tokenizer, ``EOS`` its end-of-sequence id), which answers with a ``Responder``
(:func:`eos_outputs` unless given another).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from mfs_core.backends.vllm import VLLMBackend

__all__ = [
    "EOS", "CharTokenizer", "FakeLLM", "Responder", "StandInCompletionOutput", "StandInRequestOutput",
    "StandInSamplingParams", "eos_outputs", "make_backend",
]

EOS = 2


@dataclass(kw_only=True)
class StandInSamplingParams:
    """vLLM 0.33.0 ``SamplingParams`` public input fields and defaults (``max_tokens`` is 16)."""

    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    watermarking: bool | None = None
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    max_tokens: int | None = 16
    min_tokens: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    prompt_logprob_token_ids: list[int] | None = None
    prompt_logprob_start: int | None = None
    logprob_token_ids: list[int] | None = None
    flat_logprobs: bool = False
    detokenize: bool = True
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    output_kind: Any = None
    stream_interval: int | None = None
    skip_clone: bool = False
    structured_outputs: Any = None
    logit_bias: dict[int, float] | None = None
    allowed_token_ids: list[int] | None = None
    extra_args: dict[str, Any] | None = None
    bad_words: list[str] | None = None
    skip_reading_prefix_cache: bool | None = None
    thinking_token_budget: int | None = None
    repetition_detection: Any = None
    routed_experts_prompt_start: int = 0
    trace_decode_token_ids: list[int] | None = None


@dataclass
class StandInCompletionOutput:
    """vLLM 0.33.0 ``CompletionOutput`` fields, in order."""

    index: int
    text: str
    token_ids: Sequence[int]
    cumulative_logprob: float | None
    logprobs: Any | None
    routed_experts: Any | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    lora_request: Any | None = None
    sampling_mask: Any | None = None
    spec_decode_metrics: Any | None = None
    weight_versions: list[Any] | None = None


class StandInRequestOutput:
    """vLLM 0.33.0 ``RequestOutput.__init__`` signature."""

    def __init__(self, request_id: str, prompt: str | None, prompt_token_ids: list[int] | None,
                 prompt_logprobs: Any | None, outputs: list[StandInCompletionOutput], finished: bool,
                 metrics: Any | None = None, lora_request: Any | None = None, encoder_prompt: str | None = None,
                 encoder_prompt_token_ids: list[int] | None = None, num_cached_tokens: int | None = None,
                 num_cache_creation_tokens: int | None = None, *, prompt_token_id_logprobs: Any | None = None,
                 kv_transfer_params: dict[str, Any] | None = None, ec_transfer_params: dict[str, Any] | None = None,
                 **kwargs: Any) -> None:
        self.request_id = request_id
        self.prompt = prompt
        self.prompt_token_ids = prompt_token_ids
        self.prompt_logprobs = prompt_logprobs
        self.outputs = outputs
        self.finished = finished
        self.num_cached_tokens = num_cached_tokens


class CharTokenizer:
    """A tokenizer stand-in: ``<s>`` is the BOS (id 1), every other character one token.

    ``encode(text, add_special_tokens=True)`` prepends the BOS even when the text starts with
    one, as Hugging Face tokenizers do (the doubled BOS the adapter must avoid).
    """

    bos_token = "<s>"
    bos_token_id = 1
    eos_token_id = EOS
    chat_template = "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}\n{% endfor %}<|assistant|>\n"

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = [self.bos_token_id] if add_special_tokens else []
        if text.startswith(self.bos_token):
            ids.append(self.bos_token_id)
            text = text[len(self.bos_token):]
        return ids + [100 + ord(c) for c in text]

    def apply_chat_template(self, messages: list[dict[str, str]], tokenize: bool = True,
                            add_generation_prompt: bool = False) -> str:
        body = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages)
        return self.bos_token + body + ("<|assistant|>\n" if add_generation_prompt else "")


Responder = Callable[[int, list[int], StandInSamplingParams], list[StandInCompletionOutput]]


def eos_outputs(request_index: int, prompt_ids: list[int], params: StandInSamplingParams) -> list[StandInCompletionOutput]:
    """n outputs, listed in reverse index order, each three tokens ending in EOS."""
    return [
        StandInCompletionOutput(index=k, text=f"r{request_index}s{k}", token_ids=[10 + k, 11 + k, EOS],
                                cumulative_logprob=-0.5 * (k + 1) - request_index, logprobs=None,
                                finish_reason="stop", stop_reason=None)
        for k in reversed(range(params.n))
    ]


@dataclass
class FakeLLM:
    """``vllm.LLM`` stand-in: records every ``generate`` call and answers with ``responder``."""

    responder: Responder = eos_outputs
    max_model_len: int = 4096
    tokenizer: CharTokenizer = field(default_factory=CharTokenizer)
    calls: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.model_config = SimpleNamespace(max_model_len=self.max_model_len, hf_config=None)

    def get_tokenizer(self) -> CharTokenizer:
        return self.tokenizer

    def generate(self, prompts: Any, sampling_params: Any = None, *, use_tqdm: Any = True, lora_request: Any = None,
                 priority: Any = None, tokenization_kwargs: Any = None, mm_processor_kwargs: Any = None) -> list[StandInRequestOutput]:
        self.calls.append({"prompts": prompts, "params": sampling_params, "use_tqdm": use_tqdm})
        return [
            StandInRequestOutput(request_id=str(i), prompt=None, prompt_token_ids=prompt["prompt_token_ids"],
                                 prompt_logprobs=None, outputs=self.responder(i, prompt["prompt_token_ids"], params),
                                 finished=True)
            for i, (prompt, params) in enumerate(zip(prompts, sampling_params))
        ]


def make_backend(llm: FakeLLM | None = None, **kwargs: Any) -> tuple[VLLMBackend, FakeLLM]:
    llm = llm or FakeLLM()
    return VLLMBackend(llm, "stand-in", sampling_params_cls=StandInSamplingParams, **kwargs), llm
