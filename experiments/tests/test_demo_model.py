"""The shipped demo model (v3: four ``train_v2`` phases from the v2 weights, which ``train_v2`` made from the
v1 weights ``train`` makes; ``MODEL_CARD.md``) and the v1 training script."""

from __future__ import annotations

import json
from pathlib import Path


from mfs_core.models import demo_model_path
from experiments.testbed.problems import END_MARKER

HELDOUT = Path(demo_model_path()).parent / "heldout.json"


def test_training_script_runs_on_a_tiny_configuration(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from experiments.testbed import train

    log = train.main([
        "--output-dir", str(tmp_path / "model"), "--steps", "3", "--batch-size", "4", "--hidden-size", "16",
        "--layers", "1", "--heads", "2", "--intermediate-size", "32", "--vocab-size", "400", "--log-every", "1",
        "--heldout", str(tmp_path / "heldout.json"),
    ])
    assert log["steps"] == 3 and len(log["history"]) == 3 and log["final_loss"] > 0
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "model")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "model")
    assert sum(p.numel() for p in model.parameters()) == log["num_parameters"]
    assert len(json.loads((tmp_path / "heldout.json").read_text())) == 500
    assert json.loads((tmp_path / "model" / "training_log.json").read_text())["steps"] == 3
    _check_tokenizer(tokenizer)


def _check_tokenizer(tokenizer):
    ids = tokenizer("12 + 507 = 519", add_special_tokens=False)["input_ids"]
    pieces = [tokenizer.decode([i]) for i in ids]
    assert [p for p in pieces if p.strip().isdigit()] == list("12507519")
    assert tokenizer.convert_tokens_to_ids(END_MARKER) != tokenizer.unk_token_id
    assert END_MARKER in tokenizer.decode(tokenizer(f"x.{END_MARKER}", add_special_tokens=False)["input_ids"], skip_special_tokens=True)
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "Q?"}], tokenize=False, add_generation_prompt=True)
    assert rendered == "<s><|user|>\nQ?\n<|assistant|>\n"


def test_shipped_model_loads_and_is_small(demo_backend):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = demo_model_path()
    weights = sum(f.stat().st_size for f in path.glob("*.safetensors"))
    assert weights <= 10 * 1024 * 1024
    model = AutoModelForCausalLM.from_pretrained(path)
    assert model.config.model_type == "llama"
    _check_tokenizer(AutoTokenizer.from_pretrained(path))
    assert demo_backend.model_name == "mfs-demo"


def test_heldout_set_ships_and_is_disjoint_from_training():
    from experiments.testbed.problems_v2 import SHIPPED_PROBLEMS, generate_problems
    from experiments.testbed.train_v2 import HELDOUT_SEED, HELDOUT_SIZE

    records = json.loads(HELDOUT.read_text())
    assert len(records) == HELDOUT_SIZE
    assert records == [{"input": p.question, "target": float(p.answer)} for p in generate_problems(HELDOUT_SIZE, seed=HELDOUT_SEED, **SHIPPED_PROBLEMS)]
