"""Prompts of the benchmark sets, as the φ-Decoding release builds them.

Source: ``get_system_prompt`` and ``_prepare_chat_template`` of ``phi_decoding.py`` in
``xufangzhi/phi-Decoding`` (the MFS release's ``martingale.py`` builds GSM8K's the same way):
a system message with the task instruction and the few-shot examples
(:mod:`mfs_core.bench.fewshot`), the question as the user message, the model's chat template
with its generation prompt, then the assistant prefix ``The reasoning steps are:\\n\\n``.

One difference from the releases, on purpose: they right-strip the rendered template
(``.rstrip(eos_token).rstrip()``), which eats the newline a template puts after the assistant
role (ChatML's ``<|im_start|>assistant\\n``, Llama 3's ``<|end_header_id|>\\n\\n``) and glues
the prefix to the role name; a pretrained model then sees a turn it was never trained on
(SmolLM2-135M-Instruct on ARC-C: 4/40 greedy answers right with the strip, 6/40 without, and
12 versus 4 unanswered). The template's text is kept as rendered.

The demo set (``kind="demo"``) uses the plain chat format the demo model was trained on:
the question as the only user message, no system prompt, nothing stripped
(:func:`mfs_core.prompts.render_question`).
"""

from __future__ import annotations

from mfs_core.backends.base import Backend
from mfs_core.bench.datasets import Example
from mfs_core.bench.fewshot import GSM_COT_8_SHOT, LOGIC_MRC_COT_4_SHOT, MATH_COT_4_SHOT
from mfs_core.prompts import assistant_prefix, render_question
from mfs_core.settings import MFSSettings

__all__ = ["SYSTEM_PROMPTS", "render_example", "system_prompt"]

_STEP_BY_STEP = "Please solve the following problem step by step.\n"
_BOXED = (
    "When you reach the answer, please include the answer in the box format and finish the reasoning with "
    "<end_of_reasoning>.\nI will give you some examples for reference.\n"
)
_FOUR_OPTIONS = (
    "You will be presented with a passage and a question about that passage. There are four options to be chosen "
    "from, you need to choose the only correct option to answer that question."
)
_LETTER_RULE = (
    " If the first option is right, you generate the answer 'A', if the second option is right, you generate the "
    "answer 'B', if the third option is right, you generate the answer 'C', if the fourth option is right, you "
    "generate the answer 'D'. Read the question and options thoroughly and select the correct answer from the four "
    "answer labels. Please finish the reasoning with <end_of_reasoning>.\nI will give you some examples for "
    "reference.\n"
)
_OPTION_AFTER = "\nPlease output the predicted option after 'The answer is: ' at the end of the response."

SYSTEM_PROMPTS: dict[str, str] = {
    "gsm": f"{_STEP_BY_STEP}{_BOXED}{GSM_COT_8_SHOT}",
    "math": f"{_STEP_BY_STEP}{_BOXED}{MATH_COT_4_SHOT}",
    "reclor": f"{_STEP_BY_STEP}{_FOUR_OPTIONS}{_LETTER_RULE}{LOGIC_MRC_COT_4_SHOT}\n",
    "logiqa": f"{_STEP_BY_STEP}{_FOUR_OPTIONS}{_LETTER_RULE}{LOGIC_MRC_COT_4_SHOT}\n",
    "gpqa": f"{_STEP_BY_STEP}{_FOUR_OPTIONS}{_OPTION_AFTER}",
    "arc": f"{_STEP_BY_STEP}{_FOUR_OPTIONS}{_OPTION_AFTER}",
}
"""The release's system prompt of each paper set (``get_system_prompt``), keyed by kind."""


def system_prompt(kind: str) -> str | None:
    """The system prompt of a set of ``kind``; None for ``"demo"``.

    Raises:
        ValueError: unknown kind.
    """
    if kind == "demo":
        return None
    try:
        return SYSTEM_PROMPTS[kind]
    except KeyError:
        msg = f"no prompt for dataset kind {kind!r}; known: {sorted(SYSTEM_PROMPTS)} and 'demo'"
        raise ValueError(msg) from None


def render_example(example: Example, backend: Backend, settings: MFSSettings) -> str:
    """The model prompt of one benchmark question.

    Args:
        example: the question (its ``kind`` picks the system prompt).
        backend: supplies the chat template.
        settings: supplies ``assistant_prefix`` (resolved for the model by
            :func:`mfs_core.prompts.assistant_prefix`) and, for ``"demo"``, ``prompt_format``.

    Returns:
        Chat template of ``[system, user]`` with the generation prompt (its whitespace kept),
        plus the assistant prefix. A template that rejects the system role gets the system text
        in front of the user message (as the release does for Mistral); a model without a
        template gets ``system + "\\n\\n" + user + "\\n" + prefix``.
    """
    if example.kind == "demo":
        return render_question(example.question, backend, settings)
    system = system_prompt(example.kind)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": example.question}]
    try:
        rendered = backend.apply_chat_template(messages)
    except Exception:  # noqa: BLE001 - jinja raises its own TemplateError for unsupported roles
        merged = [{"role": "user", "content": f"{system}\n{example.question}"}]
        rendered = backend.apply_chat_template(merged)
    if rendered is None:
        return f"{system}\n\n{example.question}\n{assistant_prefix(settings, backend.model_name)}"
    return rendered + assistant_prefix(settings, backend.model_name)
