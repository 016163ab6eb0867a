"""Time to the first streamed chunk, before (answer-only streaming) and after (the search
streamed as reasoning), for LangChain ``ChatMFS.stream`` and LlamaIndex ``MFSLLM.stream_chat``
on the bundled demo model, measured side by side in one run.

"Before" is the previous streaming path, still in the code: wait for the whole decode
(``ChatMFS._decode`` / ``MFSLLM._submit`` + ``future.result()``), then split the answer into
chunks. "After" is ``stream()`` / ``stream_chat()`` as they are now. Per call the script
records, from the call's start (seconds): the first chunk, the end of the first backend
round (the first ``backend.generate`` call: the M·N candidate steps), the end of the first
search step (its second round, the foresight rollouts; the first ``StepEvent``), the first
answer chunk and the last chunk. Calls alternate between the two paths, question by
question, on one shared engine; the table gives medians over the questions.

Usage::

    OMP_NUM_THREADS=1 python experiments/benchmarks/first_chunk.py --questions 5 --step-beam-size 4 --num-rollouts 4
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from rich.console import Console
from rich.table import Table

from langchain_mfs import ChatMFS
from langchain_mfs.chat_models import _answer_chunks, to_chat_dicts
from llamaindex_mfs._responses import chat_chunks
from llamaindex_mfs import MFSLLM
from mfs_core import MFSEngine, MFSSettings
from mfs_core.backends._hf import quiet_transformers
from mfs_core.call import ChatInput


@dataclass
class Timing:
    """Seconds from the call's start to each point; ``None`` where it did not happen."""

    first_chunk: float = 0.0
    first_answer_chunk: float = 0.0
    last_chunk: float = 0.0
    first_round: float | None = None
    first_step: float | None = None
    chunks: int = 0


@dataclass
class RoundClock:
    """Wraps ``backend.generate`` and records when each call returns (perf_counter)."""

    ends: list[float] = field(default_factory=list)

    def install(self, backend: Any) -> None:
        generate = backend.generate

        def timed(requests):
            out = generate(requests)
            self.ends.append(time.perf_counter())
            return out

        backend.generate = timed


def _time(chunks: Iterator[Any], is_answer: Callable[[Any], bool], clock: RoundClock, start: float) -> Timing:
    timing = Timing()
    clock.ends.clear()
    for chunk in chunks:
        now = time.perf_counter() - start
        if timing.chunks == 0:
            timing.first_chunk = now
        if not timing.first_answer_chunk and is_answer(chunk):
            timing.first_answer_chunk = now
        timing.chunks += 1
        timing.last_chunk = now
    ends = [end - start for end in clock.ends]
    timing.first_round = ends[0] if ends else None
    timing.first_step = ends[1] if len(ends) > 1 else None
    return timing


def main() -> None:
    """Run the measurement and print the table (and, with ``--json``, the raw timings)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=5, help="held-out demo questions to ask (default 5)")
    parser.add_argument("--step-beam-size", type=int, default=4, help="M (default 4)")
    parser.add_argument("--num-rollouts", type=int, default=4, help="N (default 4)")
    parser.add_argument("--seed", type=int, default=0, help="decoder seed (default 0)")
    parser.add_argument("--json", action="store_true", help="also print every timing as JSON")
    args = parser.parse_args()
    quiet_transformers()

    settings = MFSSettings(device="cpu", step_beam_size=args.step_beam_size, num_rollouts=args.num_rollouts, seed=args.seed)
    engine = MFSEngine.from_settings(settings)
    clock = RoundClock()
    clock.install(engine.backend)
    chat = ChatMFS(engine=engine)
    llm = MFSLLM(engine=engine)
    problems = json.loads(resources.files("mfs_core.demo").joinpath("heldout.json").read_text())[: args.questions]
    questions = [p["input"] for p in problems]
    chat.invoke(questions[0])  # warm-up: first-call costs out of the measurement

    def lc_before(question: str) -> Iterator[Any]:
        from langchain_core.messages import HumanMessage

        [reply] = chat._caller().run(ChatInput(to_chat_dicts([HumanMessage(question)])), chat._keywords({}, None))
        yield from _answer_chunks(reply)

    def li_before(question: str) -> Iterator[Any]:
        messages = [ChatMessage(role=MessageRole.USER, content=question)]
        [reply] = llm._caller().run(llm._chat_input(messages), llm._keywords({}))
        yield from chat_chunks(reply)

    paths: dict[tuple[str, str], tuple[Callable[[str], Iterator[Any]], Callable[[Any], bool]]] = {
        ("LangChain ChatMFS.stream", "before: answer only"): (lc_before, lambda c: bool(c.message.content)),
        ("LangChain ChatMFS.stream", "after: search as reasoning"): (chat.stream, lambda c: bool(c.content)),
        ("LlamaIndex stream_chat", "before: answer only"): (li_before, lambda c: bool(c.delta)),
        ("LlamaIndex stream_chat", "after: search as thinking"): (
            lambda q: llm.stream_chat([ChatMessage(role=MessageRole.USER, content=q)]),
            lambda c: bool(c.delta),
        ),
    }
    timings: dict[tuple[str, str], list[Timing]] = {key: [] for key in paths}
    for question in questions:
        for key, (call, is_answer) in paths.items():
            start = time.perf_counter()
            timings[key].append(_time(call(question), is_answer, clock, start))

    def median(values: list[float | None]) -> str:
        present = [v for v in values if v is not None]
        return f"{statistics.median(present):.3f}" if present else "–"

    table = Table(title=f"Time to the first streamed chunk (demo model, M={args.step_beam_size}, "
                        f"N={args.num_rollouts}, {len(questions)} questions, medians, seconds from the call)")
    for column in ("API", "streaming", "first chunk", "first round", "first step", "first answer chunk",
                   "whole decode (last chunk)", "first chunk / whole", "chunks"):
        table.add_column(column, justify="left" if column in ("API", "streaming") else "right")
    for (api, mode), rows in timings.items():
        ratio = statistics.median(t.first_chunk / t.last_chunk for t in rows if t.last_chunk)
        table.add_row(
            api, mode, median([t.first_chunk for t in rows]), median([t.first_round for t in rows]),
            median([t.first_step for t in rows]), median([t.first_answer_chunk for t in rows]),
            median([t.last_chunk for t in rows]), f"{ratio:.0%}", median([t.chunks for t in rows]),
        )
    Console(width=200).print(table)
    if args.json:
        print(json.dumps({f"{api} | {mode}": [t.__dict__ for t in rows] for (api, mode), rows in timings.items()}, indent=1))


if __name__ == "__main__":
    main()
