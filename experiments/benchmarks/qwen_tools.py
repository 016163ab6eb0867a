"""Tool calls on a real template: Qwen2.5-Coder-0.5B-Instruct as a LangChain and a LlamaIndex agent.

Each problem is an arithmetic word problem with two integers whose answer is one ``add`` or
``multiply``; the agent gets both tools (LangChain ``create_agent`` over ``ChatMFS``, LlamaIndex
``FunctionAgent`` over ``MFSLLM``). Counted per framework:

* ``calls``: tool calls the model made; ``valid``: those whose name is a bound tool and whose
  arguments validate against its schema (two integers); ``invalid``: calls the parser reported
  as malformed (``invalid_tool_calls``);
* ``round trips``: problems where a tool ran, its result went back, and the model then answered
  without a further call;
* ``uses result``: final answers that contain the last tool result (as digits);
* ``right``: final answers that contain the problem's answer.

All problems run at once (LangChain ``batch``, LlamaIndex ``asyncio.gather``), so each turn's
model calls are decoded together as one batch by the shared engine; ``seconds_per_problem`` is
the wall time over the number of problems.

Run (niced; one framework per process keeps the numbers apart)::

    nice -n 15 python experiments/benchmarks/qwen_tools.py --framework langchain --method cot --out bench-results/qwen-tools-langchain.json
    nice -n 15 python experiments/benchmarks/qwen_tools.py --framework llamaindex --method cot --out bench-results/qwen-tools-llamaindex.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import time
from pathlib import Path
from typing import Any

MODEL = "qwen2.5-coder-0.5b-instruct"

TEMPLATES = {
    "add": [
        "Tom has {a} marbles and finds {b} more. How many marbles does he have now?",
        "A library had {a} books and received {b} new books. How many books does it have?",
        "Sara scored {a} points in the first game and {b} in the second. What is her total?",
        "A farm has {a} cows and buys {b} more. How many cows are on the farm?",
        "A shop sold {a} apples in the morning and {b} in the afternoon. How many apples did it sell?",
    ],
    "multiply": [
        "A baker makes {a} trays of {b} cookies each. How many cookies is that?",
        "A train travels {a} km per hour for {b} hours. How far does it go in km?",
        "There are {a} boxes with {b} pencils in each. How many pencils are there?",
        "A theater has {a} rows of {b} seats. How many seats does it have?",
        "Each of {a} students reads {b} pages. How many pages do they read in all?",
    ],
}


def add(a: int, b: int) -> int:
    """Add two integers and return the sum."""
    return a + b


def multiply(a: int, b: int) -> int:
    """Multiply two integers and return the product."""
    return a * b


def problems(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """``count`` problems, alternating add / multiply, operands drawn with ``seed``."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        op = ("add", "multiply")[i % 2]
        a, b = (rng.randint(100, 999), rng.randint(100, 999)) if op == "add" else (rng.randint(12, 99), rng.randint(3, 19))
        text = TEMPLATES[op][(i // 2) % len(TEMPLATES[op])].format(a=a, b=b)
        out.append({"question": text, "op": op, "a": a, "b": b, "answer": add(a, b) if op == "add" else multiply(a, b)})
    return out


def _valid(name: str, arguments: Any) -> bool:
    return (name in ("add", "multiply") and isinstance(arguments, dict) and set(arguments) == {"a", "b"}
            and all(isinstance(v, int) and not isinstance(v, bool) for v in arguments.values()))


def _contains(text: str, number: Any) -> bool:
    return re.search(rf"(?<![\d.]){re.escape(str(number))}(?![\d])", text.replace(",", "")) is not None


def run_langchain(items: list[dict[str, Any]], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Every problem through one ``create_agent``, all at once (``batch``): their model calls
    reach the shared engine together and are decoded as one batch per turn."""
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool

    from langchain_mfs import ChatMFS
    from mfs_core.call import adapter_arguments

    agent = create_agent(ChatMFS(**adapter_arguments(settings)), tools=[tool(add), tool(multiply)])
    start = time.perf_counter()
    states = agent.batch([{"messages": [HumanMessage(item["question"])]} for item in items],
                         {"recursion_limit": 6, "max_concurrency": len(items)}, return_exceptions=True)
    seconds = (time.perf_counter() - start) / len(items)
    rows = []
    for item, state in zip(items, states):
        error = f"{type(state).__name__}: {state}"[:300] if isinstance(state, Exception) else None
        messages = [] if error else state["messages"]
        calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
        invalid = [c for m in messages if isinstance(m, AIMessage) for c in m.invalid_tool_calls]
        results = [str(m.content) for m in messages if isinstance(m, ToolMessage) and m.status == "success"]
        final = messages[-1] if messages else None
        answered = isinstance(final, AIMessage) and not final.tool_calls
        rows.append(_row(item, [(c["name"], c["args"]) for c in calls], len(invalid), results,
                         str(final.content) if answered else None, error, seconds))
    return rows


async def _llamaindex(items: list[dict[str, Any]], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Every problem through its own ``FunctionAgent`` on one ``MFSLLM``, all at once
    (``asyncio.gather``): their model calls are decoded together by the shared engine."""
    from llama_index.core.agent.workflow import AgentOutput, FunctionAgent, ToolCallResult
    from llama_index.core.tools import FunctionTool

    from llamaindex_mfs import MFSLLM
    from mfs_core.call import adapter_arguments

    llm = MFSLLM(**adapter_arguments(settings))
    tools = [FunctionTool.from_defaults(fn=add), FunctionTool.from_defaults(fn=multiply)]

    async def one(item: dict[str, Any]) -> tuple[Any, ...]:
        agent = FunctionAgent(tools=tools, llm=llm, streaming=False)
        calls, results, invalid, error, answer = [], [], 0, None, None
        try:
            handler = agent.run(user_msg=item["question"], max_iterations=6)
            async for event in handler.stream_events():
                if isinstance(event, ToolCallResult):
                    calls.append((event.tool_name, event.tool_kwargs))
                    if not event.tool_output.is_error:
                        results.append(str(event.tool_output.content))
                elif isinstance(event, AgentOutput):
                    invalid += len(event.response.additional_kwargs.get("invalid_tool_calls", []))
            response = await handler
            # A run ends when the model's last reply calls no tool (else it raises at max_iterations);
            # AgentOutput.tool_calls lists every call of the run, so it cannot tell an answer apart.
            answer = str(response.response.content or "")
        except Exception as exc:  # noqa: BLE001 - counted, not raised: the row says why
            error = f"{type(exc).__name__}: {exc}"[:300]
        return calls, invalid, results, answer, error

    start = time.perf_counter()
    outcomes = await asyncio.gather(*(one(item) for item in items))
    seconds = (time.perf_counter() - start) / len(items)
    return [_row(item, *outcome, seconds) for item, outcome in zip(items, outcomes)]


def _row(item: dict[str, Any], calls: list[tuple[str, Any]], invalid: int, results: list[str], answer: str | None,
         error: str | None, seconds: float) -> dict[str, Any]:
    return {
        **item, "calls": [[n, a] for n, a in calls], "valid": sum(_valid(n, a) for n, a in calls), "invalid": invalid,
        "results": results, "final": answer, "error": error,
        "round_trip": bool(results) and answer is not None,
        "uses_result": bool(results) and answer is not None and _contains(answer, results[-1]),
        "right": answer is not None and _contains(answer, item["answer"]), "seconds": round(seconds, 1),
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "problems": len(rows), "calls": sum(len(r["calls"]) for r in rows), "valid": sum(r["valid"] for r in rows),
        "invalid": sum(r["invalid"] for r in rows), "round_trips": sum(r["round_trip"] for r in rows),
        "uses_result": sum(r["uses_result"] for r in rows), "right": sum(r["right"] for r in rows),
        "errors": sum(r["error"] is not None for r in rows),
        "seconds_per_problem": round(sum(r["seconds"] for r in rows) / max(1, len(rows)), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=("langchain", "llamaindex"), required=True)
    parser.add_argument("--problems", type=int, default=20)
    parser.add_argument("--method", default="mfs", help="decoder of every model call (mfs, cot)")
    parser.add_argument("--beams", type=int, default=2, help="M (step_beam_size)")
    parser.add_argument("--rollouts", type=int, default=2, help="N (num_rollouts)")
    parser.add_argument("--max-tokens", type=int, default=64, help="max_answer_tokens of each model call")
    parser.add_argument("--backend", default="transformers", help="transformers | vllm (vLLM's CPU build)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    settings = {"model": MODEL, "backend": args.backend, "device": "cpu", "method": args.method, "step_beam_size": args.beams,
                "num_rollouts": args.rollouts, "max_steps": 4, "max_step_tokens": 48, "max_answer_tokens": args.max_tokens,
                "assistant_prefix": "", "seed": 0}
    items = problems(args.problems)
    if args.framework == "langchain":
        rows = run_langchain(items, settings)
    else:
        rows = asyncio.run(_llamaindex(items, settings))
    for row in rows:
        print(json.dumps({k: row[k] for k in ("question", "calls", "results", "final", "error", "seconds")}), flush=True)
    result = {"framework": args.framework, "settings": settings, "summary": summary(rows), "rows": rows}
    print(json.dumps(result["summary"]))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
