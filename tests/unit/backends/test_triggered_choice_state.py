"""The transformers backend's triggered-choice state, token by token, on a made-up vocabulary."""

from __future__ import annotations

from mfs_core.backends.hf_constraints import GrammarMasker
from mfs_core.backends.transformers import _Row
from mfs_core.types import TriggeredChoice

CHOICE = TriggeredChoice('<tool_call>\n{"name": "', ('add"', 'mul"'))
VOCAB = ["", "<tool", "_call>\n", '{"name": "', "ad", 'd"', ', "a', "mul", '"', 'x', '"name": "add"']


def backend() -> GrammarMasker:
    masker = GrammarMasker(None, vocab_size=len(VOCAB), eos_ids=(), device="cpu")  # only the token texts are used
    masker._token_text_cache = list(VOCAB)
    return masker


def write(row: _Row, *tokens: str) -> list[str | None]:
    states = []
    model = backend()
    for token in tokens:
        model.advance_choice(row, CHOICE, VOCAB.index(token))
        states.append(row.choice_matched)
    return states


def test_the_trigger_across_tokens_starts_a_choice_that_ends_when_complete() -> None:
    row = _Row(request=0, prompt_tokens=1, max_tokens=9, stop=(), tokens=[])
    assert write(row, "<tool", "_call>\n", '{"name": "', "ad", 'd"', ', "a') == [None, None, "", "ad", None, None]


def test_a_trigger_split_between_prompt_and_text_and_a_choice_in_the_same_token() -> None:
    row = _Row(request=0, prompt_tokens=1, max_tokens=9, stop=(), tokens=[], choice_tail='<tool_call>\n{')
    assert write(row, '"name": "add"') == [None]  # trigger completed and the choice written by one token
    row = _Row(request=0, prompt_tokens=1, max_tokens=9, stop=(), tokens=[], choice_tail="p")  # a short prompt
    assert write(row, "<tool", "_call>\n", '{"name": "', "mul", '"') == [None, None, "", "mul", None]


def test_a_second_call_is_constrained_again() -> None:
    row = _Row(request=0, prompt_tokens=1, max_tokens=20, stop=(), tokens=[])
    first = write(row, "<tool", "_call>\n", '{"name": "', "mul", '"', "x")
    second = write(row, "<tool", "_call>\n", '{"name": "', "ad")
    assert first[-3:] == ["mul", None, None] and second[-2:] == ["", "ad"]


def test_backends_that_do_not_honour_the_choice_say_so_once(caplog) -> None:
    import logging

    from mfs_core.backends.base import warn_unhonoured_choices
    from mfs_core.types import GenerationRequest

    class Remote:
        pass

    remote, log = Remote(), logging.getLogger("test.remote")
    with caplog.at_level(logging.WARNING, logger="test.remote"):
        warn_unhonoured_choices(remote, [GenerationRequest("p")], log)  # no choice: nothing to say
        assert not caplog.records
        for _ in range(3):
            warn_unhonoured_choices(remote, [GenerationRequest("p", triggered_choice=CHOICE)], log)
    assert len(caplog.records) == 1 and "Remote samples without the tool-name constraint" in caplog.records[0].message
