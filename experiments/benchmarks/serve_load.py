"""Load on ``mfs serve``: the lockstep engine against continuous batching, Poisson arrivals, on loopback.

For each design (``--designs``: ``lockstep``, ``continuous``; the engine's
``scheduling`` setting) the script starts ``mfs serve --backend vllm --scheduling DESIGN`` on
127.0.0.1 (a free port; bounded wait for ``/health``; stopped by its PID at the end), sends one
warm-up request that is not counted, then, for each rate of ``--rates``, ``--requests``
streamed ``/v1/chat/completions`` requests whose start times are a Poisson process
(exponential gaps, seeded by ``--seed`` and the rate's position, so both designs get the same
arrival times, questions and seeds). Request i asks held-out demo question i with ``seed`` i.
Each rate waits for its last answer (each request gives up after ``--request-timeout`` s and
is counted as failed) before the next rate starts.

Per design and rate: completed questions per second and output tokens per second (over the
wall time from the first arrival to the last answer; output tokens are
``usage.completion_tokens``, every token the search sampled), p50/p95/p99 latency (request sent
to ``[DONE]``, s), p50/p95 time to the first reasoning chunk (s), and the requests refused
with 429 (a full queue) or failed. Printed as one Markdown table; ``--out`` writes the rows
as JSON.

Usage (from a checkout; the full run of docs/serve.md)::

    nice -n 10 python -m benchmarks.serve_load --requests 24 --out serve_load.json

With ``--rates auto`` (the default) the rates are 0.5, 1 and 1.5 times the capacity of the
first design (lockstep): its completed questions per second when ``--requests`` requests
arrive at once, measured after the warm-up on the same server; both designs then get those
rates. ``--rates 0.1,0.2,0.4`` fixes them instead. A smoke run (about 2.5 minutes on 2
loaded cores): ``--rates 0.5 --requests 2 --serve-args "--step-beam-size 2 --num-rollouts 2
--max-steps 2"``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

QUESTIONS = Path(__file__).resolve().parents[2] / "mfs_core" / "demo" / "heldout.json"
DESIGNS = ("lockstep", "continuous")
SERVER_ENV = {"MFS_SERVER_QUEUE_SIZE": "256", "MFS_KV_CACHE_GIB": "2"}
"""The servers' environment: a queue that never refuses these loads, 2 GiB of vLLM KV cache."""


@dataclass
class Outcome:
    """One request: HTTP status (0: no answer in time), seconds to the first reasoning chunk and to ``[DONE]``, tokens."""

    status: int
    first_reasoning: float | None = None
    latency: float | None = None
    tokens: int = 0
    answer: str | None = None


async def _one(http, url: str, question: str, seed: int, key: str | None) -> Outcome:  # noqa: ANN001 - httpx client
    body = {"messages": [{"role": "user", "content": question}], "stream": True, "seed": seed}
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    sent = time.perf_counter()
    try:
        async with http.stream("POST", url + "/v1/chat/completions", json=body, headers=headers) as response:
            if response.status_code != 200:
                await response.aread()
                return Outcome(response.status_code)
            outcome = Outcome(200)
            answer = []
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    outcome.latency = time.perf_counter() - sent
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    return Outcome(500)
                for choice in chunk["choices"]:
                    delta = choice.get("delta", {})
                    if outcome.first_reasoning is None and delta.get("reasoning"):
                        outcome.first_reasoning = time.perf_counter() - sent
                    answer.append(delta.get("content") or "")
                if chunk.get("usage"):
                    outcome.tokens = chunk["usage"]["completion_tokens"]
            outcome.answer = "".join(answer)
            return outcome
    except Exception:  # noqa: BLE001 - a timeout or a dropped connection counts as a failed request
        return Outcome(0)


def arrivals(rate: float, count: int, seed: int) -> np.ndarray:
    """``count`` Poisson arrival times (s from the start) at ``rate`` per second, seeded."""
    return np.cumsum(np.random.default_rng(seed).exponential(1.0 / rate, size=count))


async def run_rate(url: str, times: np.ndarray, questions: list[str], key: str | None,
                   timeout: float) -> tuple[list[Outcome], float]:
    """Send request i at ``times[i]`` s; the outcomes and the wall seconds from the first arrival to the last answer."""
    import httpx

    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout), limits=limits) as http:
        start = time.perf_counter()
        tasks = []
        for i, at in enumerate(times):
            await asyncio.sleep(max(0.0, start + at - time.perf_counter()))
            request = _one(http, url, questions[i % len(questions)], i, key)
            tasks.append(asyncio.create_task(asyncio.wait_for(request, timeout)))
        outcomes = []
        for task in tasks:
            try:
                outcomes.append(await task)
            except asyncio.TimeoutError:
                outcomes.append(Outcome(0))
    return outcomes, time.perf_counter() - start - float(times[0])


