"""The v2 demo-model training script (``testbed.train_v2``) on a tiny configuration.

Checks what a checkpoint it writes carries: one token per digit, the marker tokens, the
2,048-position RoPE window and the chat template that renders ``tools=`` Hermes /
Qwen2.5-style while rendering plain questions exactly as the v1 template.
"""

from __future__ import annotations

import json

import pytest

from experiments.testbed.problems_v2 import END_MARKER

TOOL = {"type": "function", "function": {"name": "plus", "description": "Add two integers.", "parameters": {
    "type": "object", "properties": {"x": {"type": "integer", "description": "the first number"},
                                     "y": {"type": "integer", "description": "the second number"}},
    "required": ["x", "y"]}}}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A 3-step run of the v2 training script: its log and output directory."""
    from experiments.testbed import train_v2

    out = tmp_path_factory.mktemp("v2")
    log = train_v2.main([
        "--output-dir", str(out / "model"), "--steps", "3", "--batch-tokens", "1024", "--hidden-size", "16",
        "--layers", "1", "--heads", "2", "--intermediate-size", "32", "--vocab-size", "600", "--log-every", "1",
        "--heldout", str(out / "heldout.json"), "--short-rate", "0.2",
    ])
    return log, out


def test_training_writes_a_loadable_checkpoint_and_the_heldout_set(tiny):
    from transformers import AutoModelForCausalLM

    from experiments.testbed.problems_v2 import generate_problems
    from experiments.testbed.train_v2 import HELDOUT_SEED, HELDOUT_SIZE

    log, out = tiny
    assert log["steps"] == 3 and len(log["history"]) == 3 and log["final_loss"] > 0
    model = AutoModelForCausalLM.from_pretrained(out / "model")
    assert sum(p.numel() for p in model.parameters()) == log["num_parameters"]
    assert model.config.max_position_embeddings == 2048
    records = json.loads((out / "heldout.json").read_text())
    assert records == [{"input": p.question, "target": float(p.answer)}
                       for p in generate_problems(HELDOUT_SIZE, seed=HELDOUT_SEED)]


def test_tokenizer_keeps_digits_and_markers_single(tiny):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny[1] / "model")
    ids = tokenizer("12 + 507 = 519", add_special_tokens=False)["input_ids"]
    assert [p for p in (tokenizer.decode([i]) for i in ids) if p.strip().isdigit()] == list("12507519")
    for marker in (END_MARKER, "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"):
        assert tokenizer.tokenize(marker) == [marker]
        assert marker in tokenizer.decode(tokenizer(f"x {marker}", add_special_tokens=False)["input_ids"],
                                          skip_special_tokens=True)


def test_chat_template_renders_tools_calls_and_results(tiny):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny[1] / "model")
    messages = [
        {"role": "user", "content": "Q?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "plus", "arguments": {"x": 1, "y": 2}}}]},
        {"role": "tool", "name": "plus", "content": "3"},
    ]
    rendered = tokenizer.apply_chat_template(messages, tools=[TOOL], tokenize=False, add_generation_prompt=True)
    assert rendered == (
        "<s><|system|>\nYou may call functions to help with the question. The functions are inside <tools></tools>:\n"
        f"<tools>\n{json.dumps(TOOL)}\n</tools>\n\n"
        "To call a function, write a JSON object with its name and arguments inside <tool_call></tool_call>:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n'
        "<|user|>\nQ?\n"
        '<|assistant|>\n<tool_call>\n{"name": "plus", "arguments": {"x": 1, "y": 2}}\n</tool_call>\n'
        "<|tool|>\n<tool_response>\n3\n</tool_response>\n<|assistant|>\n"
    )
    # A system message merges into the tools turn; without tools everything renders as in v1.
    with_system = tokenizer.apply_chat_template([{"role": "system", "content": "Be brief."}, *messages[:1]],
                                                tools=[TOOL], tokenize=False, add_generation_prompt=True)
    assert with_system.startswith("<s><|system|>\nBe brief.\n\nYou may call functions") and with_system.count("<|system|>") == 1
    plain = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q?"}]
    assert tokenizer.apply_chat_template(plain, tokenize=False, add_generation_prompt=True) == (
        "<s><|system|>\nS\n<|user|>\nQ?\n<|assistant|>\n")


def test_a_v1_checkpoint_is_extended_and_continued(tmp_path):
    """``train_v2 --init-from`` a v1 checkpoint (how the shipped model was made): the v2 tokens
    and the prompt words are added, the window grows to 2,048, the template renders tools, and
    a plain v1 question is tokenized exactly as before."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from experiments.testbed import train, train_v2

    v1 = tmp_path / "v1"
    train.main(["--output-dir", str(v1), "--steps", "1", "--batch-size", "2", "--hidden-size", "16", "--layers", "1",
                "--heads", "2", "--intermediate-size", "32", "--vocab-size", "400", "--log-every", "1"])
    old = AutoTokenizer.from_pretrained(v1)
    question = "Grace has 7 bags with 9 cards in each bag. Sadly, 6 cards break. How many cards are there now?"
    log = train_v2.main(["--output-dir", str(tmp_path / "v2"), "--init-from", str(v1), "--steps", "2",
                         "--batch-tokens", "2048", "--log-every", "1"])
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "v2")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "v2")
    added = 1 + len(train_v2.MARKER_TOKENS) - 1 + len(train_v2.PROMPT_TOKENS)  # <|tool|>, 4 tags, the words
    assert len(tokenizer) == len(old) + added == model.config.vocab_size == log["config"]["vocab_size"]
    assert model.config.max_position_embeddings == 2048 and tokenizer.model_max_length == 2048
    assert tokenizer(question)["input_ids"] == old(question)["input_ids"]
    assert tokenizer.tokenize('{"name": "add"}')[:2] == ["{", '"name": "']
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "Q?"}], tools=[TOOL], tokenize=False)
    assert "<tools>\n" in rendered and '"name": "plus"' in rendered
    extended = train_v2.extend_tokenizer_and_model(tokenizer, model, 2048)  # idempotent on a v2 checkpoint
    assert len(extended[0]) == len(tokenizer) and extended[1].config.vocab_size == model.config.vocab_size
