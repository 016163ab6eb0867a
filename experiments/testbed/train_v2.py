"""Train the v2 demo model: the v1 Llama taught longer problems, RAG prompts and tool calls.

The shipped checkpoint is a continuation of the first demo model (``testbed.train``,
its two phases in ``MODEL_CARD.md``)::

    python -m experiments.testbed.train_v2 --output-dir OUT --init-from V1_MODEL_DIR --steps 2400 --lr 1e-3 \
        --warmup 0.03 --short-rate 0.15 --max-length 1024 --threads 1 --save-every 200 --heldout OUT/heldout.json

(``MODEL_CARD.md`` has its wall time and loss). ``--checks difference --slip-rate 0.4`` is
the data of the v3 experiments (check lines that catch the model's own slips; their recipe and
measurements are in ``MODEL_CARD.md``, "How v3 was made"; the shipped v3 model's four
phases are in its "Training" table). Without ``--init-from`` it trains a fresh
model with a tokenizer of its own (what the first v2 attempts did: 2,000 CPU steps did not
teach a fresh model the arithmetic). The tests run it for a few steps on a tiny
configuration. Needs the ``[hf]`` extra (torch, transformers, tokenizers) and
llama-index-core (its RAG templates).

What it does:

1. With ``--init-from``, loads that checkpoint and extends it
   (:func:`extend_tokenizer_and_model`); else builds a byte-level BPE tokenizer on
   generated conversations of every kind. Digits are
   split one per token (a ``Digits(individual_digits=True)`` pre-tokenizer);
   ``<end_of_reasoning>``, ``<tool_call>``, ``</tool_call>``, ``<tool_response>`` and
   ``</tool_response>`` are single ordinary (non-special) tokens, so they survive decoding.
   The tokenizer carries :data:`CHAT_TEMPLATE` (Hugging Face ``apply_chat_template`` with
   ``tools=``, Hermes / Qwen2.5 style).
2. Renders each example as the engine prompts the model: the chat template with the
   generation prompt, then the assistant prefix ``The reasoning steps are:\\n\\n``, then the
   target lines and EOS. The loss covers only the target (and EOS), minus the lines flagged
   untrained (the deliberate slips of :func:`testbed.problems_v2.write_solution`).
3. Each step trains on one kind (plain 62%, RAG 16%, tool 22% of steps), as many examples
   as fit ``--batch-tokens`` padded tokens. ``LlamaForCausalLM`` with AdamW and a cosine
   schedule; problems are generated on the fly, never from the held-out set
   (``heldout.json``, seed 20260521).
4. Saves the model and tokenizer with ``save_pretrained`` (loadable with
   ``AutoModelForCausalLM.from_pretrained``), ``checkpoint-STEP/`` every ``--save-every``
   steps, and a ``training_log.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import time
from pathlib import Path
from typing import Any

from experiments.testbed import problems as problems_v1
from experiments.testbed import train as train_v1
from experiments.testbed.formats import Conversation, copy_example, plain_example, rag_example, tool_example
from experiments.testbed.problems_v2 import (
    ASSISTANT_PREFIX, END_MARKER, CHECK_STYLES, MAX_AMOUNT, MAX_VALUE, OPERATION_WEIGHTS, generate_problem,
    generate_problems, write_heldout,
)

logger = logging.getLogger(__name__)

HELDOUT_SEED = 20260521
HELDOUT_SIZE = 500
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>"]
MARKER_TOKENS = [END_MARKER, "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
KIND_WEIGHTS = {"plain": 62, "rag": 16, "tool": 22, "copy": 0}
# Words and JSON pieces of the RAG and tool prompts that the v1 tokenizer (trained on word
# problems only) splits into 3-21 tokens each: the most frequent such pieces of 600 rendered
# RAG and tool prompts by tokens saved, minus any piece that occurs in plain problems (so the
# v1 model reads its questions exactly as before) and minus argument names (which vary, and
# are copied from the schema). Added as ordinary tokens when a v1 checkpoint is extended:
# tool prompts shrink from ~780 to ~400 tokens.
PROMPT_TOKENS = [
    '"description": "', '"type": "', '"properties": {', '"function": {', '"name": "', '"required": [',
    "---------------------", "function", "assistant", "integer", '"parameters": {', "object", " functions",
    " question", " information", '"arguments": ', " context", '"arguments": {', "tools", " inside", " second",
    "system", '"name": ', " object", " function", " arguments", " assistant", " JSON", " knowledge",
    "Return", " write", " original", " help", " numbers", " its", " reference", " directly", " documents",
    " query",
]

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if tools %}"
    "{{- '<|system|>\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n\\n' }}{%- endif %}"
    "{{- 'You may call functions to help with the question. The functions are inside <tools></tools>:\\n<tools>\\n' }}"
    "{%- for tool in tools %}{{- tool | tojson }}{{- '\\n' }}{%- endfor %}"
    "{{- '</tools>\\n\\nTo call a function, write a JSON object with its name and arguments inside "
    "<tool_call></tool_call>:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": <args-json-object>}"
    "\\n</tool_call>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if tools and loop.first and message['role'] == 'system' %}"
    "{%- elif message['role'] == 'assistant' and message['tool_calls'] is defined and message['tool_calls'] %}"
    "{{- '<|assistant|>\\n' }}"
    "{%- if message['content'] %}{{- message['content'] + '\\n' }}{%- endif %}"
    "{%- for call in message['tool_calls'] %}"
    "{%- if call['function'] is defined %}{%- set call = call['function'] %}{%- endif %}"
    "{{- '<tool_call>\\n{\"name\": \"' + call['name'] + '\", \"arguments\": ' }}"
    "{%- if call['arguments'] is string %}{{- call['arguments'] }}{%- else %}{{- call['arguments'] | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>\\n' }}"
    "{%- endfor %}"
    "{%- elif message['role'] == 'tool' %}"
    "{{- '<|tool|>\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>\\n' }}"
    "{%- else %}"
    "{{- '<|' + message['role'] + '|>\\n' + message['content'] + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- endif %}"
)


def build_tokenizer(corpus: list[str], vocab_size: int):
    """The v1 tokenizer recipe (:func:`testbed.train.build_tokenizer`) with the v2
    role token ``<|tool|>``, the tool-call tags as single tokens, the tools-aware chat
    template and a 2,048-token window.

    Args:
        corpus: training texts.
        vocab_size: target vocabulary size (tokens), special tokens included.

    Returns:
        A ``transformers.PreTrainedTokenizerFast``.
    """
    return train_v1.build_tokenizer(
        corpus, vocab_size, special_tokens=SPECIAL_TOKENS, marker_tokens=tuple(MARKER_TOKENS),
        chat_template=CHAT_TEMPLATE, model_max_length=2048,
    )


def extend_tokenizer_and_model(tokenizer, model, context_window: int):
    """Give a v1 checkpoint (or any earlier one) what v2 needs, keeping its weights.

    Adds the role token ``<|tool|>`` (special) and the tool-call tags (ordinary tokens)
    when missing (and, to a tokenizer that lacked ``<|tool|>``, :data:`PROMPT_TOKENS`),
    stores :data:`CHAT_TEMPLATE` and a ``context_window``-token window in the tokenizer, grows the embedding matrix by the added tokens (new rows at the mean of the
    old ones: ``resize_token_embeddings(mean_resizing=True)``) and sets
    ``max_position_embeddings`` (RoPE has no position weights, so the window grows freely).
    Idempotent: a v2 checkpoint comes back unchanged.

    Args:
        tokenizer: a ``PreTrainedTokenizerFast`` built by :func:`build_tokenizer` or v1's.
        model: its ``LlamaForCausalLM``.
        context_window: the new window (tokens).

    Returns:
        ``(tokenizer, model)``, the same objects, changed in place.
    """
    from tokenizers import AddedToken

    vocab = tokenizer.get_vocab()
    roles = [t for t in SPECIAL_TOKENS[3:] if t not in vocab]
    if roles:
        tokenizer.add_tokens([AddedToken(t, normalized=False, special=True) for t in roles], special_tokens=True)
    markers = [t for t in MARKER_TOKENS if t not in vocab]
    if roles:  # a tokenizer from before v2: its BPE never saw the RAG and tool prompts
        markers += [t for t in PROMPT_TOKENS if t not in vocab]
    if markers:
        tokenizer.add_tokens([AddedToken(t, normalized=False, special=False) for t in markers])
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.model_max_length = context_window
    if len(tokenizer) != model.get_input_embeddings().weight.shape[0]:
        model.resize_token_embeddings(len(tokenizer), mean_resizing=True)
    model.config.max_position_embeddings = context_window
    return tokenizer, model


def render_prompt(tokenizer, conversation: Conversation) -> str:
    """The engine's prompt: chat template (with ``tools``), generation prompt, assistant prefix."""
    kwargs: dict[str, Any] = {"tools": conversation.tools} if conversation.tools else {}
    return tokenizer.apply_chat_template(conversation.messages, tokenize=False, add_generation_prompt=True,
                                         **kwargs) + ASSISTANT_PREFIX


