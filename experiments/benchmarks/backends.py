"""The three backends side by side on one run: transformers, vLLM in-process, HTTP -> ``vllm serve``.

One set of held-out questions of the demo model, decoded by greedy CoT and by MFS (M = N = 4,
seed 0) on each backend, all at float32. Per (backend, method): engine start (s), decode wall
time (s), questions/s, output tokens/s, accuracy, how many answers equal the transformers
backend's, and for vLLM the prefix-cache hit rate of the decode (vLLM's own counters
``vllm:prefix_cache_hits`` / ``vllm:prefix_cache_queries``: ``LLM.get_metrics()`` in-process,
``GET /metrics`` of the server). Two more vLLM rows measure what the CPU workaround (chunked
prefill off) costs: MFS with the seeds taken off its requests (unseeded requests cannot hit
``CPU Generator does not use offset``), once with chunked prefill off and once on (vLLM's
default); their samples differ from run to run, so compare their tokens/s, not answers.

Everything runs in this one process and its children, one backend at a time (each engine is
closed before the next starts), so the timings are side by side on the same machine.

Usage::

    python experiments/benchmarks/backends.py --questions 50 --out bench-results/backends.json
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from mfs_core import MFSEngine, MFSSettings
from mfs_core.backends._hf import quiet_transformers
from mfs_core.backends.openai import OpenAIBackend
from mfs_core.backends.transformers import TransformersBackend
from mfs_core.backends.vllm import VLLMBackend, engine_kwargs, quiet_vllm
from mfs_core.vllm_server import VLLMServer
from mfs_core.bench.datasets import load_dataset
from mfs_core.bench.report import wilson_interval
from mfs_core.bench.runner import score_result
from mfs_core.types import Continuation, GenerationRequest

PREFIX_QUERIES = "vllm:prefix_cache_queries"
PREFIX_HITS = "vllm:prefix_cache_hits"


@dataclass
class Row:
    """One (backend, method) cell of the table."""

    backend: str
    method: str
    start_seconds: float
    wall_seconds: float
    questions: int
    output_tokens: int
    correct: int
    same_as_transformers: int | None
    prefix_hit_rate: float | None
    answers: list[str | None]

    @property
    def questions_per_second(self) -> float:
        return self.questions / self.wall_seconds

    @property
    def tokens_per_second(self) -> float:
        return self.output_tokens / self.wall_seconds


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def llm_counters(backend: VLLMBackend) -> dict[str, float]:
    """vLLM's prefix-cache counters of an in-process engine (needs ``disable_log_stats=False``)."""
    return {m.name: float(m.value) for m in backend.llm.get_metrics() if m.name in (PREFIX_QUERIES, PREFIX_HITS)}


def server_counters(server: VLLMServer) -> dict[str, float]:
    """The same counters from the server's Prometheus ``/metrics``."""
    with urllib.request.urlopen(server.url.removesuffix("/v1") + "/metrics", timeout=10) as answer:  # noqa: S310
        text = answer.read().decode()
    counters = {}
    for name in (PREFIX_QUERIES, PREFIX_HITS):
        values = re.findall(rf"^{re.escape(name)}_total(?:\{{[^}}]*\}})? (\S+)$", text, re.MULTILINE)
        counters[name] = sum(float(v) for v in values)
    return counters


def hit_rate(before: dict[str, float], after: dict[str, float]) -> float | None:
    queries = after.get(PREFIX_QUERIES, 0.0) - before.get(PREFIX_QUERIES, 0.0)
    return (after.get(PREFIX_HITS, 0.0) - before.get(PREFIX_HITS, 0.0)) / queries if queries else None


