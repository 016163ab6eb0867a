"""Training conversations of the demo model: plain questions, RAG prompts and tool calls.

Every example is a :class:`Conversation`: chat ``messages`` (and ``tools`` JSON schemas)
rendered by the model's chat template with the generation prompt and the assistant prefix,
then the ``target`` lines the model learns (each with a loss flag).

* :func:`plain_example`: the word problem as the single user message.
* :func:`rag_example`: the problem's facts split into documents among distractor
  documents (other stories), inside the prompts that retrieval pipelines send by default:
  LlamaIndex's chat ``text_qa_template`` (``CHAT_TEXT_QA_PROMPT``: system + user message;
  used because ``MFSLLM.metadata.is_chat_model`` is True), its chat refine template
  (``CHAT_REFINE_PROMPT``), its plain ``DEFAULT_TEXT_QA_PROMPT``, the context system prompt
  of ``CondensePlusContextChatEngine`` (what ``index.as_chat_engine()`` builds by default in
  llama-index-core 0.14: ``ChatMode.BEST`` is ``CONDENSE_PLUS_CONTEXT``), and a plain
  LangChain RAG prompt. The templates are read from ``llama_index.core`` itself.
* :func:`tool_example`: Hermes / Qwen2.5-style tool calls: the tools are rendered by the chat
  template; the model answers ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``
  then ``<end_of_reasoning>``, reads ``<tool_response>`` turns and answers from them.
  Tool and argument names vary (``add``/``plus``/``sum_two``/``calculator``...,
  ``a``/``b``, ``x``/``y``, ``first``/``second``...), so the model follows the schema it is
  given; an operation without a matching tool is computed in the text.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from experiments.testbed.problems_v2 import (
    END_MARKER,
    Operation,
    WordProblem,
    answer_line,
    check_line,
    equation,
    generate_problem,
    write_solution,
)

__all__ = [
    "LANGCHAIN_RAG_TEMPLATE",
    "RESTATE_PREFIX",
    "TOOL_CALL_CLOSE",
    "TOOL_CALL_OPEN",
    "copy_example",
    "Conversation",
    "plain_example",
    "rag_example",
    "tool_call_text",
    "tool_example",
]

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
LANGCHAIN_RAG_TEMPLATE = "Answer the question based only on the following context:\n{context}\n\nQuestion: {question}"


@dataclass
class Conversation:
    """One training example.

    Attributes:
        messages: chat messages (``role``/``content``, assistant ``tool_calls``).
        target: ``(line, trained)`` pairs the model writes after the assistant prefix.
        tools: the tool JSON schemas given to the chat template, or None.
        kind: ``"plain"``, ``"rag"`` or ``"tool"``.
    """

    messages: list[dict[str, Any]]
    target: list[tuple[str, bool]]
    tools: list[dict[str, Any]] | None = None
    kind: str = "plain"
    meta: dict[str, Any] = field(default_factory=dict)


def plain_example(problem: WordProblem, rng: random.Random, slip_rate: float, checks: str = "v2") -> Conversation:
    """The problem as the single user message; a solution with variants and maybe a slip
    (``checks``: :func:`~testbed.problems_v2.write_solution`'s)."""
    return Conversation([{"role": "user", "content": problem.question}],
                        write_solution(problem, rng, slip_rate, checks=checks))


# --- RAG ---------------------------------------------------------------------------------
def _llama_index_templates() -> dict[str, Any]:
    from llama_index.core.chat_engine.condense_plus_context import DEFAULT_CONTEXT_PROMPT_TEMPLATE
    from llama_index.core.prompts.chat_prompts import CHAT_REFINE_PROMPT, CHAT_TEXT_QA_PROMPT
    from llama_index.core.prompts.default_prompts import DEFAULT_TEXT_QA_PROMPT

    return {
        "chat_qa": CHAT_TEXT_QA_PROMPT,
        "chat_refine": CHAT_REFINE_PROMPT,
        "qa": DEFAULT_TEXT_QA_PROMPT,
        "context": DEFAULT_CONTEXT_PROMPT_TEMPLATE,
    }


def _messages(chat_messages: Any) -> list[dict[str, Any]]:
    return [{"role": m.role.value, "content": m.content} for m in chat_messages]


RESTATE_PREFIX = "From the context: "


def rag_example(problem: WordProblem, rng: random.Random, slip_rate: float, restate: bool = False,
                checks: str = "v2") -> Conversation:
    """The problem's facts as retrieved documents among distractors, in a default RAG prompt.

    The facts stay in story order (one document, or split in two); 0-3 distractor
    documents tell other stories (other person and object), placed anywhere.

    ``restate``: the solution opens by quoting the question's facts from the context
    (``"From the context: <facts>"``, one line), then solves them as a plain problem: the
    model picks the right story once, by copying it, instead of at every step.
    ``checks``: the check lines' form (:func:`~testbed.problems_v2.write_solution`).
    """
    templates = _llama_index_templates()
    facts = list(problem.facts)
    if len(facts) >= 2 and rng.random() < 0.5:
        cut = rng.randint(1, len(facts) - 1)
        documents = [" ".join(facts[:cut]), " ".join(facts[cut:])]
    else:
        documents = [" ".join(facts)]
    distractors: list[str] = []
    while len(distractors) < rng.choice([0, 1, 1, 2, 2, 3]):
        other = generate_problem(rng)
        if other.name != problem.name and other.obj != problem.obj:
            distractors.append(" ".join(other.facts))
    for text in distractors:
        documents.insert(rng.randint(0, len(documents)), text)
    context = "\n\n".join(documents)
    query = problem.question_sentence
    target = write_solution(problem, rng, slip_rate, checks=checks)
    if restate:
        target = [(RESTATE_PREFIX + " ".join(facts), True), *target]
    style = rng.choices(["chat_qa", "context", "langchain", "qa", "refine"], weights=[30, 25, 20, 10, 15])[0]
    if style == "chat_qa":
        messages = _messages(templates["chat_qa"].format_messages(context_str=context, query_str=query))
    elif style == "context":
        system = templates["context"].format(context_str=context)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": query}]
    elif style == "langchain":
        messages = [{"role": "user", "content": LANGCHAIN_RAG_TEMPLATE.format(context=context, question=query)}]
    elif style == "qa":
        messages = [{"role": "user", "content": templates["qa"].format(context_str=context, query_str=query)}]
    else:
        # Refine: either the first answer was right and the new context is unrelated (repeat
        # it), or there was no answer yet and the new context holds the facts.
        if rng.random() < 0.5 and distractors:
            previous = "\n".join(text for text, _ in write_solution(problem, rng, 0.0, checks=checks)).replace(END_MARKER, "")
            context = "\n\n".join(distractors)
            target = [(line, True) for line in previous.split("\n")]
            target[-1] = (target[-1][0] + END_MARKER, True)
        else:
            previous = rng.choice(["Empty Response", "I don't know.", "The context does not say."])
        messages = _messages(templates["chat_refine"].format_messages(
            context_msg=context, query_str=query, existing_answer=previous))
    return Conversation(messages, target, kind="rag", meta={"style": style})


# --- copying ---------------------------------------------------------------------------
COPY_INSTRUCTIONS = ["Repeat this text exactly: ", "Copy the following words: ", "Say back: "]


def copy_example(rng: random.Random) -> Conversation:
    """A copying drill: the user gives 4-12 items (made-up identifiers, names, objects,
    numbers) and the answer repeats them, one line.

    Made-up words cannot be predicted from what the model knows, so only copying from the
    prompt lowers their loss: the skill that RAG prompts (quoting the right story) and tool
    calls (writing a name from the schema) need.
    """
    from experiments.testbed.problems import NAMES, OBJECTS

    words = []
    for _ in range(rng.randint(4, 12)):
        pick = rng.random()
        if pick < 0.5:
            words.append(novel_name(rng))
        elif pick < 0.65:
            words.append(rng.choice(NAMES))
        elif pick < 0.8:
            words.append(rng.choice(rng.choice(OBJECTS)))
        else:
            words.append(str(rng.randint(0, 99)))
    text = " ".join(words)
    return Conversation([{"role": "user", "content": rng.choice(COPY_INSTRUCTIONS) + text}],
                        [(text + END_MARKER, True)], kind="copy")


# --- tools -------------------------------------------------------------------------------
TOOL_NAMES = {
    "add": ["add", "plus", "sum_two", "add_numbers", "addition"],
    "sub": ["subtract", "minus", "sub", "difference", "take_away"],
    "mul": ["multiply", "times", "product", "mul", "multiplication"],
}
CALCULATOR_NAMES = ["calculator", "calc", "arithmetic", "compute"]
OPERATION_WORDS = {"add": "add", "sub": "subtract", "mul": "multiply"}
ARGUMENT_NAMES = [("a", "b"), ("x", "y"), ("first", "second"), ("left", "right"), ("num1", "num2")]
DESCRIPTIONS = {
    "add": ["Add two integers.", "Return the sum of two numbers.", "Adds two numbers together."],
    "sub": ["Subtract the second integer from the first.", "Return the difference of two numbers."],
    "mul": ["Multiply two integers.", "Return the product of two numbers."],
}


# How the frameworks write a tool's JSON schema (measured with langchain-core 1.x and
# llama-index-core 0.14): "described" is a hand-written schema; "langchain" is
# ``convert_to_openai_tool`` of a typed function (properties first, no argument
# descriptions); "llamaindex" is ``FunctionTool.metadata.to_openai_tool()`` (pydantic
# titles, the signature before the description).
SCHEMA_LAYOUTS = ("described", "langchain", "llamaindex")


@dataclass(frozen=True)
class _Tool:
    kind: str  # "add", "sub", "mul" or "calculator"
    name: str
    arguments: tuple[str, str]
    layout: str = "described"  # one of SCHEMA_LAYOUTS

    def schema(self) -> dict[str, Any]:
        first, second = self.arguments
        properties: dict[str, Any] = {}
        if self.kind == "calculator":
            properties["operation"] = {"type": "string", "enum": ["add", "subtract", "multiply"]}
            description = "Do one arithmetic operation on two integers."
        else:
            description = DESCRIPTIONS[self.kind][len(self.name) % len(DESCRIPTIONS[self.kind])]
        for argument, which in ((first, "first"), (second, "second")):
            if self.layout == "described":
                properties[argument] = {"type": "integer", "description": f"the {which} number"}
            elif self.layout == "langchain":
                properties[argument] = {"type": "integer"}
            else:
                properties[argument] = {"title": argument.title(), "type": "integer"}
        if self.layout == "described":
            parameters = {"type": "object", "properties": properties, "required": list(properties)}
        else:
            parameters = {"properties": properties, "required": list(properties), "type": "object"}
        if self.layout == "llamaindex":
            signature = ", ".join(f"{a}: {'str' if a == 'operation' else 'int'}" for a in properties)
            description = f"{self.name}({signature}) -> int\n{description}"
        return {"type": "function", "function": {"name": self.name, "description": description,
                                                 "parameters": parameters}}

    def call(self, op: Operation) -> dict[str, Any]:
        first, second = self.arguments
        arguments: dict[str, Any] = {}
        if self.kind == "calculator":
            arguments["operation"] = OPERATION_WORDS[op.kind]
        arguments[first] = op.left
        arguments[second] = op.right
        return {"name": self.name, "arguments": arguments}


def tool_call_text(call: dict[str, Any]) -> str:
    """The text of one tool call as the model writes it (and the chat template renders it)."""
    return f"{TOOL_CALL_OPEN}\n{json.dumps(call)}\n{TOOL_CALL_CLOSE}"


_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def novel_name(rng: random.Random) -> str:
    """A made-up identifier (``"magic_kuto"``, ``"zaripo"``, ``"get_mela"``...): a name the
    model cannot have memorised, so it must copy it from the schema."""
    word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3)))
    return rng.choice(["", "", "magic_", "get_", "do_", "my_", "tool_", "fn_"]) + word


