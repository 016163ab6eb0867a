"""The settings that are ablations are grouped and documented as such.

:data:`mfs_core.settings.ABLATION_FIELDS` names the switches for measuring the search. Each is
an :class:`MFSSettings` field whose description starts ``"Ablation ("`` and names the decoder
variants of :data:`mfs_core.decoders.DECODERS` that set it, with the value they set; these
tests read the variants' own overrides to check that the descriptions say what the variants do,
that none is a flat field of the adapters, and that docs/benchmarks.md lists every one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

import langchain_mfs
import llamaindex_mfs
from mfs_core.decoders import DECODER_SPECS, DECODERS
from mfs_core.settings import ABLATION_FIELDS, MFSSettings

import experiments.variants  # noqa: F401  (registers the variants the descriptions name)

SETTINGS = MFSSettings.model_fields
MARKER = re.compile(r"^Ablation \((?:decoder variants? (?P<clauses>.+?)|no decoder variant sets it)\)\. ")
CLAUSE = re.compile(r"(?P<names>.+?) sets? (?P<value>.+)")  # one of MARKER's "; "-separated clauses


def _overrides(method: str) -> dict[str, Any]:
    """The settings a named decoder variant overrides ({} for a decoder of its own)."""
    return dict(DECODER_SPECS[method].overrides)


def _changed_by_variants(name: str) -> dict[str, Any]:
    """Variant name -> the value it gives field ``name``, for the variants that change it from its default."""
    default = SETTINGS[name].get_default(call_default_factory=True)
    return {m: o[name] for m in DECODERS if name in (o := _overrides(m)) and o[name] != default}


def test_ablation_fields_are_settings_grouped_in_one_section() -> None:
    assert len(set(ABLATION_FIELDS)) == len(ABLATION_FIELDS) == 13
    assert set(ABLATION_FIELDS) <= set(SETTINGS)
    names = list(SETTINGS)
    first = names.index(ABLATION_FIELDS[0])
    assert tuple(names[first:first + len(ABLATION_FIELDS)]) == ABLATION_FIELDS  # one run, in the tuple's order
    marked = {name for name, field in SETTINGS.items() if (field.description or "").startswith("Ablation")}
    assert marked == set(ABLATION_FIELDS)


@pytest.mark.parametrize("name", ABLATION_FIELDS)
def test_each_ablation_names_the_variants_that_set_it(name: str) -> None:
    match = MARKER.match(SETTINGS[name].description)
    assert match, SETTINGS[name].description
    changed = _changed_by_variants(name)
    if match["clauses"] is None:
        assert changed == {}, f"{name} is set by {sorted(changed)} but its description names none"
        return
    named: dict[str, Any] = {}
    for clause in match["clauses"].split("; "):  # "`a`, `b` set 0.95; `c` sets True"
        parts = CLAUSE.fullmatch(clause)
        assert parts, clause
        value = ast.literal_eval(parts["value"])
        assert value != SETTINGS[name].get_default(call_default_factory=True)
        named.update(dict.fromkeys(re.findall(r"`([^`]+)`", parts["names"]), value))
    assert changed == named  # every variant that changes it, and the value it sets


@pytest.mark.parametrize("fields", [langchain_mfs.MFSLLM.model_fields, langchain_mfs.ChatMFS.model_fields,
                                    llamaindex_mfs.MFSLLM.model_fields])
def test_no_ablation_is_a_flat_field_of_the_adapters(fields: dict) -> None:
    for name in ABLATION_FIELDS:
        assert name not in fields, name  # an ablation is set through model_kwargs or per call
    assert not any((field.description or "").startswith("Ablation (") for field in fields.values())


def test_the_benchmark_docs_list_every_ablation() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md").read_text()
    section = text.split("**Settings that are ablations.**", 1)[1].split("\n\n", 1)[0]
    for name in ABLATION_FIELDS:
        assert f"`{name}`" in section, name
    assert "ABLATION_FIELDS" in section
