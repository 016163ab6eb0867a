"""Every knob of the library, in one pydantic-settings model.

Values come from keyword arguments, then ``MFS_*`` environment variables, then a ``.env`` file, then the
defaults below, which are the paper's (MFS, EACL 2026, Appendix B) unless a field says otherwise.
Constructing settings does no I/O beyond reading the environment and the ``.env`` file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, SecretStr, ValidationError, create_model, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from mfs_core.backend_identity import BACKEND_FIELDS, BackendIdentity
from mfs_core.errors import one_line, unknown_name_message
from mfs_core.settings_env import ENV_PREFIX, UnknownSettingWarning, environment_sources, warn_unknown_env
from mfs_core.settings_rules import RULE_DESCRIPTIONS as _RULES, check_rules

__all__ = [
    "ABLATION_FIELDS", "BACKEND_FIELDS", "DEMO_ASSISTANT_PREFIX", "DEMO_MODEL", "ENV_PREFIX", "BackendSettings",
    "MFSSettings", "UnknownSettingWarning", "environment_sources", "setting_sources",
]

DEMO_MODEL = "mfs-demo"
DEMO_ASSISTANT_PREFIX = "The reasoning steps are:\n\n"
"""The φ-Decoding release's assistant prefix, on which the demo model was trained: what
``assistant_prefix=None`` means for :data:`DEMO_MODEL` (:func:`mfs_core.prompts.assistant_prefix`)."""

_VLLM_MANAGED_KWARGS = frozenset(
    {"model", "tokenizer", "tensor_parallel_size", "dtype", "gpu_memory_utilization", "max_model_len",
     "enable_prefix_caching", "seed", "kv_cache_memory_bytes"}
)
"""vllm.LLM arguments that have a setting of their own (refused in ``vllm_kwargs``)."""


class MFSSettings(BaseSettings):
    """Settings of the engine, its backend and the MFS decoder (env prefix ``MFS_``).

    Example:
        ``MFSSettings(step_beam_size=4)`` or ``MFS_STEP_BEAM_SIZE=4`` in the environment.

    Only ``MFS_*`` variables and ``.env`` entries are read (other names, e.g. ``OPENAI_API_KEY``, are
    ignored; an ``MFS_*`` one that names no setting warns, :class:`UnknownSettingWarning`). ``api_key`` is a
    ``SecretStr``: ``repr``, ``str`` and JSON dumps show ``'**********'``.

    Raises:
        TypeError: a keyword argument that is no setting (the message names the closest one).
        pydantic.ValidationError: a value out of range; the message names the field and value.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_file=".env", env_file_encoding="utf-8", extra="ignore", frozen=True
    )

    def __init__(self, **values: Any) -> None:
        """Settings from keyword arguments, then ``MFS_*`` variables and ``.env``, then defaults.

        Raises:
            TypeError: a keyword that is no setting (one line, naming the closest setting).
            pydantic.ValidationError: a value out of range; its message is one line naming the
                field, the value and the allowed range (:class:`~mfs_core.errors.OneLineValidationError`).
        """
        unknown = [name for name in values if not name.startswith("_") and name not in type(self).model_fields]
        if unknown:
            raise TypeError(unknown_name_message("MFSSettings", unknown, type(self).model_fields, what="setting"))
        warn_unknown_env(values.get("_env_file", type(self).model_config.get("env_file")), type(self).model_fields)
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise one_line(exc, type(self)) from None

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> MFSSettings:
        """Settings from ``values`` and the defaults alone: no environment, no ``.env``, no I/O.

        What a call builds from settings already resolved (``{**base.model_dump(), **changes}``),
        so a call never reads a file. Validation is the same as the constructor's.

        Raises:
            TypeError: a name that is no setting (one line, naming the closest setting).
            pydantic.ValidationError: a value out of range (one line naming field and value).
        """
        unknown = [name for name in values if name not in cls.model_fields]
        if unknown:
            raise TypeError(unknown_name_message(cls.__name__, unknown, cls.model_fields, what="setting"))
        settings = cls.__new__(cls)
        try:
            BaseModel.__init__(settings, **values)  # pydantic's validation without pydantic-settings' sources
        except ValidationError as exc:
            raise one_line(exc, cls) from None
        return settings

    def changed(self, **changes: Any) -> MFSSettings:
        """These settings with ``changes``: the one way the library changes settings.

        Validated as the constructor validates (ranges, cross-field rules), and like
        :meth:`from_values` it reads no environment and no ``.env`` (a decode never reads a file).
        No changes: ``self``.

        Raises:
            TypeError: a name that is no setting (one line, naming the closest setting).
            pydantic.ValidationError: a value out of range (one line naming field and value).
        """
        if not changes:
            return self
        return type(self).from_values({**self.model_dump(), **changes})

    # --- model and backend -------------------------------------------------------------
    model: str = Field(
        default=DEMO_MODEL,
        description="Hugging Face model name or local path; 'mfs-demo' is the bundled demo model.",
    )
    backend: Literal["transformers", "vllm", "openai"] = Field(
        default="transformers", description="Which backend samples from the model."
    )
    device: str = Field(
        default="auto", description="Torch device for the transformers backend: 'auto' (CUDA if present), 'cpu', 'cuda', 'cuda:1'."
    )
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        default="auto",
        description="Weight dtype. 'auto': float32 for the transformers backend on CPU; on vLLM's CPU build "
        "bfloat16 where the CPU computes it natively (AVX512-BF16 or AMX; measured faster at equal GSM8K accuracy, "
        "docs/real_models.md), else float32; the checkpoint's dtype on a GPU (vLLM's 'auto': a float32 checkpoint "
        "runs in bfloat16/float16 there). backend='openai': the server's.",
    )
    seed: int = Field(default=0, ge=-(2**63), le=2**63 - 1,
                      description="Seed of every random choice of a decode (sampling and selection), a 64-bit integer.")
    batch_size: int = Field(
        default=256, ge=1, description="Most sequences one forward pass of the transformers backend holds (sequences)."
    )

    # --- vLLM and OpenAI-compatible backends ---------------------------------------------
    base_urls: Annotated[list[str], NoDecode] = Field(
        default=[],
        description="backend='openai': base URLs of the OpenAI-compatible servers (e.g. "
        "'http://gpu1:8000/v1'); the requests of a round are spread across them. Env MFS_BASE_URLS: "
        "a JSON list or comma-separated URLs.",
    )
    api_key: SecretStr | None = Field(
        default=None, repr=False,
        description="backend='openai': bearer token sent to the servers (None: no Authorization header). A "
        "SecretStr: never shown in repr, logs, callbacks, cache keys or saved files.",
    )
    request_timeout: float = Field(
        default=600.0, gt=0.0, le=86400.0,
        description="backend='openai': seconds one HTTP attempt may wait to connect, to send, or for the answer "
        "(httpx timeout), in (0, 86400].",
    )
    max_retries: int = Field(
        default=3, ge=0, le=100,
        description="backend='openai': retries of a request after a 429, a 5xx, a timeout or a connection error "
        "(exponential backoff, Retry-After honoured), in [0, 100].",
    )
    server_n: Literal["auto", "yes", "no"] = Field(
        default="auto",
        description="backend='openai': whether the servers return n samples per request. 'yes': vLLM; 'no': "
        "llama.cpp's server, Ollama (a request with n > 1 goes out as n requests with n=1 and distinct seeds); "
        "'auto': send n, and fan out from the first answer that has one choice or refuses n.",
    )
    replica_routing: Literal["affinity", "spread"] = Field(
        default="affinity",
        description="backend='openai' with several base_urls: which replica each request goes to. 'affinity': the "
        "replica that was sent the longest prefix of its prompt (a decode's candidates and rollouts share the question "
        "and the path so far, so its replica's prefix cache prefills them once), spilling to the least-loaded replica "
        "past 1.5x the mean work in flight; 'spread': by expected work alone, each round on its own.",
    )
    tokenizer: str | None = Field(
        default=None,
        description="Local tokenizer path or cached Hugging Face name (None: the model's own, from a local path, "
        "'mfs-demo' or the local Hugging Face cache). backend='openai' uses it for count_tokens, the chat template "
        "and BOS handling; backend='vllm' passes it to vllm.LLM.",
    )
    num_parameters: int | None = Field(
        default=None, ge=1,
        description="Parameter count for the FLOPs estimate 6·n·P (None: counted from the model config when it "
        "can be read locally; else FLOPs are reported as 0). Parameters, >= 1.",
    )
    tensor_parallel_size: int = Field(
        default=1, ge=1, le=1024,
        description="backend='vllm': GPUs the model is split across (tensor parallelism), in [1, 1024].",
    )
    gpu_memory_utilization: float = Field(
        default=0.9, gt=0.0, le=1.0,
        description="backend='vllm': fraction of each GPU's memory vLLM may use for weights and KV cache, in (0, 1].",
    )
    kv_cache_gib: float | None = Field(
        default=None, gt=0.0, le=65536.0,
        description="backend='vllm': memory held for the KV cache in GiB (vLLM's kv_cache_memory_bytes), in "
        "(0, 65536]. None: 4 GiB on vLLM's CPU build (which would otherwise take gpu_memory_utilization, 90%, "
        "of the machine's RAM), vLLM's own sizing from gpu_memory_utilization on a GPU. vLLM's "
        "VLLM_CPU_KVCACHE_SPACE variable, when set, overrides it on CPU.",
    )
    max_model_len: int | None = Field(
        default=None, ge=1,
        description="Context window in tokens (prompt + output). backend='vllm': passed to vllm.LLM (None: the "
        "model config's); backend='openai': overrides what GET /v1/models reports.",
    )
    enable_prefix_caching: bool = Field(
        default=True,
        description="backend='vllm': reuse the KV cache of shared prompt prefixes (beams, candidates and "
        "rollouts of one question share theirs).",
    )
    vllm_kwargs: dict[str, Any] = Field(
        default={},
        description="backend='vllm': further keyword arguments of vllm.LLM / EngineArgs (e.g. "
        "{'enforce_eager': True, 'quantization': 'fp8'}). Keys that have a setting of their own are refused.",
    )
    scheduling: Literal["auto", "lockstep", "continuous"] = Field(
        default="auto",
        description="How the engine feeds the requests of concurrent decodes to the model. 'lockstep' (any "
        "backend): one backend.generate call per round holding every live decode's requests, so a round waits for "
        "its longest request and a new decode for the round. 'continuous' (backend='vllm' only): each decode's "
        "requests go to vLLM's AsyncLLM on their own as soon as the decode asks, and vLLM's scheduler batches "
        "across decodes (continuous batching). 'auto' (the default): continuous on backend='vllm', lockstep "
        "elsewhere (MFSSettings.scheduler). Same seeded samples either way (per-request seeds); docs/serve.md.",
    )

    @field_validator("base_urls", mode="before")
    @classmethod
    def _parse_base_urls(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    return json.loads(text)
                except json.JSONDecodeError as exc:
                    msg = f"base_urls is not a valid JSON list: {value!r} ({exc})"
                    raise ValueError(msg) from exc
            return [part.strip() for part in text.split(",") if part.strip()]
        return value

    @field_validator("base_urls")
    @classmethod
    def _check_base_urls(cls, value: list[str]) -> list[str]:
        urls = []
        for url in value:
            if not url.startswith(("http://", "https://")) or len(url) <= len("https://"):
                msg = f"base_urls entries must be http:// or https:// URLs, got {url!r}"
                raise ValueError(msg)
            urls.append(url.rstrip("/"))
        if len(set(urls)) != len(urls):
            msg = f"base_urls must not repeat a URL, got {value!r}"
            raise ValueError(msg)
        return urls

    @field_validator("vllm_kwargs")
    @classmethod
    def _check_vllm_kwargs(cls, value: dict[str, Any]) -> dict[str, Any]:
        clash = sorted(set(value) & _VLLM_MANAGED_KWARGS)
        if clash:
            msg = f"vllm_kwargs must not set {clash}: use the settings of the same name instead"
            raise ValueError(msg)
        return value

    # --- prompt format -----------------------------------------------------------------
    prompt_format: Literal["auto", "chat", "raw"] = Field(
        default="auto",
        description="'chat': the question is the single user message of the chat template, then the "
        "assistant prefix; 'raw': the prompt is used verbatim; 'auto': chat when the tokenizer has a template.",
    )
    assistant_prefix: str | None = Field(
        default=None,
        description="Text that opens the assistant's answer in 'chat' format. None (default): the φ-Decoding "
        "release's 'The reasoning steps are:\\n\\n' for the demo model, which was trained on it, and none for any "
        "other model (a chat model writes its own answer; the release's prefix cost Qwen2.5-Coder-0.5B GSM8K "
        "questions and its tool calls); a string, '' included, is used as given, tools or not.",
    )
    system_prompt: str | None = Field(default=None, description="Optional system message in 'chat' format.")
    step_delimiter: str = Field(default="\n", min_length=1, description="Text that ends one reasoning step.")
    end_marker: str = Field(
        default="<end_of_reasoning>", min_length=1, description="Text that closes an answer (the model's EOS also does)."
    )
    tool_call_parser: Literal["auto", "hermes", "llama3_json", "mistral"] = Field(
        default="auto",
        description="How tool calls are read from a completion: 'hermes' (Hermes/Qwen <tool_call>{json}</tool_call>), "
        "'llama3_json' (Llama 3.1 {\"name\", \"parameters\"} objects), 'mistral' ([TOOL_CALLS][...]); 'auto' picks by "
        "what the chat template renders with tools, trying each in turn when it names no format.",
    )
    constrain_tool_names: bool = Field(
        default=True,
        description="Keep the names of the tool calls the model writes to the tools it was given (a lazy "
        "constraint on the 'hermes' format, honoured by the transformers backend).",
    )
    constrain_actions: bool = Field(
        default=True,
        description="Sample tool calls' arguments and structured output under a grammar built from their JSON "
        "schema (xgrammar structural tags; every backend: transformers through xgrammar's matcher, vLLM and its "
        "server through structured outputs), so every action parses and validates. Log-probs of constrained tokens "
        "stay raw on transformers; vLLM and its server report them renormalised over the tokens the grammar "
        "allows (docs/backends.md). Needs the xgrammar package. False: sample them free and parse afterwards.",
    )
    answer_trigger: str | None = Field(
        default=None,
        description="Text appended to a completed path that states no answer, then up to answer_trigger_tokens "
        "greedy tokens read its answer (Kojima et al., 2022's answer trigger; e.g. '\\nThe answer is:'); None: off "
        "(the paper's and the demo model's runs). For a pretrained model that loops to the token cap.",
    )
    answer_trigger_tokens: int = Field(
        default=32, ge=1, le=4096, description="Most tokens read after answer_trigger (tokens)."
    )
    max_step_tokens: int = Field(default=64, ge=1, le=65536, description="Most tokens of one step (tokens).")
    max_answer_tokens: int = Field(
        default=512, ge=1, le=65536,
        description="Most tokens of a foresight rollout or a completion (tokens; 512 holds the demo model's longest "
        "solutions, about 330 tokens, and a typical GSM8K chain of thought).",
    )

    # --- MFS (MFS_SPEC.md) -------------------------------------------------------------
    step_beam_size: int = Field(default=8, ge=1, le=1024, description="M, beams kept between steps.")
    num_rollouts: int = Field(default=8, ge=1, le=1024, description="N, candidate steps sampled per beam.")
    foresight_rollouts: int = Field(
        default=1, ge=1, le=64,
        description="Foresight rollouts per surviving candidate (per distinct one with share_foresight).",
    )
    prune_lambda: float = Field(
        default=0.8, ge=0.0, description="λ1 of the width-pruning threshold μ + λ1·σ (paper eq. 10-11; standard deviations)."
    )
    temperature: float = Field(default=0.7, gt=0.0, le=10.0, description="Sampling temperature of steps and rollouts.")
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    stop_epsilon: float = Field(
        default=1e-6, ge=0.0, description="ε_stop of the convergence test max V <= ε_stop (eq. 12; nats). The release uses 1e-4."
    )
    max_steps: int = Field(default=8, ge=1, le=256, description="Most deliberation (foresight) steps.")
    min_steps: int = Field(default=1, ge=0, le=256, description="Steps done before the convergence test may stop.")
    selection_temperature: float = Field(
        default=0.1, gt=0.0, description="Temperature of softmax(V / T) when beams are drawn (φ-Decoding's 0.1)."
    )
    foresight_window: int | None = Field(default=None, ge=1, le=65536, description=_RULES["foresight_window"])
    answer_stop_alpha: float | None = Field(default=None, gt=0.0, lt=1.0, description=_RULES["answer_stop_alpha"])
    convergence_stop: bool = Field(default=True, description=_RULES["convergence_stop"])
    vote_quality_beta: float | None = Field(default=None, ge=0.0, le=1000.0, description=_RULES["vote_quality_beta"])

    # --- Ablations and variants (docs/benchmarks.md) -------------------------------------
    # Switches for measuring the search, not for everyday use: their defaults are what method
    # 'mfs' runs. Each description starts "Ablation (...)" naming the decoder variants of
    # mfs_core.decoders.DECODERS that set it; ABLATION_FIELDS lists them, in this order.
    share_foresight: bool = Field(
        default=True,
        description="Ablation (decoder variants `mfs-paper`, `mfs-reuse-only` set False). Survivors with the same "
        "path text share one estimate of E[F | a_t] (eq. 7-8): foresight_rollouts rollouts per distinct candidate, "
        "not per copy; copies keep their weight in the selection and the vote, and beams that share a rollout are "
        "completed by fresh samples at the finish (off: the paper's rollout per survivor).",
    )
    reuse_rollouts: bool = Field(
        default=False,
        description="Ablation (decoder variants `mfs-reuse-only`, `mfs-share-reuse` set True). A candidate that is "
        "the first step of its beam's stored rollout uses the rest of that rollout as one of its foresight rollouts, "
        "at no new tokens (off, the default: every rollout is sampled anew, as the paper; on the tuning questions "
        "reuse cost 3 points and stopped every search at its second step, docs/benchmarks.md).",
    )
    vote_rollouts: bool | Literal["weighted"] = Field(
        default=False,
        description="Ablation (decoder variants `mfs-rollout-vote`, `mfs-quality-vote`, `mfs-rules` set True; "
        "`mfs-weighted-vote`, `mfs-weighted-answer-stop` set 'weighted'). The final vote counts every foresight rollout (joined with its "
        "path) and every finished candidate the search sampled instead of one completion per kept beam, and no kept "
        "beam is completed anew. True: each rollout once (under share_foresight the copies of a path share one vote; "
        "chosen on tuning questions, it lost 22 questions net on the fresh held-out set, docs/benchmarks.md). "
        "'weighted': a rollout counts as many times as the step sampled the path it completes (split evenly over "
        "foresight_rollouts > 1), so the vote weighs answers like self-consistency over the sampled candidates (on "
        "the tuning questions 59.0% against the default's 72.5%: the copies add weight, not answers; "
        "docs/benchmarks.md). False, the default: the paper's vote over the kept beams.",
    )
    answer_stop_confidence: float | None = Field(
        default=None, gt=0.5, lt=1.0,
        description="Ablation (decoder variants `mfs-answer-stop`, `mfs-rollout-vote` and `mfs-weighted-answer-stop` "
        "set 0.95). Stop deliberating once the posterior probability that the leading answer keeps the lead, over the "
        "answers of every rollout and finished candidate seen (Beta criterion of Adaptive-Consistency; with "
        "vote_rollouts='weighted' the weighted counts scaled to their effective sample size), reaches this value, in "
        "(0.5, 1) (None, the default: off, the paper's search; docs/benchmarks.md).",
    )
    convergence_min_paths: int = Field(
        default=1, ge=1, le=1024,
        description="Ablation (decoder variant `mfs-min-paths` sets 2). Distinct surviving paths a step must have "
        "scored before the convergence test (eq. 12) may stop the search: with one, max V compares nothing (1: the "
        "paper's test on every step).",
    )
    early_stopping: bool = Field(
        default=True,
        description="Ablation (decoder variant `mfs-no-stop` sets False). Apply the stopping rules: the convergence "
        "stop and, when set, the answer stop (off: the 'w/o stopping' ablation, every search runs max_steps).",
    )
    width_pruning: bool = Field(
        default=True,
        description="Ablation (decoder variant `mfs-no-prune` sets False). Apply width pruning (off: the paper's "
        "'w/o pruning' ablation).",
    )
    convergence_finish: Literal["parent_beams", "converged_rollouts"] = Field(
        default="parent_beams",
        description="Ablation (decoder variant `mfs-converged-rollouts` sets 'converged_rollouts'). What a "
        "convergence stop returns (MFS_SPEC.md step 7-8): 'parent_beams' discards the converged step's candidates "
        "and completes the parent beams with the rollouts they got one step earlier (the release's active_beams = "
        "active_beams_before); 'converged_rollouts' keeps the beams selected at the converged step (the earlier "
        "rule, for the ablation).",
    )
    baseline: Literal["parent_foresight", "parent_step"] = Field(
        default="parent_foresight",
        description="Ablation (no decoder variant sets it). Step value baseline: the parent's F (paper eq. 8) or the "
        "parent's step log-prob (release).",
    )
    selection: Literal["sample", "top_k"] = Field(
        default="sample",
        description="Ablation (no decoder variant sets it). 'sample': draw M beams by softmax(V/T) (Algorithm 1); "
        "'top_k': the release's top-M.",
    )
    max_finished_fraction: float = Field(
        default=0.6, ge=0.0, le=1.0,
        description="Ablation (no decoder variant sets it). Most finished candidates kept per step, as a fraction of "
        "M (release: 0.6).",
    )
    rollout_temperature: float | None = Field(
        default=0.5, gt=0.0, le=10.0,
        description="Ablation (decoder variants `mfs-same-temperature`, `mfs-paper`, `mfs-shared`, `mfs-reuse-only`, "
        "`mfs-share-reuse` set None). Sampling temperature of MFS's foresight rollouts and final completions, in "
        "(0, 10]; the candidate steps keep 'temperature'. 0.5 (chosen on tuning questions, then "
        "measured once on a held-out set: docs/benchmarks.md, 'Cooler rollouts'); None: 'temperature', the paper's "
        "search (the release samples them at the backend default 1.0 and its steps at its configured temperature).",
    )
    aggregation: Literal["majority", "best_quality"] = Field(
        default="majority",
        description="Ablation (no decoder variant sets it). 'majority': vote over extracted answers; 'best_quality': "
        "the path with the highest F.",
    )

    # --- Baselines: SC, ESC and DeepConf (docs/benchmarks.md). The papers' counts are scaled down to this
    # project's budgets (SC's curve goes to k = 16; answers of a few hundred tokens); each description says how.
    num_samples: int = Field(default=8, ge=1, le=4096, description="Method `sc`: k, completions sampled and voted "
                             "over, in [1, 4096] (samples; `mfs bench --sc-k` sets it).")
    sc_round_size: int | None = Field(default=None, ge=1, le=4096, description=_RULES["sc_round_size"])
    esc_window: int = Field(
        default=4, ge=1, le=1024,
        description="Method `esc` (early-stopping self-consistency, Li et al., ICLR 2024): w, answers sampled per "
        "window; sampling stops after the first window whose answers are all equal, in [1, 1024] (answers). The "
        "paper's GSM8K runs use w = 5 and at most 40 samples; 4 and esc_max_samples = 16 scale that to the k <= 16 "
        "of this project's self-consistency curve.",
    )
    esc_max_samples: int = Field(
        default=16, ge=1, le=4096,
        description="Method `esc`: most answers sampled in all, in [1, 4096] (answers; at least esc_window; a last "
        "window smaller than esc_window takes what is left). The paper's 40 on GSM8K; 16, the top of this project's "
        "self-consistency curve.",
    )
    deepconf_top_logprobs: int = Field(
        default=20, ge=1, le=100,
        description="Method `deepconf` (DeepConf online, Fu et al., 2025, arXiv 2508.15260): k, the most likely raw "
        "log-probs a token's confidence C = -(1/k) sum_j log P(j) is taken over (paper eq. 2), in [1, 100] "
        "(log-probs per token). 20, the paper's and the authors' code's; vLLM returns at most its engine's "
        "max_logprobs, 20 unless set in vllm_kwargs.",
    )
    deepconf_window: int = Field(
        default=32, ge=1, le=65536,
        description="Method `deepconf`: tokens per group, the sliding window whose mean token confidence is a group "
        "confidence (paper eq. 4), in [1, 65536] (tokens); a trace shorter than it is one group. The paper and the "
        "authors' code use 2048 on traces of thousands of tokens; answers here are a few hundred tokens (the demo "
        "model's about 230, GSM8K under a 400-token cap), so 32, the longest window the test bed measured "
        "(docs/benchmarks.md, 'Which foresight quality separates right from wrong answers').",
    )
    deepconf_warmup: int = Field(
        default=4, ge=1, le=1024,
        description="Method `deepconf`: N_init, traces sampled to the end before the stopping threshold is set from "
        "their scores, in [1, 1024] (traces; at most deepconf_max_traces). The paper's and the code's 16 (of "
        "budgets of 512 and 256); 4 here, a quarter of deepconf_max_traces = 16 (16 would spend the whole budget).",
    )
    deepconf_keep: float = Field(
        default=0.9, gt=0.0, le=1.0,
        description="Method `deepconf`: the fraction of the warm-up traces' scores at or above the stopping threshold "
        "(the threshold is their 100·(1 - keep)th percentile), in (0, 1]. 0.9 is DeepConf-high, the default of the "
        "authors' deepthink() (confidence_percentile=90, deepconf/wrapper.py:76); 0.1 is DeepConf-low (their "
        "examples/example_online.py's --confidence_percentile 10). -high here because with 4 warm-up scores -low "
        "puts the threshold between the two highest, and most later traces would stop before they answer.",
    )
    deepconf_batch: int | None = Field(
        default=None, ge=1, le=1024,
        description="Method `deepconf`: traces sampled together in each round after the warm-up, in [1, 1024] "
        "(traces; None: deepconf_warmup). The paper's Algorithm 2 adds one trace at a time and tests the consensus "
        "after each; the authors' code samples the whole rest of the budget at once (deepconf/wrapper.py:223-235). "
        "A batch keeps the rounds few; the consensus is tested after each batch, so it may overshoot by a batch.",
    )
    deepconf_chunk_tokens: int = Field(
        default=32, ge=1, le=65536,
        description="Method `deepconf`: tokens each trace after the warm-up generates per request, in [1, 65536] "
        "(tokens). After each chunk the trace's group confidences are checked and it is stopped once a full group "
        "falls below the threshold: the stop happens at chunk granularity, and the tokens of the chunk after the "
        "crossing are generated and counted. The authors' code stops at the token, in a vLLM logits processor "
        "(deepconf/processors.py:51), which no backend here can run.",
    )
    deepconf_consensus: float = Field(
        default=0.95, gt=0.0, le=1.0,
        description="Method `deepconf`: τ, sampling stops once the leading answer holds this share of the "
        "confidence-weighted votes of the kept traces (β = V(a) / sum V, weights the traces' scores), in (0, 1]. The "
        "paper's 0.95; the authors' code has no consensus stop (it samples the whole budget).",
    )
    deepconf_max_traces: int = Field(
        default=16, ge=1, le=4096,
        description="Method `deepconf`: K, most traces in all, warm-up included, in [1, 4096] (traces). The paper's "
        "512 (the code's default 256, deepconf/wrapper.py:75); 16, the top of this project's self-consistency curve.",
    )

    # --- engine ------------------------------------------------------------------------
    generate_timeout: float | None = Field(
        default=None,
        gt=0.0,
        description="Most seconds one backend.generate call of this decode may take before the engine gives up on "
        "it and retries the round's decodes one at a time (None: no limit).",
    )

    @model_validator(mode="after")
    def _check_across_fields(self) -> MFSSettings:
        if not self.model.strip():
            msg = f"model must name a model or a path, got {self.model!r}"
            raise ValueError(msg)
        if self.min_steps > self.max_steps:
            msg = f"min_steps ({self.min_steps}) must not exceed max_steps ({self.max_steps})"
            raise ValueError(msg)
        if self.end_marker == self.step_delimiter:
            msg = f"end_marker and step_delimiter must differ, both are {self.end_marker!r}"
            raise ValueError(msg)
        check_rules(self.foresight_window, self.reuse_rollouts)  # the search rules' cross-field check
        if self.esc_max_samples < self.esc_window:
            msg = f"esc_max_samples ({self.esc_max_samples}) must be at least esc_window ({self.esc_window})"
            raise ValueError(msg)
        if self.deepconf_max_traces < self.deepconf_warmup:
            msg = (f"deepconf_max_traces ({self.deepconf_max_traces}) must be at least deepconf_warmup "
                   f"({self.deepconf_warmup})")
            raise ValueError(msg)
        if self.scheduling == "continuous" and self.backend != "vllm":
            msg = (f"scheduling='continuous' needs backend='vllm' (it sends each decode's requests to vLLM's AsyncLLM), "
                   f"got backend={self.backend!r}; use scheduling='lockstep'")
            raise ValueError(msg)
        return self

    @property
    def rollout_sampling_temperature(self) -> float:
        """The temperature of foresight rollouts and final completions: ``rollout_temperature``, else ``temperature``."""
        return self.rollout_temperature if self.rollout_temperature is not None else self.temperature

    @property
    def scheduler(self) -> Literal["lockstep", "continuous"]:
        """The scheduling the engine runs: ``scheduling``, with ``"auto"`` read as continuous on vLLM, else lockstep."""
        if self.scheduling == "auto":
            return "continuous" if self.backend == "vllm" else "lockstep"
        return self.scheduling

    @property
    def deepconf_batch_size(self) -> int:
        """Traces per round of ``deepconf`` after the warm-up: ``deepconf_batch``, or ``deepconf_warmup`` if None."""
        return self.deepconf_batch if self.deepconf_batch is not None else self.deepconf_warmup

    @property
    def backend_settings(self) -> BackendSettings:
        """The fields that choose, load and reach the model (:data:`BACKEND_FIELDS`), frozen and hashable.

        Engines whose backend settings are equal share one loaded model; an adapter handed an
        engine refuses settings whose backend settings differ from the engine's.
        """
        return BackendSettings.model_construct(**{name: getattr(self, name) for name in BACKEND_FIELDS})

    def backend_key(self) -> tuple:
        """``self.backend_settings.identity()``: settings equal here share one backend."""
        return self.backend_settings.identity()


ABLATION_FIELDS: tuple[str, ...] = (
    "share_foresight", "reuse_rollouts", "vote_rollouts", "answer_stop_confidence", "convergence_min_paths",
    "early_stopping", "width_pruning", "convergence_finish", "baseline", "selection", "max_finished_fraction",
    "rollout_temperature", "aggregation",
)
"""The :class:`MFSSettings` fields that are ablations and variants: switches for measuring the
search (``mfs bench``, docs/benchmarks.md "Settings that are ablations"), not for everyday use.
Their defaults are what method ``mfs`` runs; each field's description starts ``"Ablation ("``
and names the decoder variants of :data:`mfs_core.decoders.DECODERS` that set it (``mfs-paper``
sets ``share_foresight=False``, ...), or says that none does. Still set flat, as
``MFSSettings(early_stopping=False)`` or ``MFS_EARLY_STOPPING=false``; the adapters' fields of
the same names carry the same descriptions."""


BackendSettings = create_model(
    "BackendSettings",
    __base__=BackendIdentity,
    __module__=__name__,
    __doc__="""The settings that choose, load and reach the model: ``MFSSettings.backend_settings``.

    Frozen and hashable. Its fields are :data:`BACKEND_FIELDS`, declared once in
    :class:`MFSSettings` (same names, types, defaults and descriptions; still set flat, as
    ``MFSSettings(model=...)`` or ``MFS_MODEL``). Two are equal when they load and reach the
    same model: ``device="auto"`` equals the device it resolves to, the device counts only for
    ``backend='transformers'``, the API key is compared by digest.
    """,
    **{name: (MFSSettings.model_fields[name].annotation, MFSSettings.model_fields[name]) for name in BACKEND_FIELDS},
)


def setting_sources(env_file: Any = ".env") -> dict[str, str]:
    """Settings given by ``MFS_*`` variables or ``.env``: field name -> where (``"MFS_SEED"``)."""
    fields = MFSSettings.model_fields
    sources = environment_sources(env_file)
    return {name[len(ENV_PREFIX):].lower(): origin for name, origin in sources.items()
            if name[len(ENV_PREFIX):].lower() in fields}
