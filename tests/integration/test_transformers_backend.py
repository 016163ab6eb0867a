"""The transformers backend on the demo model: raw log-probs, batching, stops, counts."""

from __future__ import annotations

import pytest
import torch

from mfs_core.backends.base import Backend
from mfs_core.errors import ContextWindowError
from mfs_core.types import GenerationRequest

QUESTION = "Tom has 3 apples. Then Tom buys 4 more apples. How many apples does Tom have now?"
LONG_QUESTION = (
    "There are 5 rows of tickets with 5 in each row. Nina triples the tickets. After that, Nina removes "
    "30 tickets. Later, 12 more tickets arrive. How many tickets does Nina have now?"
)


@pytest.fixture(scope="module")
def prompts(demo_engine):
    return demo_engine.render(QUESTION), demo_engine.render(LONG_QUESTION)


def _forward_logprob_sum(backend, prompt: str, token_ids) -> float:
    """Sum of log_softmax over one separate forward pass of prompt + continuation."""
    prompt_ids = backend.encode_prompt(prompt)
    ids = torch.tensor([prompt_ids + list(token_ids)])
    with torch.inference_mode():
        logits = backend.model(input_ids=ids).logits[0].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    positions = range(len(prompt_ids) - 1, len(prompt_ids) + len(token_ids) - 1)
    return float(sum(logprobs[p, t] for p, t in zip(positions, token_ids)))


def test_backend_satisfies_the_protocol(demo_backend):
    assert isinstance(demo_backend, Backend)
    assert demo_backend.num_parameters == sum(p.numel() for p in demo_backend.model.parameters())
    assert demo_backend.context_window == demo_backend.model.config.max_position_embeddings
    assert demo_backend.count_tokens("12 + 5 = 17") == len(demo_backend.tokenizer("12 + 5 = 17", add_special_tokens=False)["input_ids"])


def test_logprob_sum_matches_a_separate_forward_pass(demo_backend, prompts):
    request = GenerationRequest(prompt=prompts[0], n=4, max_tokens=40, stop=("<end_of_reasoning>",), temperature=0.7, seed=3)
    conts = demo_backend.generate([request])[0]
    assert len(conts) == 4
    for cont in conts:
        assert cont.num_tokens == len(cont.token_ids) > 0
        assert cont.prompt_tokens == len(demo_backend.encode_prompt(prompts[0]))
        expected = _forward_logprob_sum(demo_backend, prompts[0], cont.token_ids)
        assert cont.logprob_sum == pytest.approx(expected, abs=1e-4)


def test_logprobs_are_raw_whatever_the_temperature(demo_backend, prompts):
    # Same seed, different temperature: the reported log-prob of a sampled sequence is the
    # temperature-1 one, so it equals the forward pass regardless of the sampling temperature.
    for temperature in (0.3, 1.7):
        request = GenerationRequest(prompt=prompts[0], n=2, max_tokens=16, temperature=temperature, seed=5)
        for cont in demo_backend.generate([request])[0]:
            assert cont.logprob_sum == pytest.approx(_forward_logprob_sum(demo_backend, prompts[0], cont.token_ids), abs=1e-4)


def test_prompt_alone_and_in_a_batch_with_a_longer_prompt_agree(demo_backend, prompts):
    short = GenerationRequest(prompt=prompts[0], n=3, max_tokens=30, stop=("\n",), temperature=0.7, seed=11)
    long = GenerationRequest(prompt=prompts[1], n=2, max_tokens=30, temperature=0.7, seed=12)
    alone = demo_backend.generate([short])[0]
    batched = demo_backend.generate([long, short])[1]
    assert [c.token_ids for c in alone] == [c.token_ids for c in batched]
    for a, b in zip(alone, batched):
        assert a.logprob_sum == pytest.approx(b.logprob_sum, abs=1e-4)
        assert a.text == b.text


def test_stop_strings_cut_text_but_keep_the_token(demo_backend, prompts):
    request = GenerationRequest(prompt=prompts[0], n=6, max_tokens=30, stop=("\n",), temperature=1.0, seed=2)
    for cont in demo_backend.generate([request])[0]:
        if cont.finish_reason == "stop":
            assert "\n" not in cont.text and cont.stop_reason == "\n"
            decoded = demo_backend.tokenizer.decode(list(cont.token_ids))
            assert decoded.startswith(cont.text) and "\n" in decoded[len(cont.text):]
        else:
            assert cont.stop_reason is None


def test_each_sequence_stops_on_its_own_and_respects_max_tokens(demo_backend, prompts):
    request = GenerationRequest(prompt=prompts[0], n=8, max_tokens=5, temperature=1.0, seed=4)
    conts = demo_backend.generate([request])[0]
    assert all(c.num_tokens <= 5 for c in conts)
    assert all(c.finish_reason == "length" for c in conts if c.num_tokens == 5 and c.finish_reason != "eos")
    unlimited = GenerationRequest(prompt=prompts[0], n=4, max_tokens=120, stop=("<end_of_reasoning>",), temperature=0.7, seed=4)
    lengths = {c.num_tokens for c in demo_backend.generate([unlimited])[0]}
    assert len(lengths) >= 1 and max(lengths) <= 120


