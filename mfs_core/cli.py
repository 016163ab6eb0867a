"""The ``mfs`` command: ``mfs ask QUESTION`` answers with MFS and shows how the search went.

Where a setting of ``mfs ask`` comes from, first match wins: its flag; an ``MFS_*``
environment variable or ``.env`` entry (``MFS_STEP_BEAM_SIZE=8``); the command's CPU-sized
defaults ``--step-beam-size 4 --num-rollouts 4``; the :class:`MFSSettings` defaults (the
paper's M = N = 8). With M = N = 4 a step samples 16 candidates instead of 64, which keeps
a question on the demo model at about a second on 2 CPU cores.

Cheap checks (an empty question, a ``--model`` path that does not exist, a bad setting)
run before the model loads; every error is one line naming the field, the value and the
allowed range. ``-v`` logs what the command does to stderr.
"""

from __future__ import annotations

import logging
import time
import warnings
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from mfs_core import __version__
from mfs_core.bench.cli import (
    CPU_NUM_ROLLOUTS, CPU_STEP_BEAM_SIZE, ApiKeyOption, BaseUrlOption, DeviceOption, DtypeOption, SchedulingOption,
    TokenizerOption, bench, check_base_url, choose_backend,
)
from mfs_core.backends._hf import quiet_transformers
from mfs_core.errors import MFSError, format_validation_error
from mfs_core.settings import DEMO_MODEL, MFSSettings, UnknownSettingWarning, setting_sources
from mfs_core.trace import format_reasoning, format_trace, format_vote, search_header
from mfs_core.live import LiveView, write_traces
from mfs_core.serve import cli as serve_cli
from mfs_core.types import DecodeResult

__all__ = [
    "CPU_DEFAULTS", "DISTRIBUTION", "app", "check_model", "check_question", "format_trace", "print_result",
    "resolve_settings",
]

logger = logging.getLogger("mfs_core.cli")

DISTRIBUTION = "mfs-decoding"
"""The package's name on the package index (``pip install mfs-decoding``)."""

CPU_DEFAULTS: dict[str, Any] = {"step_beam_size": CPU_STEP_BEAM_SIZE, "num_rollouts": CPU_NUM_ROLLOUTS,
                                "num_samples": CPU_STEP_BEAM_SIZE}
"""Defaults of ``mfs ask`` where no flag and no ``MFS_*`` variable sets the field (SC's k as M: as many answers
as the search keeps paths)."""

PRECEDENCE = (
    "Each setting comes from its flag, else its MFS_* environment variable or .env entry "
    f"(e.g. MFS_STEP_BEAM_SIZE), else this command's CPU defaults (M = {CPU_STEP_BEAM_SIZE}, "
    f"N = {CPU_NUM_ROLLOUTS}, SC's k = {CPU_STEP_BEAM_SIZE}), else the MFSSettings defaults (the paper's)."
)

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Martingale Foresight Sampling.")


class CLIError(MFSError):
    """A one-line error ``mfs`` prints (``error: ...``) before exiting with status 2."""


def _version(value: bool) -> None:
    if value:
        typer.echo(f"{DISTRIBUTION} {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log what the command does to stderr.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Martingale Foresight Sampling (EACL 2026) on a local model."""
    from mfs_core.backends.vllm import quiet_vllm

    quiet_vllm(verbose)
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)


def _default(field: str) -> str:
    """The ``[default: ...]`` text of a flag: its variable, then the CPU or settings default."""
    fallback = CPU_DEFAULTS.get(field, MFSSettings.model_fields[field].default)
    shown = repr(fallback) if isinstance(fallback, str) else str(fallback)
    return f"MFS_{field.upper()}, else {shown}"


