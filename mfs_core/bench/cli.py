"""``mfs bench``: every method side by side on one model and one set of questions.

Example (the demo model's held-out set, CPU-sized search)::

    mfs bench --dataset demo --methods cot,sc,phi,mfs,mfs-no-stop,mfs-no-prune --limit 200 \\
        --step-beam-size 4 --num-rollouts 4 --out bench-results/demo

Writes to ``--out``: ``records.jsonl`` (one line per question and method; a rerun resumes
from it), ``config.json``, ``results.json``, ``results.csv``, ``results.md`` and
``accuracy_vs_flops.png``. Heavy imports (the engine, the model, matplotlib, scikit-learn)
happen only when the command runs.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from mfs_core.backends._hf import quiet_transformers
from mfs_core.errors import BackendDeadError

if TYPE_CHECKING:
    from mfs_core.bench.datasets import Dataset
    from mfs_core.settings import MFSSettings

__all__ = [
    "ApiKeyOption", "BaseUrlOption", "DeviceOption", "DtypeOption", "SchedulingOption", "TokenizerOption", "bench",
    "check_base_url", "choose_backend", "default_backend", "import_plugins",
]

logger = logging.getLogger(__name__)

CPU_STEP_BEAM_SIZE = 4
CPU_NUM_ROLLOUTS = 4

# Options of the model and its backend, shared by ``mfs ask`` and ``mfs bench``.
TokenizerOption = Annotated[
    Optional[str],
    typer.Option(help="Local tokenizer folder, .gguf file, packaged model or cached Hugging Face name (default: the "
                 "model's own). --backend openai needs one to render chat templates and count tokens.",
                 show_default="MFS_TOKENIZER, else the model's"),
]
ApiKeyOption = Annotated[
    Optional[str],
    typer.Option(help="Bearer token of --backend openai; never printed. Prefer the MFS_API_KEY variable: a flag "
                 "shows in the shell history and the process list.", show_default="MFS_API_KEY, else none"),
]
DeviceOption = Annotated[
    Optional[str],
    typer.Option(help="Torch device of the transformers backend: auto | cpu | cuda | cuda:N.",
                 show_default="MFS_DEVICE, else 'auto'"),
]
DtypeOption = Annotated[
    Optional[str],
    typer.Option(help="Weight dtype: auto | float32 | float16 | bfloat16 ('auto': float32 on CPU, bfloat16 on "
                 "vLLM's CPU build where the CPU has AVX512-BF16 or AMX, the checkpoint's on a GPU).",
                 show_default="MFS_DTYPE, else 'auto'"),
]
SchedulingOption = Annotated[
    Optional[str],
    typer.Option(help="How concurrent decodes reach the model: auto (continuous on --backend vllm, else lockstep) | lockstep (one generate per round for every live "
                 "decode) | continuous (--backend vllm: each decode's requests go to vLLM's AsyncLLM on their own; "
                 "continuous batching). See docs/serve.md.",
                 show_default="MFS_SCHEDULING, else continuous on --backend vllm, lockstep elsewhere"),
]
BaseUrlOption = Annotated[
    Optional[list[str]],
    typer.Option(help="URL of an OpenAI-compatible server (http://127.0.0.1:8080/v1: vllm serve, llama.cpp's "
                 "server); selects --backend openai when no backend is named. Repeat per replica.",
                 show_default="MFS_BASE_URLS, else none"),
]


def choose_backend(given: dict[str, Any], environment: dict[str, str]) -> tuple[dict[str, Any], str | None]:
    """A server URL without a backend selects the HTTP backend.

    Args:
        given: setting name -> value of the flags that were given (None values removed).
        environment: setting name -> origin of the ``MFS_*`` variables and ``.env`` entries set
            (:func:`mfs_core.settings.setting_sources`).

    Returns:
        ``given`` with ``backend="openai"`` added when ``--base-url`` (or ``MFS_BASE_URLS``)
        names a server and neither ``--backend`` nor ``MFS_BACKEND`` names a backend, and the
        origin of that choice (``"--base-url"``, ``"MFS_BASE_URLS"``); else ``given`` and None.
    """
    if "backend" in given or "backend" in environment:
        return given, None
    if "base_urls" in given:
        return {**given, "backend": "openai"}, "--base-url"
    if "base_urls" in environment:
        return {**given, "backend": "openai"}, environment["base_urls"]
    return given, None


def check_base_url(backend: str, given: dict[str, Any], backend_origin: str) -> None:
    """Refuse a ``--base-url`` that the chosen backend would ignore.

    Args:
        backend: the backend the settings chose.
        given: setting name -> value of the flags that were given.
        backend_origin: where ``backend`` came from (``"--backend"``, ``"MFS_BACKEND"``).

    Raises:
        ValueError: ``--base-url`` given while ``backend`` is not ``"openai"`` (one line).
    """
    if "base_urls" in given and backend != "openai":
        msg = (f"--base-url is the server of --backend openai, but the backend is {backend!r} (from {backend_origin}): "
               f"drop --base-url or use --backend openai")
        raise ValueError(msg)


def default_backend() -> str:
    """The backend of ``mfs bench`` when neither ``--backend`` nor ``MFS_BACKEND`` names one.

    ``"vllm"`` when the vllm package is installed (its CUDA or CPU build), else
    ``"transformers"``. Measured (docs/backends.md, "The backends side by side"): on 50
    held-out demo questions at M = N = 4 on 2 CPU cores, MFS took 211 s through vLLM's CPU
    build against 445 s on the transformers backend, which repays vLLM's ~30 s start within
    one run; ``mfs ask`` (one question, where the start dominates) keeps the transformers
    default. Looks the package up without importing it.
    """
    import importlib.util

    return "vllm" if importlib.util.find_spec("vllm") is not None else "transformers"


def import_plugins(modules: list[str]) -> None:
    """Import each of ``modules`` (``--plugin``), e.g. one that registers decoders with
    :func:`mfs_core.decoders.register_decoder`.

    Raises:
        typer.BadParameter: a module that cannot be imported (one line naming it and why).
    """
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            msg = f"--plugin {name!r} cannot be imported: {exc}"
            raise typer.BadParameter(msg) from exc


def _floats(text: str | None) -> list[float]:
    if not text:
        return []
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        msg = f"--lambda-sweep takes comma-separated numbers, got {text!r}"
        raise typer.BadParameter(msg) from exc


def _sc_k(text: str | None, methods: list[str]) -> int | str | None:
    """``--sc-k``: an int, ``auto``, or unset (auto when cot and mfs run, else M)."""
    if text is None:
        return "auto" if {"cot", "mfs"} <= set(methods) else None
    if text == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError as exc:
        msg = f"--sc-k takes a positive integer or 'auto', got {text!r}"
        raise typer.BadParameter(msg) from exc
    if value < 1:
        msg = f"--sc-k must be >= 1, got {value}"
        raise typer.BadParameter(msg)
    return value


def bench(
    dataset: Annotated[str, typer.Option(help="gsm8k | math500 | gpqa | reclor | logiqa | arc-c | demo | demo-fresh | demo-fresh2, or a JSON file.")],
    methods: Annotated[str, typer.Option(help="Comma-separated registered methods (cot, sc, esc, deepconf, phi, mfs, "
                                       "mfs-paper, and any a --plugin registers); 'label:method:field=value;field=value' "
                                       "runs a method under its own label with settings changed, e.g. "
                                       "'mfs-m8:mfs:step_beam_size=8;num_rollouts=8'.")] = "cot,sc,phi,mfs",
    plugin: Annotated[Optional[list[str]], typer.Option(help="Python module to import first, e.g. one that calls "
                                                        "mfs_core.decoders.register_decoder (repeatable).")] = None,
    limit: Annotated[Optional[int], typer.Option(help="Only N questions (from --offset on).")] = None,
    offset: Annotated[int, typer.Option(help="Skip the first N questions of the set (e.g. ones used for tuning).")] = 0,
    model: Annotated[Optional[str], typer.Option(help="Model name or local path (default: 'mfs-demo').")] = None,
    backend: Annotated[Optional[str], typer.Option(help="transformers | vllm | openai (default: MFS_BACKEND, else openai with --base-url, else vllm when installed, else transformers).")] = None,
    base_url: BaseUrlOption = None,
    tokenizer: TokenizerOption = None,
    api_key: ApiKeyOption = None,
    device: DeviceOption = None,
    dtype: DtypeOption = None,
    data_dir: Annotated[Optional[Path], typer.Option(help="Directory of the six sets (default: $MFS_DATA_DIR or ./data).")] = None,
    kind: Annotated[Optional[str], typer.Option(help="Answer kind of a set given by path (default: from its name).")] = None,
    step_beam_size: Annotated[int, typer.Option(help="M, beams per step (φ and MFS).")] = CPU_STEP_BEAM_SIZE,
    num_rollouts: Annotated[int, typer.Option(help="N, candidates per beam (φ and MFS).")] = CPU_NUM_ROLLOUTS,
    max_steps: Annotated[Optional[int], typer.Option(help="Most deliberation steps (φ and MFS).")] = None,
    prune_lambda: Annotated[Optional[float], typer.Option(help="λ1 of MFS's width pruning.")] = None,
    stop_epsilon: Annotated[Optional[float], typer.Option(help="ε_stop of MFS's convergence test (nats).")] = None,
    temperature: Annotated[Optional[float], typer.Option(help="Sampling temperature of every sampling method.")] = None,
    max_answer_tokens: Annotated[Optional[int], typer.Option(help="Most tokens of a completion or rollout.")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed of every decode.")] = None,
    sc_k: Annotated[Optional[str], typer.Option(help="Self-consistency samples: an integer, or 'auto' = round(MFS tokens / CoT tokens) measured in this run (default when cot and mfs run; else M).")] = None,
    lambda_sweep: Annotated[Optional[str], typer.Option(help="Extra MFS methods at these λ1 values, e.g. '0.4,0.8,1.2'.")] = None,
    concurrency: Annotated[int, typer.Option(help="Questions decoded together (their requests share generate calls).")] = 8,
    scheduling: SchedulingOption = None,
    out: Annotated[Optional[Path], typer.Option(help="Output directory (default: bench-results/DATASET).")] = None,
    plot: Annotated[bool, typer.Option(help="Write accuracy_vs_flops.png.")] = True,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Benchmark decoding methods side by side: accuracy, tokens, FLOPs, time (resumable)."""
    from pydantic import ValidationError

    from mfs_core.bench.datasets import load_dataset
    from mfs_core.bench.drain import drain_on_sigterm
    from mfs_core.bench.requirements import check_bench_dependencies
    from mfs_core.bench.runner import parse_methods, run_bench
    from mfs_core.engine import MFSEngine
    from mfs_core.settings import MFSSettings, setting_sources

    import_plugins(plugin or [])
    overrides = {
        "model": model, "backend": backend, "step_beam_size": step_beam_size, "num_rollouts": num_rollouts,
        "max_steps": max_steps, "prune_lambda": prune_lambda, "stop_epsilon": stop_epsilon,
        "temperature": temperature, "max_answer_tokens": max_answer_tokens, "seed": seed,
        "base_urls": base_url or None, "tokenizer": tokenizer, "api_key": api_key, "device": device, "dtype": dtype,
        "scheduling": scheduling,
    }
    given = {k: v for k, v in overrides.items() if v is not None}
    environment = setting_sources()
    given, _ = choose_backend(given, environment)
    if "backend" not in given and "backend" not in environment:
        given["backend"] = default_backend()
    try:
        settings = MFSSettings(**given)  # scheduling "auto": continuous batching on vLLM, lockstep elsewhere
        check_base_url(settings.backend, given, "--backend" if backend else environment.get("backend", "default"))
        chosen = parse_methods(methods, _floats(lambda_sweep))
        k = _sc_k(sc_k, [m.label for m in chosen])
        data = load_dataset(dataset, data_dir=data_dir, limit=limit, kind=kind, offset=offset)
        check_bench_dependencies([m.label for m in chosen], plot=plot, progress=progress)  # before an hour of decoding
    except (ValidationError, ValueError, FileNotFoundError, ImportError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    out_dir = out or Path("bench-results") / data.name
    quiet_transformers()
    first = data.examples[0].index if data.examples else offset
    typer.echo(f"{data.name}: {len(data.examples)} of {data.total} questions (from index {first}; {data.kind}) "
               f"from {data.path}")
    try:
        engine = MFSEngine.from_settings(settings)
        typer.echo(f"model {settings.model} ({engine.backend.num_parameters:,} parameters, {settings.backend} backend), "
                   f"M = {settings.step_beam_size}, N = {settings.num_rollouts}, methods: "
                   f"{', '.join(m.label for m in chosen)}")
        bar = None
        if progress:
            from tqdm.auto import tqdm

            def bar(**kwargs: object) -> object:
                return tqdm(unit="q", dynamic_ncols=True, **kwargs)

        with drain_on_sigterm() as stop:  # kill PID: the questions in flight finish, then it reports (resumable)
            records = run_bench(engine, data, chosen, out_dir, settings=settings, sc_k=k, concurrency=concurrency,
                                progress=bar, stop=stop)
        if stop.is_set():
            typer.echo(f"stopped by SIGTERM with {len(records)} of {len(data.examples) * len(chosen)} records; "
                       "the same command resumes", err=True)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    except BackendDeadError as exc:  # the questions it took down are not recorded: the same command resumes
        typer.echo(f"error: {exc}; the records so far are kept in {out_dir}, the same command resumes", err=True)
        raise typer.Exit(1) from exc
    _report(records, [m.label for m in chosen], data, settings, engine.backend.num_parameters,
            sc_k=k, offset=offset, out_dir=out_dir, plot=plot)


def _report(records: list[dict[str, Any]], labels: list[str], data: Dataset, settings: MFSSettings, num_parameters: int, *,
            sc_k: int | str | None, offset: int, out_dir: Path, plot: bool) -> None:
    """Write and print what ``mfs bench`` reports of a finished run: the table (``results.json``,
    ``.csv``, ``.md``), the paired comparisons with MFS, the engine's overhead, the plots and the
    accuracy-against-tokens curve."""
    from mfs_core.bench.curve import write_curve
    from mfs_core.bench.plot import plot_accuracy_vs_flops
    from mfs_core.bench.report import (
        format_paired, format_table, paired_comparisons, summarize, token_ratio, write_csv, write_json,
    )

    rows = summarize(records, labels)
    table = format_table(rows)
    ratio = token_ratio(rows)
    meta = {"dataset": data.name, "kind": data.kind, "questions": len(data.examples), "offset": offset,
            "model": settings.model,
            "num_parameters": num_parameters, "step_beam_size": settings.step_beam_size,
            "num_rollouts": settings.num_rollouts, "sc_k": sc_k, "mfs_over_cot_tokens": ratio,
            "settings": settings.model_dump(mode="json")}
    paired = paired_comparisons(records, "mfs")
    meta["paired_with_mfs"] = [asdict(c) for c in paired]
    write_json(rows, out_dir / "results.json", meta)
    write_csv(rows, out_dir / "results.csv")
    (out_dir / "results.md").write_text(table + "\n", encoding="utf-8")
    typer.echo("")
    typer.echo(table)
    if ratio is not None:
        typer.echo(f"MFS output tokens / CoT output tokens = {ratio:.2f}"
                   + (" (sc's k = round of this ratio)" if sc_k == "auto" else ""))
    if paired:
        typer.echo(format_paired(paired))
    total_wall = sum(r.wall_seconds for r in rows)
    if total_wall > 0:
        overhead = sum(r.engine_overhead * r.wall_seconds for r in rows) / total_wall
        typer.echo(f"engine overhead: {100 * overhead:.1f}% of {total_wall:.1f} s wall time outside backend.generate")
    if plot and rows:
        png = plot_accuracy_vs_flops(rows, out_dir / "accuracy_vs_flops.png",
                                     title=f"{data.name}, {len(data.examples)} questions, {settings.model}")
        typer.echo(f"plot: {png}")
    curve = write_curve(records, data.kind, labels, out_dir, plot=plot,
                        title=f"{data.name}, {len(data.examples)} questions, {settings.model}")
    if curve is not None:
        typer.echo("\naccuracy against output tokens (self-consistency at every k <= sc's k, from its samples):")
        typer.echo(curve)
        typer.echo(f"curve: {out_dir}/curve.md" + (f", {out_dir}/accuracy_vs_tokens.png" if plot else ""))
    typer.echo(f"results: {out_dir}/results.{{json,csv,md}}; per-question records: {out_dir}/records.jsonl")