def draw_example(kind: str, rng: random.Random, heldout: frozenset[str], slip_rate: float,
                 short_rate: float = 0.0, novel_rate: float = 0.0, first_turn_share: float = 0.0,
                 rag_restate: bool = False, checks: str = "v2",
                 problem_options: dict[str, Any] | None = None) -> Conversation:
    """One training conversation of ``kind`` (``plain``, ``rag``, ``tool``), never a held-out question.

    ``short_rate``: share of plain and RAG problems with only 1-2 operations (the held-out
    problems have 3 or more), so short questions are in the training distribution too.
    ``novel_rate`` and ``first_turn_share`` go to :func:`~testbed.formats.tool_example`,
    ``rag_restate`` to :func:`~testbed.formats.rag_example` (``restate``), ``checks``
    to :func:`~testbed.problems_v2.write_solution`, ``problem_options``
    (``operation_weights``, ``max_value``, ``max_amount``: the lengths and numbers of the
    plain and RAG problems) to :func:`~testbed.problems_v2.generate_problem`.
    """
    if kind == "tool":
        return tool_example(rng, novel_rate, first_turn_share, checks)
    if kind == "copy":
        return copy_example(rng)
    while True:
        problem = generate_problem(rng, num_operations=rng.choice([1, 2]) if short_rate and rng.random() < short_rate else None,
                                   **(problem_options or {}))
        if problem.question not in heldout:
            break
    if kind == "plain":
        return plain_example(problem, rng, slip_rate, checks=checks)
    return rag_example(problem, rng, slip_rate, restate=rag_restate, checks=checks)


