"""Four word problems (answers 7, 57, 84 and 7) that the tests decode with the bundled demo model, on CPU and on CUDA.

The first two are simple two-step word problems; the last two are questions 0 and 6 of the first
demo model's held-out set.
"""

from __future__ import annotations

__all__ = ["QUESTIONS"]

QUESTIONS = [
    "Tom has 3 apples. Then Tom buys 4 more apples. How many apples does Tom have now?",
    "Grace has 7 bags with 9 cards in each bag. Sadly, 6 cards break. How many cards are there now?",
    # Questions 0 and 6 of the first demo model's held-out set.
    (
        "Zoe starts with 32 dollars. After that, Zoe picks up another 10 dollars. Zoe multiplies the dollars by 2. "
        "How many dollars are left?"
    ),
    (
        "Oscar counts 27 dollars in the wallet. Then Oscar gives away 23 dollars. Someone puts 22 more dollars in the "
        "wallet. 19 dollars are lost. What is the final number of dollars?"
    ),
]
