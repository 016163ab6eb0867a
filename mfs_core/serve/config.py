"""``mfs serve``'s own settings: where it listens, its key and its limits (``MFS_SERVER_*``).

They are not :class:`~mfs_core.settings.MFSSettings` fields: the search's settings come from
``MFSSettings`` (flags, ``MFS_*``) as for ``mfs ask``; these say how the server holds up.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["ServerSettings"]


class ServerSettings(BaseSettings):
    """How ``mfs serve`` listens and what it admits (env prefix ``MFS_SERVER_``).

    Example:
        ``ServerSettings(port=8001, queue_size=32)`` or ``MFS_SERVER_QUEUE_SIZE=32``.

    ``api_key`` is the key clients must send (``Authorization: Bearer <key>``); it is a
    ``SecretStr`` (never in repr, logs or metrics) and distinct from ``MFSSettings.api_key``,
    which the HTTP backend sends *upstream* to ``vllm serve``.

    Raises:
        pydantic.ValidationError: a value out of range (the message names field and value).
    """

    model_config = SettingsConfigDict(env_prefix="MFS_SERVER_", env_file=".env", extra="ignore", frozen=True)

    host: str = Field(default="127.0.0.1", min_length=1, description="Address to listen on (0.0.0.0: every interface).")
    port: int = Field(default=8000, ge=0, le=65535, description="TCP port to listen on (0: a free one, logged).")
    api_key: SecretStr | None = Field(
        default=None,
        description="Key the /v1 endpoints require as 'Authorization: Bearer <key>' (compared in constant time); "
        "None: no key (only sensible on loopback). /health and /metrics never need it.",
    )
    queue_size: int = Field(
        default=64, ge=1, le=65536,
        description="Most decodes in the engine at once (a request with n choices counts n); a request that "
        "would exceed it is answered 429 with Retry-After.",
    )
    max_body_bytes: int = Field(
        default=1_048_576, ge=1024, le=1_073_741_824, description="Largest request body (bytes); larger: 413."
    )
    max_messages: int = Field(default=256, ge=1, le=65536, description="Most chat messages in one request.")
    max_n: int = Field(default=8, ge=1, le=128, description="Most choices (n) in one request.")
    limit_step_beam_size: int = Field(
        default=4, ge=1, le=1024,
        description="Largest step_beam_size (M) a request may ask for (the server's own setting is always allowed); "
        "above it: 400 naming the limit.",
    )
    limit_num_rollouts: int = Field(
        default=4, ge=1, le=1024,
        description="Largest num_rollouts (N) a request may ask for (the server's own setting is always allowed).",
    )
    limit_num_samples: int = Field(
        default=16, ge=1, le=4096,
        description="Largest num_samples (self-consistency's k) a request may ask for (the server's own setting is "
        "always allowed); 16, esc_max_samples' default, keeps SC's worst case under one MFS step's.",
    )
    limit_max_steps: int = Field(
        default=8, ge=1, le=256,
        description="Largest max_steps a request may ask for (the server's own setting is always allowed).",
    )
    limit_max_tokens: int = Field(
        default=1024, ge=1, le=65536,
        description="Largest max_tokens (max_answer_tokens: a rollout's or a completion's tokens) a request may ask "
        "for (the server's own setting is always allowed).",
    )
    work_budget: int | None = Field(
        default=None, ge=1,
        description="Most worst-case output tokens of the decodes in the engine at once (tokens; each decode "
        "counts DecoderSpec.worst_case_tokens of its settings); a request that would exceed it is answered 429 "
        "with Retry-After, one that exceeds it alone 400. None: queue_size times the worst case of one decode "
        "with the server's own settings.",
    )
    request_timeout: float | None = Field(
        default=None, gt=0.0, le=86400.0,
        description="Seconds a request's decodes may take; past it they are abandoned and the client gets a 504 "
        "(streamed: an error event, then [DONE]). None: no limit.",
    )
    fair_share_tokens: int = Field(
        default=4096, ge=0, le=10_000_000,
        description="Lockstep scheduling's fair share F (output tokens): each request (its n decodes together) is "
        "one party; a call serves the parties within F of the least-served one, and a request that arrives while "
        "others run enters 2F behind the least served, so its rounds run alone for F tokens (least attained "
        "service; 0: every decode in every call). Continuous scheduling (vLLM) shares by itself and ignores it.",
    )
    model_name: str | None = Field(
        default=None, description="The model name /v1/models lists and requests must name (None: the model setting)."
    )
    shutdown_timeout: float = Field(
        default=30.0, ge=0.0, le=3600.0,
        description="Seconds a graceful shutdown (SIGTERM, SIGINT) lets in-flight decodes finish before it "
        "abandons them and closes the backend.",
    )
    on_backend_death: Literal["exit", "reload"] = Field(
        default="exit",
        description="What the server does once its backend cannot serve (vLLM's engine core died, a fatal device "
        "error, every HTTP replica down past its retry budget): 'exit' drains (in-flight requests get their error, new "
        "ones 503 with Retry-After) and exits with a non-zero status within shutdown_timeout, for a supervisor "
        "(systemd, Docker, Kubernetes) to restart it, as vLLM's server does; 'reload' loads the backend again "
        "in-process, at most reload_attempts times with doubling delays, and exits as 'exit' if all fail.",
    )
    reload_attempts: int = Field(
        default=3, ge=1, le=100, description="Most in-process reloads of a dead backend in a row (on_backend_death="
        "'reload'); a reload that serves again resets the count.",
    )
    reload_backoff: float = Field(
        default=2.0, ge=0.0, le=600.0,
        description="Seconds before the first reload attempt; each further attempt waits twice as long (at most 60 s).",
    )
    health_interval: float = Field(
        default=1.0, gt=0.0, le=60.0,
        description="Seconds between two looks at the backend's state (vLLM's server looks every 5 s); a failed decode, "
        "/health and /ready also look at once.",
    )
