"""Tokenizer and model-config helpers shared by the vLLM and OpenAI-compatible backends.

Both backends sample elsewhere (a vLLM engine, a server) but must tokenize prompts, render
chat templates and count parameters exactly as :class:`~mfs_core.backends.transformers.TransformersBackend`
does, so that one question costs the same tokens and FLOPs on every backend. Nothing here
imports torch or transformers at module level.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "count_parameters",
    "encode_prompt",
    "load_local_config",
    "load_local_tokenizer",
    "local_model_source",
    "missing_model_message",
    "prefix_order",
    "render_chat",
    "starts_with_bos",
]

logger = logging.getLogger(__name__)


def local_model_source(model: str, tokenizer: str | None = None) -> str | None:
    """Where a tokenizer (and config) for ``model`` can be read without the network.

    Args:
        model: the ``model`` setting (a served model name, a local path or ``"mfs-demo"``).
        tokenizer: the ``tokenizer`` setting; wins when given.

    Returns:
        ``tokenizer`` if given; the bundled demo checkpoint for ``"mfs-demo"``; ``model`` if it
        is an existing local directory; else ``model`` itself (a Hugging Face name that may be
        in the local cache). None only when ``model`` is blank.
    """
    if tokenizer:
        return _resolve(tokenizer)
    if not model.strip():
        return None
    return _resolve(model)


def missing_model_message(model: str, exc: BaseException | None = None) -> str:
    """The one-line error for a ``model`` that is neither a local checkpoint nor in the local cache.

    Says that nothing is downloaded by default, how to allow it (``HF_HUB_OFFLINE=0``) and
    what else ``model`` may name. ``exc``: the loader's error, added by class name only (its
    text is transformers' long "couldn't connect" paragraph, about a download never tried).
    """
    from mfs_core.models import PACKAGED_MODELS
    from mfs_core.settings import DEMO_MODEL

    cause = f" ({exc.__class__.__name__})" if exc is not None else ""
    return (
        f"model {model!r} was not found on this machine{cause}: mfs never downloads unless HF_HUB_OFFLINE=0 is "
        f"set (HF_HUB_OFFLINE=0 mfs ask ... downloads it from the Hugging Face Hub once), or give a local "
        f"checkpoint folder, a .gguf file, {DEMO_MODEL!r} or a packaged model ({', '.join(sorted(PACKAGED_MODELS))})"
    )


def _resolve(name: str) -> str:
    from mfs_core.models import resolve_model_path

    resolved = resolve_model_path(name)  # the demo model, a packaged or .gguf model's converted folder
    if resolved != name:
        return resolved
    return str(Path(name).expanduser()) if Path(name).expanduser().is_dir() else name


def load_local_tokenizer(source: str | None) -> Any | None:
    """A Hugging Face tokenizer from a local directory or the local cache, or None.

    Nothing is downloaded unless ``HF_HUB_OFFLINE=0`` is set (as the transformers backend).
    Returns None (and logs why at INFO) when transformers is missing or nothing is found.
    """
    if source is None:
        return None
    try:
        from transformers import AutoTokenizer
    except ImportError:
        logger.info("transformers is not installed: no local tokenizer for %r", source)
        return None
    local_only = os.environ.get("HF_HUB_OFFLINE", "1") != "0"
    try:
        return AutoTokenizer.from_pretrained(source, local_files_only=local_only)
    except (OSError, ValueError) as exc:
        logger.info("no local tokenizer for %r (%s: %s)", source, exc.__class__.__name__, exc)
        return None


def load_local_config(source: str | None) -> Any | None:
    """The model's ``transformers`` config from a local directory or the cache, or None."""
    if source is None:
        return None
    try:
        from transformers import AutoConfig
    except ImportError:
        return None
    local_only = os.environ.get("HF_HUB_OFFLINE", "1") != "0"
    try:
        return AutoConfig.from_pretrained(source, local_files_only=local_only)
    except (OSError, ValueError) as exc:
        logger.info("no local model config for %r (%s: %s)", source, exc.__class__.__name__, exc)
        return None


def count_parameters(config: Any) -> int:
    """Parameters of the causal LM that ``config`` describes, counted on the meta device.

    No weights are allocated (``torch.device("meta")``); tied weights count once, as
    ``sum(p.numel() for p in model.parameters())`` of the loaded model does.

    Raises:
        ImportError: torch or transformers missing.
        ValueError: transformers cannot build a causal LM from ``config``.
    """
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return int(sum(p.numel() for p in model.parameters()))


def _bos_text(tokenizer: Any) -> str | None:
    bos = getattr(tokenizer, "bos_token", None)
    if bos:
        return str(bos)
    bos_id = getattr(tokenizer, "bos_token_id", None)
    if bos_id is None:
        return None
    return str(tokenizer.convert_ids_to_tokens([bos_id])[0])


def starts_with_bos(tokenizer: Any, prompt: str) -> bool:
    """True when ``prompt`` already opens with the tokenizer's BOS token text.

    Chat templates (Llama-3's, the demo model's) write the BOS themselves; adding it again
    would give the model two.
    """
    bos = _bos_text(tokenizer)
    return bool(bos) and prompt.startswith(bos)


def encode_prompt(tokenizer: Any, prompt: str) -> list[int]:
    """Token ids of a prompt, special tokens added only if it lacks a leading BOS.

    The rule of :meth:`~mfs_core.backends.transformers.TransformersBackend.encode_prompt`,
    so every backend feeds the model the same ids for the same prompt text.
    """
    return list(tokenizer.encode(prompt, add_special_tokens=not starts_with_bos(tokenizer, prompt)))


def render_chat(
    tokenizer: Any, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None
) -> str | None:
    """The tokenizer's chat template with the generation prompt; None without a template.

    ``tools`` (OpenAI-format function tools) go to the template as ``transformers``'
    ``apply_chat_template(..., tools=...)`` passes them; None or empty: no ``tools`` argument.
    """
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return None
    extra = {"tools": list(tools)} if tools else {}
    return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True, **extra)


def prefix_order(prompts: Sequence[Sequence[Any]]) -> list[int]:
    """An order of ``prompts`` in which prompts that share a prefix are adjacent.

    The depth-first order of the prompts' trie (token ids, or the characters of a string),
    each node's children taken in order of first appearance, a prompt that ends at a node
    placed where it first appeared among that node's children. So the order changes only
    where it must: when every set of prompts sharing a prefix is contiguous already (one
    decoder's requests of a round are), it is ``range(len(prompts))``; prompts that share a
    prefix but are apart (the same question from two callers, every question's few-shot
    prefix behind other prompts) are brought together. vLLM's prefix cache
    (``enable_prefix_caching``) then sees each shared prefix in consecutive requests, while
    its KV blocks are still cached.

    Args:
        prompts: P prompts, each a sequence of token ids or a string.

    Returns:
        A permutation of ``range(P)``: position k holds the index of the k-th prompt to send.
    """
    root: dict[Any, tuple[int, dict]] = {}  # token -> (creation rank, children)
    created = 0
    keys: list[list[int]] = []
    end = object()  # the pseudo-child "the prompt ends here"
    for prompt in prompts:
        children, key = root, []
        for token in [*prompt, end]:
            node = children.get(token)
            if node is None:
                node = children[token] = (created, {})
                created += 1
            key.append(node[0])
            children = node[1]
        keys.append(key)
    return sorted(range(len(prompts)), key=keys.__getitem__)


def quiet_transformers() -> None:
    """Hide transformers' weight-loading progress bars and warnings in command output.

    Used by the ``mfs`` commands; a no-op when transformers is not installed.
    """
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
