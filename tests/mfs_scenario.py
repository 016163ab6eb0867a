"""The hand-computed MFS scenario: its scripted steps and rollouts, and the scripted model that answers them.

Raw prompt "Q:", M = 2, N = 2, λ1 = 0.4, two steps (the numbers are worked out in the docstring of
tests/unit/decoders/test_mfs_decoder.py). ``STEPS`` maps each prompt a step request comes from to its
candidate steps and their log-probs; ``ROLLOUTS`` maps each prompt a rollout starts from to its
completion and log-prob per token: F(a) = -0.2, F(b) = -0.4, F(a2) = -0.1, F(b2) = -0.35.
:func:`scripted_model` answers those requests (``STEP_STOP``: a step; ``END``: a rollout).
"""

from __future__ import annotations

from tests.scripted import ScriptedBackend, continuation

__all__ = ["END", "ROLLOUTS", "STEPS", "STEP_STOP", "scripted_model"]

END = "<end_of_reasoning>"
STEP_STOP = ("\n", END)

STEPS = {
    "Q:": [("a", -0.1), ("b", -0.5), ("c", -0.9), ("d", -1.3)],
    "Q:a\n": [("a2", -0.2), ("a3", -0.6)],
    "Q:b\n": [("b2", -0.3), ("b3", -0.7)],
}
ROLLOUTS = {
    "Q:a\n": ("The answer is: \\boxed{1}.", -0.2),
    "Q:b\n": ("The answer is: \\boxed{2}.", -0.4),
    "Q:a\na2\n": ("The answer is: \\boxed{1}.", -0.1),
    "Q:b\nb2\n": ("The answer is: \\boxed{2}.", -0.35),
}


def scripted_model(steps=STEPS, rollouts=ROLLOUTS):
    def script(request):
        if request.stop == STEP_STOP:
            options = steps[request.prompt]
            assert request.n == len(options), (request.prompt, request.n)
            return [continuation(text, logprobs=[lp, lp], stop_reason="\n") for text, lp in options]
        assert request.stop == (END,)
        text, lp = rollouts[request.prompt]
        return [continuation(text, logprobs=[lp] * 4, stop_reason=END)] * request.n

    return ScriptedBackend(script, num_parameters=1000)
