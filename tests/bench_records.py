"""Hand-made bench records (``records.jsonl`` lines) shared by the tests of the curve, the report and the results
page: four samples per question for self-consistency, and a search's rows."""

from __future__ import annotations

__all__ = ["RECORDS", "method_record", "sc_record"]


def sc_record(index, predictions, target, tokens=400.0, qualities=None):
    """A self-consistency record of one question: its samples' answers and mean log-probs per token."""
    return {
        "method": "sc", "decoder": "sc", "index": index, "id": f"q{index}", "target": target, "error": None,
        "correct": False, "output_tokens": tokens, "prompt_tokens": 10, "flops": 6 * tokens * 1000,
        "elapsed_seconds": 1.0, "generate_seconds": 1.0, "sc_k": len(predictions),
        "sample_predictions": predictions, "sample_qualities": qualities or [-0.1] * len(predictions),
    }


def method_record(method, index, correct, tokens):
    """A search's record of one question: right or not, and its output tokens."""
    return {"method": method, "decoder": "mfs", "index": index, "id": f"q{index}", "error": None, "correct": correct,
            "output_tokens": tokens, "prompt_tokens": 10, "flops": 6 * tokens * 1000, "elapsed_seconds": 1.0,
            "generate_seconds": 1.0, "steps": 2, "stop_reason": "converged"}


# Four samples per question (100 output tokens each). q0: right from k = 1; q1: the first sample
# is wrong, the majority of 4 is right; q2: two right and two wrong, the tie goes to the higher F.
RECORDS = [
    sc_record(0, ["7", "7", "8", "7"], 7.0),
    sc_record(1, ["5", "6", "6", "6"], 6.0),
    sc_record(2, ["3", "4", "3", "4"], 4.0, qualities=[-0.5, -0.1, -0.5, -0.1]),
    method_record("mfs", 0, True, 150.0), method_record("mfs", 1, True, 250.0), method_record("mfs", 2, False, 200.0),
]
