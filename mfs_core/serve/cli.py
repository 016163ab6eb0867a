"""``mfs serve``'s own flags and what the command does once its settings are resolved.

The command (in :mod:`mfs_core.cli`) takes the model and search flags of ``mfs ask`` (same
precedence: flag, ``MFS_*``, CPU defaults, defaults) and these server flags, each with an
``MFS_SERVER_*`` variable (:class:`~mfs_core.serve.config.ServerSettings`).
"""

from __future__ import annotations

import logging
import os
from typing import Annotated, Any, Optional

import typer

__all__ = [
    "HostOption", "MaxBodyBytesOption", "MaxMessagesOption", "PortOption", "QueueSizeOption", "ServedModelNameOption",
    "ServerApiKeyOption", "ShutdownTimeoutOption", "LimitMaxStepsOption", "LimitMaxTokensOption",
    "LimitNumRolloutsOption", "LimitNumSamplesOption", "LimitStepBeamSizeOption", "FairShareTokensOption", "RequestTimeoutOption", "WorkBudgetOption", "server_settings",
    "OnBackendDeathOption", "ReloadAttemptsOption", "ReloadBackoffOption",
]

logger = logging.getLogger("mfs_core.serve")

HostOption = Annotated[Optional[str], typer.Option(help="Address to listen on.", show_default="MFS_SERVER_HOST, else 127.0.0.1")]
PortOption = Annotated[Optional[int], typer.Option(help="TCP port.", show_default="MFS_SERVER_PORT, else 8000")]
ServerApiKeyOption = Annotated[
    Optional[str],
    typer.Option(help="Key clients must send as 'Authorization: Bearer KEY' (not --api-key, which goes upstream to "
                 "--base-url servers); never printed. Prefer MFS_SERVER_API_KEY: a flag shows in the process list.",
                 show_default="MFS_SERVER_API_KEY, else none"),
]
QueueSizeOption = Annotated[
    Optional[int],
    typer.Option(help="Most decodes in the engine at once; beyond it requests get 429 with Retry-After.",
                 show_default="MFS_SERVER_QUEUE_SIZE, else 64"),
]
MaxBodyBytesOption = Annotated[
    Optional[int], typer.Option(help="Largest request body in bytes (larger: 413).",
                                show_default="MFS_SERVER_MAX_BODY_BYTES, else 1048576")
]
MaxMessagesOption = Annotated[
    Optional[int], typer.Option(help="Most chat messages (or prompts) in one request.",
                                show_default="MFS_SERVER_MAX_MESSAGES, else 256")
]
ServedModelNameOption = Annotated[
    Optional[str], typer.Option(help="Model name clients send and /v1/models lists.",
                                show_default="MFS_SERVER_MODEL_NAME, else --model")
]
ShutdownTimeoutOption = Annotated[
    Optional[float], typer.Option(help="Seconds in-flight decodes may finish after SIGTERM before they are abandoned.",
                                  show_default="MFS_SERVER_SHUTDOWN_TIMEOUT, else 30")
]


LimitStepBeamSizeOption = Annotated[
    Optional[int], typer.Option(help="Largest step_beam_size a request may ask for (the server's own always passes).",
                                show_default="MFS_SERVER_LIMIT_STEP_BEAM_SIZE, else 4")
]
LimitNumSamplesOption = Annotated[
    Optional[int], typer.Option(help="Largest num_samples (SC's k) a request may ask for (the server's own always passes).",
                                show_default="MFS_SERVER_LIMIT_NUM_SAMPLES, else 16")
]
LimitNumRolloutsOption = Annotated[
    Optional[int], typer.Option(help="Largest num_rollouts a request may ask for (the server's own always passes).",
                                show_default="MFS_SERVER_LIMIT_NUM_ROLLOUTS, else 4")
]
LimitMaxStepsOption = Annotated[
    Optional[int], typer.Option(help="Largest max_steps a request may ask for (the server's own always passes).",
                                show_default="MFS_SERVER_LIMIT_MAX_STEPS, else 8")
]
LimitMaxTokensOption = Annotated[
    Optional[int], typer.Option(help="Largest max_tokens a request may ask for (the server's own always passes).",
                                show_default="MFS_SERVER_LIMIT_MAX_TOKENS, else 1024")
]
WorkBudgetOption = Annotated[
    Optional[int], typer.Option(help="Most worst-case output tokens of the decodes in flight; beyond it 429.",
                                show_default="MFS_SERVER_WORK_BUDGET, else queue-size times one default decode's")
]
RequestTimeoutOption = Annotated[
    Optional[float], typer.Option(help="Seconds a request's decodes may take before they are abandoned (504).",
                                  show_default="MFS_SERVER_REQUEST_TIMEOUT, else none")
]

FairShareTokensOption = Annotated[
    Optional[int], typer.Option(help="Lockstep fair share: output tokens a newcomer is served alone ahead of a large "
                                     "running request (0: every decode in every call).",
                                show_default="MFS_SERVER_FAIR_SHARE_TOKENS, else 4096")
]


OnBackendDeathOption = Annotated[
    Optional[str], typer.Option(help="Once the backend cannot serve (vLLM's engine core died, a fatal device error, every "
                                     "HTTP replica down): 'exit' drains and exits with status 2 for a supervisor to "
                                     "restart it; 'reload' loads the backend again in-process (bounded, backed off).",
                                show_default="MFS_SERVER_ON_BACKEND_DEATH, else exit")
]
ReloadAttemptsOption = Annotated[
    Optional[int], typer.Option(help="Most reloads of a dead backend in a row (--on-backend-death reload); then exit.",
                                show_default="MFS_SERVER_RELOAD_ATTEMPTS, else 3")
]
ReloadBackoffOption = Annotated[
    Optional[float], typer.Option(help="Seconds before the first reload attempt; doubles each attempt (at most 60).",
                                  show_default="MFS_SERVER_RELOAD_BACKOFF, else 2")
]


def server_settings(flags: dict[str, Any]) -> Any:
    """:class:`ServerSettings` from the given flags (None: not given), then ``MFS_SERVER_*``, then defaults.

    Raises:
        ValueError: a value out of range, one line naming the flag, value and allowed range.
    """
    from pydantic import ValidationError

    from mfs_core.errors import format_validation_error
    from mfs_core.serve.config import ServerSettings

    given = {name: value for name, value in flags.items() if value is not None}
    sources = {name: f"MFS_SERVER_{name.upper()}" for name in ServerSettings.model_fields
               if f"MFS_SERVER_{name.upper()}" in os.environ}
    sources.update({name: "--" + ("server-api-key" if name == "api_key" else name.replace("_", "-")) for name in given})
    try:
        return ServerSettings(**given)
    except ValidationError as exc:
        raise ValueError(f"invalid server setting: {format_validation_error(exc, ServerSettings, sources=sources)}") from exc