def _draw_tools(rng: random.Random, novel_rate: float = 0.0) -> list[_Tool]:
    arguments = rng.choice(ARGUMENT_NAMES)
    if rng.random() < novel_rate / 2:
        arguments = (novel_name(rng), novel_name(rng))
    layout = rng.choice(SCHEMA_LAYOUTS)

    def name(names: list[str]) -> str:
        return novel_name(rng) if rng.random() < novel_rate else rng.choice(names)

    if rng.random() < 0.3:
        tools = [_Tool("calculator", name(CALCULATOR_NAMES), arguments, layout)]
    else:
        kinds = [k for k in ("add", "sub", "mul") if rng.random() < 0.7] or [rng.choice(["add", "sub", "mul"])]
        tools = [_Tool(k, name(TOOL_NAMES[k]), arguments if rng.random() < 0.8 else rng.choice(ARGUMENT_NAMES),
                       layout) for k in kinds]
    rng.shuffle(tools)
    return tools


def tool_example(rng: random.Random, novel_rate: float = 0.0, first_turn_share: float = 0.0,
                 checks: str = "v2") -> Conversation:
    """A 1-3 operation problem solved with the given arithmetic tools, cut at a random turn.

    ``novel_rate``: share of tools named by :func:`novel_name` instead of the usual
    arithmetic names (and half that share of argument pairs), so that the model learns to
    copy the name from the schema it is given. ``first_turn_share``: share of examples cut
    at the first assistant turn (the first call, or the text answer when no tool fits);
    the rest are cut at a turn drawn uniformly. ``checks``: the form of the check line
    after a step no tool fits (:func:`~testbed.problems_v2.check_line`'s ``style``).

    The conversation is played out to the end; the example is one assistant turn of it
    (the history before it rendered by the chat template), so the model learns to open
    with a call, to continue after a ``<tool_response>`` and to answer from it.
    """
    problem = generate_problem(rng, num_operations=rng.choice([1, 2, 2, 3]))
    tools = _draw_tools(rng, novel_rate)
    by_kind = {t.kind: t for t in tools}
    messages: list[dict[str, Any]] = []
    if rng.random() < 0.2:
        messages.append({"role": "system", "content": "You are a helpful assistant."})
    messages.append({"role": "user", "content": problem.question})
    turns: list[tuple[list[dict[str, Any]], list[tuple[str, bool]]]] = []
    pending: list[tuple[str, bool]] = []
    for op in problem.operations:
        tool = by_kind.get(op.kind) or by_kind.get("calculator")
        if tool is None:
            pending += [(equation(op), True), (check_line(op, style=checks), True)]
            continue
        call = tool.call(op)
        turn = pending + [(line, True) for line in tool_call_text(call).split("\n")]
        turn[-1] = (turn[-1][0] + END_MARKER, True)
        turns.append((list(messages), turn))
        content = "\n".join(text for text, _ in pending)
        messages.append({"role": "assistant", "content": content,
                         "tool_calls": [{"type": "function", "function": call}]})
        result = str(op.result) if rng.random() < 0.7 else json.dumps({"result": op.result})
        messages.append({"role": "tool", "name": tool.name, "content": result})
        pending = [(equation(op), True)]
    turns.append((list(messages), pending + [(answer_line(problem.answer), True)]))
    history, target = turns[0] if rng.random() < first_turn_share else rng.choice(turns)
    return Conversation(history, target, tools=[t.schema() for t in tools], kind="tool",
                        meta={"answer": problem.answer, "calls": len(turns) - 1})
