"""Constrained sampling for the transformers backend (:mod:`mfs_core.backends.transformers`): grammar
masks and triggered choices.

**Triggered choices** (``GenerationRequest.triggered_choice``): once a row's text ends with the
trigger, only tokens whose text keeps it on the way to one of the choices can be drawn.
**Grammars** (``GenerationRequest.grammar``, :mod:`mfs_core.grammar`): each row runs its own
xgrammar matcher of the request's structural tag; before every draw the tokens it forbids get
-inf logits. :class:`GrammarMasker` (a part of the backend) holds both, built with the tokenizer, the
model's output vocabulary size, its end-of-sequence ids and its device; the rows' state comes with
each call.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import Any

from mfs_core.types import GenerationRequest, RequestGrammar, TriggeredChoice

__all__ = ["GrammarMasker"]

logger = logging.getLogger("mfs_core.backends.transformers")  # its messages stay under the backend's logger


class GrammarMasker:
    """Logit masks of :class:`~mfs_core.backends.transformers.TransformersBackend`: the rows' grammar
    matchers (:meth:`mask_grammar`) and their triggered choices (:meth:`mask_choices`).

    A row is any object with the attributes these read and write (the backend's ``_Row``):
    ``request`` (its request's index), ``finish_reason``, ``matcher`` (its xgrammar matcher or
    None), ``choice_matched`` and ``choice_tail`` (its triggered-choice state).

    Args:
        tokenizer: the model's Hugging Face tokenizer (token texts; xgrammar's tokenizer info).
        vocab_size: rows of the model's output projection (logits per position), which may
            exceed the tokenizer's vocabulary.
        eos_ids: the model's end-of-sequence token ids (a grammar may end on them).
        device: where the allowed-token index tensors go (the model's device).
    """

    def __init__(self, tokenizer: Any, *, vocab_size: int, eos_ids: Collection[int], device: Any) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.eos_ids = frozenset(eos_ids)
        self.device = device
        self._token_text_cache: list[str] | None = None
        self._allowed_cache: dict[tuple[tuple[str, ...], str], Any] = {}
        self._grammar_compiler: Any = None
        self._compiled_grammars: dict[str, Any] = {}
        self._token_bitmask: Any = None  # reused by mask_grammar while the batch's shape holds
        self._bitmask_vocab = 0
        self._warned_grammar_prefix = False

    def matcher(self, grammar: RequestGrammar) -> Any:
        """A fresh xgrammar matcher of ``grammar`` with its ``prefix`` fed, or None when the
        prompt's text does not follow the grammar (the row is then sampled free, logged once).

        Raises:
            GrammarUnavailableError: xgrammar is not installed.
        """
        from mfs_core.grammar import _xgrammar

        xgr = _xgrammar()
        compiled = self._compiled_grammars.get(grammar.structural_tag)
        if compiled is None:
            if self._grammar_compiler is None:
                info = xgr.TokenizerInfo.from_huggingface(self.tokenizer, vocab_size=self.vocab_size,
                                                          stop_token_ids=sorted(self.eos_ids))
                self._grammar_compiler = xgr.GrammarCompiler(info)
            if len(self._compiled_grammars) > 256:
                self._compiled_grammars.clear()
            compiled = self._compiled_grammars[grammar.structural_tag] = (
                self._grammar_compiler.compile_structural_tag(grammar.structural_tag))
        matcher = xgr.GrammarMatcher(compiled)
        if grammar.prefix and not matcher.accept_string(grammar.prefix):
            if not self._warned_grammar_prefix:
                self._warned_grammar_prefix = True
                logger.warning("a prompt ends in text its action grammar does not accept (%r): that row is "
                               "sampled without the grammar", grammar.prefix[-60:])
            return None
        return matcher

    def mask_grammar(self, logits: Any, rows: list[Any]) -> Any:
        """``logits`` ``[rows, vocab]`` with the tokens each row's grammar forbids set to -inf (the same
        tensor when no unfinished row has a grammar; else a masked copy)."""
        constrained = [pos for pos, row in enumerate(rows)
                       if row.matcher is not None and row.finish_reason is None and not row.matcher.is_terminated()]
        if not constrained:
            return logits
        from mfs_core.grammar import _xgrammar

        xgr = _xgrammar()
        bitmask = self._token_bitmask
        if bitmask is None or bitmask.shape[0] != len(rows) or self._bitmask_vocab != logits.shape[-1]:
            bitmask = self._token_bitmask = xgr.allocate_token_bitmask(len(rows), logits.shape[-1])
            self._bitmask_vocab = logits.shape[-1]
        for pos in constrained:
            rows[pos].matcher.fill_next_token_bitmask(bitmask, pos)
        masked = logits.clone()
        xgr.apply_token_bitmask_inplace(masked, bitmask.to(masked.device),
                                        indices=constrained)
        return masked

    # --- triggered choices ---------------------------------------------------------------
    def token_texts(self) -> list[str]:
        """The text of every token id alone ('' for special tokens), decoded once."""
        if self._token_text_cache is None:
            self._token_text_cache = self.tokenizer.batch_decode(
                [[i] for i in range(len(self.tokenizer))], skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return self._token_text_cache

    def _allowed_ids(self, choices: tuple[str, ...], matched: str) -> Any:
        """Token ids whose text keeps ``matched`` on the way to one of ``choices`` (or completes
        one, with free text after it); cached per state."""
        import torch

        key = (choices, matched)
        allowed = self._allowed_cache.get(key)
        if allowed is None:
            ids = []
            for token_id, text in enumerate(self.token_texts()):
                if text:
                    candidate = matched + text
                    if any(c.startswith(candidate) or candidate.startswith(c) for c in choices):
                        ids.append(token_id)
            allowed = torch.tensor(ids, dtype=torch.long, device=self.device)
            if len(self._allowed_cache) > 4096:
                self._allowed_cache.clear()
            self._allowed_cache[key] = allowed
        return allowed

    def mask_choices(self, logits: Any, rows: list[Any], requests: Sequence[GenerationRequest]) -> Any:
        """``logits`` ``[rows, vocab]`` with every token outside the allowed ones set to -inf, for the rows
        that are writing a choice of their request's ``triggered_choice`` (the same tensor when none is)."""
        writing = [pos for pos, row in enumerate(rows) if row.choice_matched is not None and row.finish_reason is None]
        if not writing:
            return logits
        masked = logits.clone()
        for pos in writing:
            row = rows[pos]
            allowed = self._allowed_ids(requests[row.request].triggered_choice.choices, row.choice_matched)
            if len(allowed) == 0:  # no token leads to a choice: leave the row free
                continue
            keep = masked[pos, allowed]
            masked[pos] = float("-inf")
            masked[pos, allowed] = keep
        return masked

    def advance_choice(self, row: Any, choice: TriggeredChoice, token_id: int) -> None:
        """Update the row's choice state (``choice_matched``, ``choice_tail``) after it wrote ``token_id``."""
        text = self.token_texts()[token_id]
        trigger = choice.trigger
        combined = row.choice_tail + text
        if row.choice_matched is not None:
            written = row.choice_matched + text
        else:
            at = combined.rfind(trigger)
            written = combined[at + len(trigger):] if at != -1 and at + len(trigger) > len(row.choice_tail) else None
        if written is not None and not any(written.startswith(c) for c in choice.choices) and any(
                c.startswith(written) for c in choice.choices):
            row.choice_matched = written  # still on the way to a choice
        else:
            row.choice_matched = None  # free: a choice is complete (or none was started)
        row.choice_tail = combined[-(len(trigger) - 1):] if len(trigger) > 1 else ""