ModelOption = Annotated[
    Optional[str],
    typer.Option(help="Local checkpoint folder, .gguf file, packaged model (smollm2-135m-instruct), or a Hugging "
                 "Face name already in the local cache (nothing is downloaded unless HF_HUB_OFFLINE=0); with "
                 "--backend openai, the name the server serves.", show_default=_default("model")),
]
StepBeamSizeOption = Annotated[
    Optional[int], typer.Option(help="M, beams kept per step.", show_default=_default("step_beam_size"))
]
NumRolloutsOption = Annotated[
    Optional[int], typer.Option(help="N, candidates sampled per beam.", show_default=_default("num_rollouts"))
]
NumSamplesOption = Annotated[
    Optional[int], typer.Option(help="k, self-consistency's samples (method sc).", show_default=_default("num_samples"))
]
PruneLambdaOption = Annotated[
    Optional[float], typer.Option(help="λ1 of the width-pruning threshold μ + λ1·σ.", show_default=_default("prune_lambda"))
]
StopEpsilonOption = Annotated[
    Optional[float], typer.Option(help="ε_stop: stop when max V <= ε_stop (nats).", show_default=_default("stop_epsilon"))
]
TemperatureOption = Annotated[
    Optional[float], typer.Option(help="Sampling temperature, in (0, 10].", show_default=_default("temperature"))
]
MaxStepsOption = Annotated[
    Optional[int], typer.Option(help="Most search steps, in [1, 256].", show_default=_default("max_steps"))
]
SeedOption = Annotated[Optional[int], typer.Option(help="Seed of the decode.", show_default=_default("seed"))]
BackendOption = Annotated[
    Optional[str], typer.Option(help="transformers | vllm | openai.", show_default=_default("backend"))
]
# The model and search options above are shared by ``mfs ask`` and ``mfs serve`` (SchedulingOption: serve and bench).
_SETTING_FLAGS = ("model", "step_beam_size", "num_rollouts", "num_samples", "prune_lambda", "stop_epsilon",
                  "temperature", "max_steps", "seed", "backend", "base_url", "tokenizer", "api_key", "device", "dtype")


def setting_flags(values: dict[str, Any]) -> dict[str, Any]:
    """The settings flags of ``mfs ask`` / ``mfs serve`` (a command's ``locals()``) as :func:`resolve_settings` takes them."""
    flags = {name: values[name] for name in _SETTING_FLAGS}
    flags["base_urls"] = flags.pop("base_url") or None
    return flags


def resolve_settings(flags: dict[str, Any]) -> tuple[MFSSettings, dict[str, str]]:
    """The settings of ``mfs ask``: flag > ``MFS_*`` (environment, ``.env``) > CPU defaults > defaults.

    Args:
        flags: field name -> flag value; None means the flag was not given.

    A server URL (``--base-url``, ``MFS_BASE_URLS``) with no backend named selects
    ``backend="openai"``; ``--base-url`` with another backend named is refused.

    Returns:
        The settings and, per field not left at a default, where its value came from
        (``"--seed"``, ``"MFS_SEED"``, ``"CPU default"``, ``"--base-url"`` for a backend it chose).

    Raises:
        CLIError: a value out of range (one line: field, value, source and allowed range), or
            ``--base-url`` with a backend other than ``openai``.
    """
    environment = setting_sources()
    given = {name: value for name, value in flags.items() if value is not None}
    flagged = set(given)
    given, chosen_by = choose_backend(given, environment)
    cpu = {name: value for name, value in CPU_DEFAULTS.items() if name not in environment and name not in given}
    sources = {name: "CPU default" for name in cpu}
    sources.update({name: origin for name, origin in environment.items() if name not in given})
    sources.update({name: "--" + ("base-url" if name == "base_urls" else name.replace("_", "-")) for name in flagged})
    if chosen_by is not None:
        sources["backend"] = chosen_by
    from pydantic import ValidationError

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnknownSettingWarning)
        try:
            settings = MFSSettings(**cpu, **given)
        except ValidationError as exc:
            raise CLIError(f"invalid setting: {format_validation_error(exc, MFSSettings, sources=sources)}") from exc
        finally:
            for warning in caught:  # a misspelled MFS_* name: one line, not Python's warning format
                typer.echo(f"warning: {warning.message}", err=True)
    try:
        check_base_url(settings.backend, given, sources.get("backend", "the default"))
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    return settings, sources


def check_question(question: str) -> None:
    """Refuse an empty question before any model is loaded.

    Raises:
        CLIError: the question is empty or whitespace only.
    """
    if not question.strip():
        raise CLIError(f"QUESTION must not be empty or whitespace only, got {question!r}")


