"""Decoders: coroutines that yield generation requests and return a ``DecodeResult``.

All share one signature, ``decoder(prompt: str, settings: MFSSettings, answer_key=None) ->
Decoder``, and are registered by name in :data:`DECODER_SPECS`
(:mod:`mfs_core.decoders.registry`: what each is and can do; :func:`register_decoder` adds one),
each with the parameters a call may set for it (:mod:`mfs_core.decoders.params`);
:data:`DECODERS` maps the same names to the factories the engine runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from mfs_core.decoders.common import Decoder
from mfs_core.decoders.params import COMMON_PARAMS, MethodParams, ParamNotAccepted, method_params
from mfs_core.decoders.registry import PAPER_RULES, SPECS, DecoderFactory, DecoderSpec, register_decoder

__all__ = [
    "COMMON_PARAMS", "DECODERS", "DECODER_SPECS", "PAPER_RULES", "Decoder", "DecoderFactory", "DecoderSpec",
    "MethodParams", "ParamNotAccepted", "decoder_spec", "get_decoder", "method_params", "register_decoder",
]

DECODER_SPECS: Mapping[str, DecoderSpec] = SPECS
"""Every registered decoder's :class:`DecoderSpec`, by name (a live, read-only view)."""


class _Factories(Mapping[str, DecoderFactory]):
    """Name -> :attr:`DecoderSpec.factory` of every registered decoder: a live, read-only view of the registry."""

    def __getitem__(self, name: str) -> DecoderFactory:
        return SPECS[name].factory

    def __iter__(self) -> Iterator[str]:
        return iter(SPECS)

    def __len__(self) -> int:
        return len(SPECS)

    def __repr__(self) -> str:
        return f"DECODERS({sorted(SPECS)})"


DECODERS: Mapping[str, DecoderFactory] = _Factories()
"""The factory the engine runs for each registered name (:attr:`DecoderSpec.factory`)."""


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
