"""Greedy requests in the transformers backend equal the argmax of a forward pass.

Uses a tiny random Llama and a word-level tokenizer built in memory: no model files.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from mfs_core.backends.transformers import TransformersBackend  # noqa: E402
from mfs_core.types import GenerationRequest  # noqa: E402

WORDS = ["<pad>", "<s>", "</s>", "<unk>", *[f"w{i}" for i in range(28)]]


def _tiny_backend(seed: int = 0) -> TransformersBackend:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {word: i for i, word in enumerate(WORDS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                        unk_token="<unk>")
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(WORDS), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model = LlamaForCausalLM(config).eval()
    return TransformersBackend(model, tokenizer, model_name="tiny-random", batch_size=8)


def _argmax_path(backend: TransformersBackend, prompt: str, steps: int) -> list[int]:
    """Greedy continuation by full forward passes (no KV cache): argmax at each position, up to EOS."""
    ids = list(backend.encode_prompt(prompt))
    out: list[int] = []
    with torch.inference_mode():
        for _ in range(steps):
            logits = backend.model(input_ids=torch.tensor([ids])).logits[0, -1]
            token = int(torch.argmax(logits))
            out.append(token)
            ids.append(token)
            if token == backend.tokenizer.eos_token_id:
                break
    return out


def test_greedy_equals_argmax_of_forward_passes() -> None:
    backend = _tiny_backend()
    prompts = ["w1 w2 w3", "w7 w7 w9 w10 w11", "w20", "w4 w4"]
    requests = [GenerationRequest(prompt=p, n=2, max_tokens=6, greedy=True, temperature=0.7, seed=s)
                for p, s in zip(prompts, range(len(prompts)))]
    outputs = backend.generate(requests)
    lengths = set()
    for prompt, conts in zip(prompts, outputs):
        expected = _argmax_path(backend, prompt, 6)
        lengths.add(len(expected))
        assert [list(c.token_ids) for c in conts] == [expected, expected]
        reason = "eos" if expected[-1] == backend.tokenizer.eos_token_id else "length"
        assert all(c.finish_reason == reason for c in conts)
    assert 6 in lengths  # at least one prompt runs the full budget


def test_greedy_logprob_is_the_raw_logprob_of_the_argmax_tokens() -> None:
    backend = _tiny_backend(seed=3)
    prompt = "w4 w5"
    cont = backend.generate([GenerationRequest(prompt=prompt, max_tokens=4, greedy=True)])[0][0]
    ids = list(backend.encode_prompt(prompt))
    total = 0.0
    with torch.inference_mode():
        for token in cont.token_ids:
            logits = backend.model(input_ids=torch.tensor([ids])).logits[0, -1]
            total += float(torch.log_softmax(logits.float(), dim=-1)[token])
            ids.append(token)
    assert cont.logprob_sum == pytest.approx(total, abs=1e-4)


def test_greedy_ignores_the_seed_but_sampling_does_not() -> None:
    backend = _tiny_backend(seed=5)
    greedy = [backend.generate([GenerationRequest(prompt="w3", max_tokens=8, greedy=True, seed=s)])[0][0].token_ids
              for s in (0, 1, 2)]
    assert greedy[0] == greedy[1] == greedy[2]
    sampled = {backend.generate([GenerationRequest(prompt="w3", max_tokens=8, temperature=5.0, seed=s)])[0][0].token_ids
               for s in range(6)}
    assert len(sampled) > 1


def test_greedy_ties_go_to_the_first_index() -> None:
    logits = torch.tensor([[0.5, 2.0, 2.0, 1.0]])
    assert int(logits.argmax(dim=-1)) == 1