def check_method(method: str) -> None:
    """Refuse a ``--method`` that names no registered decoder, before any model is loaded.

    Raises:
        CLIError: ``method`` is not in :data:`mfs_core.decoders.DECODERS` (the message lists them).
    """
    from mfs_core.decoders import get_decoder

    try:
        get_decoder(method)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def check_model(settings: MFSSettings) -> None:
    """Refuse a ``--model`` that names a local path (folder or ``.gguf`` file) that does not exist, before loading.

    A value that starts with ``/``, ``./``, ``../`` or ``~``, or has more than one ``/``, is
    a path (a Hugging Face name is ``org/name``). Only the backends that load the model
    here (transformers, vllm) are checked; ``openai`` sends the name to the server.

    Raises:
        CLIError: such a path is not a directory.
    """
    from mfs_core.models import PACKAGED_MODELS

    model = settings.model
    if settings.backend == "openai" or model == DEMO_MODEL or model in PACKAGED_MODELS:
        return
    if model.lower().endswith(".gguf"):
        if not Path(model).expanduser().is_file():
            raise CLIError(f"model {model!r} was not found: no such GGUF file")
        return
    is_path = model.startswith(("/", "./", "../", "~")) or model.count("/") > 1
    if is_path and not Path(model).expanduser().is_dir():
        raise CLIError(
            f"model {model!r} was not found: no such directory (give a directory with a Hugging Face checkpoint, "
            f"a .gguf file, a model name in the local Hugging Face cache, {DEMO_MODEL!r}, or a packaged model: "
            f"{', '.join(sorted(PACKAGED_MODELS))})"
        )


def _log_settings(settings: MFSSettings, sources: dict[str, str]) -> None:
    for name, origin in sorted(sources.items()):
        value = "**********" if name == "api_key" else getattr(settings, name)
        logger.info("setting %s = %r (from %s)", name, value, origin)


@app.command(help=f"Answer QUESTION with MFS and print the answer, the vote and the search trace. {PRECEDENCE}")
def ask(
    question: Annotated[str, typer.Argument(metavar="QUESTION", help="The question to answer.", show_default=False)],
    model: ModelOption = None,
    step_beam_size: StepBeamSizeOption = None,
    num_rollouts: NumRolloutsOption = None,
    num_samples: NumSamplesOption = None,
    prune_lambda: PruneLambdaOption = None,
    stop_epsilon: StopEpsilonOption = None,
    temperature: TemperatureOption = None,
    max_steps: MaxStepsOption = None,
    seed: SeedOption = None,
    backend: BackendOption = None,
    base_url: BaseUrlOption = None,
    tokenizer: TokenizerOption = None,
    api_key: ApiKeyOption = None,
    device: DeviceOption = None,
    dtype: DtypeOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole DecodeResult as JSON.")] = False,
    live: Annotated[
        Optional[bool], typer.Option("--live/--no-live", help="Show each step on stderr as it finishes (default: on, off with --json).")
    ] = None,
    trace_html: Annotated[Optional[Path], typer.Option(help="Write the search tree as a self-contained HTML page.")] = None,
    trace_png: Annotated[Optional[Path], typer.Option(help="Write the deficits against c_prune per step (PNG).")] = None,
    method: Annotated[str, typer.Option(help="The decoding method: mfs, or any other registered one (cot, sc, esc, "
                                        "deepconf, phi, mfs-paper, ...; docs/benchmarks.md).")] = "mfs",
) -> None:
    flags = setting_flags(locals())
    try:
        check_question(question)
        check_method(method)
        settings, sources = resolve_settings(flags)
        check_model(settings)
    except CLIError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    _log_settings(settings, sources)
    from mfs_core.engine import MFSEngine

    quiet_transformers()
    start = time.perf_counter()
    try:
        logger.info("loading %r with the %s backend", settings.model, settings.backend)
        engine = MFSEngine.from_settings(settings)
        logger.info("model ready in %.2f s; decoding", time.perf_counter() - start)
        result = engine.decode([question], method=method,
                               on_event=LiveView() if (live if live is not None else not as_json) else None)[0]
        write_traces(result, question, html_path=trace_html, png_path=trace_png)
    except (ValueError, TypeError, OSError, ImportError, RuntimeError) as exc:  # backend errors subclass RuntimeError
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    wall = time.perf_counter() - start
    logger.info(
        "decoded in %.2f s: %d steps, stop reason %s", result.wall_seconds or 0.0, len(result.steps), result.stop_reason
    )
    if as_json:
        typer.echo(result.to_json(indent=2))
        return
    typer.echo(print_result(question, result, settings))
    typer.echo(f"total wall time including model load: {wall:.2f} s")


