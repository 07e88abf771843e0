"""Fed-PNE with real clients: a Flower ``ServerApp`` holding the ask/tell stepper's state and a
``ClientApp`` that evaluates each data owner's own objective (``pip install "fedpne-jax[flower]"``).

* :mod:`fedpne_jax.flower.server`: ``app``, the ServerApp (``fedpne_jax.flower.server:app``);
* :mod:`fedpne_jax.flower.client`: ``app``, the ClientApp (``fedpne_jax.flower.client:app``);
* :mod:`fedpne_jax.flower.wire`: the messages and the checks every reply passes;
* :mod:`fedpne_jax.flower.spec`: Flower's run config -> the algorithm's config and space;
* :mod:`fedpne_jax.flower.local`: a SuperLink and N SuperNodes on this machine (``fedpne flower local``).

Importing this package imports nothing from Flower; the modules above that need it import it.
"""
