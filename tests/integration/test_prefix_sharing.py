"""Shared-prefix prefill and incremental stop checks of the transformers backend.

The backend whose prefill planner does not share (``PrefillPlanner(..., share=False)``: every
row's whole prompt prefilled, the path of models whose cache the trie cannot fill) must sample
the same tokens for the same seeds.
"""

from __future__ import annotations

import pytest

from mfs_core.backends.hf_prefill import PrefillPlanner, PrefillStats
from mfs_core.backends.transformers import TransformersBackend, _Row
from mfs_core.types import GenerationRequest

QUESTION = "Tom has 3 apples. Then Tom buys 4 more apples. How many apples does Tom have now?"
OTHER = "There are 5 rows of tickets with 5 in each row. Nina triples the tickets. How many tickets does Nina have now?"


@pytest.fixture(scope="module")
def backends(demo_backend):
    shared = TransformersBackend(demo_backend.model, demo_backend.tokenizer, "mfs-demo")
    plain = TransformersBackend(demo_backend.model, demo_backend.tokenizer, "mfs-demo",
                                prefill=PrefillPlanner(demo_backend.model, demo_backend.tokenizer.pad_token_id, share=False))
    return shared, plain


@pytest.fixture(scope="module")
def round_requests(demo_engine):
    """A search-like round: n > 1, a repeated prompt, beams that extend one prompt, another question."""
    q, other = demo_engine.render(QUESTION), demo_engine.render(OTHER)
    return [
        GenerationRequest(prompt=q, n=4, max_tokens=40, stop=("\n", "<end_of_reasoning>"), temperature=0.8, seed=1),
        GenerationRequest(prompt=q + "Tom has 3", n=3, max_tokens=40, stop=("\n",), temperature=0.8, seed=2),
        GenerationRequest(prompt=q + "Tom has 3 apples.", n=2, max_tokens=40, stop=("<end_of_reasoning>",), seed=3),
        GenerationRequest(prompt=q, n=2, max_tokens=40, seed=4),
        GenerationRequest(prompt=other, n=3, max_tokens=40, stop=("\n",), top_p=0.9, seed=5),
        GenerationRequest(prompt=other + "There", n=1, max_tokens=40, greedy=True),
    ]


def test_shared_prefill_samples_what_the_plain_prefill_samples(backends, round_requests):
    shared, plain = backends
    new, old = shared.generate(round_requests), plain.generate(round_requests)
    for conts_new, conts_old in zip(new, old):
        assert [c.token_ids for c in conts_new] == [c.token_ids for c in conts_old]
        for a, b in zip(conts_new, conts_old):
            assert (a.text, a.finish_reason, a.stop_reason, a.prompt_tokens) == (b.text, b.finish_reason, b.stop_reason, b.prompt_tokens)
            # float32 sums over batches of other shapes: equal to rounding (measured <= 1.1e-5 nats per continuation)
            assert a.logprob_sum == pytest.approx(b.logprob_sum, abs=1e-4)


def test_one_prompt_with_n_samples_prefills_once(backends, demo_engine):
    shared, plain = backends
    request = GenerationRequest(prompt=demo_engine.render(QUESTION), n=6, max_tokens=24, temperature=0.9, seed=8)
    prompt_tokens = len(shared.encode_prompt(request.prompt))
    shared.prefill_stats = PrefillStats()
    plain.prefill_stats = PrefillStats()
    new, old = shared.generate([request])[0], plain.generate([request])[0]
    assert [c.token_ids for c in new] == [c.token_ids for c in old]
    assert [c.logprob_sum for c in new] == pytest.approx([c.logprob_sum for c in old], abs=1e-5)
    assert shared.prefill_stats.prefilled_tokens == prompt_tokens
    assert shared.prefill_stats.forward_passes == 1
    assert plain.prefill_stats.prefilled_tokens == 6 * prompt_tokens
    assert shared.prefill_stats.row_prompt_tokens == plain.prefill_stats.row_prompt_tokens == 6 * prompt_tokens


def test_the_counter_counts_each_trie_node_once(backends, round_requests):
    shared, plain = backends
    ids = [tuple(shared.encode_prompt(r.prompt)) for r in round_requests]
    # the trie's nodes are the distinct non-empty prefixes of the prompts
    distinct = len({prompt[:k] for prompt in ids for k in range(1, len(prompt) + 1)})
    assert distinct < sum(len(prompt) for prompt in set(ids))  # the prompts do share prefixes
    rows = sum(r.n * len(i) for r, i in zip(round_requests, ids))
    shared.prefill_stats = PrefillStats()
    plain.prefill_stats = PrefillStats()
    shared.generate(round_requests)
    plain.generate(round_requests)
    assert shared.prefill_stats.distinct_prompt_tokens == plain.prefill_stats.distinct_prompt_tokens == distinct
    assert shared.prefill_stats.prefilled_tokens == distinct
    assert shared.prefill_stats.prefill_ratio == 1.0
    assert plain.prefill_stats.prefilled_tokens == plain.prefill_stats.row_prompt_tokens == rows
    assert plain.prefill_stats.forward_passes == 1 < shared.prefill_stats.forward_passes


def test_distinct_prompts_with_no_common_first_token(backends):
    shared, plain = backends
    requests = [GenerationRequest(prompt=p, n=2, max_tokens=12, temperature=0.8, seed=i)
                for i, p in enumerate(["12 + 5 = ", "The answer is ", "7 * 3 = "])]
    new, old = shared.generate(requests), plain.generate(requests)
    assert [[c.token_ids for c in r] for r in new] == [[c.token_ids for c in r] for r in old]


def _feed(backend, text: str, stop: tuple[str, ...]) -> tuple[int, _Row]:
    """Append ``text``'s tokens to a row one at a time, checking stops after each."""
    ids = backend.tokenizer.encode(text, add_special_tokens=False)
    row = _Row(request=0, prompt_tokens=0, max_tokens=100, stop=stop, tokens=[])
    for count, token in enumerate(ids, start=1):
        row.tokens.append(token)
        backend._check_stops([row])
        if row.finish_reason is not None:
            return count, row
    return len(ids), row


@pytest.mark.parametrize(
    ("text", "stop", "tokens_read", "cut"),
    [
        # "5 = 1" spans the tokens '5', ' =', ' ', '1'; found at the '1' (token 8)
        ("12 + 5 = 17\nThe answer is 17", ("5 = 1",), 8, "12 + "),
        # a stop string after many tokens, straddling '\n', 'The'
        ("12 + 5 = 17\nThe answer is 17", ("7\nTh", "answer"), 11, "12 + 5 = 1"),
        # '≥' is three byte-level tokens; the stop string needs all of them
        ("x ≥ 3 and é", ("≥ 3",), 7, "x "),
        ("x ≥ 3 and é", ("é",), 11, "x ≥ 3 and "),
        ("12 + 5 = 17", ("18",), 9, None),
    ],
)
def test_incremental_stop_check_finds_strings_split_across_tokens(demo_backend, text, stop, tokens_read, cut):
    read, row = _feed(demo_backend, text, stop)
    assert read == tokens_read
    if cut is None:
        assert row.finish_reason is None
    else:
        assert (row.finish_reason, row.text) == ("stop", cut)
        assert row.stop_reason in stop

