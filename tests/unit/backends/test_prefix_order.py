"""Requests that share a prompt prefix are sent together: ``_hf.prefix_order``."""

from __future__ import annotations

from mfs_core.backends._hf import prefix_order
from mfs_core.types import GenerationRequest
from tests.vllm_stand_ins import EOS, make_backend


def test_an_order_that_already_groups_prefixes_is_kept():
    # one decoder's round: beams of one question, then another question's beams
    assert prefix_order([[1, 2, 3], [1, 2, 4], [1, 5], [7, 8]]) == [0, 1, 2, 3]
    assert prefix_order(["qa", "qb", "r"]) == [0, 1, 2]
    assert prefix_order([]) == []


def test_prompts_sharing_a_prefix_are_brought_together_in_first_appearance_order():
    # two callers decoding the same question: their requests interleave in a round
    assert prefix_order([[1, 2, 3], [9, 9], [1, 2, 3], [9, 8], [1, 4]]) == [0, 2, 4, 1, 3]
    # a prompt that is a prefix of an earlier one stays after it; a deeper branch groups first
    assert prefix_order(["ax", "b", "a", "axy"]) == [0, 3, 2, 1]


def test_characters_that_look_like_markers_are_plain_tokens():
    assert prefix_order(["#a", "b#", "#b"]) == [0, 2, 1]


def test_vllm_gets_shared_prefixes_together_and_results_come_back_in_request_order():
    backend, llm = make_backend()
    requests = [GenerationRequest(prompt="xa1", n=1), GenerationRequest(prompt="yb1", n=2),
                GenerationRequest(prompt="xa2", n=1)]
    results = backend.generate(requests)
    sent = [bytes(c - 100 for c in p["prompt_token_ids"][1:]).decode() for p in llm.calls[0]["prompts"]]
    assert sent == ["xa1", "xa2", "yb1"]
    assert [p.n for p in llm.calls[0]["params"]] == [1, 1, 2]
    # the stand-in names each output after its position in the sent list
    assert [[c.text for c in r] for r in results] == [["r0s0"], ["r2s0", "r2s1"], ["r1s0"]]
    assert results[1][1].token_ids == (11, 12, EOS)
