"""The ``mfs`` command: ``mfs ask QUESTION`` answers with MFS and shows how the search went.

CPU-sized defaults of ``mfs ask`` (the settings' own defaults are the paper's M = N = 8):
``--step-beam-size 4 --num-rollouts 4``. With M = N = 4 a step samples 16 candidates
instead of 64, which keeps a question on the demo model at about a second on 2 CPU cores
and a 1B model on a CPU within minutes; pass ``--step-beam-size 8 --num-rollouts 8`` for
the paper's setting. Every other default comes from :class:`MFSSettings` (so ``MFS_*``
environment variables apply).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from mfs_core.bench.cli import CPU_NUM_ROLLOUTS, CPU_STEP_BEAM_SIZE, bench
from mfs_core.backends._hf import quiet_transformers
from mfs_core.live import LiveView, write_traces
from mfs_core.settings import MFSSettings
from mfs_core.types import DecodeResult

__all__ = ["app", "format_trace"]

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Martingale Foresight Sampling.")



@app.callback()
def _main(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log engine activity.")] = False) -> None:
    """Martingale Foresight Sampling (EACL 2026) on a local model."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


def format_trace(result: DecodeResult, stop_epsilon: float) -> str:
    """A readable trace: per step the candidates, pruning and ``max V`` against ``ε_stop``.

    Args:
        result: a decode result.
        stop_epsilon: ``ε_stop`` (nats) to print beside each step's ``max V``.

    Returns:
        Multi-line text, one block per step, then the totals.
    """
    lines = []
    for step in result.steps:
        finished = sum(c.finished for c in step.candidates)
        scored = [c for c in step.candidates if c.step_value is not None]
        head = (
            f"step {step.step}: {len(step.candidates)} candidates sampled, {finished} finished, "
            f"{step.num_pruned} pruned, {len(scored)} rolled out"
        )
        if step.max_step_value is not None:
            verdict = "<=" if step.max_step_value <= stop_epsilon else ">"
            head += f"; max V = {step.max_step_value:+.4f} {verdict} ε_stop = {stop_epsilon:g}"
        if step.prune_threshold is not None:
            head += f"; μ = {step.mean_score:.3f}, σ = {step.std_score:.3f}, threshold = {step.prune_threshold:.3f}"
        lines.append(head)
        for cand in sorted(step.candidates, key=lambda c: (not c.selected, -(c.step_value or -1e9))):
            if not (cand.selected or cand.step_value is not None):
                continue
            mark = "*" if cand.selected else " "
            value = f"V = {cand.step_value:+.4f}" if cand.step_value is not None else "finished"
            lines.append(f"   {mark} {cand.text!r:<40.40} logp/tok = {cand.step_logprob:.3f}  {value}")
    lines.append(f"stop reason: {result.stop_reason}")
    lines.append(
        f"tokens: {result.prompt_tokens} prompt, {result.output_tokens} output; "
        f"FLOPs ≈ {result.flops:.3e} (6·n·P); wall time {result.wall_seconds or 0:.2f} s"
    )
    return "\n".join(lines)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer.")],
    model: Annotated[Optional[str], typer.Option(help="Model name or local path (default: the settings', 'mfs-demo').")] = None,
    step_beam_size: Annotated[int, typer.Option(help="M, beams kept per step.")] = CPU_STEP_BEAM_SIZE,
    num_rollouts: Annotated[int, typer.Option(help="N, candidates sampled per beam.")] = CPU_NUM_ROLLOUTS,
    prune_lambda: Annotated[Optional[float], typer.Option(help="λ1 of the width-pruning threshold.")] = None,
    stop_epsilon: Annotated[Optional[float], typer.Option(help="ε_stop of the convergence test (nats).")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed of the decode.")] = None,
    backend: Annotated[Optional[str], typer.Option(help="transformers | vllm | openai.")] = None,
    base_url: Annotated[
        Optional[list[str]], typer.Option(help="Server URL of --backend openai (http://host:8000/v1); repeat per replica.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole DecodeResult as JSON.")] = False,
    live: Annotated[
        Optional[bool], typer.Option("--live/--no-live", help="Show each step on stderr as it finishes (default: on, off with --json).")
    ] = None,
    trace_html: Annotated[Optional[Path], typer.Option(help="Write the search tree as a self-contained HTML page.")] = None,
    trace_png: Annotated[Optional[Path], typer.Option(help="Write the deficits against c_prune per step (PNG).")] = None,
) -> None:
    """Answer QUESTION with MFS and print the answer, its vote share and the search trace."""
    overrides = {
        "model": model, "prune_lambda": prune_lambda, "stop_epsilon": stop_epsilon, "seed": seed, "backend": backend,
        "step_beam_size": step_beam_size, "num_rollouts": num_rollouts, "base_urls": base_url or None,
    }
    from pydantic import ValidationError

    from mfs_core.engine import MFSEngine

    try:
        settings = MFSSettings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        typer.echo(f"error: invalid setting: {exc}", err=True)
        raise typer.Exit(2) from exc
    quiet_transformers()
    start = time.perf_counter()
    try:
        engine = MFSEngine.from_settings(settings)
        result = engine.decode([question], on_event=LiveView() if (live if live is not None else not as_json) else None)[0]
        write_traces(result, question, html_path=trace_html, png_path=trace_png)
    except (ValueError, TypeError, OSError, ImportError, RuntimeError) as exc:  # backend errors subclass RuntimeError
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    wall = time.perf_counter() - start
    if as_json:
        typer.echo(result.to_json(indent=2))
        return
    typer.echo(f"question: {question}")
    typer.echo(f"answer: {result.answer}  (vote share {result.vote_share:.0%} of {len(result.completions)} paths)")
    typer.echo("reasoning:")
    for line in result.text.splitlines():
        typer.echo(f"   {line}")
    typer.echo(f"search (M = {settings.step_beam_size}, N = {settings.num_rollouts}, λ1 = {settings.prune_lambda}):")
    typer.echo(format_trace(result, settings.stop_epsilon))
    typer.echo(f"total wall time including model load: {wall:.2f} s")


app.command("bench")(bench)


def main() -> None:  # pragma: no cover - console entry point
    """Entry point of the ``mfs`` console script."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
