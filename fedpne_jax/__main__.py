from fedpne_jax.cli import entry

entry()
