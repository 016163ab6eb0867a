"""The transformers backend's KV cache layer with room to grow: the same keys and
values as ``DynamicLayer``'s ``torch.cat``, written in place; the 64-sample prefill benchmark is
``experiments/benchmarks/prefill_sharing.py``."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
cache_utils = pytest.importorskip("transformers.cache_utils")

from mfs_core.backends.hf_headroom import HeadroomLayer, headroom_cache  # noqa: E402


def states(batch: int, length: int, seed: int) -> tuple:
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, 2, length, 4, generator=generator), torch.randn(batch, 2, length, 3, generator=generator))


def test_updates_equal_dynamic_layers_and_write_in_place() -> None:
    reference, grown = cache_utils.DynamicLayer(), HeadroomLayer(headroom=2)
    prompt = states(3, 5, 0)
    reference.update(*prompt)
    grown.fill(*prompt)
    buffer = grown.keys.data_ptr()
    for step in range(4):  # two within the room, then past it: the buffer is reallocated once, 2 + 1 more
        token = states(3, 1, step + 1)
        expected = reference.update(*token)
        got = grown.update(*token)
        assert all(torch.equal(a, b) for a, b in zip(expected, got))
        assert grown.get_seq_length() == reference.get_seq_length() == 6 + step
        if step < 2:
            assert grown.keys.data_ptr() == buffer  # written in place, no copy of the cache
    assert grown.keys.data_ptr() != buffer  # full after two: grown once
    assert grown.values.shape == (3, 2, 9, 3)  # value head size kept apart from the keys'


def test_selected_rows_keep_their_states_and_their_room() -> None:
    reference, grown = cache_utils.DynamicLayer(), HeadroomLayer(headroom=3)
    reference.update(*states(4, 5, 0))
    grown.fill(*states(4, 5, 0))
    index = torch.tensor([3, 1])
    reference.batch_select_indices(index)
    grown.batch_select_indices(index)
    token = states(2, 1, 7)
    assert all(torch.equal(a, b) for a, b in zip(reference.update(*token), grown.update(*token)))


def test_fill_rows_lays_the_distinct_prompts_out_once() -> None:
    keys, values = states(2, 5, 0)  # two distinct prompts
    rows = torch.tensor([1, 0, 1, 1])
    grown = HeadroomLayer(headroom=4)
    grown.fill_rows(keys, values, rows)
    assert torch.equal(grown.keys, keys.index_select(0, rows)) and torch.equal(grown.values, values.index_select(0, rows))
    reference = cache_utils.DynamicLayer()
    reference.update(keys.index_select(0, rows), values.index_select(0, rows))
    token = states(4, 1, 3)
    assert all(torch.equal(a, b) for a, b in zip(reference.update(*token), grown.update(*token)))


def test_headroom_cache_converts_only_filled_full_attention_layers() -> None:
    cache = cache_utils.DynamicCache()
    cache.update(*states(2, 5, 0), layer_idx=0)
    cache.update(*states(2, 5, 1), layer_idx=1)
    before = [layer.keys.clone() for layer in cache.layers]
    headroom_cache(cache, 8)
    assert [type(layer).__name__ for layer in cache.layers] == ["HeadroomLayer", "HeadroomLayer"]
    assert all(torch.equal(layer.keys, kept) for layer, kept in zip(cache.layers, before))
    keys, _ = cache.update(*states(2, 1, 2), layer_idx=0)
    assert keys.shape == (2, 2, 6, 4) and cache.get_seq_length() == 6
