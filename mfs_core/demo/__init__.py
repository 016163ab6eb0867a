"""The bundled demo model, ``model="mfs-demo"`` (the default): data only, loaded at run time.

* ``model/``: the weights, tokenizer and chat template (found by
  :func:`mfs_core.models.demo_model_path`);
* ``heldout.json``: its held-out problems (``mfs bench --dataset demo``,
  :func:`mfs_core.bench.datasets.demo_heldout_path`);
* ``MODEL_CARD.md``: what it was trained on, how, and what it can and cannot do.

The generators, training, evaluation and probe scripts that made and measured it are not
part of the installed package: they are in the repository's ``testbed/`` folder.
"""
