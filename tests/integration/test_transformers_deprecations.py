"""The transformers backend's own calls raise no deprecation warning.

transformers 5.2x deprecates the ``past_key_values`` keyword and output attribute (for
``cache``, removed in 5.40) with a ``FutureWarning`` and a logged warning; the backend passes
and reads the cache the way the installed version documents. Every warning and every
transformers log record at WARNING or above during a decode on the demo model fails the test.
"""

from __future__ import annotations

import logging
import warnings

from mfs_core import MFSEngine, MFSSettings
from mfs_core.backends.hf_prefill import cache_argument


def test_a_decode_emits_no_deprecation(demo_backend, caplog):
    settings = MFSSettings(device="cpu", step_beam_size=2, num_rollouts=2, max_steps=2, max_answer_tokens=64, seed=1)
    caplog.set_level(logging.WARNING, logger="transformers")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = MFSEngine(demo_backend, settings).decode(["Tom has 3 apples. He buys 4 more. How many apples?"])[0]
    assert result.output_tokens > 0
    deprecations = [w for w in caught if issubclass(w.category, (DeprecationWarning, FutureWarning, PendingDeprecationWarning))]
    assert deprecations == [], [str(w.message) for w in deprecations]
    assert [r.getMessage() for r in caplog.records if "deprecat" in r.getMessage().lower()] == []
    assert cache_argument(demo_backend.model) in ("cache", "past_key_values")
