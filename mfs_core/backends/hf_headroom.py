"""A KV cache layer with room to grow, for the transformers backend's token-by-token sampling.

transformers' ``DynamicLayer.update`` appends each new token with ``torch.cat``, which copies the
whole cache: with 64 rows sampled from one 1,449-token prompt (SmolLM2-135M, float32: 67 MB of
keys and values per row) each token step copied 4.3 GB, 41-44% of the call's time in ``aten::cat``
(``experiments/benchmarks/prefill_sharing.py --profile``). :class:`HeadroomLayer` keeps keys and values in buffers with
room for the tokens still to come and writes each step in place, handing attention a view of the
filled part (``[batch, heads, length, head_dim]``, last dimension contiguous), so the cache is
materialised once, when the prefill's rows are laid out (:func:`headroom_cache`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["HeadroomLayer", "headroom_cache"]


def _layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class HeadroomLayer(DynamicLayer):
        """A ``DynamicLayer`` whose keys and values are views of buffers with ``headroom`` free positions.

        ``update`` writes the new positions into the buffers (reallocated, ``headroom`` more,
        only when full) and returns views of the filled part; ``batch_select_indices`` selects
        buffer rows. Everything else (``get_seq_length``, masks) reads ``keys`` and ``values`` as
        ``DynamicLayer`` does. Equal outputs to ``DynamicLayer`` (the same values, laid out with a
        larger stride).
        """

        def __init__(self, headroom: int) -> None:
            super().__init__()
            self.headroom = max(1, int(headroom))
            self._key_buffer: Any = None
            self._value_buffer: Any = None

        def fill(self, keys: Any, values: Any) -> None:
            """Start from ``keys`` and ``values`` ``[batch, heads, length, dim]`` (copied into the buffers)."""
            if not self.is_initialized:
                self.lazy_initialization(keys, values)
            self._allocate(keys, values, self.headroom)

        def fill_rows(self, keys: Any, values: Any, rows: Any) -> None:
            """Start from the distinct rows ``keys`` and ``values`` ``[U, heads, length, dim]``: row ``b`` of the
            cache is ``rows[b]`` (``[B]`` indices into U), written straight into the buffers (one copy)."""
            if not self.is_initialized:
                self.lazy_initialization(keys, values)
            batch, heads, length = len(rows), keys.shape[1], keys.shape[2]
            self._key_buffer = keys.new_empty((batch, heads, length + self.headroom, keys.shape[-1]))
            self._value_buffer = values.new_empty((batch, heads, length + self.headroom, values.shape[-1]))
            for u in range(keys.shape[0]):
                chosen = rows == u
                self._key_buffer[chosen, :, :length] = keys[u]
                self._value_buffer[chosen, :, :length] = values[u]
            self.keys = self._key_buffer[..., :length, :]
            self.values = self._value_buffer[..., :length, :]

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            """Append ``key_states`` and ``value_states`` ``[batch, heads, new, dim]`` in place (the buffers
            grow by ``new + headroom`` positions only when full, or when ``keys`` were replaced from outside).

            Returns:
                ``(keys, values)``: views of the filled part, ``[batch, heads, length + new, dim]``.
            """
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            length = self.get_seq_length()
            new = key_states.shape[-2]
            buffer = self._key_buffer
            if (buffer is None or self.keys.data_ptr() != buffer.data_ptr() or buffer.shape[0] != key_states.shape[0]
                    or length + new > buffer.shape[-2]):  # none yet, replaced from outside, or full
                if length:
                    self._allocate(self.keys, self.values, new + self.headroom)
                else:
                    self._allocate(key_states[..., :0, :], value_states[..., :0, :], new + self.headroom)
            self._key_buffer[..., length:length + new, :] = key_states
            self._value_buffer[..., length:length + new, :] = value_states
            self.keys = self._key_buffer[..., :length + new, :]
            self.values = self._value_buffer[..., :length + new, :]
            return self.keys, self.values

        def batch_select_indices(self, indices: Any) -> None:
            """Keep only the batch rows ``indices`` (a long tensor), buffers and their free room included."""
            length = self.get_seq_length()
            if length and self._key_buffer is not None and self.keys.data_ptr() == self._key_buffer.data_ptr():
                self._key_buffer = self._key_buffer[indices, ...]
                self._value_buffer = self._value_buffer[indices, ...]
                self.keys = self._key_buffer[..., :length, :]
                self.values = self._value_buffer[..., :length, :]
            else:
                super().batch_select_indices(indices)

        def _allocate(self, keys: Any, values: Any, room: int) -> None:
            """Buffers holding ``keys`` and ``values`` ``[batch, heads, length, dim]`` and ``room`` free positions."""
            batch, heads, length, _ = keys.shape
            self._key_buffer = keys.new_empty((batch, heads, length + room, keys.shape[-1]))
            self._value_buffer = values.new_empty((batch, heads, length + room, values.shape[-1]))
            if length:
                self._key_buffer[..., :length, :] = keys
                self._value_buffer[..., :length, :] = values
            self.keys = self._key_buffer[..., :length, :]
            self.values = self._value_buffer[..., :length, :]

    return HeadroomLayer


_HEADROOM_LAYER: type | None = None


def HeadroomLayer(headroom: int) -> Any:  # noqa: N802 - a class made on first use (transformers is imported late)
    """A :class:`HeadroomLayer` (built on the installed transformers' ``DynamicLayer``)."""
    global _HEADROOM_LAYER
    if _HEADROOM_LAYER is None:
        _HEADROOM_LAYER = _layer_class()
    return _HEADROOM_LAYER(headroom)


def headroom_cache(cache: Any, headroom: int) -> Any:
    """``cache`` (a ``DynamicCache``) with each full-attention ``DynamicLayer`` replaced by a
    :class:`HeadroomLayer` holding the same keys and values and ``headroom`` free positions
    (tokens: the most a row of the call still samples); sliding-window and other layers are kept.
    One copy of the cache; later token steps write in place.
    """
    from transformers.cache_utils import DynamicLayer

    for i, layer in enumerate(cache.layers):
        if type(layer) is DynamicLayer and layer.is_initialized and layer.get_seq_length() > 0:
            grown = HeadroomLayer(headroom)
            grown.fill(layer.keys, layer.values)
            cache.layers[i] = grown
    return cache
