"""Decoders: coroutines that yield generation requests and return a ``DecodeResult``.

All share one signature, ``decoder(prompt: str, settings: MFSSettings, answer_key=None) ->
Decoder``, and are registered by name in :data:`DECODER_SPECS`
(:mod:`mfs_core.decoders.registry`: what each is and can do); :data:`DECODERS` maps the
same names to the factories the engine runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from mfs_core.decoders.common import Decoder
from mfs_core.decoders.registry import PAPER_RULES, SPECS, DecoderFactory, DecoderSpec

__all__ = [
    "DECODERS", "DECODER_SPECS", "PAPER_RULES", "SELECTING_DECODERS", "Decoder", "DecoderFactory", "DecoderSpec",
    "decoder_spec", "get_decoder",
]

DECODER_SPECS: Mapping[str, DecoderSpec] = SPECS
"""Every registered decoder's :class:`DecoderSpec`, by name."""

DECODERS: Mapping[str, DecoderFactory] = MappingProxyType({name: spec.factory for name, spec in SPECS.items()})
"""The factory the engine runs for each registered name (:attr:`DecoderSpec.factory`)."""

SELECTING_DECODERS = frozenset(name for name, spec in SPECS.items() if spec.final == "select")
"""Decoders that choose their final completion by their own rule, not by a vote: their
``answer_key`` only reads the completions' answers (a multiple-choice
:class:`~mfs_core.answers.OptionAnswer`); an action vote is refused (``MFSEngine.submit_prompts``)."""


def decoder_spec(method: str) -> DecoderSpec:
    """The :class:`DecoderSpec` registered as ``method``.

    Raises:
        ValueError: unknown name; the message lists the known ones.
    """
    try:
        return SPECS[method]
    except KeyError:
        msg = f"unknown decoding method {method!r}; known: {sorted(SPECS)}"
        raise ValueError(msg) from None


def get_decoder(method: str) -> DecoderFactory:
    """The decoder factory registered as ``method`` (:attr:`DecoderSpec.factory`).

    Raises:
        ValueError: unknown name; the message lists the known ones.
    """
    return decoder_spec(method).factory
