"""An abandoned decode stops generating within one backend call: the lockstep
scheduler puts the decode's stop event on its requests and the transformers backend ends their
rows between two tokens, while the other requests of the same call run on. The demo model on CPU.
"""

from __future__ import annotations

import threading

from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import GenerationRequest

QUESTION = "Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?"


def _counting_forwards(backend, monkeypatch, on_forward):
    """Wrap the model's forward: ``on_forward(count)`` after each pass (prefill and token steps)."""
    model = backend.model
    original = model.forward
    calls = [0]

    def forward(*args, **kwargs):
        out = original(*args, **kwargs)
        calls[0] += 1
        on_forward(calls[0])
        return out

    monkeypatch.setattr(model, "forward", forward)
    return calls


def test_a_cancelled_request_ends_mid_call_and_the_others_run_on(demo_backend, monkeypatch) -> None:
    prompt = MFSEngine(demo_backend, MFSSettings()).render(QUESTION)
    cancel = threading.Event()
    _counting_forwards(demo_backend, monkeypatch, lambda count: count == 4 and cancel.set())
    kept = GenerationRequest(prompt=prompt, n=2, max_tokens=40, temperature=1.0, seed=1)
    cancelled = GenerationRequest(prompt=prompt, n=2, max_tokens=40, temperature=1.0, seed=2, cancel=cancel)
    kept_out, cancelled_out = demo_backend.generate([kept, cancelled])
    # set after the 4th forward pass (a prefill, then token steps): the rows end before their next token
    assert [c.finish_reason for c in cancelled_out] == ["abort", "abort"]
    assert all(1 <= len(c.token_ids) <= 4 for c in cancelled_out)
    assert all(c.finish_reason in ("eos", "length") for c in kept_out)
    assert all(len(c.token_ids) > 4 for c in kept_out)
    # the other request's samples are those it draws alone (its own seeded generator)
    alone = demo_backend.generate([kept])[0]
    assert [c.token_ids for c in kept_out] == [c.token_ids for c in alone]


def test_a_request_cancelled_before_its_chunk_is_not_even_prefilled(demo_backend) -> None:
    prompt = MFSEngine(demo_backend, MFSSettings()).render(QUESTION)
    cancel = threading.Event()
    cancel.set()
    before = demo_backend.prefill_stats.prefilled_tokens
    [out] = demo_backend.generate([GenerationRequest(prompt=prompt, n=3, max_tokens=40, cancel=cancel)])
    assert [(c.finish_reason, c.token_ids) for c in out] == [("abort", ())] * 3
    assert demo_backend.prefill_stats.prefilled_tokens == before


def test_abandoning_a_lockstep_decode_ends_its_round_within_a_token_step(demo_backend, monkeypatch) -> None:
    settings = MFSSettings(step_beam_size=4, num_rollouts=4, max_steps=8, batch_size=demo_backend.batch_size)
    engine = MFSEngine(demo_backend, settings)
    holder: dict = {}
    generated = []  # per generate call: (requests, continuations)
    original = demo_backend.generate

    def generate(requests):
        out = original(requests)
        generated.append((requests, out))
        return out

    monkeypatch.setattr(demo_backend, "generate", generate)
    # abandon the decode during its first round, after its 3rd forward pass
    _counting_forwards(demo_backend, monkeypatch, lambda count: count == 3 and holder["future"].abandon("test"))
    holder["future"] = engine.submit_prompts([engine.render(QUESTION)])[0]
    try:
        holder["future"].result(timeout=120)
    except Exception as exc:  # noqa: BLE001 - the abandoned decode's CancelledError
        holder["error"] = exc
    assert type(holder["error"]).__name__ == "CancelledError"
    requests, out = generated[0]
    assert all(request.cancel is holder["future"].stopped for request in requests)
    assert {c.finish_reason for continuations in out for c in continuations} == {"abort"}
    assert max(len(c.token_ids) for continuations in out for c in continuations) <= 3
    assert len(generated) == 1  # no round after the abandon
