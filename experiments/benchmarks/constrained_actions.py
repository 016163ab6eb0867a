"""Grammar-constrained actions on one backend: validity, tokens and time, constrained against free.

On the bundled demo model (float32), ``--questions`` forced tool calls (``tool_choice="required"``)
and as many structured outputs (json_schema ``{"value": integer}``), each decoded once with
``constrain_actions`` and once without (:func:`experiments.benchmarks.constrained.run_actions`), MFS
with small search settings (M = N = 2, seed 0). Prints one row per (kind, constrained):
valid / total, output tokens of the whole decode, and its wall time in seconds.

Backends: ``transformers`` (CPU), ``vllm`` (in-process ``vllm.LLM``; the CPU build needs
``VLLM_CPU_KVCACHE_SPACE``), ``openai`` (a ``vllm serve`` replica started on 127.0.0.1 for
the run and stopped by PID after it).

Usage::

    python experiments/benchmarks/constrained_actions.py --backend vllm --questions 50
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from mfs_core import MFSEngine, MFSSettings
from experiments.benchmarks.constrained import FORCED_CALL, STRUCTURED_OUTPUT, ActionRun, run_actions

SEARCH = {"step_beam_size": 2, "num_rollouts": 2, "seed": 0}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _engine(backend: str, stack: ExitStack) -> tuple[MFSEngine, float]:
    """The engine of ``backend`` on the demo model, and its start time (seconds)."""
    start = time.perf_counter()
    if backend == "transformers":
        from mfs_core.backends.transformers import TransformersBackend

        model = TransformersBackend.from_settings(MFSSettings(device="cpu", dtype="float32"))
    elif backend == "vllm":
        from mfs_core.backends.vllm import VLLMBackend, quiet_vllm

        quiet_vllm()
        model = stack.enter_context(VLLMBackend.from_settings(MFSSettings(backend="vllm", dtype="float32",
                                                                          kv_cache_gib=1.0)))
    else:
        from mfs_core.backends.openai import OpenAIBackend
        from mfs_core.vllm_server import VLLMServer

        log = Path(tempfile.mkdtemp(prefix="mfs-serve-")) / "server.log"
        server = stack.enter_context(VLLMServer(MFSSettings(backend="vllm", dtype="float32", kv_cache_gib=1.0),
                                                port=_free_port(), log_path=log, startup_timeout=400.0))
        model = stack.enter_context(OpenAIBackend.from_settings(MFSSettings(backend="openai",
                                                                            base_urls=[server.url])))
    return MFSEngine(model, MFSSettings(**SEARCH)), time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["transformers", "vllm", "openai"], default="transformers")
    parser.add_argument("--questions", type=int, default=50, help="questions per kind (default 50)")
    parser.add_argument("--out", type=Path, default=None, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    settings = MFSSettings(**SEARCH)
    rows: list[ActionRun] = []
    with ExitStack() as stack:
        engine, started = _engine(args.backend, stack)
        for kind in (FORCED_CALL, STRUCTURED_OUTPUT):
            for constrained in (True, False):
                rows.append(run_actions(engine, settings, kind, constrained=constrained, count=args.questions))
    table = Table(title=f"grammar-constrained actions, {args.backend} backend (engine start {started:.1f} s)")
    for column in ("backend", "kind", "constrained", "valid/total", "output tokens", "seconds"):
        table.add_column(column, justify="right" if column in ("output tokens", "seconds") else "left")
    for row in rows:
        table.add_row(args.backend, row.kind, "yes" if row.constrained else "no", f"{row.valid}/{row.total}",
                      str(row.output_tokens), f"{row.seconds:.1f}")
    Console(width=120).print(table)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"backend": args.backend, "engine_start_seconds": started,
                                        "rows": [asdict(row) for row in rows]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
