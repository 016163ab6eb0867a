"""The demo model's test bed: how ``mfs_core/demo/`` was made and measured (not installed).

Run from the repository's root (``python -m experiments.testbed.evaluate ...``); the commands and the
numbers they gave are in ``mfs_core/demo/MODEL_CARD.md``.

* ``problems.py``, ``problems_v2.py``: the arithmetic word problems and their solutions (v1;
  v2 and v3 with check lines and slips);
* ``formats.py``: the RAG, tool-call and copy conversations of the v2/v3 training mix;
* ``train.py``, ``train_v2.py``: the tokenizer and the training runs (v1; v2 and v3);
* ``evaluate.py``: decoding statistics on the held-out set (greedy, self-consistency, AUROC
  of the foresight quality F, own slips caught), with 95% intervals;
* ``evaluate_formats.py``: greedy RAG answers and tool calls on generated conversations;
* ``slip_probe.py``: does the model's check line flag an injected slip?
* ``foresight_separation.py``: AUROC of candidate foresight qualities (mean/sum log-prob,
  DeepConf's lowest group and tail confidence) for right vs wrong sampled answers;
* ``gsm8k_bed.py``: a real model's GSM8K test bed on the tuning questions 0-199 (greedy with and
  without the assistant prefix, SC curves at two temperatures, first-step diversity, AUROC of F
  and of DeepConf's lowest group confidence);

The library never imports this package; ``tests/`` does.
"""
