"""Train the bundled demo model: a small Llama on arithmetic word problems.

Run ``python -m experiments.testbed.train --output-dir mfs_core/demo/model`` to rebuild the
shipped checkpoint (about an hour on 2 CPU cores with the defaults); the tests run it for a
few steps on a tiny configuration. Needs the ``[hf]`` extra (torch, transformers,
tokenizers).

What it does:

1. Builds a byte-level BPE tokenizer on generated problems. Digits are split one per token
   (a ``Digits(individual_digits=True)`` pre-tokenizer) so the model sees place value. The
   tokenizer carries a chat template: ``<|user|>\\n{question}\\n<|assistant|>\\n``.
2. Renders each training example exactly as the engine prompts the model: the chat
   template with the question as the single user message and the generation prompt, then
   the assistant prefix ``The reasoning steps are:\\n\\n``, then the solution and EOS.
   The loss covers only the solution tokens (and EOS).
3. Trains a ``LlamaForCausalLM`` with AdamW and a cosine schedule; problems are generated
   on the fly, never from the held-out set (``heldout.json``, seed 20260521).
4. Saves the model and tokenizer with ``save_pretrained`` (loadable with
   ``AutoModelForCausalLM.from_pretrained``) and a ``training_log.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from experiments.testbed.problems import ASSISTANT_PREFIX, END_MARKER, generate_problems, write_heldout

logger = logging.getLogger(__name__)

HELDOUT_SEED = 20260521
HELDOUT_SIZE = 500
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]


def build_tokenizer(
    corpus: list[str],
    vocab_size: int,
    *,
    special_tokens: list[str] = SPECIAL_TOKENS,
    marker_tokens: tuple[str, ...] = (END_MARKER,),
    chat_template: str = CHAT_TEMPLATE,
    model_max_length: int = 512,
):
    """Train a byte-level BPE tokenizer with one-digit tokens and a chat template.

    Args:
        corpus: training texts.
        vocab_size: target vocabulary size (tokens), special tokens included.
        special_tokens: ``<pad>``, ``<s>``, ``</s>`` then the role tokens (special: not
            produced by the BPE merges, dropped from decoded text).
        marker_tokens: single ordinary (non-special) tokens that stay in decoded text
            (the end marker; v2 adds the tool-call tags).
        chat_template: the Jinja chat template stored with the tokenizer.
        model_max_length: the context window recorded in the tokenizer (tokens).

    Returns:
        A ``transformers.PreTrainedTokenizerFast``.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    # The markers are ordinary (non-special) tokens: they stay in decoded text.
    tokenizer.add_tokens([AddedToken(token, normalized=False, special=False) for token in marker_tokens])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        additional_special_tokens=list(special_tokens[3:]),
        padding_side="left",
        model_max_length=model_max_length,
    )
    fast.chat_template = chat_template
    return fast


def tokenizer_and_model(args: argparse.Namespace, build: Callable[[], Any], *, context_window: int):
    """The tokenizer and Llama model a training run starts from (v1 and v2 runs alike).

    With ``args.init_from`` both are loaded from that checkpoint; otherwise ``build()``
    trains the tokenizer and a new ``LlamaForCausalLM`` is made from ``args.hidden_size``,
    ``intermediate_size``, ``layers`` and ``heads`` (tied embeddings, RoPE θ = 10,000,
    ``context_window`` positions, in tokens).
    """
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    if args.init_from is not None:
        tokenizer = AutoTokenizer.from_pretrained(args.init_from)
        return tokenizer, LlamaForCausalLM.from_pretrained(args.init_from)
    tokenizer = build()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=args.hidden_size,
        intermediate_size=args.intermediate_size,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.heads,
        max_position_embeddings=context_window,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return tokenizer, LlamaForCausalLM(config)


def render_prompt(tokenizer, question: str) -> str:
    """The engine's prompt for ``question``: chat template, generation prompt, prefix."""
    messages = [{"role": "user", "content": question}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + ASSISTANT_PREFIX


def encode_batch(tokenizer, problems, max_length: int):
    """Token ids and loss labels (-100 on the prompt) for a batch, right-padded."""
    import torch

    rows, labels = [], []
    for problem in problems:
        prompt_ids = tokenizer(render_prompt(tokenizer, problem.question), add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer(problem.solution, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        ids = (prompt_ids + answer_ids)[:max_length]
        label = ([-100] * len(prompt_ids) + answer_ids)[:max_length]
        rows.append(ids)
        labels.append(label)
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    label_ids = torch.full((len(rows), width), -100, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (ids, label) in enumerate(zip(rows, labels)):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        label_ids[i, : len(label)] = torch.tensor(label)
        attention[i, : len(ids)] = 1
    return input_ids, attention, label_ids


def main(argv: list[str] | None = None) -> dict:
    """Train and save the demo model; returns the training log (also written as JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--hidden-size", type=int, default=192)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=6)
    parser.add_argument("--intermediate-size", type=int, default=512)
    parser.add_argument("--vocab-size", type=int, default=768)
    parser.add_argument("--max-length", type=int, default=192)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--heldout", type=Path, default=None, help="also write the held-out set here")
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument(
        "--init-from", type=Path, default=None,
        help="continue from this saved model and tokenizer instead of a fresh model (a second phase)",
    )
    parser.add_argument(
        "--save-every", type=int, default=0,
        help="also save checkpoint-STEP/ every this many steps (0: only the final model)",
    )
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    heldout = generate_problems(HELDOUT_SIZE, seed=HELDOUT_SEED)
    heldout_questions = frozenset(p.question for p in heldout)
    corpus_problems = generate_problems(5000, seed=args.seed + 1, exclude=heldout_questions)
    corpus = [p.question + "\n" + ASSISTANT_PREFIX + p.solution for p in corpus_problems]
    tokenizer, model = tokenizer_and_model(args, lambda: build_tokenizer(corpus, args.vocab_size), context_window=512)
    num_parameters = sum(p.numel() for p in model.parameters())
    logger.info("model: %d parameters", num_parameters)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, betas=(0.9, 0.98))
    warmup = max(1, args.steps // 20)

    def lr_at(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, args.steps - warmup)
        return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    rng = random.Random(args.seed + 2)
    from experiments.testbed.problems import generate_problem

    model.train()
    start = time.perf_counter()
    losses: list[float] = []
    history = []
    for step in range(args.steps):
        batch = []
        while len(batch) < args.batch_size:
            problem = generate_problem(rng)
            if problem.question not in heldout_questions:
                batch.append(problem)
        input_ids, attention, labels = encode_batch(tokenizer, batch, args.max_length)
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

    args.output_dir.mkdir(parents=True, exist_ok=True)
    model.eval()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(args.output_dir, safe_serialization=True)
    tokenizer.save_pretrained(args.output_dir)
    if args.heldout is not None:
        write_heldout(args.heldout, heldout)
    log = {
        "steps": args.steps,
        "batch_size": args.batch_size,
        "learning_rate": args.lr,
        "num_parameters": num_parameters,
        "config": {
            "hidden_size": model.config.hidden_size, "layers": model.config.num_hidden_layers,
            "heads": model.config.num_attention_heads, "intermediate_size": model.config.intermediate_size,
            "vocab_size": model.config.vocab_size,
        },
        "init_from": str(args.init_from) if args.init_from is not None else None,
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
