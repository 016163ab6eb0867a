"""The transformers backend's prefill planner (:class:`PrefillPlanner`, a part of
:class:`~mfs_core.backends.transformers.TransformersBackend`): how a chunk's prompts reach the KV cache.

Within one chunk, every distinct prompt is prefilled once, and the prefix that prompts share (a
few-shot prefix and question shared by every beam, a beam's path shared by its candidates) once
per radix-tree node: the distinct prompts are grouped into a token trie, each level of the trie is
one batched forward pass that continues its parent's KV cache, and the finished caches are fanned
out to the ``n`` rows that continue them (the backend's module docstring has the details: padding,
rotation, sliding-window caches). Models whose cache the trie cannot fill (chunked or linear
attention) get one left-padded row per prompt instead. Either way the full-attention layers of
the result have room for the tokens still to be sampled (:mod:`mfs_core.backends.hf_headroom`).

:class:`PrefillPlanner` is built with the model and the padding token id and keeps the
:class:`PrefillStats` counters; the trie and cache helpers are module functions.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from mfs_core.backends.hf_headroom import HeadroomLayer, headroom_cache

__all__ = ["Prefill", "PrefillPlanner", "PrefillStats", "cache_argument", "output_cache"]

logger = logging.getLogger(__name__)


@dataclass
class PrefillStats:
    """Prompt-token counters of a :class:`PrefillPlanner` (and so of its backend) since it was built (or reset).

    Attributes:
        calls: ``generate`` calls.
        rows: sequences sampled (``sum(request.n)``).
        row_prompt_tokens: prompt tokens summed over rows, what a prefill of one row per
            sample would run (tokens).
        distinct_prompt_tokens: nodes of the token trie of each call's prompts, summed over
            calls: the fewest prompt tokens any prefix-sharing prefill can run (tokens).
        prefilled_tokens: prompt tokens the model actually ran in prefill, padding excluded
            (tokens).
        padded_prefill_tokens: positions run in prefill, padding included (tokens).
        forward_passes: prefill forward passes (a shared-prefix prefill makes one per trie level).
    """

    calls: int = 0
    rows: int = 0
    row_prompt_tokens: int = 0
    distinct_prompt_tokens: int = 0
    prefilled_tokens: int = 0
    padded_prefill_tokens: int = 0
    forward_passes: int = 0

    @property
    def prefill_ratio(self) -> float:
        """``prefilled_tokens / distinct_prompt_tokens`` (1.0 is the fewest possible; 0 if none)."""
        return self.prefilled_tokens / self.distinct_prompt_tokens if self.distinct_prompt_tokens else 0.0


class Prefill(NamedTuple):
    """What a prefill hands the token-by-token sampling of a chunk of ``B`` rows.

    Attributes:
        cache: the KV cache (``B`` rows; full-attention layers with room to grow in place).
        logits: the float logits of each row's last prompt token, ``[B, vocab]``.
        mask: the attention mask, ``[B, L]`` (long 0/1; rows left-padded).
        next_position: each row's next position id, ``[B, 1]``.
    """

    cache: Any
    logits: Any
    mask: Any
    next_position: Any


@dataclass
class _Group:
    """A node of the prompt trie during a shared-prefix prefill.

    ``members`` (indices of distinct prompts, in sorted order) all share their first ``done``
    tokens, which are in this group's row of the KV cache already.
    """

    members: list[int]
    done: int


def cache_argument(model: Any) -> str:
    """The keyword that passes a KV cache to ``model``'s forward: ``"cache"`` or ``"past_key_values"``.

    transformers renamed ``past_key_values`` to ``cache`` (5.2x: ``@deprecate_kwarg("past_key_values",
    "5.40.0", new_name="cache")`` on every model's forward, removed in 5.40); earlier versions,
    4.57 included, know only ``past_key_values``. Read from the forward's signature, so the
    backend passes the name the installed version documents and never a deprecated one.
    """
    import inspect

    parameters = inspect.signature(model.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def _keeps_logits(model: Any) -> bool:
    """Whether ``model``'s forward takes ``logits_to_keep`` (an int or a tensor of positions; transformers 4.50+).

    The prefill then projects only the positions whose logits it reads onto the vocabulary:
    with Gemma 3's 262,144-token vocabulary the projection of every prompt position costs
    more than the rest of the 270M model and holds a gigabyte per 1,000-token row.
    """
    import inspect

    return "logits_to_keep" in inspect.signature(model.forward).parameters


def output_cache(out: Any) -> Any:
    """The KV cache a forward returned: ``out["cache"]`` (transformers 5.2x), else ``out["past_key_values"]``.

    Read by key: the ``past_key_values`` attribute of newer outputs is a deprecated alias that logs a warning.
    """
    return out["cache"] if "cache" in out else out["past_key_values"]


class PrefillPlanner:
    """Prefills a chunk's prompts for :class:`~mfs_core.backends.transformers.TransformersBackend`.

    Args:
        model: the loaded causal LM (its forward, config and device are used).
        pad_id: the token id written into padding positions (masked out).
        share: prefill along the prompts' token trie (each distinct prefix once) where the model's
            cache allows it; False always prefills one left-padded row per prompt, the path models
            whose cache the trie cannot fill take (a reference for comparisons).

    Attributes:
        stats: :class:`PrefillStats` counters (reset by assigning a new ``PrefillStats()``).
    """

    def __init__(self, model: Any, pad_id: int, *, share: bool = True) -> None:
        self.model = model
        self.pad_id = pad_id
        self.share = share
        self.stats = PrefillStats()
        self._cache_arg = cache_argument(model)
        self._keep_logits = _keeps_logits(model)

    def record_call(self, row_prompts: Sequence[Sequence[int]], prompts: Sequence[Sequence[int]]) -> None:
        """Count one ``generate`` call in :attr:`stats`: its rows' prompts and its requests' prompts (token ids)."""
        self.stats.calls += 1
        self.stats.rows += len(row_prompts)
        self.stats.row_prompt_tokens += sum(len(ids) for ids in row_prompts)
        self.stats.distinct_prompt_tokens += _trie_size(prompts)

    def prefill(self, prompts: list[list[int]], headroom: int) -> Prefill:
        """Prefill ``prompts`` (one per row, token ids, none empty): along their trie where the model's
        cache allows it (:meth:`_prefill_shared`), else one row per prompt (:meth:`_prefill_rows`).

        Args:
            prompts: the ``B`` rows' prompts.
            headroom: tokens the rows may still sample (the most of any row): full-attention layers
                get room for them and are then written in place, token by token.

        Returns:
            The :class:`Prefill` of the ``B`` rows.
        """
        prefilled = self._prefill_shared(prompts, headroom) if self.share else None
        if prefilled is not None:
            return prefilled
        cache, logits, mask, next_position = self._prefill_rows(prompts)
        return Prefill(headroom_cache(cache, headroom), logits, mask, next_position)

    def _prefill_rows(self, prompts: list[list[int]]) -> Prefill:
        """Prefill every row's whole prompt in one left-padded batch (no sharing).

        Returns:
            The :class:`Prefill` of the rows, its cache as the model built it.
        """
        device = self.model.device
        input_ids, mask = _left_padded(prompts, self.pad_id, device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        keep = {"logits_to_keep": 1} if self._keep_logits else {}
        out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True, **keep)
        self.stats.prefilled_tokens += sum(len(p) for p in prompts)
        self.stats.padded_prefill_tokens += input_ids.numel()
        self.stats.forward_passes += 1
        return Prefill(output_cache(out), out.logits[:, -1, :].float(), mask, positions[:, -1:] + 1)

    def _prefill_shared(self, prompts: list[list[int]], headroom: int) -> Prefill | None:
        """Prefill each node of the prompts' token trie once, then fan the caches out to rows.

        Level by level, each group of distinct prompts runs the tokens they all share beyond
        what its cache row holds, in one batched forward pass over all groups (segments
        right-padded to the longest; :meth:`_prefill_level`). A prompt that ends with its
        group's segment keeps that cache row and last-token logits; the others split by their
        next token into child groups (:func:`_split_groups`), whose cache rows are copies of
        the parent's, rotated so that the row's real positions end at the last one (the
        segment's right padding moves to the left edge; :func:`_fan_out`). So every row of the
        prefill cache is left-padded with its real tokens contiguous, and a sliding-window
        mask, which counts cache positions, spans exactly the real tokens it would alone. The
        prefill runs on a cache of full ``DynamicLayer`` s (a sliding-window layer would keep
        only the last positions, padding included). The finished caches keep only their real
        positions, left-padded to the longest prompt, and fill the cache the model itself
        builds (``DynamicCache(config=...)``, through each layer's ``update``): a
        ``DynamicSlidingWindowLayer`` keeps the last ``sliding_window - 1`` positions, as after
        :meth:`_prefill_rows` (:func:`_compact_prefill`). Row ``i`` gets prompt ``i``'s.

        Args:
            prompts: the rows' prompts (token ids).
            headroom: tokens the rows may still sample (see :meth:`prefill`).

        Returns:
            As :meth:`prefill`, or None when the model's cache has layers other than
            ``DynamicLayer`` and ``DynamicSlidingWindowLayer`` (chunked or linear attention,
            a model-specific cache), or a prompt is empty: the caller then prefills without
            sharing.
        """
        template = self._cache_template()
        if template is None:
            return None
        from transformers.cache_utils import DynamicCache

        distinct: dict[tuple[int, ...], int] = {}
        row_prompt = [distinct.setdefault(tuple(ids), len(distinct)) for ids in prompts]
        unique = list(distinct)
        if not all(unique):
            return None
        groups = _trie_roots(unique)
        finals: dict[int, _Final] = {}
        cache, mask = DynamicCache(), None  # full layers, created as the model updates them
        while groups:
            segments = [_segment(group, unique) for group in groups]
            level = self._prefill_level(groups, segments, cache, mask, len(template.layers))
            if level is None:
                return None
            cache, mask, logits, padding = level
            groups, parents = _split_groups(groups, segments, unique, cache, mask, logits, finals)
            if groups:
                mask = _fan_out(cache, mask, parents, padding)
        return _compact_prefill(template, [finals[u] for u in range(len(unique))], row_prompt, self.model.device,
                                headroom)

    def _prefill_level(self, groups: list[_Group], segments: list[tuple[int, ...]], cache: Any, mask: Any,
                       layers: int) -> tuple[Any, Any, Any, Any] | None:
        """One level of the shared-prefix prefill: one forward pass over every group's segment.

        Args:
            groups: the trie nodes of this level, ``G`` of them; group ``g`` is cache row ``g``.
            segments: group ``g``'s tokens beyond its ``done`` ones (token ids, at least one).
            cache: the prefill ``DynamicCache``, ``G`` rows (empty at the first level).
            mask: the attention mask of the cache's slots, ``[G, slots]`` long, or None at the
                first level.
            layers: how many layers the model's own cache has.

        Returns:
            ``(cache, mask, logits, padding)``: the cache grown by the segments (right-padded
            to the longest, ``W`` tokens), the mask ``[G, slots + W]``, the float logits of each
            segment's last real token ``[G, vocab]`` and each segment's right padding ``[G]``
            (tokens); or None when the model built a cache other than ``layers`` full
            ``DynamicLayer`` s (the prefill statistics are then left as they were).
        """
        import torch
        from transformers.cache_utils import DynamicLayer

        device = self.model.device
        input_ids, segment_mask = _right_padded(segments, self.pad_id, device)
        lengths = torch.tensor([len(seg) for seg in segments], dtype=torch.long, device=device)
        done = torch.tensor([[g.done] for g in groups], dtype=torch.long, device=device)
        positions = done + segment_mask.cumsum(-1) - 1  # the padding repeats the last position
        mask = segment_mask if mask is None else torch.cat([mask, segment_mask], dim=1)
        last = lengths - 1  # each segment's last real token
        keep: dict[str, Any] = {}
        if self._keep_logits:  # the vocabulary projection of those positions only
            kept, last = torch.unique(last, return_inverse=True)
            keep = {"logits_to_keep": kept}
        out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                         use_cache=True, **{self._cache_arg: cache}, **keep)
        cache = output_cache(out)
        stats = self.stats
        stats.forward_passes += 1
        if len(cache.layers) != layers or not all(type(layer) is DynamicLayer for layer in cache.layers):
            return None
        stats.prefilled_tokens += sum(len(seg) for seg in segments)
        stats.padded_prefill_tokens += input_ids.numel()
        logits = out.logits[torch.arange(len(groups), device=device), last].float()
        return cache, mask, logits, input_ids.shape[1] - lengths

    def _cache_template(self) -> Any:
        """An empty ``DynamicCache`` shaped as the model's own (``DynamicCache(config=...)``), or
        None when a shared-prefix prefill cannot fill it: a layer other than ``DynamicLayer``
        and ``DynamicSlidingWindowLayer``, or chunked attention (stored as sliding-window
        layers, masked by chunk)."""
        from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer

        config = self.model.config
        text_config = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
        if "chunked_attention" in (getattr(text_config, "layer_types", None) or ()) or getattr(
                text_config, "attention_chunk_size", None) is not None:
            return None
        try:
            template = DynamicCache(config=config)
        except (TypeError, ValueError):  # pragma: no cover - a config DynamicCache cannot read
            return None
        if not all(type(layer) in (DynamicLayer, DynamicSlidingWindowLayer) for layer in template.layers):
            return None
        return template


def _common_prefix_length(first: tuple[int, ...], last: tuple[int, ...], start: int) -> int:
    """Longest common prefix of sorted prompts, from their ``first`` and ``last`` (tokens).

    Both share ``[:start]`` already; in a sorted list the common prefix of all is that of
    its two ends.
    """
    end = start
    shortest = min(len(first), len(last))
    while end < shortest and first[end] == last[end]:
        end += 1
    return end


@dataclass
class _Final:
    """A distinct prompt's prefill state, kept when the trie walk reaches its end.

    ``layers`` holds ``(keys, values)`` per layer, each ``[heads, slots, dim]`` (its cache
    row, padding slots included); ``mask`` ``[slots]`` marks the real slots (long 0/1);
    ``logits`` ``[vocab]`` (float) are its last token's; ``length`` is its length (tokens).
    """

    layers: list[tuple[Any, Any]]
    mask: Any
    logits: Any
    length: int


def _trie_roots(unique: list[tuple[int, ...]]) -> list[_Group]:
    """The token trie's root split by first token: groups of indices into ``unique`` (distinct,
    non-empty prompts of token ids), each group's members in sorted prompt order, ``done=0``."""
    groups: list[_Group] = []
    for u in sorted(range(len(unique)), key=lambda u: unique[u]):
        if groups and unique[groups[-1].members[0]][0] == unique[u][0]:
            groups[-1].members.append(u)
        else:
            groups.append(_Group(members=[u], done=0))
    return groups


def _segment(group: _Group, unique: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The tokens all of ``group``'s members share beyond its ``done`` ones (token ids; at
    least one, as members differ past ``done`` or end together)."""
    first = unique[group.members[0]]
    return first[group.done:_common_prefix_length(first, unique[group.members[-1]], group.done)]


def _split_groups(groups: list[_Group], segments: list[tuple[int, ...]], unique: list[tuple[int, ...]], cache: Any,
                  mask: Any, logits: Any, finals: dict[int, _Final]) -> tuple[list[_Group], list[int]]:
    """After a level's forward pass: keep the prompts that end there, split the rest.

    A member of group ``g`` whose prompt ends with the group's segment is recorded in
    ``finals`` (keyed by its index into ``unique``) with cache row ``g`` of every layer of
    ``cache`` (``[G, heads, slots, dim]``), ``mask[g]`` (``[G, slots]``) and ``logits[g]``
    (``[G, vocab]``). The others form child groups by their next token (members stay sorted,
    so equal next tokens are adjacent).

    Returns:
        ``(children, parents)``: the next level's groups and, for each, the index of its
        parent group in ``groups``.
    """
    children: list[_Group] = []
    parents: list[int] = []
    for g, (group, seg) in enumerate(zip(groups, segments)):
        end = group.done + len(seg)
        rest = []
        for u in group.members:
            if len(unique[u]) == end:
                finals[u] = _Final([(layer.keys[g], layer.values[g]) for layer in cache.layers], mask[g], logits[g], end)
            else:
                rest.append(u)
        for u in rest:
            if children and parents[-1] == g and unique[children[-1].members[0]][end] == unique[u][end]:
                children[-1].members.append(u)
            else:
                children.append(_Group(members=[u], done=end))
                parents.append(g)
    return children, parents


def _fan_out(cache: Any, mask: Any, parents: list[int], padding: Any) -> Any:
    """Give each child group a copy of its parent's cache row, rotated right by the parent
    segment's right padding, so the row's real slots end at the last one.

    Args:
        cache: the prefill ``DynamicCache``; every layer's keys and values ``[G, heads, slots,
            dim]`` are replaced, in place, by ``[C, heads, slots, dim]``.
        mask: the parents' attention mask ``[G, slots]``.
        parents: each of the ``C`` children's parent row.
        padding: each parent segment's right padding ``[G]`` (tokens).

    Returns:
        The children's attention mask ``[C, slots]``, rotated as their cache rows.
    """
    import torch

    device = mask.device
    index = torch.tensor(parents, dtype=torch.long, device=device)
    slots = mask.shape[1]
    shift = padding.index_select(0, index)
    source = (torch.arange(slots, device=device) - shift.unsqueeze(1)) % slots  # [children, slots]
    for layer in cache.layers:
        layer.keys = _rotate_rows(layer.keys, index, source)
        layer.values = _rotate_rows(layer.values, index, source)
    return mask.index_select(0, index).gather(1, source)


def _compact_prefill(template: Any, finals: list[_Final], row_prompt: list[int], device: Any,
                     headroom: int) -> Prefill:
    """The prefill's result from each distinct prompt's final state: row ``i`` gets prompt
    ``row_prompt[i]``'s.

    Each prompt keeps its real slots only (the padding of the trie levels dropped), left-padded
    to the longest prompt ``L``, so decoding attends over as many positions as without sharing;
    they fill ``template``'s layers through ``update``.

    Args:
        template: an empty ``DynamicCache`` shaped as the model's own (:meth:`_cache_template`).
        finals: the ``U`` distinct prompts' states, in index order.
        row_prompt: each of the ``B`` rows' index into ``finals``.
        device: where the new tensors go (the model's device).
        headroom: tokens the rows may still sample: full-attention layers become
            :class:`~mfs_core.backends.hf_headroom.HeadroomLayer` s with that room, written once.

    Returns:
        The :class:`Prefill` of the ``B`` rows, its cache ``template``.
    """
    import torch

    width = max(state.length for state in finals)
    real = [state.mask.nonzero().squeeze(1) for state in finals]
    rows = torch.tensor(row_prompt, dtype=torch.long, device=device)

    def distinct(tensors: list[Any]) -> Any:
        """Per-prompt ``[heads, slots, dim]`` states to ``[U, heads, L, dim]``, real slots right-aligned."""
        heads, _, dim = tensors[0].shape
        out = tensors[0].new_zeros((len(tensors), heads, width, dim))
        for u, (t, index) in enumerate(zip(tensors, real)):
            out[u, :, width - len(index):] = t.index_select(1, index)
        return out

    from transformers.cache_utils import DynamicLayer

    for i, layer in enumerate(template.layers):
        keys, values = distinct([state.layers[i][0] for state in finals]), distinct([state.layers[i][1] for state in finals])
        if type(layer) is DynamicLayer:  # the rows written once, with room to grow
            template.layers[i] = grown = HeadroomLayer(headroom)
            grown.fill_rows(keys, values, rows)
        else:
            layer.update(keys.index_select(0, rows), values.index_select(0, rows))
    mask = torch.zeros((len(finals), width), dtype=torch.long, device=device)
    for u, state in enumerate(finals):
        mask[u, width - state.length:] = 1
    mask = mask.index_select(0, rows)
    logits = torch.stack([state.logits for state in finals]).index_select(0, rows)
    next_position = torch.tensor([[state.length] for state in finals], dtype=torch.long, device=device).index_select(0, rows)
    return Prefill(template, logits, mask, next_position)


def _trie_size(prompts: list[list[int]]) -> int:
    """Nodes of the token trie of ``prompts``: the distinct prompt tokens (tokens)."""
    ordered = sorted(set(map(tuple, prompts)))
    total = 0
    for previous, prompt in zip([()] + ordered[:-1], ordered):
        shared = 0
        while shared < min(len(previous), len(prompt)) and previous[shared] == prompt[shared]:
            shared += 1
        total += len(prompt) - shared
    return total


def _right_padded(rows: Sequence[Sequence[int]], pad: int, device: Any) -> tuple[Any, Any]:
    """As :func:`_left_padded`, with the padding after each row's tokens."""
    import torch

    width = max(len(row) for row in rows)
    input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        input_ids[i, :len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, :len(row)] = 1
    return input_ids.to(device), mask.to(device)


def _rotate_rows(states: Any, index: Any, source: Any) -> Any:
    """Rows ``index`` of cache ``states`` ``[B, heads, slots, dim]``, row ``r``'s slot ``j`` taken from slot ``source[r, j]``."""
    picked = states.index_select(0, index)
    return picked.gather(2, source[:, None, :, None].expand(-1, picked.shape[1], -1, picked.shape[3]))


def _left_padded(rows: Sequence[Sequence[int]], pad: int, device: Any) -> tuple[Any, Any]:
    """Token-id rows left-padded to one width: ``input_ids`` and attention ``mask``, both ``[R, W]`` long tensors on ``device``."""
    import torch

    width = max(len(row) for row in rows)
    input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        input_ids[i, width - len(row):] = torch.tensor(row, dtype=torch.long)
        mask[i, width - len(row):] = 1
    return input_ids.to(device), mask.to(device)