def test_same_seed_same_samples(demo_backend, prompts):
    request = GenerationRequest(prompt=prompts[0], n=3, max_tokens=20, temperature=0.7, seed=99)
    first = demo_backend.generate([request])[0]
    second = demo_backend.generate([request])[0]
    assert [c.token_ids for c in first] == [c.token_ids for c in second]


def test_prompt_over_the_context_window_is_rejected(demo_backend):
    prompt = "apples " * (demo_backend.context_window + 10)
    with pytest.raises(ContextWindowError, match=r"does not fit the context window of \d+ tokens"):
        demo_backend.generate([GenerationRequest(prompt=prompt, n=1, max_tokens=4)])


# --- triggered choices (GenerationRequest.triggered_choice) -------------------------------
TOOL_CALL_NAME = '<tool_call>\n{"name": "'


@pytest.fixture(scope="module")
def tool_prompt(demo_engine):
    tools = [{"type": "function", "function": {"name": name, "description": description, "parameters": {
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"], "type": "object"}}}
        for name, description in (("add", "Add two integers and return the sum."),
                                  ("multiply", "Multiply two integers and return the product."))]
    question = "Tom has 12 apples. He buys 30 more apples. How many apples does Tom have now?"
    return demo_engine.render_messages([{"role": "user", "content": question}], tools=tools)


def _called_names(text: str) -> list[str]:
    return [part.split('"')[0] for part in text.split(TOOL_CALL_NAME)[1:]]


def test_a_triggered_choice_keeps_call_names_to_the_choices(demo_backend, tool_prompt):
    from mfs_core.types import TriggeredChoice

    choice = TriggeredChoice(TOOL_CALL_NAME, ('add"', 'multiply"'))
    free, kept = demo_backend.generate([
        GenerationRequest(tool_prompt, n=8, max_tokens=40, temperature=0.7, seed=1),
        GenerationRequest(tool_prompt, n=8, max_tokens=40, temperature=0.7, seed=1, triggered_choice=choice),
    ])
    free_names = [n for c in free for n in _called_names(c.text)]
    kept_names = [n for c in kept for n in _called_names(c.text)]
    assert set(free_names) - {"add", "multiply"}  # left free, the model names tools it was trained on
    assert kept_names and set(kept_names) <= {"add", "multiply"}
    for cont in kept:  # the reported log-probs stay the raw ones
        assert cont.logprob_sum == pytest.approx(_forward_logprob_sum(demo_backend, tool_prompt, cont.token_ids), abs=1e-4)


def test_a_prompt_that_ends_with_the_trigger_starts_on_a_choice(demo_backend, prompts):
    from mfs_core.types import TriggeredChoice

    choice = TriggeredChoice("The reasoning steps are:\n\n", ("4 + 3 = 7", "3 + 4 = 7"))
    request = GenerationRequest(prompts[0], n=6, max_tokens=12, temperature=1.0, seed=2, triggered_choice=choice)
    greedy = GenerationRequest(prompts[0], n=1, max_tokens=12, greedy=True, triggered_choice=choice)
    sampled, [best] = demo_backend.generate([request, greedy])
    assert all(c.text.startswith(("4 + 3 = 7", "3 + 4 = 7")) for c in [*sampled, best])


def _forward_token_confidences(backend, prompt: str, token_ids, k: int) -> list[float]:
    """DeepConf's token confidence over the top k of one separate forward pass of prompt + continuation."""
    prompt_ids = backend.encode_prompt(prompt)
    ids = torch.tensor([prompt_ids + list(token_ids)])
    with torch.inference_mode():
        logits = backend.model(input_ids=ids).logits[0].float()
    top = torch.topk(torch.log_softmax(logits, dim=-1), k, dim=-1).values
    positions = range(len(prompt_ids) - 1, len(prompt_ids) + len(token_ids) - 1)
    return [-float(top[p].mean()) for p in positions]


def test_top_logprobs_give_each_token_its_confidence_over_the_raw_top_k(demo_backend, prompts):
    # Two requests in one batch, one asking k = 5 at temperature 0.7, one asking nothing: the
    # confidences are those of a separate forward pass (raw log-probs, whatever the temperature).
    asked = GenerationRequest(prompt=prompts[0], n=2, max_tokens=12, temperature=0.7, seed=4, top_logprobs=5)
    plain = GenerationRequest(prompt=prompts[1], n=1, max_tokens=12, seed=4)
    conts, (other,) = demo_backend.generate([asked, plain])
    assert other.token_confidences == ()
    for cont in conts:
        assert len(cont.token_confidences) == cont.num_tokens > 0
        expected = _forward_token_confidences(demo_backend, prompts[0], cont.token_ids, 5)
        assert cont.token_confidences == pytest.approx(expected, abs=1e-4)
        assert all(c >= 0 for c in cont.token_confidences)