def summarise(design: str, rate: float, outcomes: list[Outcome], wall: float) -> dict:
    """The table's row of one design at one rate (seconds, per-second rates)."""
    done = [o for o in outcomes if o.status == 200 and o.latency is not None]
    latencies = np.array([o.latency for o in done] or [np.nan])
    firsts = np.array([o.first_reasoning for o in done if o.first_reasoning is not None] or [np.nan])
    return {
        "design": design, "rate": rate, "sent": len(outcomes), "completed": len(done),
        "rejected_429": sum(o.status == 429 for o in outcomes),
        "failed": sum(o.status not in (200, 429) or (o.status == 200 and o.latency is None) for o in outcomes),
        "completed_per_s": len(done) / wall, "output_tokens_per_s": sum(o.tokens for o in done) / wall,
        "p50_s": float(np.percentile(latencies, 50)), "p95_s": float(np.percentile(latencies, 95)),
        "p99_s": float(np.percentile(latencies, 99)), "ttfr_p50_s": float(np.percentile(firsts, 50)),
        "ttfr_p95_s": float(np.percentile(firsts, 95)), "wall_s": wall,
        "answers": [o.answer for o in outcomes],
    }


def table(rows: list[dict]) -> str:
    """The Markdown table of ``rows``."""
    header = ("design", "rate/s", "sent", "done", "429", "failed", "done/s", "out tok/s", "p50 s", "p95 s", "p99 s",
              "TTFR p50 s", "TTFR p95 s")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        lines.append(
            f"| {r['design']} | {r['rate']:g} | {r['sent']} | {r['completed']} | {r['rejected_429']} | {r['failed']} | "
            f"{r['completed_per_s']:.3f} | {r['output_tokens_per_s']:.1f} | {r['p50_s']:.1f} | {r['p95_s']:.1f} | "
            f"{r['p99_s']:.1f} | {r['ttfr_p50_s']:.2f} | {r['ttfr_p95_s']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run every design at every rate and print the table (and ``--out`` JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", default=",".join(DESIGNS), help="scheduling designs to measure, in order")
    parser.add_argument("--rates", default="auto",
                        help="arrival rates, requests per second, or 'auto': --rate-fractions of the first design's "
                        "measured capacity (completed/s of --requests requests sent at once, after the warm-up)")
    parser.add_argument("--rate-fractions", default="0.5,1,1.5", help="with --rates auto: fractions of the capacity")
    parser.add_argument("--requests", type=int, default=24, help="requests per rate (each design gets the same)")
    parser.add_argument("--request-timeout", type=float, default=300.0, help="seconds a request may take before it counts as failed")
    parser.add_argument("--start-timeout", type=float, default=300.0, help="seconds a server may take to answer /health")
    parser.add_argument("--serve-args", default="--step-beam-size 4 --num-rollouts 4",
                        help="further flags of each mfs serve (M = N = 4 by default)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the arrival times")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    designs = [d.strip() for d in args.designs.split(",") if d.strip()]
    unknown = sorted(set(designs) - set(DESIGNS))
    if unknown:
        parser.error(f"--designs {unknown} unknown; allowed: {', '.join(DESIGNS)}")
    auto = args.rates.strip() == "auto"
    rates = [float(r) for r in (args.rate_fractions if auto else args.rates).split(",")]
    if args.requests < 1 or any(r <= 0 for r in rates):
        parser.error(f"--requests must be >= 1 and rates (or fractions) > 0, got {args.requests} and {rates}")
    fractions, rates = (rates, None) if auto else (None, rates)
    questions = [item["input"] for item in json.loads(QUESTIONS.read_text())]

    from tests.serve_process import serve_process

    rows = []
    for design in designs:
        serve_args = ["--backend", "vllm", "--scheduling", design, *args.serve_args.split()]
        started = time.perf_counter()
        with serve_process(serve_args, SERVER_ENV, start_timeout=args.start_timeout) as server:
            warm, _ = asyncio.run(run_rate(server.url, np.array([0.0]), questions[-1:], None, args.request_timeout))
            print(f"# {design}: server up in {time.perf_counter() - started:.0f} s, warm-up status {warm[0].status}",
                  flush=True)
            if rates is None:  # capacity of the first design: --requests at once, closed loop
                burst, wall = asyncio.run(run_rate(server.url, np.zeros(args.requests), questions[::-1], None,
                                                   args.request_timeout))
                capacity = sum(o.status == 200 and o.latency is not None for o in burst) / wall
                if capacity <= 0:
                    raise SystemExit(f"no request of the capacity burst completed ({[o.status for o in burst]})")
                rates = [round(f * capacity, 4) for f in fractions]
                print(f"# capacity of {design}: {capacity:.3f} completed/s ({args.requests} at once, {wall:.1f} s); "
                      f"rates {rates}", flush=True)
            for position, rate in enumerate(rates):
                times = arrivals(rate, args.requests, args.seed + position)
                outcomes, wall = asyncio.run(run_rate(server.url, times, questions, None, args.request_timeout))
                rows.append(summarise(design, rate, outcomes, wall))
                print(json.dumps({k: v for k, v in rows[-1].items() if k != "answers"}), flush=True)
    if len(designs) == 2 and rates:
        for rate in rates:
            pair = [r for r in rows if r["rate"] == rate]
            same = sum(a == b and a is not None for a, b in zip(pair[0]["answers"], pair[1]["answers"]))
            print(f"# rate {rate:g}/s: {same} of {len(pair[0]['answers'])} answers equal across the designs", flush=True)
    print(table(rows))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
