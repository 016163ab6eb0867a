"""A scripted 'model' whose paths take three steps and then answer 7: the streaming and trace-view tests' model.

Unlike :func:`tests.scripted.synthetic_model` (whose questions take different numbers of steps),
every path here writes ``step k`` lines until it has three, then the boxed 7, so a decode shows
several steps of search before its answer.
"""

from __future__ import annotations

from tests.scripted import END, ScriptedBackend, _unit, continuation

__all__ = ["synthetic_model"]


def synthetic_model() -> ScriptedBackend:
    """A scripted 'model' whose paths take three steps (``step k``) and then answer."""

    def script(request):
        conts = []
        for i in range(request.n):
            lp = -0.05 - _unit(request.prompt, request.seed, i)
            if request.stop == (END,):
                conts.append(continuation("The answer is: \\boxed{7}.", logprobs=[lp] * 3, stop_reason=END))
            elif request.prompt.count("step ") >= 3:
                conts.append(continuation("The answer is: \\boxed{7}.", logprobs=[lp] * 2, stop_reason=END))
            else:
                conts.append(continuation(f"step {int(-lp * 3)}", logprobs=[lp] * 2, stop_reason="\n"))
        return conts

    return ScriptedBackend(script)