def encode_example(tokenizer, conversation: Conversation, max_length: int) -> tuple[list[int], list[int]]:
    """Token ids and loss labels (-100 on the prompt and on untrained lines)."""
    ids = tokenizer(render_prompt(tokenizer, conversation), add_special_tokens=False)["input_ids"]
    labels = [-100] * len(ids)
    last = len(conversation.target) - 1
    for i, (line, trained) in enumerate(conversation.target):
        piece = tokenizer(line + ("\n" if i < last else ""), add_special_tokens=False)["input_ids"]
        ids += piece
        labels += piece if trained else [-100] * len(piece)
    ids.append(tokenizer.eos_token_id)
    labels.append(tokenizer.eos_token_id)
    return ids[:max_length], labels[:max_length]


def collate(tokenizer, rows: list[tuple[list[int], list[int]]]):
    """Right-padded ``input_ids``, ``attention_mask`` and ``labels`` tensors."""
    import torch

    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    label_ids = torch.full((len(rows), width), -100, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (ids, label) in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        label_ids[i, : len(label)] = torch.tensor(label)
        attention[i, : len(ids)] = 1
    return input_ids, attention, label_ids


def make_batch(tokenizer, rng: random.Random, heldout: frozenset[str], batch_tokens: int, max_length: int,
               slip_rate: float, short_rate: float = 0.0, max_examples: int = 256,
               kind_weights: dict[str, float] | None = None, novel_rate: float = 0.0,
               first_turn_share: float = 0.0, rag_restate: bool = False, checks: str = "v2",
               problem_options: dict[str, Any] | None = None):
    """One batch of a drawn kind (``kind_weights``, default :data:`KIND_WEIGHTS`) holding at
    most ``batch_tokens`` padded tokens."""
    weights = kind_weights or KIND_WEIGHTS
    kind = rng.choices(list(weights), weights=list(weights.values()))[0]
    rows: list[tuple[list[int], list[int]]] = []
    width = 0
    while len(rows) < max_examples:
        row = encode_example(tokenizer, draw_example(kind, rng, heldout, slip_rate, short_rate, novel_rate,
                                                       first_turn_share, rag_restate, checks, problem_options),
                             max_length)
        new_width = max(width, len(row[0]))
        if rows and new_width * (len(rows) + 1) > batch_tokens:
            break
        rows.append(row)
        width = new_width
    return kind, collate(tokenizer, rows)


def main(argv: list[str] | None = None) -> dict:
    """Train and save the demo model; returns the training log (also written as JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=900)
    parser.add_argument("--batch-tokens", type=int, default=6144, help="padded tokens per batch")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--intermediate-size", type=int, default=640)
    parser.add_argument("--vocab-size", type=int, default=1024)
    parser.add_argument("--max-length", type=int, default=768)
    parser.add_argument("--context-window", type=int, default=2048, help="max_position_embeddings (RoPE)")
    parser.add_argument("--slip-rate", type=float, default=0.15, help="share of solutions with one wrong step")
    parser.add_argument("--checks", choices=CHECK_STYLES, default="v2",
                        help="check lines: 'v2' (', not N' after a slip), 'compare' (', was N' always, "
                             "': wrong.' and one of problems_v2.RECOVERY_WORDINGS after a slip), 'difference' "
                             "(', N - M = 0' always, slips downward), 'signed' (the same, slips both ways)")
    parser.add_argument("--short-rate", type=float, default=0.0,
                        help="share of plain and RAG problems with 1-2 operations (held-out ones have 3 or more)")
    parser.add_argument("--kind-weights", default=None,
                        help="steps per kind, e.g. 'plain=30,rag=35,tool=35' (default: %s)" % KIND_WEIGHTS)
    parser.add_argument("--operations", default=None,
                        help="operations per plain and RAG problem (and the held-out set) with their weights, "
                             "e.g. '3=1,4=2,5=3,6=4' (default: %s, v2's)" % OPERATION_WEIGHTS)
    parser.add_argument("--max-value", type=int, default=MAX_VALUE,
                        help="largest running total of plain and RAG problems (default: %(default)s, v2's)")
    parser.add_argument("--max-amount", type=int, default=MAX_AMOUNT,
                        help="largest amount added or taken away (default: %(default)s)")
    parser.add_argument("--novel-tool-rate", type=float, default=0.0,
                        help="share of tool names made up (formats.novel_name), so names are copied from the schema")
    parser.add_argument("--first-call-share", type=float, default=0.0,
                        help="share of tool examples cut at their first assistant turn (the first call)")
    parser.add_argument("--rag-restate", action="store_true",
                        help="RAG solutions open by quoting the question's facts from the context (formats.RESTATE_PREFIX)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--heldout", type=Path, default=None, help="also write the held-out set here")
    parser.add_argument("--log-every", type=int, default=20)
    parser.add_argument("--init-from", type=Path, default=None,
                        help="continue from this saved model and tokenizer (a second phase) instead of a fresh model")
    parser.add_argument("--warmup", type=float, default=0.05, help="share of the steps spent warming up the LR")
    parser.add_argument("--save-every", type=int, default=0,
                        help="also save checkpoint-STEP/ every this many steps (0: only the final model)")
    args = parser.parse_args(argv)

    import torch

    operation_weights = None
    if args.operations:
        try:
            operation_weights = {int(k): float(v) for k, v in (item.split("=") for item in args.operations.split(","))}
        except ValueError:
            parser.error(f"--operations {args.operations!r}: expected 'N=WEIGHT,...', e.g. '3=1,4=2,5=3,6=4'")
    kind_weights = None
    if args.kind_weights:
        kind_weights = {k: float(v) for k, v in (item.split("=") for item in args.kind_weights.split(","))}
        if set(kind_weights) - set(KIND_WEIGHTS):
            parser.error(f"--kind-weights {args.kind_weights!r}: kinds are {sorted(KIND_WEIGHTS)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    problem_options = {"operation_weights": operation_weights, "max_value": args.max_value,
                       "max_amount": args.max_amount}
    try:
        heldout = generate_problems(HELDOUT_SIZE, seed=HELDOUT_SEED, **problem_options)
    except ValueError as error:  # the range checks of --operations, --max-value and --max-amount
        parser.error(str(error))
    # Neither this run's held-out questions nor v2's nor v1's (regenerated: same seed and size)
    # are trained on.
    v2_heldout = generate_problems(HELDOUT_SIZE, seed=HELDOUT_SEED)
    v1_heldout = problems_v1.generate_problems(HELDOUT_SIZE, seed=HELDOUT_SEED)
    heldout_questions = frozenset(p.question for p in heldout + v2_heldout) | {p.question for p in v1_heldout}
    if args.heldout is not None:
        write_heldout(args.heldout, heldout)
    corpus_rng = random.Random(args.seed + 1)
    corpus = []
    for kind in ["plain"] * 3000 + ["rag"] * 1000 + ["tool"] * 1000:
        conversation = draw_example(kind, corpus_rng, heldout_questions, args.slip_rate)
        tools = conversation.tools
        corpus.append("\n".join(str(m.get("content") or "") for m in conversation.messages)
                      + ("\n" + json.dumps(tools) if tools else "") + "\n" + ASSISTANT_PREFIX
                      + "\n".join(line for line, _ in conversation.target))
    tokenizer, model = train_v1.tokenizer_and_model(
        args, lambda: build_tokenizer(corpus, args.vocab_size), context_window=args.context_window
    )
    tokenizer, model = extend_tokenizer_and_model(tokenizer, model, args.context_window)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    num_parameters = sum(p.numel() for p in model.parameters())
    logger.info("model: %d parameters", num_parameters)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, betas=(0.9, 0.98))
    warmup = max(1, int(args.steps * args.warmup))

    def lr_at(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, args.steps - warmup)
        return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    rng = random.Random(args.seed + 2)
    args.output_dir.mkdir(parents=True, exist_ok=True)

    model.train()
    start = time.perf_counter()
    losses: list[float] = []
    history = []
    for step in range(args.steps):
        kind, (input_ids, attention, labels) = make_batch(
            tokenizer, rng, heldout_questions, args.batch_tokens, args.max_length, args.slip_rate, args.short_rate,
            kind_weights=kind_weights, novel_rate=args.novel_tool_rate, first_turn_share=args.first_call_share,
            rag_restate=args.rag_restate, checks=args.checks, problem_options=problem_options)
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            mean_loss = sum(losses[-args.log_every :]) / len(losses[-args.log_every :])
            elapsed = time.perf_counter() - start
            history.append({"step": step + 1, "loss": round(mean_loss, 4), "seconds": round(elapsed, 1)})
            logger.info("step %d loss %.4f (%.0f s)", step + 1, mean_loss, elapsed)
        if args.save_every and (step + 1) % args.save_every == 0 and step + 1 < args.steps:
            checkpoint = args.output_dir / f"checkpoint-{step + 1}"
            model.save_pretrained(checkpoint, safe_serialization=True)
            tokenizer.save_pretrained(checkpoint)
    wall = time.perf_counter() - start

    model.eval()
    model.save_pretrained(args.output_dir, safe_serialization=True)
    tokenizer.save_pretrained(args.output_dir)
    log = {
        "steps": args.steps,
        "batch_tokens": args.batch_tokens,
        "learning_rate": args.lr,
        "slip_rate": args.slip_rate,
        "short_rate": args.short_rate,
        "operation_weights": operation_weights or OPERATION_WEIGHTS,
        "max_value": args.max_value,
        "max_amount": args.max_amount,
        "checks": args.checks,
        "kind_weights": kind_weights or KIND_WEIGHTS,
        "novel_tool_rate": args.novel_tool_rate,
        "first_call_share": args.first_call_share,
        "rag_restate": args.rag_restate,
        "seed": args.seed,
        "init_from": str(args.init_from) if args.init_from is not None else None,
        "num_parameters": num_parameters,
        "config": {
            "hidden_size": model.config.hidden_size, "layers": model.config.num_hidden_layers,
            "heads": model.config.num_attention_heads, "intermediate_size": model.config.intermediate_size,
            "vocab_size": model.config.vocab_size, "max_position_embeddings": model.config.max_position_embeddings,
        },
        "wall_seconds": round(wall, 1),
        "final_loss": history[-1]["loss"] if history else None,
        "history": history,
        "torch_threads": torch.get_num_threads(),
    }
    (args.output_dir / "training_log.json").write_text(json.dumps(log, indent=1) + "\n", encoding="utf-8")
    return log


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    main()
