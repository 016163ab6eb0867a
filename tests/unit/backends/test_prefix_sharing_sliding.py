"""Shared-prefix prefill on a hybrid sliding-window cache (Gemma 3) samples what the plain prefill samples.

Uses a tiny random Gemma 3 (two sliding-window layers with a window of 4 tokens, one
full-attention layer) and a word-level tokenizer built in memory: no model files. The
prompts share prefixes longer than the window and continue them by segments of different
lengths, so the shared prefill pads segments and rotates cache rows between trie levels.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("transformers.models.gemma3")

from mfs_core.backends.hf_prefill import PrefillPlanner, PrefillStats, _trie_size  # noqa: E402
from mfs_core.backends.transformers import TransformersBackend  # noqa: E402
from mfs_core.types import GenerationRequest  # noqa: E402

WORDS = ["<pad>", "<eos>", "<bos>", "<unk>", *[f"w{i}" for i in range(28)]]
WINDOW = 4


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel(vocab={word: i for i, word in enumerate(WORDS)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
                                   unk_token="<unk>")


def _model(sliding_window: int = WINDOW):
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    config = Gemma3TextConfig(vocab_size=len(WORDS), hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=8, query_pre_attn_scalar=8,
                              max_position_embeddings=128, sliding_window=sliding_window,
                              layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                              initializer_range=0.3, pad_token_id=0, eos_token_id=1, bos_token_id=2)
    return Gemma3ForCausalLM(config).eval()


@pytest.fixture(scope="module")
def backends():
    model, tokenizer = _model(), _tokenizer()
    shared = TransformersBackend(model, tokenizer, "tiny-gemma3", batch_size=64)
    plain = TransformersBackend(model, tokenizer, "tiny-gemma3", batch_size=64,
                                prefill=PrefillPlanner(model, tokenizer.pad_token_id, share=False))
    return shared, plain


def _words(*numbers: int) -> str:
    return " ".join(f"w{n}" for n in numbers)


PREFIX = _words(4, 9, 17, 5, 22, 8, 13, 6, 27, 11, 19)  # 11 tokens: longer than the window


def _round() -> list[GenerationRequest]:
    """An MFS-like round: one question sampled n times, beams extending it by 1 to 7 tokens, another prompt."""
    return [
        GenerationRequest(prompt=PREFIX, n=3, max_tokens=10, temperature=0.9, seed=1),
        GenerationRequest(prompt=PREFIX + " w7", n=2, max_tokens=10, temperature=0.9, seed=2),
        GenerationRequest(prompt=PREFIX + " " + _words(7, 12, 30, 5, 9, 14, 21), n=2, max_tokens=10, seed=3),
        GenerationRequest(prompt=PREFIX + " " + _words(7, 12, 30, 5, 9, 14, 21, 4, 4), n=1, max_tokens=10,
                          greedy=True),
        GenerationRequest(prompt=PREFIX + " " + _words(10, 20), n=2, max_tokens=10, temperature=1.0, seed=4),
        GenerationRequest(prompt=_words(12, 15, 18, 21, 24, 27, 30, 6, 9), n=2, max_tokens=10, seed=5),
        GenerationRequest(prompt=PREFIX, n=1, max_tokens=10, greedy=True),
    ]


def test_the_model_has_a_hybrid_sliding_window_cache(backends):
    from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer

    shared, _ = backends
    layers = DynamicCache(config=shared.model.config).layers
    assert [type(layer) for layer in layers] == [DynamicSlidingWindowLayer, DynamicSlidingWindowLayer, DynamicLayer]


def test_shared_prefill_samples_what_the_plain_prefill_samples(backends):
    shared, plain = backends
    requests = _round()
    shared.prefill_stats, plain.prefill_stats = PrefillStats(), PrefillStats()
    new, old = shared.generate(requests), plain.generate(requests)
    for conts_new, conts_old in zip(new, old):
        assert [c.token_ids for c in conts_new] == [c.token_ids for c in conts_old]
        for a, b in zip(conts_new, conts_old):
            assert (a.text, a.finish_reason, a.prompt_tokens) == (b.text, b.finish_reason, b.prompt_tokens)
            assert a.logprob_sum == pytest.approx(b.logprob_sum, abs=1e-5)
    # the sharing happened: every trie node once, in several levels
    ids = [shared.encode_prompt(r.prompt) for r in requests]
    assert shared.prefill_stats.prefilled_tokens == shared.prefill_stats.distinct_prompt_tokens == _trie_size(ids)
    assert shared.prefill_stats.forward_passes > 1
    assert plain.prefill_stats.prefilled_tokens == sum(r.n * len(i) for r, i in zip(requests, ids))


def test_greedy_rows_match_each_prompt_run_alone(backends):
    shared, plain = backends
    requests = [GenerationRequest(prompt=r.prompt, n=1, max_tokens=10, greedy=True) for r in _round()]
    together = shared.generate(requests)
    for request, conts in zip(requests, together):
        alone = plain.generate([request])[0][0]
        assert conts[0].token_ids == alone.token_ids
        assert conts[0].logprob_sum == pytest.approx(alone.logprob_sum, abs=1e-5)


def test_the_window_matters_for_these_prompts(backends):
    """A wider window changes the log-probs, so the tests above would see a wrong window."""
    shared, _ = backends
    wide = TransformersBackend(_model(sliding_window=64), shared.tokenizer, "tiny-gemma3-wide")
    requests = [GenerationRequest(prompt=r.prompt, n=1, max_tokens=10, greedy=True) for r in _round()]
    narrow_out, wide_out = shared.generate(requests), wide.generate(requests)
    differences = [abs(a[0].logprob_sum - b[0].logprob_sum) for a, b in zip(narrow_out, wide_out)]
    assert max(differences) > 1e-2
