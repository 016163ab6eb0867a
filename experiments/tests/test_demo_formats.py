"""The demo model's training conversations: RAG prompts from LlamaIndex's templates, tool calls."""

import json
import random
import re

from llama_index.core.chat_engine.condense_plus_context import DEFAULT_CONTEXT_PROMPT_TEMPLATE
from llama_index.core.prompts.chat_prompts import TEXT_QA_SYSTEM_PROMPT

from experiments.testbed.formats import LANGCHAIN_RAG_TEMPLATE, RESTATE_PREFIX, plain_example, rag_example, tool_example
from experiments.testbed.problems_v2 import END_MARKER, generate_problem

CALL = re.compile(r"^<tool_call>\n(\{.*\})\n</tool_call>" + re.escape(END_MARKER) + "$")


def test_rag_prompts_hold_the_facts_in_order_and_use_the_default_templates():
    rng = random.Random(1)
    styles = set()
    for _ in range(300):
        problem = generate_problem(rng)
        example = rag_example(problem, rng, slip_rate=0.0)
        style = example.meta["style"]
        styles.add(style)
        text = "\n".join(m["content"] for m in example.messages)
        assert problem.question_sentence in text
        target = "\n".join(line for line, _ in example.target)
        assert target.endswith(f"\\boxed{{{problem.answer}}}.{END_MARKER}")
        if style == "refine" and "Original Answer: The answer" not in text and f"\\boxed{{{problem.answer}}}" in text:
            continue  # the repeat case: the facts were in the first answer, not the new context
        # each fact after the one before it (a story may repeat a sentence: "Sadly, 5 cards break.")
        position = 0
        for fact in problem.facts:
            position = text.find(fact, position)
            assert position != -1, fact
            position += 1
        if style == "chat_qa":
            assert example.messages[0] == {"role": "system", "content": TEXT_QA_SYSTEM_PROMPT.content}
        if style == "context":
            prefix = DEFAULT_CONTEXT_PROMPT_TEMPLATE.split("{context_str}")[0]
            assert example.messages[0]["content"].startswith(prefix) and example.messages[1]["content"] == problem.question_sentence
        if style == "langchain":
            assert example.messages[0]["content"].startswith(LANGCHAIN_RAG_TEMPLATE.split("{context}")[0])
    assert styles == {"chat_qa", "context", "langchain", "qa", "refine"}


def test_tool_turns_call_a_given_tool_with_its_own_argument_names():
    rng = random.Random(2)
    names, calls = set(), 0
    for _ in range(300):
        example = tool_example(rng)
        schemas = {t["function"]["name"]: t["function"]["parameters"] for t in example.tools}
        target = "\n".join(line for line, _ in example.target)
        if "<tool_call>" in target:
            payload = json.loads(target[target.index("<tool_call>\n") + 12 : target.index("\n</tool_call>")])
            assert list(payload["arguments"]) == list(schemas[payload["name"]]["properties"])
            assert CALL.search(target[target.index("<tool_call>"):])
            names.add(payload["name"])
            calls += 1
        else:
            assert target.endswith(f"\\boxed{{{example.meta['answer']}}}.{END_MARKER}")
        for message in example.messages:
            if message["role"] == "tool":
                assert re.fullmatch(r"\d+|\{\"result\": \d+\}", message["content"])
    assert calls > 100 and len(names) > 10


def test_plain_example_is_the_question_as_the_user_message():
    problem = generate_problem(random.Random(4))
    example = plain_example(problem, random.Random(0), slip_rate=0.0)
    assert example.messages == [{"role": "user", "content": problem.question}] and example.tools is None


def test_a_restated_rag_solution_opens_with_the_facts_then_solves_them():
    problem = generate_problem(random.Random(5))
    plain = rag_example(problem, random.Random(9), slip_rate=0.0)
    restated = rag_example(problem, random.Random(9), slip_rate=0.0, restate=True)
    assert restated.messages == plain.messages  # the same prompt
    if restated.meta["style"] == "refine" and RESTATE_PREFIX not in restated.target[0][0]:
        return
    assert restated.target[0] == (RESTATE_PREFIX + " ".join(problem.facts), True)
    assert restated.target[1:] == plain.target


def test_first_turn_share_cuts_tool_conversations_at_their_first_turn():
    rng = random.Random(3)
    first = [tool_example(rng, first_turn_share=1.0) for _ in range(50)]
    assert all(example.messages[-1]["role"] == "user" for example in first)
    mixed = [tool_example(rng) for _ in range(200)]
    later = sum(example.messages[-1]["role"] == "tool" for example in mixed)
    assert 50 < later < 200  # uniform over the turns: most conversations have a call, so most cuts come later


def test_a_copy_drill_repeats_the_users_words_exactly():
    from experiments.testbed.formats import COPY_INSTRUCTIONS, copy_example

    rng = random.Random(6)
    for _ in range(50):
        example = copy_example(rng)
        [message] = example.messages
        instruction = next(i for i in COPY_INSTRUCTIONS if message["content"].startswith(i))
        words = message["content"][len(instruction):]
        assert len(words.split()) >= 4  # 4-12 drawn words; an object may be two ("toy cars")
        assert example.target == [(words + END_MARKER, True)] and example.kind == "copy"