class Unseeded:
    """A backend that sends every request without its seed (the rest of the backend unchanged)."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def generate(self, requests: list[GenerationRequest]) -> list[list[Continuation]]:
        return self.backend.generate([replace(request, seed=None) for request in requests])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)


def run_methods(name: str, engine: MFSEngine, start_seconds: float, questions: list[str], targets: list[Any],
                counters: Callable[[], dict[str, float]] | None, console: Console,
                methods: tuple[str, ...] = ("cot", "mfs")) -> list[Row]:
    rows = []
    for method in methods:
        before = counters() if counters else {}
        began = time.perf_counter()
        results = engine.decode(questions, method=method)
        wall = time.perf_counter() - began
        after = counters() if counters else {}
        verdicts = [score_result("demo", r, t, engine.settings, method) for r, t in zip(results, targets)]
        answers = [prediction for prediction, _ in verdicts]
        correct = sum(right for _, right in verdicts)
        rows.append(Row(name, method, start_seconds, wall, len(questions), sum(r.output_tokens for r in results),
                        correct, None, hit_rate(before, after) if counters else None, answers))
        console.print(f"{name} {method}: {wall:.1f} s, {correct}/{len(questions)} right", style="dim")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=50, help="held-out questions, from --offset on")
    parser.add_argument("--offset", type=int, default=0, help="first held-out question")
    parser.add_argument("--kv-cache-gib", type=float, default=2.0, help="vLLM KV cache (GiB)")
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    parser.add_argument("--skip", default="", help="comma-separated backends to leave out (transformers,vllm,chunked,http)")
    args = parser.parse_args(argv)
    quiet_vllm()
    quiet_transformers()
    console = Console(stderr=True)
    data = load_dataset("demo", limit=args.questions, offset=args.offset)
    questions = [e.question for e in data.examples]
    targets = [e.target for e in data.examples]
    skip = set(filter(None, args.skip.split(",")))
    search = {"step_beam_size": 4, "num_rollouts": 4, "seed": 0, "dtype": "float32"}
    vllm_settings = MFSSettings(backend="vllm", kv_cache_gib=args.kv_cache_gib,
                                vllm_kwargs={"disable_log_stats": False}, **search)
    rows: list[Row] = []

    if "transformers" not in skip:
        began = time.perf_counter()
        backend = TransformersBackend.from_settings(MFSSettings(device="cpu", **search))
        rows += run_methods("transformers", MFSEngine(backend, MFSSettings(**search)), time.perf_counter() - began,
                            questions, targets, None, console)
    if "vllm" not in skip:
        began = time.perf_counter()
        with VLLMBackend.from_settings(vllm_settings) as backend:
            started = time.perf_counter() - began
            rows += run_methods("vllm", MFSEngine(backend, vllm_settings), started, questions, targets,
                                lambda: llm_counters(backend), console)
    if "chunked" not in skip:
        # What the CPU workaround costs: MFS with its requests' seeds removed (unseeded requests
        # never meet the generator rewind, so vLLM's default, chunked prefill on, survives), on an
        # engine with chunked prefill off (ours) and on (vLLM's default, 4,096-token budget).
        # engine_kwargs refuses chunked prefill on CPU: that engine is built by hand here.
        import vllm

        for label, chunked in (("vllm unseeded, chunked prefill off", False), ("vllm unseeded, chunked prefill on", True)):
            kwargs = engine_kwargs(vllm_settings, cpu=True)
            kwargs["enable_chunked_prefill"] = chunked
            began = time.perf_counter()
            with VLLMBackend(vllm.LLM(**kwargs), "mfs-demo") as backend:
                started = time.perf_counter() - began
                rows += run_methods(label, MFSEngine(Unseeded(backend), vllm_settings), started, questions, targets,
                                    lambda: llm_counters(backend), console, methods=("mfs",))
    if "http" not in skip:
        began = time.perf_counter()
        with VLLMServer(vllm_settings, port=free_port(), log_path=Path("/tmp/mfs-bench-vllm-serve.log")) as server:
            started = time.perf_counter() - began
            http = MFSSettings(backend="openai", base_urls=[server.url], **search)
            with OpenAIBackend.from_settings(http) as backend:
                rows += run_methods("http -> vllm serve", MFSEngine(backend, http), started, questions, targets,
                                    lambda: server_counters(server), console)

    reference = {row.method: row.answers for row in rows if row.backend == "transformers"}
    for row in rows:
        if row.method in reference:
            row.same_as_transformers = sum(a == b for a, b in zip(row.answers, reference[row.method]))

    table = Table(title=f"backends, {len(questions)} held-out demo questions from {args.offset}, M = N = 4, float32")
    for column in ("backend", "method", "start s", "wall s", "q/s", "out tok/s", "accuracy [95% CI]",
                   "= transformers", "prefix hits"):
        table.add_column(column)
    for row in rows:
        low, high = wilson_interval(row.correct, row.questions)
        table.add_row(
            row.backend, row.method, f"{row.start_seconds:.1f}", f"{row.wall_seconds:.1f}",
            f"{row.questions_per_second:.3f}", f"{row.tokens_per_second:.0f}",
            f"{row.correct / row.questions:.0%} [{low:.0%}, {high:.0%}]",
            "—" if row.same_as_transformers is None else f"{row.same_as_transformers}/{row.questions}",
            "—" if row.prefix_hit_rate is None else f"{row.prefix_hit_rate:.1%}",
        )
    Console(width=220).print(table)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"argv": sys.argv[1:], "rows": [
            {**asdict(row), "questions_per_second": row.questions_per_second, "tokens_per_second": row.tokens_per_second}
            for row in rows]}, indent=1))


if __name__ == "__main__":
    main()