def print_result(question: str, result: DecodeResult, settings: MFSSettings) -> str:
    """What ``mfs ask`` prints for a decode: answer, vote, reasoning (rollout lines marked ``↳``), trace."""
    paths = len(result.completions)
    lines = [
        f"question: {question}",
        f"answer: {result.answer}  (vote share {result.vote_share:.0%} of {paths} completed "
        f"path{'s' if paths != 1 else ''})",
        format_vote(result),
        "reasoning (the sample the vote chose):" if any(step.note for step in result.steps)
        else "reasoning (↳ = completed by a foresight rollout):",
        format_reasoning(result, settings),
        search_header(result, settings),
        format_trace(result, settings),
    ]
    return "\n".join(lines)


app.command("bench")(bench)


@app.command(help="Serve MFS behind an OpenAI-compatible HTTP endpoint (/v1/chat/completions, /v1/completions, "
             "/v1/models, /health, /metrics) until SIGTERM or Ctrl-C; streams the search as reasoning. Model and search "
             f"settings as for mfs ask; requests may change the search's settings in extra body fields. {PRECEDENCE} "
             "Needs the serve extra. See docs/serve.md.")
def serve(
    model: ModelOption = None,
    step_beam_size: StepBeamSizeOption = None,
    num_rollouts: NumRolloutsOption = None,
    num_samples: NumSamplesOption = None,
    prune_lambda: PruneLambdaOption = None,
    stop_epsilon: StopEpsilonOption = None,
    temperature: TemperatureOption = None,
    max_steps: MaxStepsOption = None,
    seed: SeedOption = None,
    backend: BackendOption = None,
    base_url: BaseUrlOption = None,
    tokenizer: TokenizerOption = None,
    api_key: ApiKeyOption = None,
    device: DeviceOption = None,
    dtype: DtypeOption = None,
    scheduling: SchedulingOption = None,
    host: serve_cli.HostOption = None,
    port: serve_cli.PortOption = None,
    server_api_key: serve_cli.ServerApiKeyOption = None,
    queue_size: serve_cli.QueueSizeOption = None,
    max_body_bytes: serve_cli.MaxBodyBytesOption = None,
    max_messages: serve_cli.MaxMessagesOption = None,
    served_model_name: serve_cli.ServedModelNameOption = None,
    shutdown_timeout: serve_cli.ShutdownTimeoutOption = None,
    limit_step_beam_size: serve_cli.LimitStepBeamSizeOption = None,
    limit_num_rollouts: serve_cli.LimitNumRolloutsOption = None,
    limit_num_samples: serve_cli.LimitNumSamplesOption = None,
    limit_max_steps: serve_cli.LimitMaxStepsOption = None,
    limit_max_tokens: serve_cli.LimitMaxTokensOption = None,
    work_budget: serve_cli.WorkBudgetOption = None,
    request_timeout: serve_cli.RequestTimeoutOption = None,
    fair_share_tokens: serve_cli.FairShareTokensOption = None,
    on_backend_death: serve_cli.OnBackendDeathOption = None,
    reload_attempts: serve_cli.ReloadAttemptsOption = None,
    reload_backoff: serve_cli.ReloadBackoffOption = None,
) -> None:
    flags = {**setting_flags(locals()), "scheduling": scheduling}
    server_flags = {
        "host": host, "port": port, "api_key": server_api_key, "queue_size": queue_size,
        "max_body_bytes": max_body_bytes, "max_messages": max_messages, "model_name": served_model_name,
        "shutdown_timeout": shutdown_timeout, "limit_step_beam_size": limit_step_beam_size,
        "limit_num_rollouts": limit_num_rollouts, "limit_num_samples": limit_num_samples,
        "limit_max_steps": limit_max_steps,
        "limit_max_tokens": limit_max_tokens, "work_budget": work_budget, "request_timeout": request_timeout,
        "fair_share_tokens": fair_share_tokens, "on_backend_death": on_backend_death,
        "reload_attempts": reload_attempts, "reload_backoff": reload_backoff,
    }
    try:
        settings, sources = resolve_settings(flags)
        check_model(settings)
        config = serve_cli.server_settings(server_flags)
    except (CLIError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    _log_settings(settings, sources)
    try:
        from mfs_core.serve import run
    except ImportError as exc:  # pragma: no cover - the serve extra is missing
        typer.echo(f"error: mfs serve needs the serve extra (pip install 'mfs-decoding[serve]'): {exc}", err=True)
        raise typer.Exit(2) from exc
    quiet_transformers()
    logging.getLogger("mfs_core.serve").setLevel(logging.INFO)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        run(settings, config)
    except (ValueError, TypeError, OSError, ImportError, RuntimeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def main() -> None:  # pragma: no cover - console entry point
    """Entry point of the ``mfs`` console script."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
